// SPDX-License-Identifier: MIT
/*
 * lib/source/lazy.c: units fetched once and merged, pointers that stay
 * valid, failures that leave nothing behind, many threads at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "source/cache.h"
#include "source/source.h"
#include "tap.h"

#define UNIT (512u << 10)

/* A source of @size bytes (byte i is i * 7 + i / 4096) with knobs. */
struct fake {
	struct kiln_source base;
	atomic_int calls;
	atomic_int fail;	/* fail this many fetches with -EIO */
	atomic_ullong fetched;
	uint64_t last_off, last_len;
	unsigned int delay_us;
	atomic_int batches;	/* fetch_many calls */
	atomic_int widest;	/* most ranges in one of them */
};

static uint8_t byte_at(uint64_t i)
{
	return (uint8_t)(i * 7 + i / 4096);
}

static int fake_fetch(struct kiln_source *src, void *dst, size_t len,
		      uint64_t off)
{
	struct fake *f = (struct fake *)src;
	uint8_t *d = dst;

	atomic_fetch_add(&f->calls, 1);
	if (f->delay_us)
		usleep(f->delay_us);
	if (atomic_load(&f->fail) > 0) {
		atomic_fetch_sub(&f->fail, 1);
		/* a partial body: what arrived must never be served */
		memset(d, 0xEE, len / 2);
		return -EIO;
	}
	for (size_t k = 0; k < len; k++)
		d[k] = byte_at(off + k);
	f->last_off = off;
	f->last_len = len;
	atomic_fetch_add(&f->fetched, len);
	return 0;
}

static int fake_fetch_many(struct kiln_source *src, struct kiln_fetch *fr,
			   unsigned int n)
{
	struct fake *f = (struct fake *)src;
	int first = 0, w = atomic_load(&f->widest);

	atomic_fetch_add(&f->batches, 1);
	while ((int)n > w && !atomic_compare_exchange_weak(&f->widest, &w,
							   (int)n))
		;
	for (unsigned int i = 0; i < n; i++) {
		fr[i].err = fake_fetch(src, fr[i].dst, fr[i].len, fr[i].off);
		if (fr[i].err && !first)
			first = fr[i].err;
	}
	return first;
}

static void fake_close(struct kiln_source *src)
{
	(void)src;
}

static const struct kiln_source_ops fake_ops = {
	.fetch = fake_fetch,
	.fetch_many = fake_fetch_many,
	.close = fake_close,
};

static const struct kiln_logger quiet;

static void fake_init(struct fake *f, uint64_t size)
{
	memset(f, 0, sizeof(*f));
	f->base.ops = &fake_ops;
	f->base.lg = &quiet;
	f->base.size = size;
}

static struct kiln_lazy *lazy_of(struct fake *f)
{
	struct kiln_lazy *lz = NULL;
	char dir[] = "/tmp/kiln-test-source-XXXXXX";

	if (!mkdtemp(dir))
		return NULL;
	if (kiln_lazy_open(&lz, &f->base, NULL, UNIT))
		lz = NULL;
	rmdir(dir);	/* the backing file is unlinked: the view keeps it */
	return lz;
}

static bool bytes_ok(const uint8_t *p, uint64_t off, uint64_t len)
{
	for (uint64_t k = 0; k < len; k++)
		if (p[k] != byte_at(off + k))
			return false;
	return true;
}

TEST(a_unit_is_fetched_once)
{
	struct fake f;
	struct kiln_lazy *lz;

	fake_init(&f, 5 * (uint64_t)UNIT + 100);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	CHECK_EQ(kiln_lazy_ensure(lz, 10, 100), 0);
	CHECK_EQ(kiln_lazy_ensure(lz, 1000, 4096), 0);
	CHECK_EQ(atomic_load(&f.calls), 1);
	CHECK_EQ(f.last_off, 0);
	CHECK_EQ(f.last_len, UNIT);
	CHECK(bytes_ok(kiln_lazy_map(lz) + 10, 10, UNIT - 10));
	CHECK_EQ(atomic_load(&f.base.count.hits), 1);
	CHECK_EQ(atomic_load(&f.base.count.misses), 1);
	kiln_lazy_close(lz);
}

