// SPDX-License-Identifier: MIT
/*
 * The packed inode: the fragment buffer (file tails and small files,
 * frag.c) written as one more regular file, compressed like any other
 * but never fragmented itself, linked from no directory and named by the
 * superblock's packed_nid. It is compressed in fixed segments by the
 * build's workers while the data pass still fills the buffer, and placed
 * after every file.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/compress/frag.h"
#include "builder/compress/internal.h"
#include "builder/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/grow.h"
#include "util/jobs.h"
#include "util/threadpool.h"

#define PACKED_COPY_SIZE	(1u << 20)
/*
 * Input bytes per segment of the packed inode by default (the build's
 * packed_segment_size sets another): a multiple of every extent
 * size (at most 1 MiB), never derived from the thread count, so every -j
 * cuts the buffer at the same places. Smaller segments leave less work
 * for the end, when no file is left to run beside it; each ends in a
 * partly filled pcluster. That pcluster costs its half-empty last block
 * unless the image is 48-bit (byte-packed, packer_finish()); then only a
 * restart: on the Linux sources at lz4hc, 32 MiB segments made the image
 * 74 KB smaller than 16 MiB ones and 64 MiB ones no smaller still.
 */
#define PACKED_SEG_SIZE		(32ull << 20)
/* Compressor output buffer each running segment holds (pcluster.c). */
#define PACKED_SCRATCH		(1ull << 20)
/* Compressed segments kept in memory until the end; more: a temp file. */
#define PACKED_SPOOL_MEM	((size_t)2 << 20)

struct kiln_packer;

/* One segment: bytes [off, off + len) of the fragment buffer. */
struct packed_item {
	struct kiln_packer *pk;
	uint64_t off, len;
	uint64_t size;			/* the buffer's size when submitted */
	struct kiln_zfile *zf;		/* the worker's result */
	bool raw;			/* not worth compressing */
};

/* A compressed segment waiting for the end; its pclusters spooled. */
struct packed_part {
	struct kiln_zfile *zf;		/* held bytes moved to the spool */
	uint64_t spool_off;
};

struct kiln_packer {
	struct kiln_build *b;
	struct kiln_zctx *zc;
	struct kiln_jobs *jobs;
	uint64_t seg_size;		/* input bytes per segment */
	uint64_t next_off;		/* first byte not yet submitted */
	bool raw;			/* the first segment said: uncompressed */
	/*
	 * Compressed segments in buffer order. Their bytes wait in @spool
	 * (a fragment buffer used as a plain spill-to-disk store: equal
	 * blobs it shares are equal bytes all the same).
	 */
	struct packed_part *parts;
	size_t nr_parts, cap_parts;
	struct kiln_frag *spool;
	/*
	 * Once a segment is committed its input leaves the fragment buffer
	 * (kiln_frag_release()): dedupe's rare compares against it decode
	 * its pclusters from the spool (packed_recover(), the committer's
	 * thread). @keep: a segment whose extents cannot be decoded that way
	 * was seen, nothing more is released.
	 */
	bool keep;
	/*
	 * Set once the first segment came out compressed (else the buffer
	 * is written plain at the end and must stay whole): workers then
	 * mark what they have read (kiln_frag_consumed()).
	 */
	atomic_bool release_ok;
	void *dws;			/* decompress workspace, or NULL */
	size_t dws_size;
	uint8_t *pc;			/* one pcluster read from the spool */
	size_t pc_cap;
	uint8_t *dec;			/* the extent decoded last */
	size_t dec_cap;
	size_t dec_part, dec_ext;	/* which one; dec_ok: it is there */
	bool dec_ok;
	uint64_t nr_decoded;		/* extents decoded for compares */
	uint64_t nr_waits;		/* compares that waited for a segment */
};

