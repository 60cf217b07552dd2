// SPDX-License-Identifier: MIT
/* kiln build: bake a directory tree into an EROFS image. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <kiln/builder.h>
#include <kiln/kernel.h>

#include "cli.h"
#include "interrupt.h"
#include "progress.h"
#include "util/grow.h"

struct build_cli {
	struct kiln_build_opts opts;
	const char **excludes;
	size_t nr_excludes, excludes_cap;
	char **owned;			/* lines read by --exclude-from */
	size_t nr_owned, owned_cap;
	int verbosity;			/* -1 quiet, 0 normal, 1 verbose */
	bool mtime_given;
	/* --tar FILE ("-": stdin), --tar-index FILE, --oci DIR, or NULL */
	const char *tar;
	struct cli_progress progress;	/* status line on a terminal */
	uint8_t verity_salt[KILN_VERITY_SALT_MAX];
	const char *root_hash_file;	/* --verity-root-hash-file */
};

static const struct cli_spec build_spec;

enum {
	OPT_ALL_ROOT = 256,
	OPT_FORCE_UID,
	OPT_FORCE_GID,
	OPT_UID_OFFSET,
	OPT_GID_OFFSET,
	OPT_WHITEOUTS,
	OPT_EXCLUDE_FROM,
	OPT_NO_XATTRS,
	OPT_LAYOUT,
	OPT_ZTAILPACKING,
	OPT_NO_ZTAILPACKING,
	OPT_KERNEL,
	OPT_FRAGMENTS,
	OPT_NO_FRAGMENTS,
	OPT_DEDUPE,
	OPT_NO_DEDUPE,
	OPT_METABOX,
	OPT_DEDUPE_SHIFTED,
	OPT_NO_DEDUPE_SHIFTED,
	OPT_RAW_MARGIN,
	OPT_COMPRESS_HINTS,
	OPT_MEMORY_LIMIT,
	OPT_PACKED_SEGMENT,
	OPT_PACKED_ORDER,
	OPT_PACKED_PCLUSTER,
	OPT_TAR,
	OPT_TAR_INDEX,
	OPT_OCI,
	OPT_OCI_LAYER,
	OPT_VERIFY,
	OPT_FILE_CONTEXTS,
	OPT_MOUNT_POINT,
	OPT_VERITY,
	OPT_VERITY_SALT,
	OPT_VERITY_ROOT_FILE,
};

/* A decimal number in [@min, @max]. */
static int parse_u64(const char *opt, const char *s, uint64_t min,
		     uint64_t max, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || *v < min || *v > max)
		return cli_usage_error(&build_spec,
				       "%s: '%s' is not a number in %" PRIu64
				       "..%" PRIu64, opt, s, min, max);
	return 0;
}

static int parse_i64(const char *opt, const char *s, int64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	if (!*s || *end || errno)
		return cli_usage_error(&build_spec,
				       "%s: '%s' is not a number of seconds",
				       opt, s);
	return 0;
}

static int set_block_size(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--block-size", arg, 512, 4096, &v))
		return 2;
	if (v & (v - 1))
		return cli_usage_error(&build_spec,
				       "--block-size: %s is not a power of two",
				       arg);
	c->opts.blkszbits = (unsigned int)__builtin_ctzll(v);
	return 0;
}

static int set_label(struct build_cli *c, const char *arg)
{
	if (strlen(arg) > 15)
		return cli_usage_error(&build_spec,
				       "--label: at most 15 bytes");
	c->opts.volume_label = arg;
	return 0;
}

static int set_all_root(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->opts.flags |= KILN_BUILD_ALL_ROOT;
	return 0;
}

static int set_force_uid(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--force-uid", arg, 0, UINT32_MAX, &v))
		return 2;
	c->opts.force_uid = (uint32_t)v;
	c->opts.flags |= KILN_BUILD_FORCE_UID;
	return 0;
}

static int set_force_gid(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--force-gid", arg, 0, UINT32_MAX, &v))
		return 2;
	c->opts.force_gid = (uint32_t)v;
	c->opts.flags |= KILN_BUILD_FORCE_GID;
	return 0;
}

