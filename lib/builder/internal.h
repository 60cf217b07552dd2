/* SPDX-License-Identifier: MIT */
/*
 * The builder's in-memory tree and the state one build carries from pass
 * to pass: scan -> write data -> assign nids -> write metadata -> super.
 */
#ifndef KILN_BUILDER_INTERNAL_H
#define KILN_BUILDER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kiln/builder.h>

#include "builder/compress/compress.h"
#include "builder/progress.h"
#include "util/log.h"

struct kiln_out;
struct kiln_zctx;
struct kiln_zfile;
struct kiln_packer;
struct kiln_selabel;
struct kiln_threadpool;

/* One xattr (name + value), deduplicated across the whole tree. */
struct kiln_xattr_item {
	uint8_t index;			/* EROFS_XATTR_INDEX_* */
	uint8_t name_len;		/* suffix after the prefix */
	uint16_t value_len;
	uint32_t refs;			/* inodes carrying it */
	int64_t shared_id;		/* shared area id (4-byte units), -1 */
	uint32_t hash;
	struct kiln_xattr_item *next;	/* hash chain */
	char *name;			/* suffix, not NUL terminated */
	char *value;
};

/* All xattrs of a build: dedup table plus the shared area. */
struct kiln_xattr_table {
	struct kiln_xattr_item **buckets;
	size_t nr_buckets, nr_items;
	struct kiln_xattr_item **items;	/* in order of first use */
	size_t items_cap;
	uint64_t shared_size;		/* bytes of the shared area */
	size_t nr_shared;
};

struct kiln_node;

/* A name in a directory. */
struct kiln_dentry {
	char *name;
	uint16_t name_len;
	/*
	 * A flattened OCI image's scan: the layer (1-based) whose entry made
	 * the name or last set it; whiteouts only hide names of lower layers.
	 */
	uint16_t layer;
	/* NULL while the scan runs: a name a whiteout deleted (oci-scan.c) */
	struct kiln_node *node;
};

enum kiln_node_flags {
	KILN_NODE_SPARSE = 1u << 0,	/* scan saw fewer blocks than size */
	KILN_NODE_STREAMED = 1u << 1,	/* data written while streaming (tar) */
	KILN_NODE_IMPLICIT = 1u << 2,	/* tar: a parent without an entry */
	KILN_NODE_LINKED = 1u << 3,	/* tar: reached from the root */
	KILN_NODE_HASHED = 1u << 4,	/* data_hash holds the data's XXH3 */
	KILN_NODE_ZCTX = 1u << 5,	/* zctx chosen by path (compress hints) */
	KILN_NODE_OPAQUE = 1u << 6,	/* an opaque marker named it */
	KILN_NODE_WHITEOUT = 1u << 7,	/* tar: a whiteout made from ".wh." */
	KILN_NODE_WHITEOUTS = 1u << 8,	/* a directory holding such */
};

/* One inode of the image. */
struct kiln_node {
	struct kiln_node *parent;	/* directory of the first name */
	const struct kiln_dentry *first;/* first name (NULL for the root) */
	uint32_t mode, uid, gid, nlink;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t rdev;			/* encoded for the image */
	unsigned int flags;		/* enum kiln_node_flags */
	unsigned int depth;
	uint64_t size;			/* i_size */
	dev_t src_dev;
	ino_t src_ino;
	uint64_t data_hash;		/* XXH3-64 of the data (HASHED) */
	struct kiln_zctx *zctx;		/* with KILN_NODE_ZCTX */
	/*
	 * A flattened OCI image's regular file: the layer (1-based) and the
	 * member of that layer's tar (0-based) that hold its data.
	 */
	uint32_t src_layer;
	uint64_t src_member;

	/* xattrs: items sorted by (index, name) */
	struct kiln_xattr_item **xattrs;
	uint16_t nr_xattrs;
	uint32_t cap_xattrs;		/* elements allocated in xattrs */

	/* directories */
	struct kiln_dentry *children;	/* sorted by name (unsigned bytes) */
	size_t nr_children;

	/* symlinks */
	char *target;

