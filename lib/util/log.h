/* SPDX-License-Identifier: MIT */
/* Formatting messages for the caller's log callback. */
#ifndef KILN_UTIL_LOG_H
#define KILN_UTIL_LOG_H

#include <stdarg.h>

#include <kiln/kiln.h>

struct kiln_logger {
	kiln_log_fn fn;
	void *ctx;
};

/* Format and hand one line to @lg (nothing happens when lg->fn is NULL). */
void kiln_log(const struct kiln_logger *lg, enum kiln_log_level level,
	      const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kiln_vlog(const struct kiln_logger *lg, enum kiln_log_level level,
	       const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/*
 * Every corruption exit goes through here: logs "corrupt image: <message>"
 * at KILN_LOG_ERROR, then where it was found ("<func>:<line>") at
 * KILN_LOG_DEBUG, and returns -KILN_ECORRUPT. Break on kiln_corrupt() to
 * catch them all.
 */
int kiln_corrupt(const struct kiln_logger *lg, const char *func, int line,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * Mark that bytes the reader asked for could not be read (@err, 0: they
 * could): the thread's next kiln_corrupt() then logs "I/O error: ..."
 * and returns -EIO instead, since the image is not at fault.
 */
void kiln_io_error_set(int err);

#define KILN_CORRUPT_LG(lg, ...) kiln_corrupt((lg), __func__, __LINE__, __VA_ARGS__)

#endif