static int set_uid_offset(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--uid-offset", arg, 0, UINT32_MAX, &v))
		return 2;
	c->opts.uid_offset = (uint32_t)v;
	return 0;
}

static int set_gid_offset(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--gid-offset", arg, 0, UINT32_MAX, &v))
		return 2;
	c->opts.gid_offset = (uint32_t)v;
	return 0;
}

static int set_whiteouts(struct build_cli *c, const char *arg)
{
	if (!strcmp(arg, "overlay"))
		c->opts.whiteouts = KILN_WHITEOUTS_OVERLAY;
	else if (!strcmp(arg, "keep"))
		c->opts.whiteouts = KILN_WHITEOUTS_KEEP;
	else if (!strcmp(arg, "strip"))
		c->opts.whiteouts = KILN_WHITEOUTS_STRIP;
	else
		return cli_usage_error(&build_spec, "--whiteouts: '%s' is not "
				       "overlay, keep or strip", arg);
	return 0;
}

static int set_mtime(struct build_cli *c, const char *arg)
{
	if (parse_i64("--mtime", arg, &c->opts.fixed_mtime))
		return 2;
	c->opts.flags |= KILN_BUILD_FIXED_MTIME;
	c->mtime_given = true;
	return 0;
}

static int add_exclude(struct build_cli *c, const char *arg)
{
	if (KILN_GROW(c->excludes, c->excludes_cap, c->nr_excludes + 1))
		return cli_usage_error(&build_spec, "out of memory");
	c->excludes[c->nr_excludes++] = arg;
	return 0;
}

/* One pattern per line; empty lines and lines starting with '#' skipped. */
static int add_exclude_from(struct build_cli *c, const char *arg)
{
	FILE *f = strcmp(arg, "-") ? fopen(arg, "r") : stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "kiln: %s: %s\n", arg, strerror(errno));
		return 1;
	}
	while (!rc && (len = getline(&line, &cap, f)) >= 0) {
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (!len || line[0] == '#')
			continue;
		if (KILN_GROW(c->owned, c->owned_cap, c->nr_owned + 1) ||
		    !(c->owned[c->nr_owned] = strdup(line))) {
			rc = cli_usage_error(&build_spec, "out of memory");
			break;
		}
		rc = add_exclude(c, c->owned[c->nr_owned++]);
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return rc;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int set_uuid(struct build_cli *c, const char *arg)
{
	size_t n = 0;

	if (!strcmp(arg, "random")) {
		c->opts.flags |= KILN_BUILD_RANDOM_UUID;
		c->opts.flags &= ~(unsigned int)KILN_BUILD_UUID;
		return 0;
	}
	for (const char *p = arg; *p; p++) {
		int hi, lo;

		if (*p == '-')
			continue;
		hi = hexval(p[0]);
		lo = hi < 0 ? -1 : hexval(p[1]);
		if (lo < 0 || n == 16)
			goto bad;
		c->opts.uuid[n++] = (uint8_t)(hi << 4 | lo);
		p++;
	}
	if (n != 16)
		goto bad;
	c->opts.flags |= KILN_BUILD_UUID;
	c->opts.flags &= ~(unsigned int)KILN_BUILD_RANDOM_UUID;
	return 0;
bad:
	return cli_usage_error(&build_spec,
			       "--uuid: '%s' is not a UUID or 'random'", arg);
}

static int set_tar(struct build_cli *c, const char *arg)
{
	c->tar = arg;
	c->opts.source_kind = KILN_SOURCE_TAR;
	return 0;
}

static int set_tar_index(struct build_cli *c, const char *arg)
{
	c->tar = arg;
	c->opts.source_kind = KILN_SOURCE_TAR_INDEX;
	return 0;
}

static int set_oci(struct build_cli *c, const char *arg)
{
	c->tar = arg;
	c->opts.source_kind = KILN_SOURCE_OCI;
	return 0;
}

static int set_oci_layer(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--oci-layer", arg, 1, UINT32_MAX, &v))
		return 2;
	c->opts.oci_layer = (unsigned int)v;
	return 0;
}

static int set_verify(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->opts.flags |= KILN_BUILD_VERIFY;
	return 0;
}

static int set_verity(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->opts.flags |= KILN_BUILD_VERITY;
	return 0;
}

static int set_verity_salt(struct build_cli *c, const char *arg)
{
	ssize_t n = kiln_hex_decode(arg, c->verity_salt,
				    sizeof(c->verity_salt));

	if (n < 0)
		return cli_usage_error(&build_spec, "--verity-salt: '%s' is "
				       "not %s", arg, n == -ERANGE ?
				       "at most 256 bytes" : "hex digits");
	c->opts.verity_salt = c->verity_salt;
	c->opts.verity_salt_len = (size_t)n;
	return 0;
}

static int set_verity_root_file(struct build_cli *c, const char *arg)
{
	c->root_hash_file = arg;
	return 0;
}

static int set_file_contexts(struct build_cli *c, const char *arg)
{
	c->opts.file_contexts = arg;
	return 0;
}

static int set_mount_point(struct build_cli *c, const char *arg)
{
	if (!*arg)
		return cli_usage_error(&build_spec,
				       "--mount-point: empty path");
	c->opts.mount_point = arg;
	return 0;
}

static int set_no_xattrs(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->opts.flags |= KILN_BUILD_NO_XATTRS;
	return 0;
}

static int set_threads(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--threads", arg, 0, 1024, &v))
		return 2;
	c->opts.threads = (unsigned int)v;
	return 0;
}

/* BYTES with an optional K, M or G suffix (powers of 1024), not 0. */
static int parse_bytes(const char *arg, uint64_t *out)
{
	static const char suffixes[] = "KMG";
	const char *sfx;
	uint64_t v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (!*arg || *arg == '-' || errno || end == arg)
		return -1;
	if (*end) {
		sfx = strchr(suffixes, end[0] & ~0x20);
		if (!end[0] || !sfx || end[1])
			return -1;
		for (const char *s = suffixes; s <= sfx; s++) {
			if (v > UINT64_MAX / 1024)
				return -1;
			v *= 1024;
		}
	}
	if (!v)
		return -1;
	*out = v;
	return 0;
}

static int set_memory_limit(struct build_cli *c, const char *arg)
{
	if (parse_bytes(arg, &c->opts.memory_limit))
		return cli_usage_error(&build_spec, "--memory-limit: '%s' is "
				       "not a positive number of bytes (suffix "
				       "K, M or G)", arg);
	return 0;
}

static int set_packed_segment(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_bytes(arg, &v) || v % (1u << 20) || v > (1ull << 30))
		return cli_usage_error(&build_spec, "--packed-segment: '%s' is "
				       "not a multiple of 1M up to 1G", arg);
	c->opts.packed_segment_size = v;
	return 0;
}

