/* SPDX-License-Identifier: MIT */
/*
 * libkiln: version, error codes and the log hook shared by the reader and
 * the builder.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KILN_BUILDING_LIB)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* Corrupt image: every reader check that fails returns this (negated). */
#define KILN_ECORRUPT EUCLEAN
/*
 * Not an EROFS image at all (negated): empty, too short for a superblock,
 * or no EROFS magic where the superblock belongs.
 */
#define KILN_ENOTEROFS EMEDIUMTYPE

typedef uint64_t kiln_nid_t;	/* on-disk inode number (32-byte slot) */
typedef uint64_t kiln_blk_t;	/* block number */

enum kiln_log_level {
	KILN_LOG_ERROR = 0,
	KILN_LOG_WARN = 1,
	KILN_LOG_INFO = 2,
	KILN_LOG_DEBUG = 3,
};

/*
 * Log sink. The library never prints: each image or build hands its
 * messages (one line, no trailing newline) to this callback. @msg is valid
 * only during the call. May be called from several threads at once.
 */
typedef void (*kiln_log_fn)(void *ctx, enum kiln_log_level level,
			    const char *msg);

/* "0.1.0": a constant string. */
KILN_API const char *kiln_version(void);

/*
 * Describe a negative errno returned by libkiln ("corrupt image" for
 * -KILN_ECORRUPT). Always a constant string; never NULL.
 */
KILN_API const char *kiln_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
