// SPDX-License-Identifier: MIT
/*
 * Tests for lib/util/jobs.c: in-order commits for any thread count,
 * in-flight bounds, the first error in sequence order stops the pipeline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/jobs.h"
#include "util/threadpool.h"
#include "tap.h"

#define NR_ITEMS 10000
#define MAX_WORKERS 16

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

struct item {
	uint64_t idx;
	uint64_t cost;
	unsigned int delay_us;
	uint64_t result;	/* written by process(), read by commit() */
};

struct run {
	pthread_t main_thread;
	/* failure injection: idx to fail at, and with what (0: never) */
	uint64_t fail_process_at, fail_commit_at;
	int process_err, commit_err;
	uint64_t fail2_process_at;
	int process2_err;
	uint64_t slow_at;	/* this item sleeps @slow_us more */
	unsigned int slow_us;
	uint64_t byte_bound;	/* the pipeline's max_bytes, 0: none */
	/* on the committer's thread only */
	uint64_t next_commit;
	uint64_t digest;	/* order-sensitive hash of committed results */
	uint64_t submitted, released;
	uint64_t next_release;	/* releases come in item order too */
	unsigned int release_order_errors;
	int64_t in_flight, max_in_flight;
	int64_t bytes_in_flight, max_bytes_in_flight;
	unsigned int oversize_not_alone;
	unsigned int order_errors, wrong_thread, bad_result;
	/* on the workers */
	_Atomic unsigned int busy[MAX_WORKERS];
	_Atomic unsigned int worker_clash, bad_worker, processing;
	_Atomic unsigned int max_processing;
	unsigned int workers;
};

static int process_item(void *ctx, void *p, unsigned int worker)
{
	struct run *r = ctx;
	struct item *it = p;
	unsigned int now, max;

	if (worker >= r->workers || worker >= MAX_WORKERS) {
		atomic_fetch_add(&r->bad_worker, 1);
		worker = 0;
	}
	if (atomic_exchange(&r->busy[worker], 1))
		atomic_fetch_add(&r->worker_clash, 1);
	now = atomic_fetch_add(&r->processing, 1) + 1;
	max = atomic_load(&r->max_processing);
	while (now > max &&
	       !atomic_compare_exchange_weak(&r->max_processing, &max, now))
		;
	if (it->delay_us)
		sleep_us(it->delay_us);
	if (r->slow_us && it->idx == r->slow_at)
		sleep_us(r->slow_us);
	it->result = mix(it->idx + 1);
	atomic_fetch_sub(&r->processing, 1);
	atomic_store(&r->busy[worker], 0);
	if (r->process_err && it->idx == r->fail_process_at)
		return r->process_err;
	if (r->process2_err && it->idx == r->fail2_process_at)
		return r->process2_err;
	return 0;
}

static int commit_item(void *ctx, void *p)
{
	struct run *r = ctx;
	struct item *it = p;

	if (!pthread_equal(pthread_self(), r->main_thread))
		r->wrong_thread++;
	if (it->idx != r->next_commit)
		r->order_errors++;
	if (it->result != mix(it->idx + 1))
		r->bad_result++;
	r->next_commit = it->idx + 1;
	r->digest = mix(r->digest ^ it->result);
	if (r->commit_err && it->idx == r->fail_commit_at)
		return r->commit_err;
	return 0;
}

static void release_item(void *ctx, void *p)
{
	struct run *r = ctx;
	struct item *it = p;

	if (!pthread_equal(pthread_self(), r->main_thread))
		r->wrong_thread++;
	if (it->idx < r->next_release)
		r->release_order_errors++;
	r->next_release = it->idx + 1;
	r->released++;
	r->in_flight--;
	r->bytes_in_flight -= (int64_t)it->cost;
	free(it);
}

static const struct kiln_jobs_ops test_ops = {
	.process = process_item,
	.commit = commit_item,
	.release = release_item,
};

static void run_init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->main_thread = pthread_self();
}

/*
 * Submit @n items with random delays (a few long ones so that later items
 * overtake earlier ones) and costs; returns the first nonzero submit result.
 * The pipeline's in-flight count only grows inside kiln_jobs_submit(), so
 * its maximum is seen right after each submit returns.
 */
