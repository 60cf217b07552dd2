// SPDX-License-Identifier: MIT
/* Helpers every subcommand shares: option tables, messages, sizes. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <kiln/kiln.h>

#include "cli.h"

#define CLI_MAX_OPTS 64

int cli_getopt(int argc, char **argv, const struct cli_spec *spec,
	       const char **arg)
{
	struct option longopts[CLI_MAX_OPTS + 2];
	char shortopts[3 * CLI_MAX_OPTS + 8];
	size_t n = 0, s = 0;
	int c;

	/* ':' first: a missing argument is told apart from an unknown option */
	shortopts[s++] = ':';
	for (size_t i = 0; i < spec->nr_opts && i < CLI_MAX_OPTS; i++) {
		const struct cli_option *o = &spec->opts[i];

		if (o->name)
			longopts[n++] = (struct option){
				o->name, o->arg ? required_argument :
						  no_argument, NULL, o->key,
			};
		if (o->key > 0 && o->key < 256) {
			shortopts[s++] = (char)o->key;
			if (o->arg)
				shortopts[s++] = ':';
		}
	}
	longopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[n++] = (struct option){ "version", no_argument, NULL, 'V' };
	longopts[n] = (struct option){ NULL, 0, NULL, 0 };
	shortopts[s++] = 'h';
	shortopts[s++] = 'V';
	shortopts[s] = '\0';

	opterr = 0;
	c = getopt_long(argc, argv, shortopts, longopts, NULL);
	*arg = optarg;
	switch (c) {
	case -1:
		return CLI_OPT_END;
	case 'h':
		cli_usage(stdout, spec);
		return CLI_OPT_HELP;
	case 'V':
		cli_version();
		return CLI_OPT_VERSION;
	case ':':
		cli_usage_error(spec, "option '%s' needs an argument",
				argv[optind - 1]);
		return CLI_OPT_ERROR;
	case '?':
		if (optopt)
			cli_usage_error(spec, "unknown option '-%c'", optopt);
		else
			cli_usage_error(spec, "unknown option '%s'",
					argv[optind - 1]);
		return CLI_OPT_ERROR;
	default:
		return c;
	}
}

void cli_version(void)
{
	printf("kiln %s\n", kiln_version());
}

int cli_opt_exit(int rc)
{
	return rc == CLI_OPT_HELP || rc == CLI_OPT_VERSION ? 0 : 2;
}

void cli_usage(FILE *f, const struct cli_spec *spec)
{
	fprintf(f, "usage: kiln %s %s\n%s\n", spec->cmd, spec->usage,
		spec->summary);
	fprintf(f, "\noptions:\n");
	for (size_t i = 0; i < spec->nr_opts; i++) {
		const struct cli_option *o = &spec->opts[i];
		char left[64];
		int len = 0;

		if (o->key > 0 && o->key < 256)
			len = snprintf(left, sizeof(left), "-%c%s", o->key,
				       o->name ? ", " : "");
		else
			len = snprintf(left, sizeof(left), "    ");
		if (o->name && len >= 0 && (size_t)len < sizeof(left))
			snprintf(left + len, sizeof(left) - (size_t)len,
				 "--%s%s%s", o->name, o->arg ? "=" : "",
				 o->arg ? o->arg : "");
		fprintf(f, "  %-26s %s\n", left, o->help);
	}
	fprintf(f, "  %-26s %s\n", "-h, --help", "show this help");
	fprintf(f, "  %-26s %s\n", "-V, --version", "show kiln's version");
}

int cli_usage_error(const struct cli_spec *spec, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kiln %s: ", spec->cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: kiln %s %s\n", spec->cmd, spec->usage);
	return 2;
}

const char *cli_escape(const char *s, char *buf, size_t cap)
{
	size_t o = 0;

	if (!cap)
		return buf;
	for (; *s && o + 5 < cap; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			o += (size_t)snprintf(buf + o, cap - o, "\\%03o", ch);
		else
			buf[o++] = (char)ch;
	}
	buf[o] = '\0';
	return buf;
}

