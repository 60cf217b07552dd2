/* SPDX-License-Identifier: MIT */
/*
 * Reading EROFS images: open, look paths up, list directories, stat,
 * readlink, xattrs and pread of file data.
 *
 * Every image is treated as hostile: a corrupt structure yields
 * -KILN_ECORRUPT (and a log line naming the object), never a crash.
 *
 * Threads: one struct kiln_image may be used by many threads at once;
 * a struct kiln_file belongs to one thread at a time.
 */
#ifndef KILN_IMAGE_H
#define KILN_IMAGE_H

#include <kiln/kiln.h>
#include <kiln/remote.h>
#include <kiln/verity.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kiln_image;
struct kiln_file;

enum kiln_cache_mode {
	KILN_CACHE_DEFAULT = 0,	/* bounded decompressed-pcluster cache */
	KILN_CACHE_NONE = 1,	/* no lookup, no insertion */
};

enum kiln_image_flags {
	KILN_IMAGE_FORCE_COPY = 1u << 0, /* decode to scratch, then copy */
};

struct kiln_image_opts {
	size_t struct_size;	/* sizeof(struct kiln_image_opts) */
	kiln_log_fn log;	/* NULL: messages are dropped */
	void *log_ctx;
	enum kiln_cache_mode cache;
	size_t cache_size;	/* bytes; 0 = default */
	unsigned int flags;	/* enum kiln_image_flags */
	/*
	 * Extra devices (INCOMPAT_DEVICE_TABLE), in device-table order:
	 * @nr_devices paths, or, when @devices is NULL, @nr_devices open
	 * descriptors (the caller's, open until kiln_image_close()). Either
	 * none or exactly as many as the image's table lists; each is
	 * checked against its slot (size, and the UUID when the tag names
	 * an EROFS image), and a wrong one fails the open with -EINVAL (one
	 * that cannot be opened, with open(2)'s errno), logged.
	 * Without them, data on an extra device reads as -ENODEV ("needs
	 * device N"), unless the image itself holds that device's blocks
	 * at its unified address (a flattened image).
	 */
	const char *const *devices;
	const int *device_fds;
	unsigned int nr_devices;
	/*
	 * dm-verity (docs/verity.md): NULL, or the trusted root hash
	 * (KILN_VERITY_DIGEST_SIZE bytes, copied at open). Then every block
	 * is checked against the tree before the reader uses it; one that
	 * fails reads as corrupt (-KILN_ECORRUPT, which kiln mount returns
	 * as EIO) and the image's size is the tree's data blocks. The tree
	 * is found through veritysetup's superblock at @verity_hash_offset
	 * (0: right after the image's blocks, as kiln build writes it).
	 * @verity_salt (NULL: the superblock's) overrides the superblock's
	 * salt; with it, a tree without a superblock is read at the hash
	 * offset over the blocks before it.
	 */
	const uint8_t *verity_root;
	const uint8_t *verity_salt;
	size_t verity_salt_len;
	uint64_t verity_hash_offset;	/* bytes */
	/*
	 * For an http:// or https:// @path of kiln_image_open(): how to
	 * reach it and where its fetched bytes go (NULL: the defaults).
	 * Read errors of a remote image are -EIO, with the cause logged.
	 */
	const struct kiln_remote_opts *remote;
};

/*
 * Open the image at @path (or read it from @fd, which stays the caller's and
 * must stay open until kiln_image_close()). Validates the superblock and the
 * root inode. @opts may be NULL. Returns 0 and sets *@out, or a negative
 * errno: -KILN_ECORRUPT for a bad superblock, -EOPNOTSUPP for features kiln
 * does not know.
 */
KILN_API int kiln_image_open(struct kiln_image **out, const char *path,
			     const struct kiln_image_opts *opts);
KILN_API int kiln_image_open_fd(struct kiln_image **out, int fd,
				const struct kiln_image_opts *opts);
/*
 * The dm-verity tree @img was opened with: 0 and @info filled (its
 * root, salt, offset and sizes), or -ENOENT when it was opened without.
 */
KILN_API int kiln_image_verity_info(const struct kiln_image *img,
				    struct kiln_verity_info *info);

/*
 * Find the dm-verity tree of @img, opened without one, where
 * kiln_image_open() would with @opts' verity fields (hash offset, salt;
 * @opts may be NULL), and fill @info from its superblock, with as root
 * the hash its top level hashes to: untrusted, to compare with a root
 * hash from a trusted source. For an image opened with verity, as
 * kiln_image_verity_info(). 0, -ENOENT or -KILN_ECORRUPT when no tree
 * is there (logged), -EOPNOTSUPP for a tree kiln cannot read.
 */
KILN_API int kiln_image_verity_probe(struct kiln_image *img,
				     const struct kiln_image_opts *opts,
				     struct kiln_verity_info *info);

