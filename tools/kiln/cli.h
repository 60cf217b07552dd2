/* SPDX-License-Identifier: MIT */
/* What every kiln subcommand shares: the command table entry and helpers. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

struct kiln_cmd {
	const char *name;
	int (*run)(int argc, char **argv);	/* argv[0] is the command name */
	const char *summary;
};

int cmd_build(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);

#endif
