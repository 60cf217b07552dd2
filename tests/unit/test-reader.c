// SPDX-License-Identifier: MIT
/*
 * Reader tests: images made by mkfs.erofs from a tree built here, every API
 * result compared with the source tree; then corrupted copies of those
 * images, which must fail cleanly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <kiln/image.h>

#include "reader/internal.h"
#include "tap.h"
#include "util/checked.h"
#include "util/endian.h"

struct blob {
	uint8_t *data;
	size_t size;
};

static const char *mkfs;
static bool load_blob(const char *file, struct blob *b);
static char tmp[64];
static bool have_mkfs;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void path_of(char *out, size_t cap, const char *rel)
{
	snprintf(out, cap, "%s/src%s%s", tmp, *rel ? "/" : "", rel);
}

static void put_file(const char *rel, size_t size)
{
	char p[512];
	uint8_t *buf = malloc(size + 1);
	int fd;

	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(rnd() >> 24);
	path_of(p, sizeof(p), rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, size) != (ssize_t)size)
		printf("# cannot write %s\n", p);
	if (fd >= 0)
		close(fd);
	free(buf);
}

static void put_dir(const char *rel)
{
	char p[512];

	path_of(p, sizeof(p), rel);
	mkdir(p, 0755);
}

static void put_xattr(const char *rel, const char *name, const char *value)
{
	char p[512];

	path_of(p, sizeof(p), rel);
	if (lsetxattr(p, name, value, strlen(value), 0))
		printf("# setxattr %s %s: %s\n", rel, name, strerror(errno));
}

/* The source tree: every feature an uncompressed image can carry. */
static void build_tree(void)
{
	char p[512], q[512], name[3100];

	put_dir("");
	put_file("empty", 0);
	put_file("tiny", 1);
	put_file("small", 100);
	put_file("block", 4096);
	put_file("block1", 4097);
	put_file("big", 300000);
	put_file("tail", 8192 + 3000);
	put_dir("sub");
	put_dir("sub/deep");
	put_dir("sub/empty-dir");
	put_dir("many");
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "many/entry-%04d-%.*s", i,
			 i % 40, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN");
		put_file(name, (size_t)(i % 7));
	}
	/* mkfs.erofs 1.5 cannot store 255-byte names; 254 still spans far */
	strcpy(name, "sub/");
	memset(name + 4, 'L', 254);
	name[258] = '\0';
	put_file(name, 10);
	put_file("sub/!bang", 3);
	put_file("sub/ space", 3);
	put_file("sub/-dash", 3);
	put_file("sub/\x01low", 3);
	put_file("sub/\xff" "high", 3);
	put_file("sub/deep/leaf", 5000);

	path_of(p, sizeof(p), "small");
	path_of(q, sizeof(q), "hardlink");
	CHECK(link(p, q) == 0);
	path_of(q, sizeof(q), "sub/hardlink2");
	CHECK(link(p, q) == 0);
	path_of(q, sizeof(q), "link-rel");
	CHECK(symlink("sub/deep/leaf", q) == 0);
	path_of(q, sizeof(q), "link-abs");
	CHECK(symlink("/sub/deep", q) == 0);
	path_of(q, sizeof(q), "sub/link-up");
	CHECK(symlink("../link-rel", q) == 0);
	path_of(q, sizeof(q), "link-loop");
	CHECK(symlink("link-loop", q) == 0);
	memset(name, 'x', 3000);
	memcpy(name + 2990, "/long/link", 10);
	name[3000] = '\0';
	path_of(q, sizeof(q), "link-long");
	CHECK(symlink(name, q) == 0);

	path_of(q, sizeof(q), "chr");
	mknod(q, S_IFCHR | 0600, makedev(4, 5));
	path_of(q, sizeof(q), "blk");
	mknod(q, S_IFBLK | 0600, makedev(259, 100000));
	path_of(q, sizeof(q), "fifo");
	mkfifo(q, 0640);

	/* sparse: holes, then data in the middle */
	path_of(q, sizeof(q), "sparse");
	{
		int fd = open(q, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			if (ftruncate(fd, 1 << 20) ||
			    pwrite(fd, "data", 4, 600000) != 4)
				printf("# sparse file\n");
			close(fd);
		}
	}

	put_xattr("small", "user.one", "1");
	put_xattr("small", "user.two", "second value");
	put_xattr("small", "trusted.t", "trusted value");
	put_xattr("small", "security.s", "sec");
	put_xattr("big", "user.common", "shared by many");
	put_xattr("tail", "user.common", "shared by many");
	put_xattr("sub", "user.common", "shared by many");
	put_xattr("sub/deep/leaf", "user.common", "shared by many");
	put_xattr("sub/deep", "user.empty", "");
	memset(name, 'v', 2000);
	name[2000] = '\0';
	put_xattr("block", "user.bigvalue", name);

	path_of(p, sizeof(p), "");
	chmod(p, 0755);
}

