// SPDX-License-Identifier: MIT
/* Tests for lib/util/threadpool.c: every task runs once, wait and free. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "util/threadpool.h"
#include "tap.h"

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

#define NR_TASKS 10000

struct count_ctx {
	_Atomic unsigned int runs[NR_TASKS];
	_Atomic int bad_index;
	unsigned int nr_threads;
};

struct count_arg {
	struct count_ctx *ctx;
	unsigned int i;
};

static void count_task(void *arg)
{
	struct count_arg *a = arg;
	int w = kiln_threadpool_worker_index();

	if (w < 0 || (unsigned int)w >= a->ctx->nr_threads)
		atomic_fetch_add(&a->ctx->bad_index, 1);
	if (a->i % 512 == 0)
		sleep_us(50);
	atomic_fetch_add(&a->ctx->runs[a->i], 1);
}

static void run_counting(unsigned int nr_threads, bool wait_before_free)
{
	static struct count_ctx ctx;
	static struct count_arg args[NR_TASKS];
	struct kiln_threadpool *tp;
	unsigned int once = 0;

	memset(&ctx, 0, sizeof(ctx));
	ctx.nr_threads = nr_threads;
	CHECK_EQ(kiln_threadpool_new(nr_threads, &tp), 0);
	if (!tp)
		return;
	CHECK_EQ(kiln_threadpool_size(tp), nr_threads);
	for (unsigned int i = 0; i < NR_TASKS; i++) {
		args[i] = (struct count_arg){ &ctx, i };
		CHECK_EQ(kiln_threadpool_submit(tp, count_task, &args[i]), 0);
	}
	if (wait_before_free) {
		kiln_threadpool_wait(tp);
		for (unsigned int i = 0; i < NR_TASKS; i++)
			once += atomic_load(&ctx.runs[i]) == 1;
		CHECK_EQ(once, NR_TASKS);
	}
	kiln_threadpool_free(tp);
	once = 0;
	for (unsigned int i = 0; i < NR_TASKS; i++)
		once += atomic_load(&ctx.runs[i]) == 1;
	CHECK_EQ(once, NR_TASKS);
	CHECK_EQ(atomic_load(&ctx.bad_index), 0);
}

TEST(every_task_runs_exactly_once_with_1_2_8_workers)
{
	run_counting(1, true);
	run_counting(2, true);
	run_counting(8, true);
}

TEST(free_runs_queued_tasks_before_joining)
{
	run_counting(3, false);
}

static void record_order(void *arg)
{
	unsigned int **cursor = ((void **)arg)[0];
	unsigned int i = (unsigned int)(uintptr_t)((void **)arg)[1];

	*(*cursor)++ = i;
}

TEST(one_worker_runs_tasks_in_submission_order)
{
	enum { N = 2000 };
	static unsigned int order[N];
	static void *args[N][2];
	unsigned int *cursor = order;
	struct kiln_threadpool *tp;
	unsigned int in_order = 0;

	CHECK_EQ(kiln_threadpool_new(1, &tp), 0);
	if (!tp)
		return;
	for (unsigned int i = 0; i < N; i++) {
		args[i][0] = &cursor;
		args[i][1] = (void *)(uintptr_t)i;
		CHECK_EQ(kiln_threadpool_submit(tp, record_order, args[i]), 0);
	}
	kiln_threadpool_wait(tp);
	for (unsigned int i = 0; i < N; i++)
		in_order += order[i] == i;
	CHECK_EQ(in_order, N);
	kiln_threadpool_free(tp);
}

struct spawn_ctx {
	struct kiln_threadpool *tp;
	_Atomic unsigned int runs;
};

/* Each task spawns two children until depth 0: 2^(d+1) - 1 tasks. */
struct spawn_arg {
	struct spawn_ctx *ctx;
	unsigned int depth;
};

static struct spawn_arg spawn_args[12][1];

static void spawn_task(void *arg)
{
	struct spawn_arg *a = arg;

	if (a->depth % 3 == 0)
		sleep_us(100);
	atomic_fetch_add(&a->ctx->runs, 1);
	if (a->depth) {
		kiln_threadpool_submit(a->ctx->tp, spawn_task,
				       spawn_args[a->depth - 1]);
		kiln_threadpool_submit(a->ctx->tp, spawn_task,
				       spawn_args[a->depth - 1]);
	}
}

TEST(wait_covers_tasks_submitted_by_tasks)
{
	struct spawn_ctx ctx = { 0 };

	CHECK_EQ(kiln_threadpool_new(4, &ctx.tp), 0);
	if (!ctx.tp)
		return;
	for (unsigned int d = 0; d < 12; d++)
		spawn_args[d][0] = (struct spawn_arg){ &ctx, d };
	kiln_threadpool_submit(ctx.tp, spawn_task, spawn_args[11]);
	kiln_threadpool_wait(ctx.tp);
	CHECK_EQ(atomic_load(&ctx.runs), (1u << 12) - 1);
	kiln_threadpool_free(ctx.tp);
}

