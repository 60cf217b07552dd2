// SPDX-License-Identifier: MIT
/*
 * Reader tests on images crafted here byte by byte with 512, 1024, 2048
 * and 4096-byte blocks (mkfs.erofs 1.5 only writes 4096): flat, inline and
 * chunk-based files, multi-block directories, symlinks, xattrs, holes.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <kiln/image.h>

#include "format/erofs_fs.h"
#include "tap.h"
#include "util/checked.h"
#include "util/endian.h"

#define META_BYTES	8192u	/* inode area; data blocks follow */
#define MANY		150u

struct craft {
	uint8_t *d;
	size_t cap;
	unsigned int bits;
	uint32_t bs;
	uint64_t meta_base;	/* byte offset of nid 0 */
	uint64_t meta_pos;	/* next free inode byte */
	uint64_t next_blk;	/* next free data block */
};

struct dent {
	const char *name;
	uint64_t nid;
	uint8_t type;
};

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint8_t rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)(rng >> 32);
}

static uint64_t alloc_blks(struct craft *c, uint64_t n)
{
	uint64_t b = c->next_blk;

	c->next_blk += n;
	return b;
}

/* Reserve an inode of @len metadata bytes (core + xattrs + inline tail). */
static uint64_t alloc_inode(struct craft *c, uint64_t len, bool no_cross)
{
	uint64_t pos = kiln_round_up(c->meta_pos, 32);

	if (no_cross && pos % c->bs + len > c->bs)
		pos = kiln_round_up(pos, c->bs);
	c->meta_pos = pos + len;
	return pos;
}

static uint64_t nid_of(const struct craft *c, uint64_t pos)
{
	return (pos - c->meta_base) / 32;
}

/* Extended inode core at @pos. */
static void put_inode(struct craft *c, uint64_t pos, uint16_t layout,
		      uint16_t mode, uint64_t size, uint32_t i_u,
		      uint16_t xattr_icount, uint32_t nlink)
{
	uint8_t *p = c->d + pos;

	kiln_put_le16(p + 0, (uint16_t)(1 | layout << 1));
	kiln_put_le16(p + 2, xattr_icount);
	kiln_put_le16(p + 4, mode);
	kiln_put_le64(p + 8, size);
	kiln_put_le32(p + 16, i_u);
	kiln_put_le32(p + 24, 1000);
	kiln_put_le32(p + 28, 2000);
	kiln_put_le64(p + 32, 1700000000);
	kiln_put_le32(p + 40, 5);
	kiln_put_le32(p + 44, nlink);
}

/* Directory data for sorted @ents, packed block by block; returns i_size. */
static uint64_t put_dir_data(struct craft *c, uint64_t blk,
			     const struct dent *ents, size_t n)
{
	uint64_t nblks = 0;
	size_t i = 0, off = 0;

	while (i < n) {
		size_t first = i, names = 0, cnt;
		uint8_t *b = c->d + (blk + nblks++) * c->bs;

		/* an entry (dirent + name) never straddles blocks */
		while (i < n && 12 * (i - first + 1) + names +
				strlen(ents[i].name) <= c->bs) {
			names += strlen(ents[i].name);
			i++;
		}
		cnt = i - first;
		off = 12 * cnt;
		for (size_t k = 0; k < cnt; k++) {
			size_t len = strlen(ents[first + k].name);

			kiln_put_le64(b + 12 * k, ents[first + k].nid);
			kiln_put_le16(b + 12 * k + 8, (uint16_t)off);
			b[12 * k + 10] = ents[first + k].type;
			memcpy(b + off, ents[first + k].name, len);
			off += len;
		}
	}
	return (nblks - 1) * c->bs + off;
}

static bool omit_dot;	/* craft "many" as a dot-omitted directory */

