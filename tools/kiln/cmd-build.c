// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_build(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln build: not available yet\n");
	return 2;
}
