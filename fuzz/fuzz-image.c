// SPDX-License-Identifier: MIT
/*
 * Fuzz target: open an arbitrary byte string as an image, walk the whole
 * tree and exercise every read API on every inode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/image.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_DEPTH	16
#define MAX_ENTRIES	2048	/* per image */
#define MAX_READ	(256u << 10)	/* bytes read per file */

struct walk {
	struct kiln_image *img;
	unsigned int entries;
	unsigned int depth;
	uint8_t buf[65536];
};

struct dir_ctx {
	struct walk *w;
	kiln_nid_t dir;
	uint64_t last_pos;
};

static void exercise_xattrs(struct walk *w, kiln_nid_t nid)
{
	char names[4096];
	ssize_t len = kiln_listxattr(w->img, nid, NULL, 0);

	if (len <= 0)
		return;
	kiln_listxattr(w->img, nid, names, 1);
	len = kiln_listxattr(w->img, nid, names, sizeof(names));
	if (len <= 0)
		return;
	for (ssize_t off = 0; off < len;) {
		const char *name = names + off;
		size_t nlen = strnlen(name, (size_t)(len - off));

		if ((ssize_t)nlen == len - off)
			break;
		kiln_getxattr(w->img, nid, name, NULL, 0);
		kiln_getxattr(w->img, nid, name, w->buf, 1);
		kiln_getxattr(w->img, nid, name, w->buf, sizeof(w->buf));
		off += (ssize_t)nlen + 1;
	}
	kiln_getxattr(w->img, nid, "user.absent", w->buf, sizeof(w->buf));
}

static void exercise_data(struct walk *w, kiln_nid_t nid)
{
	static const size_t chunks[] = { 4096, 1000, 65536 };
	struct kiln_file *f;
	uint64_t size, d0, d1;

	if (kiln_file_open(w->img, nid, &f))
		return;
	size = kiln_file_size(f);
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		for (uint64_t off = 0; off < size && off < MAX_READ;
		     off += chunks[c]) {
			if (kiln_file_pread(f, w->buf, chunks[c], off) <= 0)
				break;
		}
	}
	kiln_file_pread(f, w->buf, sizeof(w->buf), size > 100 ? size - 100 : 0);
	for (uint64_t off = 0, n = 0; off < size && n < 64; off = d1, n++) {
		if (kiln_file_next_data(f, off, &d0, &d1) || d1 <= off)
			break;
	}
	kiln_file_close(f);
}

static void exercise(struct walk *w, kiln_nid_t nid);

static int on_entry(void *ctx, const struct kiln_dirent *de)
{
	struct dir_ctx *d = ctx;
	kiln_nid_t found;

	if (++d->w->entries > MAX_ENTRIES)
		return 1;
	if (de->next_pos <= d->last_pos)
		abort();	/* positions must move forward */
	d->last_pos = de->next_pos;
	kiln_lookup(d->w->img, d->dir, de->name, de->name_len, &found);
	if (strcmp(de->name, ".") && strcmp(de->name, ".."))
		exercise(d->w, de->nid);
	return 0;
}

static void exercise(struct walk *w, kiln_nid_t nid)
{
	struct kiln_stat st;
	char link[4096];

	if (kiln_stat_nid(w->img, nid, &st))
		return;
	exercise_xattrs(w, nid);
	if (S_ISLNK(st.mode)) {
		kiln_readlink(w->img, nid, link, sizeof(link));
		kiln_readlink(w->img, nid, link, 2);
	}
	if (S_ISDIR(st.mode) && w->depth < MAX_DEPTH) {
		struct dir_ctx d = { .w = w, .dir = nid };

		w->depth++;
		kiln_dir_iterate(w->img, nid, 0, on_entry, &d);
		kiln_dir_iterate(w->img, nid, 13, on_entry,
				 &(struct dir_ctx){ .w = w, .dir = nid, .last_pos = 13 });
		w->depth--;
	} else {
		exercise_data(w, nid);
	}
}

static void resolve_some(struct walk *w)
{
	static const char *paths[] = {
		"", "/", "a", "/a/b/c", "..", "../..", "x/../y", "link",
		"dir/", "sub/link/x", "/./././",
	};
	kiln_nid_t nid;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		kiln_resolve(w->img, paths[i], 0, &nid);
		kiln_resolve(w->img, paths[i], KILN_RESOLVE_FOLLOW, &nid);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct walk w;
	struct kiln_image_info info;
	int fd = memfd_create("fuzz-image", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	memset(&w, 0, sizeof(w));
	if (kiln_image_open_fd(&w.img, fd, NULL) == 0) {
		kiln_image_get_info(w.img, &info);
		exercise(&w, kiln_image_root(w.img));
		resolve_some(&w);
		kiln_image_close(w.img);
	}
	close(fd);
	return 0;
}
