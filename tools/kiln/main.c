// SPDX-License-Identifier: MIT
/* kiln: the command table. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include <kiln/kiln.h>

#include "cli.h"

static const struct kiln_cmd commands[] = {
	{ "build",   cmd_build,   "build an image from a directory or tar stream" },
	{ "ls",      cmd_ls,      "list a directory inside an image" },
	{ "cat",     cmd_cat,     "write a file of an image to standard output" },
	{ "extract", cmd_extract, "extract an image (or part of it) to a directory" },
	{ "info",    cmd_info,    "describe an image" },
	{ "fsck",    cmd_fsck,    "check every structure and byte of an image" },
	{ "mount",   cmd_mount,   "mount an image with FUSE" },
	{ "umount",  cmd_umount,  "unmount a kiln FUSE mount" },
	{ "cache",   cmd_cache,   "show, check or clear the cache of remote images" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: kiln COMMAND [OPTIONS] ...\n"
		"Build EROFS images from directory trees or tar streams, and "
		"read, check,\nextract and mount them.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\noptions:\n  %-26s %s\n  %-26s %s\n", "-h, --help",
		"show this help", "-V, --version", "show kiln's version");
	fprintf(f, "\nenvironment:\n"
		"  %-26s %s\n  %-26s %s\n  %-26s %s\n",
		"KILN_DEBUG=1", "also print debug lines, such as where in the "
		"reader a corruption was found",
		"SOURCE_DATE_EPOCH=SECONDS", "kiln build: the build time; "
		"newer mtimes are clamped to it",
		"COLUMNS=N", "width of kiln build's progress line where the "
		"terminal does not tell");
	fprintf(f, "\nexit status:\n"
		"  0 success; 1 failure (kiln fsck: a corrupt image); 2 usage "
		"error (kiln fsck:\n  also a file that is no EROFS image); "
		"130 interrupted by SIGINT or SIGTERM.\n");
	fprintf(f, "\n'kiln COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
	/*
	 * Builds allocate and free buffers of up to a few MiB for every file:
	 * keep them in the heap, not in fresh mappings (a page fault per 4
	 * KiB each time), and keep freed memory for the next file.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		cli_version();
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