	/* on-disk form and place, filled by the data pass and place.c */
	uint8_t datalayout;		/* enum erofs_datalayout */
	bool extended;
	uint16_t chunk_format;		/* CHUNK_BASED */
	uint16_t chunk_device;		/* CHUNK_BASED, 8-byte indexes: device */
	kiln_blk_t startblk;		/* FLAT_*: first data block */
	uint32_t *chunks;		/* CHUNK_BASED: block per chunk */
	uint64_t nr_chunks;
	uint64_t tail_off;		/* inline tail: offset in tail arena */
	uint32_t tail_len;		/* inline tail bytes */
	uint32_t xattr_size;		/* inline xattr area bytes */
	struct kiln_zfile *zf;		/* compressed (compress/compress.h) */
	uint64_t inode_off;		/* byte position in the image */
	kiln_nid_t nid;
	uint32_t ino;			/* on-disk serial */
};

/* One build. */
struct kiln_build {
	struct kiln_logger lg;
	struct kiln_build_opts opts;
	const char *source;
	const char *image;
	unsigned int blkszbits;
	uint32_t blksz;
	int64_t epoch;			/* compact mtime base */
	bool rel_mtime;			/* compact i_mtime may be nonzero */
	uint32_t fixed_nsec;
	int64_t build_time;
	int64_t newest_mtime;		/* across the tree */
	unsigned int shared_xattr_min;

	struct kiln_node *root;
	struct kiln_node **nodes;	/* breadth-first, root first */
	size_t nr_nodes, nodes_cap;
	struct kiln_node **order;	/* the data order (order.c) */
	struct kiln_xattr_table xt;
	struct kiln_selabel *selabel;	/* opts.file_contexts, or NULL */

	/* the image */
	struct kiln_out *out;
	struct kiln_zctx *zctx;		/* NULL: no compression */
	struct kiln_node *packed;	/* packed inode (fragments), in nodes */
	struct kiln_node *metabox;	/* metabox inode, in nodes, or NULL */
	struct kiln_packer *packer;	/* packed inode being compressed */
	struct kiln_threadpool *pool;	/* workers (pipeline.c), NULL: -j1 */
	struct kiln_zshift *zshift;	/* extent cuts (shifted dedupe), or NULL */
	uint8_t *tails;			/* inline tails of all files */
	uint64_t tails_len;
	size_t tails_cap;
	void *iobuf;			/* data copy buffer */
	size_t iobuf_size;
	uint32_t feature_compat, feature_incompat;
	kiln_blk_t meta_blkaddr;
	kiln_blk_t xattr_blkaddr;
	/* KILN_SOURCE_TAR_INDEX: the tar, extra device 1 (tar-index.c) */
	struct kiln_tar_index *tindex;
	uint64_t device_bytes;		/* the tar's size */
	char device_tag[64];		/* its slot's tag, NUL padded */
	uint64_t meta_start, meta_end;	/* inode area bytes */
	uint64_t image_blocks;

	struct kiln_build_stats stats;
	struct kiln_progress progress;
};

/* scan.c */
int kiln_scan_tree(struct kiln_build *b);
/*
 * Whether the path @rel from the source root (its last component @name)
 * matches one of the exclude patterns (exclude.c has the rules).
 */
bool kiln_excluded(const struct kiln_build_opts *o, const char *rel,
		   const char *name);
/*
 * order.c: b->order, the nodes in the order their data is written (depth
 * first, a directory's files before its subdirectories; with fragments,
 * the files that go whole into the packed inode in their similarity order,
 * opts.packed_order); the data pass walks it. 0 or -ENOMEM.
 */
int kiln_data_order(struct kiln_build *b);
/* A file in the similarity order: what it sorts by. */
struct kiln_order_key {
	const char *suffix;		/* name after its last '.', or all */
	size_t suffix_len;
	uint64_t fp;			/* kiln_order_fingerprint() of its head */
	size_t pos;			/* depth-first position: unique */
	struct kiln_node *node;
};
/*
 * The suffix @name is grouped by: the bytes after its last '.' not at its
 * start ("c" for "main.c"), else the whole name ("Makefile", ".gitignore").
 */
void kiln_order_suffix(const char *name, size_t len, const char **suffix,
		       size_t *suffix_len);
/*
 * A MinHash of @buf's byte 8-grams (XXH3-64): files that share much of
 * their content share it more often than not. Pure function of the bytes.
 */
