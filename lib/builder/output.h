/* SPDX-License-Identifier: MIT */
/*
 * The image being written: a temporary file beside the destination (or a
 * block device, written in place), a block allocator for the data area,
 * and a running content hash. Renamed over the destination only by
 * kiln_out_commit().
 */
#ifndef KILN_BUILDER_OUTPUT_H
#define KILN_BUILDER_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include <kiln/kiln.h>

#include "util/log.h"

struct kiln_out;
struct kiln_progress;

/*
 * Open the destination @path, symlinks followed (a dangling one: its
 * target is created). A regular file or a new name: a temporary image
 * file in its directory (O_TMPFILE when the filesystem has it, else a
 * hidden named file). A block device: the device itself, opened
 * exclusively, refused while it or a partition is mounted or held; the
 * image must fit in it. Anything else is refused, untouched. Data blocks
 * are handed out from @first_blk on. Errors are logged naming @path. @lg
 * must outlive the kiln_out.
 */
int kiln_out_open(struct kiln_out **outp, const char *path,
		  unsigned int blkszbits, kiln_blk_t first_blk,
		  const struct kiln_logger *lg);

/*
 * Count what is written in @p's out_bytes from now on (the furthest byte
 * of the image written so far), so the progress shows the image growing.
 * @p must outlive @out; NULL stops counting.
 */
void kiln_out_set_progress(struct kiln_out *out, struct kiln_progress *p);

/* Block size shift of the image. */
unsigned int kiln_out_blkszbits(const struct kiln_out *out);

/*
 * Reserve @nblks consecutive blocks at the end of the data area; *@blk is
 * the first. The blocks read as zeros until written. Not thread-safe: one
 * writer commits data in input order.
 */
int kiln_out_reserve(struct kiln_out *out, uint64_t nblks, kiln_blk_t *blk);

/* Next block kiln_out_reserve() would hand out (= data area end). */
kiln_blk_t kiln_out_next_blk(const struct kiln_out *out);

/*
 * Write @len bytes of @buf at byte @off of the image (whole, or an error
 * naming the image). Every byte written also feeds the content hash, in
 * call order.
 */
int kiln_out_pwrite(struct kiln_out *out, const void *buf, size_t len,
		    uint64_t off);

/*
 * Read back @len bytes at byte @off of what was written (dedupe compares
 * candidates byte for byte). 0, or -EIO when short.
 */
int kiln_out_pread(struct kiln_out *out, void *buf, size_t len, uint64_t off);

/*
 * Append @len bytes as new blocks (the last one zero padded): reserve and
 * write in one step; *@blk is the first block.
 */
int kiln_out_append(struct kiln_out *out, const void *buf, size_t len,
		    kiln_blk_t *blk);

/*
 * The temporary file's descriptor, for reading the image back (verify):
 * owned by @out, valid until kiln_out_commit() or kiln_out_abort().
 */
int kiln_out_fd(const struct kiln_out *out);

/* 128-bit hash of everything written so far (for content-derived UUIDs). */
void kiln_out_digest(const struct kiln_out *out, uint8_t digest[16]);

/*
 * Make the image @size bytes: a file is truncated to it; on a device, the
 * bytes of [0, @size) never written become zeros. Before reading the
 * image back through kiln_out_fd(). 0 or a negative errno (logged).
 */
int kiln_out_set_size(struct kiln_out *out, uint64_t size);

/*
 * Set the final size to @size bytes, fsync, and atomically rename the file
 * over the destination. On failure the temporary file is gone and the
 * destination untouched. A device is synced in place (its content is
 * undefined after a failure, which is logged). Frees @out in every case.
 */
int kiln_out_commit(struct kiln_out *out, uint64_t size);

/* Drop the temporary file, leave the destination alone; NULL is a no-op. */
void kiln_out_abort(struct kiln_out *out);

#endif
