// SPDX-License-Identifier: MIT
/*
 * Inode cores: compact (32 bytes) when it stores the inode exactly,
 * extended (64 bytes) otherwise, and their encoding.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "format/erofs_fs.h"
#include "util/endian.h"

/*
 * A compact inode has a 32-bit size, 16-bit uid/gid/nlink, and its mtime is
 * the superblock epoch plus i_mtime with the superblock's fixed nanoseconds.
 * Kernels before 6.15 ignore i_mtime and use the epoch itself, so compact
 * inodes are used only for mtime == epoch (i_mtime = 0): both agree.
 */
bool kiln_inode_fits_compact(const struct kiln_node *n, int64_t epoch,
			     uint32_t fixed_nsec)
{
	return n->size <= UINT32_MAX && n->uid <= UINT16_MAX &&
	       n->gid <= UINT16_MAX && n->nlink <= UINT16_MAX &&
	       n->mtime == epoch && n->mtime_nsec == fixed_nsec;
}

/*
 * The same for an image only 6.15+ kernels mount (48-bit layout): there
 * i_mtime counts seconds after the epoch, so any mtime in the 2^32 seconds
 * that follow it fits.
 */
bool kiln_inode_fits_compact_rel(const struct kiln_node *n, int64_t epoch,
				 uint32_t fixed_nsec)
{
	return n->size <= UINT32_MAX && n->uid <= UINT16_MAX &&
	       n->gid <= UINT16_MAX && n->nlink <= UINT16_MAX &&
	       n->mtime >= epoch && (uint64_t)n->mtime - (uint64_t)epoch <= UINT32_MAX &&
	       n->mtime_nsec == fixed_nsec;
}

int kiln_nodes_push_special(struct kiln_build *b, uint64_t size,
			    struct kiln_node **out)
{
	struct kiln_node *n = calloc(1, sizeof(*n));
	int err;

	*out = NULL;
	if (!n)
		return -ENOMEM;
	err = kiln_nodes_push(b, n);
	if (err) {
		free(n);
		return err;
	}
	n->mode = S_IFREG | 0600;
	n->nlink = 1;
	n->mtime = b->epoch;
	n->mtime_nsec = b->fixed_nsec;
	n->size = size;
	n->extended = !kiln_inode_fits_compact(n, b->epoch, b->fixed_nsec);
	*out = n;
	return 0;
}

unsigned int kiln_inode_core_size(const struct kiln_node *n)
{
	return n->extended ? sizeof(struct erofs_inode_extended)
			   : sizeof(struct erofs_inode_compact);
}

uint8_t kiln_inode_ftype(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:	return EROFS_FT_REG_FILE;
	case S_IFDIR:	return EROFS_FT_DIR;
	case S_IFCHR:	return EROFS_FT_CHRDEV;
	case S_IFBLK:	return EROFS_FT_BLKDEV;
	case S_IFIFO:	return EROFS_FT_FIFO;
	case S_IFSOCK:	return EROFS_FT_SOCK;
	case S_IFLNK:	return EROFS_FT_SYMLINK;
	default:	return EROFS_FT_UNKNOWN;
	}
}

/* The per-type i_u word. */
static uint32_t inode_iu(const struct kiln_node *n)
{
	if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
		return n->rdev;
	if (S_ISFIFO(n->mode) || S_ISSOCK(n->mode))
		return 0;
	if (n->datalayout == EROFS_INODE_CHUNK_BASED)
		return n->chunk_format;	/* format in the low 16 bits */
	if (n->zf)	/* compressed: blocks of pclusters (st_blocks) */
		return (uint32_t)kiln_zfile_blocks(n->zf);
	return (uint32_t)n->startblk;
}

void kiln_inode_encode_core(const struct kiln_node *n, int64_t epoch,
			    void *dst)
{
	uint16_t format = (uint16_t)(n->datalayout << EROFS_I_DATALAYOUT_SHIFT);
	uint16_t icount = n->xattr_size ? (uint16_t)((n->xattr_size - 12) / 4 + 1)
					: 0;
	uint8_t *p = dst;

	if (n->extended) {
		memset(p, 0, sizeof(struct erofs_inode_extended));
		kiln_put_le16(p + 0, format | EROFS_INODE_LAYOUT_EXTENDED);
		kiln_put_le16(p + 2, icount);
		kiln_put_le16(p + 4, (uint16_t)n->mode);
		kiln_put_le64(p + 8, n->size);
		kiln_put_le32(p + 16, inode_iu(n));
		kiln_put_le32(p + 20, n->ino);
		kiln_put_le32(p + 24, n->uid);
		kiln_put_le32(p + 28, n->gid);
		kiln_put_le64(p + 32, (uint64_t)n->mtime);
		kiln_put_le32(p + 40, n->mtime_nsec);
		kiln_put_le32(p + 44, n->nlink);
		return;
	}
	memset(p, 0, sizeof(struct erofs_inode_compact));
	kiln_put_le16(p + 0, format | EROFS_INODE_LAYOUT_COMPACT);
	kiln_put_le16(p + 2, icount);
	kiln_put_le16(p + 4, (uint16_t)n->mode);
	kiln_put_le16(p + 6, (uint16_t)n->nlink);
	kiln_put_le32(p + 8, (uint32_t)n->size);
	kiln_put_le32(p + 12, (uint32_t)((uint64_t)n->mtime - (uint64_t)epoch));
	kiln_put_le32(p + 16, inode_iu(n));
	kiln_put_le32(p + 20, n->ino);
	kiln_put_le16(p + 24, (uint16_t)n->uid);
	kiln_put_le16(p + 26, (uint16_t)n->gid);
}
