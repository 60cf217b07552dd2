// SPDX-License-Identifier: MIT
/* SELinux labels in a build without libselinux: a clear refusal. */
#include <errno.h>
#include <stddef.h>

#include "builder/selabel.h"
#include "util/log.h"

int kiln_selabel_open(struct kiln_selabel **sl, const char *file_contexts,
		      const char *mount_point, const struct kiln_logger *lg)
{
	(void)mount_point;
	*sl = NULL;
	kiln_log(lg, KILN_LOG_ERROR, "%s: this kiln was built without "
		 "SELinux support (libselinux)", file_contexts);
	return -EOPNOTSUPP;
}

void kiln_selabel_close(struct kiln_selabel *sl)
{
	(void)sl;
}

int kiln_selabel_lookup(struct kiln_selabel *sl, const char *rel,
			uint32_t mode, char **ctx)
{
	(void)sl;
	(void)rel;
	(void)mode;
	*ctx = NULL;
	return -EOPNOTSUPP;
}
