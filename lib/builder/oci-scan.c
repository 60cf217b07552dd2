// SPDX-License-Identifier: MIT
/*
 * An OCI image into the tree, through the tar member pipeline: one layer
 * alone as a tar, or every layer flattened in two reads of each layer
 * blob, never unpacked: the first takes the headers (whiteouts applied,
 * each surviving file noting which member holds its data), the second
 * feeds only those members' data to the pipeline.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "builder/oci-gunzip.h"
#include "builder/oci.h"
#include "builder/tar-data.h"
#include "builder/tar-scan.h"

#define LAYER_READ_BLOCK (256u * 1024)	/* bytes per read of a layer blob */

struct oci_scan {
	struct kiln_build *b;
	struct kiln_oci_image *img;
	struct tar t;
	struct kiln_oci_blob *blob;	/* the layer being read */
	struct kiln_gunzip *gz;		/* its inflater, for gzip blobs */
	uint8_t *buf;			/* LAYER_READ_BLOCK bytes for it */
	char src[4352];			/* "<dir>: layer N", for messages */
};

/* kiln_gunzip_read_fn: the layer blob's bytes, checked as they come. */
static ssize_t layer_blob_read(void *ctx, void *buf, size_t len)
{
	struct oci_scan *s = ctx;

	return kiln_oci_blob_read(s->blob, buf, len);
}

/* The layer's tar bytes from its gzip blob. */
static la_ssize_t layer_read_gzip(struct archive *a, struct oci_scan *s,
				  const void **buf)
{
	ssize_t r = kiln_gunzip_next(s->gz, buf);

	if (r >= 0)
		return (la_ssize_t)r;
	if (r == -EILSEQ || r == -EBADMSG) {
		const struct kiln_oci_desc *d =
			&s->img->layers[s->t.layer - 1];

		kiln_log(&s->b->lg, KILN_LOG_ERROR, r == -EILSEQ ?
			 "%s: blob %s is not gzip, as its media type says: %s" :
			 "%s: blob %s: %s", s->src, d->digest,
			 kiln_gunzip_why(s->gz));
		archive_set_error(a, (int)-r, "the layer blob does not inflate");
		return -1;
	}
	kiln_log(&s->b->lg, KILN_LOG_ERROR, "%s",
		 kiln_oci_blob_why(s->blob));
	archive_set_error(a, (int)-r, "the layer blob failed its check");
	return -1;
}

static la_ssize_t layer_read(struct archive *a, void *ctx, const void **buf)
{
	struct oci_scan *s = ctx;
	ssize_t r;

	if (s->gz)
		return layer_read_gzip(a, s, buf);
	r = kiln_oci_blob_read(s->blob, s->buf, LAYER_READ_BLOCK);
	if (r < 0) {
		/*
		 * Said here: libarchive may replace the reason with its own
		 * ("truncated input") on the way up.
		 */
		kiln_log(&s->b->lg, KILN_LOG_ERROR, "%s",
			 kiln_oci_blob_why(s->blob));
		archive_set_error(a, (int)-r, "the layer blob failed its check");
		return -1;
	}
	*buf = s->buf;
	return (la_ssize_t)r;
}

/* What the layer's media type says the blob is compressed with. */
static const char *comp_name(enum kiln_oci_compression comp)
{
	return comp == KILN_OCI_GZIP ? "gzip" :
	       comp == KILN_OCI_ZSTD ? "zstd" : "uncompressed";
}

/* Layer @k (0-based) opened as t->a, its blob checked as it is read. */
static int layer_open(struct oci_scan *s, size_t k)
{
	const struct kiln_oci_desc *d = &s->img->layers[k];
	struct kiln_build *b = s->b;
	struct archive *a;
	int filter, want, err;

	snprintf(s->src, sizeof(s->src), "%s: layer %zu", s->img->dir, k + 1);
	snprintf(s->t.label, sizeof(s->t.label), "%s", s->src);
	s->t.layer = (unsigned int)(k + 1);
	err = kiln_oci_blob_open(&s->blob, s->img->dir, d, &b->lg);
	if (err)
		return err;
	a = archive_read_new();
	if (!a)
		return -ENOMEM;
	s->t.a = a;
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	/*
	 * Only the filter the media type names. gzip is inflated here by
	 * ISA-L (oci-gunzip.c), which checks its header itself: libarchive
	 * then reads a plain tar.
	 */
	if (d->comp == KILN_OCI_GZIP) {
		err = kiln_gunzip_new(layer_blob_read, s, &s->gz);
		if (err)
			return err;
	} else if (d->comp == KILN_OCI_ZSTD) {
		archive_read_support_filter_zstd(a);
	}
	if (archive_read_open(a, s, NULL, layer_read, NULL) != ARCHIVE_OK) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s", s->src,
			 kiln_tar_error(a));
		return -EIO;
	}
	filter = archive_filter_code(a, 0);
	want = d->comp == KILN_OCI_ZSTD ? ARCHIVE_FILTER_ZSTD :
					  ARCHIVE_FILTER_NONE;
	if (filter != want) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: blob %s is not %s, as "
			 "its media type says", s->src, d->digest,
			 comp_name(d->comp));
		return -EUCLEAN;
	}
	return 0;
}

/*
 * Done with the layer: the rest of its blob is taken and checked too.
 * After a failure as well: a tar that does not decompress or parse is
 * most often a blob that is not the one its digest names, and that is
 * then said too.
 */
static int layer_close(struct oci_scan *s, int err)
{
	if (s->blob) {
		int ferr = kiln_oci_blob_finish(s->blob);

		if (!err)
			err = ferr;
	}
	kiln_oci_blob_close(s->blob);
	s->blob = NULL;
	if (s->t.a)
		archive_read_free(s->t.a);
	s->t.a = NULL;
	kiln_gunzip_free(s->gz);
	s->gz = NULL;
	return err;
}