static int submit_items(struct kiln_jobs *j, struct run *r, uint64_t first,
			uint64_t n, uint64_t seed, uint64_t max_cost)
{
	uint64_t rng = seed;

	for (uint64_t i = first; i < first + n; i++) {
		struct item *it = calloc(1, sizeof(*it));
		uint64_t x = rng_next(&rng), cost;
		int err;

		if (!it)
			abort();
		it->idx = i;
		it->delay_us = x % 16 == 0 ? (unsigned int)(x >> 8) % 400 :
			       (unsigned int)(x >> 8) % 20;
		it->cost = cost = max_cost ? (x >> 20) % max_cost + 1 : 0;
		err = kiln_jobs_submit(j, it, cost);	/* @it may be gone */
		r->submitted++;
		r->in_flight++;
		r->bytes_in_flight += (int64_t)cost;
		if (r->in_flight > r->max_in_flight)
			r->max_in_flight = r->in_flight;
		if (r->bytes_in_flight > r->max_bytes_in_flight)
			r->max_bytes_in_flight = r->bytes_in_flight;
		/* above the byte bound only as the only item in flight */
		if (r->byte_bound && r->in_flight > 1 &&
		    r->bytes_in_flight > (int64_t)r->byte_bound)
			r->oversize_not_alone++;
		if (err)
			return err;
	}
	return 0;
}

static struct kiln_jobs *jobs_new(struct run *r, unsigned int threads,
				  size_t max_items, uint64_t max_bytes)
{
	struct kiln_jobs_conf conf = {
		.ops = &test_ops,
		.ctx = r,
		.threads = threads,
		.max_items = max_items,
		.max_bytes = max_bytes,
	};
	struct kiln_jobs *j = NULL;

	CHECK_EQ(kiln_jobs_new(&conf, &j), 0);
	if (j)
		r->workers = kiln_jobs_workers(j);
	r->byte_bound = max_bytes;
	return j;
}

static void check_clean(struct run *r)
{
	CHECK_EQ(r->order_errors, 0);
	CHECK_EQ(r->wrong_thread, 0);
	CHECK_EQ(r->bad_result, 0);
	CHECK_EQ(atomic_load(&r->worker_clash), 0);
	CHECK_EQ(atomic_load(&r->bad_worker), 0);
	CHECK_EQ(r->released, r->submitted);
	CHECK_EQ(r->release_order_errors, 0);
	CHECK_EQ(r->in_flight, 0);
}

TEST(commits_follow_submission_order_for_1_2_8_16_workers)
{
	static const unsigned int threads[] = { 1, 2, 8, 16 };
	uint64_t digest0 = 0;

	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		static struct run r;
		struct kiln_jobs *j;

		run_init(&r);
		j = jobs_new(&r, threads[t], 0, 0);
		if (!j)
			return;
		CHECK_EQ(kiln_jobs_workers(j), threads[t]);
		CHECK_EQ(submit_items(j, &r, 0, NR_ITEMS, 42, 0), 0);
		CHECK_EQ(kiln_jobs_finish(j), 0);
		CHECK_EQ(r.next_commit, NR_ITEMS);
		check_clean(&r);
		CHECK(r.max_in_flight <= 4 * (int64_t)threads[t]);
		if (threads[t] > 1)
			CHECK(atomic_load(&r.max_processing) > 1);
		else
			CHECK_EQ(atomic_load(&r.max_processing), 1);
		if (t == 0)
			digest0 = r.digest;
		CHECK(r.digest == digest0);
		kiln_jobs_free(j);
	}
}

TEST(in_flight_item_bound_is_never_exceeded)
{
	static struct run r;
	struct kiln_jobs *j;

	run_init(&r);
	j = jobs_new(&r, 8, 5, 0);
	if (!j)
		return;
	CHECK_EQ(submit_items(j, &r, 0, 3000, 7, 0), 0);
	CHECK_EQ(kiln_jobs_finish(j), 0);
	check_clean(&r);
	CHECK_EQ(r.next_commit, 3000);
	CHECK_EQ(r.max_in_flight, 5);	/* reached, never passed */
	CHECK(atomic_load(&r.max_processing) <= 5);
	kiln_jobs_free(j);
}