TEST(adjacent_missing_units_are_one_request)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint64_t size = 5 * (uint64_t)UNIT + 100;

	fake_init(&f, size);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	CHECK_EQ(kiln_lazy_ensure(lz, 2 * (uint64_t)UNIT, 1), 0);
	CHECK_EQ(atomic_load(&f.calls), 1);
	/* units 0, 1 missing, 2 present, 3..5 missing: two requests */
	CHECK_EQ(kiln_lazy_ensure(lz, 0, size), 0);
	CHECK_EQ(atomic_load(&f.calls), 3);
	CHECK_EQ(f.last_off, 3 * (uint64_t)UNIT);
	CHECK_EQ(f.last_len, 2 * (uint64_t)UNIT + 100);	/* the short tail */
	CHECK(bytes_ok(kiln_lazy_map(lz), 0, size));
	kiln_lazy_close(lz);
}

/* Wait (up to 10 s) until @f has delivered @bytes in all. */
static bool wait_fetched(struct fake *f, uint64_t bytes)
{
	for (int i = 0; i < 10000 && atomic_load(&f->fetched) < bytes; i++)
		usleep(1000);
	return atomic_load(&f->fetched) == bytes;
}

TEST(reading_in_order_reads_ahead_in_the_background)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint64_t size = 40 * (uint64_t)UNIT, ra = KILN_LAZY_READAHEAD;

	fake_init(&f, size);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	CHECK_EQ(kiln_lazy_ensure(lz, 0, 100), 0);
	CHECK_EQ(f.last_len, UNIT);
	/*
	 * The next unit, right after a present one: it comes now, and the
	 * window after it in the background.
	 */
	CHECK_EQ(kiln_lazy_ensure(lz, UNIT, 100), 0);
	CHECK(wait_fetched(&f, 2 * (uint64_t)UNIT + ra));
	CHECK_EQ(atomic_load(&f.calls), 3);
	CHECK_EQ(f.last_off, 2 * (uint64_t)UNIT);
	CHECK_EQ(f.last_len, ra);
	/*
	 * Reading into that window proves the stream: the two windows
	 * after it come, one request each.
	 */
	CHECK_EQ(kiln_lazy_ensure(lz, 2 * (uint64_t)UNIT, ra), 0);
	CHECK(wait_fetched(&f, 2 * (uint64_t)UNIT + 3 * ra));
	CHECK_EQ(f.last_len, ra);
	/* and no more, however often it is read */
	CHECK_EQ(kiln_lazy_ensure(lz, 2 * (uint64_t)UNIT, ra), 0);
	CHECK_EQ(atomic_load(&f.calls), 5);
	/* the second window's first read queues the fourth */
	CHECK_EQ(kiln_lazy_ensure(lz, 2 * (uint64_t)UNIT + ra, 10), 0);
	CHECK(wait_fetched(&f, 2 * (uint64_t)UNIT + 4 * ra));
	CHECK_EQ(f.last_off, 2 * (uint64_t)UNIT + 3 * ra);
	CHECK_EQ(atomic_load(&f.calls), 6);
	/* a random miss far away fetches only its own unit */
	CHECK_EQ(kiln_lazy_ensure(lz, 38 * (uint64_t)UNIT + 5, 10), 0);
	CHECK_EQ(f.last_len, UNIT);
	CHECK_EQ(atomic_load(&f.calls), 7);
	CHECK(bytes_ok(kiln_lazy_map(lz), 0, 2 * (uint64_t)UNIT + 4 * ra));
	kiln_lazy_close(lz);
}

TEST(reads_inside_a_window_queue_one_more_each_time_it_is_entered)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint64_t size = 40 * (uint64_t)UNIT, ra = KILN_LAZY_READAHEAD;
	uint64_t w = 2 * (uint64_t)UNIT;	/* the first window */

	fake_init(&f, size);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	CHECK_EQ(kiln_lazy_ensure(lz, 0, 100), 0);
	CHECK_EQ(kiln_lazy_ensure(lz, UNIT, 100), 0);
	CHECK(wait_fetched(&f, w + ra));
	/*
	 * Reads in the middle of that window, as random reads next to an
	 * earlier one: the window after it, once, and no second one.
	 */
	CHECK_EQ(kiln_lazy_ensure(lz, w + ra / 2, 10), 0);
	CHECK(wait_fetched(&f, w + 2 * ra));
	CHECK_EQ(kiln_lazy_ensure(lz, w + ra / 2 + UNIT, 10), 0);
	CHECK_EQ(kiln_lazy_ensure(lz, w + ra / 4, 10), 0);
	usleep(100000);
	CHECK_EQ(atomic_load(&f.fetched), w + 2 * ra);
	CHECK_EQ(atomic_load(&f.calls), 4);
	/* the second window, entered in its middle too: one more */
	CHECK_EQ(kiln_lazy_ensure(lz, w + ra + ra / 2, 10), 0);
	CHECK(wait_fetched(&f, w + 3 * ra));
	CHECK_EQ(f.last_off, w + 2 * ra);
	CHECK_EQ(atomic_load(&f.calls), 5);
	kiln_lazy_close(lz);
}