/* A block kiln_image_verity_check() found bad. */
struct kiln_verity_bad {
	uint64_t blk;		/* block of the image file */
	int level;		/* -1: a data block; else its tree level */
	unsigned int file_data;	/* 1: a read of some file's data failed on it */
};

typedef int (*kiln_verity_bad_fn)(void *ctx, const struct kiln_verity_bad *b);

/*
 * Check every tree block (top level first) and every data block of an
 * image opened with verity, calling @fn (may be NULL) for each bad one:
 * a data block is bad when its hash differs or a tree block above it is.
 * Sets *@nr_bad (may be NULL). Returns 0 when all are good,
 * -KILN_ECORRUPT when some are not, -ENOENT without verity, -ECANCELED
 * when @fn returned non-zero, or another negative errno. Blocks already
 * checked by reads are not hashed again.
 */
KILN_API int kiln_image_verity_check(struct kiln_image *img,
				     kiln_verity_bad_fn fn, void *ctx,
				     uint64_t *nr_bad);

/* Release the image; NULL is a no-op. No kiln_file may still be open. */
KILN_API void kiln_image_close(struct kiln_image *img);

/*
 * Give up on the network for good: a remote image's requests under way
 * end within about a second, retries and new fetches stop, and every read
 * that still needs bytes fails with -ECANCELED (cached and fetched bytes
 * are still served). For a clean stop while a server hangs: a mount's
 * SIGTERM. Only an atomic store, so it may be called from a signal
 * handler or any thread; a local image ignores it.
 */
KILN_API void kiln_image_cancel(struct kiln_image *img);

struct kiln_image_info {
	uint32_t block_size;
	uint64_t blocks;		/* from the superblock */
	uint64_t image_size;		/* bytes of the file/device */
	uint64_t inodes;
	kiln_nid_t root_nid;
	kiln_nid_t packed_nid;		/* 0 = none */
	uint32_t feature_compat;
	uint32_t feature_incompat;
	uint16_t compr_algs;		/* bitmap of on-disk algorithm ids */
	uint8_t uuid[16];
	char volume_name[17];		/* NUL-terminated */
	int64_t epoch;			/* seconds */
	int64_t build_time;		/* seconds since the Unix epoch */
	uint32_t fixed_nsec;
	uint32_t sb_checksum;
	uint32_t meta_blkaddr;
	uint32_t xattr_blkaddr;
	kiln_nid_t metabox_nid;		/* with INCOMPAT_METABOX (0x100) only */
	uint16_t extra_devices;		/* slots of the device table */
};

KILN_API void kiln_image_get_info(const struct kiln_image *img,
				  struct kiln_image_info *info);
KILN_API kiln_nid_t kiln_image_root(const struct kiln_image *img);

/* One slot of the device table, and the device given for it. */
struct kiln_device_info {
	const char *tag;	/* NUL-terminated, "" if none; valid until close */
	uint64_t blocks;	/* device size in blocks, from the slot */
	uint64_t uniaddr;	/* first block in the unified address space */
	uint64_t size;		/* bytes of the device given, 0 if none */
	const char *path;	/* as given (NULL: a descriptor, or none) */
	int present;		/* 1: given at open; 0: not given */
};

/*
 * Describe extra device @n (1 .. info.extra_devices). Returns 0, or
 * -EINVAL when the image has no such device.
 */
KILN_API int kiln_image_device(const struct kiln_image *img, unsigned int n,
			       struct kiln_device_info *info);

struct kiln_stat {
	kiln_nid_t nid;
	uint32_t mode;			/* type and permission bits */
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t size;
	int64_t mtime;			/* seconds */
	uint32_t mtime_nsec;
	uint32_t rdev_major, rdev_minor;
	uint64_t blocks;		/* 512-byte units, as st_blocks */
	uint8_t datalayout;		/* enum erofs_datalayout */
	uint8_t extended;		/* 1 = 64-byte inode */
};

/* Fill @st for inode @nid. 0 or negative errno. */
KILN_API int kiln_stat_nid(struct kiln_image *img, kiln_nid_t nid,
			   struct kiln_stat *st);

/*
 * Find @name (@name_len bytes, no '/') in directory @dir. Returns 0 and
 * sets *@nid, -ENOENT, -ENOTDIR, -ENAMETOOLONG or another negative errno.
 */
KILN_API int kiln_lookup(struct kiln_image *img, kiln_nid_t dir,
			 const char *name, size_t name_len, kiln_nid_t *nid);

enum kiln_resolve_flags {
	KILN_RESOLVE_FOLLOW = 1u << 0,	/* follow a final symlink */
};

/*
 * Resolve @path ("/a/b", "a/b", "" and "/" are the root) from the root.
 * Symlinks in the middle of the path are followed inside the image
 * (absolute targets restart at the image root; at most 40 links); the
 * final one only with KILN_RESOLVE_FOLLOW. ".." never leaves the root.
 */
