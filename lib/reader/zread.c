// SPDX-License-Identifier: MIT
/*
 * Reading compressed files: map each piece of a request to its extent and
 * decode straight into the caller's buffer when the request covers the
 * extent from its start; otherwise decode into reused scratch (per file,
 * or a buffer of the image's decompressed-extent cache) and copy.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec.h"
#include "format/erofs_fs.h"
#include "reader/zcache.h"
#include "reader/verity.h"
#include "reader/zmap.h"
#include "util/checked.h"
#include "util/wspool.h"

#define ZCACHE_DEFAULT_SIZE	(8u << 20)
#define ZWS_MEM_LIMIT		(64u << 20)

/* Image-wide state: decompression workspaces and the extent cache. */
struct kiln_zctx {
	struct kiln_image *img;
	struct kiln_wspool *pool;
	/* each workspace holds one region per algorithm the image uses */
	size_t region_off[Z_EROFS_COMPRESSION_MAX];
	size_t region_size[Z_EROFS_COMPRESSION_MAX];
	struct kiln_zcache *cache;	/* NULL with KILN_CACHE_NONE */
};

/* Per-file state: the map, the hint, reused scratch. */
struct kiln_zstate {
	struct kiln_zmap map;
	uint8_t *scratch;
	size_t scratch_cap;
	bool scratch_valid;		/* holds the extent below, decoded */
	uint64_t scratch_la, scratch_pa;
	size_t scratch_len;
	/* bytes [hole, hole_end) went straight to a caller, not to scratch */
	size_t hole, hole_end;
	uint64_t next_off;		/* where the previous read ended */
	struct kiln_file *packed;	/* opened on the first fragment */
};

/* ---- image context ------------------------------------------------------ */

static int zctx_ws_init(void *arg, void *ws, size_t ws_size)
{
	struct kiln_zctx *z = arg;
	unsigned int alg;
	int err;

	(void)ws_size;
	for (alg = 0; alg < Z_EROFS_COMPRESSION_MAX; alg++) {
		if (!z->region_size[alg])
			continue;
		err = kiln_codec_dws_init(kiln_codec_by_erofs_alg(alg),
					  (uint8_t *)ws + z->region_off[alg],
					  z->region_size[alg]);
		if (err)
			goto undo;
	}
	return 0;
undo:
	while (alg-- > 0)
		if (z->region_size[alg])
			kiln_codec_dws_fini(kiln_codec_by_erofs_alg(alg),
					    (uint8_t *)ws + z->region_off[alg]);
	return err;
}

static void zctx_ws_fini(void *arg, void *ws)
{
	struct kiln_zctx *z = arg;

	for (unsigned int alg = 0; alg < Z_EROFS_COMPRESSION_MAX; alg++)
		if (z->region_size[alg])
			kiln_codec_dws_fini(kiln_codec_by_erofs_alg(alg),
					    (uint8_t *)ws + z->region_off[alg]);
}

static void zctx_free(struct kiln_zctx *z)
{
	if (!z)
		return;
	kiln_wspool_free(z->pool);
	kiln_zcache_free(z->cache);
	free(z);
}

static int zctx_new(struct kiln_image *img, struct kiln_zctx **out)
{
	struct kiln_wspool_opts po = { 0 };
	struct kiln_zctx *z;
	size_t total = 0;
	long cpus;
	int err;

	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->img = img;
	/* 1. lay out one region per algorithm the superblock announces */
	for (unsigned int alg = 0; alg < Z_EROFS_COMPRESSION_MAX; alg++) {
		const struct kiln_codec_ops *ops = kiln_codec_by_erofs_alg(alg);

		if (!(img->sb.compr_algs & (1u << alg)) || !ops)
			continue;
		z->region_off[alg] = total;
		z->region_size[alg] = kiln_round_up(
			KILN_MAX(ops->decompress_wsize(KILN_CODEC_MAX_OUT),
				 (size_t)64), 64);
		total += z->region_size[alg];
	}
	/* 2. a pool of them, one per CPU at most */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	po.ws_size = total ? total : 64;
	po.mem_limit = ZWS_MEM_LIMIT;
	po.max_count = cpus > 0 ? (unsigned int)cpus : 1;
	po.init = zctx_ws_init;
	po.fini = zctx_ws_fini;
	po.ctx = z;
	err = kiln_wspool_new(&po, &z->pool);
	if (err)
		goto fail;
	/* 3. the shared cache */
	if (img->cache != KILN_CACHE_NONE) {
		err = kiln_zcache_new(img->cache_size ? img->cache_size :
				      ZCACHE_DEFAULT_SIZE, &z->cache);
		if (err)
			goto fail;
	}
	*out = z;
	return 0;
fail:
	zctx_free(z);
	return err;
}

