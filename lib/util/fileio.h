/* SPDX-License-Identifier: MIT */
/*
 * Whole-range pread/pwrite: retried on EINTR and on short transfers, so
 * callers see a range done, the end of the file, or an errno.
 */
#ifndef KILN_UTIL_FILEIO_H
#define KILN_UTIL_FILEIO_H

#include <stdbool.h>
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

/*
 * Fault injection, for the unit tests only (the symbol is internal: a
 * program linked with the shared library cannot reach it, and nothing in
 * the library sets it). When set, it is asked before every transfer of
 * kiln_pread_full() (@write false) and kiln_pwrite_full() (@write true)
 * on @fd at @off: it returns 0 to go on, after maybe lowering *@len (a
 * short transfer), or a positive errno the call then fails with.
 */
typedef int (*kiln_fileio_fault_fn)(int fd, bool write, size_t *len,
				    uint64_t off);
extern kiln_fileio_fault_fn kiln_fileio_fault;

#endif
