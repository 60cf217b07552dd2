// SPDX-License-Identifier: MIT
/* kiln mount in a build without libfuse3: say so plainly. */
#include <stdio.h>

#include "cli.h"

static const struct cli_spec mount_spec = {
	.cmd = "mount",
	.usage = "IMAGE MOUNTPOINT",
	.summary = "Mount an EROFS image read-only with FUSE: not in this "
		   "kiln, which was built\nwithout FUSE support (libfuse3 >= "
		   "3.12 was not found at build time).",
};

int cmd_mount(int argc, char **argv)
{
	const char *arg;
	int c = cli_getopt(argc, argv, &mount_spec, &arg);

	if (c == CLI_OPT_HELP || c == CLI_OPT_VERSION || c == CLI_OPT_ERROR)
		return cli_opt_exit(c);
	fprintf(stderr, "kiln mount: this kiln was built without FUSE support "
		"(libfuse3 >= 3.12 was not found at build time)\n");
	return 1;
}
