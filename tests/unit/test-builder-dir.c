// SPDX-License-Identifier: MIT
/* Tests for lib/builder/dir.c: name order and directory block packing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/endian.h"
#include "tap.h"

#define BLKSZ 4096u

/* A decoded directory: names in on-disk order, with checks on the way. */
struct decoded {
	char names[8192][256];
	size_t lens[8192];
	kiln_nid_t nids[8192];
	size_t count;
	size_t blocks;
	int bad;			/* layout rule violations seen */
};

static struct decoded dec;

static int collect(void *ctx, uint64_t blk, const void *data, size_t len)
{
	const uint8_t *p = data;
	struct decoded *d = ctx;
	uint16_t nameoff0 = kiln_get_le16(p + 8);
	size_t n = nameoff0 / sizeof(struct erofs_dirent);

	if (blk != d->blocks || len > BLKSZ || nameoff0 == 0 ||
	    nameoff0 % 12 || nameoff0 >= len)
		d->bad++;
	d->blocks++;
	for (size_t i = 0; i < n && d->count < 8192; i++) {
		const uint8_t *de = p + i * 12;
		size_t off = kiln_get_le16(de + 8);
		size_t end = i + 1 < n ? kiln_get_le16(de + 12 + 8) : len;

		/* the last name ends at the first NUL or at the end */
		if (i + 1 == n)
			for (size_t k = off; k < len; k++)
				if (!p[k]) {
					end = k;
					break;
				}
		if (end <= off || end - off > 255 || end > len) {
			d->bad++;
			continue;
		}
		memcpy(d->names[d->count], p + off, end - off);
		d->lens[d->count] = end - off;
		d->nids[d->count] = kiln_get_le64(de);
		d->count++;
	}
	/* unused tail of a full block is zero */
	if (len == BLKSZ) {
		size_t used = kiln_get_le16(p + (n - 1) * 12 + 8);

		while (used < BLKSZ && p[used])
			used++;
		for (size_t k = used; k < BLKSZ; k++)
			if (p[k])
				d->bad++;
	}
	return 0;
}

static struct kiln_node *make_dir(const char *const *names, const size_t *lens,
				  size_t n)
{
	struct kiln_node *dir = calloc(1, sizeof(*dir));

	dir->mode = S_IFDIR | 0755;
	dir->nid = 100;
	dir->children = calloc(n, sizeof(*dir->children));
	dir->nr_children = n;
	for (size_t i = 0; i < n; i++) {
		struct kiln_node *c = calloc(1, sizeof(*c));

		c->mode = S_IFREG | 0644;
		c->nid = 1000 + i;
		dir->children[i].name = (char *)names[i];
		dir->children[i].name_len = (uint16_t)lens[i];
		dir->children[i].node = c;
	}
	kiln_dir_sort(dir->children, n);
	return dir;
}

static void free_dir(struct kiln_node *dir)
{
	for (size_t i = 0; i < dir->nr_children; i++)
		free(dir->children[i].node);
	free(dir->children);
	free(dir);
}

/* Encode @dir, decode it into dec; returns i_size. */
static uint64_t roundtrip(struct kiln_node *dir)
{
	struct kiln_dirent_src *ents;
	static uint8_t block[BLKSZ];
	size_t nr;
	uint64_t size;

	memset(&dec, 0, sizeof(dec));
	CHECK_EQ(kiln_dir_entries(dir, &ents, &nr), 0);
	size = kiln_dir_size(ents, nr, BLKSZ);
	CHECK_EQ(kiln_dir_encode(ents, nr, BLKSZ, block, collect, &dec), 0);
	free(ents);
	return size;
}

static bool strictly_sorted(void)
{
	for (size_t i = 1; i < dec.count; i++)
		if (kiln_dir_namecmp(dec.names[i - 1], dec.lens[i - 1],
				     dec.names[i], dec.lens[i]) >= 0)
			return false;
	return true;
}

TEST(namecmp_is_unsigned_bytes_shorter_first)
{
	CHECK(kiln_dir_namecmp("a", 1, "b", 1) < 0);
	CHECK(kiln_dir_namecmp("ab", 2, "a", 1) > 0);
	CHECK(kiln_dir_namecmp("a", 1, "ab", 2) < 0);
	CHECK(kiln_dir_namecmp("\xff", 1, "z", 1) > 0);
	CHECK(kiln_dir_namecmp("!", 1, ".", 1) < 0);
	CHECK(kiln_dir_namecmp(".", 1, "..", 2) < 0);
	CHECK(kiln_dir_namecmp("x", 1, "x", 1) == 0);
}