int kiln_zfile_place_fragment(struct kiln_zfile *zf, bool may_split)
{
	struct kiln_frag *fr = zf->zc->frag;
	bool placed;
	int err;

	if (!zf->frag)
		return 0;
	if (!fr)
		return -EINVAL;
	err = kiln_ztail_place(zf, may_split, &placed);
	if (!err && !placed)
		err = kiln_frag_add(fr, zf->frag, zf->frag_len, &zf->fragoff);
	if (err)
		return err;
	free(zf->frag);
	zf->frag = NULL;
	zf->frag_len = 0;
	/* offsets of 4 GiB and more need full indexes */
	if (zf->kind != KILN_ZMAP_FRAGMENT)
		kiln_zindex_choose(zf);
	return 0;
}

/*
 * A segment's reads only go forward (pcluster.c's input window): once
 * read, its bytes are needed by dedupe alone, which decodes them again.
 */
static int packed_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct packed_item *it = ctx;
	struct kiln_frag *fr = it->pk->zc->frag;
	int err = kiln_frag_read(fr, buf, len, off);

	if (!err && atomic_load(&it->pk->release_ok))
		kiln_frag_consumed(fr, it->off, off + len);
	return err;
}

static int packed_process(void *ctx, void *item, unsigned int worker)
{
	struct kiln_packer *pk = ctx;
	struct packed_item *it = item;
	int err;

	(void)worker;
	err = kiln_zfile_compress_segment(pk->zc, packed_read, it,
					  it->off, it->len, it->size,
					  KILN_ZSEG_PACKED, NULL, &it->zf);
	if (err == 1) {
		/* dedupe hands back the hashes of a raw file: not wanted */
		kiln_zfile_free(it->zf);
		it->zf = NULL;
		it->raw = true;
		err = 0;
	}
	return err;
}

/*
 * Whether every extent of @pt can be decoded from the spool alone: held
 * pclusters, raw or in the context's codec, or holes.
 */
static bool packed_decodable(const struct kiln_packer *pk,
			     const struct packed_part *pt)
{
	const struct kiln_zfile *zf = pt->zf;
	const unsigned int alg = pk->zc->ops->erofs_alg + 1u;

	if (zf->idata || zf->frag)
		return false;
	for (size_t i = 0; i < zf->nr_ext; i++) {
		const struct kiln_zext *e = &zf->ext[i];

		if (e->flags & KILN_ZEXT_HOLE)
			continue;
		if (e->flags & ~(unsigned int)KILN_ZEXT_PARTIAL ||
		    (e->fmt && e->fmt != alg) ||
		    e->pstart > zf->held_len || e->plen > zf->held_len - e->pstart ||
		    (!e->fmt && e->llen > e->plen))
			return false;
	}
	return true;
}

/* The committed part that holds buffer offset @off, or NULL. */
static const struct packed_part *packed_part_at(const struct kiln_packer *pk,
						uint64_t off, size_t *idx)
{
	size_t lo = 0, hi = pk->nr_parts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct kiln_zfile *zf = pk->parts[mid].zf;

		if (off < zf->seg_off)
			hi = mid;
		else if (off - zf->seg_off >= zf->size)
			lo = mid + 1;
		else {
			*idx = mid;
			return &pk->parts[mid];
		}
	}
	return NULL;
}

/* The extent of @zf that holds offset @rel (in the part), or SIZE_MAX. */
static size_t packed_ext_at(const struct kiln_zfile *zf, uint64_t rel)
{
	size_t lo = 0, hi = zf->nr_ext;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct kiln_zext *e = &zf->ext[mid];

		if (rel < e->lstart)
			hi = mid;
		else if (rel - e->lstart >= e->llen)
			lo = mid + 1;
		else
			return mid;
	}
	return SIZE_MAX;
}

static int packed_grow(uint8_t **buf, size_t *cap, size_t len)
{
	uint8_t *p;

	if (len <= *cap)
		return 0;
	p = realloc(*buf, len);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = len;
	return 0;
}