struct expect {
	uint64_t nid_plain, nid_inline, nid_chunk4, nid_chunk8, nid_link;
	uint64_t nid_many, nid_empty, nid_root;
	uint8_t *plain, *inl, *chunk;
	uint64_t plain_len, inl_len, chunk_len;
	uint64_t hole_off, hole_len;
};

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name,
		      ((const struct dent *)b)->name);
}

/* Build the whole image; returns its size. */
static size_t craft_image(struct craft *c, unsigned int bits,
			  struct expect *x)
{
	uint32_t bs = 1u << bits;
	uint8_t *sb;
	uint64_t pos, blk, chunk_bytes, nchunks;
	struct dent root[9], *many;
	char (*names)[8];
	uint16_t chunk_fmt;

	memset(c, 0, sizeof(*c));
	memset(x, 0, sizeof(*x));
	c->cap = 4u << 20;
	c->d = calloc(1, c->cap);
	c->bits = bits;
	c->bs = bs;
	c->meta_base = kiln_div_round_up(EROFS_SUPER_OFFSET + 128, bs) * bs;
	c->meta_pos = c->meta_base;
	c->next_blk = (c->meta_base + META_BYTES) / bs;

	/* inodes first (nids are needed by the directories) */
	x->nid_root = nid_of(c, pos = alloc_inode(c, 64, false));
	x->nid_many = nid_of(c, alloc_inode(c, 64, false));
	x->nid_empty = nid_of(c, alloc_inode(c, 64, false));

	/* FLAT_PLAIN file with inline xattrs, 3 blocks + 100 bytes */
	pos = alloc_inode(c, 64 + 12 + 4 * 7, false);
	x->nid_plain = nid_of(c, pos);
	x->plain_len = 3ull * bs + 100;
	x->plain = malloc(x->plain_len);
	blk = alloc_blks(c, 4);
	for (uint64_t i = 0; i < x->plain_len; i++)
		x->plain[i] = c->d[blk * bs + i] = rnd8();
	put_inode(c, pos, EROFS_INODE_FLAT_PLAIN, S_IFREG | 0644,
		  x->plain_len, (uint32_t)blk, 8, 1);
	{
		uint8_t *xa = c->d + pos + 64;

		kiln_put_le32(xa, 0);		/* filter off */
		xa[12] = 1;			/* name len */
		xa[13] = EROFS_XATTR_INDEX_USER;
		kiln_put_le16(xa + 14, 1);
		memcpy(xa + 16, "kv", 2);	/* user.k = "v" */
		xa[20] = 5;
		xa[21] = EROFS_XATTR_INDEX_TRUSTED;
		kiln_put_le16(xa + 22, 9);
		memcpy(xa + 24, "hello", 5);	/* trusted.hello */
		memcpy(xa + 29, "123456789", 9);
	}

	/* FLAT_INLINE: 2 full blocks + 37 tail bytes after the core */
	x->inl_len = 2ull * bs + 37;
	pos = alloc_inode(c, 64 + 37, true);
	x->nid_inline = nid_of(c, pos);
	x->inl = malloc(x->inl_len);
	blk = alloc_blks(c, 2);
	for (uint64_t i = 0; i < 2ull * bs; i++)
		x->inl[i] = c->d[blk * bs + i] = rnd8();
	for (uint64_t i = 0; i < 37; i++)
		x->inl[2ull * bs + i] = c->d[pos + 64 + i] = rnd8();
	put_inode(c, pos, EROFS_INODE_FLAT_INLINE, S_IFREG | 0600,
		  x->inl_len, (uint32_t)blk, 0, 1);