static void inline_task(void *arg)
{
	int *seen = arg;

	*seen = kiln_threadpool_worker_index() + 100;
}

TEST(zero_threads_runs_tasks_inside_submit)
{
	struct kiln_threadpool *tp;
	int seen = 0;

	CHECK_EQ(kiln_threadpool_new(0, &tp), 0);
	if (!tp)
		return;
	CHECK_EQ(kiln_threadpool_size(tp), 0);
	CHECK_EQ(kiln_threadpool_submit(tp, inline_task, &seen), 0);
	CHECK_EQ(seen, 99);	/* ran already, on this (non-worker) thread */
	kiln_threadpool_wait(tp);
	kiln_threadpool_free(tp);
}

struct meet_ctx {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int arrived;
	_Atomic unsigned int met;
};

/* Succeeds only if both tasks are running at the same time. */
static void meet_task(void *arg)
{
	struct meet_ctx *m = arg;
	struct timespec deadline;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	pthread_mutex_lock(&m->lock);
	m->arrived++;
	pthread_cond_broadcast(&m->cond);
	while (m->arrived < 2 && rc == 0)
		rc = pthread_cond_timedwait(&m->cond, &m->lock, &deadline);
	if (m->arrived >= 2)
		atomic_fetch_add(&m->met, 1);
	pthread_mutex_unlock(&m->lock);
}

TEST(two_workers_run_tasks_concurrently)
{
	struct meet_ctx m = { .arrived = 0 };
	struct kiln_threadpool *tp;

	pthread_mutex_init(&m.lock, NULL);
	pthread_cond_init(&m.cond, NULL);
	CHECK_EQ(kiln_threadpool_new(2, &tp), 0);
	if (!tp)
		return;
	kiln_threadpool_submit(tp, meet_task, &m);
	kiln_threadpool_submit(tp, meet_task, &m);
	kiln_threadpool_wait(tp);
	CHECK_EQ(atomic_load(&m.met), 2);
	kiln_threadpool_free(tp);
	pthread_cond_destroy(&m.cond);
	pthread_mutex_destroy(&m.lock);
}

static void slow_task(void *arg)
{
	(void)arg;
	sleep_us(300000);
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

TEST(idle_workers_and_waiters_sleep_instead_of_spinning)
{
	struct kiln_threadpool *tp;
	double cpu;

	CHECK_EQ(kiln_threadpool_new(4, &tp), 0);
	if (!tp)
		return;
	cpu = cpu_seconds();
	kiln_threadpool_submit(tp, slow_task, NULL);
	kiln_threadpool_wait(tp);	/* ~0.3 s wall, 3 workers idle */
	cpu = cpu_seconds() - cpu;
	/* spinning would burn >= 0.3 s of CPU per spinning thread */
	CHECK(cpu < 0.15);
	kiln_threadpool_free(tp);
}

TEST(bad_arguments_and_free_null)
{
	struct kiln_threadpool *tp = (void *)1;

	CHECK_EQ(kiln_threadpool_new(KILN_THREADPOOL_MAX + 1, &tp), -EINVAL);
	CHECK(tp == NULL);
	kiln_threadpool_free(NULL);
	CHECK(kiln_cpu_count() >= 1);
	CHECK_EQ(kiln_threadpool_worker_index(), -1);
}

TEST(wait_on_idle_pool_returns_and_pool_is_reusable)
{
	struct kiln_threadpool *tp;

	CHECK_EQ(kiln_threadpool_new(2, &tp), 0);
	if (!tp)
		return;
	kiln_threadpool_wait(tp);
	kiln_threadpool_free(tp);
	run_counting(2, true);
}

TAP_MAIN(TAP_ENTRY(every_task_runs_exactly_once_with_1_2_8_workers),
	 TAP_ENTRY(free_runs_queued_tasks_before_joining),
	 TAP_ENTRY(one_worker_runs_tasks_in_submission_order),
	 TAP_ENTRY(wait_covers_tasks_submitted_by_tasks),
	 TAP_ENTRY(zero_threads_runs_tasks_inside_submit),
	 TAP_ENTRY(two_workers_run_tasks_concurrently),
	 TAP_ENTRY(idle_workers_and_waiters_sleep_instead_of_spinning),
	 TAP_ENTRY(bad_arguments_and_free_null),
	 TAP_ENTRY(wait_on_idle_pool_returns_and_pool_is_reusable))