/*
 * A fake whose fetches of a readahead window take a while: are two in
 * flight at once?
 */
static atomic_int in_flight, most_in_flight;

static int slow_fetch(struct kiln_source *src, void *dst, size_t len,
		      uint64_t off)
{
	int now, most, err;

	if (len <= UNIT)	/* a read's own unit */
		return fake_fetch(src, dst, len, off);
	now = atomic_fetch_add(&in_flight, 1) + 1;
	most = atomic_load(&most_in_flight);
	while (now > most &&
	       !atomic_compare_exchange_weak(&most_in_flight, &most, now))
		;
	usleep(100000);
	err = fake_fetch(src, dst, len, off);
	atomic_fetch_sub(&in_flight, 1);
	return err;
}

static const struct kiln_source_ops slow_ops = {
	.fetch = slow_fetch,
	.close = fake_close,
};

TEST(the_next_window_is_asked_for_while_one_is_coming)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint64_t size = 40 * (uint64_t)UNIT;

	fake_init(&f, size);
	f.base.ops = &slow_ops;
	atomic_store(&most_in_flight, 0);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	CHECK_EQ(kiln_lazy_ensure(lz, 0, 100), 0);
	CHECK_EQ(kiln_lazy_ensure(lz, UNIT, 100), 0);
	/* a reader that goes through the file in order */
	for (uint64_t off = 2 * (uint64_t)UNIT; off < size; off += UNIT)
		CHECK_EQ(kiln_lazy_ensure(lz, off, UNIT), 0);
	/* windows of the readahead threads, the reader's units aside */
	CHECK_EQ(atomic_load(&most_in_flight), 2);
	CHECK(bytes_ok(kiln_lazy_map(lz), 0, size));
	CHECK_EQ(atomic_load(&f.fetched), size);
	kiln_lazy_close(lz);
}

TEST(a_run_is_bounded)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint64_t size = 3 * (uint64_t)KILN_LAZY_MAX_RUN;

	fake_init(&f, size);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	CHECK_EQ(kiln_lazy_ensure(lz, 0, size), 0);
	CHECK_EQ(atomic_load(&f.calls), 3);
	CHECK_EQ(f.last_len, KILN_LAZY_MAX_RUN);
	kiln_lazy_close(lz);
}

TEST(a_miss_in_the_hot_range_takes_its_window)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint64_t size = 60 * (uint64_t)UNIT + 100;
	uint64_t lo = 37 * (uint64_t)UNIT + 4096;	/* not unit-aligned */
	uint64_t w = KILN_LAZY_MAX_RUN;

	fake_init(&f, size);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	kiln_lazy_set_hot(lz, lo, size);
	/* outside the range: one unit, as before */
	CHECK_EQ(kiln_lazy_ensure(lz, 10 * (uint64_t)UNIT, 10), 0);
	CHECK_EQ(f.last_len, UNIT);
	/* inside: the window from the range's unit, whatever the offset */
	CHECK_EQ(kiln_lazy_ensure(lz, 40 * (uint64_t)UNIT, 10), 0);
	CHECK_EQ(f.last_off, 37 * (uint64_t)UNIT);
	CHECK_EQ(f.last_len, w);
	/* the next window, cut at the range's end */
	CHECK_EQ(kiln_lazy_ensure(lz, size - 50, 50), 0);
	CHECK_EQ(f.last_off, 37 * (uint64_t)UNIT + w);
	CHECK_EQ(f.last_len, size - (37 * (uint64_t)UNIT + w));
	CHECK_EQ(atomic_load(&f.calls), 3);
	/* the whole range is here: no more requests */
	CHECK_EQ(kiln_lazy_ensure(lz, lo, size - lo), 0);
	CHECK_EQ(atomic_load(&f.calls), 3);
	CHECK(bytes_ok(kiln_lazy_map(lz) + lo, lo, size - lo));
	kiln_lazy_close(lz);
}

