// SPDX-License-Identifier: MIT
/*
 * dm-verity on the read side: each block is hashed the first time it is
 * used and checked against its digest in the level above, that block in
 * turn up to the root hash the caller trusts. The result of each block
 * (data and tree) is remembered, so a block is hashed once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/verity.h>

#include "format/verity_fs.h"
#include "reader/internal.h"
#include "reader/verity.h"
#include "util/checked.h"
#include "util/vhash.h"

/* What is known of a block (one byte each, atomic). */
enum {
	VB_GOOD = 1u << 0,
	VB_BAD = 1u << 1,
	VB_DATA_READ = 1u << 2,		/* a bad block read as file data */
};

struct kiln_verity {
	struct kiln_verity_geo geo;
	uint64_t hash_offset;		/* bytes */
	uint64_t tree_blk;		/* first block of the top level */
	uint8_t root[KILN_VERITY_DIGEST_SIZE];
	uint8_t salt[KILN_VERITY_SALT_MAX];
	size_t salt_len;
	uint8_t *state;			/* data blocks, then tree blocks */
};

static uint8_t state_get(const struct kiln_verity *v, uint64_t i)
{
	return __atomic_load_n(&v->state[i], __ATOMIC_ACQUIRE);
}

static void state_set(const struct kiln_verity *v, uint64_t i, uint8_t bits)
{
	__atomic_fetch_or(&v->state[i], bits, __ATOMIC_RELEASE);
}

/* Hash @blk (an absolute block of the image file) into @out. */
static int hash_blk(const struct kiln_image *img, uint64_t blk,
		    uint8_t out[KILN_VERITY_DIGEST_SIZE])
{
	const struct kiln_verity *v = img->verity;
	struct kiln_vhash h;
	int err = kiln_vhash_init(&h, v->salt, v->salt_len);

	if (err)
		return err;
	err = kiln_vhash_block(&h, img->map + (blk << v->geo.blkszbits),
			       (size_t)1 << v->geo.blkszbits, out);
	kiln_vhash_release(&h);
	return err;
}

/*
 * Block @j of level @lvl: 0 when it hashes to its entry in the level
 * above (or to the root), 1 when it does not, or a negative errno. The
 * walk goes up at most geo.levels blocks.
 */
static int check_tree_blk(const struct kiln_image *img, unsigned int lvl,
			  uint64_t j)
{
	const struct kiln_verity *v = img->verity;
	const struct kiln_verity_geo *g = &v->geo;
	uint64_t blk = g->level_blk[lvl] + j;
	uint64_t si = g->data_blocks + (blk - v->tree_blk);
	uint8_t st = state_get(v, si), got[KILN_VERITY_DIGEST_SIZE];
	const uint8_t *want = v->root;
	int err;

	if (st & (VB_GOOD | VB_BAD))
		return !!(st & VB_BAD);
	if (lvl + 1 < g->levels) {
		uint64_t up = j >> g->hpb_bits;

		err = check_tree_blk(img, lvl + 1, up);
		if (err)
			return err;
		want = img->map + ((g->level_blk[lvl + 1] + up) << g->blkszbits) +
		       (j & ((1ull << g->hpb_bits) - 1)) * KILN_VERITY_DIGEST_SIZE;
	}
	err = hash_blk(img, blk, got);
	if (err)
		return err;
	err = memcmp(got, want, sizeof(got)) != 0;
	state_set(v, si, err ? VB_BAD : VB_GOOD);
	return err;
}