TEST(in_flight_byte_bound_is_never_exceeded)
{
	static struct run r;
	struct kiln_jobs *j;

	run_init(&r);
	j = jobs_new(&r, 4, 64, 3000);
	if (!j)
		return;
	CHECK_EQ(submit_items(j, &r, 0, 3000, 9, 1000), 0);
	CHECK_EQ(kiln_jobs_finish(j), 0);
	check_clean(&r);
	CHECK(r.max_bytes_in_flight <= 3000);
	CHECK(r.max_bytes_in_flight > 2000);	/* the bound was what held */
	CHECK_EQ(r.oversize_not_alone, 0);
	CHECK(r.max_in_flight < 64);
	kiln_jobs_free(j);
}

TEST(item_above_byte_bound_runs_alone)
{
	static struct run r;
	struct kiln_jobs *j;

	run_init(&r);
	j = jobs_new(&r, 4, 64, 3000);
	if (!j)
		return;
	/* items costing up to 9000 against a 3000-byte bound */
	CHECK_EQ(submit_items(j, &r, 0, 500, 11, 9000), 0);
	CHECK_EQ(kiln_jobs_finish(j), 0);
	check_clean(&r);
	CHECK_EQ(r.next_commit, 500);
	CHECK(r.max_bytes_in_flight > 3000);
	CHECK_EQ(r.oversize_not_alone, 0);
	kiln_jobs_free(j);
}

/* Fail item 5000's process(); expect exactly items 0..4999 committed. */
static void run_process_error(unsigned int threads)
{
	static struct run r;
	struct kiln_jobs *j;
	int err;

	run_init(&r);
	r.fail_process_at = 5000;
	r.process_err = -EIO;
	j = jobs_new(&r, threads, 0, 0);
	if (!j)
		return;
	err = submit_items(j, &r, 0, NR_ITEMS, 5, 0);
	CHECK_EQ(err, -EIO);		/* the producer was told to stop */
	CHECK(r.submitted < NR_ITEMS);
	CHECK_EQ(kiln_jobs_finish(j), -EIO);
	CHECK_EQ(r.next_commit, 5000);	/* 0..4999 committed, nothing after */
	check_clean(&r);
	CHECK_EQ(kiln_jobs_finish(j), 0);	/* returned once */
	kiln_jobs_free(j);
}

TEST(process_error_at_item_k_commits_only_items_before_k)
{
	run_process_error(1);
	run_process_error(2);
	run_process_error(8);
	run_process_error(16);
}

TEST(commit_error_stops_further_commits)
{
	static const unsigned int threads[] = { 1, 2, 8 };

	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		static struct run r;
		struct kiln_jobs *j;

		run_init(&r);
		r.fail_commit_at = 1234;
		r.commit_err = -ENOSPC;
		j = jobs_new(&r, threads[t], 0, 0);
		if (!j)
			return;
		CHECK_EQ(submit_items(j, &r, 0, 4000, 3, 0), -ENOSPC);
		CHECK_EQ(kiln_jobs_finish(j), -ENOSPC);
		CHECK_EQ(r.next_commit, 1235);	/* 1234 was the last attempt */
		check_clean(&r);
		kiln_jobs_free(j);
	}
}

TEST(earliest_failing_item_wins_over_earlier_failure_in_time)
{
	static const unsigned int threads[] = { 1, 2, 8 };

	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		static struct run r;
		struct kiln_jobs *j;
		int err;

		run_init(&r);
		/* item 40 is slow, item 41 fails at once: 40's error wins */
		r.fail_process_at = 41;
		r.process_err = -EIO;
		r.fail2_process_at = 40;
		r.process2_err = -ENOMEM;
		r.slow_at = 40;
		r.slow_us = 20000;
		j = jobs_new(&r, threads[t], 64, 0);
		if (!j)
			return;
		err = submit_items(j, &r, 0, 200, 13, 0);
		CHECK(err == -ENOMEM || err == -EIO);
		CHECK_EQ(kiln_jobs_finish(j), -ENOMEM);
		CHECK_EQ(r.next_commit, 40);
		check_clean(&r);
		kiln_jobs_free(j);
	}
}