TEST(a_failed_fetch_leaves_nothing_behind)
{
	struct fake f;
	struct kiln_lazy *lz;

	fake_init(&f, 2 * (uint64_t)UNIT);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	atomic_store(&f.fail, 1);
	CHECK_EQ(kiln_lazy_ensure(lz, UNIT, 10), -EIO);
	CHECK_EQ(atomic_load(&f.base.count.failures), 1);
	/* the next read fetches again and never sees the partial bytes */
	CHECK_EQ(kiln_lazy_ensure(lz, UNIT, 10), 0);
	CHECK_EQ(atomic_load(&f.calls), 2);
	CHECK(bytes_ok(kiln_lazy_map(lz) + UNIT, UNIT, UNIT));
	kiln_lazy_close(lz);
}

TEST(the_probe_head_is_kept)
{
	struct fake f;
	struct kiln_lazy *lz;
	uint8_t *head = malloc(UNIT);

	CHECK(head != NULL);
	if (!head)
		return;
	fake_init(&f, 3 * (uint64_t)UNIT);
	for (uint64_t k = 0; k < UNIT; k++)
		head[k] = byte_at(k);
	f.base.head = head;
	f.base.head_len = UNIT;
	lz = lazy_of(&f);
	if (lz) {
		CHECK_EQ(kiln_lazy_ensure(lz, 0, UNIT), 0);
		CHECK_EQ(atomic_load(&f.calls), 0);
		CHECK(bytes_ok(kiln_lazy_map(lz), 0, UNIT));
	}
	CHECK(lz != NULL);
	kiln_lazy_close(lz);
	free(head);
}

struct reader {
	struct kiln_lazy *lz;
	uint64_t size;
	unsigned int seed;
	int bad;
};

static void *read_random(void *arg)
{
	struct reader *r = arg;

	for (int i = 0; i < 300; i++) {
		uint64_t off = (uint64_t)rand_r(&r->seed) % r->size;
		uint64_t len = 1 + (uint64_t)rand_r(&r->seed) % (3 * UNIT);

		if (len > r->size - off)
			len = r->size - off;
		if (kiln_lazy_ensure(r->lz, off, len) ||
		    !bytes_ok(kiln_lazy_map(r->lz) + off, off, len))
			r->bad++;
	}
	return NULL;
}

TEST(threads_share_units_and_see_right_bytes)
{
	struct fake f;
	struct kiln_lazy *lz;
	struct reader r[6];
	pthread_t t[6];
	uint64_t size = 40 * (uint64_t)UNIT + 12345;

	fake_init(&f, size);
	f.delay_us = 200;
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	for (int k = 0; k < 6; k++) {
		r[k] = (struct reader){ .lz = lz, .size = size,
					.seed = (unsigned int)k + 1 };
		pthread_create(&t[k], NULL, read_random, &r[k]);
	}
	for (int k = 0; k < 6; k++) {
		pthread_join(t[k], NULL);
		CHECK_EQ(r[k].bad, 0);
	}
	/* every unit came exactly once */
	CHECK(atomic_load(&f.fetched) <= size);
	kiln_lazy_close(lz);
}

TEST(a_huge_claimed_size_is_refused)
{
	struct fake f;
	struct kiln_lazy *lz = NULL;

	fake_init(&f, 1ull << 60);
	CHECK_EQ(kiln_lazy_open(&lz, &f.base, NULL, UNIT), -EFBIG);
	CHECK(lz == NULL);
}

/* -- the chunk cache ----------------------------------------------------- */

static char *cache_dir(void)
{
	static char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/kiln-test-cache-XXXXXX");
	return mkdtemp(dir);
}

static void rm_rf(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# could not remove %s\n", dir);
}

static uint8_t *pattern(size_t len, uint8_t seed)
{
	uint8_t *p = malloc(len);

	for (size_t k = 0; p && k < len; k++)
		p[k] = (uint8_t)(k * 13 + seed);
	return p;
}

