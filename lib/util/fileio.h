/* SPDX-License-Identifier: MIT */
/*
 * Whole-range pread/pwrite: retried on EINTR and on short transfers, so
 * callers see a range done, the end of the file, or an errno.
 */
#ifndef KILN_UTIL_FILEIO_H
#define KILN_UTIL_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Read @len bytes of @fd at @off into @buf. Returns the bytes read (fewer
 * than @len only when the file ends first) or a negative errno.
 */
ssize_t kiln_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Write @len bytes of @buf to @fd at @off: 0 or a negative errno. */
int kiln_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

#endif