	/* chunk-based, 2-block chunks, chunk 1 a hole; 4- and 8-byte maps */
	chunk_bytes = 2ull * bs;
	nchunks = 5;
	x->chunk_len = nchunks * chunk_bytes - 10;
	x->chunk = calloc(1, x->chunk_len);
	x->hole_off = chunk_bytes;
	x->hole_len = chunk_bytes;
	blk = alloc_blks(c, 2 * nchunks);
	for (uint64_t i = 0; i < x->chunk_len; i++)
		if (i / chunk_bytes != 1)
			x->chunk[i] = c->d[blk * bs + i] = rnd8();
	for (int unit = 4; unit <= 8; unit += 4) {
		chunk_fmt = 1 | (unit == 8 ? EROFS_CHUNK_FORMAT_INDEXES : 0);
		pos = alloc_inode(c, 64 + 8 * nchunks, false);
		put_inode(c, pos, EROFS_INODE_CHUNK_BASED, S_IFREG | 0644,
			  x->chunk_len, chunk_fmt, 0, 1);
		for (uint64_t k = 0; k < nchunks; k++) {
			uint8_t *e = c->d + pos + 64 + k * unit;
			uint32_t b = k == 1 ? EROFS_NULL_ADDR32 :
					      (uint32_t)(blk + 2 * k);

			if (unit == 4)
				kiln_put_le32(e, b);
			else
				kiln_put_le32(e + 4, b);
		}
		if (unit == 4)
			x->nid_chunk4 = nid_of(c, pos);
		else
			x->nid_chunk8 = nid_of(c, pos);
	}

	/* inline symlink */
	pos = alloc_inode(c, 64 + 5, true);
	x->nid_link = nid_of(c, pos);
	put_inode(c, pos, EROFS_INODE_FLAT_INLINE, S_IFLNK | 0777, 5, 0, 0, 1);
	memcpy(c->d + pos + 64, "plain", 5);

	/* empty file, hardlinked MANY times from "many" */
	put_inode(c, c->meta_base + x->nid_empty * 32, EROFS_INODE_FLAT_PLAIN,
		  S_IFREG | 0644, 0, 0, 0, MANY);

	/* "many": a FLAT_PLAIN directory over several blocks */
	many = calloc(MANY + 2, sizeof(*many));
	names = calloc(MANY, sizeof(*names));
	many[0] = (struct dent){ "..", x->nid_root, EROFS_FT_DIR };
	for (unsigned int i = 0; i < MANY; i++) {
		snprintf(names[i], sizeof(names[i]), "n%03u", i);
		many[i + 1] = (struct dent){ names[i], x->nid_empty,
					     EROFS_FT_REG_FILE };
	}
	many[MANY + 1] = (struct dent){ ".", x->nid_many, EROFS_FT_DIR };
	/* dot-omitted: "." (the last slot before sorting) is not stored */
	qsort(many, MANY + 2 - omit_dot, sizeof(*many), dent_cmp);
	blk = c->next_blk;
	{
		uint64_t size = put_dir_data(c, blk, many, MANY + 2 - omit_dot);

		c->next_blk = blk + kiln_div_round_up(size, bs);
		put_inode(c, c->meta_base + x->nid_many * 32,
			  EROFS_INODE_FLAT_PLAIN, S_IFDIR | 0755, size,
			  (uint32_t)blk, 0, 2);
		if (omit_dot)
			c->d[c->meta_base + x->nid_many * 32] |=
				EROFS_I_DOT_OMITTED_BIT;
	}

	/* root */
	root[0] = (struct dent){ ".", x->nid_root, EROFS_FT_DIR };
	root[1] = (struct dent){ "..", x->nid_root, EROFS_FT_DIR };
	root[2] = (struct dent){ "plain", x->nid_plain, EROFS_FT_REG_FILE };
	root[3] = (struct dent){ "inline", x->nid_inline, EROFS_FT_REG_FILE };
	root[4] = (struct dent){ "chunk4", x->nid_chunk4, EROFS_FT_REG_FILE };
	root[5] = (struct dent){ "chunk8", x->nid_chunk8, EROFS_FT_REG_FILE };
	root[6] = (struct dent){ "link", x->nid_link, EROFS_FT_SYMLINK };
	root[7] = (struct dent){ "many", x->nid_many, EROFS_FT_DIR };
	root[8] = (struct dent){ "empty", x->nid_empty, EROFS_FT_REG_FILE };
	qsort(root, 9, sizeof(*root), dent_cmp);
	blk = alloc_blks(c, 1);
	put_inode(c, c->meta_base + x->nid_root * 32, EROFS_INODE_FLAT_PLAIN,
		  S_IFDIR | 0755, put_dir_data(c, blk, root, 9),
		  (uint32_t)blk, 0, 3);

