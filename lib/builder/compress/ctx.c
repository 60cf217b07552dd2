// SPDX-License-Identifier: MIT
/*
 * The per-build compression context: options checked and resolved once,
 * codec workspaces shared by the build's threads, and the record of what
 * the image ended up using (superblock feature bits and config records).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builder/compress/dedupe.h"
#include "builder/compress/frag.h"
#include "builder/compress/internal.h"
#include "format/erofs_fs.h"
#include "format/kernel.h"
#include "util/checked.h"
#include "util/endian.h"
#include "util/threadpool.h"
#include "util/wspool.h"

#define EXTENT_DEFAULT_SIZE	(64u * 1024)
/* Bound on all compress workspaces together (one always exists). */
#define ZWS_MEM_LIMIT		((size_t)1 << 30)
/*
 * Input offered to one classic pcluster: enough for very compressible
 * data to fill it, small enough that a search over prefixes stays cheap.
 */
#define CLASSIC_MIN_INPUT	(1u * 1024 * 1024)
#define CLASSIC_INPUT_FACTOR	64u
/* The packed inode's pclusters by default (packed_ctx_new()). */
#define PACKED_PCLUSTER_DEFAULT	(256u * 1024)

/* Fields appended to kiln_build_opts after its first release. */
#define OPT_HAS(o, field)						\
	((o)->struct_size >= offsetof(struct kiln_build_opts, field) +	\
				 sizeof((o)->field))

/*
 * Classic unless extents are asked for: "auto" is resolved to classic
 * before (target.c), as every kernel with the codec reads it.
 */
static enum kiln_compress_layout resolve_layout(enum kiln_compress_layout l)
{
	return l == KILN_COMPRESS_LAYOUT_EXTENTS ? l : KILN_COMPRESS_LAYOUT_CLASSIC;
}

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static int check_sizes(struct kiln_zctx *zc, uint32_t pcluster_size)
{
	const uint32_t bs = kiln_zctx_blksz(zc);

	if (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS) {
		zc->pcluster_size = pcluster_size ? pcluster_size :
						    EXTENT_DEFAULT_SIZE;
		if (!is_pow2(zc->pcluster_size) || zc->pcluster_size < bs ||
		    zc->pcluster_size > Z_EROFS_PCLUSTER_MAX_SIZE) {
			kiln_log(&zc->lg, KILN_LOG_ERROR,
				 "extent size %u: must be a power of two from the block size (%u) to 1 MiB",
				 zc->pcluster_size, bs);
			return -EINVAL;
		}
		zc->max_in = zc->pcluster_size;
		return 0;
	}
	zc->pcluster_size = pcluster_size ? pcluster_size : bs;
	if (zc->pcluster_size % bs ||
	    zc->pcluster_size > Z_EROFS_PCLUSTER_MAX_SIZE) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "pcluster size %u: must be a multiple of the block size (%u) up to 1 MiB",
			 zc->pcluster_size, bs);
		return -EINVAL;
	}
	zc->max_in = KILN_MAX(CLASSIC_MIN_INPUT,
			      CLASSIC_INPUT_FACTOR * zc->pcluster_size);
	zc->max_in = KILN_MIN(zc->max_in, Z_EROFS_EXTENT_MAX_LEN);
	return 0;
}

static int zctx_pool_new(struct kiln_zctx *zc,
			 const struct kiln_build_opts *opts);

/*
 * What a context (a compress hint's too) writes must mount on the target
 * (0: none given); the root's options were checked before (target.c).
 */
