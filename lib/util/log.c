// SPDX-License-Identifier: MIT
/* Formatting messages for the caller's log callback, and kiln_strerror(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/*
 * Format into @buf, or into the heap when @cap is too small, so a message
 * arrives whole (a 4 KiB path must still say what is wrong with it).
 * Returns @buf or a string to free(); out of memory leaves what fits in
 * @buf, marked as cut, and returns @buf.
 */
static char *format_whole(char *buf, size_t cap, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static char *format_whole(char *buf, size_t cap, const char *fmt, va_list ap)
{
	va_list again;
	char *big;
	int n;

	va_copy(again, ap);
	n = vsnprintf(buf, cap, fmt, ap);
	if (n < 0 || (size_t)n < cap) {
		va_end(again);
		return buf;
	}
	big = malloc((size_t)n + 1);
	if (big)
		vsnprintf(big, (size_t)n + 1, fmt, again);
	else
		memcpy(buf + cap - 4, "...", 4);
	va_end(again);
	return big ? big : buf;
}

void kiln_vlog(const struct kiln_logger *lg, enum kiln_log_level level,
	       const char *fmt, va_list ap)
{
	char line[1024], *msg;

	if (!lg || !lg->fn)
		return;
	msg = format_whole(line, sizeof(line), fmt, ap);
	lg->fn(lg->ctx, level, msg);
	if (msg != line)
		free(msg);
}

void kiln_log(const struct kiln_logger *lg, enum kiln_log_level level,
	      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kiln_vlog(lg, level, fmt, ap);
	va_end(ap);
}

/* Set by kiln_io_error_set(): the next corruption exit is an I/O error. */
static _Thread_local int io_error;

void kiln_io_error_set(int err)
{
	io_error = err;
}

int kiln_corrupt(const struct kiln_logger *lg, const char *func, int line,
		 const char *fmt, ...)
{
	char buf[896], *msg;
	va_list ap;

	va_start(ap, fmt);
	msg = format_whole(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (io_error) {
		/* the bytes could not be fetched: not the image's fault */
		kiln_log(lg, KILN_LOG_ERROR, "I/O error: %s", msg);
		io_error = 0;
		if (msg != buf)
			free(msg);
		return -EIO;
	}
	/* the reader's source location is for debugging, not for users */
	kiln_log(lg, KILN_LOG_ERROR, "corrupt image: %s", msg);
	kiln_log(lg, KILN_LOG_DEBUG, "corrupt image: found by %s:%d", func,
		 line);
	if (msg != buf)
		free(msg);
	return -KILN_ECORRUPT;
}

KILN_API const char *kiln_version(void)
{
	return KILN_VERSION_STRING;
}

KILN_API const char *kiln_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case KILN_ECORRUPT:
		return "corrupt image";
	case KILN_ENOTEROFS:
		return "not an EROFS image";
	case EOPNOTSUPP:
		return "image uses a feature kiln does not support";
	case ENOENT:
		return "no such file or directory";
	case ENOTDIR:
		return "not a directory";
	case EISDIR:
		return "is a directory";
	case ENAMETOOLONG:
		return "name too long";
	case ENODATA:
		return "no such attribute";
	case ERANGE:
		return "buffer too small";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case EIO:
		return "input/output error";
	case ENOSPC:
		return "no space left on device";
	case ELOOP:
		return "too many levels of symbolic links";
	case EFBIG:
		return "file too large";
	case EACCES:
		return "permission denied";
	case ENODEV:
		return "needs an extra device that was not given";
	default:
		/* strerror() of glibc returns constant strings for known codes */
		return strerror(err);
	}
}