char *cli_escape_dup(const char *s)
{
	/* each byte grows to at most "\ooo" */
	size_t cap = 4 * strlen(s) + 6;
	char *buf = malloc(cap);

	return buf ? (char *)cli_escape(s, buf, cap) : NULL;
}

void cli_copy_cut(char *dst, size_t cap, const char *src)
{
	size_t len = strlen(src), head;

	if (len < cap) {
		memcpy(dst, src, len + 1);
		return;
	}
	/* the start names the object, the end says what is wrong with it */
	head = (cap - 4) / 3;
	memcpy(dst, src, head);
	memcpy(dst + head, "...", 3);
	memcpy(dst + head + 3, src + len - (cap - 4 - head), cap - 4 - head);
	dst[cap - 1] = '\0';
}

void cli_error(const char *image, const char *fmt, ...)
{
	char *msg = NULL, *esc = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n >= 0)
		msg = malloc((size_t)n + 1);
	if (msg) {
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
		esc = cli_escape_dup(msg);
	}
	fprintf(stderr, "kiln: %s: %s\n", image, esc ? esc : "out of memory");
	free(esc);
	free(msg);
}

void cli_log_init(struct cli_log *lg, const char *image,
		  enum kiln_log_level max_level)
{
	memset(lg, 0, sizeof(*lg));
	lg->image = image;
	lg->max_level = max_level;
	/* KILN_DEBUG=1 adds debug lines (where the reader found corruption) */
	if (getenv("KILN_DEBUG") && *getenv("KILN_DEBUG"))
		lg->max_level = KILN_LOG_DEBUG;
}

void cli_log_fn(void *ctx, enum kiln_log_level level, const char *msg)
{
	struct cli_log *lg = ctx;

	if (level == KILN_LOG_ERROR) {
		cli_copy_cut(lg->last, sizeof(lg->last), msg);
		lg->have_last = true;
		if (lg->quiet_errors)
			return;
	}
	if (level <= lg->max_level)
		cli_error(lg->image, "%s", msg);
}

int cli_verity_option(const struct cli_spec *spec, struct cli_verity *v,
		      int key, const char *arg)
{
	ssize_t n;
	char *end;

	switch (key) {
	case CLI_OPT_VERITY:
		n = kiln_hex_decode(arg, v->root, sizeof(v->root));
		if (n != KILN_VERITY_DIGEST_SIZE)
			return cli_usage_error(spec, "--verity: '%s' is not a "
					       "SHA-256 root hash (64 hex "
					       "digits)", arg);
		v->on = true;
		return 0;
	case CLI_OPT_VERITY_SALT:
		n = kiln_hex_decode(arg, v->salt, sizeof(v->salt));
		if (n < 0)
			return cli_usage_error(spec, "--verity-salt: '%s' is not "
					       "%s", arg, n == -ERANGE ?
					       "at most 256 bytes" :
					       "hex digits");
		v->has_salt = true;
		v->salt_len = (size_t)n;
		return 0;
	case CLI_OPT_VERITY_HASH_OFFSET:
		errno = 0;
		v->hash_offset = strtoull(arg, &end, 10);
		if (!*arg || *end || errno || *arg == '-' || !v->hash_offset)
			return cli_usage_error(spec, "--verity-hash-offset: '%s' "
					       "is not a positive number of "
					       "bytes", arg);
		return 0;
	}
	return cli_usage_error(spec, "unhandled option");
}

void cli_verity_apply(const struct cli_verity *v, struct kiln_image_opts *o)
{
	if (!v || !v->on)
		return;
	o->verity_root = v->root;
	o->verity_salt = v->has_salt ? v->salt : NULL;
	o->verity_salt_len = v->salt_len;
	o->verity_hash_offset = v->hash_offset;
}