/* The image's context, made by the first compressed read (race-free). */
static int zctx_get(struct kiln_image *img, struct kiln_zctx **out)
{
	struct kiln_zctx *z = __atomic_load_n((struct kiln_zctx **)&img->zctx,
					      __ATOMIC_ACQUIRE);
	void *expected = NULL;
	int err;

	if (z) {
		*out = z;
		return 0;
	}
	err = zctx_new(img, &z);
	if (err)
		return err;
	if (!__atomic_compare_exchange_n(&img->zctx, &expected, z, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		zctx_free(z);
		z = expected;
	}
	*out = z;
	return 0;
}

void kiln_zimage_release(struct kiln_image *img)
{
	zctx_free(img->zctx);
	img->zctx = NULL;
}

/* ---- decoding ----------------------------------------------------------- */

/* The stream bytes of a compressed extent: pcluster minus zero padding. */
static int zr_stream(struct kiln_file *file, const struct kiln_zext *ext,
		     const uint8_t **src, size_t *src_len)
{
	struct kiln_image *img = file->img;
	const uint8_t *p = kiln_databuf_get(img, ext->pa, ext->plen);
	size_t skip = 0, window;

	if (!p && kiln_verity_failed(img, ext->pa, ext->plen))
		return -KILN_ECORRUPT;
	if (!p || !ext->plen)
		return KILN_CORRUPT(img, "nid %llu: pcluster at %llu (%u bytes) outside the image",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)ext->pa, ext->plen);
	if (ext->zero_padded) {
		/* the stream starts inside the pcluster's first block */
		window = KILN_MIN((size_t)ext->plen,
				  img->sb.blksz - (size_t)(ext->pa % img->sb.blksz));
		while (skip < window && !p[skip])
			skip++;
		if (skip == window)
			return KILN_CORRUPT(img, "nid %llu: no compressed data in the pcluster at %llu",
					    (unsigned long long)file->inode.nid,
					    (unsigned long long)ext->pa);
	}
	*src = p + skip;
	*src_len = ext->plen - skip;
	return 0;
}

/*
 * Decode the first @dst_len bytes of @ext into @dst; @partial when that
 * is less than the whole extent (or the stream holds more, PARTIAL_REF).
 */
static int zr_decode_any(struct kiln_file *file, struct kiln_zctx *z,
			 const struct kiln_zext *ext,
			 const struct kiln_codec_seg *seg, unsigned int nr,
			 bool partial);

static int zr_decode(struct kiln_file *file, struct kiln_zctx *z,
		     const struct kiln_zext *ext, void *dst, size_t dst_len,
		     bool partial)
{
	struct kiln_codec_seg seg = { dst, dst_len };

	return zr_decode_any(file, z, ext, &seg, 1, partial);
}

/* The whole extent, delivered to @nr segments (ops->decompress_segs). */
static int zr_decode_segs(struct kiln_file *file, struct kiln_zctx *z,
			  const struct kiln_zext *ext,
			  const struct kiln_codec_seg *seg, unsigned int nr)
{
	return zr_decode_any(file, z, ext, seg, nr, false);
}

static int zr_decode_any(struct kiln_file *file, struct kiln_zctx *z,
			 const struct kiln_zext *ext,
			 const struct kiln_codec_seg *seg, unsigned int nr,
			 bool partial)
{
	size_t dst_len = 0;
	const struct kiln_codec_ops *ops = kiln_codec_by_erofs_alg(ext->alg);
	const uint8_t *src = NULL;
	size_t src_len = 0;
	uint8_t *ws;
	int err;

	if (!ops || !z->region_size[ext->alg]) {
		kiln_log(&file->img->logger, KILN_LOG_ERROR,
			 "nid %llu: compression algorithm %u is not built in",
			 (unsigned long long)file->inode.nid, ext->alg);
		return -EOPNOTSUPP;
	}
	err = zr_stream(file, ext, &src, &src_len);
	if (err)
		return err;
	/* without 0padding an LZ4 stream's length is unknown: stop early */
	if (!ext->zero_padded)
		partial = true;
	for (unsigned int i = 0; i < nr; i++)
		dst_len += seg[i].len;
	ws = kiln_wspool_get(z->pool);
	if (nr == 1)
		err = ops->decompress(ws + z->region_off[ext->alg], seg[0].dst,
				      seg[0].len, src, src_len,
				      partial || ext->partial);
	else
		err = ops->decompress_segs(ws + z->region_off[ext->alg], seg,
					   nr, src, src_len,
					   partial || ext->partial);
	kiln_wspool_put(z->pool, ws);
	if (err == -KILN_ECORRUPT)
		return KILN_CORRUPT(file->img, "nid %llu: %s stream at %llu does not decode to %zu bytes",
				    (unsigned long long)file->inode.nid,
				    ops->name, (unsigned long long)ext->pa,
				    dst_len);
	return err;
}