uint64_t kiln_order_fingerprint(const void *buf, size_t len);
/* Sort @keys by (suffix, fp, pos): a total order. */
void kiln_order_sort(struct kiln_order_key *keys, size_t nr);
/* Path of @n for messages: "<source>/<rel>", in a caller buffer. */
const char *kiln_node_path(const struct kiln_build *b,
			   const struct kiln_node *n, char *buf, size_t len);
void kiln_tree_free(struct kiln_build *b);
/* Append @n to b->nodes (the inode order); 0 or -ENOMEM. */
int kiln_nodes_push(struct kiln_build *b, struct kiln_node *n);
/* @path, or its two ends around "..." in @buf when it is @cap or longer. */
const char *kiln_path_abbrev(const char *path, char *buf, size_t cap);
#define KILN_PATH_BUF 4352

/* xattr.c */
void kiln_xattr_table_init(struct kiln_xattr_table *xt);
void kiln_xattr_table_release(struct kiln_xattr_table *xt);
/*
 * Split @name into a short prefix index and suffix. Returns the index, or
 * 0 for namespaces EROFS cannot store.
 */
unsigned int kiln_xattr_prefix(const char *name, const char **suffix);
/* Intern one xattr; *@item points into @xt. */
int kiln_xattr_intern(struct kiln_xattr_table *xt, unsigned int index,
		      const char *suffix, size_t suffix_len,
		      const void *value, size_t value_len,
		      struct kiln_xattr_item **item);
/* Decide which items are shared and give them ids. */
void kiln_xattr_assign_shared(struct kiln_xattr_table *xt,
			      unsigned int shared_min);
/* Inline area bytes of a node (0 or >= 16); -E2BIG if too large. */
int kiln_xattr_ibody_size(struct kiln_xattr_item *const *items, size_t n,
			  uint32_t *size);
/* Bloom filter word for @items (set bit = no name hashes there). */
uint32_t kiln_xattr_filter(struct kiln_xattr_item *const *items, size_t n);
/* Encode the inline area of @size bytes into @dst. */
void kiln_xattr_encode_ibody(struct kiln_xattr_item *const *items, size_t n,
			     bool filter, void *dst, uint32_t size);
/* Encode the whole shared area (xt->shared_size bytes) into @dst. */
void kiln_xattr_encode_shared(const struct kiln_xattr_table *xt, void *dst);
/* Sort one node's items by (index, name) and drop duplicates. */
void kiln_xattr_sort(struct kiln_xattr_item **items, uint16_t *n);
/*
 * Append @item to @n's xattrs, unsorted: the caller sorts with
 * kiln_xattr_sort() once it has added them all. Counts no refs. 0,
 * -E2BIG when @n holds UINT16_MAX already (logged as "@what: too many
 * xattrs" unless @what is NULL), or -ENOMEM.
 */
int kiln_node_add_xattr(struct kiln_build *b, struct kiln_node *n,
			struct kiln_xattr_item *item, const char *what);
/*
 * With opts.file_contexts (b->selabel), replace @n's security.selinux with
 * the label of @rel (the path below the root, "" for the root) for
 * n->mode's file type, or drop it for "<<none>>"; no-op otherwise. Keeps
 * n->xattrs sorted; counts no refs (the scan does, once per node). @what
 * names the file in messages. 0 or a negative errno, logged.
 */
int kiln_xattr_set_label(struct kiln_build *b, struct kiln_node *n,
			 const char *rel, const char *what);

/* acl.c */
enum kiln_acl_tag {			/* the kernel's ACL_* tags */
	KILN_ACL_USER_OBJ = 0x01,
	KILN_ACL_USER = 0x02,
	KILN_ACL_GROUP_OBJ = 0x04,
	KILN_ACL_GROUP = 0x08,
	KILN_ACL_MASK = 0x10,
	KILN_ACL_OTHER = 0x20,
};
struct kiln_acl_entry {
	uint16_t tag;			/* enum kiln_acl_tag */
	uint16_t perm;			/* rwx: 4, 2, 1 */
	uint32_t id;			/* uid or gid of USER and GROUP */
};
/* Only the owner, group and other entries: what the mode says alone. */
bool kiln_acl_is_minimal(const struct kiln_acl_entry *ents, size_t nr);
/*
 * Encode @ents (sorted in place) as the value of a system.posix_acl_*
 * xattr into @dst: 4 + 8 * @nr bytes, the bytes getxattr(2) returns for
 * the same ACL. Returns the length, -EINVAL for an ACL the kernel would
 * refuse (a missing owner, group or other entry, a duplicate, named
 * entries without a mask), or -E2BIG when @dst_cap is too small.
 */
