/* SPDX-License-Identifier: MIT */
/* What every kiln subcommand shares: the command table entry and helpers. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <kiln/image.h>

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
int cmd_cache(int argc, char **argv);

/*
 * Options of one subcommand, as a table. @key is the short option letter,
 * or a value >= 256 for a long-only option; @arg names the argument in
 * --help (NULL: the option takes none). -h/--help and -V/--version are
 * always added; at most 64 options per command.
 */
struct cli_option {
	const char *name;
	int key;
	const char *arg;
	const char *help;
};

struct cli_spec {
	const char *cmd;		/* "ls" */
	const char *usage;		/* "[-l] IMAGE [PATH]" */
	const char *summary;		/* one line */
	const struct cli_option *opts;
	size_t nr_opts;
};

enum {
	CLI_OPT_END = -1,		/* options done: optind is the first operand */
	CLI_OPT_HELP = -2,		/* --help was printed: exit 0 */
	CLI_OPT_ERROR = -3,		/* a usage error was printed: exit 2 */
	CLI_OPT_VERSION = -4,		/* --version was printed: exit 0 */
};

/* Next option (its key), or a CLI_OPT_* value; *@arg gets its argument. */
int cli_getopt(int argc, char **argv, const struct cli_spec *spec,
	       const char **arg);