int cli_verity_check(const struct cli_spec *spec, const struct cli_verity *v)
{
	if ((v->has_salt || v->hash_offset) && !v->on)
		return cli_usage_error(spec, "--verity-salt and "
				       "--verity-hash-offset need --verity");
	return 0;
}

int cli_image_option(const struct cli_spec *spec, struct cli_devices *devs,
		     struct cli_verity *v, int key, const char *arg)
{
	switch (key) {
	case CLI_OPT_DEVICE:
		return cli_add_device(spec, devs, arg) ? 2 : 0;
	case CLI_OPT_VERITY:
	case CLI_OPT_VERITY_SALT:
	case CLI_OPT_VERITY_HASH_OFFSET:
		return cli_verity_option(spec, v, key, arg) ? 2 : 0;
	}
	if (cli_is_remote_option(key))
		return cli_remote_option(spec, devs, key, arg) ? 2 : 0;
	return 0;
}

int cli_add_device(const struct cli_spec *spec, struct cli_devices *devs,
		   const char *arg)
{
	if (devs->count == CLI_MAX_DEVICES)
		return cli_usage_error(spec, "at most %u --device options",
				       CLI_MAX_DEVICES);
	devs->paths[devs->count++] = arg;
	return 0;
}

static int parse_seconds(const struct cli_spec *spec, const char *name,
			 const char *arg, unsigned int *ms)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (!*arg || *end || errno || !(v > 0) || v > 86400)
		return cli_usage_error(spec, "--%s: '%s' is not a number of "
				       "seconds in (0, 86400]", name, arg);
	*ms = (unsigned int)(v * 1000 + 0.5);
	if (!*ms)
		*ms = 1;
	return 0;
}

int cli_remote_option(const struct cli_spec *spec, struct cli_devices *devs,
		      int key, const char *arg)
{
	struct cli_remote *r = &devs->remote;
	struct kiln_remote_opts *o = &r->opts;
	unsigned long long v;
	char *end;

	if (!o->struct_size)
		kiln_remote_opts_init(o);
	switch (key) {
	case CLI_OPT_INSECURE:
		o->flags |= KILN_REMOTE_INSECURE;
		return 0;
	case CLI_OPT_CA_FILE:
		o->ca_file = arg;
		return 0;
	case CLI_OPT_MIRROR:
		if (o->nr_mirrors == CLI_MAX_MIRRORS)
			return cli_usage_error(spec, "at most %u --mirror options",
					       CLI_MAX_MIRRORS);
		if (!kiln_is_url(arg))
			return cli_usage_error(spec, "--mirror: '%s' is not an "
					       "http://, https:// or s3:// URL", arg);
		r->mirrors[o->nr_mirrors++] = arg;
		o->mirrors = r->mirrors;
		return 0;
	case CLI_OPT_CACHE_DIR:
		o->cache_dir = arg;
		return 0;
	case CLI_OPT_CONNECT_TIMEOUT:
		return parse_seconds(spec, "connect-timeout", arg,
				     &o->connect_timeout_ms);
	case CLI_OPT_STALL_TIMEOUT:
		return parse_seconds(spec, "stall-timeout", arg,
				     &o->stall_timeout_ms);
	case CLI_OPT_TIMEOUT:
		return parse_seconds(spec, "timeout", arg,
				     &o->read_timeout_ms);
	case CLI_OPT_RETRIES:
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (!*arg || *end || errno || *arg == '-' || v > 100)
			return cli_usage_error(spec, "--retries: '%s' is not a "
					       "number in 0..100", arg);
		o->retries = v ? (unsigned int)v : ~0u;
		return 0;
	case CLI_OPT_FETCH_SIZE:
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (!*arg || *end || errno || v < (512u << 10) ||
		    v > (8u << 20) || (v & (v - 1)))
			return cli_usage_error(spec, "--fetch-size: '%s' is not "
					       "a power of two in 524288..8388608",
					       arg);
		o->fetch_size = (uint32_t)v;
		return 0;
	case CLI_OPT_CACHE_SIZE:
		if (cli_parse_size(arg, &o->cache_size) || !o->cache_size)
			return cli_usage_error(spec, "--cache-size: '%s' is not "
					       "a size (4G, 512M, 100k, bytes)",
					       arg);
		return 0;
	case CLI_OPT_NO_CACHE:
		o->flags |= KILN_REMOTE_NO_CACHE;
		return 0;
	case CLI_OPT_S3_ENDPOINT:
		if (strncasecmp(arg, "http://", 7) &&
		    strncasecmp(arg, "https://", 8))
			return cli_usage_error(spec, "--s3-endpoint: '%s' is not "
					       "an http:// or https:// URL", arg);
		o->s3_endpoint = arg;
		return 0;
	case CLI_OPT_S3_REGION:
		o->s3_region = arg;
		return 0;
	case CLI_OPT_S3_PATH_STYLE:
		o->flags |= KILN_REMOTE_S3_PATH_STYLE;
		return 0;
	case CLI_OPT_OFFLINE:
		o->flags |= KILN_REMOTE_OFFLINE;
		return 0;
	case CLI_OPT_PREFETCH:
		if (strcmp(arg, "all"))
			return cli_usage_error(spec, "--prefetch: '%s' is not "
					       "'all'", arg);
		o->flags |= KILN_REMOTE_PREFETCH_ALL;
		return 0;
	case CLI_OPT_PREFETCH_RATE:
		if (cli_parse_size(arg, &o->prefetch_rate) || !o->prefetch_rate)
			return cli_usage_error(spec, "--prefetch-rate: '%s' is "
					       "not a size (16M, 100k, bytes)",
					       arg);
		return 0;
	}
	return cli_usage_error(spec, "unhandled option");
}

