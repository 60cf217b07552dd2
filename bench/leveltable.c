// SPDX-License-Identifier: MIT
/*
 * Level table per codec over one corpus file: ratio, compression and
 * decompression speed, and the workspace memory each level needs, with
 * the builder's own codec calls (64 KiB extents, as the extent layout).
 *
 * Usage: leveltable FILE [MAX_MIB] [CODEC...]   (default 8 MiB, all)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec/codec.h"

#define CHUNK		(64u * 1024)
#define CLASSIC_MAX_IN	(1u << 20)	/* compress/ctx.c: per pcluster */
#define MIN_DECODE_S	0.3

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *ws_alloc(size_t size)
{
	size_t n = size ? (size + 63) / 64 * 64 : 64;

	return aligned_alloc(64, n);
}

static int read_corpus(const char *path, size_t max, uint8_t **buf,
		       size_t *len)
{
	int fd = open(path, O_RDONLY);
	size_t got = 0;

	*buf = NULL;
	if (fd < 0)
		return -errno;
	*buf = malloc(max);
	if (!*buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < max) {
		ssize_t n = read(fd, *buf + got, max - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return got ? 0 : -EIO;
}

struct chunk {
	uint32_t in_len, out_len;	/* out_len 0: stored raw */
	size_t out_off;
};

/* One level: compress every chunk, decode them all again (verified). */
static int run_level(const struct kiln_codec_ops *ops, int level,
		     const uint8_t *in, size_t len)
{
	struct kiln_codec_params p = {
		.level = level, .blksz = 4096,
		.max_pcluster_size = CHUNK + 4096,
	};
	size_t cws = ops->compress_wsize(level, CHUNK);
	size_t cws_big = ops->compress_wsize(level, CLASSIC_MAX_IN);
	size_t dws = ops->decompress_wsize(CHUNK);
	size_t nr = (len + CHUNK - 1) / CHUNK, out_len = 0;
	struct chunk *ch = calloc(nr, sizeof(*ch));
	uint8_t *out = malloc(len + nr * 64), *dec = malloc(CHUNK);
	void *cw = ws_alloc(cws), *dw = ws_alloc(dws);
	double t0, tc, td, rounds = 0;
	char name[16];
	int err = -ENOMEM;

	if (!ch || !out || !dec || !cw || !dw)
		goto out;
	err = kiln_codec_cws_init(ops, cw, cws, &p);
	if (!err)
		err = kiln_codec_dws_init(ops, dw, dws);
	if (err)
		goto out;
	t0 = now_s();
	for (size_t i = 0; i < nr; i++) {
		size_t n = len - i * CHUNK < CHUNK ? len - i * CHUNK : CHUNK;
		ssize_t r = ops->compress(cw, level, out + out_len, n - 1,
					  in + i * CHUNK, n);

		ch[i].in_len = (uint32_t)n;
		ch[i].out_off = out_len;
		if (r == -ENOSPC) {
			memcpy(out + out_len, in + i * CHUNK, n);
			out_len += n;
			continue;
		}
		if (r < 0) {
			err = (int)r;
			goto out;
		}
		ch[i].out_len = (uint32_t)r;
		out_len += (size_t)r;
	}
	tc = now_s() - t0;
	t0 = now_s();
	do {
		for (size_t i = 0; i < nr; i++) {
			if (!ch[i].out_len)
				continue;
			err = ops->decompress(dw, dec, ch[i].in_len,
					      out + ch[i].out_off,
					      ch[i].out_len, false);
			if (!err && rounds == 0 &&
			    memcmp(dec, in + i * CHUNK, ch[i].in_len))
				err = -EIO;
			if (err)
				goto out;
		}
		rounds++;
		td = now_s() - t0;
	} while (td < MIN_DECODE_S);
	if (ops->id == KILN_CODEC_LZMA && level >= KILN_LZMA_EXTREME)
		snprintf(name, sizeof(name), "%de", level - KILN_LZMA_EXTREME);
	else
		snprintf(name, sizeof(name), "%d", level);
	printf("%-8s %6s %7.3f %10.1f %10.1f %12.2f %12.2f %10.2f\n",
	       ops->name, name, (double)len / (double)out_len,
	       (double)len / 1e6 / tc, rounds * (double)len / 1e6 / td,
	       (double)cws / 1048576.0, (double)cws_big / 1048576.0,
	       (double)dws / 1048576.0);
	fflush(stdout);
	err = 0;
out:
	if (cw)
		kiln_codec_cws_fini(ops, cw);
	if (dw)
		kiln_codec_dws_fini(ops, dw);
	free(cw);
	free(dw);
	free(ch);
	free(out);
	free(dec);
	return err;
}

static bool wanted(const char *name, int argc, char **argv)
{
	if (argc <= 3)
		return true;
	for (int i = 3; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	size_t max = 8u << 20, len = 0;
	uint8_t *in = NULL;
	int err;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [MAX_MIB] [CODEC...]\n", argv[0]);
		return 2;
	}
	if (argc > 2)
		max = (size_t)strtoul(argv[2], NULL, 10) << 20;
	err = read_corpus(argv[1], max, &in, &len);
	if (err) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(-err));
		return 1;
	}
	printf("# %s: %zu bytes in %u-byte extents\n", argv[1], len, CHUNK);
	printf("%-8s %6s %7s %10s %10s %12s %12s %10s\n", "codec", "level",
	       "ratio", "comp_MB/s", "dec_MB/s", "cws64K_MiB", "cws1M_MiB",
	       "dws_MiB");
	for (int id = KILN_CODEC_NONE + 1; id < KILN_CODEC_MAX; id++) {
		const struct kiln_codec_ops *ops = kiln_codec_get(id);

		if (!ops || !wanted(ops->name, argc, argv))
			continue;
		for (int level = ops->min_level; level <= ops->max_level;
		     level++) {
			if (level == 0 && ops->min_level < 0)
				continue;
			if (level < 0 && level != -1 && level != -5)
				continue;	/* a few fast levels are enough */
			if (!kiln_codec_level_ok(ops, level))
				continue;
			err = run_level(ops, level, in, len);
			if (err) {
				fprintf(stderr, "%s level %d: %s\n", ops->name,
					level, strerror(-err));
				free(in);
				return 1;
			}
		}
	}
	free(in);
	return 0;
}