static int set_packed_order(struct build_cli *c, const char *arg)
{
	if (!strcmp(arg, "similar"))
		c->opts.packed_order = KILN_PACKED_ORDER_SIMILAR;
	else if (!strcmp(arg, "path"))
		c->opts.packed_order = KILN_PACKED_ORDER_PATH;
	else
		return cli_usage_error(&build_spec, "--packed-order: '%s' is "
				       "not similar or path", arg);
	return 0;
}

static int set_quiet(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->verbosity = -1;
	return 0;
}

static int set_verbose(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->verbosity = 1;
	return 0;
}

static int set_compress(struct build_cli *c, const char *arg)
{
	char err[512];

	if (kiln_compress_parse(arg, &c->opts.compress, err, sizeof(err)))
		return cli_usage_error(&build_spec, "--compress: %s", err);
	return 0;
}

static int set_pcluster_size(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--pcluster-size", arg, 512, 1024 * 1024, &v))
		return 2;
	c->opts.pcluster_size = (uint32_t)v;
	return 0;
}

static int set_layout(struct build_cli *c, const char *arg)
{
	if (!strcmp(arg, "auto"))
		c->opts.compress_layout = KILN_COMPRESS_LAYOUT_AUTO;
	else if (!strcmp(arg, "classic"))
		c->opts.compress_layout = KILN_COMPRESS_LAYOUT_CLASSIC;
	else if (!strcmp(arg, "extents"))
		c->opts.compress_layout = KILN_COMPRESS_LAYOUT_EXTENTS;
	else
		return cli_usage_error(&build_spec,
				       "--layout: '%s' is not auto, classic "
				       "or extents", arg);
	return 0;
}

