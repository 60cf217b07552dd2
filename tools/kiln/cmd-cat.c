// SPDX-License-Identifier: MIT
/* kiln cat: write files of an image to standard output. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/image.h>

#include "cli.h"

#define CAT_CHUNK (1u << 20)

static const struct cli_option cat_options[] = {
	CLI_VERITY_OPTIONS,
	CLI_DEVICE_OPTION,
	CLI_REMOTE_OPTIONS,
};

static const struct cli_spec cat_spec = {
	.cmd = "cat",
	.usage = "[--device PATH]... [--verity ROOT_HASH] IMAGE PATH...",
	.summary = "Write the bytes of each file PATH of IMAGE to standard "
		   "output (symlinks are followed inside the image).\n"
		   "With --verity, every block is checked against the "
		   "dm-verity root hash before\nuse: a file on a bad block "
		   "is an error naming it (after the bytes before\nthat "
		   "block), and the exit status is 1.",
	.opts = cat_options,
	.nr_opts = sizeof(cat_options) / sizeof(cat_options[0]),
};

/* Write all of @buf to stdout: 0, or -errno (-EPIPE: reader went away). */
static int write_all(const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(STDOUT_FILENO, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Returns 0, 1 (error reported) or -EPIPE. */
static int cat_one(struct kiln_image *img, const char *image,
		   const char *path, char *buf)
{
	struct kiln_file *file;
	struct kiln_stat st;
	kiln_nid_t nid;
	uint64_t off = 0;
	int err;

	err = kiln_resolve(img, path, KILN_RESOLVE_FOLLOW, &nid);
	if (!err)
		err = kiln_stat_nid(img, nid, &st);
	if (err) {
		cli_error(image, "%s: %s", path, kiln_strerror(err));
		return 1;
	}
	if (S_ISDIR(st.mode)) {
		cli_error(image, "%s: is a directory", path);
		return 1;
	}
	if (!S_ISREG(st.mode)) {
		cli_error(image, "%s: not a regular file", path);
		return 1;
	}
	err = kiln_file_open(img, nid, &file);
	if (err) {
		cli_error(image, "%s: %s", path, kiln_strerror(err));
		return 1;
	}
	for (;;) {
		ssize_t n = kiln_file_pread(file, buf, CAT_CHUNK, off);

		if (n < 0) {
			cli_error(image, "%s: reading at offset %llu: %s", path,
				  (unsigned long long)off,
				  kiln_strerror((int)n));
			err = 1;
			break;
		}
		if (n == 0)
			break;
		err = write_all(buf, (size_t)n);
		if (err) {
			if (err != -EPIPE)
				cli_error(image, "%s: writing: %s", path,
					  kiln_strerror(err));
			err = err == -EPIPE ? -EPIPE : 1;
			break;
		}
		off += (uint64_t)n;
	}
	if (!err && off != st.size) {
		cli_error(image, "%s: %llu of %llu bytes read", path,
			  (unsigned long long)off,
			  (unsigned long long)st.size);
		err = 1;
	}
	kiln_file_close(file);
	return err;
}

int cmd_cat(int argc, char **argv)
{
	struct cli_devices devs = { .count = 0 };
	struct cli_verity verity = { 0 };
	struct kiln_image *img;
	struct cli_log lg;
	const char *arg, *image;
	int c, status = 0;
	char *buf;

	while ((c = cli_getopt(argc, argv, &cat_spec, &arg)) >= 0)
		if (cli_image_option(&cat_spec, &devs, &verity, c, arg))
			return 2;
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (cli_verity_check(&cat_spec, &verity))
		return 2;
	if (argc - optind < 2)
		return cli_usage_error(&cat_spec, "expected IMAGE PATH...");
	image = argv[optind];
	/* a closed pipe ends the output quietly, as with cat(1) | head */
	signal(SIGPIPE, SIG_IGN);
	buf = malloc(CAT_CHUNK);
	if (!buf) {
		cli_error(image, "out of memory");
		return 1;
	}
	cli_log_init(&lg, image, KILN_LOG_WARN);
	if (cli_open_image_verity(&img, image, &lg, &devs, &verity)) {
		free(buf);
		return 1;
	}
	for (int i = optind + 1; i < argc; i++) {
		int rc = cat_one(img, image, argv[i], buf);

		if (rc == -EPIPE)
			break;
		if (rc)
			status = 1;
	}
	kiln_image_close(img);
	free(buf);
	return status;
}
