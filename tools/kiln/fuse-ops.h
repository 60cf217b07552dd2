/* SPDX-License-Identifier: MIT */
/*
 * The FUSE front end: libfuse3 low-level request handlers serving one
 * read-only EROFS image, and the state they share.
 */
#ifndef KILN_FUSE_OPS_H
#define KILN_FUSE_OPS_H

#define FUSE_USE_VERSION 312

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <fuse_lowlevel.h>
#include <kiln/image.h>

/*
 * Inode numbers. FUSE reserves 1 (FUSE_ROOT_ID) for the root and 0 for
 * "none", while EROFS nids start at 0 and the root has an arbitrary nid.
 * So the root is 1 and every other inode is its nid + 2: a bijection that
 * never yields 0 or 1. st_ino and d_ino report the same number, so hard
 * links share it as they share a nid.
 */
#define KILN_FUSE_INO_BIAS 2

/* Largest read the kernel sends us (max_pages x 4 KiB); buffers start here. */
#define KILN_FUSE_MAX_IO (1024u * 1024u)
/* ... when raw data is spliced: a reply must fit one 1 MiB pipe. */
#define KILN_FUSE_SPLICE_IO (512u * 1024u)

/* Attribute, entry and negative-entry validity: the image never changes. */
#define KILN_FUSE_TIMEOUT 86400.0

/* Open files kept between reads, by nid (the kernel need not open them). */
#define KILN_FUSE_IDLE_FILES 32

/* Default readahead window of the mount, KiB: one request of max_pages. */
#define KILN_FUSE_READAHEAD_KB 1024u

/*
 * Page cache stores (fuse-store.c): a read of at most STORE_READ bytes of
 * a compressed file decodes its whole extent (at most STORE_MAX bytes)
 * and hands the kernel the pages it did not ask for. At most STORE_SLOTS
 * extents are decoded or on their way at once, in buffers of STORE_BUF
 * bytes, or more for a longer extent (classic-layout pclusters of 128
 * KiB of C source decode to 300 KiB ... 3 MiB), all of them together at
 * most STORE_BUDGET bytes.
 */
#define KILN_FUSE_STORE_READ (128u * 1024u)
#define KILN_FUSE_STORE_MAX (16u * 1024u * 1024u)
#define KILN_FUSE_STORE_BUF (1024u * 1024u)
#define KILN_FUSE_STORE_BUDGET (32u * 1024u * 1024u)
#define KILN_FUSE_STORE_SLOTS 16

struct kiln_fuse_store;

struct kiln_fuse_idle {
	kiln_nid_t nid;
	struct kiln_file *file;		/* NULL: free slot */
	uint64_t used;			/* files_clock at the last return */
};

struct kiln_fuse_fs {
	struct kiln_image *img;
	kiln_nid_t root_nid;
	const char *image_name;	/* for log lines */
	bool debug;		/* also pass the library's own log lines on */
	bool remote;		/* a URL: the library's errors name network causes */
	atomic_bool to_syslog;	/* set once the daemon has left the terminal */
	atomic_bool serving;	/* the image is open and mounted */
	atomic_uint errors_logged;
	pthread_key_t buf_key;	/* per-thread struct kiln_fuse_buf */
	int image_fd;		/* the image, for splicing raw data; -1: none */
	bool splice;		/* send raw data with splice(2) */
	const char *mnt_path;	/* absolute mount point, to find the mount */
	unsigned int readahead_kb;	/* 0: keep the kernel's window */
	atomic_bool no_open;	/* the kernel reads without FUSE_OPEN */
	atomic_bool no_opendir;	/* ... and lists without FUSE_OPENDIR */
	char mnt_dev[32];	/* "major:minor" of the mount, "" if unknown */
	struct kiln_fuse_store *store;	/* NULL: not started */
	atomic_ullong reads;		/* read requests */
	atomic_ullong store_extents;	/* extents decoded whole for a read */
	atomic_ullong store_bytes;	/* bytes the kernel took */
	atomic_ullong store_busy;	/* reads with every slot in flight */
	atomic_ullong store_failed;	/* stores the kernel refused */
	pthread_mutex_t files_lock;
	uint64_t files_clock;
	struct kiln_fuse_idle idle[KILN_FUSE_IDLE_FILES];
};

/*
 * Prepare @fs for @image_name (the image is attached later with
 * kiln_fuse_fs_attach()). Returns 0 or a negative errno.
 */
int kiln_fuse_fs_init(struct kiln_fuse_fs *fs, const char *image_name,
		      bool debug);
void kiln_fuse_fs_attach(struct kiln_fuse_fs *fs, struct kiln_image *img);
/* Close the files kept open on the image; before kiln_image_close(). */
void kiln_fuse_fs_detach(struct kiln_fuse_fs *fs);
/* Release what init allocated; the image stays the caller's. */
void kiln_fuse_fs_release(struct kiln_fuse_fs *fs);

/* A buffer of at least @len bytes owned by the calling thread, or NULL. */
char *kiln_fuse_thread_buf(struct kiln_fuse_fs *fs, size_t len);

/*
 * Page cache stores: start the store thread for session @se (0 or a
 * negative errno), stop it once the request loop has ended.
 */
int kiln_fuse_store_start(struct kiln_fuse_fs *fs, struct fuse_session *se);
void kiln_fuse_store_stop(struct kiln_fuse_fs *fs);
/*
 * Answer read @req of @size bytes at @off of @file (inode @ino) from the
 * whole extent holding @off, then queue the extent's other pages for the
 * kernel. Returns 1 when it replied, 0 when the read must be served the
 * usual way (not compressed, no free slot, any error). Never blocks on
 * the kernel's page cache.
 */
int kiln_fuse_store_read(fuse_req_t req, struct kiln_fuse_fs *fs,
			 struct kiln_file *file, fuse_ino_t ino, size_t size,
			 uint64_t off);

/* One line with the read and store counters (SIGUSR1, and -d at exit). */
void kiln_fuse_log_stats(struct kiln_fuse_fs *fs);

/* Library log callback for struct kiln_image_opts (ctx: the kiln_fuse_fs). */
void kiln_fuse_lib_log(void *ctx, enum kiln_log_level level, const char *msg);

/* One line to stderr, or to syslog once the daemon is detached. */
void kiln_fuse_log(struct kiln_fuse_fs *fs, int priority, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The request handlers; userdata is the struct kiln_fuse_fs. */
extern const struct fuse_lowlevel_ops kiln_fuse_ops;

/*
 * trusted.* names, hidden as the kernel hides them (fuse-xattr.c): only a
 * caller with CAP_SYS_ADMIN lists or reads them; others get ENODATA.
 */
bool kiln_fuse_xattr_is_trusted(const char *name);
bool kiln_fuse_caller_may_see_trusted(fuse_req_t req);
/* Drop trusted.* names from the NUL-separated @list; the new length. */
size_t kiln_fuse_xattr_hide_trusted(char *list, size_t len);

#endif