static int zr_scratch(struct kiln_zstate *zs, size_t len)
{
	uint8_t *p;

	if (zs->scratch_cap >= len)
		return 0;
	p = realloc(zs->scratch, len);
	if (!p)
		return -ENOMEM;
	zs->scratch = p;
	zs->scratch_cap = len;
	return 0;
}

/* The scratch now holds the first @len decoded bytes of extent @ext. */
static void zr_scratch_keep(struct kiln_zstate *zs,
			    const struct kiln_zext *ext, size_t len)
{
	zs->scratch_valid = true;
	zs->scratch_la = ext->la;
	zs->scratch_pa = ext->pa;
	zs->scratch_len = len;
}

static int zr_compressed(struct kiln_file *file, struct kiln_zstate *zs,
			 struct kiln_zctx *z, const struct kiln_zext *ext,
			 uint8_t *buf, uint64_t within, size_t n, bool sequential)
{
	const struct kiln_codec_ops *ops = kiln_codec_by_erofs_alg(ext->alg);
	bool force_copy = file->img->flags & KILN_IMAGE_FORCE_COPY;
	struct kiln_zcache_key key = { ext->pa, ext->plen, ext->alg };
	struct kiln_zcache_entry *e;
	size_t llen = (size_t)ext->llen;
	uint8_t *data;
	int err;

	/* 1. the rest of the extent this file decoded last */
	if (zs->scratch_valid && zs->scratch_la == ext->la &&
	    zs->scratch_pa == ext->pa && within + n <= zs->scratch_len &&
	    (within + n <= zs->hole || within >= zs->hole_end)) {
		memcpy(buf, zs->scratch + within, n);
		return 0;
	}
	/* 2. the whole extent is wanted: decode in place */
	if (!within && n == llen && !force_copy)
		return zr_decode(file, z, ext, buf, llen, false);
	/* 3. someone decoded it recently */
	if (z->cache && kiln_zcache_read(z->cache, &key, within, buf, n))
		return 0;
	/* 4. a random read of a prefix: decode just that, in place */
	if (!within && !sequential && !force_copy && ops && ops->stops_early)
		return zr_decode(file, z, ext, buf, n, true);
	/*
	 * 5. a random read further in: decode up to its end aside and copy
	 * (the rest of the extent is unlikely to be wanted soon)
	 */
	if (!sequential && ops && ops->stops_early && within + n < llen) {
		err = zr_scratch(zs, (size_t)within + n);
		if (err)
			return err;
		zs->scratch_valid = false;
		zs->hole = zs->hole_end = 0;
		err = zr_decode(file, z, ext, zs->scratch, (size_t)within + n,
				true);
		if (err)
			return err;
		memcpy(buf, zs->scratch + within, n);
		zr_scratch_keep(zs, ext, (size_t)within + n);
		return 0;
	}
	/* 6. decode all of it aside, keep it, copy the part asked for */
	e = z->cache ? kiln_zcache_reserve(z->cache, llen, &data) : NULL;
	if (e) {
		err = zr_decode(file, z, ext, data, llen, false);
		if (err) {
			kiln_zcache_abort(z->cache, e);
			return err;
		}
		memcpy(buf, data + within, n);
		kiln_zcache_publish(z->cache, e, &key, llen);
		return 0;
	}
	err = zr_scratch(zs, llen);
	if (err)
		return err;
	zs->scratch_valid = false;
	zs->hole = zs->hole_end = 0;
	if (ops && ops->decompress_segs && !force_copy) {
		/* 7. streaming decoders: the asked part goes straight to @buf */
		struct kiln_codec_seg seg[3] = {
			{ zs->scratch, (size_t)within },
			{ buf, n },
			{ zs->scratch + within + n, llen - within - n },
		};

		err = zr_decode_segs(file, z, ext, seg, 3);
		if (err)
			return err;
		zs->hole = (size_t)within;
		zs->hole_end = (size_t)within + n;
	} else {
		err = zr_decode(file, z, ext, zs->scratch, llen, false);
		if (err)
			return err;
		memcpy(buf, zs->scratch + within, n);
	}
	zr_scratch_keep(zs, ext, llen);
	return 0;
}

