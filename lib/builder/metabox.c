// SPDX-License-Identifier: MIT
/*
 * Metadata compression (the metabox, Linux 6.17+): every inode but the
 * packed one is laid out in the content of one more regular file, the
 * metabox inode, which is compressed like any file; a nid with bit 63 set
 * names a position in that content. The content arrives in order from the
 * inode-area writer and is compressed a fixed segment at a time, so one
 * segment is all it holds in memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "builder/output.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

/*
 * Content bytes per compressed segment: a multiple of every extent size
 * (at most 1 MiB) and a constant, so the bytes never depend on -j.
 */
#define MBX_SEG_SIZE	((size_t)4 << 20)

struct kiln_metabox {
	struct kiln_build *b;
	uint64_t size;			/* content bytes, fixed at open */
	uint64_t seg_start;		/* content offset of seg[0] */
	size_t seg_len;			/* bytes in seg */
	uint8_t *seg;
	struct kiln_zfile *whole;	/* segments committed so far */
	bool raw;			/* not worth compressing: plain blocks */
	kiln_blk_t raw_start;
};

int kiln_metabox_open(struct kiln_build *b, uint64_t size,
		      struct kiln_metabox **out)
{
	struct kiln_metabox *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->seg = malloc(MBX_SEG_SIZE);
	if (!m->seg) {
		free(m);
		return -ENOMEM;
	}
	m->b = b;
	m->size = size;
	*out = m;
	return 0;
}

void kiln_metabox_free(struct kiln_metabox *m)
{
	if (!m)
		return;
	kiln_zfile_free(m->whole);
	free(m->seg);
	free(m);
}

static int seg_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct kiln_metabox *m = ctx;

	return kiln_src_read_mem(m->seg, m->seg_start, m->seg_len, buf, len,
				 off);
}

/* Plain blocks from the first segment on: reserve them all at once. */
static int raw_segment(struct kiln_metabox *m)
{
	struct kiln_build *b = m->b;
	size_t padded = (size_t)kiln_round_up(m->seg_len, b->blksz);

	if (!m->raw) {
		int err = kiln_out_reserve(b->out,
					   kiln_div_round_up(m->size, b->blksz),
					   &m->raw_start);

		if (err)
			return err;
		m->raw = true;
	}
	memset(m->seg + m->seg_len, 0, padded - m->seg_len);
	return kiln_out_pwrite(b->out, m->seg, padded,
			       ((uint64_t)m->raw_start << b->blkszbits) +
			       m->seg_start);
}

static int flush_segment(struct kiln_metabox *m)
{
	struct kiln_zfile *part = NULL;
	int err;

	if (!m->seg_len)
		return 0;
	if (m->raw) {
		err = raw_segment(m);
	} else {
		err = kiln_zfile_compress_segment(m->b->zctx, seg_read, m,
						  m->seg_start, m->seg_len,
						  m->size, KILN_ZSEG_PACKED,
						  NULL, &part);
		if (err == 1) {
			/* only the first segment is ever handed back raw */
			kiln_zfile_free(part);
			part = NULL;
			err = raw_segment(m);
		} else if (!err) {
			err = kiln_zfile_commit(part, m->b->out);
			if (!err)
				err = kiln_zfile_join(&m->whole, part);
			if (err)
				kiln_zfile_free(part);
		}
	}
	if (err)
		return err;
	m->seg_start += m->seg_len;
	m->seg_len = 0;
	return 0;
}

int kiln_metabox_write(struct kiln_metabox *m, const void *data, size_t len,
		       uint64_t off)
{
	const uint8_t *p = data;

	if (off != m->seg_start + m->seg_len || len > m->size - off)
		return -EINVAL;		/* the writer goes strictly forward */
	while (len) {
		size_t n = KILN_MIN(len, MBX_SEG_SIZE - m->seg_len);
		int err;

		memcpy(m->seg + m->seg_len, p, n);
		m->seg_len += n;
		p += n;
		len -= n;
		if (m->seg_len == MBX_SEG_SIZE) {
			err = flush_segment(m);
			if (err)
				return err;
		}
	}
	return 0;
}

int kiln_metabox_finish(struct kiln_metabox *m, struct kiln_node **out)
{
	struct kiln_build *b = m->b;
	struct kiln_node *n;
	int err;

	*out = NULL;
	if (m->seg_start + m->seg_len != m->size)
		return -EIO;		/* some of the content never came */
	err = flush_segment(m);
	if (err)
		return err;
	err = kiln_nodes_push_special(b, m->size, &n);
	if (err)
		return err;
	if (m->raw) {
		n->datalayout = EROFS_INODE_FLAT_PLAIN;
		n->startblk = m->raw_start;
	} else {
		if (!m->whole)
			return -EIO;
		kiln_zfile_seal(m->whole);
		n->zf = m->whole;	/* freed with the tree */
		m->whole = NULL;
		err = kiln_zfile_drop_inline(n->zf, b->out);
		if (err)
			return err;
		n->datalayout = (uint8_t)kiln_zfile_datalayout(n->zf);
	}
	*out = n;
	return 0;
}
