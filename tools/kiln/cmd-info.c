// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_info(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln info: not available yet\n");
	return 2;
}
