/* SPDX-License-Identifier: MIT */
/*
 * The ordered job pipeline: items are processed in parallel and committed
 * one at a time in the order they were submitted, so what the commit step
 * writes never depends on the number of threads.
 *
 *   producer ---submit(item)---> [ workers: process(item) ... in parallel ]
 *       |                                          |
 *       +<-- commit(item), release(item) ----------+  (caller's thread,
 *                                                      submission order)
 *
 * The caller's thread is the only committer: commit() and release() run
 * inside kiln_jobs_submit(), _poll(), _finish() and _free(), never at the
 * same time as each other, so they may touch the caller's state (the output
 * file, dedupe tables, the inode being built) without locks. Only
 * process() runs on worker threads.
 *
 * Memory stays bounded: an item is "in flight" from submit until it is
 * released, and kiln_jobs_submit() blocks (committing finished items
 * meanwhile) while max_items items or max_bytes of declared cost are in
 * flight.
 *
 * Errors: the pipeline stops at the first failing item in submission
 * order (process() or commit() returning nonzero). Items before it are
 * committed, it and everything after it are released uncommitted, and
 * kiln_jobs_finish() returns that item's error -- the same item and error
 * whatever the thread count, because with one thread the pipeline is
 * plain inline code: process(), commit(), release() for each item in turn.
 */
#ifndef KILN_UTIL_JOBS_H
#define KILN_UTIL_JOBS_H

#include <stddef.h>
#include <stdint.h>

struct kiln_jobs;
struct kiln_threadpool;

struct kiln_jobs_ops {
	/*
	 * Do the heavy part of @item (read, compress, hash...). Runs on a
	 * worker, concurrently with other items' process(), in no particular
	 * order. @worker is in [0, kiln_jobs_workers()) and no two calls
	 * running at the same time share it: index per-worker scratch space
	 * with it. Returns 0 or a negative errno. May run (and its result be
	 * thrown away) for items after a failed one.
	 */
	int (*process)(void *ctx, void *item, unsigned int worker);
	/*
	 * Consume the processed @item (append its bytes to the image...).
	 * Runs on the caller's thread, strictly in submission order, only
	 * for items whose process() succeeded and only while no earlier item
	 * failed. Returns 0 or a negative errno (which stops the pipeline).
	 */
	int (*commit)(void *ctx, void *item);
	/*
	 * Give @item back: called exactly once per submitted item, after its
	 * commit() or instead of it, on the caller's thread, in submission
	 * order. NULL: nothing to do.
	 */
	void (*release)(void *ctx, void *item);
	/*
	 * Bytes @item still holds once its process() has returned (its
	 * result, until release()), when that is less than the cost it was
	 * submitted with: the difference leaves the in-flight bound at once,
	 * so a finished item waiting behind a slower one does not keep a
	 * worker idle. Runs on the worker right after process(). NULL: the
	 * declared cost stands until release.
	 */
	uint64_t (*held)(void *ctx, void *item);
};

struct kiln_jobs_conf {
	const struct kiln_jobs_ops *ops;	/* must outlive the pipeline */
	void *ctx;				/* passed to every op */
	/*
	 * Worker threads to create. 0 or 1: no threads at all, each
	 * kiln_jobs_submit() runs process, commit and release inline.
	 * Ignored when @pool is set.
	 */
	unsigned int threads;
	/*
	 * Run process() on this pool instead of creating threads (the pool
	 * must outlive the pipeline; a pool of 0 threads means inline).
	 * NULL: the pipeline owns its threads.
	 */
	struct kiln_threadpool *pool;
	size_t max_items;	/* in-flight bound; 0 = 4 per worker */
	/*
	 * Bound on the sum of the in-flight items' @cost (bytes they hold);
	 * 0 = none. An item costing more than this still runs, alone.
	 */
	uint64_t max_bytes;
};

/*
 * Create a pipeline from @conf (copied) in *@out. Returns 0, -EINVAL (no
 * process or commit op), -ENOMEM or a thread creation error.
 */
int kiln_jobs_new(const struct kiln_jobs_conf *conf, struct kiln_jobs **out);

/*
 * Hand @item, declared to hold @cost bytes, to the pipeline; it is given
 * the next sequence number. The pipeline owns @item from now on, even when
 * this fails: it ends in release(). Commits whatever is ready, and blocks
 * while the in-flight bounds are reached. Returns 0, or the pipeline's
 * error once it has stopped (the items in flight are then retired and
 * @item is released without processing): stop producing and call
 * kiln_jobs_finish().
 */
int kiln_jobs_submit(struct kiln_jobs *jobs, void *item, uint64_t cost);

/*
 * Commit the items that are ready, without blocking. Returns 0, or the
 * pipeline's error once it has stopped.
 */
int kiln_jobs_poll(struct kiln_jobs *jobs);

/*
 * Wait for every submitted item, commit them in order and release them.
 * Returns 0 or the error of the first failing item in submission order,
 * and clears it: the pipeline is then empty and may take a new batch
 * (sequence numbers continue).
 */
int kiln_jobs_finish(struct kiln_jobs *jobs);

/*
 * Abandon what is still in flight (release() without commit, after any
 * running process() returns), stop the pipeline's own threads, free it.
 * kiln_jobs_free(NULL) is a no-op.
 */
void kiln_jobs_free(struct kiln_jobs *jobs);

/* Distinct @worker values process() may see (1 when inline). */
unsigned int kiln_jobs_workers(const struct kiln_jobs *jobs);

/*
 * All functions above belong to one thread (the producer, who is also
 * the committer); process() calls run on the workers.
 */

#endif