TEST(empty_directory_is_27_bytes_dot_then_dotdot)
{
	struct kiln_node *dir = make_dir(NULL, NULL, 0);

	CHECK_EQ(roundtrip(dir), 27);
	CHECK_EQ(dec.count, 2);
	CHECK_EQ(dec.blocks, 1);
	CHECK(dec.lens[0] == 1 && dec.names[0][0] == '.');
	CHECK(dec.lens[1] == 2 && !memcmp(dec.names[1], "..", 2));
	CHECK_EQ(dec.nids[0], 100);
	CHECK_EQ(dec.nids[1], 100);	/* no parent: root's ".." is itself */
	CHECK_EQ(dec.bad, 0);
	free_dir(dir);
}

TEST(names_below_dot_sort_before_dot)
{
	static const char *const names[] = { "b", "!a", " b", "-c", "+d",
					     "\x01x", "\xff", "\xff\xfe",
					     ".hidden", "..x", "a.b" };
	size_t lens[KILN_ARRAY_SIZE(names)];
	struct kiln_node *dir;

	for (size_t i = 0; i < KILN_ARRAY_SIZE(names); i++)
		lens[i] = strlen(names[i]);
	dir = make_dir(names, lens, KILN_ARRAY_SIZE(names));
	roundtrip(dir);
	CHECK_EQ(dec.count, KILN_ARRAY_SIZE(names) + 2);
	CHECK(strictly_sorted());
	CHECK(dec.lens[0] == 2 && !memcmp(dec.names[0], "\x01x", 2));
	CHECK(!memcmp(dec.names[dec.count - 1], "\xff\xfe", 2));
	/* "." lands after "\x01x", " b", "!a", "+d", "-c" */
	CHECK(dec.lens[5] == 1 && dec.names[5][0] == '.');
	CHECK(dec.lens[6] == 2 && !memcmp(dec.names[6], "..", 2));
	CHECK_EQ(dec.bad, 0);
	free_dir(dir);
}

TEST(longest_names_pack_15_per_block_without_straddling)
{
	static char buf[40][256];
	const char *names[40];
	size_t lens[40];
	struct kiln_node *dir;
	uint64_t size;

	for (size_t i = 0; i < 40; i++) {
		memset(buf[i], 'a' + (int)(i % 26), 255);
		buf[i][0] = (char)('A' + i);
		names[i] = buf[i];
		lens[i] = 255;
	}
	dir = make_dir(names, lens, 40);
	size = roundtrip(dir);
	/* 12 + 255 = 267 bytes each: 15 fit in 4096, "." ".." in the first */
	CHECK_EQ(dec.count, 42);
	CHECK_EQ(dec.blocks, 3);
	CHECK(strictly_sorted());
	CHECK_EQ(dec.bad, 0);
	/* i_size is not rounded up to the block */
	CHECK(size > 2 * BLKSZ && size < 3 * BLKSZ);
	free_dir(dir);
}

TEST(thousands_of_entries_roundtrip_in_order)
{
	static char buf[5000][32];
	static const char *names[5000];
	static size_t lens[5000];
	struct kiln_node *dir;
	uint64_t size, used = 0;

	for (size_t i = 0; i < 5000; i++) {
		lens[i] = (size_t)snprintf(buf[i], sizeof(buf[i]), "file_%zu%s",
					   (i * 7919) % 5000, i % 3 ? "" : "_x");
		names[i] = buf[i];
	}
	dir = make_dir(names, lens, 5000);
	size = roundtrip(dir);
	CHECK_EQ(dec.count, 5002);
	CHECK(strictly_sorted());
	CHECK_EQ(dec.bad, 0);
	CHECK_EQ(kiln_div_round_up(size, BLKSZ), dec.blocks);
	for (size_t i = 0; i < dec.count; i++)
		used += 12 + dec.lens[i];
	CHECK(size >= used);
	free_dir(dir);
}

TEST(block_exactly_full_keeps_size_at_block_end)
{
	/* "." and ".." (27 bytes), then names filling the block exactly */
	static char bufs[16][256];
	const char *names[16];
	size_t lens[16], n = 0, left = BLKSZ - 27;
	struct kiln_node *dir;

	while (left) {
		lens[n] = left - 12 > 255 ? 255 : left - 12;
		memset(bufs[n], 'q', lens[n]);
		bufs[n][0] = (char)('a' + n);
		names[n] = bufs[n];
		left -= 12 + lens[n];
		n++;
	}
	dir = make_dir(names, lens, n);
	CHECK_EQ(roundtrip(dir), BLKSZ);
	CHECK_EQ(dec.blocks, 1);
	CHECK_EQ(dec.count, n + 2);
	CHECK_EQ(dec.bad, 0);
	free_dir(dir);
}

TAP_MAIN(TAP_ENTRY(namecmp_is_unsigned_bytes_shorter_first),
	 TAP_ENTRY(empty_directory_is_27_bytes_dot_then_dotdot),
	 TAP_ENTRY(names_below_dot_sort_before_dot),
	 TAP_ENTRY(longest_names_pack_15_per_block_without_straddling),
	 TAP_ENTRY(thousands_of_entries_roundtrip_in_order),
	 TAP_ENTRY(block_exactly_full_keeps_size_at_block_end))