/* The one chunk file of unit @unit under @dir (a single image). */
static bool chunk_path(const char *dir, uint64_t unit, char *out, size_t cap)
{
	char top[128];
	struct dirent *e;
	DIR *d;
	bool found = false;

	snprintf(top, sizeof(top), "%s/v1", dir);
	d = opendir(top);
	while (d && (e = readdir(d)))
		if (strlen(e->d_name) == 16) {
			snprintf(out, cap, "%s/%s/%016llx", top, e->d_name,
				 (unsigned long long)unit);
			found = true;
		}
	if (d)
		closedir(d);
	return found;
}

TEST(cache_round_trip_and_identity)
{
	char *dir = cache_dir();
	struct kiln_cache *c = NULL, *other = NULL;
	uint8_t *a = pattern(UNIT, 1), *b = malloc(UNIT);

	CHECK(dir && a && b);
	if (!dir || !a || !b)
		goto out;
	CHECK_EQ(kiln_cache_open(&c, dir, "http://x/i", "10 \"e1\"", UNIT, 0,
				 &quiet), 0);
	CHECK(!kiln_cache_load(c, 3, b, UNIT));
	kiln_cache_store(c, 3, a, UNIT);
	CHECK(kiln_cache_load(c, 3, b, UNIT));
	CHECK(!memcmp(a, b, UNIT));
	/* the same URL now showing another ETag: the old chunk is not served */
	CHECK_EQ(kiln_cache_open(&other, dir, "http://x/i", "10 \"e2\"", UNIT,
				 0, &quiet), 0);
	CHECK(!kiln_cache_load(other, 3, b, UNIT));
	kiln_cache_close(other);
	kiln_cache_close(c);
out:
	free(a);
	free(b);
	if (dir)
		rm_rf(dir);
}

TEST(a_damaged_or_torn_chunk_is_dropped)
{
	char *dir = cache_dir(), path[256], tmp[300];
	struct kiln_cache *c = NULL;
	struct kiln_cache_info info;
	uint8_t *a = pattern(UNIT, 2), *b = malloc(UNIT), x;
	int fd;

	CHECK(dir && a && b);
	if (!dir || !a || !b)
		goto out;
	CHECK_EQ(kiln_cache_open(&c, dir, "http://x/i", "10 \"e\"", UNIT, 0,
				 &quiet), 0);
	kiln_cache_store(c, 0, a, UNIT);
	kiln_cache_store(c, 1, a, UNIT);
	CHECK(chunk_path(dir, 0, path, sizeof(path)));
	/* one flipped byte: verify finds it, a load never returns it */
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &x, 1, 64 + 1000), 1);
	x ^= 0x20;
	CHECK_EQ(pwrite(fd, &x, 1, 64 + 1000), 1);
	close(fd);
	CHECK_EQ(kiln_cache_verify(dir, &info, NULL, NULL), 0);
	CHECK_EQ(info.chunks, 2);
	CHECK_EQ(info.bad, 1);
	CHECK(!kiln_cache_load(c, 0, b, UNIT));
	/* a chunk cut short (a writer killed before the rename is not seen
	 * at all; this is the file itself cut) is dropped too */
	CHECK(chunk_path(dir, 1, path, sizeof(path)));
	CHECK_EQ(truncate(path, 64 + UNIT / 2), 0);
	CHECK(!kiln_cache_load(c, 1, b, UNIT));
	CHECK(access(path, F_OK) != 0);
	/* a temporary left by a killed writer is not a chunk */
	snprintf(tmp, sizeof(tmp), "%.*s/.0000000000000002-1",
		 (int)(strrchr(path, '/') - path), path);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ(write(fd, a, 100), 100);
		close(fd);
	}
	CHECK(!kiln_cache_load(c, 2, b, UNIT));
	CHECK_EQ(kiln_cache_stat(dir, &info), 0);
	CHECK_EQ(info.chunks, 0);
	kiln_cache_close(c);
out:
	free(a);
	free(b);
	if (dir)
		rm_rf(dir);
}

