// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_extract(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln extract: not available yet\n");
	return 2;
}
