// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_cat(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln cat: not available yet\n");
	return 2;
}
