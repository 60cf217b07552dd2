// SPDX-License-Identifier: MIT
/*
 * Tests for the dm-verity tree: its geometry and superblock, the tree
 * kiln_build() appends (against a plain level-by-level reference), and
 * the reader's checks of every block against the root hash.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <kiln/builder.h>
#include <kiln/image.h>
#include <kiln/verity.h>

#include "format/verity_fs.h"
#include "tap.h"

static char tmp[64];

static void path_of(char *buf, size_t cap, const char *rel)
{
	snprintf(buf, cap, "%s/%s", tmp, rel);
}

static void put_file(const char *rel, const void *data, size_t len)
{
	char path[256];
	int fd;

	path_of(path, sizeof(path), rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

static void make_tree(void)
{
	static char big[1200000];	/* past 256 blocks: 3 level-0 blocks */
	char path[256];

	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-verity.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	path_of(path, sizeof(path), "src");
	CHECK(mkdir(path, 0755) == 0);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 1000);
	put_file("src/big", big, sizeof(big));
	put_file("src/small", "hello\n", 6);
}

static void remove_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
}

static uint8_t *load(const char *rel, size_t *len)
{
	char path[256];
	struct stat st;
	uint8_t *buf;
	int fd;

	path_of(path, sizeof(path), rel);
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	*len = (size_t)read(fd, buf, (size_t)st.st_size);
	close(fd);
	return buf;
}

static int build(const char *rel, unsigned int threads, unsigned int bits,
		 const uint8_t *salt, size_t salt_len,
		 struct kiln_build_stats *st)
{
	struct kiln_build_opts o;
	char src[256], img[256];

	kiln_build_opts_init(&o);
	o.flags |= KILN_BUILD_VERITY;
	o.threads = threads;
	o.blkszbits = bits;
	o.verity_salt = salt;
	o.verity_salt_len = salt_len;
	path_of(src, sizeof(src), "src");
	path_of(img, sizeof(img), rel);
	return kiln_build(src, img, &o, st);
}

