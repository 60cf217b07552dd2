// SPDX-License-Identifier: MIT
/*
 * The dm-verity tree of a finished image: the data blocks' digests on the
 * workers, the levels above them, then veritysetup's superblock and the
 * tree written right after the image.
 *
 *   image blocks 0 .. N-1 | verity sb (one block) | top level ... level 0
 *                         ^ hash offset = N blocks
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "builder/internal.h"
#include "builder/output.h"
#include "builder/verity.h"
#include "format/verity_fs.h"
#include "util/checked.h"
#include "util/threadpool.h"
#include "util/vhash.h"

/* Data bytes one task reads back and hashes. */
#define VERITY_TASK_BYTES	(1u << 20)

struct leaf_task {
	struct kiln_out *out;
	unsigned int blkszbits;
	const uint8_t *salt;
	size_t salt_len;
	uint64_t first, nblks;		/* data blocks of this task */
	uint8_t *digests;		/* nblks digests, into level 0 */
	int err;
};

static void hash_leaves(void *arg)
{
	struct leaf_task *t = arg;
	size_t blksz = (size_t)1 << t->blkszbits;
	size_t len = (size_t)t->nblks << t->blkszbits;
	uint8_t *buf = malloc(len);
	struct kiln_vhash h;

	t->err = buf ? kiln_vhash_init(&h, t->salt, t->salt_len) : -ENOMEM;
	if (t->err) {
		free(buf);
		return;
	}
	t->err = kiln_out_pread(t->out, buf, len, t->first << t->blkszbits);
	for (uint64_t i = 0; !t->err && i < t->nblks; i++)
		t->err = kiln_vhash_block(&h, buf + i * blksz, blksz,
					  t->digests +
					  i * KILN_VERITY_DIGEST_SIZE);
	kiln_vhash_release(&h);
	free(buf);
}

/* Level 0: one digest per data block, hashed on the build's workers. */
static int hash_data(struct kiln_build *b, const struct kiln_verity_geo *g,
		     const struct kiln_verity_info *vi, uint8_t *level0)
{
	struct kiln_threadpool *pool = kiln_build_pool(b);
	uint64_t per = VERITY_TASK_BYTES >> g->blkszbits;
	uint64_t nr = kiln_div_round_up(g->data_blocks, per);
	struct leaf_task *tasks = calloc((size_t)nr, sizeof(*tasks));
	int err = 0;

	if (!tasks)
		return -ENOMEM;
	for (uint64_t i = 0; i < nr; i++) {
		struct leaf_task *t = &tasks[i];

		t->out = b->out;
		t->blkszbits = g->blkszbits;
		t->salt = vi->salt;
		t->salt_len = vi->salt_len;
		t->first = i * per;
		t->nblks = KILN_MIN(per, g->data_blocks - t->first);
		t->digests = level0 + t->first * KILN_VERITY_DIGEST_SIZE;
		if (!pool || kiln_threadpool_submit(pool, hash_leaves, t))
			hash_leaves(t);
	}
	if (pool)
		kiln_threadpool_wait(pool);
	for (uint64_t i = 0; i < nr && !err; i++)
		err = tasks[i].err;
	free(tasks);
	return err;
}

/*
 * The levels above 0, each the digests of the blocks of the one below
 * (a block's unused tail stays zero), and the root: the digest of the top
 * block, or of the only data block when there is no level.
 */
static int hash_levels(struct kiln_build *b, const struct kiln_verity_geo *g,
		       struct kiln_verity_info *vi, uint8_t **levels)
{
	size_t blksz = (size_t)1 << g->blkszbits;
	struct kiln_vhash h;
	int err = kiln_vhash_init(&h, vi->salt, vi->salt_len);

	if (err)
		return err;
	for (unsigned int i = 1; i < g->levels && !err; i++)
		for (uint64_t j = 0; j < g->level_blks[i - 1] && !err; j++)
			err = kiln_vhash_block(&h, levels[i - 1] + j * blksz,
					       blksz, levels[i] +
					       j * KILN_VERITY_DIGEST_SIZE);
	if (!err && g->levels)
		err = kiln_vhash_block(&h, levels[g->levels - 1], blksz,
				       vi->root);
	else if (!err) {
		uint8_t *blk = malloc(blksz);

		err = blk ? kiln_out_pread(b->out, blk, blksz, 0) : -ENOMEM;
		if (!err)
			err = kiln_vhash_block(&h, blk, blksz, vi->root);
		free(blk);
	}
	kiln_vhash_release(&h);
	return err;
}

