// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_umount(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln umount: not available yet\n");
	return 2;
}
