// SPDX-License-Identifier: MIT
/*
 * Directory contents: entries in unsigned byte order, packed into blocks
 * so that no entry (dirent + name) straddles a block.
 *
 *   block: [dirent 0]..[dirent n-1][name 0]..[name n-1][zero fill]
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"
#include "util/endian.h"

int kiln_dir_namecmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);

	if (r)
		return r;
	return alen < blen ? -1 : alen > blen;
}

static int cmp_src(const void *a, const void *b)
{
	const struct kiln_dirent_src *x = a, *y = b;

	return kiln_dir_namecmp(x->name, x->name_len, y->name, y->name_len);
}

static int cmp_dentry(const void *a, const void *b)
{
	const struct kiln_dentry *x = a, *y = b;

	return kiln_dir_namecmp(x->name, x->name_len, y->name, y->name_len);
}

void kiln_dir_sort(struct kiln_dentry *d, size_t n)
{
	qsort(d, n, sizeof(*d), cmp_dentry);
}

/* How many entries from @ents[i] fit in one block. */
static size_t block_fill(const struct kiln_dirent_src *ents, size_t n,
			 size_t i, uint32_t blksz, size_t *used)
{
	size_t count = 0, len = 0;

	while (i + count < n) {
		size_t need = sizeof(struct erofs_dirent) + ents[i + count].name_len;

		if (len + need > blksz)
			break;
		len += need;
		count++;
	}
	*used = len;
	return count;
}

uint64_t kiln_dir_size(const struct kiln_dirent_src *ents, size_t n,
		       uint32_t blksz)
{
	uint64_t blocks = 0;
	size_t used = 0;

	for (size_t i = 0; i < n;) {
		size_t count = block_fill(ents, n, i, blksz, &used);

		i += count;
		blocks++;
	}
	return blocks ? (blocks - 1) * blksz + used : 0;
}

int kiln_dir_encode(const struct kiln_dirent_src *ents, size_t n,
		    uint32_t blksz, void *block,
		    int (*emit)(void *ctx, uint64_t blk, const void *data,
				size_t len),
		    void *ctx)
{
	uint8_t *p = block;
	uint64_t blk = 0;

	for (size_t i = 0; i < n; blk++) {
		size_t used, count = block_fill(ents, n, i, blksz, &used);
		size_t nameoff = count * sizeof(struct erofs_dirent);
		int err;

		memset(p, 0, blksz);
		for (size_t k = 0; k < count; k++) {
			const struct kiln_dirent_src *e = &ents[i + k];
			uint8_t *de = p + k * sizeof(struct erofs_dirent);

			kiln_put_le64(de, e->nid);
			kiln_put_le16(de + 8, (uint16_t)nameoff);
			de[10] = e->file_type;
			memcpy(p + nameoff, e->name, e->name_len);
			nameoff += e->name_len;
		}
		i += count;
		err = emit(ctx, blk, p, i < n ? blksz : used);
		if (err)
			return err;
	}
	return 0;
}

int kiln_dir_entries(const struct kiln_node *n,
		     struct kiln_dirent_src **entsp, size_t *nr)
{
	struct kiln_dirent_src *ents;
	size_t count = n->nr_children + 2;

	ents = malloc(count * sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	ents[0] = (struct kiln_dirent_src){ ".", 1, EROFS_FT_DIR, n->nid };
	ents[1] = (struct kiln_dirent_src){ "..", 2, EROFS_FT_DIR,
		n->parent ? n->parent->nid : n->nid };
	for (size_t i = 0; i < n->nr_children; i++) {
		const struct kiln_dentry *d = &n->children[i];

		ents[i + 2] = (struct kiln_dirent_src){
			d->name, d->name_len, kiln_inode_ftype(d->node->mode),
			d->node->nid };
	}
	/* "." and ".." sort like any name: "!x" comes before "." */
	qsort(ents, count, sizeof(*ents), cmp_src);
	*entsp = ents;
	*nr = count;
	return 0;
}