static int check_target(const struct kiln_zctx *zc, unsigned int target)
{
	enum kiln_kfeature f = KILN_KF_EROFS;
	const struct kiln_kernel_feature *k;

	if (!target)
		return 0;
	if (zc->ops->erofs_alg == Z_EROFS_COMPRESSION_LZMA)
		f = KILN_KF_LZMA;
	else if (zc->ops->erofs_alg == Z_EROFS_COMPRESSION_DEFLATE)
		f = KILN_KF_DEFLATE;
	else if (zc->ops->erofs_alg == Z_EROFS_COMPRESSION_ZSTD)
		f = KILN_KF_ZSTD;
	if (kiln_kernel_allows(target, f) &&
	    (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS ||
	     zc->pcluster_size <= kiln_zctx_blksz(zc) ||
	     kiln_kernel_allows(target, (f = KILN_KF_BIG_PCLUSTER))))
		return 0;
	k = kiln_kernel_feature(f);
	kiln_log(&zc->lg, KILN_LOG_ERROR,
		 "%s (pclusters up to %u bytes) needs Linux %s (%s); the target is %u.%u",
		 zc->ops->name, zc->pcluster_size, k->version, k->name,
		 target / 100, target % 100);
	return -EINVAL;
}

/*
 * Classic layout: the packed inode's pclusters may be bigger than the
 * files'. The fragments make one stream, so a bigger window pays most
 * there. But a cold read of a small file decodes its whole pcluster (up
 * to 64 times its size, about 4 times in text), so the default stays at
 * 256 KiB, where small-file reads through the kernel stay close to
 * mksquashfs's image (bench/README.md, "Measurements behind the
 * defaults", has the sizes and read times of each choice).
 */
static int packed_ctx_new(struct kiln_zctx *zc,
			  const struct kiln_build_opts *opts,
			  const struct kiln_compress_spec *spec)
{
	uint32_t size = OPT_HAS(opts, packed_pcluster_size) ?
			opts->packed_pcluster_size : 0;

	if (!zc->frag || zc->layout != KILN_COMPRESS_LAYOUT_CLASSIC)
		return 0;
	if (!size)
		size = KILN_MAX(zc->pcluster_size, PACKED_PCLUSTER_DEFAULT);
	if (size % kiln_zctx_blksz(zc) || size > Z_EROFS_PCLUSTER_MAX_SIZE) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "packed pcluster size %u: must be a multiple of the block size (%u) up to 1 MiB",
			 size, kiln_zctx_blksz(zc));
		return -EINVAL;
	}
	if (size <= zc->pcluster_size)
		return 0;
	return kiln_zctx_new_child(zc, opts, spec, size, &zc->packed);
}

/* The codec of @spec and its level (0: the codec's default) into @zc. */
static int zctx_set_codec(struct kiln_zctx *zc,
			  struct kiln_compress_spec *spec)
{
	zc->ops = kiln_codec_get(spec->codec);
	if (!zc->ops) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "compression codec %s is not built in",
			 kiln_codec_name(spec->codec));
		return -EOPNOTSUPP;
	}
	if (kiln_codec_level_ok(zc->ops, spec->level))
		return 0;
	if (spec->level) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "%s: level %d out of range %d..%d",
			 zc->ops->name, spec->level,
			 zc->ops->min_level, zc->ops->max_level);
		return -EINVAL;
	}
	spec->level = zc->ops->default_level;
	return 0;
}

/*
 * The flags and layout of @opts into @zc, checked against each other,
 * and the dedupe table and fragment buffer they ask for.
 */
static int zctx_set_flags(struct kiln_zctx *zc,
			  const struct kiln_build_opts *opts)
{
	int err;

	zc->flags = opts->compress_flags;
	zc->layout = resolve_layout(opts->compress_layout);
	if ((zc->flags & KILN_COMPRESS_DEDUPE_SHIFTED) &&
	    !(zc->flags & KILN_COMPRESS_DEDUPE)) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "shifted dedupe needs dedupe");
		return -EINVAL;
	}
	if (zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS &&
	    (zc->flags & KILN_COMPRESS_ZTAILPACKING)) {
		kiln_log(&zc->lg, KILN_LOG_WARN,
			 "ztailpacking applies to the classic layout only; ignored");
		zc->flags &= ~(unsigned int)KILN_COMPRESS_ZTAILPACKING;
	}
	if (zc->flags & KILN_COMPRESS_FRAGMENTS) {
		/* a quarter of --memory-limit, as the workspaces */
		size_t frag_mem = 0;

		if (OPT_HAS(opts, memory_limit) && opts->memory_limit)
			frag_mem = (size_t)KILN_MIN(opts->memory_limit / 4,
						    (uint64_t)KILN_FRAG_MEM_DEFAULT);
		err = kiln_frag_new(frag_mem, NULL, &zc->frag);
		if (err)
			return err;
	}
	if (zc->flags & KILN_COMPRESS_DEDUPE)
		return kiln_dedupe_new(&zc->dd);
	return 0;
}

