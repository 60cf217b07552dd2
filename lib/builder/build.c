// SPDX-License-Identifier: MIT
/*
 * kiln_build(): scan the tree, write the data, place the inodes, write the
 * metadata and the superblock, then rename the image into place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "builder/output.h"
#include "builder/selabel.h"
#include "builder/tar-index.h"
#include "builder/verity.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/threadpool.h"

static int build_setup(struct kiln_build *b, const char *source,
		       const char *image, const struct kiln_build_opts *opts)
{
	size_t len = sizeof(b->opts);
	int err;

	if (opts) {
		/* an older caller's struct is shorter: the rest stays zero */
		if (opts->struct_size)
			len = KILN_MIN(opts->struct_size, sizeof(b->opts));
		memcpy(&b->opts, opts, len);
	}
	b->opts.struct_size = sizeof(b->opts);
	b->lg.fn = b->opts.log;
	b->lg.ctx = b->opts.log_ctx;
	kiln_xattr_table_init(&b->xt);
	kiln_progress_init(&b->progress, b->opts.progress, b->opts.progress_ctx);
	b->source = source;
	b->image = image;
	b->blkszbits = b->opts.blkszbits ? b->opts.blkszbits : 12;
	if (b->opts.source_kind == KILN_SOURCE_TAR_INDEX) {
		/* tar member data start on 512-byte records */
		if (b->opts.blkszbits && b->opts.blkszbits != 9) {
			kiln_log(&b->lg, KILN_LOG_ERROR, "--tar-index images "
				 "have 512-byte blocks, as tar records are "
				 "(-b %u asked)",
				 1u << KILN_MIN(b->opts.blkszbits, 31u));
			return -EINVAL;
		}
		if (b->opts.compress.codec != KILN_CODEC_NONE) {
			kiln_log(&b->lg, KILN_LOG_ERROR, "--tar-index stores "
				 "no file data in the image: there is nothing "
				 "to compress (-z)");
			return -EINVAL;
		}
		b->blkszbits = 9;
	}
	if (b->blkszbits < EROFS_MIN_BLKSZBITS ||
	    b->blkszbits > EROFS_MAX_BLKSZBITS) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "block size %u not supported (512 to 4096)",
			 1u << KILN_MIN(b->blkszbits, 31u));
		return -EINVAL;
	}
	b->blksz = 1u << b->blkszbits;
	if (b->opts.volume_label && strlen(b->opts.volume_label) > 15) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "volume label longer than 15 bytes");
		return -EINVAL;
	}
	if (b->opts.source_kind != KILN_SOURCE_DIR &&
	    b->opts.source_kind != KILN_SOURCE_TAR &&
	    b->opts.source_kind != KILN_SOURCE_TAR_INDEX &&
	    b->opts.source_kind != KILN_SOURCE_OCI) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: unknown source kind %d",
			 source, (int)b->opts.source_kind);
		return -EINVAL;
	}
	if (b->opts.oci_layer && b->opts.source_kind != KILN_SOURCE_OCI) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: an OCI layer (--oci-layer) "
			 "needs an OCI image source (--oci)", source);
		return -EINVAL;
	}
	if (b->opts.source_kind == KILN_SOURCE_OCI && !b->opts.oci_layer &&
	    b->opts.whiteouts != KILN_WHITEOUTS_AUTO) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a flattened OCI image "
			 "applies its whiteouts: --whiteouts is for one layer "
			 "(--oci-layer)", source);
		return -EINVAL;
	}
	if (b->opts.packed_segment_size % (1u << 20) ||
	    b->opts.packed_segment_size > (1ull << 30)) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "packed segment size %llu: must be a multiple of 1 MiB up to 1 GiB",
			 (unsigned long long)b->opts.packed_segment_size);
		return -EINVAL;
	}
	if (b->opts.packed_order != KILN_PACKED_ORDER_SIMILAR &&
	    b->opts.packed_order != KILN_PACKED_ORDER_PATH) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "packed order %d unknown",
			 (int)b->opts.packed_order);
		return -EINVAL;
	}
	if ((b->opts.flags & KILN_BUILD_VERITY) &&
	    b->opts.source_kind == KILN_SOURCE_TAR_INDEX) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "%s: --verity hashes the image's own blocks, and a tar index keeps the file data in the tar: build the image with the data instead",
			 source);
		return -EINVAL;
	}
	if (b->opts.verity_salt_len > KILN_VERITY_SALT_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "verity salt of %zu bytes: at most %d",
			 b->opts.verity_salt_len, KILN_VERITY_SALT_MAX);
		return -EINVAL;
	}
	b->shared_xattr_min = b->opts.shared_xattr_min ? b->opts.shared_xattr_min
						       : 2;
	b->newest_mtime = INT64_MIN;
	b->feature_compat = EROFS_FEATURE_COMPAT_SB_CHKSUM |
			    EROFS_FEATURE_COMPAT_MTIME;
	if (!(b->opts.flags & KILN_BUILD_NO_XATTR_FILTER))
		b->feature_compat |= EROFS_FEATURE_COMPAT_XATTR_FILTER;
	err = kiln_target_resolve(b, len);
	if (err)
		return err;
	/* a broken file_contexts fails here, before the image is opened */
	if (b->opts.file_contexts)
		return kiln_selabel_open(&b->selabel, b->opts.file_contexts,
					 b->opts.mount_point, &b->lg);
	return 0;
}

/*
 * Times: the build time is given, or the newest mtime in the tree (so a
 * default build is reproducible). Compact inodes need mtime == epoch.
 */
