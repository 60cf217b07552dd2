// SPDX-License-Identifier: MIT
/* kiln mount in a build without libfuse3: say so plainly. */
#include <stdio.h>

#include "cli.h"

int cmd_mount(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln mount: this kiln was built without FUSE support "
		"(libfuse3 >= 3.12 was not found at build time)\n");
	return 1;
}