ssize_t kiln_acl_encode(void *dst, size_t dst_cap,
			struct kiln_acl_entry *ents, size_t nr);

/* owner.c */
/*
 * Set @n's owner from the source's @uid:@gid and the build's ownership
 * options (all-root, forced ids, then the offsets). 0, or -ERANGE (logged,
 * naming @what) when an offset carries an id past 2^32-1.
 */
int kiln_owner_set(struct kiln_build *b, struct kiln_node *n, uint32_t uid,
		   uint32_t gid, const char *what);

/* whiteout.c */
enum kiln_whiteout_kind {
	KILN_WH_NONE = 0,	/* an ordinary name */
	KILN_WH_FILE,		/* ".wh.NAME": NAME is deleted */
	KILN_WH_OPAQUE,		/* ".wh..wh..opq": its directory is opaque */
	KILN_WH_META,		/* other ".wh..wh.*": aufs bookkeeping */
	KILN_WH_BAD,		/* ".wh.", ".wh..", ".wh...": names nothing */
};
/* What the name @name (@len bytes) is; for KILN_WH_FILE, *@target: NAME. */
enum kiln_whiteout_kind kiln_whiteout_kind(const char *name, size_t len,
					   const char **target,
					   size_t *target_len);
/* opts.whiteouts with AUTO resolved for the source kind. */
enum kiln_whiteouts kiln_whiteouts_mode(const struct kiln_build_opts *o);
/* An overlayfs whiteout: a character device 0:0 (@rdev encoded or not). */
bool kiln_whiteout_is_overlay(mode_t mode, uint32_t rdev);
bool kiln_whiteout_is_opaque_xattr(const struct kiln_xattr_item *it);
/* Drop trusted.overlay.opaque from @n's xattrs (no refs counted). */
void kiln_whiteout_strip_xattrs(struct kiln_node *n);
/*
 * Give @dir trusted.overlay.opaque="y" (replacing another value), keeping
 * its xattrs sorted; counts no refs. 0 or a negative errno.
 */
int kiln_whiteout_set_opaque(struct kiln_build *b, struct kiln_node *dir);
/*
 * Give @dir, which holds whiteouts made from ".wh." names, an empty
 * trusted.overlay.origin (unless it has one), so that overlayfs hides
 * them from its listing. Same contract as kiln_whiteout_set_opaque().
 */
int kiln_whiteout_set_origin(struct kiln_build *b, struct kiln_node *dir);

/* inode.c */
bool kiln_inode_fits_compact(const struct kiln_node *n, int64_t epoch,
			     uint32_t fixed_nsec);
/*
 * A regular file the image needs for itself (packed inode, metabox),
 * linked from no directory: @size bytes, mode 0600, stamped with the
 * epoch, appended to b->nodes. The caller sets its data. 0 or -ENOMEM.
 */
int kiln_nodes_push_special(struct kiln_build *b, uint64_t size,
			    struct kiln_node **n);
/* The same where i_mtime counts from the epoch (6.15+ images). */
bool kiln_inode_fits_compact_rel(const struct kiln_node *n, int64_t epoch,
				 uint32_t fixed_nsec);
unsigned int kiln_inode_core_size(const struct kiln_node *n);
/* Encode the core (32 or 64 bytes) of @n; a compact one stores mtime - @epoch. */
void kiln_inode_encode_core(const struct kiln_node *n, int64_t epoch,
			    void *dst);