/* Data block @i: as check_tree_blk(). */
static int check_data_blk(const struct kiln_image *img, uint64_t i)
{
	const struct kiln_verity *v = img->verity;
	const struct kiln_verity_geo *g = &v->geo;
	uint8_t st = state_get(v, i), got[KILN_VERITY_DIGEST_SIZE];
	const uint8_t *want = v->root;
	int err;

	if (st & (VB_GOOD | VB_BAD))
		return !!(st & VB_BAD);
	if (g->levels) {
		uint64_t up = i >> g->hpb_bits;

		err = check_tree_blk(img, 0, up);
		if (err < 0)
			return err;
		if (err) {
			/* nothing vouches for this block */
			state_set(v, i, VB_BAD);
			return 1;
		}
		want = img->map + ((g->level_blk[0] + up) << g->blkszbits) +
		       (i & ((1ull << g->hpb_bits) - 1)) * KILN_VERITY_DIGEST_SIZE;
	}
	err = hash_blk(img, i, got);
	if (err)
		return err;
	err = memcmp(got, want, sizeof(got)) != 0;
	state_set(v, i, err ? VB_BAD : VB_GOOD);
	return err;
}

int kiln_verity_check(const struct kiln_image *img, uint64_t off,
		      uint64_t len, bool data)
{
	const struct kiln_verity *v = img->verity;
	uint64_t first, last;

	if (!v || !len)
		return 0;
	/* kiln_metabuf_get() bounded the range to the verified blocks */
	first = off >> v->geo.blkszbits;
	last = (off + len - 1) >> v->geo.blkszbits;
	for (uint64_t i = first; i <= last; i++) {
		int bad = check_data_blk(img, i);

		if (bad < 0)
			return bad;
		if (bad) {
			const struct kiln_verity_geo *g = &v->geo;
			uint64_t top = g->data_blocks + g->level_blk[g->levels ?
					g->levels - 1 : 0] - v->tree_blk;

			if (data)
				state_set(v, i, VB_DATA_READ);
			if (g->levels && (state_get(v, top) & VB_BAD))
				return KILN_CORRUPT(img, "block %llu: the dm-verity tree does not hash to the root hash given (a wrong root hash or salt, or a changed tree)",
						    (unsigned long long)i);
			return KILN_CORRUPT(img, "block %llu (byte %llu) fails dm-verity: its hash does not match the tree",
					    (unsigned long long)i,
					    (unsigned long long)(i << v->geo.blkszbits));
		}
	}
	return 0;
}

/* Where the tree is: the hash offset asked for, or after the image's blocks. */
static int find_hash_offset(struct kiln_image *img,
			    const struct kiln_image_opts *opts, uint64_t *off)
{
	struct kiln_sb sb;
	const char *why = NULL;
	size_t len;

	if (opts->verity_hash_offset) {
		*off = opts->verity_hash_offset;
		return 0;
	}
	/*
	 * The superblock is not verified yet: it only says where to look.
	 * A changed block count points elsewhere, where no tree hashes to
	 * the root, and block 0 itself is checked before it is used.
	 */
	if (img->size < EROFS_SUPER_OFFSET + EROFS_SB_BASE_SIZE)
		return KILN_CORRUPT(img, "image of %llu bytes is too small to hold a superblock",
				    (unsigned long long)img->size);
	len = (size_t)KILN_MIN(img->size - EROFS_SUPER_OFFSET,
			       4096u - EROFS_SUPER_OFFSET);
	if (kiln_decode_super(img->map + EROFS_SUPER_OFFSET, len, &sb, &why))
		return KILN_CORRUPT(img, "superblock: %s", why);
	if (sb.blocks >> (64 - sb.blkszbits))
		return KILN_CORRUPT(img, "superblock: %llu blocks overflow",
				    (unsigned long long)sb.blocks);
	*off = sb.blocks << sb.blkszbits;
	return 0;
}

/*
 * The verity superblock at @off, or, without one and with a salt given,
 * a tree right at @off over the image's own blocks (veritysetup format
 * --no-superblock).
 */
static int read_verity_sb(struct kiln_image *img,
			  const struct kiln_image_opts *opts, uint64_t off,
			  struct kiln_verity_sb *vsb, bool *has_sb)
{
	const char *why = NULL;
	int err = -ENOENT;