/* The raw margin and the codec parameters, once the sizes are known. */
static void zctx_set_params(struct kiln_zctx *zc,
			    const struct kiln_build_opts *opts, int level)
{
	/*
	 * Classic pclusters are whole blocks: saving less than one is no
	 * saving. Packed extents save real bytes; ask for 1/16 of an extent.
	 */
	zc->raw_margin = opts->raw_margin;
	if (!zc->raw_margin)
		zc->raw_margin = zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS ?
			KILN_MIN(kiln_zctx_blksz(zc), zc->pcluster_size / 16) :
			kiln_zctx_blksz(zc);
	zc->params.level = level;
	zc->params.blksz = kiln_zctx_blksz(zc);
	/* byte-aligned pclusters may touch one block more than their size */
	zc->params.max_pcluster_size = zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS ?
		KILN_MIN(zc->pcluster_size + kiln_zctx_blksz(zc),
			 Z_EROFS_PCLUSTER_MAX_SIZE) : zc->pcluster_size;
}

int kiln_zctx_new(const struct kiln_build_opts *opts, unsigned int blkszbits,
		  const struct kiln_logger *lg, struct kiln_zctx **out)
{
	struct kiln_compress_spec spec;
	struct kiln_zctx *zc;
	int err;

	*out = NULL;
	if (!opts || !OPT_HAS(opts, raw_margin))
		return 0;
	if (opts->compress.codec == KILN_CODEC_NONE) {
		if (!OPT_HAS(opts, compress_hints) || !opts->compress_hints)
			return 0;
		kiln_log(lg, KILN_LOG_ERROR,
			 "%s: compress hints need a default codec (--compress)",
			 opts->compress_hints);
		return -EINVAL;
	}
	spec = opts->compress;
	zc = calloc(1, sizeof(*zc));
	if (!zc)
		return -ENOMEM;
	/* from here on, every failure goes through kiln_zctx_free() */
	pthread_mutex_init(&zc->lock, NULL);
	zc->root = zc;
	if (lg)
		zc->lg = *lg;
	zc->blkszbits = blkszbits;
	err = zctx_set_codec(zc, &spec);
	if (!err)
		err = zctx_set_flags(zc, opts);
	if (err)
		goto fail;
	if (OPT_HAS(opts, kernel))
		zc->target = opts->kernel;
	err = check_sizes(zc, opts->pcluster_size);
	if (!err)
		err = check_target(zc, zc->target);
	if (err)
		goto fail;
	zctx_set_params(zc, opts, spec.level);
	err = zctx_pool_new(zc, opts);
	if (err) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "%s: cannot set up compression workspaces: %s",
			 zc->ops->name, kiln_strerror(err));
		goto fail;
	}
	if (OPT_HAS(opts, compress_hints) && opts->compress_hints) {
		err = kiln_zctx_load_hints(zc, opts->compress_hints, opts);
		if (err)
			goto fail;
	}
	err = packed_ctx_new(zc, opts, &spec);
	if (err)
		goto fail;
	*out = zc;
	return 0;
fail:
	kiln_zctx_free(zc);
	return err;
}