/* Raw extents: shifted (byte k at pa + k) or interlaced (rotated). */
static int zr_plain(struct kiln_file *file, const struct kiln_zext *ext,
		    uint8_t *buf, uint64_t within, size_t n)
{
	struct kiln_image *img = file->img;
	const uint8_t *p = kiln_databuf_get(img, ext->pa, ext->plen);
	uint64_t r, c, end = within + n;

	if (!p && kiln_verity_failed(img, ext->pa, ext->plen))
		return -KILN_ECORRUPT;
	if (!p)
		return KILN_CORRUPT(img, "nid %llu: plain pcluster at %llu outside the image",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)ext->pa);
	if (ext->kind == KILN_ZEXT_PLAIN) {
		memcpy(buf, p + within, n);
		return 0;
	}
	/*
	 * The pcluster is rotated by the extent's offset in its block: extent
	 * byte 0 sits r bytes before the pcluster's end, r the room left in
	 * that block, even when the extent is shorter than r (as Linux reads
	 * it). Bytes [0, c) come from there, the rest from the start.
	 */
	r = img->sb.blksz - ext->la % img->sb.blksz;
	if (r > ext->plen || ext->llen > ext->plen)
		return KILN_CORRUPT(img, "nid %llu: interlaced pcluster at %llu shorter than its extent",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)ext->pa);
	c = KILN_MIN(r, ext->llen);
	if (within < c) {
		uint64_t m = KILN_MIN(end, c) - within;

		memcpy(buf, p + ext->plen - r + within, m);
		buf += m;
		within += m;
	}
	if (within < end)
		memcpy(buf, p + (within - c), end - within);
	return 0;
}

static int zr_fragment(struct kiln_file *file, struct kiln_zstate *zs,
		       const struct kiln_zext *ext, uint8_t *buf,
		       uint64_t within, size_t n)
{
	struct kiln_image *img = file->img;
	uint64_t pos;
	ssize_t got;
	int err;

	if (file->inode.nid == img->sb.packed_nid)
		return KILN_CORRUPT(img, "nid %llu: the packed inode refers to a fragment",
				    (unsigned long long)file->inode.nid);
	if (!zs->packed) {
		err = kiln_file_open(img, img->sb.packed_nid, &zs->packed);
		if (err)
			return err;
	}
	if (kiln_add_overflow(ext->pa, within, &pos))
		return KILN_CORRUPT(img, "nid %llu: fragment offset overflows",
				    (unsigned long long)file->inode.nid);
	got = kiln_file_pread(zs->packed, buf, n, pos);
	if (got < 0)
		return (int)got;
	if ((size_t)got != n)
		return KILN_CORRUPT(img, "nid %llu: fragment at %llu past the packed inode's end",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)pos);
	return 0;
}

/* ---- entry points ------------------------------------------------------- */

static int zstate_get(struct kiln_file *file, struct kiln_zstate **out)
{
	struct kiln_zstate *zs = file->zstate;
	int err;

	if (!zs) {
		zs = calloc(1, sizeof(*zs));
		if (!zs)
			return -ENOMEM;
		err = kiln_zmap_init(&zs->map, file->img, &file->inode);
		if (err) {
			free(zs);
			return err;
		}
		file->zstate = zs;
	}
	*out = zs;
	return 0;
}

ssize_t kiln_zread(struct kiln_file *file, void *buf, size_t len,
		   uint64_t off)
{
	struct kiln_zstate *zs;
	struct kiln_zctx *z;
	struct kiln_zext ext;
	uint8_t *out = buf;
	size_t done = 0;
	bool sequential;
	int err;

	err = zstate_get(file, &zs);
	if (!err)
		err = zctx_get(file->img, &z);
	if (err)
		return err;
	sequential = off == zs->next_off;
	while (done < len) {
		uint64_t pos = off + done, within;
		size_t n;

		err = kiln_zmap_lookup(&zs->map, pos, &ext);
		if (err)
			return err;
		within = pos - ext.la;
		n = (size_t)KILN_MIN((uint64_t)(len - done), ext.llen - within);
		switch (ext.kind) {
		case KILN_ZEXT_HOLE:
			memset(out + done, 0, n);
			break;
		case KILN_ZEXT_PLAIN:
		case KILN_ZEXT_INTERLACED:
			err = zr_plain(file, &ext, out + done, within, n);
			break;
		case KILN_ZEXT_FRAGMENT:
			err = zr_fragment(file, zs, &ext, out + done, within, n);
			break;
		default:
			err = zr_compressed(file, zs, z, &ext, out + done,
					    within, n, sequential);
			break;
		}
		if (err)
			return err;
		done += n;
		sequential = true;
	}
	zs->next_off = off + len;
	return (ssize_t)len;
}