TEST(eviction_keeps_the_cap_and_drops_the_oldest)
{
	char *dir = cache_dir();
	struct kiln_cache *c = NULL;
	struct kiln_cache_info info;
	uint8_t *a = pattern(UNIT, 3), *b = malloc(UNIT);
	uint64_t cap = 3 * (uint64_t)(UNIT + 64);

	CHECK(dir && a && b);
	if (!dir || !a || !b)
		goto out;
	CHECK_EQ(kiln_cache_open(&c, dir, "http://x/i", "99 \"e\"", UNIT, cap,
				 &quiet), 0);
	for (uint64_t u = 0; u < 3; u++) {
		kiln_cache_store(c, u, a, UNIT);
		usleep(20000);	/* distinct mtimes */
	}
	/* unit 0 used again: unit 1 is now the least recently used */
	CHECK(kiln_cache_load(c, 0, b, UNIT));
	usleep(20000);
	kiln_cache_store(c, 3, a, UNIT);
	CHECK_EQ(kiln_cache_stat(dir, &info), 0);
	CHECK_EQ(info.chunks, 3);
	CHECK(info.bytes <= cap);
	CHECK(kiln_cache_load(c, 0, b, UNIT));
	CHECK(!kiln_cache_load(c, 1, b, UNIT));
	CHECK(kiln_cache_load(c, 2, b, UNIT));
	CHECK(kiln_cache_load(c, 3, b, UNIT));
	/* many more: never past the cap */
	for (uint64_t u = 10; u < 20; u++)
		kiln_cache_store(c, u, a, UNIT);
	CHECK_EQ(kiln_cache_stat(dir, &info), 0);
	CHECK(info.bytes <= cap);
	CHECK_EQ(kiln_cache_clear(dir, &info), 0);
	CHECK_EQ(kiln_cache_stat(dir, &info), 0);
	CHECK_EQ(info.chunks, 0);
	kiln_cache_close(c);
out:
	free(a);
	free(b);
	if (dir)
		rm_rf(dir);
}

TEST(the_view_loads_from_the_cache_before_fetching)
{
	char *dir = cache_dir();
	struct kiln_cache *c = NULL;
	struct kiln_lazy *lz = NULL;
	struct fake f;
	uint64_t size = 4 * (uint64_t)UNIT;

	CHECK(dir != NULL);
	if (!dir)
		return;
	fake_init(&f, size);
	strcpy(f.base.identity, "4 \"e\"");
	for (int round = 0; round < 2; round++) {
		CHECK_EQ(kiln_cache_open(&c, dir, "http://x/v", f.base.identity,
					 UNIT, 0, &quiet), 0);
		CHECK_EQ(kiln_lazy_open(&lz, &f.base, c, UNIT), 0);
		if (!lz)
			break;
		CHECK_EQ(kiln_lazy_ensure(lz, 0, size), 0);
		CHECK(bytes_ok(kiln_lazy_map(lz), 0, size));
		kiln_lazy_close(lz);
	}
	/* the second view found every unit in the cache */
	CHECK_EQ(atomic_load(&f.calls), 1);
	rm_rf(dir);
}

/* The view of @f over cache @dir (a fresh view each call). */
static struct kiln_lazy *cached_view(struct fake *f, const char *dir)
{
	struct kiln_cache *c = NULL;
	struct kiln_lazy *lz = NULL;

	if (kiln_cache_open(&c, dir, "http://x/g", f->base.identity, UNIT, 0,
			    &quiet) ||
	    kiln_lazy_open(&lz, &f->base, c, UNIT))
		return NULL;
	return lz;
}

TEST(gaps_between_cached_units_are_fetched_together)
{
	char *dir = cache_dir();
	struct kiln_lazy *lz;
	struct fake f;
	uint64_t size = 6 * (uint64_t)UNIT;

	CHECK(dir != NULL);
	if (!dir)
		return;
	fake_init(&f, size);
	strcpy(f.base.identity, "6 \"g\"");
	/* units 1 and 3 in the cache */
	lz = cached_view(&f, dir);
	CHECK(lz != NULL);
	if (!lz)
		goto out;
	CHECK_EQ(kiln_lazy_ensure(lz, UNIT, 1), 0);
	CHECK_EQ(kiln_lazy_ensure(lz, 3 * (uint64_t)UNIT, 1), 0);
	kiln_lazy_close(lz);
	CHECK_EQ(atomic_load(&f.batches), 0);

	/* one read of it all: gaps 0, 2 and 4-5 in one batch; one fails */
	lz = cached_view(&f, dir);
	CHECK(lz != NULL);
	if (!lz)
		goto out;
	atomic_store(&f.calls, 0);
	atomic_store(&f.fail, 1);
	CHECK_EQ(kiln_lazy_ensure(lz, 0, size), -EIO);
	CHECK_EQ(atomic_load(&f.batches), 1);
	CHECK_EQ(atomic_load(&f.widest), 3);
	CHECK_EQ(atomic_load(&f.calls), 3);
	/* the ranges that came were kept: the next read fetches the failed one */
	atomic_store(&f.calls, 0);
	CHECK_EQ(kiln_lazy_ensure(lz, 0, size), 0);
	CHECK(bytes_ok(kiln_lazy_map(lz), 0, size));
	CHECK_EQ(atomic_load(&f.calls), 1);
	CHECK_EQ(f.last_len, UNIT);
	kiln_lazy_close(lz);
out:
	rm_rf(dir);
}

