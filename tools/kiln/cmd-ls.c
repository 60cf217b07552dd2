// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_ls(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln ls: not available yet\n");
	return 2;
}