/* SHA-256(salt || data), straight from libcrypto. */
static void ref_hash(const uint8_t *salt, size_t salt_len, const void *data,
		     size_t len, uint8_t out[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned int n;

	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	EVP_DigestUpdate(c, salt, salt_len);
	EVP_DigestUpdate(c, data, len);
	EVP_DigestFinal_ex(c, out, &n);
	EVP_MD_CTX_free(c);
}

/*
 * The root hash of @nblks blocks at @data, level by level: each level the
 * digests of the one below packed into zero-padded blocks, until one
 * block is left.
 */
static void ref_root(const uint8_t *data, uint64_t nblks, size_t bsz,
		     const uint8_t *salt, size_t salt_len, uint8_t root[32])
{
	const uint8_t *cur = data;
	uint8_t *owned = NULL;

	while (nblks > 1) {
		uint64_t per = bsz / 32;
		uint64_t up = (nblks + per - 1) / per;
		uint8_t *next = calloc(up, bsz);

		for (uint64_t i = 0; i < nblks; i++)
			ref_hash(salt, salt_len, cur + i * bsz, bsz,
				 next + i * 32);
		free(owned);
		owned = next;
		cur = next;
		nblks = up;
	}
	ref_hash(salt, salt_len, cur, bsz, root);
	free(owned);
}

TEST(geometry_matches_dm_verity)
{
	struct kiln_verity_geo g;

	CHECK_EQ(kiln_verity_geometry(&g, 12, 1, 10), 0);
	CHECK_EQ(g.levels, 0);
	CHECK_EQ(g.tree_blks, 0);
	CHECK_EQ(kiln_verity_geometry(&g, 12, 128, 10), 0);
	CHECK_EQ(g.levels, 1);
	CHECK_EQ(g.level_blk[0], 10);
	CHECK_EQ(g.level_blks[0], 1);
	/* 129 blocks: two level-0 blocks under a top block written first */
	CHECK_EQ(kiln_verity_geometry(&g, 12, 129, 10), 0);
	CHECK_EQ(g.levels, 2);
	CHECK_EQ(g.level_blk[1], 10);
	CHECK_EQ(g.level_blks[1], 1);
	CHECK_EQ(g.level_blk[0], 11);
	CHECK_EQ(g.level_blks[0], 2);
	CHECK_EQ(g.tree_blks, 3);
	/* 512-byte blocks hold 16 digests */
	CHECK_EQ(kiln_verity_geometry(&g, 9, 257, 0), 0);
	CHECK_EQ(g.hpb_bits, 4);
	CHECK_EQ(g.levels, 3);
	CHECK_EQ(g.level_blks[0], 17);
	CHECK_EQ(g.level_blks[1], 2);
	CHECK_EQ(g.level_blks[2], 1);
	CHECK_EQ(kiln_verity_geometry(&g, 12, 0, 0), -EINVAL);
	CHECK_EQ(kiln_verity_geometry(&g, 13, 5, 0), -EINVAL);
	CHECK_EQ(kiln_verity_geometry(&g, 12, 5, UINT64_MAX - 1), -EINVAL);
}

TEST(superblock_round_trips_and_rejects_others)
{
	struct kiln_verity_sb sb = { .blkszbits = 12, .data_blocks = 77,
				     .salt_len = 3 }, out;
	uint8_t raw[KILN_VERITY_SB_SIZE];
	const char *why = NULL;

	memcpy(sb.salt, "\1\2\3", 3);
	kiln_verity_sb_encode(&sb, raw);
	CHECK(!memcmp(raw, "verity\0\0", 8));
	CHECK_EQ(kiln_verity_sb_decode(raw, sizeof(raw), &out, &why), 0);
	CHECK_EQ(out.blkszbits, 12);
	CHECK_EQ(out.data_blocks, 77);
	CHECK_EQ(out.salt_len, 3);
	CHECK(!memcmp(out.salt, "\1\2\3", 3));
	CHECK_EQ(kiln_verity_sb_decode(raw, 100, &out, &why), -ENOENT);
	raw[8] = 2;				/* version */
	CHECK_EQ(kiln_verity_sb_decode(raw, sizeof(raw), &out, &why),
		 -EOPNOTSUPP);
	raw[8] = 1;
	memcpy(raw + 32, "sha1\0\0", 6);	/* algorithm */
	CHECK_EQ(kiln_verity_sb_decode(raw, sizeof(raw), &out, &why),
		 -EOPNOTSUPP);
	memcpy(raw + 32, "sha256", 6);
	raw[80] = 0xff;				/* salt size 0x1ff */
	raw[81] = 1;
	CHECK_EQ(kiln_verity_sb_decode(raw, sizeof(raw), &out, &why),
		 -EUCLEAN);
}

TEST(hex_decodes_and_encodes)
{
	uint8_t b[4];
	char s[9];

	CHECK_EQ(kiln_hex_decode("00fFa1", b, sizeof(b)), 3);
	CHECK(b[0] == 0 && b[1] == 0xff && b[2] == 0xa1);
	CHECK_EQ(kiln_hex_decode("abc", b, sizeof(b)), -EINVAL);
	CHECK_EQ(kiln_hex_decode("zz", b, sizeof(b)), -EINVAL);
	CHECK_EQ(kiln_hex_decode("0011223344", b, sizeof(b)), -ERANGE);
	CHECK_EQ(kiln_hex_decode("", b, sizeof(b)), 0);
	kiln_hex_encode(b, 3, s);
	CHECK(!strcmp(s, "00ffa1"));
}

static void tree_matches_reference(unsigned int bits)
{
	struct kiln_build_stats st;
	struct kiln_verity_sb vsb;
	const char *why = NULL;
	uint8_t root[32], *img;
	size_t len = 0, bsz = (size_t)1 << bits;

	make_tree();
	CHECK_EQ(build("v.img", 2, bits, NULL, 0, &st), 0);
	img = load("v.img", &len);
	CHECK(img != NULL);
	CHECK_EQ(st.verity.block_size, bsz);
	CHECK_EQ(st.verity.hash_offset, st.image_bytes);
	CHECK_EQ(st.verity.data_blocks, st.image_bytes / bsz);
	CHECK_EQ(st.verity.salt_len, 32);
	CHECK_EQ(len, st.total_bytes);
	CHECK_EQ(st.total_bytes, st.image_bytes + st.verity.hash_blocks * bsz);
	if (img && len == st.total_bytes) {
		ref_root(img, st.verity.data_blocks, bsz, st.verity.salt,
			 st.verity.salt_len, root);
		CHECK(!memcmp(root, st.verity.root, 32));
		CHECK_EQ(kiln_verity_sb_decode(img + st.verity.hash_offset,
					       KILN_VERITY_SB_SIZE, &vsb, &why),
			 0);
		CHECK_EQ(vsb.data_blocks, st.verity.data_blocks);
		CHECK(!memcmp(vsb.salt, st.verity.salt, 32));
	}
	free(img);
	remove_tree();
}

TEST(tree_matches_reference_4096)
{
	tree_matches_reference(12);
}

TEST(tree_matches_reference_512)
{
	tree_matches_reference(9);
}

TEST(tree_is_the_same_for_any_thread_count)
{
	struct kiln_build_stats s1, s2;
	uint8_t *a, *b;
	size_t la = 0, lb = 0;

	make_tree();
	CHECK_EQ(build("a.img", 1, 12, NULL, 0, &s1), 0);
	CHECK_EQ(build("b.img", 3, 12, NULL, 0, &s2), 0);
	a = load("a.img", &la);
	b = load("b.img", &lb);
	CHECK(a && b && la == lb && !memcmp(a, b, la));
	CHECK(!memcmp(s1.verity.root, s2.verity.root, 32));
	free(a);
	free(b);
	remove_tree();
}

TEST(salt_given_is_used)
{
	static const uint8_t salt[5] = { 9, 8, 7, 6, 5 };
	struct kiln_build_stats s1, s2;

	make_tree();
	CHECK_EQ(build("a.img", 2, 12, salt, sizeof(salt), &s1), 0);
	CHECK_EQ(s1.verity.salt_len, sizeof(salt));
	CHECK(!memcmp(s1.verity.salt, salt, sizeof(salt)));
	CHECK_EQ(build("b.img", 2, 12, NULL, 0, &s2), 0);
	CHECK(memcmp(s1.verity.root, s2.verity.root, 32));
	CHECK_EQ(build("c.img", 2, 12, salt, KILN_VERITY_SALT_MAX + 1, &s2),
		 -EINVAL);
	remove_tree();
}

static int count_bad(void *ctx, const struct kiln_verity_bad *b)
{
	struct kiln_verity_bad *last = ctx;

	*last = *b;
	return 0;
}

static int open_verity(struct kiln_image **img, const char *rel,
		       const uint8_t *root)
{
	struct kiln_image_opts o = { .struct_size = sizeof(o),
				     .verity_root = root };
	char path[256];

	path_of(path, sizeof(path), rel);
	return kiln_image_open(img, path, &o);
}

static void flip(const char *rel, uint64_t off)
{
	char path[256];
	uint8_t c;
	int fd;

	path_of(path, sizeof(path), rel);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, &c, 1, (off_t)off) == 1);
	c ^= 0x20;
	CHECK(pwrite(fd, &c, 1, (off_t)off) == 1);
	close(fd);
}