void kiln_zctx_free(struct kiln_zctx *zc)
{
	if (!zc)
		return;
	kiln_zctx_free_hints(zc);
	kiln_zctx_free(zc->packed);
	kiln_wspool_free(zc->pool);
	/* a hint's context borrows its root's dedupe table and fragments */
	if (zc->root == zc) {
		kiln_dedupe_free(zc->dd);
		kiln_frag_free(zc->frag);
	}
	pthread_mutex_destroy(&zc->lock);
	free(zc);
}

static int zws_init(void *ctx, void *ws, size_t ws_size)
{
	const struct kiln_zctx *zc = ctx;

	return kiln_codec_cws_init(zc->ops, ws, ws_size, &zc->params);
}

static void zws_fini(void *ctx, void *ws)
{
	const struct kiln_zctx *zc = ctx;

	kiln_codec_cws_fini(zc->ops, ws);
}

/*
 * Compress workspaces: one made now, more on demand up to one per build
 * thread and ZWS_MEM_LIMIT bytes, or a quarter of the memory limit (the
 * rest bounds the data in flight, pipeline.c); beyond that compressing
 * threads wait for one.
 */
static int zctx_pool_new(struct kiln_zctx *zc,
			 const struct kiln_build_opts *opts)
{
	struct kiln_wspool_opts po = { 0 };
	unsigned int threads = opts->threads ? opts->threads : kiln_cpu_count();

	po.ws_size = zc->ops->compress_wsize(zc->params.level, zc->max_in);
	if (!po.ws_size)
		po.ws_size = 64;
	po.mem_limit = ZWS_MEM_LIMIT;
	if (OPT_HAS(opts, memory_limit) && opts->memory_limit)
		po.mem_limit = (size_t)KILN_MIN(opts->memory_limit / 4,
						(uint64_t)ZWS_MEM_LIMIT);
	po.max_count = threads;
	po.init = zws_init;
	po.fini = zws_fini;
	po.ctx = zc;
	return kiln_wspool_new(&po, &zc->pool);
}

void *kiln_zctx_get_ws(struct kiln_zctx *zc)
{
	return kiln_wspool_get(zc->pool);
}

void kiln_zctx_put_ws(struct kiln_zctx *zc, void *ws)
{
	kiln_wspool_put(zc->pool, ws);
}

/* Record the features @zf's map and pclusters need. */
void kiln_zctx_note_file(struct kiln_zctx *zc, const struct kiln_zfile *zf)
{
	uint32_t incompat = EROFS_FEATURE_INCOMPAT_ZERO_PADDING;
	uint16_t algs = 0;
	uint32_t max_plen = 0;

	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (e->fmt)
			algs |= (uint16_t)(1u << (e->fmt - 1));
		if (e->flags & KILN_ZEXT_FRAGMENT)
			incompat |= EROFS_FEATURE_INCOMPAT_FRAGMENTS;
		if (e->flags & KILN_ZEXT_PARTIAL)
			incompat |= EROFS_FEATURE_INCOMPAT_DEDUPE;
		if (!(e->flags & (KILN_ZEXT_INLINE | KILN_ZEXT_FRAGMENT)))
			max_plen = KILN_MAX(max_plen, e->plen);
	}
	if (zf->big)
		incompat |= EROFS_FEATURE_INCOMPAT_BIG_PCLUSTER;
	if (zf->idata_size)
		incompat |= EROFS_FEATURE_INCOMPAT_ZTAILPACKING;
	if (zf->kind == KILN_ZMAP_FRAGMENT)
		incompat |= EROFS_FEATURE_INCOMPAT_FRAGMENTS;
	/* a classic file's map may still become extent records at commit */
	if (zf->kind == KILN_ZMAP_EXTENTS || kiln_zctx_48bit(zc))
		incompat |= EROFS_FEATURE_INCOMPAT_48BIT |
			    EROFS_FEATURE_INCOMPAT_COMPR_CFGS;
	if (algs & ~(1u << Z_EROFS_COMPRESSION_LZ4))
		incompat |= EROFS_FEATURE_INCOMPAT_COMPR_CFGS;
	zc = zc->root;		/* hints: the image's record is the root's */
	pthread_mutex_lock(&zc->lock);
	zc->used_incompat |= incompat;
	zc->used_algs |= algs;
	zc->max_plen = KILN_MAX(zc->max_plen, max_plen);
	pthread_mutex_unlock(&zc->lock);
}