static struct kiln_image *open_img(const char *file)
{
	struct kiln_image *img = NULL;
	char p[512];
	int err;

	snprintf(p, sizeof(p), "%s/%s", tmp, file);
	err = kiln_image_open(&img, p, NULL);
	if (err)
		printf("# open %s: %s\n", p, kiln_strerror(err));
	return img;
}

/* --- comparing an image with the tree -------------------------------- */

struct name_list {
	char **names;
	kiln_nid_t *nids;
	uint64_t *pos;
	size_t n;
	size_t stop_after;	/* 0: never stop */
};

static int collect(void *ctx, const struct kiln_dirent *de)
{
	struct name_list *l = ctx;

	l->names = realloc(l->names, (l->n + 1) * sizeof(*l->names));
	l->nids = realloc(l->nids, (l->n + 1) * sizeof(*l->nids));
	l->pos = realloc(l->pos, (l->n + 1) * sizeof(*l->pos));
	l->names[l->n] = strdup(de->name);
	l->nids[l->n] = de->nid;
	l->pos[l->n] = de->next_pos;
	CHECK(strlen(de->name) == de->name_len);
	l->n++;
	return l->stop_after && l->n >= l->stop_after ? 1 : 0;
}

static void free_list(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->nids);
	free(l->pos);
	memset(l, 0, sizeof(*l));
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void compare_xattrs(struct kiln_image *img, kiln_nid_t nid,
			   const char *src)
{
	char want[8192], got[8192], v1[4096], v2[4096];
	ssize_t wl = llistxattr(src, want, sizeof(want));
	ssize_t gl = kiln_listxattr(img, nid, got, sizeof(got));
	char *wn[64], *gn[64];
	size_t nw = 0, ng = 0;

	CHECK_EQ(kiln_listxattr(img, nid, NULL, 0), gl);
	if (wl < 0)
		wl = 0;
	CHECK_EQ(gl, wl);
	if (gl != wl || gl <= 0)
		return;
	if (gl > 1)
		CHECK_EQ(kiln_listxattr(img, nid, got, 1), -ERANGE);
	gl = kiln_listxattr(img, nid, got, sizeof(got));
	for (ssize_t o = 0; o < wl && nw < 64; o += (ssize_t)strlen(want + o) + 1)
		wn[nw++] = want + o;
	for (ssize_t o = 0; o < gl && ng < 64; o += (ssize_t)strlen(got + o) + 1)
		gn[ng++] = got + o;
	CHECK_EQ(ng, nw);
	qsort(wn, nw, sizeof(*wn), strp_cmp);
	qsort(gn, ng, sizeof(*gn), strp_cmp);
	for (size_t i = 0; i < nw && i < ng; i++) {
		ssize_t a, b;

		CHECK(strcmp(wn[i], gn[i]) == 0);
		a = lgetxattr(src, wn[i], v1, sizeof(v1));
		b = kiln_getxattr(img, nid, wn[i], v2, sizeof(v2));
		CHECK_EQ(b, a);
		CHECK_EQ(kiln_getxattr(img, nid, wn[i], NULL, 0), a);
		if (a > 0 && a == b)
			CHECK(memcmp(v1, v2, (size_t)a) == 0);
		if (a > 1)
			CHECK_EQ(kiln_getxattr(img, nid, wn[i], v2, (size_t)a - 1),
				 -ERANGE);
	}
	CHECK_EQ(kiln_getxattr(img, nid, "user.no-such-name", v2, sizeof(v2)),
		 -ENODATA);
}

