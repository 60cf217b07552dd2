/* SPDX-License-Identifier: MIT */
/*
 * Dedupe of data that recurs at other offsets (--dedupe-shifted): before
 * the data pass, every big compressed file is cut into content-defined
 * chunks and each chunk is hashed; a chunk found in two different files
 * (or twice in one) is "shared". The data pass then ends extents at both
 * ends of every shared chunk, so each copy of it is compressed from the
 * same first byte into the same pclusters, whatever its offset in its
 * file, and pcluster dedupe stores them once. Files with nothing shared
 * are cut nowhere: they compress exactly as without the option.
 *
 * Everything here depends on the file contents only (chunk boundaries
 * come from a rolling hash of the last 64 bytes; counts are merged in tree
 * order), so the image does not depend on the thread count.
 */
#ifndef KILN_BUILDER_ZSHIFT_H
#define KILN_BUILDER_ZSHIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kiln_build;
struct kiln_zcuts;
struct kiln_zshift;

/*
 * Read and chunk every regular file of b->order that is compressed (with
 * dedupe) and long enough to hold two chunks; sets b->zshift
 * (NULL when no file has a shared chunk). Returns 0 or a negative errno;
 * a file that cannot be read now only gets no cuts (the data pass reports
 * it).
 */
int kiln_zshift_plan(struct kiln_build *b);

/*
 * The cuts of node b->order[@idx] in *@cuts: false (and @cuts untouched)
 * when it has none. Safe from any thread once the plan is made.
 */
bool kiln_zshift_cuts(const struct kiln_zshift *zs, size_t idx,
		      struct kiln_zcuts *cuts);

void kiln_zshift_free(struct kiln_zshift *zs);

#endif