	/* superblock */
	sb = c->d + EROFS_SUPER_OFFSET;
	kiln_put_le32(sb + 0x00, EROFS_SUPER_MAGIC);
	sb[0x0C] = (uint8_t)bits;
	kiln_put_le16(sb + 0x0E, (uint16_t)x->nid_root);
	kiln_put_le32(sb + 0x24, (uint32_t)c->next_blk);
	kiln_put_le32(sb + 0x28, (uint32_t)(c->meta_base / bs));
	kiln_put_le32(sb + 0x50, EROFS_FEATURE_INCOMPAT_CHUNKED_FILE);
	free(many);
	free(names);
	return (size_t)(c->next_blk * bs);
}

static struct kiln_image *open_mem(const uint8_t *d, size_t size, int *fd)
{
	struct kiln_image *img = NULL;

	*fd = memfd_create("craft", MFD_CLOEXEC);
	if (*fd < 0 || write(*fd, d, size) != (ssize_t)size)
		return NULL;
	if (kiln_image_open_fd(&img, *fd, NULL))
		return NULL;
	return img;
}

static void check_file(struct kiln_image *img, uint64_t nid,
		       const uint8_t *want, uint64_t len)
{
	struct kiln_file *f;
	uint8_t *got = malloc(len + 16);

	CHECK_EQ(kiln_file_open(img, nid, &f), 0);
	if (!f) {
		free(got);
		return;
	}
	CHECK_EQ(kiln_file_size(f), len);
	CHECK_EQ(kiln_file_pread(f, got, len + 16, 0), (ssize_t)len);
	CHECK(memcmp(got, want, len) == 0);
	for (int i = 0; i < 200; i++) {
		uint64_t off = (rng = rng * 6364136223846793005ull + 1) % len;
		size_t n = (size_t)((rng >> 40) % 3000) + 1;
		size_t exp = (size_t)KILN_MIN((uint64_t)n, len - off);

		CHECK_EQ(kiln_file_pread(f, got, n, off), (ssize_t)exp);
		CHECK(memcmp(got, want + off, exp) == 0);
	}
	kiln_file_close(f);
	free(got);
}

struct names {
	unsigned int n;
	char last[16];
	bool sorted;
};

static int count_names(void *ctx, const struct kiln_dirent *de)
{
	struct names *l = ctx;

	if (l->n && strcmp(l->last, de->name) >= 0)
		l->sorted = false;
	snprintf(l->last, sizeof(l->last), "%s", de->name);
	l->n++;
	return 0;
}

/* KILN_CRAFT_DUMP=<dir>: keep the crafted images (to mount them by hand). */
static void dump(const uint8_t *d, size_t size, unsigned int bits)
{
	const char *dir = getenv("KILN_CRAFT_DUMP");
	char path[512];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/craft-%u.img", dir, 1u << bits);
	f = fopen(path, "wb");
	if (f) {
		fwrite(d, 1, size, f);
		fclose(f);
	}
}