/* Decode extent @ei of part @pi into pk->dec (its llen bytes). */
static int packed_decode(struct kiln_packer *pk, size_t pi, size_t ei)
{
	const struct packed_part *pt = &pk->parts[pi];
	const struct kiln_zext *e = &pt->zf->ext[ei];
	const struct kiln_codec_ops *ops = pk->zc->ops;
	size_t skip = 0;
	int err;

	pk->dec_ok = false;
	/* read by its worker before a part like it stopped the releases */
	if (!packed_decodable(pk, pt))
		return -EIO;
	err = packed_grow(&pk->dec, &pk->dec_cap, KILN_MAX(e->llen, 1u));
	if (err)
		return err;
	if (e->flags & KILN_ZEXT_HOLE) {
		memset(pk->dec, 0, e->llen);
		goto done;
	}
	err = packed_grow(&pk->pc, &pk->pc_cap, KILN_MAX(e->plen, 1u));
	if (!err)
		err = kiln_frag_read(pk->spool, pk->pc, e->plen,
				      pt->spool_off + e->pstart);
	if (err)
		return err;
	if (!e->fmt) {
		memcpy(pk->dec, pk->pc, e->llen);
		goto done;
	}
	if (!pk->dws) {
		size_t ws = KILN_MAX(ops->decompress_wsize(KILN_CODEC_MAX_OUT),
				     (size_t)64);

		pk->dws = malloc(ws);
		if (!pk->dws)
			return -ENOMEM;
		err = kiln_codec_dws_init(ops, pk->dws, ws);
		if (err) {
			free(pk->dws);
			pk->dws = NULL;
			return err;
		}
		pk->dws_size = ws;
	}
	/* the stream sits at the end, zeros in front */
	while (skip < e->plen && !pk->pc[skip])
		skip++;
	err = ops->decompress(pk->dws, pk->dec, e->llen, pk->pc + skip,
			      e->plen - skip, e->flags & KILN_ZEXT_PARTIAL);
	if (err)
		return err > 0 ? -EIO : err;
done:
	pk->nr_decoded++;
	pk->dec_part = pi;
	pk->dec_ext = ei;
	pk->dec_ok = true;
	return 0;
}

static int packed_recover_bytes(struct kiln_packer *pk, uint8_t *dst,
				size_t len, uint64_t off);

/* kiln_frag_recover_fn: released fragment bytes, from the spool. */
static int packed_recover(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct kiln_packer *pk = ctx;
	int err = packed_recover_bytes(pk, buf, len, off);

	if (err && err != -ENOMEM)
		kiln_log(&pk->b->lg, KILN_LOG_ERROR,
			 "packed inode: fragment bytes at %llu for dedupe: %s",
			 (unsigned long long)off, kiln_strerror(err));
	return err;
}