TEST(finish_clears_the_error_and_a_new_batch_runs)
{
	static struct run r;
	struct kiln_jobs *j;

	run_init(&r);
	r.fail_process_at = 100;
	r.process_err = -EIO;
	j = jobs_new(&r, 4, 0, 0);
	if (!j)
		return;
	CHECK_EQ(submit_items(j, &r, 0, 1000, 17, 0), -EIO);
	CHECK_EQ(kiln_jobs_finish(j), -EIO);
	CHECK_EQ(r.next_commit, 100);
	/* second batch: item numbers continue at 1000, nothing fails */
	r.process_err = 0;
	r.next_commit = 1000;
	CHECK_EQ(submit_items(j, &r, 1000, 1000, 19, 0), 0);
	CHECK_EQ(kiln_jobs_poll(j), 0);
	CHECK_EQ(kiln_jobs_finish(j), 0);
	CHECK_EQ(r.next_commit, 2000);
	check_clean(&r);
	kiln_jobs_free(j);
}

TEST(free_with_items_in_flight_releases_them_uncommitted)
{
	static const unsigned int threads[] = { 1, 3 };

	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		static struct run r;
		struct kiln_jobs *j;

		run_init(&r);
		j = jobs_new(&r, threads[t], 32, 0);
		if (!j)
			return;
		CHECK_EQ(submit_items(j, &r, 0, 200, 23, 0), 0);
		kiln_jobs_free(j);
		CHECK(r.next_commit <= 200);
		check_clean(&r);
	}
}

TEST(pipeline_runs_on_a_shared_pool)
{
	static struct run r;
	struct kiln_threadpool *tp;
	struct kiln_jobs_conf conf = {
		.ops = &test_ops,
		.ctx = &r,
		.threads = 99,		/* ignored: the pool decides */
	};
	struct kiln_jobs *j = NULL;

	run_init(&r);
	CHECK_EQ(kiln_threadpool_new(3, &tp), 0);
	if (!tp)
		return;
	conf.pool = tp;
	for (int round = 0; round < 3; round++) {
		CHECK_EQ(kiln_jobs_new(&conf, &j), 0);
		if (!j)
			break;
		CHECK_EQ(kiln_jobs_workers(j), 3);
		r.workers = 3;
		r.next_commit = 0;
		r.next_release = 0;
		CHECK_EQ(submit_items(j, &r, 0, 2000, 29 + round, 0), 0);
		if (round == 2) {
			kiln_jobs_free(j);	/* abandon with items in flight */
			continue;
		}
		CHECK_EQ(kiln_jobs_finish(j), 0);
		CHECK_EQ(r.next_commit, 2000);
		kiln_jobs_free(j);
	}
	check_clean(&r);
	kiln_threadpool_free(tp);
}

static int process_on_caller(void *ctx, void *p, unsigned int worker)
{
	struct run *r = ctx;

	(void)p;
	if (worker != 0 || !pthread_equal(pthread_self(), r->main_thread))
		r->wrong_thread++;
	return 0;
}

static int commit_nothing(void *ctx, void *p)
{
	(void)ctx;
	(void)p;
	return 0;
}

TEST(one_thread_runs_inline_on_the_caller)
{
	static const struct kiln_jobs_ops ops = {
		.process = process_on_caller,
		.commit = commit_nothing,
	};
	static struct run r;
	struct kiln_threadpool *tp;
	struct kiln_jobs_conf conf = { .ops = &ops, .ctx = &r, .threads = 1 };
	struct kiln_jobs *j = NULL;
	int x = 0;

	run_init(&r);
	CHECK_EQ(kiln_jobs_new(&conf, &j), 0);
	if (!j)
		return;
	CHECK_EQ(kiln_jobs_workers(j), 1);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(kiln_jobs_submit(j, &x, 1), 0);
	CHECK_EQ(kiln_jobs_finish(j), 0);
	kiln_jobs_free(j);
	/* so does a pool without threads */
	CHECK_EQ(kiln_threadpool_new(0, &tp), 0);
	conf.pool = tp;
	CHECK_EQ(kiln_jobs_new(&conf, &j), 0);
	if (j) {
		CHECK_EQ(kiln_jobs_submit(j, &x, 1), 0);
		CHECK_EQ(kiln_jobs_finish(j), 0);
		kiln_jobs_free(j);
	}
	kiln_threadpool_free(tp);
	CHECK_EQ(r.wrong_thread, 0);
}

