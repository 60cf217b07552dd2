// SPDX-License-Identifier: MIT
/* kiln extract: restore an image (or a part of it) into a directory. */
#include <stdlib.h>
#include <sys/resource.h>

#include <kiln/extract.h>

#include "cli.h"
#include "interrupt.h"

enum {
	OPT_NO_SAME_OWNER = 256,
	OPT_SAME_OWNER,
	OPT_NO_XATTRS,
	OPT_FAIL_FAST,
	OPT_NO_TIMES,
};

static const struct cli_option extract_options[] = {
	{ "force", 'f', NULL, "replace existing files in DEST" },
	{ "keep-going", 'k', NULL, "go on after errors, exit 1 at the end "
				   "(default)" },
	{ "fail-fast", OPT_FAIL_FAST, NULL, "stop at the first error" },
	{ "no-same-owner", OPT_NO_SAME_OWNER, NULL, "do not restore owners "
						    "(default unless root)" },
	{ "same-owner", OPT_SAME_OWNER, NULL, "restore owners even when not "
					      "root" },
	{ "no-xattrs", OPT_NO_XATTRS, NULL, "do not restore extended "
					    "attributes" },
	{ "no-times", OPT_NO_TIMES, NULL, "do not restore modification times" },
	{ "quiet", 'q', NULL, "no warnings" },
	{ "verbose", 'v', NULL, "print a summary at the end" },
	CLI_VERITY_OPTIONS,
	CLI_DEVICE_OPTION,
	CLI_REMOTE_OPTIONS,
};

static const struct cli_spec extract_spec = {
	.cmd = "extract",
	.usage = "[OPTIONS] IMAGE DEST [PATH]",
	.summary = "Extract PATH (default: everything) of IMAGE into directory "
		   "DEST. A directory's contents go into DEST, another file "
		   "becomes DEST/NAME.\n"
		   "With --verity, every block is checked against the "
		   "dm-verity root hash before\nuse: a file on a bad block is "
		   "an error naming it and is removed, never left\nhalf "
		   "written; the exit status is 1.",
	.opts = extract_options,
	.nr_opts = sizeof(extract_options) / sizeof(extract_options[0]),
};

struct extract_cli {
	const char *image;
	bool quiet;
};

static void on_msg(void *ctx, enum kiln_log_level level, const char *path,
		   int err, const char *what)
{
	struct extract_cli *c = ctx;

	if (level != KILN_LOG_ERROR && c->quiet)
		return;
	cli_error(c->image, "%s%s: %s%s%s",
		  level == KILN_LOG_ERROR ? "" : "warning: ", path, what,
		  err ? ": " : "", err ? kiln_strerror(err) : "");
}

/*
 * The extraction keeps one descriptor per directory level open: allow as
 * many as the hard limit does.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Ctrl-C: what is already extracted stays, and the message says so. */
static void on_interrupt_say_partial(const char *dest)
{
	char left[512], name[400];

	cli_copy_cut(name, sizeof(name), dest);
	snprintf(left, sizeof(left), "%s holds a partial extraction", name);
	cli_interrupt_install("extract", left, NULL);
}

int cmd_extract(int argc, char **argv)
{
	struct kiln_extract_opts opts = { .struct_size = sizeof(opts) };
	struct kiln_extract_stats stats;
	struct extract_cli ctx = { 0 };
	struct cli_devices devs = { .count = 0 };
	struct cli_verity verity = { 0 };
	struct kiln_image *img;
	struct cli_log lg;
	const char *arg, *dest, *src = "/";
	bool verbose = false;
	int c, err;

	while ((c = cli_getopt(argc, argv, &extract_spec, &arg)) >= 0) {
		switch (c) {
		case 'f': opts.flags |= KILN_EXTRACT_FORCE; break;
		case 'k': opts.flags &= ~KILN_EXTRACT_FAIL_FAST; break;
		case OPT_FAIL_FAST: opts.flags |= KILN_EXTRACT_FAIL_FAST; break;
		case OPT_NO_SAME_OWNER:
			opts.flags |= KILN_EXTRACT_NO_SAME_OWNER;
			opts.flags &= ~KILN_EXTRACT_SAME_OWNER;
			break;
		case OPT_SAME_OWNER:
			opts.flags |= KILN_EXTRACT_SAME_OWNER;
			opts.flags &= ~KILN_EXTRACT_NO_SAME_OWNER;
			break;
		case OPT_NO_XATTRS: opts.flags |= KILN_EXTRACT_NO_XATTRS; break;
		case OPT_NO_TIMES: opts.flags |= KILN_EXTRACT_NO_TIMES; break;
		case 'q': ctx.quiet = true; break;
		case 'v': verbose = true; break;
		default:
			if (cli_image_option(&extract_spec, &devs, &verity, c,
					     arg))
				return 2;
			break;
		}
	}
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (cli_verity_check(&extract_spec, &verity))
		return 2;
	if (argc - optind < 2 || argc - optind > 3)
		return cli_usage_error(&extract_spec,
				       "expected IMAGE DEST [PATH]");
	ctx.image = argv[optind];
	dest = argv[optind + 1];
	if (argc - optind == 3)
		src = argv[optind + 2];

	cli_log_init(&lg, ctx.image, KILN_LOG_WARN);
	if (cli_open_image_verity(&img, ctx.image, &lg, &devs, &verity))
		return 1;
	opts.msg = on_msg;
	opts.ctx = &ctx;
	raise_fd_limit();
	on_interrupt_say_partial(dest);
	err = kiln_extract(img, src, dest, &opts, &stats);
	kiln_image_close(img);
	if (verbose) {
		char size[32];

		fprintf(stderr,
			"kiln: %s: extracted %llu directories, %llu files "
			"(%s), %llu symlinks, %llu special files, %llu "
			"hardlinks; %llu errors, %llu warnings\n", ctx.image,
			(unsigned long long)stats.directories,
			(unsigned long long)stats.regular_files,
			cli_human_size(stats.bytes, size, sizeof(size)),
			(unsigned long long)stats.symlinks,
			(unsigned long long)stats.special_files,
			(unsigned long long)stats.hardlinks,
			(unsigned long long)stats.errors,
			(unsigned long long)stats.warnings);
	}
	if (err && stats.errors > 1)
		cli_error(ctx.image, "%llu errors while extracting",
			  (unsigned long long)stats.errors);
	return err ? 1 : 0;
}
