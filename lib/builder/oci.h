/* SPDX-License-Identifier: MIT */
/*
 * OCI image layouts: index.json and manifests to the list of an image's
 * layers (oci-layout.c), blobs read and checked against their digests
 * (oci-blob.c). Used by oci-scan.c.
 */
#ifndef KILN_BUILDER_OCI_H
#define KILN_BUILDER_OCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/log.h"

/* layers an image may have: the layer number must fit kiln_dentry.layer */
#define KILN_OCI_LAYERS_MAX	4096
/* bytes of index.json, a manifest, an index or a config read as JSON */
#define KILN_OCI_JSON_MAX	(4u << 20)

enum kiln_oci_compression {
	KILN_OCI_TAR,			/* ...layer.v1.tar */
	KILN_OCI_GZIP,			/* ...layer.v1.tar+gzip */
	KILN_OCI_ZSTD,			/* ...layer.v1.tar+zstd */
};

/* A content descriptor: "sha256:<64 hex>" (or sha512) and its size. */
struct kiln_oci_desc {
	char *digest;
	uint64_t size;
	enum kiln_oci_compression comp;	/* layers only */
};

struct kiln_oci_image {
	char *dir;			/* the layout directory */
	char *ref;			/* the REF asked for, or NULL */
	struct kiln_oci_desc *layers;	/* in the manifest's order */
	size_t nr_layers;
};

/*
 * Read the layout @source ("DIR" or "DIR:REF": a directory named with a
 * ':' is taken whole) down to its image manifest, checking every blob on
 * the way (manifest, config, nested index). 0 or a negative errno
 * (-EUCLEAN for a layout that does not parse or check, -EOPNOTSUPP for a
 * media type not read, -ENOENT for a missing file or REF), logged.
 */
int kiln_oci_image_open(struct kiln_oci_image **imgp, const char *source,
			const struct kiln_logger *lg);
void kiln_oci_image_free(struct kiln_oci_image *img);

/*
 * One blob of @dir, read forward once and checked: its size on opening,
 * its digest when the last byte is taken. Its reason for a failure is
 * kiln_oci_blob_why(); nothing is logged by the reads, so that a reader
 * such as libarchive can carry the reason.
 */
struct kiln_oci_blob;

/* 0, or a negative errno (the reason logged). */
int kiln_oci_blob_open(struct kiln_oci_blob **blp, const char *dir,
		       const struct kiln_oci_desc *desc,
		       const struct kiln_logger *lg);
/*
 * Up to @len bytes into @buf: the count, 0 once the whole blob is taken
 * and its digest matched, or a negative errno: -EUCLEAN for a blob whose
 * size or digest is not its descriptor's, -EIO.
 */
ssize_t kiln_oci_blob_read(struct kiln_oci_blob *bl, void *buf, size_t len);
/*
 * Take and check the rest of the blob. 0 or a negative errno, logged
 * unless a read had already failed (its caller tells that reason).
 */
int kiln_oci_blob_finish(struct kiln_oci_blob *bl);
/* "<path>: <reason>" of the last failure, never NULL. */
const char *kiln_oci_blob_why(const struct kiln_oci_blob *bl);
void kiln_oci_blob_close(struct kiln_oci_blob *bl);

/*
 * The whole blob @desc of @dir (at most @max bytes), checked, with a NUL
 * after it; the caller frees *@bufp. 0 or a negative errno, logged.
 */
int kiln_oci_blob_load(const char *dir, const struct kiln_oci_desc *desc,
		       size_t max, const struct kiln_logger *lg, char **bufp);

/*
 * Whether @digest is "sha256:" and 64 lowercase hex digits, or "sha512:"
 * and 128 (what names a file under blobs/ without leaving it).
 */
bool kiln_oci_digest_ok(const char *digest);

#endif

/*
 * Hardlinks of one layer built alone to files of the layers below
 * (oci-links.c): each such file becomes a copy in the layer, as overlayfs
 * would copy it up, its metadata and data taken from the member of the
 * highest layer below that holds it. oci-scan.c reads the layers below,
 * top down, handing each entry to kiln_oci_links_visit() between
 * kiln_oci_links_pass() and kiln_oci_links_passed(), until none is left.
 */
struct kiln_oci_links;
struct tar;
struct kiln_node;
struct archive_entry;

int kiln_oci_links_new(struct kiln_oci_links **lp);
void kiln_oci_links_free(struct kiln_oci_links *l);
/* tar.link_below: the copy standing for t->path (one per path). */
int kiln_oci_links_add(struct tar *t, void *ctx, struct kiln_node **np);
/*
 * After the layer is read: its implied directories (KILN_NODE_IMPLICIT)
 * are looked for too, for their metadata; not an error if none is found.
 */
int kiln_oci_links_add_dirs(struct kiln_oci_links *l, struct tar *t);
/* Start a pass over a layer below: false if no copy is left to find. */
bool kiln_oci_links_pass(struct kiln_oci_links *l, int *err);
/* tar.visit: what the layer's entry @e says of a path looked for. */
int kiln_oci_links_visit(struct tar *t, void *ctx, struct archive_entry *e);
/*
 * After the pass: copies found are done; *@again when some followed a
 * hardlink of that layer, whose target is looked for in the same layer
 * again. A path the layer deletes or holds as another type is an error.
 * 0 or a negative errno, logged.
 */
int kiln_oci_links_passed(struct kiln_oci_links *l, struct tar *t,
			  bool *again);
/* After the last layer: a path still not found is an error (logged). */
int kiln_oci_links_done(struct kiln_oci_links *l, struct tar *t);