int cli_parse_size(const char *arg, uint64_t *v)
{
	unsigned long long n;
	unsigned int shift = 0;
	char *end;

	errno = 0;
	n = strtoull(arg, &end, 10);
	if (!*arg || *arg == '-' || errno || end == arg)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (*end || (shift && n > (~0ull >> shift)))
		return -EINVAL;
	*v = (uint64_t)n << shift;
	return 0;
}

const struct kiln_remote_opts *cli_remote_opts(const struct cli_devices *devs)
{
	return devs && devs->remote.opts.struct_size ? &devs->remote.opts :
	       NULL;
}

int cli_open_image(struct kiln_image **img, const char *path,
		   struct cli_log *lg, const struct cli_devices *devs)
{
	return cli_open_image_verity(img, path, lg, devs, NULL);
}

int cli_open_image_verity(struct kiln_image **img, const char *path,
			  struct cli_log *lg, const struct cli_devices *devs,
			  const struct cli_verity *v)
{
	struct kiln_image_opts opts = {
		.struct_size = sizeof(opts),
		.log = cli_log_fn,
		.log_ctx = lg,
		.devices = devs ? devs->paths : NULL,
		.nr_devices = devs ? devs->count : 0,
		.remote = cli_remote_opts(devs),
	};
	int err;

	cli_verity_apply(v, &opts);
	lg->have_last = false;
	err = kiln_image_open(img, path, &opts);
	if (err) {
		/* a corrupt superblock was already described by the log */
		if (!((err == -KILN_ECORRUPT || err == -KILN_ENOTEROFS ||
		       err == -EINVAL) &&
		      lg->have_last && !lg->quiet_errors))
			cli_error(path, "cannot open image: %s",
				  kiln_strerror(err));
		else
			cli_error(path, "cannot open image");
	}
	return err;
}

const char *cli_human_size(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB",
					     "PiB", "EiB" };
	double v = (double)bytes;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	v /= 1024;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, "%.1f %s", v, units[u]);
	return buf;
}