struct bg_read {
	struct kiln_lazy *lz;
	uint64_t len;
	int err;
};

static void *bg_read(void *arg)
{
	struct bg_read *r = arg;

	r->err = kiln_lazy_ensure(r->lz, 0, r->len);
	return NULL;
}

/*
 * Two caches opened on one directory stand for two processes: while one
 * holds units, the other waits and loads them once stored; one that
 * holds them too long is fetched around.
 */
TEST(units_another_process_fetches_are_waited_for)
{
	char *dir = cache_dir();
	struct kiln_cache *other = NULL;
	struct kiln_lazy *lz;
	struct fake f;
	uint64_t size = 4 * (uint64_t)UNIT;
	uint8_t *bytes = malloc(UNIT);
	struct bg_read r;
	pthread_t t;

	CHECK(dir != NULL && bytes != NULL);
	if (!dir || !bytes)
		goto out;
	fake_init(&f, size);
	strcpy(f.base.identity, "4 \"w\"");
	f.base.wait_ms = 5000;
	CHECK_EQ(kiln_cache_open(&other, dir, "http://x/g", f.base.identity,
				 UNIT, 0, &quiet), 0);
	if (!other)
		goto out;
	CHECK(kiln_cache_claim(other, 0, 3));
	lz = cached_view(&f, dir);
	CHECK(lz != NULL);
	if (!lz)
		goto out;
	r = (struct bg_read){ .lz = lz, .len = size };
	CHECK_EQ(pthread_create(&t, NULL, bg_read, &r), 0);
	usleep(100000);
	/* the other process stores what it fetched, then lets go */
	for (uint64_t u = 0; u < 4; u++) {
		for (uint32_t k = 0; k < UNIT; k++)
			bytes[k] = byte_at(u * UNIT + k);
		kiln_cache_store(other, u, bytes, UNIT);
	}
	kiln_cache_unclaim(other, 0, 3);
	pthread_join(t, NULL);
	CHECK_EQ(r.err, 0);
	CHECK(bytes_ok(kiln_lazy_map(lz), 0, size));
	CHECK_EQ(atomic_load(&f.calls), 0);
	kiln_lazy_close(lz);

	/* a holder that never lets go: fetched here after wait_ms */
	f.base.wait_ms = 200;
	CHECK(kiln_cache_claim(other, 0, 7));
	fake_init(&f, 8 * (uint64_t)UNIT);
	strcpy(f.base.identity, "4 \"w\"");
	f.base.wait_ms = 200;
	lz = cached_view(&f, dir);
	CHECK(lz != NULL);
	if (lz) {
		CHECK_EQ(kiln_lazy_ensure(lz, 0, 8 * (uint64_t)UNIT), 0);
		CHECK(bytes_ok(kiln_lazy_map(lz), 0, 8 * (uint64_t)UNIT));
		CHECK_EQ(atomic_load(&f.calls), 1);	/* units 4-7 only */
		kiln_lazy_close(lz);
	}
	kiln_cache_unclaim(other, 0, 7);
out:
	kiln_cache_close(other);
	free(bytes);
	if (dir)
		rm_rf(dir);
}

TEST(prefetch_all_keeps_several_runs_in_flight)
{
	struct fake f;
	struct kiln_lazy *lz;
	atomic_bool stop = false;
	uint64_t size = 16 * (uint64_t)UNIT + 100;

	fake_init(&f, size);
	lz = lazy_of(&f);
	CHECK(lz != NULL);
	if (!lz)
		return;
	/* a unit read first is left alone */
	CHECK_EQ(kiln_lazy_ensure(lz, 5 * (uint64_t)UNIT, 1), 0);
	CHECK_EQ(kiln_lazy_prefetch_all(lz, 1ull << 40, &stop), 0);
	CHECK(bytes_ok(kiln_lazy_map(lz), 0, size));
	CHECK(atomic_load(&f.widest) > 1);
	CHECK(atomic_load(&f.fetched) == size);
	kiln_lazy_close(lz);
}

