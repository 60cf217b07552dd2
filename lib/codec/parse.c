// SPDX-License-Identifier: MIT
/*
 * The public face of the codec table: "ALG[:LEVEL]" parsing, the list of
 * codecs and levels built in, names.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/codec.h>

#include "codec/codec.h"

/* Every codec kiln knows, built in or not, for names and messages. */
static const char *const codec_names[KILN_CODEC_MAX] = {
	[KILN_CODEC_NONE] = "none",
	[KILN_CODEC_LZ4] = "lz4",
	[KILN_CODEC_LZ4HC] = "lz4hc",
	[KILN_CODEC_LZMA] = "lzma",
	[KILN_CODEC_DEFLATE] = "deflate",
	[KILN_CODEC_ZSTD] = "zstd",
};

KILN_API const char *kiln_codec_name(enum kiln_codec_id id)
{
	if ((unsigned int)id >= KILN_CODEC_MAX)
		return "unknown";
	return codec_names[id];
}

/* snprintf() that appends at *@len and keeps counting past @cap. */
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*len < cap ? buf + *len : NULL,
		      *len < cap ? cap - *len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n;
}

static void describe_one(const struct kiln_codec_ops *ops, char *buf,
			 size_t cap, size_t *len)
{
	if (ops->id == KILN_CODEC_LZMA)
		append(buf, cap, len, "%s (0..9 or 0e..9e, default %d)",
		       ops->name, ops->default_level);
	else if (ops->min_level == ops->max_level)
		append(buf, cap, len, "%s (%d)", ops->name, ops->min_level);
	else if (ops->id == KILN_CODEC_ZSTD)
		append(buf, cap, len, "%s (1..%d or fast -1..%d, default "
		       "%d, also 0)", ops->name, ops->max_level, ops->min_level,
		       ops->default_level);
	else
		append(buf, cap, len, "%s (%d..%d, default %d)", ops->name,
		       ops->min_level, ops->max_level, ops->default_level);
}

KILN_API size_t kiln_codec_describe(char *buf, size_t cap)
{
	size_t len = 0;
	bool first = true;

	if (cap)
		buf[0] = '\0';
	for (int id = KILN_CODEC_NONE + 1; id < KILN_CODEC_MAX; id++) {
		const struct kiln_codec_ops *ops = kiln_codec_get(id);

		if (!ops)
			continue;
		if (!first)
			append(buf, cap, &len, ", ");
		describe_one(ops, buf, cap, &len);
		first = false;
	}
	return len;
}

static int parse_error(char *err, size_t cap, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int parse_error(char *err, size_t cap, int ret, const char *fmt, ...)
{
	va_list ap;
	size_t len;
	int n;

	if (!err || !cap)
		return ret;
	va_start(ap, fmt);
	n = vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	len = n > 0 ? (size_t)n : 0;
	append(err, cap, &len, "; valid: ");
	if (len < cap)
		kiln_codec_describe(err + len, cap - len);
	return ret;
}

/* "-5", "12", and for LZMA "9e". Returns false when malformed. */
static bool parse_level(const char *s, enum kiln_codec_id id, int *level)
{
	char *end;
	long v;

	if (!*s)
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || errno || v < INT_MIN / 2 || v > INT_MAX / 2)
		return false;
	if (id == KILN_CODEC_LZMA && *end == 'e' && v >= 0 && v <= 9) {
		v += KILN_LZMA_EXTREME;
		end++;
	}
	if (*end)
		return false;
	*level = (int)v;
	return true;
}

KILN_API int kiln_compress_parse(const char *text,
				 struct kiln_compress_spec *spec,
				 char *err, size_t err_cap)
{
	const struct kiln_codec_ops *ops;
	size_t name_len = strcspn(text, ":,");
	const char *level_text = text[name_len] ? text + name_len + 1 : NULL;
	int id, level;

	if (err && err_cap)
		err[0] = '\0';
	for (id = 0; id < KILN_CODEC_MAX; id++)
		if (strlen(codec_names[id]) == name_len &&
		    !strncmp(text, codec_names[id], name_len))
			break;
	if (id == KILN_CODEC_MAX)
		return parse_error(err, err_cap, -EINVAL,
				   "unknown compression algorithm '%.*s'",
				   (int)name_len, text);
	if (id == KILN_CODEC_NONE) {
		if (level_text)
			return parse_error(err, err_cap, -EINVAL,
					   "'none' takes no level");
		spec->codec = KILN_CODEC_NONE;
		spec->level = 0;
		return 0;
	}
	ops = kiln_codec_get(id);
	if (!ops)
		return parse_error(err, err_cap, -EOPNOTSUPP,
				   "%s is not built into this kiln",
				   codec_names[id]);
	level = ops->default_level;
	if (level_text && !parse_level(level_text, id, &level))
		return parse_error(err, err_cap, -EINVAL,
				   "bad %s level '%s'", ops->name, level_text);
	if (level_text && level == 0 && ops->zero_is_default)
		level = ops->default_level;
	if (!kiln_codec_level_ok(ops, level))
		return parse_error(err, err_cap, -ERANGE,
				   "%s level %s out of range", ops->name,
				   level_text);
	spec->codec = id;
	spec->level = level;
	return 0;
}
