/* SPDX-License-Identifier: MIT */
/*
 * Test fixture: a file's data held in memory, read through the builder's
 * read callback (ctx: a struct memsrc).
 */
#ifndef KILN_TESTS_MEMSRC_H
#define KILN_TESTS_MEMSRC_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

struct memsrc {
	const uint8_t *data;
	uint64_t size;
};

/* @len bytes at @off of the struct memsrc @ctx; -EIO past its end. */
static inline int mem_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct memsrc *m = ctx;

	if (off > m->size || len > m->size - off)
		return -EIO;
	memcpy(buf, m->data + off, len);
	return 0;
}

#endif
