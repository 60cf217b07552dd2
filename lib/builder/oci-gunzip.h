/* SPDX-License-Identifier: MIT */
/*
 * A gzip layer blob inflated by ISA-L as it is read: members one after
 * another, each member's CRC-32 and length checked, bytes after the last
 * member ignored (what `gzip -d` and libarchive accept).
 */
#ifndef KILN_BUILDER_OCI_GUNZIP_H
#define KILN_BUILDER_OCI_GUNZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Up to @len compressed bytes into @buf: their count, 0 at the end, -errno. */
typedef ssize_t (*kiln_gunzip_read_fn)(void *ctx, void *buf, size_t len);

struct kiln_gunzip;

/* A reader of the gzip stream that @read gives. 0 or -ENOMEM. */
int kiln_gunzip_new(kiln_gunzip_read_fn read, void *ctx,
		    struct kiln_gunzip **out);
void kiln_gunzip_free(struct kiln_gunzip *gz);

/*
 * The next inflated bytes at *@out (valid until the next call): their
 * count, 0 at the end of the stream, or -errno: a failure of @read as it
 * returned it, -EILSEQ when the stream does not start as gzip does,
 * -EBADMSG when it is corrupt or cut short (kiln_gunzip_why() says how).
 */
ssize_t kiln_gunzip_next(struct kiln_gunzip *gz, const void **out);

/* What the last -EBADMSG or -EILSEQ was about. */
const char *kiln_gunzip_why(const struct kiln_gunzip *gz);

#endif