uint8_t kiln_inode_ftype(uint32_t mode);
/* The largest device numbers the image's 32-bit rdev holds. */
#define KILN_RDEV_MAJOR_MAX 0xFFFu	/* 12 bits */
#define KILN_RDEV_MINOR_MAX 0xFFFFFu	/* 20 bits */
/*
 * Encode device @major:@minor as the image stores it (the kernel's
 * new_encode_dev() layout) into *@rdev. false, *@rdev untouched, when the
 * pair does not fit: a major above KILN_RDEV_MAJOR_MAX or a minor above
 * KILN_RDEV_MINOR_MAX.
 */
bool kiln_inode_encode_rdev(uint64_t major, uint64_t minor, uint32_t *rdev);

/* dir.c */
struct kiln_dirent_src {
	const char *name;
	uint16_t name_len;
	uint8_t file_type;
	kiln_nid_t nid;
};
/* Compare names as EROFS orders them (unsigned bytes, shorter first). */
int kiln_dir_namecmp(const char *a, size_t alen, const char *b, size_t blen);
/* Sort @d by name. */
void kiln_dir_sort(struct kiln_dentry *d, size_t n);
/*
 * i_size of a directory holding @ents (sorted, "." and ".." included):
 * full blocks plus the used part of the last one.
 */
uint64_t kiln_dir_size(const struct kiln_dirent_src *ents, size_t n,
		       uint32_t blksz);
/*
 * Encode the directory block by block: calls @emit(ctx, blk_index, data,
 * len) with a zero-filled block (len = blksz) for every block but the last,
 * whose len is the used part. Returns 0 or @emit's error.
 */
int kiln_dir_encode(const struct kiln_dirent_src *ents, size_t n,
		    uint32_t blksz, void *block,
		    int (*emit)(void *ctx, uint64_t blk, const void *data,
				size_t len),
		    void *ctx);
/* The dirent list of @n ("." and ".." merged in), caller frees. */
int kiln_dir_entries(const struct kiln_node *n,
		     struct kiln_dirent_src **ents, size_t *nr);

/* scan-tar.c (scan-tar-none.c without libarchive) */
/*
 * Read the tar stream b->source ("-": stdin) in one pass into the tree,
 * writing each regular file's data as it streams by (b->out and b->zctx
 * must be open). With KILN_BUILD_VERIFY each file's data_hash is set.
 */
int kiln_tar_scan(struct kiln_build *b);

/* oci-scan.c (oci-none.c without libarchive or jansson) */
/*
 * Read the OCI image layout b->source ("DIR" or "DIR:REF") into the tree:
 * with opts.oci_layer 0 its layers flattened (whiteouts applied), else
 * that layer alone, as kiln_tar_scan() reads a tar. Every blob is checked
 * against its digest and size. Writes regular files' data as
 * kiln_tar_scan() does.
 */
int kiln_oci_scan(struct kiln_build *b);

/* verify.c */
/*
 * Open the image written so far (@size bytes of b->out) with the reader
 * and compare every inode with the tree and the source: directory
 * sources are read again, streamed files are checked by data_hash.
 * 0, or -EIO after logging "<path>: <what differs>".
 */
int kiln_verify(struct kiln_build *b, uint64_t size);

/* data.c */
/* Data bytes [start, end) of a sparse file. */
struct kiln_data_extent {
	uint64_t start, end;
};
int kiln_data_write_all(struct kiln_build *b);
/* Reserves every directory's full blocks at the end of the image so far. */
int kiln_data_place_dirs(struct kiln_build *b);
/*
 * The data pass's work for node @n, on the one writer in tree order:
 * shape the inode and place its data. For a regular file, @zf is its data
 * compressed by a worker and not yet in the image (the node owns it from
 * now on), or NULL: read and store it here, uncompressed when @raw (a
 * worker found it not worth compressing). With @raw, a non-NULL @zf
 * carries only the dedupe hashes of the data (kiln_zfile_flat_find()) and
 * is freed here.
 */
int kiln_data_commit_node(struct kiln_build *b, struct kiln_node *n,
			  struct kiln_zfile *zf, bool raw);

/* pipeline.c */
/*
 * Run every node through kiln_data_commit_node() in tree order, with the
 * regular files' reading and compressing done by b->opts.threads workers
 * (big files in fixed segments) within b->opts.memory_limit.
 */
int kiln_data_pipeline(struct kiln_build *b);
/*
 * The build's worker threads, made on first use and shared by every
 * pipeline of the build (freed with it); NULL when the build runs on one
 * thread. Pipelines given NULL run inline.
 */