static void check_blksz(unsigned int bits)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	struct kiln_image_info info;
	struct kiln_stat st;
	struct names l = { .sorted = true };
	size_t size = craft_image(&c, bits, &x);
	uint64_t nid, d0, d1;
	struct kiln_file *f;
	char buf[64];
	int fd;

	dump(c.d, size, bits);
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	kiln_image_get_info(img, &info);
	CHECK_EQ(info.block_size, 1u << bits);

	check_file(img, x.nid_plain, x.plain, x.plain_len);
	check_file(img, x.nid_inline, x.inl, x.inl_len);
	check_file(img, x.nid_chunk4, x.chunk, x.chunk_len);
	check_file(img, x.nid_chunk8, x.chunk, x.chunk_len);

	CHECK_EQ(kiln_stat_nid(img, x.nid_plain, &st), 0);
	CHECK_EQ(st.uid, 1000);
	CHECK_EQ(st.gid, 2000);
	CHECK_EQ(st.mtime, 1700000000);
	CHECK_EQ(st.mtime_nsec, 5);
	CHECK_EQ(st.blocks * 512, 4ull << bits);
	CHECK_EQ(kiln_stat_nid(img, x.nid_chunk4, &st), 0);
	CHECK_EQ(st.blocks * 512, 8ull << bits);	/* 4 of 5 chunks */
	CHECK_EQ(kiln_stat_nid(img, x.nid_empty, &st), 0);
	CHECK_EQ(st.nlink, MANY);

	CHECK_EQ(kiln_file_open(img, x.nid_chunk8, &f), 0);
	if (f) {
		CHECK_EQ(kiln_file_next_data(f, 0, &d0, &d1), 0);
		CHECK_EQ(d0, 0);
		CHECK_EQ(d1, x.hole_off);
		CHECK_EQ(kiln_file_next_data(f, x.hole_off + 1, &d0, &d1), 0);
		CHECK_EQ(d0, x.hole_off + x.hole_len);
		CHECK_EQ(d1, x.chunk_len);
		kiln_file_close(f);
	}

	CHECK_EQ(kiln_readlink(img, x.nid_link, buf, sizeof(buf)), 5);
	CHECK(strcmp(buf, "plain") == 0);
	CHECK_EQ(kiln_resolve(img, "link", KILN_RESOLVE_FOLLOW, &nid), 0);
	CHECK_EQ(nid, x.nid_plain);
	CHECK_EQ(kiln_resolve(img, "many/n149", 0, &nid), 0);
	CHECK_EQ(nid, x.nid_empty);
	CHECK_EQ(kiln_resolve(img, "many/../many/./n000", 0, &nid), 0);
	CHECK_EQ(nid, x.nid_empty);
	CHECK_EQ(kiln_resolve(img, "many/n150", 0, &nid), -ENOENT);
	for (unsigned int i = 0; i < MANY; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%03u", i);
		CHECK_EQ(kiln_lookup(img, x.nid_many, name, 4, &nid), 0);
	}
	CHECK_EQ(kiln_lookup(img, x.nid_many, "n", 1, &nid), -ENOENT);
	CHECK_EQ(kiln_lookup(img, x.nid_many, "n0000", 5, &nid), -ENOENT);
	CHECK_EQ(kiln_lookup(img, x.nid_many, "o", 1, &nid), -ENOENT);
	CHECK_EQ(kiln_lookup(img, x.nid_many, "-", 1, &nid), -ENOENT);
	CHECK_EQ(kiln_dir_iterate(img, x.nid_many, 0, count_names, &l), 0);
	CHECK_EQ(l.n, MANY + 2);
	CHECK(l.sorted);

	CHECK_EQ(kiln_listxattr(img, x.nid_plain, buf, sizeof(buf)),
		 sizeof("user.k") + sizeof("trusted.hello"));
	CHECK(strcmp(buf, "user.k") == 0);
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "user.k", buf, sizeof(buf)), 1);
	CHECK(buf[0] == 'v');
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "trusted.hello", buf,
			       sizeof(buf)), 9);
	CHECK(memcmp(buf, "123456789", 9) == 0);
	kiln_image_close(img);
	close(fd);
out:
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

TEST(block_size_512_reads_every_layout) { check_blksz(9); }
TEST(block_size_1024_reads_every_layout) { check_blksz(10); }
TEST(block_size_2048_reads_every_layout) { check_blksz(11); }
TEST(block_size_4096_reads_every_layout) { check_blksz(12); }

