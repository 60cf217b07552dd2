// SPDX-License-Identifier: MIT
/*
 * Read throughput of one file through libkiln's reader, the way fio drives
 * a mount: sequential reads of a block size, or random reads of a block
 * size by N threads, optionally forcing the decode-to-scratch-then-copy path
 * or disabling the decompressed-extent cache.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kiln/image.h>

struct bench_args {
	const char *image;
	const char *path;
	size_t bs;
	uint64_t offset;
	uint64_t size;		/* region read; 0 = to EOF */
	uint64_t io_size;	/* bytes per job; 0 = region size */
	unsigned int jobs;
	int random;
	unsigned int flags;
	enum kiln_cache_mode cache;
};

struct job {
	const struct bench_args *a;
	struct kiln_image *img;
	kiln_nid_t nid;
	unsigned int seed;
	uint64_t bytes;
	uint64_t ios;
	int err;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64*: a fixed sequence per job, like fio's randrepeat. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static void *run_job(void *arg)
{
	struct job *j = arg;
	const struct bench_args *a = j->a;
	struct kiln_file *f;
	uint64_t region, todo, pos, rnd = 0x9E3779B97F4A7C15ull + j->seed;
	char *buf;
	int err;

	err = kiln_file_open(j->img, j->nid, &f);
	if (err) {
		j->err = err;
		return NULL;
	}
	buf = malloc(a->bs);
	if (!buf) {
		kiln_file_close(f);
		j->err = -ENOMEM;
		return NULL;
	}
	region = a->size ? a->size : kiln_file_size(f) - a->offset;
	todo = a->io_size ? a->io_size : region;
	pos = 0;
	while (todo) {
		uint64_t off;
		size_t want = a->bs;
		ssize_t n;

		if (a->random) {
			uint64_t nblocks = region / a->bs;

			off = a->offset + (nblocks ? next_rand(&rnd) % nblocks : 0) * a->bs;
		} else {
			off = a->offset + pos;
			if (pos >= region)
				break;
			if (want > region - pos)
				want = region - pos;
		}
		n = kiln_file_pread(f, buf, want, off);
		if (n < 0) {
			j->err = (int)n;
			break;
		}
		if (n == 0)
			break;
		j->bytes += n;
		j->ios++;
		pos += n;
		todo = todo > (uint64_t)n ? todo - n : 0;
	}
	free(buf);
	kiln_file_close(f);
	return NULL;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': return v << 10;
	case 'm': case 'M': return v << 20;
	case 'g': case 'G': return v << 30;
	default: return v;
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: readbench [--rand] [--bs N] [--jobs N] [--offset N] [--size N]\n"
		"                 [--io-size N] [--force-copy] [--cache-none] IMAGE PATH\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rand", no_argument, NULL, 'r' },
		{ "bs", required_argument, NULL, 'b' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "offset", required_argument, NULL, 'o' },
		{ "size", required_argument, NULL, 's' },
		{ "io-size", required_argument, NULL, 'i' },
		{ "force-copy", no_argument, NULL, 'c' },
		{ "cache-none", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_args a = { .bs = 4096, .jobs = 1 };
	struct kiln_image_opts o = { .struct_size = sizeof(o) };
	struct kiln_image *img;
	pthread_t tids[64];
	struct job jobs[64];
	uint64_t bytes = 0, ios = 0;
	kiln_nid_t nid;
	double t0, dt;
	int c, err;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': a.random = 1; break;
		case 'b': a.bs = parse_size(optarg); break;
		case 'j': a.jobs = atoi(optarg); break;
		case 'o': a.offset = parse_size(optarg); break;
		case 's': a.size = parse_size(optarg); break;
		case 'i': a.io_size = parse_size(optarg); break;
		case 'c': a.flags |= KILN_IMAGE_FORCE_COPY; break;
		case 'n': a.cache = KILN_CACHE_NONE; break;
		default: usage();
		}
	}
	if (argc - optind != 2 || !a.bs || !a.jobs || a.jobs > 64)
		usage();
	a.image = argv[optind];
	a.path = argv[optind + 1];
	o.flags = a.flags;
	o.cache = a.cache;
	err = kiln_image_open(&img, a.image, &o);
	if (err) {
		fprintf(stderr, "readbench: %s: %s\n", a.image, kiln_strerror(err));
		return 1;
	}
	err = kiln_resolve(img, a.path, KILN_RESOLVE_FOLLOW, &nid);
	if (err) {
		fprintf(stderr, "readbench: %s: %s\n", a.path, kiln_strerror(err));
		return 1;
	}
	t0 = now();
	for (unsigned int i = 0; i < a.jobs; i++) {
		jobs[i] = (struct job){ .a = &a, .img = img, .nid = nid, .seed = i };
		pthread_create(&tids[i], NULL, run_job, &jobs[i]);
	}
	for (unsigned int i = 0; i < a.jobs; i++) {
		pthread_join(tids[i], NULL);
		if (jobs[i].err) {
			fprintf(stderr, "readbench: %s: %s\n", a.path,
				kiln_strerror(jobs[i].err));
			return 1;
		}
		bytes += jobs[i].bytes;
		ios += jobs[i].ios;
	}
	dt = now() - t0;
	printf("bytes=%" PRIu64 " ios=%" PRIu64 " seconds=%.3f MiB/s=%.1f IOPS=%.0f\n",
	       bytes, ios, dt, bytes / dt / 1048576.0, ios / dt);
	kiln_image_close(img);
	return 0;
}