/* The salt: the caller's, or SHA-256 of a tag and the image's content hash. */
static int pick_salt(struct kiln_build *b, struct kiln_verity_info *vi)
{
	static const char tag[16] = "kiln verity salt";
	uint8_t seed[32];

	if (b->opts.verity_salt) {
		/* its length was checked before the build began */
		memcpy(vi->salt, b->opts.verity_salt, b->opts.verity_salt_len);
		vi->salt_len = b->opts.verity_salt_len;
		return 0;
	}
	memcpy(seed, tag, sizeof(tag));
	kiln_out_digest(b->out, seed + 16);
	vi->salt_len = KILN_VERITY_DIGEST_SIZE;
	return kiln_sha256(seed, sizeof(seed), vi->salt);
}

static int write_tree(struct kiln_build *b, const struct kiln_verity_geo *g,
		      const struct kiln_verity_info *vi, uint8_t **levels)
{
	size_t blksz = (size_t)1 << g->blkszbits;
	struct kiln_verity_sb sb = { .blkszbits = g->blkszbits };
	uint8_t *raw = calloc(1, blksz);
	int err;

	if (!raw)
		return -ENOMEM;
	/* a UUID from the root hash keeps the tree reproducible */
	memcpy(sb.uuid, vi->root, sizeof(sb.uuid));
	sb.uuid[6] = (uint8_t)((sb.uuid[6] & 0x0f) | 0x40);
	sb.uuid[8] = (uint8_t)((sb.uuid[8] & 0x3f) | 0x80);
	sb.data_blocks = g->data_blocks;
	memcpy(sb.salt, vi->salt, vi->salt_len);
	sb.salt_len = vi->salt_len;
	kiln_verity_sb_encode(&sb, raw);
	err = kiln_out_pwrite(b->out, raw, blksz, vi->hash_offset);
	free(raw);
	for (unsigned int i = g->levels; i-- > 0 && !err;)
		err = kiln_out_pwrite(b->out, levels[i],
				      (size_t)g->level_blks[i] << g->blkszbits,
				      g->level_blk[i] << g->blkszbits);
	return err;
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int kiln_verity_write(struct kiln_build *b, uint64_t image_blocks)
{
	struct kiln_verity_info *vi = &b->stats.verity;
	uint8_t *levels[KILN_VERITY_MAX_LEVELS] = { NULL };
	struct kiln_verity_geo g;
	struct timespec t0;
	int err;

	clock_gettime(CLOCK_MONOTONIC, &t0);

	memset(vi, 0, sizeof(*vi));
	err = kiln_verity_geometry(&g, b->blkszbits, image_blocks,
				   image_blocks + 1);
	if (err) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "%s: no dm-verity tree for %llu blocks", b->image,
			 (unsigned long long)image_blocks);
		return err;
	}
	vi->block_size = b->blksz;
	vi->data_blocks = image_blocks;
	vi->hash_offset = image_blocks << b->blkszbits;
	vi->hash_blocks = 1 + g.tree_blks;
	vi->levels = g.levels;
	/* 1. the salt, 2. level 0 on the workers, 3. the rest, 4. write */
	err = pick_salt(b, vi);
	/* the image's bytes must read back as the kernel will see them */
	if (!err)
		err = kiln_out_set_size(b->out, vi->hash_offset);
	for (unsigned int i = 0; i < g.levels && !err; i++) {
		levels[i] = calloc((size_t)g.level_blks[i], b->blksz);
		if (!levels[i])
			err = -ENOMEM;
	}
	if (!err && g.levels)
		err = hash_data(b, &g, vi, levels[0]);
	if (!err)
		err = hash_levels(b, &g, vi, levels);
	if (!err)
		err = write_tree(b, &g, vi, levels);
	for (unsigned int i = 0; i < g.levels; i++)
		free(levels[i]);
	if (!err)
		kiln_log(&b->lg, KILN_LOG_INFO,
			 "dm-verity: %llu blocks hashed, %llu tree blocks written in %.3f s",
			 (unsigned long long)image_blocks,
			 (unsigned long long)vi->hash_blocks,
			 seconds_since(&t0));
	if (err == -ENOMEM)
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "%s: out of memory for the dm-verity tree", b->image);
	else if (err == -EIO)
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "%s: hashing the dm-verity tree failed", b->image);
	return err;
}
