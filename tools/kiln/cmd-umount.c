// SPDX-License-Identifier: MIT
/*
 * kiln umount: unmount a kiln FUSE mount, with umount2() as root and
 * through fusermount3 otherwise; refuses mounts that are not kiln's.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define KILN_FSTYPE "fuse.kiln"

extern char **environ;

static const struct cli_option umount_options[] = {
	{ "lazy", 'l', NULL, "detach now, finish when no longer busy" },
};

static const struct cli_spec umount_spec = {
	.cmd = "umount",
	.usage = "[-l] MOUNTPOINT",
	.summary = "Unmount an image mounted with 'kiln mount'; its server exits.",
	.opts = umount_options,
	.nr_opts = sizeof(umount_options) / sizeof(umount_options[0]),
};

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

/*
 * Find the newest mount on @path in /proc/self/mountinfo and copy its
 * filesystem type to @fstype. Returns 0, -ENOENT when nothing is mounted
 * there, or another negative errno.
 */
static int mount_fstype(const char *path, char *fstype, size_t cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t line_cap = 0;
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &line_cap, f) > 0) {
		/* "id parent dev root MOUNTPOINT opts [tags] - FSTYPE src sopts" */
		char *sep = strstr(line, " - "), *save = NULL, *mp = NULL;
		char *tok = strtok_r(line, " ", &save);

		if (!sep)
			continue;
		*sep = '\0';
		sep += 3;
		sep[strcspn(sep, " ")] = '\0';
		for (int field = 1; tok && field < 5; field++)
			tok = strtok_r(NULL, " ", &save);
		mp = tok;
		if (!mp)
			continue;
		unescape(mp);
		if (strcmp(mp, path))
			continue;
		/* Later lines are newer mounts: the last match is on top. */
		snprintf(fstype, cap, "%s", sep);
		ret = 0;
	}
	free(line);
	fclose(f);
	return ret;
}

/* The absolute path of @arg; a dead FUSE mount fails stat, so build it. */
static int absolute_path(const char *arg, char *out, size_t cap)
{
	char cwd[PATH_MAX];
	int n;

	if (realpath(arg, out))
		return 0;
	if (arg[0] == '/') {
		n = snprintf(out, cap, "%s", arg);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		n = snprintf(out, cap, "%s/%s", cwd, arg);
	}
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	/* No trailing slash: mountinfo has none. */
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

static int run_fusermount(const char *path, bool lazy)
{
	char *argv[5];
	int argc = 0, status, err;
	pid_t pid;

	argv[argc++] = "fusermount3";
	argv[argc++] = "-u";
	if (lazy)
		argv[argc++] = "-z";
	argv[argc++] = (char *)path;
	argv[argc] = NULL;
	err = posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ);
	if (err) {
		cli_error(path, "cannot run fusermount3: %s", strerror(err));
		return 1;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int cmd_umount(int argc, char **argv)
{
	char path[PATH_MAX], fstype[64];
	const char *arg;
	bool lazy = false;
	int c, err;

	while ((c = cli_getopt(argc, argv, &umount_spec, &arg)) != CLI_OPT_END) {
		if (c == 'l')
			lazy = true;
		else
			return cli_opt_exit(c);
	}
	if (argc - optind != 1)
		return cli_usage_error(&umount_spec, "expected one MOUNTPOINT");
	err = absolute_path(argv[optind], path, sizeof(path));
	if (!err)
		err = mount_fstype(path, fstype, sizeof(fstype));
	if (err) {
		cli_error(argv[optind], "%s", err == -ENOENT ?
			  "not a mount point" : strerror(-err));
		return 1;
	}
	if (strcmp(fstype, KILN_FSTYPE)) {
		cli_error(argv[optind], "not a kiln mount (%s)", fstype);
		return 1;
	}
	if (geteuid() != 0)
		return run_fusermount(path, lazy);
	if (umount2(path, lazy ? MNT_DETACH : 0)) {
		cli_error(argv[optind], "cannot unmount: %s", strerror(errno));
		return 1;
	}
	return 0;
}