TEST(reader_finds_each_bad_block)
{
	struct kiln_build_stats st;
	struct kiln_verity_bad last = { 0 };
	struct kiln_verity_info vi;
	struct kiln_image *img = NULL;
	uint8_t wrong[32];
	uint64_t bad = 0, data_blk = 40;
	size_t len = 0;
	uint8_t *raw;

	make_tree();
	CHECK_EQ(build("v.img", 2, 12, NULL, 0, &st), 0);
	/* good: every block checks, the reader reports the tree */
	CHECK_EQ(open_verity(&img, "v.img", st.verity.root), 0);
	if (img) {
		CHECK_EQ(kiln_image_verity_info(img, &vi), 0);
		CHECK_EQ(vi.data_blocks, st.verity.data_blocks);
		CHECK_EQ(vi.hash_offset, st.verity.hash_offset);
		CHECK_EQ(kiln_image_verity_check(img, count_bad, &last, &bad),
			 0);
		CHECK_EQ(bad, 0);
		kiln_image_close(img);
	}
	/* a wrong root hash: block 0 already fails */
	memcpy(wrong, st.verity.root, 32);
	wrong[0] ^= 1;
	CHECK_EQ(open_verity(&img, "v.img", wrong), -KILN_ECORRUPT);
	/* a flipped data byte: that block, and only it */
	flip("v.img", data_blk * 4096 + 123);
	CHECK_EQ(open_verity(&img, "v.img", st.verity.root), 0);
	if (img) {
		CHECK_EQ(kiln_image_verity_check(img, count_bad, &last, &bad),
			 -KILN_ECORRUPT);
		CHECK_EQ(bad, 1);
		CHECK_EQ(last.blk, data_blk);
		CHECK_EQ(last.level, -1);
		kiln_image_close(img);
	}
	flip("v.img", data_blk * 4096 + 123);
	/*
	 * A flipped byte in the second level-0 block (after the verity
	 * superblock and the top level): it, and the data blocks 128-255
	 * it vouches for (the big file's, before the metadata).
	 */
	raw = load("v.img", &len);
	free(raw);
	CHECK(st.verity.data_blocks > 256);
	flip("v.img", st.verity.hash_offset + 3 * 4096 + 10 * 32);
	CHECK_EQ(open_verity(&img, "v.img", st.verity.root), 0);
	if (img) {
		CHECK_EQ(kiln_image_verity_check(img, count_bad, &last, &bad),
			 -KILN_ECORRUPT);
		CHECK_EQ(bad, 1 + 128);
		CHECK_EQ(last.level, -1);
		kiln_image_close(img);
	}
	remove_tree();
}

