// SPDX-License-Identifier: MIT
/*
 * Which extended attribute names a FUSE caller may see: as in the kernel,
 * trusted.* only with CAP_SYS_ADMIN; every other namespace to anyone.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fuse-ops.h"

#define TRUSTED_PREFIX		"trusted."
#define TRUSTED_PREFIX_LEN	(sizeof(TRUSTED_PREFIX) - 1)
#define CAP_SYS_ADMIN_BIT	21

bool kiln_fuse_xattr_is_trusted(const char *name)
{
	return !strncmp(name, TRUSTED_PREFIX, TRUSTED_PREFIX_LEN);
}

/*
 * The caller's effective capabilities from /proc/PID/status (FUSE passes
 * the pid as this daemon's pid namespace sees it). When that cannot be
 * read (the caller exited, another namespace), only uid 0 counts.
 */
bool kiln_fuse_caller_may_see_trusted(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[64], line[256];
	bool found = false, cap = false;
	FILE *f;

	if (!ctx)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/status", (long)ctx->pid);
	f = ctx->pid > 0 ? fopen(path, "re") : NULL;
	while (f && fgets(line, sizeof(line), f)) {
		uint64_t eff;

		if (sscanf(line, "CapEff: %" SCNx64, &eff) == 1) {
			found = true;
			cap = eff >> CAP_SYS_ADMIN_BIT & 1;
			break;
		}
	}
	if (f)
		fclose(f);
	return found ? cap : ctx->uid == 0;
}

size_t kiln_fuse_xattr_hide_trusted(char *list, size_t len)
{
	size_t in = 0, out = 0;

	while (in < len) {
		size_t n = strnlen(list + in, len - in);

		n += n < len - in;	/* its NUL, when there is one */
		if (!kiln_fuse_xattr_is_trusted(list + in)) {
			memmove(list + out, list + in, n);
			out += n;
		}
		in += n;
	}
	return out;
}
