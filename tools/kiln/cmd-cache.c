// SPDX-License-Identifier: MIT
/* kiln cache: the chunk cache of remote images (stat, clear, verify). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <kiln/remote.h>

#include "cli.h"

enum { OPT_CACHE_DIR = 256 };

static const struct cli_option cache_options[] = {
	{ "cache-dir", OPT_CACHE_DIR, "DIR", "the cache (default: "
	  "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln)" },
};

static const struct cli_spec cache_spec = {
	.cmd = "cache",
	.usage = "[--cache-dir DIR] stat|clear|verify",
	.summary = "Show the totals of the chunk cache of remote images (stat), "
		   "delete every chunk (clear), or check every chunk's "
		   "checksum and delete the bad ones (verify).",
	.opts = cache_options,
	.nr_opts = sizeof(cache_options) / sizeof(cache_options[0]),
};

static void print_bad(void *ctx, const char *path, const char *why)
{
	(void)ctx;
	printf("bad chunk: %s: %s (removed)\n", path, why);
}

static void print_stat(const struct kiln_cache_info *in)
{
	const struct kiln_cache_stats *t = &in->totals;
	char h[32];

	printf("chunks:         %" PRIu64 "\n", in->chunks);
	printf("bytes:          %" PRIu64 " (%s)\n", in->bytes,
	       cli_human_size(in->bytes, h, sizeof(h)));
	printf("bytes fetched:  %" PRIu64 "\n", t->bytes_fetched);
	printf("requests:       %" PRIu64 "\n", t->requests);
	printf("retries:        %" PRIu64 "\n", t->retries);
	printf("hits:           %" PRIu64 "\n", t->hits);
	printf("misses:         %" PRIu64 "\n", t->misses);
	printf("disk hits:      %" PRIu64 "\n", t->disk_hits);
	printf("bytes stored:   %" PRIu64 "\n", t->stored_bytes);
	printf("chunks evicted: %" PRIu64 "\n", t->evicted);
}

int cmd_cache(int argc, char **argv)
{
	const char *arg, *dir = NULL, *what;
	struct kiln_cache_info in;
	int c, err;

	while ((c = cli_getopt(argc, argv, &cache_spec, &arg)) >= 0)
		if (c == OPT_CACHE_DIR)
			dir = arg;
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (argc - optind != 1)
		return cli_usage_error(&cache_spec, "expected stat, clear or verify");
	what = argv[optind];
	if (!strcmp(what, "stat")) {
		err = kiln_cache_stat(dir, &in);
		if (!err)
			print_stat(&in);
	} else if (!strcmp(what, "clear")) {
		err = kiln_cache_clear(dir, &in);
		if (!err)
			printf("removed %" PRIu64 " chunks, %" PRIu64 " bytes\n",
			       in.chunks, in.bytes);
	} else if (!strcmp(what, "verify")) {
		err = kiln_cache_verify(dir, &in, print_bad, NULL);
		if (!err)
			printf("%" PRIu64 " chunks checked, %" PRIu64 " bad\n",
			       in.chunks, in.bad);
		if (!err && in.bad)
			return 1;
	} else {
		return cli_usage_error(&cache_spec, "unknown action '%s'", what);
	}
	if (err) {
		cli_error(dir ? dir : "cache", "%s", strerror(-err));
		return 1;
	}
	return 0;
}
