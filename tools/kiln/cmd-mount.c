// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_mount(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln mount: not available yet\n");
	return 2;
}