TEST(inline_tail_crossing_a_block_is_corrupt)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	struct kiln_stat st;
	size_t size = craft_image(&c, 9, &x);
	uint64_t pos = c.meta_base + x.nid_inline * 32;
	uint64_t room = c.bs - (pos + 64) % c.bs;
	int fd;

	/* grow the tail to end exactly at the block end: still fine */
	kiln_put_le64(c.d + pos + 8, 2ull * c.bs + room);
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (img) {
		CHECK_EQ(kiln_stat_nid(img, x.nid_inline, &st), 0);
		kiln_image_close(img);
		close(fd);
	}
	/* one byte more crosses into the next block */
	kiln_put_le64(c.d + pos + 8, 2ull * c.bs + room + 1);
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (img) {
		CHECK_EQ(kiln_stat_nid(img, x.nid_inline, &st), -KILN_ECORRUPT);
		kiln_image_close(img);
		close(fd);
	}
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

TEST(chunk_on_extra_device_needs_the_device)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	struct kiln_file *f;
	uint8_t buf[16];
	size_t size = craft_image(&c, 10, &x);
	uint64_t pos = c.meta_base + x.nid_chunk8 * 32;
	uint8_t *sb = c.d + EROFS_SUPER_OFFSET;
	int fd;

	/* one extra device; the table slot lives in block 0's free bytes */
	kiln_put_le32(sb + 0x50, kiln_get_le32(sb + 0x50) |
		      EROFS_FEATURE_INCOMPAT_DEVICE_TABLE);
	kiln_put_le16(sb + 0x56, 1);
	kiln_put_le16(sb + 0x58, 0);	/* slot at byte 0 (boot area) */
	c.d[0] = 'x';
	kiln_put_le16(c.d + pos + 64 + 2, 1);	/* chunk 0 on device 1 */
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (img) {
		CHECK_EQ(kiln_file_open(img, x.nid_chunk8, &f), 0);
		if (f) {
			/* not given at open: "needs device 1", not corrupt */
			CHECK_EQ(kiln_file_pread(f, buf, 16, 0), -ENODEV);
			/* the hole and device-0 chunks still read */
			CHECK_EQ(kiln_file_pread(f, buf, 16, x.hole_off), 16);
			kiln_file_close(f);
		}
		kiln_image_close(img);
		close(fd);
	}
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

/*
 * Long prefixes (table on the primary device), an ACL entry and the name
 * bloom filter, on the crafted "plain" inode.
 */
