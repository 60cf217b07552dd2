// SPDX-License-Identifier: MIT
/*
 * The plan of shifted-copy dedupe (compress.h): content-defined chunks of
 * every big compressed file, counted over the distinct file contents, and
 * the cuts that make each shared chunk start and end an extent (a pcluster
 * in the classic layout).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "util/checked.h"
#include "util/fileio.h"
#include "util/grow.h"
#include "util/jobs.h"
#include "util/u64map.h"

/*
 * Chunks are CHUNK_MIN to CHUNK_MAX bytes long; past the minimum, a byte
 * ends a chunk when the top ANCHOR_BITS bits of the gear hash of the 64
 * bytes up to it are zero (one byte in 2^16: 64 KiB further on average).
 * Shorter chunks find shorter shared runs but cut more extents: over
 * /usr/lib/x86_64-linux-gnu, averages of 128 KiB, 320 KiB and 1 MiB find
 * 43.8, 40.7 and 27.4 MiB of copies that whole-file dedupe misses, and
 * with lz4hc and 128 KiB extents 16 to 19 bits gave images of 364.0,
 * 364.4, 364.7 and 365.8 MiB.
 */
#define CHUNK_MIN	(64u << 10)
#define CHUNK_MAX	(4u << 20)
#define ANCHOR_BITS	16
#define GEAR_WINDOW	64	/* a gear hash depends on this many bytes */
#define READ_SIZE	(1u << 20)
/*
 * Cuts pay only for long runs: every cut ends a pcluster early and starts
 * the next one afresh, about a block each, while what a shared run saves
 * is its compressed size. Runs shorter than this stay uncut. Measured at
 * zstd:3 (bench/README.md, "Measurements behind the defaults"): over the
 * Linux sources every shared run is in generated headers that compress
 * about 35 to 1 and their cuts cost more than they save; over
 * /usr/lib/x86_64-linux-gnu the runs that pay are copies of whole
 * libraries inside archives, megabytes long.
 */
#define SHARED_RUN_MIN	(2ull << 20)

struct chunk {
	uint64_t end;		/* file offset just past the chunk */
	uint64_t key;		/* content hash, length folded in */
};

/* One file of the plan; its chunks until the cuts are known. */
struct shift_file {
	size_t idx;			/* in b->order */
	uint32_t content;		/* its distinct content, from 1 */
	struct chunk *c;
	uint32_t nr;
	uint64_t *cuts;			/* then: the cuts, sorted */
	uint32_t nr_cuts;
};

struct kiln_zshift {
	struct shift_file *files;	/* by idx, ascending */
	size_t nr, cap;
};

/* The planning pass: one item per file, chunked by a worker. */
struct plan {
	struct kiln_build *b;
	struct kiln_zshift *zs;
	struct kiln_u64map chunks;	/* chunk key -> occurrences */
	struct kiln_u64map contents;	/* file contents -> their number */
	uint32_t nr_contents;		/* distinct contents so far */
	uint8_t **bufs;			/* one read buffer per worker */
	unsigned int nr_bufs;
	int err;			/* the committer's failure */
};

struct plan_item {
	size_t idx;
	struct chunk *c;
	uint32_t nr, cap;
};

static uint64_t gear[256];
static pthread_once_t gear_once = PTHREAD_ONCE_INIT;

/* Fixed pseudo-random values (splitmix64): the same in every build. */
static void gear_init(void)
{
	uint64_t x = 0x6b696c6e2d676561ull;

	for (int i = 0; i < 256; i++) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		gear[i] = z ^ (z >> 31);
	}
}

/*
 * Count @key for the distinct content number @content (from 1) unless
 * that content counted it already: a chunk repeated inside one file is
 * not a copy dedupe can share across files. The value holds the count in
 * its low half and the last content that counted it in its high half.
 */
static int table_add_once(struct kiln_u64map *t, uint64_t key,
			  uint32_t content)
{
	uint64_t *v;
	int r = kiln_u64map_insert(t, key, &v);

	if (r < 0)
		return r;
	if (*v >> 32 == content)
		return 0;
	*v = (uint64_t)content << 32 | ((*v & 0xffffffffu) + 1);
	return 0;
}

/* Whether the chunk @key is in two distinct contents or more. */
static bool chunk_shared(const struct kiln_u64map *t, uint64_t key)
{
	const uint64_t *v = kiln_u64map_get(t, key);

	return v && (*v & 0xffffffffu) >= 2;
}

