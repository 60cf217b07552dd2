// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/oci-gunzip.c: gzip streams made here with ISA-L's
 * own deflate (one member, several, in reads of any size), bytes after
 * the last member, and the streams it must refuse: no gzip header, empty,
 * cut short, a flipped byte, a wrong CRC-32, a failing read.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/igzip_lib.h>

#include "builder/oci-gunzip.h"
#include "tap.h"

/* The compressed stream, handed out @step bytes at a time. */
struct feed {
	const uint8_t *data;
	size_t len, pos, step;
	int fail_at;		/* read number that fails (-EIO), 0: none */
	int reads;
};

static ssize_t feed_read(void *ctx, void *buf, size_t len)
{
	struct feed *f = ctx;
	size_t n = f->len - f->pos;

	if (++f->reads == f->fail_at)
		return -EIO;
	if (n > len)
		n = len;
	if (f->step && n > f->step)
		n = f->step;
	memcpy(buf, f->data + f->pos, n);
	f->pos += n;
	return (ssize_t)n;
}

/* @len bytes of text that compress, from @seed. */
static uint8_t *make_text(size_t len, unsigned int seed)
{
	static const char *words[] = { "erofs ", "kiln ", "layer ", "tar ",
				       "gzip\n", "blob ", "image " };
	uint8_t *p = malloc(len);

	for (size_t i = 0, n; p && i < len;) {
		const char *w;

		seed = seed * 1103515245u + 12345u;
		w = words[(seed >> 16) % 7];
		n = strlen(w);
		if (n > len - i)
			n = len - i;
		memcpy(p + i, w, n);
		i += n;
	}
	return p;
}

/* One gzip member of @src appended at @dst + *@at (room: @cap). */
static void gzip_member(const uint8_t *src, size_t len, uint8_t *dst,
			size_t cap, size_t *at)
{
	struct isal_zstream zs;

	isal_deflate_stateless_init(&zs);
	zs.gzip_flag = IGZIP_GZIP;
	zs.next_in = (uint8_t *)src;
	zs.avail_in = (uint32_t)len;
	zs.next_out = dst + *at;
	zs.avail_out = (uint32_t)(cap - *at);
	zs.end_of_stream = 1;
	CHECK_EQ(isal_deflate_stateless(&zs), COMP_OK);
	*at += zs.total_out;
}

/* Inflate all of @f; the bytes in *@out (malloc'ed), the last result. */
static ssize_t inflate_all(struct feed *f, uint8_t **out, size_t *out_len)
{
	struct kiln_gunzip *gz;
	size_t cap = 1 << 20, len = 0;
	uint8_t *buf = malloc(cap);
	ssize_t r;

	CHECK_EQ(kiln_gunzip_new(feed_read, f, &gz), 0);
	for (;;) {
		const void *p;

		r = kiln_gunzip_next(gz, &p);
		if (r <= 0)
			break;
		if (len + (size_t)r > cap) {
			cap = 2 * (len + (size_t)r);
			buf = realloc(buf, cap);
		}
		memcpy(buf + len, p, (size_t)r);
		len += (size_t)r;
	}
	if (r < 0)
		CHECK(strcmp(kiln_gunzip_why(gz), "no error") != 0 ||
		      r == -EIO);
	kiln_gunzip_free(gz);
	*out = buf;
	*out_len = len;
	return r;
}

TEST(members_come_out_whole_in_reads_of_any_size)
{
	const size_t a_len = 3 << 20, b_len = 70001;
	uint8_t *a = make_text(a_len, 1), *b = make_text(b_len, 2);
	size_t cap = a_len + b_len, at = 0;
	uint8_t *gz = malloc(cap), *out;
	const size_t steps[] = { 0, 1, 7, 4096 };

	gzip_member(a, a_len, gz, cap, &at);
	gzip_member(b, b_len, gz, cap, &at);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct feed f = { .data = gz, .len = at, .step = steps[i] };
		size_t len;

		CHECK_EQ(inflate_all(&f, &out, &len), 0);
		CHECK_EQ(len, a_len + b_len);
		CHECK(len == a_len + b_len && !memcmp(out, a, a_len) &&
		      !memcmp(out + a_len, b, b_len));
		free(out);
	}
	free(a);
	free(b);
	free(gz);
}

TEST(bytes_after_the_last_member_are_ignored)
{
	uint8_t *a = make_text(100000, 3), *out;
	size_t cap = 200000, at = 0, len;
	uint8_t *gz = calloc(1, cap);
	struct feed f;

	gzip_member(a, 100000, gz, cap, &at);
	memcpy(gz + at, "\0\0\0\0 tar padding", 17);
	f = (struct feed){ .data = gz, .len = at + 17 };
	CHECK_EQ(inflate_all(&f, &out, &len), 0);
	CHECK(len == 100000 && !memcmp(out, a, len));
	free(out);
	/* a lone 0x1f at the very end is no member either */
	gz[at] = 0x1f;
	f = (struct feed){ .data = gz, .len = at + 1 };
	CHECK_EQ(inflate_all(&f, &out, &len), 0);
	CHECK_EQ(len, (size_t)100000);
	free(out);
	free(a);
	free(gz);
}

TEST(streams_that_are_not_whole_gzip_are_refused)
{
	uint8_t *a = make_text(300000, 4), *out;
	size_t cap = 400000, at = 0, len;
	uint8_t *gz = malloc(cap), *bad = malloc(cap);

	gzip_member(a, 300000, gz, cap, &at);
	/* each case: the gzip member cut to @len, with a byte flipped */
	const struct {
		const char *what;
		bool plain;		/* the text itself, not gzip */
		size_t len, flip;	/* flip: offset + 1, 0 for none */
		uint8_t mask;
		size_t step, fail_at;
		ssize_t want;
	} cases[] = {
		{ "a plain tar (or anything else)", true, 300000, 0, 0, 0, 0,
		  -EILSEQ },
		{ "nothing at all", false, 0, 0, 0, 0, 0, -EILSEQ },
		{ "cut short in the data", false, at / 2, 0, 0, 0, 0,
		  -EBADMSG },
		{ "cut short before the trailer", false, at - 4, 0, 0, 0, 0,
		  -EBADMSG },
		{ "a wrong CRC-32 in the trailer", false, at, at - 8 + 1, 0x40,
		  0, 0, -EBADMSG },
		/* refused, never other bytes */
		{ "a flipped byte in the deflate data", false, at, at / 3 + 1,
		  0x55, 0, 0, -EBADMSG },
		/* the reader's own failure comes back as it is */
		{ "the reader fails", false, at, 0, 0, 1000, 3, -EIO },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct feed f = { .data = cases[i].plain ? a : bad,
				  .len = cases[i].len, .step = cases[i].step,
				  .fail_at = cases[i].fail_at };
		ssize_t r;

		memcpy(bad, gz, at);
		if (cases[i].flip)
			bad[cases[i].flip - 1] ^= cases[i].mask;
		r = inflate_all(&f, &out, &len);
		if (r != cases[i].want)
			printf("#   case: %s\n", cases[i].what);
		CHECK_EQ(r, cases[i].want);
		free(out);
	}
	free(a);
	free(gz);
	free(bad);
}

TAP_MAIN(TAP_ENTRY(members_come_out_whole_in_reads_of_any_size),
	 TAP_ENTRY(bytes_after_the_last_member_are_ignored),
	 TAP_ENTRY(streams_that_are_not_whole_gzip_are_refused))