static int layer_read_all(struct oci_scan *s, size_t k)
{
	int err = layer_open(s, k);

	if (!err)
		err = kiln_tar_read(&s->t);
	return layer_close(s, err);
}

static int feed_cmp(const void *pa, const void *pb)
{
	const struct kiln_node *a = *(struct kiln_node *const *)pa;
	const struct kiln_node *b = *(struct kiln_node *const *)pb;

	if (a->src_layer != b->src_layer)
		return a->src_layer < b->src_layer ? -1 : 1;
	return a->src_member < b->src_member ? -1 :
	       a->src_member > b->src_member;
}

/* The regular files of the finished tree, in (layer, member) order. */
static int feed_build(struct oci_scan *s)
{
	struct kiln_build *b = s->b;
	struct tar *t = &s->t;

	t->feed = malloc((b->nr_nodes ? b->nr_nodes : 1) * sizeof(*t->feed));
	if (!t->feed)
		return -ENOMEM;
	for (size_t i = 0; i < b->nr_nodes; i++)
		if (S_ISREG(b->nodes[i]->mode) && b->nodes[i]->src_layer)
			t->feed[t->nr_feed++] = b->nodes[i];
	qsort(t->feed, t->nr_feed, sizeof(*t->feed), feed_cmp);
	return 0;
}

static int feed_layers(struct oci_scan *s);

/*
 * Flattened: 1. every layer's headers, in order, into the tree; 2. the
 * tree linked; 3. each layer again for the data of the files it still
 * provides.
 */
static int flatten(struct oci_scan *s)
{
	struct tar *t = &s->t;
	int err = 0;

	t->flatten = true;
	t->whiteouts = KILN_WHITEOUTS_OVERLAY;	/* to recognise them */
	t->strip_whiteouts = false;
	for (size_t k = 0; !err && k < s->img->nr_layers; k++)
		err = layer_read_all(s, k);
	t->flatten = false;
	return err ? err : feed_layers(s);
}

/*
 * One layer alone: 1. its entries into the tree, as a tar's; 2. for
 * hardlinks to files of the layers below, those files' members, looked
 * for from the top layer below down; 3. the tree linked; 4. the data of
 * those copies from their layers.
 */
static int single_layer(struct oci_scan *s, unsigned int layer)
{
	struct kiln_oci_links *l = NULL;
	struct tar *t = &s->t;
	bool again;
	int err;

	if (layer == 1)
		return layer_read_all(s, 0);
	err = kiln_oci_links_new(&l);
	if (err)
		return err;
	t->link_below = kiln_oci_links_add;
	t->ctx = l;
	err = layer_read_all(s, layer - 1);
	t->link_below = NULL;
	if (!err)
		err = kiln_oci_links_add_dirs(l, t);
	t->visit = kiln_oci_links_visit;
	for (unsigned int k = layer - 1; !err && k >= 1;) {
		if (!kiln_oci_links_pass(l, &err))
			break;
		err = layer_read_all(s, k - 1);
		if (!err)
			err = kiln_oci_links_passed(l, t, &again);
		if (!err && !again)
			k--;
	}
	t->visit = NULL;
	if (!err) {
		snprintf(s->src, sizeof(s->src), "%s: layer %u", s->img->dir,
			 layer);
		snprintf(t->label, sizeof(t->label), "%s", s->src);
		err = kiln_oci_links_done(l, t);
	}
	kiln_oci_links_free(l);
	t->ctx = NULL;
	return err ? err : feed_layers(s);
}

/*
 * The tree is complete: link it, then read the layers again for the
 * data of the files that noted their member (src_layer).
 */
static int feed_layers(struct oci_scan *s)
{
	struct tar *t = &s->t;
	int err = kiln_tar_finish_tree(t);

	if (!err)
		err = feed_build(s);
	for (size_t k = 0; !err && k < s->img->nr_layers; k++) {
		if (t->next_feed >= t->nr_feed)
			break;
		if (t->feed[t->next_feed]->src_layer == k + 1)
			err = layer_read_all(s, k);
	}
	if (!err && t->next_feed < t->nr_feed)
		err = kiln_tar_fail(t, EIO, "member %llu of layer %u not "
				    "found again",
				    (unsigned long long)t->feed[t->next_feed]->src_member,
				    t->feed[t->next_feed]->src_layer);
	return err;
}

int kiln_oci_scan(struct kiln_build *b)
{
	struct oci_scan s = { .b = b };
	unsigned int layer = b->opts.oci_layer;
	int err = kiln_oci_image_open(&s.img, b->source, &b->lg);

	if (err)
		return err;
	if (layer > s.img->nr_layers) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: --oci-layer %u: the "
			 "image has %zu layer%s", b->source, layer,
			 s.img->nr_layers, s.img->nr_layers == 1 ? "" : "s");
		kiln_oci_image_free(s.img);
		return -EINVAL;
	}
	snprintf(s.src, sizeof(s.src), "%s", s.img->dir);
	s.buf = malloc(LAYER_READ_BLOCK);
	if (!s.buf) {
		kiln_oci_image_free(s.img);
		return -ENOMEM;
	}
	err = kiln_tar_begin(&s.t, b, s.src);
	if (!err && layer)
		err = single_layer(&s, layer);
	else if (!err)
		err = flatten(&s);
	err = kiln_tar_end(&s.t, err);
	free(s.t.feed);
	free(s.buf);
	kiln_oci_image_free(s.img);
	return err;
}
