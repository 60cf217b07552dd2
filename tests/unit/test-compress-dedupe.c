// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/compress/dedupe.c: a hash match alone never shares
 * data; candidates are confirmed byte for byte, in the image or in the buffer
 * being committed, and must agree on stored length, decoded length and format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builder/compress/dedupe.h"
#include "builder/output.h"
#include "tap.h"

struct fixture {
	char path[64];
	struct kiln_out *out;
	struct kiln_dedupe *dd;
};

static int fixture_open(struct fixture *f)
{
	snprintf(f->path, sizeof(f->path), "/tmp/test-compress-dedupe-%d.img",
		 (int)getpid());
	if (kiln_dedupe_new(&f->dd))
		return -1;
	return kiln_out_open(&f->out, f->path, 12, 1, NULL);
}

static void fixture_close(struct fixture *f)
{
	kiln_out_abort(f->out);
	kiln_dedupe_free(f->dd);
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 31 + seed * 7) ^ (i >> 8));
}

/* Write @n bytes of @pc to the image and remember them, as a commit does. */
static uint64_t commit_one(struct fixture *f, const uint8_t *pc, uint32_t n,
			   uint32_t llen, uint8_t fmt, uint64_t hash)
{
	kiln_blk_t blk;

	CHECK_EQ(kiln_dedupe_add_pending(f->dd, n, llen, fmt, hash, 0), 0);
	CHECK_EQ(kiln_out_append(f->out, pc, n, &blk), 0);
	kiln_dedupe_settle(f->dd, (uint64_t)blk << 12);
	return (uint64_t)blk << 12;
}

TEST(forced_hash_collision_with_other_bytes_is_not_shared)
{
	struct fixture f;
	uint8_t a[5000], b[5000];
	uint64_t h, at, addr = 0;
	bool pending = false;

	CHECK_EQ(fixture_open(&f), 0);
	fill(a, sizeof(a), 1);
	memcpy(b, a, sizeof(b));
	b[4999] ^= 1;			/* differs in the very last byte */
	h = kiln_dedupe_hash(a, sizeof(a), 65536, 4);
	at = commit_one(&f, a, sizeof(a), 65536, 4, h);
	/* b handed in with a's hash: the byte comparison must refuse it */
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, b, sizeof(b), 65536, 4,
				   h, &addr, &pending), 0);
	/* the real copy is found, in the image */
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, a, sizeof(a), 65536, 4,
				   h, &addr, &pending), 1);
	CHECK_EQ(addr, at);
	CHECK(!pending);
	CHECK_EQ(kiln_dedupe_saved(f.dd), sizeof(a));
	fixture_close(&f);
}

TEST(equal_bytes_with_other_length_or_format_are_not_shared)
{
	struct fixture f;
	uint8_t a[4096];
	uint64_t h, addr;
	bool pending;

	CHECK_EQ(fixture_open(&f), 0);
	fill(a, sizeof(a), 2);
	h = kiln_dedupe_hash(a, sizeof(a), 20000, 1);
	commit_one(&f, a, sizeof(a), 20000, 1, h);
	/* same stored bytes, but decoding to another length */
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, a, sizeof(a), 19999, 1,
				   h, &addr, &pending), 0);
	/* or with another algorithm, or raw */
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, a, sizeof(a), 20000, 3,
				   h, &addr, &pending), 0);
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, a, sizeof(a), 20000, 0,
				   h, &addr, &pending), 0);
	/* a shorter prefix of the same bytes */
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, a, 4000, 20000, 1,
				   h, &addr, &pending), 0);
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, a, sizeof(a), 20000, 1,
				   h, &addr, &pending), 1);
	fixture_close(&f);
}

TEST(pending_pclusters_are_compared_in_the_commit_buffer)
{
	struct fixture f;
	uint8_t local[8192], other[3000];
	uint64_t h, addr = 0;
	bool pending = false;

	CHECK_EQ(fixture_open(&f), 0);
	fill(local, sizeof(local), 3);
	fill(other, sizeof(other), 4);
	h = kiln_dedupe_hash(local + 1000, 3000, 65536, 0);
	CHECK_EQ(kiln_dedupe_add_pending(f.dd, 3000, 65536, 0, h, 1000), 0);
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, local, other, 3000, 65536, 0,
				   h, &addr, &pending), 0);
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, local, local + 1000, 3000,
				   65536, 0, h, &addr, &pending), 1);
	CHECK(pending);
	CHECK_EQ(addr, 1000u);
	/* once settled, the entry is an image address */
	kiln_dedupe_settle(f.dd, 8192);
	CHECK_EQ(kiln_out_pwrite(f.out, local, sizeof(local), 4096), 0);
	CHECK_EQ(kiln_dedupe_find(f.dd, f.out, NULL, local + 1000, 3000,
				   65536, 0, h, &addr, &pending), 0);
	fixture_close(&f);
}

static int refuse(void *ctx, uint64_t pstart)
{
	(*(int *)ctx)++;
	(void)pstart;
	return 0;
}

static int accept(void *ctx, uint64_t pstart)
{
	(*(int *)ctx)++;
	(void)pstart;
	return 1;
}

TEST(flat_data_is_shared_only_when_the_caller_confirms_it)
{
	struct fixture f;
	uint64_t addr = 0;
	int calls = 0;

	CHECK_EQ(fixture_open(&f), 0);
	CHECK_EQ(kiln_dedupe_add_flat(f.dd, 300000, 42, 8192), 0);
	/* other length or hash: not even a candidate */
	CHECK_EQ(kiln_dedupe_find_flat(f.dd, 299008, 42, accept, &calls,
					&addr), 0);
	CHECK_EQ(kiln_dedupe_find_flat(f.dd, 300000, 43, accept, &calls,
					&addr), 0);
	CHECK_EQ(calls, 0);
	CHECK_EQ(kiln_dedupe_find_flat(f.dd, 300000, 42, refuse, &calls,
					&addr), 0);
	CHECK_EQ(calls, 1);
	CHECK_EQ(kiln_dedupe_find_flat(f.dd, 300000, 42, accept, &calls,
					&addr), 1);
	CHECK_EQ(addr, 8192u);
	/* a pcluster entry never answers a flat lookup, nor the reverse */
	CHECK_EQ(kiln_dedupe_add_pending(f.dd, 300000, 0, 0, 77, 0), 0);
	kiln_dedupe_settle(f.dd, 4096);
	CHECK_EQ(kiln_dedupe_find_flat(f.dd, 300000, 77, accept, &calls,
					&addr), 0);
	fixture_close(&f);
}

TAP_MAIN(TAP_ENTRY(forced_hash_collision_with_other_bytes_is_not_shared),
	 TAP_ENTRY(equal_bytes_with_other_length_or_format_are_not_shared),
	 TAP_ENTRY(pending_pclusters_are_compared_in_the_commit_buffer),
	 TAP_ENTRY(flat_data_is_shared_only_when_the_caller_confirms_it))
