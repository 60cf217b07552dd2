// SPDX-License-Identifier: MIT
/*
 * A fixed set of worker threads fed from one FIFO queue. The queue is a ring
 * that doubles when full, so steady-state submission does not allocate.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "threadpool.h"

struct kiln_task {
	kiln_task_fn fn;
	void *arg;
};

struct kiln_worker {
	struct kiln_threadpool *tp;
	pthread_t thread;
	int index;
};

struct kiln_threadpool {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* queue not empty, or stopping */
	pthread_cond_t idle;		/* pending dropped to 0 */
	/* ring of queued tasks: @nr_queued entries from @head, @cap slots */
	struct kiln_task *ring;
	size_t cap, head, nr_queued;
	size_t pending;			/* queued + running */
	size_t idle_waiters;		/* threads in kiln_threadpool_wait() */
	bool stopping;
	unsigned int nr_threads;
	struct kiln_worker *workers;
};

#define KILN_THREADPOOL_RING_MIN 64

static _Thread_local int worker_index = -1;

int kiln_threadpool_worker_index(void)
{
	return worker_index;
}

unsigned int kiln_cpu_count(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		n = CPU_COUNT(&set);
		if (n > 0)
			return (unsigned int)n;
	}
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned int)n : 1;
}

/* Double the ring, unwrapping it. Called with the lock held. */
static int ring_grow(struct kiln_threadpool *tp)
{
	size_t cap = tp->cap ? tp->cap * 2 : KILN_THREADPOOL_RING_MIN;
	struct kiln_task *ring;

	if (cap < tp->cap || cap > SIZE_MAX / sizeof(*ring))
		return -ENOMEM;
	ring = malloc(cap * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	for (size_t i = 0; i < tp->nr_queued; i++)
		ring[i] = tp->ring[(tp->head + i) % tp->cap];
	free(tp->ring);
	tp->ring = ring;
	tp->cap = cap;
	tp->head = 0;
	return 0;
}

/* The task just finished: drop it from @pending, wake waiters at zero. */
static void task_done(struct kiln_threadpool *tp)
{
	tp->pending--;
	if (tp->pending == 0 && tp->idle_waiters)
		pthread_cond_broadcast(&tp->idle);
}

static void *worker_main(void *arg)
{
	struct kiln_worker *w = arg;
	struct kiln_threadpool *tp = w->tp;

	worker_index = w->index;
	pthread_mutex_lock(&tp->lock);
	for (;;) {
		struct kiln_task task;

		while (!tp->nr_queued && !tp->stopping)
			pthread_cond_wait(&tp->work, &tp->lock);
		if (!tp->nr_queued)
			break;		/* stopping and drained */
		task = tp->ring[tp->head];
		tp->head = (tp->head + 1) % tp->cap;
		tp->nr_queued--;
		pthread_mutex_unlock(&tp->lock);

		task.fn(task.arg);

		pthread_mutex_lock(&tp->lock);
		task_done(tp);
	}
	pthread_mutex_unlock(&tp->lock);
	return NULL;
}

/* Stop and join the first @started workers. */
static void stop_workers(struct kiln_threadpool *tp, unsigned int started)
{
	pthread_mutex_lock(&tp->lock);
	tp->stopping = true;
	pthread_cond_broadcast(&tp->work);
	pthread_mutex_unlock(&tp->lock);
	for (unsigned int i = 0; i < started; i++)
		pthread_join(tp->workers[i].thread, NULL);
}

static void pool_destroy(struct kiln_threadpool *tp)
{
	pthread_cond_destroy(&tp->idle);
	pthread_cond_destroy(&tp->work);
	pthread_mutex_destroy(&tp->lock);
	free(tp->workers);
	free(tp->ring);
	free(tp);
}

int kiln_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	/* the thread inherits the mask: blocked from its first instruction */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* Create the workers with every signal blocked; they inherit the mask. */
static int start_workers(struct kiln_threadpool *tp)
{
	sigset_t all, old;
	unsigned int i;
	int err = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < tp->nr_threads; i++) {
		tp->workers[i].tp = tp;
		tp->workers[i].index = (int)i;
		err = pthread_create(&tp->workers[i].thread, NULL, worker_main,
				     &tp->workers[i]);
		if (err)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		stop_workers(tp, i);
		return -err;
	}
	return 0;
}

int kiln_threadpool_new(unsigned int nr_threads, struct kiln_threadpool **out)
{
	struct kiln_threadpool *tp;
	int err;

	*out = NULL;
	if (nr_threads > KILN_THREADPOOL_MAX)
		return -EINVAL;
	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	tp->nr_threads = nr_threads;
	if (nr_threads) {
		tp->workers = calloc(nr_threads, sizeof(*tp->workers));
		if (!tp->workers || ring_grow(tp)) {
			free(tp->workers);
			free(tp->ring);
			free(tp);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&tp->lock, NULL);
	pthread_cond_init(&tp->work, NULL);
	pthread_cond_init(&tp->idle, NULL);
	if (nr_threads) {
		err = start_workers(tp);
		if (err) {
			pool_destroy(tp);
			return err;
		}
	}
	*out = tp;
	return 0;
}

int kiln_threadpool_submit(struct kiln_threadpool *tp, kiln_task_fn fn,
			   void *arg)
{
	int err;

	if (!tp->nr_threads) {
		fn(arg);
		return 0;
	}
	pthread_mutex_lock(&tp->lock);
	if (tp->nr_queued == tp->cap) {
		err = ring_grow(tp);
		if (err) {
			pthread_mutex_unlock(&tp->lock);
			return err;
		}
	}
	tp->ring[(tp->head + tp->nr_queued) % tp->cap] =
		(struct kiln_task){ .fn = fn, .arg = arg };
	tp->nr_queued++;
	tp->pending++;
	pthread_cond_signal(&tp->work);
	pthread_mutex_unlock(&tp->lock);
	return 0;
}

void kiln_threadpool_wait(struct kiln_threadpool *tp)
{
	if (!tp->nr_threads)
		return;
	pthread_mutex_lock(&tp->lock);
	tp->idle_waiters++;
	while (tp->pending)
		pthread_cond_wait(&tp->idle, &tp->lock);
	tp->idle_waiters--;
	pthread_mutex_unlock(&tp->lock);
}

void kiln_threadpool_free(struct kiln_threadpool *tp)
{
	if (!tp)
		return;
	/* workers drain the queue before they see @stopping and exit */
	stop_workers(tp, tp->nr_threads);
	pool_destroy(tp);
}

unsigned int kiln_threadpool_size(const struct kiln_threadpool *tp)
{
	return tp->nr_threads;
}
