/* SPDX-License-Identifier: MIT */
/*
 * Pcluster dedupe table (zdedupe.c). Used by the one writer that commits
 * compressed files to the image, in commit order: not thread-safe.
 */
#ifndef KILN_BUILDER_ZDEDUPE_H
#define KILN_BUILDER_ZDEDUPE_H

#include <stdint.h>

struct kiln_out;
struct kiln_zdedupe;

int kiln_zdedupe_new(struct kiln_zdedupe **dd);
void kiln_zdedupe_free(struct kiln_zdedupe *dd);

/*
 * Look for a pcluster already in the image whose @plen stored bytes equal
 * @pc and that decodes with format @fmt to @llen bytes. Returns 1 with its
 * byte address in *@pstart, 0 when there is none, or a negative errno.
 */
int kiln_zdedupe_find(struct kiln_zdedupe *dd, struct kiln_out *out,
		      const void *pc, uint32_t plen, uint32_t llen,
		      uint8_t fmt, uint64_t *pstart);

/* Remember the pcluster @pc just written at byte address @pstart. */
int kiln_zdedupe_add(struct kiln_zdedupe *dd, const void *pc, uint32_t plen,
		     uint32_t llen, uint8_t fmt, uint64_t pstart);

#endif