	*has_sb = false;
	if (kiln_range_ok(off, KILN_VERITY_SB_SIZE, img->size))
		err = kiln_verity_sb_decode(img->map + off, KILN_VERITY_SB_SIZE,
					    vsb, &why);
	if (!err) {
		*has_sb = true;
		return 0;
	}
	if (err == -ENOENT && opts->verity_salt && off &&
	    kiln_range_ok(EROFS_SUPER_OFFSET, EROFS_SB_BASE_SIZE, img->size)) {
		struct kiln_sb sb;
		size_t len = (size_t)KILN_MIN(img->size - EROFS_SUPER_OFFSET,
					      4096u - EROFS_SUPER_OFFSET);

		if (!kiln_decode_super(img->map + EROFS_SUPER_OFFSET, len, &sb,
				       &why)) {
			vsb->blkszbits = sb.blkszbits;
			vsb->data_blocks = off >> sb.blkszbits;
			return 0;
		}
	}
	kiln_log(&img->logger, KILN_LOG_ERROR,
		 "dm-verity: %s at byte %llu%s",
		 why ? why : "no verity superblock",
		 (unsigned long long)off,
		 err == -ENOENT ? " (give --verity-salt for a tree without one, "
				  "or the hash offset)" : "");
	return err == -EOPNOTSUPP ? err : -KILN_ECORRUPT;
}

/*
 * Find the tree of the mapped image as @opts describe it and fill @v
 * (all but the root hash and the block states). 0, or a negative errno,
 * logged.
 */
static int locate_tree(struct kiln_image *img,
		       const struct kiln_image_opts *opts,
		       struct kiln_verity *v)
{
	struct kiln_verity_sb vsb;
	uint64_t off = 0, bsz, tree_end;
	bool has_sb;
	int err;

	if (opts->verity_salt && opts->verity_salt_len > KILN_VERITY_SALT_MAX) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "dm-verity: salt of %zu bytes, at most %d",
			 opts->verity_salt_len, KILN_VERITY_SALT_MAX);
		return -EINVAL;
	}
	err = find_hash_offset(img, opts, &off);
	if (!err)
		err = read_verity_sb(img, opts, off, &vsb, &has_sb);
	if (err)
		return err;
	bsz = 1ull << vsb.blkszbits;
	if (off % bsz || vsb.data_blocks > off >> vsb.blkszbits)
		return KILN_CORRUPT(img, "dm-verity: %llu data blocks of %llu bytes overlap the tree at byte %llu",
				    (unsigned long long)vsb.data_blocks,
				    (unsigned long long)bsz,
				    (unsigned long long)off);
	v->hash_offset = off;
	v->tree_blk = off / bsz + has_sb;
	err = kiln_verity_geometry(&v->geo, vsb.blkszbits, vsb.data_blocks,
				   v->tree_blk);
	tree_end = v->tree_blk + v->geo.tree_blks;
	if (err || tree_end > img->size >> vsb.blkszbits)
		return KILN_CORRUPT(img, "dm-verity: the tree of %llu data blocks passes the end of the image (%llu bytes)",
				    (unsigned long long)vsb.data_blocks,
				    (unsigned long long)img->size);
	if (opts->verity_salt) {
		memcpy(v->salt, opts->verity_salt, opts->verity_salt_len);
		v->salt_len = opts->verity_salt_len;
	} else {
		memcpy(v->salt, vsb.salt, vsb.salt_len);
		v->salt_len = vsb.salt_len;
	}
	return 0;
}

int kiln_verity_open(struct kiln_image *img,
		     const struct kiln_image_opts *opts)
{
	struct kiln_verity *v;
	uint64_t nstate;
	int err;

	if (!opts || !opts->verity_root)
		return 0;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	img->verity = v;
	err = locate_tree(img, opts, v);
	if (err)
		return err;
	memcpy(v->root, opts->verity_root, sizeof(v->root));
	nstate = v->geo.data_blocks + v->geo.tree_blks;
	if (nstate > SIZE_MAX)
		return -EFBIG;
	v->state = calloc((size_t)nstate, 1);
	if (!v->state)
		return -ENOMEM;
	/* from now on the reader sees only the blocks the tree covers */
	img->size = v->geo.data_blocks << v->geo.blkszbits;
	return 0;
}