struct kiln_threadpool *kiln_build_pool(struct kiln_build *b);
/*
 * Bytes of items the build's pipelines may hold in flight together:
 * three quarters of --memory-limit, else 64 MiB or 8 MiB per worker.
 */
uint64_t kiln_build_inflight_bytes(const struct kiln_build *b);
/* The data pass's share of it: with fragments, the packed inode has 1/3. */
uint64_t kiln_data_inflight_bytes(const struct kiln_build *b);
/* Items a data pass keeps in flight (kiln_jobs_conf.max_items). */
size_t kiln_build_max_items(struct kiln_build *b);
/*
 * Open regular file @n of a directory source for reading and check that
 * it is still the file the scan saw (same device, inode and size).
 * Returns the descriptor, or a negative errno with *@what (when @what is
 * not NULL) set to a reason more precise than strerror's, or NULL.
 */
int kiln_node_open(const struct kiln_build *b, const struct kiln_node *n,
		   const char **what);
/*
 * After reading all of source file @fd: whether it changed since @before
 * (its fstat() when opened) while it was read: another size (appended to,
 * truncated) or another ctime (written to in place). True with *@why set.
 */
struct stat;
bool kiln_node_changed(int fd, const struct stat *before, const char **why);
/*
 * Write the data of regular file @n (n->size bytes, attributes and xattrs
 * already set) as a stream source delivers it: @read is called with
 * offsets that only grow, except for one restart at 0 when a compression
 * attempt gives up. @ext/@nr: the data ranges of a KILN_NODE_SPARSE file.
 * @path names the file in messages. kiln_data_write_all() later finishes
 * the node.
 */
int kiln_data_write_stream(struct kiln_build *b, struct kiln_node *n,
			   const char *path, kiln_src_read_fn read, void *ctx,
			   const struct kiln_data_extent *ext, size_t nr);
/*
 * The same for data known not worth compressing (no attempt is made):
 * stored as it is. @flat: the data's dedupe hashes (kiln_zfile_flat_new(),
 * with which @read may also be called again from offset 0 to confirm a
 * copy already in the image), or NULL; the caller frees it.
 */
int kiln_data_write_stream_raw(struct kiln_build *b, struct kiln_node *n,
			       const char *path, kiln_src_read_fn read,
			       void *ctx, const struct kiln_data_extent *ext,
			       size_t nr, struct kiln_zfile *flat);
/* Bytes of inline tail data of @n kept in the tail arena. */
const uint8_t *kiln_data_tail(const struct kiln_build *b,
			      const struct kiln_node *n);

/* place.c: where each inode goes (its nid), then the metadata written */
int kiln_place_assign_nids(struct kiln_build *b);
int kiln_place_write_meta(struct kiln_build *b);
/* Whether the inodes go into a metabox (compressed metadata). */
bool kiln_place_in_metabox(const struct kiln_build *b);

/*
 * metabox.c: the metabox inode's content, @size bytes, given in order by
 * kiln_metabox_write() (@off: the content offset, strictly forward) and
 * compressed as it comes into blocks appended to the image; _finish()
 * appends the metabox inode to b->nodes (*@node). 0 or -errno.
 */
struct kiln_metabox;
int kiln_metabox_open(struct kiln_build *b, uint64_t size,
		      struct kiln_metabox **m);
int kiln_metabox_write(struct kiln_metabox *m, const void *data, size_t len,
		       uint64_t off);
int kiln_metabox_finish(struct kiln_metabox *m, struct kiln_node **node);
void kiln_metabox_free(struct kiln_metabox *m);

/* super.c */
int kiln_super_write(struct kiln_build *b);

/*
 * target.c: check b->opts (copied from a caller's struct of @opts_len
 * bytes) against the target kernel and fill in the defaults; afterwards
 * opts.kernel is the target, compress_flags final and the layout never
 * AUTO. Returns 0 or -EINVAL (logged).
 */
int kiln_target_resolve(struct kiln_build *b, size_t opts_len);
/* First block after the superblock's block (start of the data area). */
kiln_blk_t kiln_super_first_data_blk(unsigned int blkszbits);

#endif