/* A saver on (@on) or off; the last of --X and --no-X wins. */
static void set_saver(struct build_cli *c, unsigned int flag, bool on)
{
	if (on) {
		c->opts.compress_flags |= flag;
		c->opts.compress_off &= ~flag;
	} else {
		c->opts.compress_off |= flag;
		c->opts.compress_flags &= ~flag;
	}
}

static int set_ztailpacking(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_ZTAILPACKING, true);
	return 0;
}

static int set_no_ztailpacking(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_ZTAILPACKING, false);
	return 0;
}

static int set_fragments(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_FRAGMENTS, true);
	return 0;
}

static int set_no_fragments(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_FRAGMENTS, false);
	return 0;
}

static int set_dedupe(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_DEDUPE, true);
	return 0;
}

static int set_kernel(struct build_cli *c, const char *arg)
{
	int err = kiln_kernel_parse(arg, &c->opts.kernel);

	if (err == -ERANGE)
		return cli_usage_error(&build_spec, "--kernel: '%s': EROFS "
				       "needs Linux 5.4 or newer", arg);
	if (err)
		return cli_usage_error(&build_spec, "--kernel: '%s' is not a "
				       "Linux release (5.15, 6.1 ... or "
				       "latest)", arg);
	return 0;
}

static int set_dedupe_shifted(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_DEDUPE_SHIFTED, true);
	return 0;
}

static int set_no_dedupe_shifted(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_DEDUPE_SHIFTED, false);
	return 0;
}

static int set_metabox(struct build_cli *c, const char *arg)
{
	(void)arg;
	c->opts.compress_flags |= KILN_COMPRESS_METABOX;
	return 0;
}

static int set_no_dedupe(struct build_cli *c, const char *arg)
{
	(void)arg;
	set_saver(c, KILN_COMPRESS_DEDUPE, false);
	return 0;
}

static int set_compress_hints(struct build_cli *c, const char *arg)
{
	c->opts.compress_hints = arg;
	return 0;
}

static int set_raw_margin(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--raw-margin", arg, 1, 1024 * 1024, &v))
		return 2;
	c->opts.raw_margin = (uint32_t)v;
	return 0;
}

static int set_packed_pcluster(struct build_cli *c, const char *arg)
{
	uint64_t v;

	if (parse_u64("--packed-pcluster-size", arg, 1, 1024 * 1024, &v))
		return 2;
	c->opts.packed_pcluster_size = (uint32_t)v;
	return 0;
}