void kiln_verity_close(struct kiln_image *img)
{
	if (!img->verity)
		return;
	free(img->verity->state);
	free(img->verity);
	img->verity = NULL;
}

static int verity_info_of(const struct kiln_verity *v,
				     struct kiln_verity_info *info)
{
	memset(info, 0, sizeof(*info));
	if (!v)
		return -ENOENT;
	memcpy(info->root, v->root, sizeof(info->root));
	memcpy(info->salt, v->salt, v->salt_len);
	info->salt_len = v->salt_len;
	info->block_size = 1u << v->geo.blkszbits;
	info->data_blocks = v->geo.data_blocks;
	info->hash_offset = v->hash_offset;
	info->hash_blocks = v->tree_blk - v->hash_offset / info->block_size +
			    v->geo.tree_blks;
	info->levels = v->geo.levels;
	return 0;
}

KILN_API int kiln_image_verity_info(const struct kiln_image *img,
				    struct kiln_verity_info *info)
{
	return verity_info_of(img->verity, info);
}

KILN_API int kiln_image_verity_probe(struct kiln_image *img,
				     const struct kiln_image_opts *opts,
				     struct kiln_verity_info *info)
{
	struct kiln_image_opts o = { .struct_size = sizeof(o) };
	struct kiln_verity *v;
	uint64_t top;
	int err;

	if (img->verity)
		return kiln_image_verity_info(img, info);
	memset(info, 0, sizeof(*info));
	/* an older caller's shorter struct: the fields it lacks stay 0 */
	if (opts)
		memcpy(&o, opts, KILN_MIN(opts->struct_size, sizeof(o)));
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	err = locate_tree(img, &o, v);
	if (err)
		goto out;
	/* what the top level (or the only data block) hashes to */
	top = v->geo.levels ? v->geo.level_blk[v->geo.levels - 1] : 0;
	img->verity = v;
	err = hash_blk(img, top, v->root);
	img->verity = NULL;
	if (!err)
		err = verity_info_of(v, info);
out:
	free(v);
	return err;
}

static int report_bad(kiln_verity_bad_fn fn, void *ctx, uint64_t blk,
		      int level, bool file_data, uint64_t *bad)
{
	struct kiln_verity_bad b = { .blk = blk, .level = level,
				     .file_data = file_data };

	(*bad)++;
	return fn ? fn(ctx, &b) : 0;
}

KILN_API int kiln_image_verity_check(struct kiln_image *img,
				     kiln_verity_bad_fn fn, void *ctx,
				     uint64_t *nr_bad)
{
	const struct kiln_verity *v = img->verity;
	const struct kiln_verity_geo *g;
	uint64_t bad = 0;
	int err = 0;

	if (nr_bad)
		*nr_bad = 0;
	if (!v)
		return -ENOENT;
	g = &v->geo;
	/* 1. the tree, top level first, 2. every data block */
	for (unsigned int lvl = g->levels; lvl-- > 0 && !err;)
		for (uint64_t j = 0; j < g->level_blks[lvl] && !err; j++) {
			int r = check_tree_blk(img, lvl, j);

			if (r < 0)
				err = r;
			else if (r)
				err = report_bad(fn, ctx, g->level_blk[lvl] + j,
						 (int)lvl, false, &bad);
		}
	for (uint64_t i = 0; i < g->data_blocks && !err; i++) {
		int r = check_data_blk(img, i);

		if (r < 0)
			err = r;
		else if (r)
			err = report_bad(fn, ctx, i, -1,
					 state_get(v, i) & VB_DATA_READ, &bad);
	}
	if (nr_bad)
		*nr_bad = bad;
	if (err > 0)
		return -ECANCELED;
	return err ? err : bad ? -KILN_ECORRUPT : 0;
}