static int item_push(struct plan_item *it, uint64_t end, uint64_t len,
		     XXH3_state_t *st)
{
	if (it->nr == it->cap) {
		uint32_t cap = it->cap ? 2 * it->cap : 16;
		struct chunk *c = realloc(it->c, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		it->c = c;
		it->cap = cap;
	}
	it->c[it->nr].end = end;
	it->c[it->nr].key = XXH3_64bits_digest(st) ^
			    len * 0x9e3779b97f4a7c15ull;
	it->nr++;
	return XXH3_64bits_reset(st) == XXH_OK ? 0 : -ENOMEM;
}

/* The chunker's state across read windows. */
struct chunker {
	uint64_t start;		/* of the chunk being read */
	uint64_t h;		/* gear hash */
};

/*
 * Feed bytes [@off, @off + @n) of the file; every chunk they complete is
 * pushed to @it.
 */
static int chunk_window(struct chunker *ck, struct plan_item *it,
			XXH3_state_t *st, const uint8_t *p, size_t n,
			uint64_t off)
{
	size_t i = 0, from = 0;

	while (i < n) {
		uint64_t hash_from = ck->start + CHUNK_MIN - GEAR_WINDOW;
		uint64_t cut_from = ck->start + CHUNK_MIN;
		size_t stop = (size_t)KILN_MIN((uint64_t)n,
					       ck->start + CHUNK_MAX - off);
		uint64_t h = ck->h;
		bool cut = false;
		int err;

		if (off + i < hash_from) {
			i = (size_t)KILN_MIN((uint64_t)n, hash_from - off);
			continue;
		}
		/* the first bytes of the window only fill the hash */
		for (; i < stop && off + i + 1 < cut_from; i++)
			h = (h << 1) + gear[p[i]];
		for (; i < stop; i++) {
			h = (h << 1) + gear[p[i]];
			if (!(h >> (64 - ANCHOR_BITS))) {
				cut = true;
				i++;
				break;
			}
		}
		ck->h = h;
		if (!cut && off + i < ck->start + CHUNK_MAX)
			break;		/* the window ends inside the chunk */
		if (XXH3_64bits_update(st, p + from, i - from) != XXH_OK)
			return -ENOMEM;
		from = i;
		err = item_push(it, off + i, off + i - ck->start, st);
		if (err)
			return err;
		ck->start = off + i;
		ck->h = 0;
	}
	if (from < n && XXH3_64bits_update(st, p + from, n - from) != XXH_OK)
		return -ENOMEM;
	return 0;
}

static int chunk_file(struct plan *pl, struct plan_item *it, uint8_t *buf)
{
	struct kiln_node *n = pl->b->order[it->idx];
	struct chunker ck = { 0 };
	XXH3_state_t *st;
	uint64_t off = 0;
	int fd, err = 0;

	fd = kiln_node_open(pl->b, n, NULL);
	if (fd < 0)
		return 0;	/* no cuts; the data pass says why */
	st = XXH3_createState();
	if (!st || XXH3_64bits_reset(st) != XXH_OK)
		err = -ENOMEM;
	while (!err && off < n->size) {
		size_t want = (size_t)KILN_MIN((uint64_t)READ_SIZE,
					       n->size - off);
		ssize_t got = kiln_pread_full(fd, buf, want, off);

		if (got != (ssize_t)want) {
			it->nr = 0;	/* changed or unreadable: no cuts */
			break;
		}
		err = chunk_window(&ck, it, st, buf, want, off);
		off += want;
	}
	if (!err && off == n->size && ck.start < n->size)
		err = item_push(it, n->size, n->size - ck.start, st);
	XXH3_freeState(st);
	close(fd);
	return err;
}

static int plan_process(void *ctx, void *item, unsigned int worker)
{
	struct plan *pl = ctx;

	return chunk_file(pl, item, pl->bufs[worker % pl->nr_bufs]);
}

/* Tree order: count the chunks of each distinct content once. */
static int plan_commit(void *ctx, void *item)
{
	struct plan *pl = ctx;
	struct plan_item *it = item;
	struct kiln_zshift *zs = pl->zs;
	struct shift_file *f;
	const uint64_t *number;
	uint64_t content, *slot;
	uint32_t content_nr;
	int err = 0;

	if (!it->nr)
		return 0;
	content = XXH3_64bits_withSeed(it->c, it->nr * sizeof(*it->c),
				       pl->b->order[it->idx]->size);
	number = kiln_u64map_get(&pl->contents, content);
	if (number) {
		content_nr = (uint32_t)*number;
	} else {
		content_nr = ++pl->nr_contents;
		err = kiln_u64map_insert(&pl->contents, content, &slot);
		if (err >= 0) {
			*slot = content_nr;
			err = 0;
		}
		for (uint32_t i = 0; !err && i < it->nr; i++)
			err = table_add_once(&pl->chunks, it->c[i].key,
					     content_nr);
	}
	if (!err)
		err = KILN_GROW(zs->files, zs->cap, zs->nr + 1);
	if (err) {
		pl->err = err;
		return err;
	}
	f = &zs->files[zs->nr++];
	memset(f, 0, sizeof(*f));
	f->idx = it->idx;
	f->content = content_nr;
	f->c = it->c;
	f->nr = it->nr;
	it->c = NULL;
	return 0;
}

static void plan_release(void *ctx, void *item)
{
	struct plan_item *it = item;

	(void)ctx;
	free(it->c);
	free(it);
}

static const struct kiln_jobs_ops plan_ops = {
	.process = plan_process,
	.commit = plan_commit,
	.release = plan_release,
};

/*
 * The runs of shared chunks [*@i, *@j) of @f from the chunk at *@i on,
 * *@run_start the file offset where the run starts; false at the end.
 */
static bool next_run(const struct kiln_u64map *shared,
		     const struct shift_file *f, uint32_t *i, uint32_t *j,
		     uint64_t *run_start)
{
	uint32_t k = *i;

	while (k < f->nr && !chunk_shared(shared, f->c[k].key))
		k++;
	if (k == f->nr)
		return false;
	*run_start = k ? f->c[k - 1].end : 0;
	*i = k;
	while (k < f->nr && chunk_shared(shared, f->c[k].key))
		k++;
	*j = k;
	return true;
}

/*
 * The chunks of @f's runs of SHARED_RUN_MIN or more, counted in @long_runs
 * for content @content: a run is cut only where another file has it long
 * too, or only one side would pay the cuts.
 */
static int mark_long_runs(const struct plan *pl, const struct shift_file *f,
			  struct kiln_u64map *long_runs, uint32_t content)
{
	uint64_t start;
	uint32_t i = 0, j;
	int err = 0;

	while (!err && next_run(&pl->chunks, f, &i, &j, &start)) {
		if (f->c[j - 1].end - start >= SHARED_RUN_MIN)
			for (uint32_t k = i; !err && k < j; k++)
				err = table_add_once(long_runs, f->c[k].key,
						     content);
		i = j;
	}
	return err;
}

/* Both ends of every chunk of @f that @long_runs shares, inside the file. */
static int file_cuts(const struct kiln_u64map *long_runs,
		     struct shift_file *f, uint64_t size)
{
	uint64_t start;
	uint32_t i = 0, j;

	f->cuts = malloc(2 * (size_t)f->nr * sizeof(*f->cuts));
	if (!f->cuts)
		return -ENOMEM;
	while (next_run(long_runs, f, &i, &j, &start)) {
		if (start)
			f->cuts[f->nr_cuts++] = start;
		for (; i < j; i++)
			if (f->c[i].end < size)
				f->cuts[f->nr_cuts++] = f->c[i].end;
	}
	free(f->c);
	f->c = NULL;
	return 0;
}

/* Files worth chunking: compressed, with dedupe, big enough. */
static bool plan_wants(struct kiln_build *b, const struct kiln_node *n)
{
	struct kiln_zctx *zc;

	if (!S_ISREG(n->mode) || n->size < 2 * (uint64_t)CHUNK_MIN ||
	    (n->flags & KILN_NODE_STREAMED))
		return false;
	zc = kiln_node_zctx(b, n);
	return zc && kiln_zctx_dedupe(zc);
}

static int plan_run(struct plan *pl)
{
	struct kiln_build *b = pl->b;
	struct kiln_jobs_conf conf = {
		.ops = &plan_ops,
		.ctx = pl,
		.pool = kiln_build_pool(b),
		.threads = 1,
		.max_items = kiln_build_max_items(b),
	};
	struct kiln_jobs *jobs;
	int err, ferr;

	err = kiln_jobs_new(&conf, &jobs);
	if (err)
		return err;
	pl->nr_bufs = kiln_jobs_workers(jobs);
	pl->bufs = calloc(pl->nr_bufs, sizeof(*pl->bufs));
	err = pl->bufs ? 0 : -ENOMEM;
	for (unsigned int i = 0; !err && i < pl->nr_bufs; i++) {
		pl->bufs[i] = malloc(READ_SIZE);
		if (!pl->bufs[i])
			err = -ENOMEM;
	}
	for (size_t i = 0; !err && i < b->nr_nodes; i++) {
		struct plan_item *it;

		if (!plan_wants(b, b->order[i]))
			continue;
		it = calloc(1, sizeof(*it));
		if (!it) {
			err = -ENOMEM;
			break;
		}
		it->idx = i;
		err = kiln_jobs_submit(jobs, it, 1);
	}
	ferr = kiln_jobs_finish(jobs);
	kiln_jobs_free(jobs);
	for (unsigned int i = 0; pl->bufs && i < pl->nr_bufs; i++)
		free(pl->bufs[i]);
	free(pl->bufs);
	return err ? err : ferr;
}

int kiln_zshift_plan(struct kiln_build *b)
{
	struct plan pl = { .b = b };
	struct kiln_u64map long_runs;
	struct kiln_zshift *zs;
	size_t kept = 0;
	uint64_t nr_cuts = 0;
	int err;

	b->zshift = NULL;
	if (!b->zctx ||
	    !(b->opts.compress_flags & KILN_COMPRESS_DEDUPE_SHIFTED))
		return 0;
	pthread_once(&gear_once, gear_init);
	kiln_u64map_init(&pl.chunks);
	kiln_u64map_init(&pl.contents);
	kiln_u64map_init(&long_runs);
	zs = calloc(1, sizeof(*zs));
	if (!zs)
		return -ENOMEM;
	pl.zs = zs;
	err = plan_run(&pl);
	for (size_t i = 0; !err && i < zs->nr; i++)
		err = mark_long_runs(&pl, &zs->files[i], &long_runs,
				     zs->files[i].content);
	for (size_t i = 0; !err && i < zs->nr; i++)
		err = file_cuts(&long_runs, &zs->files[i],
				b->order[zs->files[i].idx]->size);
	kiln_u64map_release(&long_runs);
	kiln_u64map_release(&pl.chunks);
	kiln_u64map_release(&pl.contents);
	if (err) {
		kiln_zshift_free(zs);
		return err;
	}
	/* keep only the files with cuts */
	for (size_t i = 0; i < zs->nr; i++) {
		if (zs->files[i].nr_cuts) {
			char path[256];

			kiln_log(&b->lg, KILN_LOG_DEBUG,
				 "shifted dedupe: %s: %u extent cuts",
				 kiln_node_path(b, b->order[zs->files[i].idx],
						path, sizeof(path)),
				 zs->files[i].nr_cuts);
			nr_cuts += zs->files[i].nr_cuts;
			zs->files[kept++] = zs->files[i];
		} else {
			free(zs->files[i].cuts);
		}
	}
	zs->nr = kept;
	if (!kept) {
		kiln_zshift_free(zs);
		return 0;
	}
	kiln_log(&b->lg, KILN_LOG_INFO,
		 "shifted dedupe: %zu files share chunks, %llu extent cuts",
		 kept, (unsigned long long)nr_cuts);
	b->zshift = zs;
	return 0;
}

bool kiln_zshift_cuts(const struct kiln_zshift *zs, size_t idx,
		      struct kiln_zcuts *cuts)
{
	size_t lo = 0, hi = zs ? zs->nr : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (zs->files[mid].idx < idx) {
			lo = mid + 1;
		} else if (zs->files[mid].idx > idx) {
			hi = mid;
		} else {
			cuts->at = zs->files[mid].cuts;
			cuts->nr = zs->files[mid].nr_cuts;
			return true;
		}
	}
	return false;
}

void kiln_zshift_free(struct kiln_zshift *zs)
{
	if (!zs)
		return;
	for (size_t i = 0; i < zs->nr; i++) {
		free(zs->files[i].c);
		free(zs->files[i].cuts);
	}
	free(zs->files);
	free(zs);
}
