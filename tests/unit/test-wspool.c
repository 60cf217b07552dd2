// SPDX-License-Identifier: MIT
/*
 * Tests for lib/util/wspool.c: bounded memory, waiting instead of failing,
 * init/fini hooks.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/wspool.h"
#include "tap.h"

#define WS_SIZE	(64u * 1024)

struct shared {
	struct kiln_wspool *pool;
	pthread_mutex_t lock;
	int out, peak_out;	/* workspaces held at once */
	int inits, finis;
	int rounds_done;
};

static int count_init(void *ctx, void *ws, size_t size)
{
	struct shared *sh = ctx;

	memset(ws, 0, size);
	__atomic_add_fetch(&sh->inits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void count_fini(void *ctx, void *ws)
{
	struct shared *sh = ctx;

	(void)ws;
	__atomic_add_fetch(&sh->finis, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	struct shared *sh = arg;

	for (int i = 0; i < 200; i++) {
		uint8_t *ws = kiln_wspool_get(sh->pool);

		pthread_mutex_lock(&sh->lock);
		sh->out++;
		if (sh->out > sh->peak_out)
			sh->peak_out = sh->out;
		pthread_mutex_unlock(&sh->lock);
		/* use all of it: ASan catches a short workspace */
		memset(ws, i, WS_SIZE);
		if (i % 16 == 0)
			usleep(100);
		pthread_mutex_lock(&sh->lock);
		sh->out--;
		pthread_mutex_unlock(&sh->lock);
		kiln_wspool_put(sh->pool, ws);
	}
	__atomic_add_fetch(&sh->rounds_done, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void run_threads(struct shared *sh, int n)
{
	pthread_t t[8];

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, sh);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static void shared_init(struct shared *sh)
{
	memset(sh, 0, sizeof(*sh));
	pthread_mutex_init(&sh->lock, NULL);
}

TEST(limit_of_one_workspace_serves_four_threads)
{
	struct kiln_wspool_opts o = { .ws_size = WS_SIZE, .mem_limit = WS_SIZE,
				      .init = count_init, .fini = count_fini };
	struct kiln_wspool_stats st;
	struct shared sh;

	shared_init(&sh);
	o.ctx = &sh;
	CHECK_EQ(kiln_wspool_new(&o, &sh.pool), 0);
	run_threads(&sh, 4);
	CHECK_EQ(sh.rounds_done, 4);
	CHECK_EQ(sh.peak_out, 1);
	kiln_wspool_get_stats(sh.pool, &st);
	CHECK_EQ(st.peak_count, 1);
	CHECK(st.peak_bytes <= WS_SIZE);
	CHECK_EQ(st.in_use, 0);
	CHECK_EQ(sh.inits, 1);
	kiln_wspool_free(sh.pool);
	CHECK_EQ(sh.finis, 1);
}

TEST(memory_limit_below_one_workspace_still_reserves_one)
{
	struct kiln_wspool_opts o = { .ws_size = WS_SIZE, .mem_limit = 1 };
	struct kiln_wspool_stats st;
	struct shared sh;

	shared_init(&sh);
	CHECK_EQ(kiln_wspool_new(&o, &sh.pool), 0);
	run_threads(&sh, 3);
	kiln_wspool_get_stats(sh.pool, &st);
	CHECK_EQ(st.peak_count, 1);
	CHECK_EQ(sh.rounds_done, 3);
	kiln_wspool_free(sh.pool);
}

TEST(pool_grows_on_demand_within_both_limits)
{
	struct kiln_wspool_opts o = { .ws_size = WS_SIZE,
				      .mem_limit = 3 * WS_SIZE,
				      .max_count = 8 };
	struct kiln_wspool_stats st;
	void *a, *b, *c;
	struct shared sh;

	shared_init(&sh);
	CHECK_EQ(kiln_wspool_new(&o, &sh.pool), 0);
	kiln_wspool_get_stats(sh.pool, &st);
	CHECK_EQ(st.count, 1);	/* the reserved one, made up front */
	a = kiln_wspool_get(sh.pool);
	b = kiln_wspool_get(sh.pool);
	c = kiln_wspool_get(sh.pool);
	CHECK(a && b && c && a != b && b != c && a != c);
	CHECK_EQ((uintptr_t)a % 64, 0);
	kiln_wspool_get_stats(sh.pool, &st);
	CHECK_EQ(st.count, 3);
	CHECK_EQ(st.in_use, 3);
	kiln_wspool_put(sh.pool, b);
	CHECK(kiln_wspool_get(sh.pool) == b);	/* reused, not a fourth */
	kiln_wspool_put(sh.pool, a);
	kiln_wspool_put(sh.pool, b);
	kiln_wspool_put(sh.pool, c);
	run_threads(&sh, 6);
	kiln_wspool_get_stats(sh.pool, &st);
	CHECK(st.peak_count <= 3);
	CHECK(sh.peak_out <= 3);
	CHECK(st.peak_bytes <= 3 * WS_SIZE);
	kiln_wspool_free(sh.pool);
}

TEST(count_limit_caps_the_pool)
{
	struct kiln_wspool_opts o = { .ws_size = WS_SIZE,
				      .mem_limit = 100 * WS_SIZE,
				      .max_count = 2 };
	struct kiln_wspool_stats st;
	struct shared sh;

	shared_init(&sh);
	CHECK_EQ(kiln_wspool_new(&o, &sh.pool), 0);
	run_threads(&sh, 4);
	kiln_wspool_get_stats(sh.pool, &st);
	CHECK(st.peak_count <= 2);
	CHECK(sh.peak_out <= 2);
	kiln_wspool_free(sh.pool);
}

static int failing_init(void *ctx, void *ws, size_t size)
{
	(void)ctx;
	(void)ws;
	(void)size;
	return -12;
}

TEST(failing_init_fails_creation)
{
	struct kiln_wspool_opts o = { .ws_size = WS_SIZE, .mem_limit = WS_SIZE,
				      .init = failing_init };
	struct kiln_wspool *pool = NULL;

	CHECK(kiln_wspool_new(&o, &pool) < 0);
	CHECK(pool == NULL);
	o.ws_size = 0;
	CHECK(kiln_wspool_new(&o, &pool) < 0);
	kiln_wspool_free(NULL);
}

TAP_MAIN(TAP_ENTRY(limit_of_one_workspace_serves_four_threads),
	 TAP_ENTRY(memory_limit_below_one_workspace_still_reserves_one),
	 TAP_ENTRY(pool_grows_on_demand_within_both_limits),
	 TAP_ENTRY(count_limit_caps_the_pool),
	 TAP_ENTRY(failing_init_fails_creation))