TEST(probe_finds_the_tree_and_what_it_hashes_to)
{
	struct kiln_build_stats st;
	struct kiln_verity_info vi;
	struct kiln_image *img = NULL;
	uint8_t salt[3] = { 1, 2, 3 };
	char path[256];

	make_tree();
	CHECK_EQ(build("v.img", 1, 12, salt, sizeof(salt), &st), 0);
	path_of(path, sizeof(path), "v.img");
	CHECK_EQ(kiln_image_open(&img, path, NULL), 0);
	if (img) {
		/* untrusted: the root is what the top level hashes to */
		CHECK_EQ(kiln_image_verity_probe(img, NULL, &vi), 0);
		CHECK(!memcmp(vi.root, st.verity.root, 32));
		CHECK_EQ(vi.salt_len, 3);
		CHECK(!memcmp(vi.salt, salt, 3));
		CHECK_EQ(vi.hash_offset, st.verity.hash_offset);
		CHECK_EQ(vi.data_blocks, st.verity.data_blocks);
		CHECK_EQ(vi.hash_blocks, st.verity.hash_blocks);
		CHECK_EQ(vi.block_size, 4096);
		CHECK_EQ(kiln_image_verity_info(img, &vi), -ENOENT);
		kiln_image_close(img);
	}
	/* a changed top level hashes to another root */
	flip("v.img", st.verity.hash_offset + 4096 + 7);
	CHECK_EQ(kiln_image_open(&img, path, NULL), 0);
	if (img) {
		CHECK_EQ(kiln_image_verity_probe(img, NULL, &vi), 0);
		CHECK(memcmp(vi.root, st.verity.root, 32) != 0);
		kiln_image_close(img);
	}
	/* opened through the tree: as kiln_image_verity_info() */
	flip("v.img", st.verity.hash_offset + 4096 + 7);
	CHECK_EQ(open_verity(&img, "v.img", st.verity.root), 0);
	if (img) {
		CHECK_EQ(kiln_image_verity_probe(img, NULL, &vi), 0);
		CHECK(!memcmp(vi.root, st.verity.root, 32));
		kiln_image_close(img);
	}
	/* no tree: the superblock's block count points past the file */
	CHECK_EQ(build("v.img", 1, 12, NULL, 0, &st), 0);
	CHECK(truncate(path, (off_t)st.verity.hash_offset) == 0);
	CHECK_EQ(kiln_image_open(&img, path, NULL), 0);
	if (img) {
		CHECK(kiln_image_verity_probe(img, NULL, &vi) < 0);
		kiln_image_close(img);
	}
	remove_tree();
}

TAP_MAIN(TAP_ENTRY(geometry_matches_dm_verity),
	 TAP_ENTRY(superblock_round_trips_and_rejects_others),
	 TAP_ENTRY(hex_decodes_and_encodes),
	 TAP_ENTRY(tree_matches_reference_4096),
	 TAP_ENTRY(tree_matches_reference_512),
	 TAP_ENTRY(tree_is_the_same_for_any_thread_count),
	 TAP_ENTRY(salt_given_is_used),
	 TAP_ENTRY(reader_finds_each_bad_block),
	 TAP_ENTRY(probe_finds_the_tree_and_what_it_hashes_to))