/* "kiln 0.1.0" on stdout: what --version prints, for every command. */
void cli_version(void);
/* Exit status for a CLI_OPT_HELP / _VERSION / _ERROR result. */
int cli_opt_exit(int rc);
void cli_usage(FILE *f, const struct cli_spec *spec);
/* "kiln CMD: <message>" and a usage line on stderr; returns 2. */
int cli_usage_error(const struct cli_spec *spec, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Log sink for an image: prints "kiln: <image>: <message>" to stderr for
 * messages up to @max_level, and keeps the last error-level message.
 */
struct cli_log {
	const char *image;
	enum kiln_log_level max_level;
	bool quiet_errors;		/* keep errors in @last, do not print */
	bool have_last;
	char last[1024];
};

void cli_log_init(struct cli_log *lg, const char *image,
		  enum kiln_log_level max_level);
void cli_log_fn(void *ctx, enum kiln_log_level level, const char *msg);

/* "kiln: <image>: <message>\n" on stderr (control bytes escaped). */
void cli_error(const char *image, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * --device PATH, repeatable, for every command that reads an image: its
 * extra devices, in the order of the image's device table.
 */
#define CLI_MAX_DEVICES 64
enum { CLI_OPT_DEVICE = 0x1000 };
#define CLI_DEVICE_OPTION \
	{ "device", CLI_OPT_DEVICE, "PATH", "an extra device of the image " \
	  "(a blob, or the tar of a --tar-index image); repeat for each, " \
	  "in device-table order" }

/*
 * Options for an image given as an http://, https:// or s3:// URL (every
 * command that reads an image takes them; a local image ignores them).
 */
#define CLI_MAX_MIRRORS 16
enum {
	CLI_OPT_INSECURE = 0x1200,	/* long-only keys, clear of the rest */
	CLI_OPT_CA_FILE,
	CLI_OPT_MIRROR,
	CLI_OPT_CACHE_DIR,
	CLI_OPT_CONNECT_TIMEOUT,
	CLI_OPT_STALL_TIMEOUT,
	CLI_OPT_TIMEOUT,
	CLI_OPT_RETRIES,
	CLI_OPT_FETCH_SIZE,
	CLI_OPT_CACHE_SIZE,
	CLI_OPT_NO_CACHE,
	CLI_OPT_OFFLINE,
	CLI_OPT_PREFETCH,
	CLI_OPT_PREFETCH_RATE,
	CLI_OPT_S3_ENDPOINT,
	CLI_OPT_S3_REGION,
	CLI_OPT_S3_PATH_STYLE,
	CLI_OPT_REMOTE_LAST = CLI_OPT_S3_PATH_STYLE,
};

#define CLI_REMOTE_OPTIONS \
	{ "insecure", CLI_OPT_INSECURE, NULL, "URL: do not verify the " \
	  "server's TLS certificate" }, \
	{ "ca-file", CLI_OPT_CA_FILE, "FILE", "URL: trust the CAs in this " \
	  "PEM file (default: the system's)" }, \
	{ "mirror", CLI_OPT_MIRROR, "URL", "URL: another copy of the image, " \
	  "tried when a request fails; repeatable" }, \
	{ "cache-dir", CLI_OPT_CACHE_DIR, "DIR", "URL: the chunk cache, " \
	  "shared by every kiln (default: $XDG_CACHE_HOME/kiln, else " \
	  "~/.cache/kiln)" }, \
	{ "connect-timeout", CLI_OPT_CONNECT_TIMEOUT, "SEC", "URL: limit " \
	  "of one connection attempt (default 10)" }, \
	{ "stall-timeout", CLI_OPT_STALL_TIMEOUT, "SEC", "URL: a request " \
	  "that receives nothing this long fails (default 10)" }, \
	{ "timeout", CLI_OPT_TIMEOUT, "SEC", "URL: a read not served " \
	  "within this time, retries included, fails with EIO " \
	  "(default 120)" }, \
	{ "retries", CLI_OPT_RETRIES, "N", "URL: retries of a failed " \
	  "request (default 4)" }, \
	{ "fetch-size", CLI_OPT_FETCH_SIZE, "BYTES", "URL: bytes per " \
	  "fetch unit, a power of two in 512 KiB..8 MiB (default 512 KiB)" }, \
	{ "cache-size", CLI_OPT_CACHE_SIZE, "SIZE", "URL: cap of the cache " \
	  "directory, least recently used chunks evicted (default 4G)" }, \
	{ "no-cache", CLI_OPT_NO_CACHE, NULL, "URL: keep nothing on disk" }, \
	{ "offline", CLI_OPT_OFFLINE, NULL, "URL: no network; serve what " \
	  "the cache holds, EIO for the rest" }, \
	{ "prefetch", CLI_OPT_PREFETCH, "all", "URL: fetch the whole image " \
	  "in the background, metadata first, yielding to reads" }, \
	{ "prefetch-rate", CLI_OPT_PREFETCH_RATE, "SIZE", "URL: bytes a " \
	  "second the prefetch may take (default 16M)" }, \
	{ "s3-endpoint", CLI_OPT_S3_ENDPOINT, "URL", "s3://: an " \
	  "S3-compatible server, http(s)://HOST[:PORT] (default: AWS)" }, \
	{ "s3-region", CLI_OPT_S3_REGION, "REGION", "s3://: the region " \
	  "requests are signed for (default: $AWS_REGION, " \
	  "$AWS_DEFAULT_REGION, else us-east-1)" }, \
	{ "s3-path-style", CLI_OPT_S3_PATH_STYLE, NULL, "s3://: " \
	  "ENDPOINT/BUCKET/KEY, not BUCKET.ENDPOINT/KEY" }

struct cli_remote {
	struct kiln_remote_opts opts;
	const char *mirrors[CLI_MAX_MIRRORS];
};

/* Where an image's bytes come from: its extra devices, how to fetch it. */
struct cli_devices {
	const char *paths[CLI_MAX_DEVICES];
	unsigned int count;
	struct cli_remote remote;
};

/* Whether @key is one of CLI_REMOTE_OPTIONS. */
static inline bool cli_is_remote_option(int key)
{
	return key >= CLI_OPT_INSECURE && key <= CLI_OPT_REMOTE_LAST;
}

/* Apply remote option @key with @arg: 0, or a usage error (returns 2). */
int cli_remote_option(const struct cli_spec *spec, struct cli_devices *devs,
		      int key, const char *arg);

/* The remote options of @devs (NULL: none given), for kiln_image_opts. */
const struct kiln_remote_opts *cli_remote_opts(const struct cli_devices *devs);

/* Add @arg to @devs: 0, or a usage error printed (returns 2). */
int cli_add_device(const struct cli_spec *spec, struct cli_devices *devs,
		   const char *arg);

/*
 * Open @path (with the extra devices @devs, may be NULL) logging to @lg;
 * prints the reason and returns it on failure.
 */
int cli_open_image(struct kiln_image **img, const char *path,
		   struct cli_log *lg, const struct cli_devices *devs);

/* --verity ROOT_HASH, --verity-salt HEX, --verity-hash-offset BYTES. */
struct cli_verity {
	bool on;
	uint8_t root[KILN_VERITY_DIGEST_SIZE];
	bool has_salt;
	uint8_t salt[KILN_VERITY_SALT_MAX];
	size_t salt_len;
	uint64_t hash_offset;		/* 0: after the image's blocks */
};

enum {
	CLI_OPT_VERITY = 0x1100,	/* long-only keys, clear of the commands' own */
	CLI_OPT_VERITY_SALT,
	CLI_OPT_VERITY_HASH_OFFSET,
};

/* The three options' rows, for a command's option table. */
#define CLI_VERITY_OPTIONS \
	{ "verity", CLI_OPT_VERITY, "ROOT_HASH", "check every block against " \
	  "this dm-verity root hash (hex) before using it" }, \
	{ "verity-salt", CLI_OPT_VERITY_SALT, "HEX", "the tree's salt " \
	  "(default: from its superblock)" }, \
	{ "verity-hash-offset", CLI_OPT_VERITY_HASH_OFFSET, "BYTES", \
	  "where the tree's superblock is (default: after the image's " \
	  "blocks)" }

/*
 * Apply option @key (one of CLI_OPT_VERITY*) with @arg to @v: 0, or the
 * exit status of a usage error (printed).
 */
int cli_verity_option(const struct cli_spec *spec, struct cli_verity *v,
		      int key, const char *arg);

/* As cli_open_image(), through the tree @v describes (NULL: none). */
int cli_open_image_verity(struct kiln_image **img, const char *path,
			  struct cli_log *lg, const struct cli_devices *devs,
			  const struct cli_verity *v);

/* Point @o's verity fields at @v's (when @v->on). */
void cli_verity_apply(const struct cli_verity *v, struct kiln_image_opts *o);

/* "4G", "512M", "100k", "123" (bytes) into *@v: 0, or -EINVAL. */
int cli_parse_size(const char *arg, uint64_t *v);

/*
 * After the options: 0, or the exit status of a usage error (printed)
 * when --verity-salt or --verity-hash-offset came without --verity.
 */
int cli_verity_check(const struct cli_spec *spec, const struct cli_verity *v);

/*
 * Apply @key with @arg when it is --device, one of the verity options or
 * one of CLI_REMOTE_OPTIONS, into @devs or @v: 0 (also for any other
 * key), or the exit status of a usage error (printed).
 */
int cli_image_option(const struct cli_spec *spec, struct cli_devices *devs,
		     struct cli_verity *v, int key, const char *arg);

/* "512 B", "1.5 KiB", "3.0 GiB" into @buf. Returns @buf. */
const char *cli_human_size(uint64_t bytes, char *buf, size_t cap);

/* Copy @s into @buf with control bytes and backslashes escaped (\ooo). */
const char *cli_escape(const char *s, char *buf, size_t cap);

/* cli_escape() of all of @s into a string to free(); NULL: out of memory. */
char *cli_escape_dup(const char *s);

/*
 * Copy @src into @dst; when longer than @cap, keep its start and its end
 * around "...", since the reason for an error comes last.
 */
void cli_copy_cut(char *dst, size_t cap, const char *src);

#endif
