/* SPDX-License-Identifier: MIT */
/*
 * A fixed set of worker threads, created once, running submitted tasks in
 * submission (FIFO) order.
 */
#ifndef KILN_UTIL_THREADPOOL_H
#define KILN_UTIL_THREADPOOL_H

#include <pthread.h>

/*
 * pthread_create() of a thread that blocks every signal, so that the
 * application's handlers run in its own threads (a signal a library
 * thread took would not interrupt the thread waiting for it). 0 or the
 * error of pthread_create().
 */
int kiln_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

struct kiln_threadpool;

typedef void (*kiln_task_fn)(void *arg);

/*
 * Create a pool of @nr_threads workers and return it in *@out. With
 * @nr_threads == 0 the pool has no threads and kiln_threadpool_submit()
 * runs each task itself before returning. Worker threads block every
 * signal, so signals go to the threads the caller created. Returns 0,
 * -EINVAL (more than KILN_THREADPOOL_MAX threads), -ENOMEM, or the error
 * of pthread_create() (-EAGAIN); nothing is left running on failure.
 */
#define KILN_THREADPOOL_MAX 1024
int kiln_threadpool_new(unsigned int nr_threads, struct kiln_threadpool **out);

/*
 * Queue @fn(@arg) to run on some worker. Tasks start in submission order;
 * with more than one worker they may finish in any order. Never blocks on
 * a full queue (the queue grows); returns 0, or -ENOMEM when it could not
 * grow (@fn was not queued). Safe from any thread, including from inside
 * a task (also while kiln_threadpool_free() drains the queue); from other
 * threads, not once kiln_threadpool_free() has begun.
 */
int kiln_threadpool_submit(struct kiln_threadpool *tp, kiln_task_fn fn,
			   void *arg);

/*
 * Block until every task submitted so far (and every task those tasks
 * submit) has returned. Sleeps, never spins. Must not be called from
 * inside a task of the same pool (it would wait for itself).
 */
void kiln_threadpool_wait(struct kiln_threadpool *tp);

/*
 * Run every queued task to completion, stop and join the workers, and free
 * the pool. kiln_threadpool_free(NULL) is a no-op. Not from inside a task.
 */
void kiln_threadpool_free(struct kiln_threadpool *tp);

/* Number of worker threads (0 for an inline pool). Thread-safe. */
unsigned int kiln_threadpool_size(const struct kiln_threadpool *tp);

/*
 * Index (0 .. size - 1) of the calling worker within its pool, or -1 when
 * the caller is not a pool worker. Lets a task pick per-worker scratch
 * space without locking.
 */
int kiln_threadpool_worker_index(void);

/*
 * CPUs this process may run on (sched_getaffinity), at least 1: the
 * default worker count for "0 = all cores".
 */
unsigned int kiln_cpu_count(void);

#endif
