// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "cli.h"

int cmd_fsck(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln fsck: not available yet\n");
	return 2;
}
