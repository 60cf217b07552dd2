// SPDX-License-Identifier: MIT
/*
 * One tar entry's file data, read forward from libarchive: holes between
 * the blocks of a sparse entry become zeros, every byte taken can be
 * hashed.
 */
#include <archive.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/tar-data.h"
#include "util/checked.h"

const char *kiln_tar_error(struct archive *a)
{
	const char *s = archive_error_string(a);

	return s ? s : "truncated or damaged archive";
}

static int data_fail(struct kiln_tar_data *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "<archive>: <entry>: <reason>" */
static int data_fail(struct kiln_tar_data *d, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kiln_log(d->lg, KILN_LOG_ERROR, "%s: %s", d->label, msg);
	return -err;
}

int kiln_tar_data_init(struct kiln_tar_data *d, struct archive *a,
		       const struct kiln_logger *lg, const char *label,
		       uint64_t size, uint64_t holes, bool hash)
{
	memset(d, 0, sizeof(*d));
	d->a = a;
	d->lg = lg;
	d->label = label;
	d->size = size;
	d->holes_left = holes;
	if (!hash)
		return 0;
	d->hash = XXH3_createState();
	if (!d->hash || XXH3_64bits_reset(d->hash) != XXH_OK)
		return -ENOMEM;
	return 0;
}

void kiln_tar_data_release(struct kiln_tar_data *d)
{
	if (d->hash)
		XXH3_freeState(d->hash);
	d->hash = NULL;
}

/* Hand @n bytes (@src, or zeros for a hole) to @dst and the hash. */
static void data_emit(struct kiln_tar_data *d, uint8_t *dst,
		      const uint8_t *src, size_t n)
{
	static const uint8_t zeros[4096];

	if (dst) {
		if (src)
			memcpy(dst, src, n);
		else
			memset(dst, 0, n);
	}
	if (d->hash) {
		if (src)
			XXH3_64bits_update(d->hash, src, n);
		for (size_t k = 0; !src && k < n; k += sizeof(zeros))
			XXH3_64bits_update(d->hash, zeros,
					   KILN_MIN(n - k, sizeof(zeros)));
	}
}

/* The next block from libarchive (or the end of the blocks). */
static int next_block(struct kiln_tar_data *d)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int r = archive_read_data_block(d->a, &buf, &size, &off);

	if (r == ARCHIVE_EOF) {
		d->blk_eof = true;
		d->blk = NULL;
		d->blk_off = d->size;
		d->blk_len = 0;
		return 0;
	}
	if (r < ARCHIVE_WARN)
		return data_fail(d, EIO, "%s", kiln_tar_error(d->a));
	if (off < 0 || (uint64_t)off < d->pos || (uint64_t)off > d->size ||
	    size > d->size - (uint64_t)off)
		return data_fail(d, EIO, "data block at %lld outside the file",
				 (long long)off);
	d->blk = buf;
	d->blk_len = size;
	d->blk_off = (uint64_t)off;
	return 0;
}

/* Take @len bytes from the archive into @dst (NULL: skip them). */
static int data_take(struct kiln_tar_data *d, uint8_t *dst, uint64_t len)
{
	while (len) {
		size_t n;

		if (d->pos >= d->blk_off + d->blk_len && !d->blk_eof) {
			int err = next_block(d);

			if (err)
				return err;
			continue;
		}
		if (d->pos < d->blk_off) {
			/* a hole up to the next block (or the end) */
			n = (size_t)KILN_MIN(len, d->blk_off - d->pos);
			if (n > d->holes_left)
				return data_fail(d, EIO, "file data ends early: "
						 "no data at byte %llu of %llu",
						 (unsigned long long)d->pos,
						 (unsigned long long)d->size);
			d->holes_left -= n;
			data_emit(d, dst, NULL, n);
		} else {
			n = (size_t)KILN_MIN(len,
					     d->blk_off + d->blk_len - d->pos);
			data_emit(d, dst, d->blk + (d->pos - d->blk_off), n);
		}
		if (!n)
			return data_fail(d, EIO, "file data ends early");
		d->pos += n;
		len -= n;
		if (dst)
			dst += n;
	}
	return 0;
}

int kiln_tar_data_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct kiln_tar_data *d = ctx;
	uint8_t *p = buf;

	if (off > d->size || len > d->size - off)
		return data_fail(d, EIO, "read past the end of the file");
	if (off < d->pos)
		return data_fail(d, EIO, "cannot read the file again from a "
				 "stream");
	if (off > d->pos) {
		int err = data_take(d, NULL, off - d->pos);

		if (err)
			return err;
	}
	return data_take(d, p, len);
}

int kiln_tar_data_finish(struct kiln_tar_data *d, uint64_t *hash)
{
	int err = data_take(d, NULL, d->size - d->pos);

	if (!err && d->hash)
		*hash = XXH3_64bits_digest(d->hash);
	return err;
}