/* One row per option: its spelling and help, and what it sets. */
static const struct build_option {
	struct cli_option opt;
	int (*apply)(struct build_cli *c, const char *arg);
} build_options[] = {
	{ { "block-size", 'b', "N", "block size in bytes, 512..4096 "
				    "(default 4096)" }, set_block_size },
	{ { "label", 'L', "LABEL", "volume label, at most 15 bytes" },
	  set_label },
	{ { "all-root", OPT_ALL_ROOT, NULL, "make every file owned by 0:0" },
	  set_all_root },
	{ { "force-uid", OPT_FORCE_UID, "UID", "make every file owned by UID" },
	  set_force_uid },
	{ { "force-gid", OPT_FORCE_GID, "GID", "make every file's group GID" },
	  set_force_gid },
	{ { "uid-offset", OPT_UID_OFFSET, "N", "add N to every file's owner, "
			"after --all-root and --force-uid (an owner past "
			"4294967295 is an error)" }, set_uid_offset },
	{ { "gid-offset", OPT_GID_OFFSET, "N", "add N to every file's group, "
			"after --all-root and --force-gid" }, set_gid_offset },
	{ { "whiteouts", OPT_WHITEOUTS, "MODE", "OCI/aufs whiteouts (.wh.NAME, "
			".wh..wh..opq): overlay (overlayfs whiteouts and opaque "
			"directories; the default for --tar), keep (plain "
			"files; the default for a directory) or strip (drop "
			"them, and 0:0 character devices: a flattened "
			"image)" }, set_whiteouts },
	{ { "mtime", 'T', "SECONDS", "give every file this mtime (seconds "
				     "since the epoch)" }, set_mtime },
	{ { "exclude", 'x', "PATTERN", "skip paths or names matching this "
			"glob (repeatable): '/usr/lib/*.a' (a leading '/') "
			"matches the whole path from the source root, '*' not "
			"crossing '/'; '*.o' or "
			"'cache' matches any file's name or its path from the "
			"root" }, add_exclude },
	{ { "exclude-from", OPT_EXCLUDE_FROM, "FILE", "read exclude patterns "
						      "from FILE, one a line" },
	  add_exclude_from },
	{ { "uuid", 'U', "UUID", "volume UUID, or 'random' (default: derived "
				 "from the content)" }, set_uuid },
	{ { "no-xattrs", OPT_NO_XATTRS, NULL, "do not store extended "
					      "attributes" }, set_no_xattrs },
	{ { "file-contexts", OPT_FILE_CONTEXTS, "FILE", "label every file "
			"for SELinux (security.selinux) from the file_contexts "
			"FILE, replacing labels from the source; kept with "
			"--no-xattrs" }, set_file_contexts },
	{ { "mount-point", OPT_MOUNT_POINT, "PATH", "where the image will "
			"be mounted, for --file-contexts: files are looked up "
			"as PATH/<path> (default /)" }, set_mount_point },
	{ { "threads", 'j', "N", "worker threads (0 = all cores)" },
	  set_threads },
	{ { "memory-limit", OPT_MEMORY_LIMIT, "BYTES", "bound on data in "
			"flight: file data, packed segments, codec workspaces "
			"and the small files waiting to be packed (past it, a "
			"temporary file); the tree's own metadata comes on "
			"top (suffix K, M, G; default 64M or 8M per thread)" },
	  set_memory_limit },
	{ { "compress", 'z', "ALG[:LEVEL]", "compress files (default: "
			"none): lz4, lz4hc (1-12, default 9), deflate (1-12, "
			"default 6), zstd (-100..-1 fast, 1-22, default 3; 0 "
			"is the default), lzma (0-9 or 0e-9e extreme, default "
			"6)" }, set_compress },
	{ { "kernel", OPT_KERNEL, "VERSION", "oldest Linux the image must "
			"mount on without warnings: 5.4 ... 6.17 or latest; "
			"picks the layout, savers and defaults (default 6.1, "
			"or the codec's first kernel: 6.6 deflate, 6.10 zstd; "
			"'kiln info --kernels' lists the features)" },
	  set_kernel },
	{ { "pcluster-size", 'C', "BYTES", "largest pcluster (classic "
			"layout; default 16384 for deflate, 65536 for lz4, "
			"lz4hc and lzma, 131072 for zstd; one block before "
			"Linux 5.13) "
			"or extent input size (extents layout, default "
			"65536)" }, set_pcluster_size },
	{ { "layout", OPT_LAYOUT, "KIND", "compressed file layout: classic, "
			"extents (48-bit, Linux 6.15+, EXPERIMENTAL) or auto "
			"(classic, the default)" },
	  set_layout },
	{ { "ztailpacking", OPT_ZTAILPACKING, NULL, "store the last pcluster "
			"of a compressed file inline (Linux 5.17+; default "
			"for targets 5.17 to 6.0)" }, set_ztailpacking },
	{ { "no-ztailpacking", OPT_NO_ZTAILPACKING, NULL, "keep the last "
			"pcluster in blocks of its own" }, set_no_ztailpacking },
	{ { "fragments", OPT_FRAGMENTS, NULL, "pack small files and "
			"compressed file tails into a shared, compressed inode "
			"(Linux 6.1+; default when compressing for targets "
			"from 6.1, unless --ztailpacking)" },
	  set_fragments },
	{ { "no-fragments", OPT_NO_FRAGMENTS, NULL, "give every compressed "
			"file its own blocks, tail included" }, set_no_fragments },
	{ { "dedupe", OPT_DEDUPE, NULL, "store identical extents and "
			"uncompressed files once, confirmed byte for byte "
			"(default when compressing)" }, set_dedupe },
	{ { "no-dedupe", OPT_NO_DEDUPE, NULL, "write every file's data, "
			"even when an identical copy is in the image" },
	  set_no_dedupe },
	{ { "dedupe-shifted", OPT_DEDUPE_SHIFTED, NULL, "also share runs of "
			"2 MiB or more found again at other offsets in other "
			"files (reads big files twice; default when "
			"compressing a directory)" },
	  set_dedupe_shifted },
	{ { "no-dedupe-shifted", OPT_NO_DEDUPE_SHIFTED, NULL, "read every "
			"file once: share whole files and identical extents "
			"only" }, set_no_dedupe_shifted },
	{ { "metabox", OPT_METABOX, NULL, "compress the inodes too, in a "
			"metadata inode (Linux 6.17+, EXPERIMENTAL)" },
	  set_metabox },
	{ { "compress-hints", OPT_COMPRESS_HINTS, "FILE", "per-file "
			"compression: lines 'GLOB ALG[:LEVEL] [PCLUSTER_SIZE]', "
			"first match wins (at most two algorithms per image)" },
	  set_compress_hints },
	{ { "packed-segment", OPT_PACKED_SEGMENT, "BYTES", "compress the "
			"packed inode in segments of BYTES (suffix M or G; "
			"default 32M): bigger, a slightly smaller image and "
			"more memory" }, set_packed_segment },
	{ { "packed-order", OPT_PACKED_ORDER, "KIND", "order of the small "
			"files in the packed inode: path (depth first, the "
			"default) or similar (by suffix and content)" }, set_packed_order },
	{ { "packed-pcluster-size", OPT_PACKED_PCLUSTER, "BYTES", "largest "
			"pcluster of the packed inode (classic layout; default "
			"262144 or the pcluster size if bigger)" },
	  set_packed_pcluster },
	{ { "raw-margin", OPT_RAW_MARGIN, "BYTES", "store a pcluster raw "
			"unless compressing saves this much (default one "
			"block)" }, set_raw_margin },
	{ { "tar", OPT_TAR, "FILE", "build from the archive FILE ('-': "
			"stdin) instead of a directory: tar (any flavour), "
			"cpio, zip, 7z, rar, iso9660, xar, cab, lha, ar or "
			"warc, plain or gzip, bzip2, xz, lzma, zstd, lz4, "
			"compress (.Z), lzip or uuencoded (7z and zip are "
			"best read from a file, not a pipe)" }, set_tar },
	{ { "tar-index", OPT_TAR_INDEX, "FILE", "build an index of the "
			"uncompressed tar FILE: the file data stay in FILE, "
			"the image's extra device (mount -t erofs -o "
			"device=FILE; kiln's reading commands take --device "
			"FILE); 512-byte blocks, Linux 6.4+" }, set_tar_index },
	{ { "oci", OPT_OCI, "DIR[:REF]", "build from the OCI image layout "
			"DIR (the image REF names, or its only one): its "
			"layers (tar, tar+gzip, tar+zstd; every blob checked "
			"against its digest) applied in order into one root "
			"filesystem, whiteouts honoured" }, set_oci },
	{ { "oci-layer", OPT_OCI_LAYER, "N", "with --oci: build layer N "
			"(1 = the bottom one) alone, its whiteouts as "
			"overlayfs whiteouts (see --whiteouts), for an "
			"overlayfs stack" }, set_oci_layer },
	{ { "verify", OPT_VERIFY, NULL, "read the image back and compare it "
			"with the source before renaming it into place" },
	  set_verify },
	{ { "verity", OPT_VERITY, NULL, "append a dm-verity hash tree "
			"(SHA-256, format 1, the image's block size) after the "
			"image and print its root hash, salt, hash offset and "
			"data blocks" }, set_verity },
	{ { "verity-salt", OPT_VERITY_SALT, "HEX", "the tree's salt (up to "
			"256 bytes; default: derived from the image's "
			"content)" }, set_verity_salt },
	{ { "verity-root-hash-file", OPT_VERITY_ROOT_FILE, "FILE", "also "
			"write the root hash to FILE, in hex" },
	  set_verity_root_file },
	{ { "quiet", 'q', NULL, "print errors only" }, set_quiet },
	{ { "verbose", 'v', NULL, "print progress details" }, set_verbose },
};

