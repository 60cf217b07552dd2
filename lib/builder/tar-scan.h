/* SPDX-License-Identifier: MIT */
/*
 * What the tar scan's files share (scan-tar.c, the member pipeline;
 * tar-names.c, the name table and member paths; tar-attr.c, a member's
 * attributes; oci-scan.c, which reads an OCI image's layers through the
 * same pipeline): the state of the archives being read.
 */
#ifndef KILN_BUILDER_TAR_SCAN_H
#define KILN_BUILDER_TAR_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "builder/internal.h"
#include "util/u64map.h"

struct archive;
struct archive_entry;
struct kiln_jobs;

#define TAR_MAX_DEPTH 1024		/* as for directory sources */

/* (directory, name) -> index of the name in the directory's children */
struct name_slot {
	struct kiln_node *dir;
	size_t idx;
};

struct tar {
	struct kiln_build *b;
	struct archive *a;
	const char *src;		/* the archive, for messages */
	struct name_slot *slots;	/* open addressing, power of two */
	size_t cap, used;
	char *path;			/* current entry, normalized */
	size_t path_cap;
	char label[KILN_PATH_BUF];	/* "<archive>: <entry>" */
	bool warned_absolute;
	enum kiln_whiteouts whiteouts;	/* resolved: never AUTO */
	bool strip_whiteouts;		/* whiteouts == KILN_WHITEOUTS_STRIP */
	struct kiln_jobs *jobs;		/* members compressed by workers */
	bool failed;			/* a failure has been logged */
	/*
	 * Lengths of the uncompressed data recorded for dedupe so far (and
	 * whole blocks of it): a big member stored as it is hashes its data
	 * before placing it only when an earlier copy of one of its lengths
	 * may be in the image. A set: the values are unused.
	 */
	struct kiln_u64map flat_lens;
	/*
	 * OCI images (oci-scan.c): the layer being read (1-based; 0 for
	 * --tar) and the index of the current entry in its archive.
	 */
	unsigned int layer;
	uint64_t member;
	/*
	 * Flattening: whiteouts delete names of lower layers instead of
	 * becoming overlayfs ones, and regular files only note the member
	 * holding their data (src_layer, src_member) for the data pass.
	 */
	bool flatten;
	/*
	 * The data pass of a flattened image: the regular files in (layer,
	 * member) order; each layer is read again and only these members'
	 * data go to the pipeline. NULL otherwise.
	 */
	struct kiln_node **feed;
	size_t nr_feed, next_feed;
	bool tree_done;			/* kiln_tar_finish_tree() has run */
	/*
	 * One OCI layer built alone: a hardlink whose target the archive
	 * does not hold names a file of the layers below; @link_below gives
	 * the node that stands for it (t->path: the target, normalized).
	 * NULL: such a hardlink is an error.
	 */
	int (*link_below)(struct tar *t, void *ctx, struct kiln_node **np);
	/* Instead of reading the entries into the tree: each goes to @visit. */
	int (*visit)(struct tar *t, void *ctx, struct archive_entry *e);
	void *ctx;			/* for link_below and visit */
};

/*
 * The member pipeline, in scan-tar.c. kiln_tar_begin() sets up @t for
 * the build @b (the root, the workers; @src names the input in messages
 * and must outlive @t); kiln_tar_read() takes every entry of the open
 * archive t->a (in the data pass, only the members of t->feed);
 * kiln_tar_finish_tree() links the tree once every entry is in (names
 * sorted, nodes no name reaches freed); kiln_tar_end() waits for the
 * data in flight, finishes the tree unless done, and frees @t's state
 * (not t->a), returning @err or the first failure.
 */
int kiln_tar_begin(struct tar *t, struct kiln_build *b, const char *src);
int kiln_tar_read(struct tar *t);
int kiln_tar_finish_tree(struct tar *t);
int kiln_tar_end(struct tar *t, int err);

/* "<archive>: <entry>: <reason>" (t->label names the entry); -@err. */
int kiln_tar_fail(struct tar *t, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* tar-names.c: the (directory, name) table and member paths */
/*
 * The entry @name (@len bytes) of @dir, or NULL; its node is NULL if a
 * whiteout of a flattened image deleted it (the name can be given again).
 */
struct kiln_dentry *kiln_tar_child_find(struct tar *t, struct kiln_node *dir,
					const char *name, size_t len);
/* Append the name @name -> @n to @dir (the name must be new there). */
int kiln_tar_child_add(struct tar *t, struct kiln_node *dir, const char *name,
		       size_t len, struct kiln_node *n);
/* A new empty node, owned by the build's node list. */
int kiln_tar_node_new(struct tar *t, struct kiln_node **np);
/*
 * Normalize the entry name @raw into t->path: "./" and empty components
 * dropped, a leading '/' removed, ".." refused. *@depth: components.
 */
int kiln_tar_normalize(struct tar *t, const char *raw, size_t *depth);
/* Whether t->path or one of its parents matches an exclude pattern. */
bool kiln_tar_excluded(const struct tar *t);
/*
 * Find the directory holding the last component of t->path (creating
 * implicit parents on the way when @create); *@name and *@len: that
 * component.
 */
int kiln_tar_walk_parents(struct tar *t, bool create, struct kiln_node **dirp,
			  const char **name, size_t *len);
/* Every name of @old now names @n (a hardlink entry carrying data). */
void kiln_tar_names_relink(struct tar *t, const struct kiln_node *old,
			   struct kiln_node *n);
/* Free the table (the names stay in their directories). */
void kiln_tar_names_drop(struct tar *t);

/*
 * tar-attr.c: type, permissions, owner, mtime, target/rdev/size, xattrs
 * and ACLs of @e; with @whiteout, @n becomes the overlayfs whiteout (a
 * character device 0:0) with @e's metadata.
 */
int kiln_tar_entry_attrs(struct tar *t, struct kiln_node *n,
			 struct archive_entry *e, bool whiteout);

#endif