KILN_API int kiln_resolve(struct kiln_image *img, const char *path,
			  unsigned int flags, kiln_nid_t *nid);

struct kiln_dirent {
	kiln_nid_t nid;
	const char *name;	/* NUL-terminated; valid during the callback */
	uint16_t name_len;
	uint8_t type;		/* DT_* value (DT_REG, DT_DIR, ...) */
	uint64_t next_pos;	/* pass to kiln_dir_iterate() to resume after */
};

/*
 * Return non-zero from the callback to stop: kiln_dir_iterate() then
 * returns that value. Negative values should be errnos.
 */
typedef int (*kiln_dir_fn)(void *ctx, const struct kiln_dirent *de);

/*
 * Call @fn for each entry of directory @dir from position @pos (0 = start),
 * "." and ".." included, in on-disk (sorted) order. Returns 0 at the end,
 * the callback's non-zero value, or a negative errno.
 */
KILN_API int kiln_dir_iterate(struct kiln_image *img, kiln_nid_t dir,
			      uint64_t pos, kiln_dir_fn fn, void *ctx);

/*
 * Copy the target of symlink @nid into @buf (@cap bytes) with a NUL.
 * Returns the target length, -ERANGE if @cap is too small, -EINVAL if @nid
 * is not a symlink.
 */
KILN_API ssize_t kiln_readlink(struct kiln_image *img, kiln_nid_t nid,
			       char *buf, size_t cap);

/*
 * listxattr(2) semantics: NUL-separated full names into @buf. With @cap 0
 * returns the size needed; -ERANGE if @cap is too small.
 */
KILN_API ssize_t kiln_listxattr(struct kiln_image *img, kiln_nid_t nid,
				char *buf, size_t cap);
/*
 * getxattr(2) semantics: the value of @name into @buf. With @cap 0 returns
 * the size; -ENODATA if absent; -ERANGE if @cap is too small.
 */
KILN_API ssize_t kiln_getxattr(struct kiln_image *img, kiln_nid_t nid,
			       const char *name, void *buf, size_t cap);

/* Open regular file (or symlink/dir data) @nid for reading. */
KILN_API int kiln_file_open(struct kiln_image *img, kiln_nid_t nid,
			    struct kiln_file **out);
KILN_API void kiln_file_close(struct kiln_file *file);
KILN_API uint64_t kiln_file_size(const struct kiln_file *file);

/*
 * Read up to @len bytes of @file at @off into @buf, decompressing straight
 * into @buf. Returns bytes read (short only at EOF, 0 at or past EOF) or a
 * negative errno; -KILN_ECORRUPT: corrupt image.
 */
KILN_API ssize_t kiln_file_pread(struct kiln_file *file, void *buf,
				 size_t len, uint64_t off);

/*
 * Find the first data (non-hole) range at or after @off, like
 * SEEK_DATA/SEEK_HOLE: sets *@data_off and *@data_end (exclusive). Returns 0,
 * -ENXIO when only holes remain, or a negative errno. Holes are reported
 * where the layout records them (null chunks, hole extents); other data is
 * one range.
 */
KILN_API int kiln_file_next_data(struct kiln_file *file, uint64_t off,
				 uint64_t *data_off, uint64_t *data_end);

/*
 * Where the bytes of @file from @off on are stored: sets *@len to the
 * length (at most @max, @off + @max <= the file size) of the run that
 * starts at @off and returns 1 when that run is stored as is, contiguous,
 * at image byte *@img_off (a reader may copy or splice it straight from
 * the image), or 0 when it is not (a hole, compressed, split or inline
 * data: use kiln_file_pread()). Returns a negative errno on error.
 */
KILN_API int kiln_file_locate(struct kiln_file *file, uint64_t off,
			      uint64_t max, uint64_t *img_off, uint64_t *len);

/*
 * Decode the whole extent of compressed @file that holds byte @off into
 * @buf (@cap bytes, the caller's), for a cache kept above the library
 * (a FUSE server handing the kernel every page it decoded). Sets the
 * extent's file range, [*@ext_off, *@ext_off + *@ext_len): it holds @off
 * and ends at most at the file size. Returns 1 when @buf holds it, 0 when
 * @off is at or past the end of the file or the file is not compressed
 * (nothing to decode: use kiln_file_pread()), -ENOSPC when *@ext_len is
 * more than @cap (the range is set: call again with that much room), or
 * a negative errno (-KILN_ECORRUPT: corrupt image). Compressed extents
 * decode straight into @buf unless the image's decompressed-extent cache
 * holds them. With verity every byte comes from verified blocks. A
 * kiln_file belongs to one thread.
 */
KILN_API int kiln_file_read_extent(struct kiln_file *file, void *buf,
				   size_t cap, uint64_t off, uint64_t *ext_off,
				   size_t *ext_len);

#ifdef __cplusplus
}
#endif
#endif
