// SPDX-License-Identifier: MIT
/* kiln fsck: check every structure and byte of an image. */
#include <string.h>

#include <kiln/fsck.h>
#include <kiln/image.h>

#include "cli.h"
#include "interrupt.h"

enum {
	OPT_NO_DATA = 256,
};

static const struct cli_option fsck_options[] = {
	{ "quiet", 'q', NULL, "no summary line" },
	{ "verbose", 'v', NULL, "print every problem, not just the first" },
	{ "no-data", OPT_NO_DATA, NULL, "check metadata only, do not read "
					"file data" },
	CLI_VERITY_OPTIONS,
	CLI_DEVICE_OPTION,
	CLI_REMOTE_OPTIONS,
};

static const struct cli_spec fsck_spec = {
	.cmd = "fsck",
	.usage = "[-q] [-v] [--no-data] [--device PATH]... [--verity ROOT_HASH] IMAGE",
	.summary = "Check IMAGE: every inode reachable from the root, "
		   "directories, link counts, xattrs and every byte of data.\n"
		   "A clean result proves the structure: the superblock (and "
		   "its checksum), every\ninode, directory and xattr decodes "
		   "and agrees with the rest, and every extent\nreads back "
		   "(compressed ones decompress to their exact length). It "
		   "cannot prove\nthe data: EROFS stores no checksum of file "
		   "data, so a changed byte in a file's\nstored or raw blocks "
		   "still passes.\n"
		   "With --verity (an image built with kiln build --verity, or "
		   "any dm-verity tree),\nevery data block and tree block is "
		   "also checked against the root hash: that\nproves the data, "
		   "and the files on bad blocks are named.\n"
		   "Data on an extra device (--blobdev, --tar-index images) "
		   "is read from the\n--device given for it; without it, "
		   "fsck says which device is needed and\nexits 1.\n"
		   "Exit status: 0 sound; 1 corrupt (an EROFS image that fails a "
		   "check, or uses\na feature kiln lacks); 2 usage or I/O "
		   "error, or IMAGE is no EROFS image at all\n(empty, shorter "
		   "than a superblock, no EROFS magic, a directory).",
	.opts = fsck_options,
	.nr_opts = sizeof(fsck_options) / sizeof(fsck_options[0]),
};

struct fsck_cli {
	const char *image;
	struct cli_log *lg;
	bool verbose;
	uint64_t printed;
	uint64_t need_device;		/* problems: an extra device missing */
};

static int on_problem(void *ctx, const struct kiln_fsck_problem *p)
{
	struct fsck_cli *c = ctx;
	const char *detail = NULL;

	if ((p->err == -KILN_ECORRUPT || p->err == -ENODEV) &&
	    c->lg->have_last)
		detail = c->lg->last;	/* the reader said what is wrong */
	else if (p->err)
		detail = kiln_strerror(p->err);
	if (c->verbose || c->printed == 0)
		cli_error(c->image, "fsck: %s (nid %llu): %s%s%s", p->path,
			  (unsigned long long)p->nid, p->what,
			  detail ? ": " : "", detail ? detail : "");
	c->printed++;
	if (p->err == -ENODEV)
		c->need_device++;
	c->lg->have_last = false;
	return 0;
}

int cmd_fsck(int argc, char **argv)
{
	struct kiln_fsck_opts opts = { .struct_size = sizeof(opts) };
	struct kiln_fsck_report rep;
	struct fsck_cli ctx = { 0 };
	struct cli_verity verity = { 0 };
	struct cli_devices devs = { .count = 0 };
	struct kiln_image *img;
	struct cli_log lg;
	const char *arg;
	bool quiet = false;
	int c, err;

	while ((c = cli_getopt(argc, argv, &fsck_spec, &arg)) >= 0) {
		switch (c) {
		case 'q': quiet = true; break;
		case 'v': ctx.verbose = true; break;
		case OPT_NO_DATA: opts.flags |= KILN_FSCK_METADATA_ONLY; break;
		default:
			if (cli_image_option(&fsck_spec, &devs, &verity, c, arg))
				return 2;
			break;
		}
	}
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (argc - optind != 1)
		return cli_usage_error(&fsck_spec, "expected IMAGE");
	ctx.image = argv[optind];
	ctx.lg = &lg;

	cli_log_init(&lg, ctx.image, ctx.verbose ? KILN_LOG_INFO :
						   KILN_LOG_WARN);
	if (cli_verity_check(&fsck_spec, &verity))
		return 2;
	err = cli_open_image_verity(&img, ctx.image, &lg, &devs, &verity);
	/*
	 * A bad superblock is corruption; a file that is no EROFS image at
	 * all (or a directory, or a missing file) is a usage error.
	 */
	if (err)
		return err == -KILN_ECORRUPT || err == -EOPNOTSUPP ? 1 : 2;
	/* reader errors are shown as the detail of the problem they cause */
	lg.quiet_errors = true;
	opts.problem = on_problem;
	opts.ctx = &ctx;
	cli_interrupt_install("fsck", NULL, NULL);
	err = kiln_fsck(img, &opts, &rep);
	kiln_image_close(img);
	if (err && err != -KILN_ECORRUPT) {
		cli_error(ctx.image, "fsck: cannot go on: %s",
			  kiln_strerror(err));
		return 2;
	}
	if (err) {
		cli_error(ctx.image, "fsck: %llu problem%s found",
			  (unsigned long long)rep.problems,
			  rep.problems == 1 ? "" : "s");
		if (ctx.need_device)
			cli_error(ctx.image, "fsck: %llu of them need%s an extra "
				  "device that was not given: pass each with "
				  "--device, in device-table order (kiln info "
				  "lists them)",
				  (unsigned long long)ctx.need_device,
				  ctx.need_device == 1 ? "s" : "");
		return 1;
	}
	if (!quiet) {
		char hs[32];

		printf("kiln: %s: clean: %llu directories, %llu files, "
		       "%llu symlinks, %llu special, %llu hardlinks, "
		       "%llu xattrs, %s read in %.2f s\n", ctx.image,
		       (unsigned long long)rep.directories,
		       (unsigned long long)rep.regular_files,
		       (unsigned long long)rep.symlinks,
		       (unsigned long long)(rep.char_devices +
					    rep.block_devices + rep.fifos +
					    rep.sockets),
		       (unsigned long long)rep.extra_links,
		       (unsigned long long)rep.xattrs,
		       cli_human_size(rep.bytes_read, hs, sizeof(hs)),
		       rep.seconds);
		if (verity.on)
			printf("kiln: %s: dm-verity: all %llu blocks (data and "
			       "tree) match the root hash\n", ctx.image,
			       (unsigned long long)rep.verity_blocks);
	}
	return 0;
}