bool kiln_zctx_extents(const struct kiln_zctx *zc)
{
	return zc && zc->layout == KILN_COMPRESS_LAYOUT_EXTENTS;
}

bool kiln_zctx_48bit(const struct kiln_zctx *zc)
{
	if (zc && zc->root)
		zc = zc->root;
	return kiln_zctx_extents(zc) ||
	       (zc && (zc->flags & KILN_COMPRESS_METABOX));
}

bool kiln_zctx_dedupe(const struct kiln_zctx *zc)
{
	return zc && zc->dd;
}

bool kiln_zctx_fragment_whole(const struct kiln_zctx *zc, uint64_t size)
{
	return zc && zc->frag && (zc->flags & KILN_COMPRESS_FRAGMENTS) &&
	       size <= zc->pcluster_size;
}

void kiln_zctx_features(const struct kiln_zctx *zc, uint32_t *incompat,
			uint16_t *u1)
{
	*incompat = 0;
	*u1 = 0;
	if (!zc || !zc->used_incompat)
		return;
	*incompat = zc->used_incompat;
	/* an LZ4-only image without big pclusters has no config records */
	if (*incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS)
		*u1 = zc->used_algs;
}

/*
 * Config record parameters for on-disk algorithm @alg: the largest
 * pcluster any context (the root or a hint's) may write with it.
 */
static void cfg_params(const struct kiln_zctx *zc, unsigned int alg,
		       struct kiln_codec_params *p)
{
	*p = zc->params;
	p->max_pcluster_size = zc->ops->erofs_alg == alg ?
			       zc->params.max_pcluster_size : 0;
	for (size_t i = 0; i < zc->nr_hints; i++) {
		const struct kiln_zctx *h = zc->hints[i].zc;

		if (h && h->ops->erofs_alg == alg)
			p->max_pcluster_size = KILN_MAX(p->max_pcluster_size,
						h->params.max_pcluster_size);
	}
	if (zc->packed && zc->packed->ops->erofs_alg == alg)
		p->max_pcluster_size = KILN_MAX(p->max_pcluster_size,
					zc->packed->params.max_pcluster_size);
	if (!p->max_pcluster_size)
		p->max_pcluster_size = zc->params.max_pcluster_size;
}

ssize_t kiln_zctx_cfgs_encode(const struct kiln_zctx *zc, uint64_t pos,
			      void *dst, size_t cap)
{
	uint8_t payload[64];
	uint64_t at = pos;
	uint32_t incompat;
	uint16_t algs;

	kiln_zctx_features(zc, &incompat, &algs);
	if (!(incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS))
		return 0;
	for (unsigned int alg = 0; alg < Z_EROFS_COMPRESSION_MAX; alg++) {
		const struct kiln_codec_ops *ops;
		struct kiln_codec_params params;
		uint64_t rec;
		ssize_t n;

		if (!(algs & (1u << alg)))
			continue;
		cfg_params(zc, alg, &params);
		ops = kiln_codec_by_erofs_alg(alg);
		if (!ops || !ops->config_encode)
			return -EOPNOTSUPP;
		n = ops->config_encode(&params, payload, sizeof(payload));
		if (n < 0)
			return n;
		rec = kiln_round_up(at, 4);
		if (dst) {
			uint8_t *d = (uint8_t *)dst + (at - pos);

			if (rec + 2 + (uint64_t)n - pos > cap)
				return -ENOSPC;
			memset(d, 0, rec - at);
			d += rec - at;
			kiln_put_le16(d, (uint16_t)n);
			memcpy(d + 2, payload, (size_t)n);
		}
		at = rec + 2 + (uint64_t)n;
	}
	return (ssize_t)(at - pos);
}
