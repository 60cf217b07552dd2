// SPDX-License-Identifier: MIT
/*
 * Gzip layer blobs inflated with ISA-L's igzip: a flattened OCI build reads
 * every blob twice, and zlib's inflate (through libarchive) was most of
 * the time of an uncompressed build (bench/README.md, "OCI images").
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/igzip_lib.h>

#include "builder/oci-gunzip.h"

#define GUNZIP_IN	(256u * 1024)	/* compressed bytes per read */
#define GUNZIP_OUT	(1u << 20)	/* inflated bytes per call */

struct kiln_gunzip {
	kiln_gunzip_read_fn read;
	void *ctx;
	struct inflate_state st;
	uint8_t *in, *out;
	bool eof;		/* @read said 0 */
	bool member;		/* inside a member (its header seen) */
	bool done;		/* the last member ended, nothing follows */
	uint64_t members;	/* members ended */
	const char *why;
};

int kiln_gunzip_new(kiln_gunzip_read_fn read, void *ctx,
		    struct kiln_gunzip **out)
{
	struct kiln_gunzip *gz = calloc(1, sizeof(*gz));

	*out = NULL;
	if (!gz)
		return -ENOMEM;
	gz->in = malloc(GUNZIP_IN);
	gz->out = malloc(GUNZIP_OUT);
	if (!gz->in || !gz->out) {
		kiln_gunzip_free(gz);
		return -ENOMEM;
	}
	gz->read = read;
	gz->ctx = ctx;
	isal_inflate_init(&gz->st);
	gz->st.crc_flag = ISAL_GZIP;
	*out = gz;
	return 0;
}

void kiln_gunzip_free(struct kiln_gunzip *gz)
{
	if (!gz)
		return;
	free(gz->in);
	free(gz->out);
	free(gz);
}

const char *kiln_gunzip_why(const struct kiln_gunzip *gz)
{
	return gz->why ? gz->why : "no error";
}

static ssize_t gunzip_fail(struct kiln_gunzip *gz, int err, const char *why)
{
	gz->why = why;
	return err;
}

/* More compressed bytes when none are left: 0, or -errno from @read. */
static int gunzip_fill(struct kiln_gunzip *gz)
{
	ssize_t n;

	if (gz->st.avail_in || gz->eof)
		return 0;
	n = gz->read(gz->ctx, gz->in, GUNZIP_IN);
	if (n < 0)
		return (int)n;
	if (!n)
		gz->eof = true;
	gz->st.next_in = gz->in;
	gz->st.avail_in = (uint32_t)n;
	return 0;
}

/* Whether the bytes left start another member (its two magic bytes). */
static int gunzip_next_member(struct kiln_gunzip *gz, bool *more)
{
	int err;

	*more = false;
	err = gunzip_fill(gz);
	if (err || !gz->st.avail_in)
		return err;
	if (gz->st.next_in[0] != 0x1f)
		return 0;
	if (gz->st.avail_in == 1) {
		/* the second magic byte is in the next read */
		ssize_t n = gz->read(gz->ctx, gz->in + 1, GUNZIP_IN - 1);

		if (n < 0)
			return (int)n;
		gz->in[0] = 0x1f;	/* the first, moved to the front */
		gz->st.next_in = gz->in;
		gz->st.avail_in = 1 + (uint32_t)n;
		if (!n) {
			gz->eof = true;
			return 0;
		}
	}
	*more = gz->st.next_in[1] == 0x8b;
	return 0;
}

/* Start the next member on the input that is left. */
static void gunzip_restart(struct kiln_gunzip *gz)
{
	uint8_t *next = gz->st.next_in;
	uint32_t avail = gz->st.avail_in;

	isal_inflate_reset(&gz->st);
	gz->st.crc_flag = ISAL_GZIP;
	gz->st.next_in = next;
	gz->st.avail_in = avail;
}

/* Map an error of isal_inflate() to -EILSEQ or -EBADMSG and its reason. */
static ssize_t gunzip_error(struct kiln_gunzip *gz, int r)
{
	const bool first = !gz->members && !gz->member;

	if (r == ISAL_INVALID_WRAPPER || r == ISAL_UNSUPPORTED_METHOD)
		return first ? gunzip_fail(gz, -EILSEQ, "it has no gzip header") :
			       gunzip_fail(gz, -EBADMSG,
					   "a gzip member's header is corrupt");
	if (r == ISAL_INCORRECT_CHECKSUM)
		return gunzip_fail(gz, -EBADMSG,
				   "a gzip member fails its CRC-32 or length");
	return gunzip_fail(gz, -EBADMSG, "the deflate data are corrupt");
}

ssize_t kiln_gunzip_next(struct kiln_gunzip *gz, const void **out)
{
	*out = gz->out;
	while (!gz->done) {
		int err, r;

		if (gz->st.block_state == ISAL_BLOCK_FINISH) {
			bool more;

			gz->members++;
			gz->member = false;
			err = gunzip_next_member(gz, &more);
			if (err)
				return err;
			if (!more) {
				gz->done = true;
				break;
			}
			gunzip_restart(gz);
		}
		err = gunzip_fill(gz);
		if (err)
			return err;
		/* also with no input left: output it holds comes out */
		gz->st.next_out = gz->out;
		gz->st.avail_out = GUNZIP_OUT;
		r = isal_inflate(&gz->st);
		if (r < 0 || r == ISAL_NEED_DICT)
			return gunzip_error(gz, r);
		if (gz->st.block_state != ISAL_BLOCK_NEW_HDR)
			gz->member = true;
		if (gz->st.next_out != gz->out)
			return (ssize_t)(gz->st.next_out - gz->out);
		if (gz->st.block_state == ISAL_BLOCK_FINISH)
			continue;
		if (!gz->st.avail_in && gz->eof)
			return !gz->members && !gz->member ?
				       gunzip_fail(gz, -EILSEQ, "it is empty") :
				       gunzip_fail(gz, -EBADMSG,
						   "the gzip stream is cut short");
	}
	return 0;
}