int kiln_zread_extent(struct kiln_file *file, void *buf, size_t cap,
		      uint64_t off, uint64_t *ext_off, size_t *ext_len)
{
	struct kiln_zstate *zs;
	struct kiln_zctx *z;
	struct kiln_zext ext;
	size_t llen;
	int err;

	err = zstate_get(file, &zs);
	if (!err)
		err = zctx_get(file->img, &z);
	if (!err)
		err = kiln_zmap_lookup(&zs->map, off, &ext);
	if (err)
		return err;
	/* no buffer holds more than SIZE_MAX bytes (32-bit hosts) */
	if (ext.llen > SIZE_MAX)
		return -ENOSPC;
	llen = (size_t)ext.llen;
	*ext_off = ext.la;
	*ext_len = llen;
	if (llen > cap)
		return -ENOSPC;
	switch (ext.kind) {
	case KILN_ZEXT_HOLE:
		memset(buf, 0, llen);
		break;
	case KILN_ZEXT_PLAIN:
	case KILN_ZEXT_INTERLACED:
		err = zr_plain(file, &ext, buf, 0, llen);
		break;
	case KILN_ZEXT_FRAGMENT:
		err = zr_fragment(file, zs, &ext, buf, 0, llen);
		break;
	default:
		/* the whole extent from its start: decoded in place */
		err = zr_compressed(file, zs, z, &ext, buf, 0, llen, true);
		break;
	}
	return err ? err : 1;
}

int kiln_zread_locate(struct kiln_file *file, uint64_t off, uint64_t max,
		      uint64_t *img_off, uint64_t *len)
{
	struct kiln_zstate *zs;
	struct kiln_zext ext;
	uint64_t within;
	int err;

	err = zstate_get(file, &zs);
	if (!err)
		err = kiln_zmap_lookup(&zs->map, off, &ext);
	if (err)
		return err;
	within = off - ext.la;
	*len = KILN_MIN(max, ext.llen - within);
	/* an inline pcluster of a metabox inode is not image bytes */
	if (ext.kind != KILN_ZEXT_PLAIN || kiln_in_metabox(ext.pa))
		return 0;
	/* as zr_plain() reads it: byte k of the extent at pa + k, and
	 * kiln_zmap_lookup() checked llen <= plen */
	if (!kiln_databuf_get(file->img, ext.pa, ext.plen))
		return kiln_verity_failed(file->img, ext.pa, ext.plen) ?
		       -KILN_ECORRUPT : KILN_CORRUPT(file->img, "nid %llu: plain pcluster at %llu outside the image",
				    (unsigned long long)file->inode.nid,
				    (unsigned long long)ext.pa);
	*img_off = ext.pa + within;
	return 1;
}

int kiln_zread_next_data(struct kiln_file *file, uint64_t off,
			 uint64_t *data_off, uint64_t *data_end)
{
	uint64_t size = file->inode.size, pos = off;
	struct kiln_zstate *zs;
	struct kiln_zext ext;
	bool in_data = false;
	int err;

	if (off >= size)
		return -ENXIO;
	err = zstate_get(file, &zs);
	if (err)
		return err;
	/* 1. skip hole extents; 2. extend over data extents */
	while (pos < size) {
		err = kiln_zmap_lookup(&zs->map, pos, &ext);
		if (err)
			return err;
		if (ext.kind == KILN_ZEXT_HOLE) {
			if (in_data)
				break;
		} else if (!in_data) {
			in_data = true;
			*data_off = pos;
		}
		if (ext.la + ext.llen <= pos)
			return KILN_CORRUPT(file->img,
					    "nid %llu: extent at %llu does not advance",
					    (unsigned long long)file->inode.nid,
					    (unsigned long long)pos);
		pos = ext.la + ext.llen;
	}
	if (!in_data)
		return -ENXIO;
	*data_end = KILN_MIN(pos, size);
	return 0;
}

void kiln_zread_release(struct kiln_file *file)
{
	struct kiln_zstate *zs = file->zstate;

	if (!zs)
		return;
	kiln_file_close(zs->packed);
	free(zs->scratch);
	free(zs);
	file->zstate = NULL;
}
