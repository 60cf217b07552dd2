// SPDX-License-Identifier: MIT
/* OCI input in a build without libarchive or jansson: a clear refusal. */
#include <errno.h>

#include "builder/internal.h"

int kiln_oci_scan(struct kiln_build *b)
{
	kiln_log(&b->lg, KILN_LOG_ERROR,
		 "%s: this kiln was built without OCI image support "
		 "(libarchive and jansson)", b->source);
	return -EOPNOTSUPP;
}
