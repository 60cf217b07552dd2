/* SPDX-License-Identifier: MIT */
/*
 * One tar entry's file data as a kiln_src_read_fn (tar-data.c): the blocks
 * libarchive delivers with the holes between them filled, hashed for
 * --verify, read forward once (a stream cannot be read again: what must
 * be read twice, scan-tar.c holds in memory). Used by scan-tar.c only.
 */
#ifndef KILN_BUILDER_TAR_DATA_H
#define KILN_BUILDER_TAR_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#include "util/log.h"

struct archive;

struct kiln_tar_data {
	struct archive *a;
	const struct kiln_logger *lg;
	const char *label;		/* "<archive>: <entry>" for messages */
	uint64_t size;			/* the entry's bytes, holes included */
	uint64_t pos;			/* next byte taken from the archive */
	const uint8_t *blk;		/* current block from libarchive */
	size_t blk_len;
	uint64_t blk_off;		/* file offset of blk[0] */
	bool blk_eof;			/* no blocks left: the rest is hole */
	uint64_t holes_left;		/* hole bytes the sparse map declares */
	XXH3_state_t *hash;		/* NULL unless hashing */
};

/*
 * Read the data of @a's current entry, @size bytes of which @holes are
 * holes (its sparse map's; 0 for a plain member): bytes libarchive does not
 * deliver beyond those are the archive lying about the size, an error.
 * @hash: hash everything taken. @label must outlive @d. Returns 0 or
 * -ENOMEM; kiln_tar_data_release() in every case.
 */
int kiln_tar_data_init(struct kiln_tar_data *d, struct archive *a,
		       const struct kiln_logger *lg, const char *label,
		       uint64_t size, uint64_t holes, bool hash);
/*
 * kiln_src_read_fn over the entry: offsets only grow (bytes skipped are
 * taken, and hashed, all the same); reading bytes already taken fails.
 */
int kiln_tar_data_read(void *ctx, void *buf, size_t len, uint64_t off);
/*
 * Take the rest of the entry (holes the writer had no need to read) and
 * set *@hash to the XXH3-64 of all the data when hashing. 0 or -EIO.
 */
int kiln_tar_data_finish(struct kiln_tar_data *d, uint64_t *hash);
void kiln_tar_data_release(struct kiln_tar_data *d);

/*
 * libarchive's reason for the last failure on @a, never NULL: some paths
 * (a pax header cut short) fail without one, and all of those are a
 * stream that ends early or does not parse.
 */
const char *kiln_tar_error(struct archive *a);

#endif
