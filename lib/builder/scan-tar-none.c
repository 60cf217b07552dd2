// SPDX-License-Identifier: MIT
/* Tar input in a build without libarchive: a clear refusal. */
#include <errno.h>

#include "builder/internal.h"
#include "builder/tar-index.h"

int kiln_tar_scan(struct kiln_build *b)
{
	kiln_log(&b->lg, KILN_LOG_ERROR,
		 "%s: this kiln was built without tar support (libarchive)",
		 b->source);
	return -EOPNOTSUPP;
}

void kiln_tar_index_close(struct kiln_build *b)
{
	(void)b;
}