/*
 * Item 0 (the head) runs until item 2 has started; item 1 finishes at
 * once and shrinks to nothing. Items 0 and 1 fill the byte bound, so item
 * 2 can enter only through item 1's shrink: without it, item 0 waits in
 * vain (and says so after two seconds).
 */
struct shrink_run {
	atomic_bool third_started;
	atomic_int head_saw_third;	/* 1 yes, -1 timed out */
	atomic_int committed;
};

static int process_shrink(void *ctx, void *p, unsigned int worker)
{
	struct shrink_run *r = ctx;
	int id = *(int *)p;

	(void)worker;
	if (id == 2)
		atomic_store(&r->third_started, true);
	if (id != 0)
		return 0;
	for (int i = 0; i < 2000; i++) {
		if (atomic_load(&r->third_started)) {
			atomic_store(&r->head_saw_third, 1);
			return 0;
		}
		sleep_us(1000);
	}
	atomic_store(&r->head_saw_third, -1);
	return 0;
}

static int commit_count(void *ctx, void *p)
{
	struct shrink_run *r = ctx;

	CHECK_EQ(*(int *)p, atomic_load(&r->committed));
	atomic_fetch_add(&r->committed, 1);
	return 0;
}

static uint64_t held_none(void *ctx, void *p)
{
	(void)ctx;
	return *(int *)p == 0 ? 1000 : 0;	/* item 0 keeps its cost */
}

TEST(finished_item_that_shrinks_makes_room_behind_a_slow_head)
{
	static const struct kiln_jobs_ops ops = {
		.process = process_shrink,
		.commit = commit_count,
		.held = held_none,
	};
	static struct shrink_run r;
	static int ids[3] = { 0, 1, 2 };
	struct kiln_jobs_conf conf = {
		.ops = &ops, .ctx = &r, .threads = 2,
		.max_items = 8, .max_bytes = 2000,
	};
	struct kiln_jobs *j = NULL;

	CHECK_EQ(kiln_jobs_new(&conf, &j), 0);
	if (!j)
		return;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(kiln_jobs_submit(j, &ids[i], 1000), 0);
	CHECK_EQ(kiln_jobs_finish(j), 0);
	kiln_jobs_free(j);
	CHECK_EQ(atomic_load(&r.head_saw_third), 1);
	CHECK_EQ(atomic_load(&r.committed), 3);
}

TEST(missing_ops_are_rejected)
{
	static const struct kiln_jobs_ops no_commit = {
		.process = process_on_caller,
	};
	struct kiln_jobs_conf conf = { .ops = &no_commit, .threads = 2 };
	struct kiln_jobs *j = (void *)1;

	CHECK_EQ(kiln_jobs_new(&conf, &j), -EINVAL);
	CHECK(j == NULL);
	conf.ops = NULL;
	CHECK_EQ(kiln_jobs_new(&conf, &j), -EINVAL);
	kiln_jobs_free(NULL);
}

TAP_MAIN(TAP_ENTRY(commits_follow_submission_order_for_1_2_8_16_workers),
	 TAP_ENTRY(in_flight_item_bound_is_never_exceeded),
	 TAP_ENTRY(in_flight_byte_bound_is_never_exceeded),
	 TAP_ENTRY(item_above_byte_bound_runs_alone),
	 TAP_ENTRY(process_error_at_item_k_commits_only_items_before_k),
	 TAP_ENTRY(commit_error_stops_further_commits),
	 TAP_ENTRY(earliest_failing_item_wins_over_earlier_failure_in_time),
	 TAP_ENTRY(finish_clears_the_error_and_a_new_batch_runs),
	 TAP_ENTRY(free_with_items_in_flight_releases_them_uncommitted),
	 TAP_ENTRY(pipeline_runs_on_a_shared_pool),
	 TAP_ENTRY(one_thread_runs_inline_on_the_caller),
	 TAP_ENTRY(finished_item_that_shrinks_makes_room_behind_a_slow_head),
	 TAP_ENTRY(missing_ops_are_rejected))