TEST(an_identity_without_a_size_is_not_known)
{
	char *dir = cache_dir(), path[256], *ident = (char *)"x";
	struct kiln_cache *c = NULL;
	uint64_t size = 0;
	FILE *f;

	CHECK(dir != NULL);
	if (!dir)
		return;
	CHECK_EQ(kiln_cache_open(&c, dir, "http://x/i", "10 \"e\"", UNIT, 0,
				 &quiet), 0);
	kiln_cache_close(c);
	CHECK_EQ(kiln_cache_known(dir, "http://x/i", UNIT, &ident, &size), 0);
	CHECK(ident && !strcmp(ident, "10 \"e\""));
	CHECK_EQ(size, 10);
	free(ident);
	/* an identity file left with no size: nothing known, nothing owned */
	CHECK(chunk_path(dir, 0, path, sizeof(path)));
	strcpy(strrchr(path, '/'), "/identity");
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fprintf(f, "http://x/i\n0 \"e\"\n%u\n", UNIT);
		fclose(f);
	}
	ident = (char *)"x";
	CHECK_EQ(kiln_cache_known(dir, "http://x/i", UNIT, &ident, &size),
		 -ENOENT);
	CHECK(ident == NULL);
	rm_rf(dir);
}

TEST(a_long_url_keeps_its_identity_and_chunks)
{
	char *dir = cache_dir(), *url = malloc(3000), *ident = NULL;
	struct kiln_cache *c = NULL;
	struct kiln_cache_info info;
	uint8_t *a = pattern(UNIT, 5);
	uint64_t size = 0;

	CHECK(dir && url && a);
	if (!dir || !url || !a)
		goto out;
	/* a presigned URL: kilobytes of query string */
	memset(url, 'q', 2999);
	memcpy(url, "http://x/i?sig=", 15);
	url[2999] = '\0';
	CHECK_EQ(kiln_cache_open(&c, dir, url, "10 \"e\"", UNIT, 0, &quiet),
		 0);
	kiln_cache_store(c, 0, a, UNIT);
	kiln_cache_close(c);
	CHECK_EQ(kiln_cache_known(dir, url, UNIT, &ident, &size), 0);
	CHECK(ident && !strcmp(ident, "10 \"e\""));
	free(ident);
	CHECK_EQ(kiln_cache_verify(dir, &info, NULL, NULL), 0);
	CHECK_EQ(info.chunks, 1);
	CHECK_EQ(info.bad, 0);
out:
	free(url);
	free(a);
	if (dir)
		rm_rf(dir);
}

TAP_MAIN(TAP_ENTRY(a_unit_is_fetched_once),
	 TAP_ENTRY(adjacent_missing_units_are_one_request),
	 TAP_ENTRY(reading_in_order_reads_ahead_in_the_background),
	 TAP_ENTRY(reads_inside_a_window_queue_one_more_each_time_it_is_entered),
	 TAP_ENTRY(the_next_window_is_asked_for_while_one_is_coming),
	 TAP_ENTRY(a_run_is_bounded),
	 TAP_ENTRY(a_miss_in_the_hot_range_takes_its_window),
	 TAP_ENTRY(a_failed_fetch_leaves_nothing_behind),
	 TAP_ENTRY(the_probe_head_is_kept),
	 TAP_ENTRY(threads_share_units_and_see_right_bytes),
	 TAP_ENTRY(a_huge_claimed_size_is_refused),
	 TAP_ENTRY(cache_round_trip_and_identity),
	 TAP_ENTRY(a_damaged_or_torn_chunk_is_dropped),
	 TAP_ENTRY(eviction_keeps_the_cap_and_drops_the_oldest),
	 TAP_ENTRY(the_view_loads_from_the_cache_before_fetching),
	 TAP_ENTRY(gaps_between_cached_units_are_fetched_together),
	 TAP_ENTRY(prefetch_all_keeps_several_runs_in_flight),
	 TAP_ENTRY(units_another_process_fetches_are_waited_for),
	 TAP_ENTRY(an_identity_without_a_size_is_not_known),
	 TAP_ENTRY(a_long_url_keeps_its_identity_and_chunks))