#define NR_BUILD_OPTIONS (sizeof(build_options) / sizeof(build_options[0]))

static struct cli_option build_cli_options[NR_BUILD_OPTIONS];

static const struct cli_spec build_spec = {
	.cmd = "build",
	.usage = "[OPTIONS] SOURCE IMAGE\n       kiln build [OPTIONS] --tar FILE|- IMAGE\n"
		 "       kiln build [OPTIONS] --tar-index FILE IMAGE\n"
		 "       kiln build [OPTIONS] --oci DIR[:REF] [--oci-layer N] IMAGE",
	.summary = "Build the EROFS image IMAGE from the directory SOURCE "
		   "(or an archive: --tar; an OCI image: --oci). "
		   "SOURCE_DATE_EPOCH, if set,\nsets the build time and clamps "
		   "newer mtimes to it.",
	.opts = build_cli_options,
	.nr_opts = NR_BUILD_OPTIONS,
};

/*
 * Ctrl-C: the image goes to an unnamed temporary file, so an interrupted
 * build leaves no file and an existing image as it was; a block device is
 * written in place and holds a partial image.
 */
static void on_interrupt_say_left(struct build_cli *c, const char *image)
{
	char left[512], name[400];
	struct stat st;

	cli_copy_cut(name, sizeof(name), image);
	if (!stat(image, &st) && S_ISBLK(st.st_mode))
		snprintf(left, sizeof(left), "the device %s holds a partial "
			 "image", name);
	else if (!stat(image, &st))
		snprintf(left, sizeof(left), "%s left as it was", name);
	else
		snprintf(left, sizeof(left), "no image written");
	cli_interrupt_install("build", left, &c->progress.line_open);
}