static int packed_recover_bytes(struct kiln_packer *pk, uint8_t *dst,
				size_t len, uint64_t off)
{
	const struct kiln_zfile *last;

	/* read by a segment still in flight: wait for it to be committed */
	last = pk->nr_parts ? pk->parts[pk->nr_parts - 1].zf : NULL;
	if (!last || off + len > last->seg_off + last->size) {
		int err = kiln_jobs_finish(pk->jobs);

		if (err)
			return err;
		pk->nr_waits++;
	}
	while (len) {
		const struct packed_part *pt;
		const struct kiln_zext *e;
		size_t pi, ei, n;
		uint64_t rel;
		int err;

		pt = packed_part_at(pk, off, &pi);
		if (!pt)
			return -EIO;
		rel = off - pt->zf->seg_off;
		ei = packed_ext_at(pt->zf, rel);
		if (ei == SIZE_MAX)
			return -EIO;
		e = &pt->zf->ext[ei];
		if (!pk->dec_ok || pk->dec_part != pi || pk->dec_ext != ei) {
			err = packed_decode(pk, pi, ei);
			if (err)
				return err;
		}
		n = (size_t)KILN_MIN((uint64_t)len, e->lstart + e->llen - rel);
		memcpy(dst, pk->dec + (rel - e->lstart), n);
		dst += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* In buffer order: keep the segment's extents, spool its pclusters. */
static int packed_commit(void *ctx, void *item)
{
	struct kiln_packer *pk = ctx;
	struct packed_item *it = item;
	struct packed_part *pt;
	int err;

	if (!it->off)
		pk->raw = it->raw;
	if (pk->raw)
		return 0;
	if (KILN_GROW(pk->parts, pk->cap_parts, pk->nr_parts + 1))
		return -ENOMEM;
	pt = &pk->parts[pk->nr_parts];
	pt->zf = it->zf;
	pt->spool_off = 0;
	if (pt->zf->held_len) {
		err = kiln_frag_add(pk->spool, pt->zf->held,
				     pt->zf->held_len, &pt->spool_off);
		if (err)
			return err;
	}
	free(pt->zf->held);
	pt->zf->held = NULL;
	it->zf = NULL;
	pk->nr_parts++;
	if (!pk->keep && !packed_decodable(pk, pt))
		pk->keep = true;
	atomic_store(&pk->release_ok, !pk->keep);
	if (!pk->keep)
		kiln_frag_release(pk->zc->frag, it->off + it->len);
	return 0;
}

static void packed_release(void *ctx, void *item)
{
	struct packed_item *it = item;

	(void)ctx;
	kiln_zfile_free(it->zf);
	free(it);
}

/* Once compressed, a segment holds its pclusters, not its input. */
static uint64_t packed_held(void *ctx, void *item)
{
	struct packed_item *it = item;

	(void)ctx;
	return it->zf ? kiln_zfile_held_bytes(it->zf) : 0;
}

static const struct kiln_jobs_ops packed_ops = {
	.process = packed_process,
	.commit = packed_commit,
	.release = packed_release,
	.held = packed_held,
};

/* Bytes a segment holds at its peak: input window, output, scratch. */
static uint64_t packed_cost(uint64_t len)
{
	return 2 * len + PACKED_SCRATCH;
}

static int packer_new(struct kiln_build *b, struct kiln_packer **out)
{
	struct kiln_packer *pk = calloc(1, sizeof(*pk));
	struct kiln_jobs_conf conf = { .ops = &packed_ops };
	int err;

	*out = NULL;
	if (!pk)
		return -ENOMEM;
	pk->b = b;
	/* its own context when the packed inode has bigger pclusters */
	pk->zc = b->zctx->packed ? b->zctx->packed : b->zctx;
	pk->seg_size = kiln_packed_segment_size(b);
	conf.ctx = pk;
	conf.pool = kiln_build_pool(b);
	conf.threads = 1;	/* without a pool: inline */
	/*
	 * Two segments at once keep both workers of -j2 busy once the files
	 * are done; under --memory-limit its share decides (one segment
	 * still runs when it is smaller than a segment).
	 */
	conf.max_bytes = kiln_build_inflight_bytes(b) / 3;
	if (!b->opts.memory_limit)
		conf.max_bytes = KILN_MAX(conf.max_bytes,
					  2 * packed_cost(pk->seg_size));
	err = kiln_frag_new(PACKED_SPOOL_MEM, NULL, &pk->spool);
	if (!err)
		err = kiln_jobs_new(&conf, &pk->jobs);
	if (err) {
		kiln_frag_free(pk->spool);
		free(pk);
		return err;
	}
	kiln_frag_set_recover(pk->zc->frag, packed_recover, pk);
	*out = pk;
	return 0;
}

void kiln_packed_free(struct kiln_build *b)
{
	struct kiln_packer *pk = b->packer;

	if (!pk)
		return;
	kiln_jobs_free(pk->jobs);
	kiln_frag_set_recover(pk->zc->frag, NULL, NULL);
	for (size_t i = 0; i < pk->nr_parts; i++)
		kiln_zfile_free(pk->parts[i].zf);
	free(pk->parts);
	kiln_frag_free(pk->spool);
	if (pk->dws) {
		kiln_codec_dws_fini(pk->zc->ops, pk->dws);
		free(pk->dws);
	}
	free(pk->pc);
	free(pk->dec);
	free(pk);
	b->packer = NULL;
}

/* Hand the segments below @end to the workers, the buffer @size long. */
static int packer_submit(struct kiln_packer *pk, uint64_t end, uint64_t size)
{
	while (pk->next_off + pk->seg_size <= end ||
	       (end == size && pk->next_off < size)) {
		struct packed_item *it = calloc(1, sizeof(*it));
		int err;

		if (!it)
			return -ENOMEM;
		it->pk = pk;
		it->off = pk->next_off;
		it->len = KILN_MIN(pk->seg_size, size - it->off);
		it->size = size;
		pk->next_off += it->len;
		err = kiln_jobs_submit(pk->jobs, it, packed_cost(it->len));
		if (err)
			return err;
	}
	return 0;
}

uint64_t kiln_packed_segment_size(const struct kiln_build *b)
{
	return b->opts.packed_segment_size ? b->opts.packed_segment_size :
					     PACKED_SEG_SIZE;
}

bool kiln_packed_wanted(const struct kiln_build *b)
{
	return b->zctx && b->zctx->frag;
}

/* Name a failure of the packed inode's segments (the rest log their own). */
static int packer_fail(struct kiln_build *b, int err)
{
	if (err && err != -ENOMEM)
		kiln_log(&b->lg, KILN_LOG_ERROR, "packed inode: %s",
			 kiln_strerror(err));
	return err;
}

int kiln_packed_poll(struct kiln_build *b)
{
	struct kiln_zctx *zc = b->zctx;
	uint64_t size;
	int err;

	if (!zc || !zc->frag)
		return 0;
	size = kiln_frag_size(zc->frag);
	/*
	 * A segment the buffer has grown past is not the last one whatever
	 * comes: compressed now, it comes out as it would at the end. One
	 * that ends exactly at the size may still be the last, so it waits.
	 */
	if (size <= (b->packer ? b->packer->next_off : 0) +
		    kiln_packed_segment_size(b))
		return 0;
	if (!b->packer) {
		err = packer_new(b, &b->packer);
		if (err)
			return err;
	}
	err = packer_submit(b->packer, size - 1, size);
	if (!err)
		err = kiln_jobs_poll(b->packer->jobs);
	return packer_fail(b, err);
}

/* At the end: every segment compressed, its pclusters into the image. */
static int packer_finish(struct kiln_build *b, struct kiln_node *n)
{
	struct kiln_packer *pk = b->packer;
	struct kiln_zfile *whole = NULL;
	/*
	 * Extent records address bytes: in a 48-bit image the segments'
	 * pclusters follow each other byte by byte, so no segment ends in a
	 * block of its own half filled, once a segment.
	 */
	const bool bytes = kiln_zctx_48bit(pk->zc);
	struct kiln_bytepack bp = { 0 };
	int err, ferr;

	err = packer_submit(pk, n->size, n->size);
	ferr = kiln_jobs_finish(pk->jobs);
	/* no fragment comes any more; the parts now move into @whole */
	kiln_frag_set_recover(pk->zc->frag, NULL, NULL);
	if (ferr || err)
		return packer_fail(b, ferr ? ferr : err);
	if (pk->raw)
		return 1;
	for (size_t i = 0; i < pk->nr_parts; i++) {
		struct kiln_zfile *part = pk->parts[i].zf;

		if (part->held_len) {
			part->held = malloc(part->held_len);
			if (!part->held)
				return -ENOMEM;
			err = kiln_frag_read(pk->spool, part->held,
					      part->held_len,
					      pk->parts[i].spool_off);
			if (err)
				return err;
		}
		err = bytes ? kiln_zfile_commit_bytes(part, b->out, &bp) :
			      kiln_zfile_commit(part, b->out);
		if (!err)
			err = kiln_zfile_join(&whole, part);
		if (err)
			break;
		pk->parts[i].zf = NULL;		/* now in @whole */
		n->zf = whole;			/* freed with the tree */
	}
	if (bytes) {
		ferr = kiln_bytepack_finish(&bp, b->out);
		err = err ? err : ferr;
	}
	if (err)
		return err;
	if (!whole)
		return -EIO;
	if (bytes)
		whole->blocks = kiln_div_round_up(bp.total, b->blksz);
	kiln_zfile_seal(whole);
	return 0;
}

/* Whether the map with its inline tail fits after the core at some slot. */
static bool packed_map_placeable(const struct kiln_build *b,
				 const struct kiln_node *n)
{
	uint64_t base = 256ull << b->blkszbits;
	uint32_t hdr = kiln_inode_core_size(n);
	size_t len;

	for (uint32_t pos = 0; pos < b->blksz; pos += EROFS_ISLOT_SIZE)
		if (!kiln_zfile_map_size(n->zf, base + pos + hdr, &len))
			return true;
	return false;
}

/* Incompressible fragments: the packed inode is stored as plain blocks. */
static int packed_write_plain(struct kiln_build *b, struct kiln_node *n,
			      struct kiln_frag *fr)
{
	uint64_t nblks = kiln_div_round_up(n->size, b->blksz);
	uint8_t *buf;
	int err;

	n->datalayout = EROFS_INODE_FLAT_PLAIN;
	err = kiln_out_reserve(b->out, nblks, &n->startblk);
	if (err)
		return err;
	buf = calloc(1, PACKED_COPY_SIZE);
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; !err && off < n->size; off += PACKED_COPY_SIZE) {
		size_t len = (size_t)KILN_MIN((uint64_t)PACKED_COPY_SIZE,
					      n->size - off);
		size_t padded = (size_t)kiln_round_up(len, b->blksz);

		err = kiln_frag_read(fr, buf, len, off);
		if (!err) {
			memset(buf + len, 0, padded - len);
			err = kiln_out_pwrite(b->out, buf, padded,
					      ((uint64_t)n->startblk << b->blkszbits) + off);
		}
	}
	free(buf);
	return err;
}

int kiln_packed_write(struct kiln_build *b)
{
	struct kiln_zctx *zc = b->zctx;
	struct kiln_node *n;
	int err;

	if (!zc || !zc->frag || !kiln_frag_size(zc->frag))
		return 0;
	err = kiln_nodes_push_special(b, kiln_frag_size(zc->frag), &n);
	if (err)
		return err;
	b->packed = n;
	if (!b->packer) {
		err = packer_new(b, &b->packer);
		if (err)
			return err;
	}
	err = packer_finish(b, n);
	/* how it went depends on the threads' timing: debug only */
	kiln_log(&b->lg, KILN_LOG_DEBUG,
		 "fragment buffer: %llu bytes to a temporary file, %llu extents decoded again for dedupe, %llu waits",
		 (unsigned long long)kiln_frag_spill_bytes(zc->frag),
		 (unsigned long long)b->packer->nr_decoded,
		 (unsigned long long)b->packer->nr_waits);
	kiln_packed_free(b);
	if (err < 0)
		return err;
	if (err > 0)
		return packed_write_plain(b, n, zc->frag);
	if (kiln_zfile_has_inline(n->zf) && !packed_map_placeable(b, n)) {
		err = kiln_zfile_drop_inline(n->zf, b->out);
		if (err)
			return err;
	}
	n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
	kiln_log(&b->lg, KILN_LOG_INFO,
		 "packed inode: %llu bytes of fragments (%llu more shared)",
		 (unsigned long long)n->size,
		 (unsigned long long)kiln_frag_saved(zc->frag));
	return 0;
}