TEST(long_prefix_acl_and_bloom_filter)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	size_t size = craft_image(&c, 12, &x);
	uint64_t pos = c.meta_base + x.nid_plain * 32;
	uint8_t *sb = c.d + EROFS_SUPER_OFFSET, *xa = c.d + pos + 64;
	char buf[256];
	uint32_t filter = EROFS_XATTR_FILTER_DEFAULT;
	int fd;

	/* prefix 0 = "trusted." + "overlay.", stored at byte 1152 */
	kiln_put_le32(sb + 0x50, kiln_get_le32(sb + 0x50) |
		      EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES);
	sb[0x5B] = 1;
	kiln_put_le32(sb + 0x5C, 1152 / 4);
	kiln_put_le16(c.d + 1152, 9);
	c.d[1154] = EROFS_XATTR_INDEX_TRUSTED;
	memcpy(c.d + 1155, "overlay.", 8);
	xa[21] = EROFS_XATTR_LONG_PREFIX | 0;	/* trusted.overlay.hello */
	/* second slot of the area: replace user.k with an empty-named ACL */
	xa[12] = 0;
	xa[13] = EROFS_XATTR_INDEX_POSIX_ACL_ACCESS;
	kiln_put_le16(xa + 14, 1);
	xa[16] = 'A';

	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_listxattr(img, x.nid_plain, buf, sizeof(buf)),
		 sizeof("system.posix_acl_access") +
		 sizeof("trusted.overlay.hello"));
	CHECK(strcmp(buf, "system.posix_acl_access") == 0);
	CHECK(strcmp(buf + sizeof("system.posix_acl_access"),
		     "trusted.overlay.hello") == 0);
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "trusted.overlay.hello", buf,
			       sizeof(buf)), 9);
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "system.posix_acl_access",
			       buf, sizeof(buf)), 1);
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "trusted.hello", buf,
			       sizeof(buf)), -ENODATA);
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "trusted.overlay.", buf,
			       sizeof(buf)), -ENODATA);
	kiln_image_close(img);
	close(fd);

	/* bloom filter: a correct one changes nothing... */
	filter &= ~(1u << (XXH32("overlay.hello", 13, EROFS_XATTR_FILTER_SEED +
				 EROFS_XATTR_INDEX_TRUSTED) & 31));
	filter &= ~(1u << (XXH32("", 0, EROFS_XATTR_FILTER_SEED +
				 EROFS_XATTR_INDEX_POSIX_ACL_ACCESS) & 31));
	kiln_put_le32(sb + 0x08, EROFS_FEATURE_COMPAT_XATTR_FILTER);
	kiln_put_le32(xa, filter);
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "trusted.overlay.hello", buf,
			       sizeof(buf)), 9);
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "system.posix_acl_access",
			       buf, sizeof(buf)), 1);
	kiln_image_close(img);
	close(fd);

	/* ...and an all-ones one hides every name, as in the kernel */
	kiln_put_le32(xa, 0xFFFFFFFF);
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_getxattr(img, x.nid_plain, "trusted.overlay.hello", buf,
			       sizeof(buf)), -ENODATA);
	/* listing does not use the filter */
	CHECK(kiln_listxattr(img, x.nid_plain, buf, sizeof(buf)) > 0);
	kiln_image_close(img);
	close(fd);
out:
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

struct collect {
	char names[MANY + 8][8];
	uint64_t nids[MANY + 8];
	uint64_t next[MANY + 8];
	unsigned int n;
	unsigned int stop;
};

static int collect(void *ctx, const struct kiln_dirent *de)
{
	struct collect *l = ctx;

	if (l->n >= MANY + 8)
		return -1;
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", de->name);
	l->nids[l->n] = de->nid;
	l->next[l->n] = de->next_pos;
	l->n++;
	return l->stop && l->n == l->stop ? 1 : 0;
}

TEST(dot_omitted_directory_lists_dot_last)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	struct collect *l = calloc(1, sizeof(*l));
	size_t size;
	uint64_t nid, pos;
	int fd;

	omit_dot = true;
	size = craft_image(&c, 10, &x);
	omit_dot = false;
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_dir_iterate(img, x.nid_many, 0, collect, l), 0);
	CHECK_EQ(l->n, MANY + 2);
	CHECK(strcmp(l->names[0], "..") == 0);
	CHECK(strcmp(l->names[l->n - 1], ".") == 0);
	CHECK_EQ(l->nids[l->n - 1], x.nid_many);
	CHECK_EQ(kiln_lookup(img, x.nid_many, ".", 1, &nid), 0);
	CHECK_EQ(nid, x.nid_many);
	CHECK_EQ(kiln_lookup(img, x.nid_many, "..", 2, &nid), 0);
	CHECK_EQ(nid, x.nid_root);
	CHECK_EQ(kiln_resolve(img, "many/./n007", 0, &nid), 0);
	CHECK_EQ(nid, x.nid_empty);
	/* resuming just before "." yields only "." */
	pos = l->next[l->n - 2];
	l->n = 0;
	CHECK_EQ(kiln_dir_iterate(img, x.nid_many, pos, collect, l), 0);
	CHECK_EQ(l->n, 1);
	CHECK(strcmp(l->names[0], ".") == 0);
	/* and after "." nothing */
	pos = l->next[0];
	l->n = 0;
	CHECK_EQ(kiln_dir_iterate(img, x.nid_many, pos, collect, l), 0);
	CHECK_EQ(l->n, 0);
	/* one entry per call visits everything once */
	for (pos = 0, l->n = 0, l->stop = 1;;) {
		unsigned int before = l->n;
		int ret = kiln_dir_iterate(img, x.nid_many, pos, collect, l);

		if (ret == 0 && l->n == before)
			break;
		CHECK(ret >= 0);
		pos = l->next[l->n - 1];
		l->stop = l->n + 1;
		if (l->n > MANY + 3)
			break;
	}
	CHECK_EQ(l->n, MANY + 2);
	kiln_image_close(img);
	close(fd);