static void build_log(void *ctx, enum kiln_log_level level, const char *msg)
{
	struct build_cli *c = ctx;
	char *esc = cli_escape_dup(msg);
	const char *text = esc ? esc : "out of memory";

	cli_progress_clear(&c->progress);
	if (level == KILN_LOG_ERROR)
		fprintf(stderr, "kiln: %s\n", text);
	else if (level == KILN_LOG_WARN && c->verbosity >= 0)
		fprintf(stderr, "kiln: warning: %s\n", text);
	else if (level >= KILN_LOG_INFO && c->verbosity > 0)
		fprintf(stderr, "kiln: %s\n", text);
	free(esc);
}

/* SOURCE_DATE_EPOCH: the build time, and an upper bound for mtimes. */
static int apply_source_date_epoch(struct build_cli *c)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	char *end;
	long long v;

	if (!sde || !*sde)
		return 0;
	errno = 0;
	v = strtoll(sde, &end, 10);
	if (*end || errno || v < 0) {
		fprintf(stderr, "kiln build: SOURCE_DATE_EPOCH='%s' is not a "
				"number of seconds\n", sde);
		return 2;
	}
	c->opts.build_time = v;
	c->opts.flags |= KILN_BUILD_BUILD_TIME | KILN_BUILD_CLAMP_MTIME;
	return 0;
}

static void print_summary(const char *image, const struct kiln_build_stats *st)
{
	char line[512];

	cli_build_summary(line, sizeof(line), st);
	printf("%s: %s\n", image, line);
	printf("%s: target: Linux %u.%u (%s)\n", image, st->target / 100,
	       st->target % 100, st->target_why);
	if (st->min_kernel)
		printf("%s: mountable by Linux %s or newer (%s)\n", image,
		       st->min_kernel, st->min_kernel_why);
	for (unsigned int f = 0; f < KILN_KF_COUNT; f++) {
		const struct kiln_kernel_feature *k = kiln_kernel_feature(f);

		if (st->experimental & (1u << f))
			printf("%s: note: Linux logs %s as EXPERIMENTAL "
			       "(%s)\n", image, k->name, k->experimental);
	}
}

static void print_verity(const char *image, const struct kiln_verity_info *v)
{
	char hex[2 * KILN_VERITY_SALT_MAX + 1];

	kiln_hex_encode(v->root, sizeof(v->root), hex);
	printf("%s: verity root hash: %s\n", image, hex);
	kiln_hex_encode(v->salt, v->salt_len, hex);
	printf("%s: verity salt: %s\n", image, v->salt_len ? hex : "-");
	printf("%s: verity hash offset: %llu\n", image,
	       (unsigned long long)v->hash_offset);
	printf("%s: verity data blocks: %llu\n", image,
	       (unsigned long long)v->data_blocks);
	printf("%s: verity block size: %u, hash blocks: %llu (superblock "
	       "included)\n", image, v->block_size,
	       (unsigned long long)v->hash_blocks);
}

