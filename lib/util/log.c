// SPDX-License-Identifier: MIT
/* Formatting messages for the caller's log callback, and kiln_strerror(). */
#include <stdio.h>
#include <string.h>

#include "log.h"

void kiln_vlog(const struct kiln_logger *lg, enum kiln_log_level level,
	       const char *fmt, va_list ap)
{
	char line[1024];

	if (!lg || !lg->fn)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	lg->fn(lg->ctx, level, line);
}

void kiln_log(const struct kiln_logger *lg, enum kiln_log_level level,
	      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kiln_vlog(lg, level, fmt, ap);
	va_end(ap);
}

int kiln_corrupt(const struct kiln_logger *lg, const char *func, int line,
		 const char *fmt, ...)
{
	char msg[896];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kiln_log(lg, KILN_LOG_ERROR, "corrupt image: %s (%s:%d)", msg, func,
		 line);
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
	default:
		/* strerror() of glibc returns constant strings for known codes */
		return strerror(err);
	}
}