static void compare_data(struct kiln_image *img, kiln_nid_t nid,
			 const char *src, uint64_t size)
{
	struct kiln_file *f;
	uint8_t *want, *got;
	int fd = open(src, O_RDONLY);
	uint64_t d0, d1;

	CHECK_EQ(kiln_file_open(img, nid, &f), 0);
	if (fd < 0 || !f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	CHECK_EQ(kiln_file_size(f), size);
	want = malloc(size + 1);
	got = malloc(size + 64);
	CHECK_EQ(pread(fd, want, size, 0), (ssize_t)size);
	CHECK_EQ(kiln_file_pread(f, got, size + 64, 0), (ssize_t)size);
	CHECK(memcmp(want, got, size) == 0);
	for (int i = 0; i < 40 && size; i++) {
		uint64_t off = rnd() % size;
		size_t len = (size_t)(rnd() % (i < 20 ? 64 : 20000)) + 1;
		size_t exp = (size_t)KILN_MIN((uint64_t)len, size - off);

		CHECK_EQ(kiln_file_pread(f, got, len, off), (ssize_t)exp);
		CHECK(memcmp(got, want + off, exp) == 0);
	}
	CHECK_EQ(kiln_file_pread(f, got, 10, size), 0);
	CHECK_EQ(kiln_file_pread(f, got, 10, size + 100), 0);
	/* data ranges cover every non-zero byte */
	for (uint64_t off = 0; off < size;) {
		int err = kiln_file_next_data(f, off, &d0, &d1);

		if (err) {
			CHECK_EQ(err, -ENXIO);
			for (uint64_t i = off; i < size; i++)
				if (want[i]) {
					CHECK(!"data after the last range");
					break;
				}
			break;
		}
		CHECK(d0 >= off && d1 > d0 && d1 <= size);
		for (uint64_t i = off; i < d0; i++)
			if (want[i]) {
				CHECK(!"data inside a reported hole");
				break;
			}
		off = d1;
	}
	free(want);
	free(got);
	close(fd);
	kiln_file_close(f);
}

static void compare_node(struct kiln_image *img, const char *rel,
			 kiln_nid_t nid, kiln_nid_t parent, unsigned int *count);

static void compare_dir(struct kiln_image *img, const char *rel,
			kiln_nid_t nid, kiln_nid_t parent, unsigned int *count)
{
	struct name_list all = { 0 }, part = { 0 };
	char src[512], child[512];
	size_t nsrc = 0;
	char **srcnames = NULL;
	DIR *d;
	struct dirent *de;

	path_of(src, sizeof(src), rel);
	CHECK_EQ(kiln_dir_iterate(img, nid, 0, collect, &all), 0);
	d = opendir(src);
	while (d && (de = readdir(d))) {
		srcnames = realloc(srcnames, (nsrc + 1) * sizeof(*srcnames));
		srcnames[nsrc++] = strdup(de->d_name);
	}
	if (d)
		closedir(d);
	CHECK_EQ(all.n, nsrc);

	/* on-disk order is strictly increasing unsigned bytes */
	for (size_t i = 1; i < all.n; i++)
		CHECK(strcmp(all.names[i - 1], all.names[i]) < 0);
	qsort(srcnames, nsrc, sizeof(*srcnames), strp_cmp);
	for (size_t i = 0; i < nsrc && i < all.n; i++)
		CHECK(strcmp(srcnames[i], all.names[i]) == 0);

	/* resume from every position: one entry per call */
	part.stop_after = 1;
	for (uint64_t pos = 0;;) {
		size_t before = part.n;
		int ret = kiln_dir_iterate(img, nid, pos, collect, &part);

		if (ret == 0 && part.n == before)
			break;
		CHECK(ret == 1 || ret == 0);
		CHECK(part.pos[part.n - 1] > pos);
		pos = part.pos[part.n - 1];
		part.stop_after = part.n + 1;
		if (part.n > all.n + 1)
			break;
	}
	CHECK_EQ(part.n, all.n);
	for (size_t i = 0; i < part.n && i < all.n; i++)
		CHECK(strcmp(part.names[i], all.names[i]) == 0);

	for (size_t i = 0; i < all.n; i++) {
		kiln_nid_t found = 0;
		const char *n = all.names[i];

		CHECK_EQ(kiln_lookup(img, nid, n, strlen(n), &found), 0);
		CHECK_EQ(found, all.nids[i]);
		if (!strcmp(n, "."))
			CHECK_EQ(all.nids[i], nid);
		else if (!strcmp(n, ".."))
			CHECK_EQ(all.nids[i], parent);
		else {
			snprintf(child, sizeof(child), "%s%s%s", rel,
				 *rel ? "/" : "", n);
			compare_node(img, child, all.nids[i], nid, count);
		}
	}
	CHECK_EQ(kiln_lookup(img, nid, "zz-not-there", 12, NULL), -ENOENT);
	CHECK_EQ(kiln_lookup(img, nid, "!", 1, NULL), -ENOENT);
	for (size_t i = 0; i < nsrc; i++)
		free(srcnames[i]);
	free(srcnames);
	free_list(&all);
	free_list(&part);
}

static void compare_node(struct kiln_image *img, const char *rel,
			 kiln_nid_t nid, kiln_nid_t parent, unsigned int *count)
{
	char src[512], want[4096], got[4096];
	struct kiln_stat st;
	struct stat sst;
	kiln_nid_t found = ~0ull;

	(*count)++;
	path_of(src, sizeof(src), rel);
	if (lstat(src, &sst)) {
		CHECK(!"source entry vanished");
		return;
	}
	CHECK_EQ(kiln_stat_nid(img, nid, &st), 0);
	CHECK_EQ(st.nid, nid);
	CHECK_EQ(st.mode, sst.st_mode);
	CHECK_EQ(st.uid, sst.st_uid);
	CHECK_EQ(st.gid, sst.st_gid);
	CHECK_EQ(st.mtime, sst.st_mtime);
	if (!S_ISDIR(sst.st_mode)) {
		CHECK_EQ(st.nlink, sst.st_nlink);
		CHECK_EQ(st.size, sst.st_size);
	}
	if (S_ISCHR(sst.st_mode) || S_ISBLK(sst.st_mode)) {
		CHECK_EQ(st.rdev_major, major(sst.st_rdev));
		CHECK_EQ(st.rdev_minor, minor(sst.st_rdev));
	}
	CHECK_EQ(kiln_resolve(img, rel, 0, &found), 0);
	CHECK_EQ(found, nid);
	compare_xattrs(img, nid, src);

	if (S_ISLNK(sst.st_mode)) {
		ssize_t n = readlink(src, want, sizeof(want) - 1);

		CHECK_EQ(kiln_readlink(img, nid, got, sizeof(got)), n);
		if (n > 0)
			CHECK(memcmp(want, got, (size_t)n) == 0 && !got[n]);
		CHECK_EQ(kiln_readlink(img, nid, got, (size_t)n), -ERANGE);
	} else {
		CHECK_EQ(kiln_readlink(img, nid, got, sizeof(got)), -EINVAL);
	}
	if (S_ISREG(sst.st_mode))
		compare_data(img, nid, src, (uint64_t)sst.st_size);
	if (S_ISDIR(sst.st_mode)) {
		CHECK_EQ(st.blocks * 512 >= st.size, 1);
		compare_dir(img, rel, nid, parent, count);
	} else {
		CHECK_EQ(kiln_dir_iterate(img, nid, 0, collect, NULL), -ENOTDIR);
	}
}

static void compare_image(const char *file)
{
	struct kiln_image *img = open_img(file);
	struct kiln_image_info info;
	unsigned int count = 0;

	CHECK(img != NULL);
	if (!img)
		return;
	kiln_image_get_info(img, &info);
	CHECK_EQ(info.block_size, 4096);
	CHECK_EQ(info.root_nid, kiln_image_root(img));
	compare_node(img, "", kiln_image_root(img), kiln_image_root(img),
		     &count);
	CHECK(count > 400);
	kiln_image_close(img);
}

static bool make_image(const char *file, const char *opts)
{
	if (!have_mkfs)
		return false;
	if (sh("%s --quiet %s %s/%s %s/src >/dev/null 2>&1", mkfs, opts, tmp,
	       file, tmp)) {
		printf("# mkfs.erofs %s failed\n", opts);
		return false;
	}
	return true;
}

#define NEED_MKFS()							\
	do {								\
		if (!have_mkfs)						\
			SKIP("mkfs.erofs not available");		\
	} while (0)

TEST(plain_image_matches_source_tree)
{
	NEED_MKFS();
	compare_image("plain.img");
}

TEST(image_without_xattrs_matches_tree_minus_xattrs)
{
	struct kiln_image *img;
	kiln_nid_t nid;
	char buf[64];

	NEED_MKFS();
	CHECK(make_image("noxattr.img", "-x -1"));
	img = open_img("noxattr.img");
	CHECK(img != NULL);
	if (!img)
		return;
	CHECK_EQ(kiln_resolve(img, "small", 0, &nid), 0);
	CHECK_EQ(kiln_listxattr(img, nid, buf, sizeof(buf)), 0);
	CHECK_EQ(kiln_getxattr(img, nid, "user.one", buf, sizeof(buf)),
		 -ENODATA);
	kiln_image_close(img);
}

TEST(chunked_images_match_source_tree)
{
	NEED_MKFS();
	CHECK(make_image("chunk4k.img", "--chunksize=4096"));
	compare_image("chunk4k.img");
	CHECK(make_image("chunk64k.img", "--chunksize=65536 -x 1"));
	compare_image("chunk64k.img");
}

static void fix_crc(uint8_t *d, size_t size);
static bool save_blob(const char *file, const struct blob *b);

/*
 * mkfs.erofs 1.5 stores every chunk; punch holes into the chunk table of
 * "sparse" wherever the source chunk is all zeros.
 */
static bool make_sparse_image(kiln_nid_t *nid)
{
	struct kiln_image *img = open_img("chunk4k.img");
	struct kiln_chunk_geo geo;
	struct kiln_inode in;
	struct blob b;
	uint8_t chunk[4096], zero[4096] = { 0 };
	char src[512];
	int fd;
	bool ok = false;

	if (!img)
		return false;
	if (kiln_resolve(img, "sparse", 0, nid) ||
	    kiln_inode_load(img, *nid, &in) ||
	    in.datalayout != EROFS_INODE_CHUNK_BASED) {
		kiln_image_close(img);
		return false;
	}
	kiln_chunk_geo(&img->sb, &in, &geo);
	kiln_image_close(img);
	if (geo.chunkbits != 12 || !load_blob("chunk4k.img", &b))
		return false;
	path_of(src, sizeof(src), "sparse");
	fd = open(src, O_RDONLY);
	for (uint64_t i = 0; fd >= 0 && i < geo.count; i++) {
		uint8_t *e = b.data + geo.table_off + i * geo.unit;

		if (pread(fd, chunk, sizeof(chunk), (off_t)(i << 12)) < 0)
			break;
		if (memcmp(chunk, zero, sizeof(chunk)))
			continue;
		if (geo.unit == 4) {
			kiln_put_le32(e, EROFS_NULL_ADDR32);
		} else {
			kiln_put_le16(e, 0);
			kiln_put_le32(e + 4, EROFS_NULL_ADDR32);
		}
	}
	if (fd >= 0) {
		close(fd);
		fix_crc(b.data, b.size);
		ok = save_blob("sparse.img", &b);
	}
	free(b.data);
	return ok;
}

TEST(chunked_sparse_file_reports_holes)
{
	struct kiln_image *img;
	struct kiln_file *f;
	struct kiln_stat st;
	kiln_nid_t nid;
	uint64_t d0, d1;
	char src[512];

	NEED_MKFS();
	if (!make_sparse_image(&nid)) {
		CHECK(!"cannot punch holes into chunk4k.img");
		return;
	}
	img = open_img("sparse.img");
	CHECK(img != NULL);
	if (!img)
		return;
	CHECK_EQ(kiln_stat_nid(img, nid, &st), 0);
	CHECK_EQ(st.datalayout, EROFS_INODE_CHUNK_BASED);
	CHECK_EQ(st.blocks, 8);		/* one 4 KiB chunk of data */
	path_of(src, sizeof(src), "sparse");
	compare_data(img, nid, src, st.size);
	CHECK_EQ(kiln_file_open(img, nid, &f), 0);
	if (f) {
		CHECK_EQ(kiln_file_next_data(f, 0, &d0, &d1), 0);
		CHECK_EQ(d0, 600000 / 4096 * 4096);
		CHECK_EQ(d1, d0 + 4096);
		CHECK_EQ(kiln_file_next_data(f, 600001, &d0, &d1), 0);
		CHECK_EQ(d0, 600001);
		CHECK_EQ(kiln_file_next_data(f, d1, &d0, &d1), -ENXIO);
		CHECK_EQ(kiln_file_next_data(f, 1 << 20, &d0, &d1), -ENXIO);
		kiln_file_close(f);
	}
	/* the whole tree still matches */
	compare_node(img, "", kiln_image_root(img), kiln_image_root(img),
		     &(unsigned int){ 0 });
	kiln_image_close(img);
}

TEST(resolve_follows_symlinks_inside_the_image)
{
	struct kiln_image *img;
	kiln_nid_t leaf, deep, nid, link, root;

	NEED_MKFS();
	img = open_img("plain.img");
	CHECK(img != NULL);
	if (!img)
		return;
	root = kiln_image_root(img);
	CHECK_EQ(kiln_resolve(img, "sub/deep/leaf", 0, &leaf), 0);
	CHECK_EQ(kiln_resolve(img, "/sub/deep", 0, &deep), 0);
	CHECK_EQ(kiln_resolve(img, "link-rel", 0, &link), 0);
	CHECK(link != leaf);
	CHECK_EQ(kiln_resolve(img, "link-rel", KILN_RESOLVE_FOLLOW, &nid), 0);
	CHECK_EQ(nid, leaf);
	CHECK_EQ(kiln_resolve(img, "sub/link-up", KILN_RESOLVE_FOLLOW, &nid), 0);
	CHECK_EQ(nid, leaf);
	CHECK_EQ(kiln_resolve(img, "link-abs/leaf", 0, &nid), 0);
	CHECK_EQ(nid, leaf);
	CHECK_EQ(kiln_resolve(img, "link-abs/", 0, &nid), 0);
	CHECK_EQ(nid, deep);
	CHECK_EQ(kiln_resolve(img, "link-loop", KILN_RESOLVE_FOLLOW, &nid),
		 -ELOOP);
	CHECK_EQ(kiln_resolve(img, "link-loop/x", 0, &nid), -ELOOP);
	CHECK_EQ(kiln_resolve(img, "../../..", 0, &nid), 0);
	CHECK_EQ(nid, root);
	CHECK_EQ(kiln_resolve(img, "sub/deep/../../sub/./deep//leaf", 0, &nid), 0);
	CHECK_EQ(nid, leaf);
	CHECK_EQ(kiln_resolve(img, "", 0, &nid), 0);
	CHECK_EQ(nid, root);
	CHECK_EQ(kiln_resolve(img, "///", 0, &nid), 0);
	CHECK_EQ(nid, root);
	CHECK_EQ(kiln_resolve(img, "small/x", 0, &nid), -ENOTDIR);
	CHECK_EQ(kiln_resolve(img, "small/", 0, &nid), -ENOTDIR);
	CHECK_EQ(kiln_resolve(img, "nope/x", 0, &nid), -ENOENT);
	/* its first component is 2990 bytes long */
	CHECK_EQ(kiln_resolve(img, "link-long", KILN_RESOLVE_FOLLOW, &nid),
		 -ENAMETOOLONG);
	kiln_image_close(img);
}

TEST(lookup_rejects_bad_names)
{
	struct kiln_image *img;
	char name[300];
	kiln_nid_t nid, root, small;

	NEED_MKFS();
	img = open_img("plain.img");
	CHECK(img != NULL);
	if (!img)
		return;
	root = kiln_image_root(img);
	memset(name, 'L', sizeof(name));
	CHECK_EQ(kiln_lookup(img, root, name, 256, &nid), -ENAMETOOLONG);
	CHECK_EQ(kiln_lookup(img, root, name, 0, &nid), -ENOENT);
	CHECK_EQ(kiln_lookup(img, root, "a/b", 3, &nid), -ENOENT);
	CHECK_EQ(kiln_resolve(img, "small", 0, &small), 0);
	CHECK_EQ(kiln_lookup(img, small, "x", 1, &nid), -ENOTDIR);
	CHECK_EQ(kiln_lookup(img, root, "smal", 4, &nid), -ENOENT);
	CHECK_EQ(kiln_lookup(img, root, "smalll", 6, &nid), -ENOENT);
	kiln_image_close(img);
}

struct reader_thread {
	struct kiln_image *img;
	const uint8_t *want;
	uint64_t size;
	kiln_nid_t nid;
	uint64_t seed;
	unsigned int bad;
};

static void *reader_main(void *arg)
{
	struct reader_thread *t = arg;
	struct kiln_file *f;
	uint8_t buf[8192];
	kiln_nid_t nid;

	if (kiln_file_open(t->img, t->nid, &f)) {
		t->bad++;
		return NULL;
	}
	for (int i = 0; i < 2000; i++) {
		uint64_t off, len;

		t->seed = t->seed * 6364136223846793005ull + 1442695040888963407ull;
		off = (t->seed >> 20) % t->size;
		len = KILN_MIN((t->seed >> 44) % sizeof(buf) + 1, t->size - off);
		if (kiln_file_pread(f, buf, (size_t)len, off) != (ssize_t)len ||
		    memcmp(buf, t->want + off, (size_t)len))
			t->bad++;
		if (i % 100 == 0 &&
		    (kiln_resolve(t->img, "sub/deep/leaf", 0, &nid) ||
		     kiln_listxattr(t->img, nid, (char *)buf, sizeof(buf)) < 0))
			t->bad++;
	}
	kiln_file_close(f);
	return NULL;
}

TEST(many_threads_read_one_image)
{
	struct reader_thread t[4];
	pthread_t tid[4];
	struct kiln_image *img;
	struct blob src;
	kiln_nid_t nid;

	NEED_MKFS();
	img = open_img("plain.img");
	CHECK(img != NULL);
	if (!img)
		return;
	if (!load_blob("src/big", &src)) {
		CHECK(!"src/big");
		kiln_image_close(img);
		return;
	}
	CHECK_EQ(kiln_resolve(img, "big", 0, &nid), 0);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct reader_thread){ .img = img, .want = src.data,
			.size = src.size, .nid = nid, .seed = (uint64_t)i + 1 };
		CHECK_EQ(pthread_create(&tid[i], NULL, reader_main, &t[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(tid[i], NULL);
		CHECK_EQ(t[i].bad, 0);
	}
	free(src.data);
	kiln_image_close(img);
}

/* --- corruption ------------------------------------------------------ */

static bool load_blob(const char *file, struct blob *b)
{
	char p[512];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", tmp, file);
	fd = open(p, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	b->size = (size_t)st.st_size;
	b->data = malloc(b->size);
	if (pread(fd, b->data, b->size, 0) != (ssize_t)st.st_size) {
		close(fd);
		free(b->data);
		return false;
	}
	close(fd);
	return true;
}

static bool save_blob(const char *file, const struct blob *b)
{
	char p[512];
	int fd;
	bool ok;

	snprintf(p, sizeof(p), "%s/%s", tmp, file);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return false;
	ok = write(fd, b->data, b->size) == (ssize_t)b->size;
	close(fd);
	return ok;
}

/* Recompute the superblock checksum so a mutation reaches further. */
static void fix_crc(uint8_t *d, size_t size)
{
	uint32_t bs;

	if (size < 1024 + 128 || kiln_get_le32(d + 1024) != EROFS_SUPER_MAGIC)
		return;
	if (!(kiln_get_le32(d + 1032) & EROFS_FEATURE_COMPAT_SB_CHKSUM))
		return;
	if (d[1036] < 9 || d[1036] > 12)
		return;
	bs = 1u << d[1036];
	bs = bs > 1024 ? bs - 1024 : bs;
	if (1024 + bs > size)
		return;
	kiln_put_le32(d + 1028, crc32_iscsi(d + 1032, (int)bs - 8,
					    0x5045B54Au));
}

static bool err_ok(long long err)
{
	switch (-err) {
	case KILN_ECORRUPT: case KILN_ENOTEROFS: case EOPNOTSUPP:
	case ENOENT: case ENOTDIR: case EINVAL: case ERANGE: case ENODATA:
	case ELOOP: case ENXIO: case ENAMETOOLONG: case ENOMEM:
		return true;
	default:
		return err >= 0;
	}
}

struct cwalk {
	struct kiln_image *img;
	unsigned int entries, depth, bad;
	uint8_t buf[16384];
};

static void cwalk_node(struct cwalk *w, kiln_nid_t nid);

static int cwalk_entry(void *ctx, const struct kiln_dirent *de)
{
	struct cwalk *w = ctx;

	if (++w->entries > 1000)
		return 1;
	if (strcmp(de->name, ".") && strcmp(de->name, ".."))
		cwalk_node(w, de->nid);
	return 0;
}

#define EXPECT_CLEAN(expr)						\
	do {								\
		long long _r = (long long)(expr);			\
		if (!err_ok(_r)) {					\
			printf("# %s returned %lld\n", #expr, _r);	\
			w->bad++;					\
		}							\
	} while (0)

static void cwalk_node(struct cwalk *w, kiln_nid_t nid)
{
	struct kiln_stat st;
	struct kiln_file *f;
	char names[4096];
	ssize_t n;
	int err = kiln_stat_nid(w->img, nid, &st);

	EXPECT_CLEAN(err);
	if (err)
		return;
	n = kiln_listxattr(w->img, nid, names, sizeof(names));
	EXPECT_CLEAN(n);
	for (ssize_t o = 0; o < n; o += (ssize_t)strlen(names + o) + 1)
		EXPECT_CLEAN(kiln_getxattr(w->img, nid, names + o, w->buf,
					   sizeof(w->buf)));
	if (S_ISLNK(st.mode))
		EXPECT_CLEAN(kiln_readlink(w->img, nid, names, sizeof(names)));
	if (S_ISDIR(st.mode)) {
		if (w->depth++ < 8)
			EXPECT_CLEAN(kiln_dir_iterate(w->img, nid, 0, cwalk_entry, w));
		w->depth--;
		return;
	}
	err = kiln_file_open(w->img, nid, &f);
	EXPECT_CLEAN(err);
	if (err)
		return;
	for (uint64_t off = 0; off < kiln_file_size(f) && off < (1u << 20);
	     off += sizeof(w->buf)) {
		n = kiln_file_pread(f, w->buf, sizeof(w->buf), off);
		EXPECT_CLEAN(n);
		if (n <= 0)
			break;
	}
	kiln_file_close(f);
}

/* Open @b and walk everything; returns the number of unclean results. */
static unsigned int walk_blob(const uint8_t *data, size_t size, int *open_err)
{
	struct cwalk *w = calloc(1, sizeof(*w));
	int fd = memfd_create("corrupt", MFD_CLOEXEC);
	unsigned int bad;
	kiln_nid_t nid;

	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		free(w);
		return 1;
	}
	*open_err = kiln_image_open_fd(&w->img, fd, NULL);
	EXPECT_CLEAN(*open_err);
	if (!*open_err) {
		cwalk_node(w, kiln_image_root(w->img));
		EXPECT_CLEAN(kiln_resolve(w->img, "sub/deep/leaf",
					  KILN_RESOLVE_FOLLOW, &nid));
		EXPECT_CLEAN(kiln_resolve(w->img, "link-abs/leaf",
					  KILN_RESOLVE_FOLLOW, &nid));
		kiln_image_close(w->img);
	}
	close(fd);
	bad = w->bad;
	free(w);
	return bad;
}

static void mutate_region(const struct blob *b, size_t start, size_t end,
			  unsigned int rounds, unsigned int flips)
{
	uint8_t *copy = malloc(b->size);
	unsigned int opened = 0;
	int open_err;

	if (end > b->size)
		end = b->size;
	for (unsigned int r = 0; r < rounds && start < end; r++) {
		memcpy(copy, b->data, b->size);
		for (unsigned int i = 0; i < flips; i++) {
			size_t at = start + (size_t)(rnd() % (end - start));

			copy[at] = (rnd() & 1) ? (uint8_t)rnd() :
				   (uint8_t)(copy[at] ^ (1u << (rnd() % 8)));
		}
		fix_crc(copy, b->size);
		CHECK_EQ(walk_blob(copy, b->size, &open_err), 0);
		opened += open_err == 0;
	}
	printf("# region %zu..%zu: %u of %u mutants opened\n", start, end,
	       opened, rounds);
	free(copy);
}

TEST(truncated_images_fail_cleanly)
{
	struct blob b;
	int open_err;
	static const size_t cuts[] = { 0, 1, 1023, 1024, 1100, 1151, 1152,
				       1200, 2048, 4095, 4096, 4097, 8192 };

	NEED_MKFS();
	if (!load_blob("plain.img", &b)) {
		CHECK(!"plain.img");
		return;
	}
	for (size_t i = 0; i < KILN_ARRAY_SIZE(cuts); i++) {
		CHECK_EQ(walk_blob(b.data, cuts[i], &open_err), 0);
		if (cuts[i] < 4096)
			CHECK(open_err < 0);
	}
	for (int i = 0; i < 30; i++)
		CHECK_EQ(walk_blob(b.data, (size_t)(rnd() % b.size), &open_err), 0);
	CHECK_EQ(walk_blob(b.data, b.size - 1, &open_err), 0);
	free(b.data);
}

TEST(superblock_fields_at_limits_are_refused)
{
	struct blob b;
	uint8_t *c;
	int open_err;

	NEED_MKFS();
	if (!load_blob("plain.img", &b)) {
		CHECK(!"plain.img");
		return;
	}
	c = malloc(b.size);
#define MUTATE(stmt, expect)						\
	do {								\
		memcpy(c, b.data, b.size);				\
		stmt;							\
		fix_crc(c, b.size);					\
		CHECK_EQ(walk_blob(c, b.size, &open_err), 0);		\
		CHECK_EQ(open_err, expect);				\
	} while (0)
	MUTATE((void)0, 0);
	MUTATE(c[1024] ^= 1, -KILN_ENOTEROFS);			/* magic */
	MUTATE(c[1036] = 8, -KILN_ECORRUPT);			/* blkszbits */
	MUTATE(c[1036] = 13, -EOPNOTSUPP);
	MUTATE(c[1036 + 0x5A - 0x0C] = 1, -EOPNOTSUPP);		/* dirblkbits */
	MUTATE(c[1024 + 0x0D] = 185, -KILN_ECORRUPT);		/* sb_extslots */
	MUTATE(c[1024 + 0x52] |= 0x02, -EOPNOTSUPP);		/* incompat 0x200 */
	MUTATE(c[1024 + 0x51] |= 0x01, -KILN_ECORRUPT);		/* metabox, no slot */
	MUTATE(kiln_put_le16(c + 1024 + 0x0E, 0xFFFF), -KILN_ECORRUPT); /* root */
	MUTATE(kiln_put_le32(c + 1024 + 0x28, 0xFFFFFFFF), -KILN_ECORRUPT);
	/* checksum: flip without fixing it */
	memcpy(c, b.data, b.size);
	c[1024 + 0x30] ^= 0x40;
	CHECK_EQ(walk_blob(c, b.size, &open_err), 0);
	CHECK_EQ(open_err, -KILN_ECORRUPT);
#undef MUTATE
	free(c);
	free(b.data);
}

TEST(corrupted_images_fail_cleanly)
{
	const char *files[] = { "plain.img", "chunk4k.img" };

	NEED_MKFS();
	for (size_t i = 0; i < KILN_ARRAY_SIZE(files); i++) {
		struct blob b;

		if (!load_blob(files[i], &b)) {
			CHECK(!"image missing");
			continue;
		}
		mutate_region(&b, 1024, 1024 + 128, 150, 1);	/* superblock */
		mutate_region(&b, 1152, 4096, 300, 1);		/* inodes, dirs */
		mutate_region(&b, 1152, 4096, 150, 8);
		mutate_region(&b, 0, b.size, 100, 32);		/* anywhere */
		free(b.data);
	}
}

static const char *find_mkfs(void)
{
	static const char *where[] = {
		"/usr/sbin/mkfs.erofs", "/usr/bin/mkfs.erofs", "/sbin/mkfs.erofs",
	};
	const char *env = getenv("KILN_MKFS_EROFS");

	if (env && access(env, X_OK) == 0)
		return env;
	for (size_t i = 0; i < KILN_ARRAY_SIZE(where); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

static void setup(void)
{
	strcpy(tmp, "/tmp/kiln-test-reader-XXXXXX");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		exit(1);
	}
	build_tree();
	have_mkfs = true;
	have_mkfs = make_image("plain.img", "");
	if (!have_mkfs)
		printf("# mkfs.erofs missing: image tests skip\n");
}

static void cleanup(void)
{
	if (!getenv("KILN_TEST_KEEP")) sh("rm -rf '%s'", tmp);
}

int main(void)
{
	static const struct tap_test tests[] = {
		TAP_ENTRY(plain_image_matches_source_tree),
		TAP_ENTRY(image_without_xattrs_matches_tree_minus_xattrs),
		TAP_ENTRY(chunked_images_match_source_tree),
		TAP_ENTRY(chunked_sparse_file_reports_holes),
		TAP_ENTRY(resolve_follows_symlinks_inside_the_image),
		TAP_ENTRY(lookup_rejects_bad_names),
		TAP_ENTRY(many_threads_read_one_image),
		TAP_ENTRY(truncated_images_fail_cleanly),
		TAP_ENTRY(superblock_fields_at_limits_are_refused),
		TAP_ENTRY(corrupted_images_fail_cleanly),
	};
	int ret;

	mkfs = find_mkfs();
	if (!mkfs)
		return tap_skip_all("mkfs.erofs not installed");
	setup();
	ret = tap_run(tests, KILN_ARRAY_SIZE(tests));
	cleanup();
	return ret;
}