out:
	free(l);
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

TEST(null_start_block_reads_as_a_hole)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	struct kiln_file *f;
	struct kiln_stat st;
	size_t size = craft_image(&c, 11, &x);
	uint64_t pos = c.meta_base + x.nid_plain * 32, d0, d1;
	uint8_t *buf = malloc(x.plain_len);
	int fd;

	kiln_put_le16(c.d + pos + 6, 0xFFFF);		/* startblk_hi */
	kiln_put_le32(c.d + pos + 16, 0xFFFFFFFF);	/* startblk_lo */
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_stat_nid(img, x.nid_plain, &st), 0);
	CHECK_EQ(st.blocks, 0);
	CHECK_EQ(kiln_file_open(img, x.nid_plain, &f), 0);
	if (f) {
		memset(buf, 0xAA, x.plain_len);
		CHECK_EQ(kiln_file_pread(f, buf, x.plain_len, 0),
			 (ssize_t)x.plain_len);
		CHECK(buf[0] == 0 && buf[x.plain_len - 1] == 0 &&
		      !memcmp(buf, buf + 1, x.plain_len - 1));
		CHECK_EQ(kiln_file_next_data(f, 0, &d0, &d1), -ENXIO);
		kiln_file_close(f);
	}
	kiln_image_close(img);
	close(fd);

	/* only the low 32 bits all ones on an extended inode: a real,
	 * out-of-image address, refused when the file opens */
	kiln_put_le16(c.d + pos + 6, 0);
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_file_open(img, x.nid_plain, &f), -KILN_ECORRUPT);
	CHECK(f == NULL);
	kiln_image_close(img);
	close(fd);
out:
	free(buf);
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

/*
 * A flat file whose size was damaged to run past the image end: refused at
 * open, so no read of its first blocks succeeds and a later one comes back
 * short (through a mount's page cache that is a short read, not an error).
 */
TEST(flat_file_past_the_image_end_fails_to_open)
{
	struct craft c;
	struct expect x;
	struct kiln_image *img;
	struct kiln_file *f;
	size_t size = craft_image(&c, 12, &x);
	uint64_t pos = c.meta_base + x.nid_plain * 32;
	int fd;

	kiln_put_le64(c.d + pos + 8, 36099170192326659ull);	/* i_size */
	img = open_mem(c.d, size, &fd);
	CHECK(img != NULL);
	if (!img)
		goto out;
	CHECK_EQ(kiln_file_open(img, x.nid_plain, &f), -KILN_ECORRUPT);
	CHECK(f == NULL);
	kiln_image_close(img);
	close(fd);
out:
	free(c.d);
	free(x.plain);
	free(x.inl);
	free(x.chunk);
}

TAP_MAIN(
	TAP_ENTRY(dot_omitted_directory_lists_dot_last),
	TAP_ENTRY(null_start_block_reads_as_a_hole),
	TAP_ENTRY(flat_file_past_the_image_end_fails_to_open),
	TAP_ENTRY(long_prefix_acl_and_bloom_filter),
	TAP_ENTRY(block_size_512_reads_every_layout),
	TAP_ENTRY(block_size_1024_reads_every_layout),
	TAP_ENTRY(block_size_2048_reads_every_layout),
	TAP_ENTRY(block_size_4096_reads_every_layout),
	TAP_ENTRY(inline_tail_crossing_a_block_is_corrupt),
	TAP_ENTRY(chunk_on_extra_device_needs_the_device),
)
