// SPDX-License-Identifier: MIT
/*
 * Walking directory blocks: every block and name checked, positions that
 * survive between calls (byte offset of the dirent in the directory data).
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/internal.h"
#include "util/checked.h"
#include "util/endian.h"

#define DIRENT_SIZE	sizeof(struct erofs_dirent)

int kiln_dirblk_read(struct kiln_file *dir, uint64_t blk, uint8_t *scratch,
		     struct kiln_dirblk *b)
{
	struct kiln_image *img = dir->img;
	uint32_t bs = img->sb.blksz;
	uint64_t off = blk * bs;
	const char *why = NULL;
	const void *p;
	int n, err;

	b->blk = blk;
	b->len = (size_t)KILN_MIN((uint64_t)bs, dir->inode.size - off);
	err = kiln_file_direct(dir, off, b->len, &p);
	if (err)
		return err;
	if (!p) {
		ssize_t got = kiln_file_pread(dir, scratch, b->len, off);

		if (got < 0)
			return (int)got;
		if ((size_t)got != b->len)
			return KILN_CORRUPT(img, "nid %llu: directory block %llu short read",
					    (unsigned long long)dir->inode.nid,
					    (unsigned long long)blk);
		p = scratch;
	}
	b->data = p;
	n = kiln_decode_dirent_count(p, b->len, &why);
	if (n < 0)
		return KILN_CORRUPT(img, "nid %llu: directory block %llu: %s",
				    (unsigned long long)dir->inode.nid,
				    (unsigned long long)blk, why);
	b->count = (unsigned int)n;
	return 0;
}

int kiln_dirblk_entry(struct kiln_file *dir, const struct kiln_dirblk *b,
		      unsigned int i, struct kiln_dirent_disk *de,
		      const uint8_t **name, unsigned int *name_len)
{
	const uint8_t *d = b->data;
	size_t names_start = (size_t)b->count * DIRENT_SIZE;
	size_t start, end;

	kiln_decode_dirent(d + (size_t)i * DIRENT_SIZE, de);
	start = de->nameoff;
	if (i + 1 < b->count) {
		end = kiln_get_le16(d + (size_t)(i + 1) * DIRENT_SIZE +
				    offsetof(struct erofs_dirent, nameoff));
	} else {
		/* the last name ends at a NUL, the block end or i_size */
		end = start < b->len ?
		      start + strnlen((const char *)d + start, b->len - start) :
		      start;
	}
	if (start < names_start || end > b->len || end <= start ||
	    end - start > EROFS_NAME_LEN)
		return KILN_CORRUPT(dir->img, "nid %llu: directory block %llu entry %u: name at %zu..%zu outside %zu..%zu or length not 1..255",
				    (unsigned long long)dir->inode.nid,
				    (unsigned long long)b->blk, i, start, end,
				    names_start, b->len);
	*name = d + start;
	*name_len = (unsigned int)(end - start);
	return 0;
}

static uint8_t dtype_of(uint8_t file_type)
{
	static const uint8_t map[EROFS_FT_MAX] = {
		[EROFS_FT_UNKNOWN] = DT_UNKNOWN,
		[EROFS_FT_REG_FILE] = DT_REG,
		[EROFS_FT_DIR] = DT_DIR,
		[EROFS_FT_CHRDEV] = DT_CHR,
		[EROFS_FT_BLKDEV] = DT_BLK,
		[EROFS_FT_FIFO] = DT_FIFO,
		[EROFS_FT_SOCK] = DT_SOCK,
		[EROFS_FT_SYMLINK] = DT_LNK,
	};

	return file_type < EROFS_FT_MAX ? map[file_type] : DT_UNKNOWN;
}

/* Emit the entries of one block from entry @first; 0 or the callback's. */
static int iterate_block(struct kiln_file *dir, const struct kiln_dirblk *b,
			 unsigned int first, uint64_t nblocks, kiln_dir_fn fn,
			 void *ctx)
{
	uint32_t bs = dir->img->sb.blksz;
	char name[EROFS_NAME_LEN + 1];

	for (unsigned int i = first; i < b->count; i++) {
		struct kiln_dirent_disk de;
		struct kiln_dirent out;
		const uint8_t *raw;
		unsigned int len;
		int ret;

		ret = kiln_dirblk_entry(dir, b, i, &de, &raw, &len);
		if (ret)
			return ret;
		memcpy(name, raw, len);
		name[len] = '\0';
		out.nid = de.nid;
		out.name = name;
		out.name_len = (uint16_t)len;
		out.type = dtype_of(de.file_type);
		if (i + 1 < b->count)
			out.next_pos = b->blk * bs + (i + 1) * DIRENT_SIZE;
		else if (b->blk + 1 < nblocks)
			out.next_pos = (b->blk + 1) * bs;
		else
			out.next_pos = dir->inode.size;
		ret = fn(ctx, &out);
		if (ret)
			return ret;
	}
	return 0;
}

static int iterate(struct kiln_file *dir, uint64_t pos, kiln_dir_fn fn,
		   void *ctx)
{
	uint32_t bs = dir->img->sb.blksz;
	uint64_t size = dir->inode.size;
	uint64_t nblocks = kiln_div_round_up(size, bs);
	uint8_t scratch[1u << EROFS_MAX_BLKSZBITS];
	unsigned int first = (unsigned int)kiln_div_round_up(pos % bs,
							     DIRENT_SIZE);
	int ret;

	for (uint64_t blk = pos / bs; blk < nblocks; blk++, first = 0) {
		struct kiln_dirblk b;

		ret = kiln_dirblk_read(dir, blk, scratch, &b);
		if (ret)
			return ret;
		ret = iterate_block(dir, &b, first, nblocks, fn, ctx);
		if (ret)
			return ret;
	}
	/* dot-omitted directories list "." after the last stored entry */
	if (dir->inode.dot_omitted && pos <= size) {
		struct kiln_dirent dot = {
			.nid = dir->inode.nid, .name = ".", .name_len = 1,
			.type = DT_DIR, .next_pos = size + 1,
		};

		return fn(ctx, &dot);
	}
	return 0;
}

/* Load @nid as a directory into the embedded handle @dir. */
int kiln_dir_open(struct kiln_image *img, kiln_nid_t nid,
		  struct kiln_file *dir)
{
	struct kiln_inode in;
	int err;

	err = kiln_inode_load(img, nid, &in);
	if (err)
		return err;
	if (!S_ISDIR(in.mode))
		return -ENOTDIR;
	return kiln_file_init(dir, img, &in);
}

KILN_API int kiln_dir_iterate(struct kiln_image *img, kiln_nid_t nid,
			      uint64_t pos, kiln_dir_fn fn, void *ctx)
{
	struct kiln_file dir;
	int ret;

	ret = kiln_dir_open(img, nid, &dir);
	if (ret)
		return ret;
	ret = iterate(&dir, pos, fn, ctx);
	kiln_file_release(&dir);
	return ret;
}
