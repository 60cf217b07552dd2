/* SPDX-License-Identifier: MIT */
/*
 * Dedupe table (dedupe.c): pclusters and uncompressed file data already
 * in the image, found by a hash that workers compute and confirmed byte
 * for byte. Lookups and additions are made by the one writer that commits
 * files, in commit order: not thread-safe (kiln_dedupe_hash() is).
 */
#ifndef KILN_BUILDER_COMPRESS_DEDUPE_H
#define KILN_BUILDER_COMPRESS_DEDUPE_H

#include <stdbool.h>
#include <stdint.h>

struct kiln_out;
struct kiln_dedupe;

int kiln_dedupe_new(struct kiln_dedupe **dd);
void kiln_dedupe_free(struct kiln_dedupe *dd);

/*
 * The key of a pcluster of @plen stored bytes @pc that decodes with
 * format @fmt (0: raw, else on-disk algorithm + 1) to @llen bytes. Pure:
 * any thread.
 */
uint64_t kiln_dedupe_hash(const void *pc, uint32_t plen, uint32_t llen,
			   uint8_t fmt);

/*
 * Look for a pcluster equal to @pc (same @plen bytes, @llen, @fmt) among
 * those in the image and those added pending since the last settle, whose
 * bytes are at their relative offset in @local. @hash must be
 * kiln_dedupe_hash() of the arguments, but equal hashes alone never
 * share: every candidate is compared byte for byte. Returns 1 with its
 * address in *@pstart (relative to @local when *@pending), 0 when there
 * is none, or a negative errno.
 */
int kiln_dedupe_find(struct kiln_dedupe *dd, struct kiln_out *out,
		      const uint8_t *local, const void *pc, uint32_t plen,
		      uint32_t llen, uint8_t fmt, uint64_t hash,
		      uint64_t *pstart, bool *pending);

/*
 * Remember a pcluster about to be written at @rel bytes into the buffer
 * that kiln_dedupe_settle() will give its place in the image.
 */
int kiln_dedupe_add_pending(struct kiln_dedupe *dd, uint32_t plen,
			     uint32_t llen, uint8_t fmt, uint64_t hash,
			     uint64_t rel);
/* The pending buffer now sits at image byte @base. */
void kiln_dedupe_settle(struct kiln_dedupe *dd, uint64_t base);

/*
 * Uncompressed file data: @len bytes written from image byte @pstart
 * (block aligned, zero padded to the block). @same(@ctx, pstart) confirms
 * a candidate: 1 equal, 0 not, negative errno. Returns 1 with the copy's
 * address in *@pstart, 0 when none matches, or a negative errno.
 */
int kiln_dedupe_find_flat(struct kiln_dedupe *dd, uint64_t len,
			   uint64_t hash,
			   int (*same)(void *ctx, uint64_t pstart), void *ctx,
			   uint64_t *pstart);
int kiln_dedupe_add_flat(struct kiln_dedupe *dd, uint64_t len,
			  uint64_t hash, uint64_t pstart);

/* Bytes that lookups found already stored (not written again). */
uint64_t kiln_dedupe_saved(const struct kiln_dedupe *dd);

#endif