/* The root hash in hex, without a newline, as veritysetup writes it. */
static int write_root_hash(const char *path, const struct kiln_verity_info *v)
{
	char hex[2 * KILN_VERITY_DIGEST_SIZE + 1];
	FILE *f = fopen(path, "w");

	kiln_hex_encode(v->root, sizeof(v->root), hex);
	if (!f || fputs(hex, f) == EOF || fclose(f) == EOF) {
		fprintf(stderr, "kiln: %s: cannot write the root hash: %s\n",
			path, strerror(errno));
		return 1;
	}
	return 0;
}

int cmd_build(int argc, char **argv)
{
	struct build_cli c = { .verbosity = 0 };
	struct kiln_build_stats stats;
	const char *arg;
	int rc, err;

	for (size_t i = 0; i < NR_BUILD_OPTIONS; i++)
		build_cli_options[i] = build_options[i].opt;
	kiln_build_opts_init(&c.opts);
	c.opts.log = build_log;
	c.opts.log_ctx = &c;
	cli_progress_init(&c.progress, stderr);
	rc = apply_source_date_epoch(&c);
	while (!rc && (rc = cli_getopt(argc, argv, &build_spec, &arg)) >= 0) {
		size_t i = 0;

		while (i < NR_BUILD_OPTIONS && build_options[i].opt.key != rc)
			i++;
		rc = i < NR_BUILD_OPTIONS ? build_options[i].apply(&c, arg)
					  : cli_usage_error(&build_spec,
							    "unhandled option");
	}
	if (rc > 0 || (rc < 0 && rc != CLI_OPT_END)) {
		rc = rc > 0 ? rc : cli_opt_exit(rc);
		goto out;
	}
	if (argc - optind != (c.tar ? 1 : 2)) {
		rc = cli_usage_error(&build_spec, c.tar ? "--tar, --tar-index, "
				     "--oci: expected only IMAGE" :
				     "expected SOURCE and IMAGE");
		goto out;
	}
	if ((c.opts.verity_salt || c.root_hash_file) &&
	    !(c.opts.flags & KILN_BUILD_VERITY)) {
		rc = cli_usage_error(&build_spec, "--verity-salt and "
				     "--verity-root-hash-file need --verity");
		goto out;
	}
	c.opts.excludes = c.excludes;
	c.opts.nr_excludes = c.nr_excludes;
	if (c.verbosity >= 0 && c.progress.enabled) {
		c.opts.progress = cli_progress_show;
		c.opts.progress_ctx = &c.progress;
	}
	on_interrupt_say_left(&c, argv[argc - 1]);
	/*
	 * Under --memory-limit, buffers of 1 MiB and more (input windows,
	 * held pclusters) are mapped on their own and leave the process when
	 * freed, instead of staying in the heap between builds of them:
	 * /usr/share/doc at --memory-limit 64M peaked at 89 MiB, now 76,
	 * for some system time.
	 */
	if (c.opts.memory_limit)
		mallopt(M_MMAP_THRESHOLD, 1 << 20);
	err = kiln_build(c.tar ? c.tar : argv[optind], argv[argc - 1],
			 &c.opts, &stats);
	cli_progress_clear(&c.progress);
	if (err) {
		/* -EINVAL: options the library refused (a usage error) */
		rc = err == -EINVAL ? 2 : 1;
		goto out;
	}
	if (c.verbosity >= 0)
		print_summary(argv[argc - 1], &stats);
	rc = 0;
	if (c.opts.flags & KILN_BUILD_VERITY) {
		if (c.verbosity >= 0)
			print_verity(argv[argc - 1], &stats.verity);
		if (c.root_hash_file)
			rc = write_root_hash(c.root_hash_file, &stats.verity);
	}
out:
	cli_progress_release(&c.progress);
	for (size_t i = 0; i < c.nr_owned; i++)
		free(c.owned[i]);
	free(c.owned);
	free(c.excludes);
	return rc;
}
