// SPDX-License-Identifier: MIT
/*
 * Tests for lib/reader/zread.c and zmap.c on real images: compressed
 * images made by the system's mkfs.erofs (lz4, lz4hc, big pclusters,
 * ztailpacking, fragments, dedupe) are read through the public API with
 * several access patterns and cache modes, and compared with the tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/image.h>

#include "util/checked.h"
#include "mkfs-fixture.h"
#include "tap.h"

static struct fixture fx;
static bool have_tree;

static const char *const files[] = {
	"text.txt", "rand.bin", "small.txt", "mixed.bin", "dup1.txt",
	"dup2.txt", "dup3.txt", "tiny", "empty", "sub/deep.txt",
};

/* Deterministic trees mixing compressible, incompressible and duplicate data. */
static bool make_tree(void)
{
	return fixture_sh(&fx,
		"mkdir -p src/sub && /usr/bin/python3 -c \""
		"import random\n"
		"random.seed(7)\n"
		"w=[b'alpha ',b'beta ',b'gamma\\\\n',b'delta ',b'0123456789 ',b'erofs ']\n"
		"t=lambda n: b''.join(random.choice(w) for _ in range(n))\n"
		"open('src/text.txt','wb').write(t(120000))\n"
		"open('src/rand.bin','wb').write(random.randbytes(200000))\n"
		"open('src/small.txt','wb').write(b'hello world\\\\n'*10)\n"
		"open('src/mixed.bin','wb').write(random.randbytes(50000)+b'A'*100000+random.randbytes(7000)+t(20000))\n"
		"d=t(30000)\n"
		"open('src/dup1.txt','wb').write(d)\n"
		"open('src/dup2.txt','wb').write(d)\n"
		"open('src/dup3.txt','wb').write(d[5000:])\n"
		"open('src/tiny','wb').write(b'x')\n"
		"open('src/empty','wb').write(b'')\n"
		"open('src/sub/deep.txt','wb').write(t(9000))\n"
		"\"");
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf && read(fd, buf, (size_t)st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static uint32_t rng = 99;

static uint32_t next_rand(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

/*
 * kiln_file_read_extent(): the extents tile the file from 0 to its end,
 * each decodes to the file's bytes and holds the offset asked for, random
 * offsets give the extent that holds them, and a small buffer is refused.
 * A file stored uncompressed has nothing to decode: 0 everywhere.
 */
static bool check_extents(struct kiln_file *f, const uint8_t *want,
			  size_t len, bool compressed)
{
	size_t cap = 4u << 20, ext_len = 0;
	uint8_t *got = malloc(cap);
	uint64_t pos = 0, ext_off = 0;
	bool ok = got != NULL;
	int r;

	if (ok && len && !compressed) {
		for (int i = 0; i < 20; i++)
			ok &= kiln_file_read_extent(f, got, cap,
						    next_rand() % len,
						    &ext_off, &ext_len) == 0;
		free(got);
		return ok;
	}
	while (ok && pos < len) {
		ext_off = UINT64_MAX;
		ext_len = 0;
		r = kiln_file_read_extent(f, got, cap, pos, &ext_off, &ext_len);
		ok &= r == 1 && ext_off == pos && ext_len &&
		      pos + ext_len <= len && !memcmp(got, want + pos, ext_len);
		pos += r == 1 && ext_len ? ext_len : len;
	}
	for (int i = 0; ok && i < 50 && len; i++) {
		size_t o = next_rand() % len, small_len = 0;
		uint64_t small_off = 0;

		r = kiln_file_read_extent(f, got, cap, o, &ext_off, &ext_len);
		ok &= r == 1 && ext_off <= o && o < ext_off + ext_len &&
		      ext_off + ext_len <= len &&
		      !memcmp(got, want + ext_off, ext_len);
		/* no room for every byte: no bytes, but the room it needs */
		if (ok && ext_len > 1)
			ok &= kiln_file_read_extent(f, got, ext_len - 1, o,
						    &small_off, &small_len) ==
			      -ENOSPC && small_off == ext_off &&
			      small_len == ext_len;
	}
	ok &= kiln_file_read_extent(f, got, cap, len, &ext_off, &ext_len) == 0;
	free(got);
	return ok;
}

/* Read @f in several patterns and compare with @want. */
static bool check_file(struct kiln_file *f, const uint8_t *want, size_t len,
		       bool compressed)
{
	uint8_t *got = malloc(len + 8192);
	bool ok = true;
	size_t off;
	ssize_t r;

	/* 1. one read of everything (extents decoded in place) */
	memset(got, 0xEE, len + 8192);
	r = kiln_file_pread(f, got, len + 100, 0);
	ok &= r == (ssize_t)len && !memcmp(got, want, len);
	/* 2. sequential 4 KiB reads */
	for (off = 0; off < len; off += 4096) {
		size_t n = len - off < 4096 ? len - off : 4096;

		r = kiln_file_pread(f, got, 4096, off);
		ok &= r == (ssize_t)n && !memcmp(got, want + off, n);
	}
	/* 3. odd sizes at random offsets, including 1-byte reads */
	for (int i = 0; i < 300 && len; i++) {
		size_t o = next_rand() % len;
		size_t n = i % 3 == 0 ? 1 : next_rand() % 70000 + 1;
		size_t expect = n < len - o ? n : len - o;

		r = kiln_file_pread(f, got, n, o);
		ok &= r == (ssize_t)expect && !memcmp(got, want + o, expect);
	}
	/* 4. at and past EOF */
	ok &= kiln_file_pread(f, got, 10, len) == 0;
	free(got);
	return ok && check_extents(f, want, len, compressed);
}

/* Whether mkfs.erofs compressed inode @nid (its st_blocks say so). */
static bool is_compressed(struct kiln_image *img, kiln_nid_t nid)
{
	struct kiln_stat st;

	return !kiln_stat_nid(img, nid, &st) &&
	       st.blocks * 512 < st.size;
}

static void check_image(const char *mkfs_opts, enum kiln_cache_mode cache,
			unsigned int flags)
{
	struct kiln_image_opts o = { .struct_size = sizeof(o), .cache = cache,
				     .flags = flags };
	struct kiln_image *img = NULL;
	char cmd[512];

	/*
	 * Without meson's MALLOC_PERTURB_: mkfs.erofs 1.9.4 reads memory it
	 * never set when it packs fragments, and crashes or hangs on the
	 * poisoned bytes.
	 */
	snprintf(cmd, sizeof(cmd),
		 "env -u MALLOC_PERTURB_ mkfs.erofs --quiet %s img.erofs src "
		 ">/dev/null", mkfs_opts);
	if (!fixture_sh(&fx, cmd)) {
		tap_skip("mkfs.erofs %s failed", mkfs_opts);
		return;
	}
	CHECK_EQ(kiln_image_open(&img, fixture_path(&fx, "img.erofs"), &o), 0);
	if (!img)
		return;
	for (size_t i = 0; i < KILN_ARRAY_SIZE(files); i++) {
		char rel[256];
		struct kiln_file *f = NULL;
		kiln_nid_t nid;
		uint8_t *want;
		size_t len = 0;

		snprintf(rel, sizeof(rel), "src/%s", files[i]);
		want = slurp(fixture_path(&fx, rel), &len);
		CHECK(want != NULL);
		if (kiln_resolve(img, files[i], 0, &nid) ||
		    kiln_file_open(img, nid, &f)) {
			printf("#   %s: cannot open %s\n", mkfs_opts, files[i]);
			CHECK(0);
			free(want);
			continue;
		}
		if (!check_file(f, want, len, is_compressed(img, nid))) {
			printf("#   %s (cache %d, flags %u): %s differs\n",
			       mkfs_opts, cache, flags, files[i]);
			CHECK(0);
		}
		kiln_file_close(f);
		free(want);
	}
	kiln_image_close(img);
}



static const char *const variants[] = {
	"-zlz4",
	"-zlz4hc,12",
	"-zlz4hc -C65536",
	"-zlz4 -C16384 -Eztailpacking",
	"-zlz4hc -Efragments",
	"-zlz4 -Ededupe",
	"-zlz4hc -C65536 -Eztailpacking,fragments",
	"-zlz4 -Eall-fragments",
	"-zlz4 -Efragments,dedupe",
	"-zlz4hc,9 -C32768 -Eztailpacking,force-inode-extended",
	"-zlz4 -Elegacy-compress",
};

#define VARIANT_TEST(name, idx)						\
	TEST(name)							\
	{								\
		if (!have_tree)						\
			SKIP("no mkfs.erofs");				\
		check_image(variants[idx], KILN_CACHE_DEFAULT, 0);	\
		check_image(variants[idx], KILN_CACHE_NONE, 0);		\
		check_image(variants[idx], KILN_CACHE_NONE,		\
			    KILN_IMAGE_FORCE_COPY);			\
	}

VARIANT_TEST(lz4_images_read_back_exactly, 0)
VARIANT_TEST(lz4hc_level_12_images_read_back_exactly, 1)
VARIANT_TEST(big_pcluster_images_read_back_exactly, 2)
VARIANT_TEST(ztailpacking_images_read_back_exactly, 3)
VARIANT_TEST(fragment_images_read_back_exactly, 4)
VARIANT_TEST(dedupe_images_read_back_exactly, 5)
VARIANT_TEST(big_pcluster_tailpacking_fragment_images_read_back, 6)
VARIANT_TEST(all_fragment_images_read_back_exactly, 7)
VARIANT_TEST(fragment_dedupe_images_read_back_exactly, 8)
VARIANT_TEST(extended_inode_tailpacking_images_read_back, 9)
VARIANT_TEST(legacy_full_index_images_read_back_exactly, 10)

int main(void)
{
	static const struct tap_test tests[] = {
		TAP_ENTRY(lz4_images_read_back_exactly),
		TAP_ENTRY(lz4hc_level_12_images_read_back_exactly),
		TAP_ENTRY(big_pcluster_images_read_back_exactly),
		TAP_ENTRY(ztailpacking_images_read_back_exactly),
		TAP_ENTRY(fragment_images_read_back_exactly),
		TAP_ENTRY(dedupe_images_read_back_exactly),
		TAP_ENTRY(big_pcluster_tailpacking_fragment_images_read_back),
		TAP_ENTRY(all_fragment_images_read_back_exactly),
		TAP_ENTRY(fragment_dedupe_images_read_back_exactly),
		TAP_ENTRY(extended_inode_tailpacking_images_read_back),
		TAP_ENTRY(legacy_full_index_images_read_back_exactly),
	};
	int ret;

	if (!fixture_init(&fx))
		return 1;
	have_tree = have_mkfs_erofs() && make_tree();
	ret = tap_run(tests, KILN_ARRAY_SIZE(tests));
	fixture_done(&fx);
	return ret;
}
