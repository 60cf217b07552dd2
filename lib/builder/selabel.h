/* SPDX-License-Identifier: MIT */
/*
 * SELinux labels from a file_contexts file (selabel.c with libselinux,
 * selabel-none.c without it).
 */
#ifndef KILN_BUILDER_SELABEL_H
#define KILN_BUILDER_SELABEL_H

#include <stdint.h>

struct kiln_logger;
struct kiln_selabel;

/*
 * Load the file_contexts file @file_contexts (with its ".local" and
 * ".homedirs" companions, as libselinux does) for an image mounted at
 * @mount_point (NULL: "/"; missing or repeated '/' are mended, so
 * "vendor/" is "/vendor"). Every regular expression and the shape of
 * every context are checked now. Returns 0 with *@sl, or a negative
 * errno after logging "<file_contexts>: <reason>" at KILN_LOG_ERROR.
 * While it runs, libselinux's process-wide log and validate callbacks
 * are the library's own (restored before it returns; two builds load
 * one after the other).
 */
int kiln_selabel_open(struct kiln_selabel **sl, const char *file_contexts,
		      const char *mount_point, const struct kiln_logger *lg);
/* kiln_selabel_close(NULL) is a no-op. */
void kiln_selabel_close(struct kiln_selabel *sl);
/*
 * The label of the file at @rel below the image root ("" for the root;
 * no leading '/'), looked up as "<mount point>/<rel>" for the file type
 * in @mode (S_IFMT bits; the permission bits are ignored). Returns 0 with
 * *@ctx, the raw context string the caller frees with free(); -ENOENT
 * when the file is to stay unlabelled ("<<none>>", or no line matches);
 * another negative errno on failure. One thread at a time per @sl.
 */
int kiln_selabel_lookup(struct kiln_selabel *sl, const char *rel,
			uint32_t mode, char **ctx);

#endif