static void settle_times(struct kiln_build *b)
{
	const struct kiln_build_opts *o = &b->opts;

	b->build_time = (o->flags & KILN_BUILD_BUILD_TIME) ? o->build_time
							   : b->newest_mtime;
	for (size_t i = 0; i < b->nr_nodes; i++) {
		struct kiln_node *n = b->nodes[i];

		if (o->flags & KILN_BUILD_FIXED_MTIME) {
			n->mtime = o->fixed_mtime;
			n->mtime_nsec = 0;
		} else if ((o->flags & KILN_BUILD_CLAMP_MTIME) &&
			   n->mtime >= b->build_time) {
			if (n->mtime > b->build_time)
				n->mtime_nsec = 0;
			n->mtime = b->build_time;
		}
	}
	b->epoch = (o->flags & KILN_BUILD_FIXED_MTIME) ? o->fixed_mtime
						       : b->build_time;
	b->fixed_nsec = 0;
	if (!kiln_zctx_48bit(b->zctx))
		return;
	/*
	 * An image only 6.15+ kernels mount anyway (48-bit layout, metabox):
	 * compact inodes may store their mtime as seconds after the epoch,
	 * so the epoch becomes the oldest mtime. The 48-bit feature is what
	 * tells older kernels (which would take every compact mtime for the
	 * epoch) to refuse it.
	 */
	{
		int64_t oldest = INT64_MAX;

		for (size_t i = 0; i < b->nr_nodes; i++)
			oldest = KILN_MIN(oldest, b->nodes[i]->mtime);
		if (oldest == INT64_MAX)
			return;
		b->epoch = oldest;
		b->rel_mtime = true;
		b->feature_incompat |= EROFS_FEATURE_INCOMPAT_48BIT;
	}
}

static void build_release(struct kiln_build *b)
{
	kiln_out_abort(b->out);
	b->out = NULL;
	kiln_packed_free(b);
	kiln_threadpool_free(b->pool);
	kiln_zshift_free(b->zshift);
	if (b->zctx) {
		for (size_t i = 0; i < b->nr_nodes; i++)
			kiln_zfile_free(b->nodes[i]->zf);
		kiln_zctx_free(b->zctx);
	}
	kiln_tree_free(b);
	free(b->order);
	kiln_progress_release(&b->progress);
	kiln_xattr_table_release(&b->xt);
	kiln_selabel_close(b->selabel);
	kiln_tar_index_close(b);
	free(b->tails);
	free(b->iobuf);
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

KILN_API int kiln_build(const char *source, const char *image,
			const struct kiln_build_opts *opts,
			struct kiln_build_stats *stats)
{
	struct kiln_build *b = calloc(1, sizeof(*b));
	struct timespec t0;
	int err;

	if (!b)
		return -ENOMEM;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = build_setup(b, source, image, opts);
	/* 1. the tree, in memory, without file data */
	if (!err && b->opts.source_kind == KILN_SOURCE_DIR)
		err = kiln_scan_tree(b);
	/* b->zctx stays NULL when no compression is asked for */
	if (!err)
		err = kiln_zctx_new(&b->opts, b->blkszbits, &b->lg, &b->zctx);
	if (!err)
		err = kiln_out_open(&b->out, image, b->blkszbits,
				    kiln_super_first_data_blk(b->blkszbits),
				    &b->lg);
	if (!err)
		kiln_out_set_progress(b->out, &b->progress);
	/* 1. (tar) the tree and regular files' data, in one pass */
	if (!err && (b->opts.source_kind == KILN_SOURCE_TAR ||
		     b->opts.source_kind == KILN_SOURCE_TAR_INDEX))
		err = kiln_tar_scan(b);
	/* 1. (OCI) the same, over the layers: flattened, in two passes */
	if (!err && b->opts.source_kind == KILN_SOURCE_OCI)
		err = kiln_oci_scan(b);
	if (!err)
		settle_times(b);
	/* 2. file data, depth first (tar: the rest of it) */
	if (!err)
		err = kiln_data_write_all(b);
	/* 2b. fragments: the packed inode, after every file's tail */
	if (!err)
		err = kiln_packed_write(b);
	/*
	 * 3. inode positions and nids (and directory blocks), 4. the
	 * metadata, 5. the superblock
	 */
	if (!err)
		err = kiln_place_assign_nids(b);
	if (!err)
		err = kiln_place_write_meta(b);
	if (!err)
		err = kiln_super_write(b);
	/* 6. with --verify: read the image back before it takes the name */
	if (!err && (b->opts.flags & KILN_BUILD_VERIFY))
		err = kiln_verify(b, b->image_blocks << b->blkszbits);
	/* 7. with --verity: the hash tree, after the image */
	b->stats.total_bytes = b->image_blocks << b->blkszbits;
	if (!err && (b->opts.flags & KILN_BUILD_VERITY)) {
		err = kiln_verity_write(b, b->image_blocks);
		b->stats.total_bytes += b->stats.verity.hash_blocks <<
					b->blkszbits;
	}
	if (!err) {
		struct kiln_out *out = b->out;

		b->out = NULL;
		err = kiln_out_commit(out, b->stats.total_bytes);
	}
	if (!err) {
		kiln_progress_out_reach(&b->progress,
					b->image_blocks << b->blkszbits);
		kiln_progress_end(&b->progress);
		b->stats.peak_rss = kiln_peak_rss();
		b->stats.image_bytes = b->image_blocks << b->blkszbits;
		b->stats.shared_xattrs = b->xt.nr_shared;
		b->stats.seconds = elapsed(&t0);
		if (stats)
			*stats = b->stats;
	} else if (err == -ENOMEM) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: out of memory", image);
	}
	build_release(b);
	free(b);
	return err;
}
