// SPDX-License-Identifier: MIT
/*
 * The ordered job pipeline: parallel process(), in-order commit() on the
 * caller's thread, bounded in-flight items. See jobs.h for the contract.
 *
 * In-flight items live in a ring of max_items slots; item @seq uses slot
 * seq % max_items, free because fewer than max_items items are in flight:
 *
 *      head_seq                         next_seq
 *         v                                 v
 *   ... [DONE][QUEUED][DONE][QUEUED] ... [FREE] ...
 *         ^ retired (committed + released) next, once DONE
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/jobs.h"
#include "util/threadpool.h"

enum slot_state {
	SLOT_FREE = 0,
	SLOT_QUEUED,		/* submitted, process() not finished */
	SLOT_DONE,		/* process() returned (or was skipped) */
};

struct kiln_job_slot {
	struct kiln_jobs *jobs;
	void *item;
	uint64_t seq;
	uint64_t cost;
	enum slot_state state;
};

#define NOT_STOPPED UINT64_MAX

struct kiln_jobs {
	struct kiln_jobs_ops ops;
	void *ctx;
	struct kiln_threadpool *pool;	/* NULL: inline */
	bool own_pool;
	unsigned int workers;
	size_t max_items;
	uint64_t max_bytes;

	pthread_mutex_t lock;		/* guards everything below */
	/* the slot at @head_seq became DONE, or a finished item shrank */
	pthread_cond_t head_done;
	struct kiln_job_slot *slots;
	uint64_t head_seq;		/* oldest item not yet released */
	uint64_t next_seq;		/* sequence number of the next submit */
	uint64_t bytes;			/* cost of the items in flight */
	/*
	 * First failing item in sequence order and its error; items after it
	 * skip process(), it and they are never committed.
	 */
	uint64_t stop_seq;
	int err;
	bool cancelled;			/* kiln_jobs_free(): commit nothing */
};

/* Record that item @seq failed with @err, if it is the earliest failure. */
static void jobs_fail(struct kiln_jobs *j, uint64_t seq, int err)
{
	if (seq < j->stop_seq) {
		j->stop_seq = seq;
		j->err = err;
	}
}

/* The worker side: one task per item. */
static void job_run(void *arg)
{
	struct kiln_job_slot *s = arg;
	struct kiln_jobs *j = s->jobs;
	int widx = kiln_threadpool_worker_index();
	uint64_t held = UINT64_MAX;
	bool skip, shrunk = false;
	int err = 0;

	pthread_mutex_lock(&j->lock);
	skip = j->cancelled || s->seq > j->stop_seq;
	pthread_mutex_unlock(&j->lock);

	if (!skip)
		err = j->ops.process(j->ctx, s->item,
				     widx < 0 ? 0 : (unsigned int)widx);

	if (!skip && !err && j->ops.held)
		held = j->ops.held(j->ctx, s->item);

	pthread_mutex_lock(&j->lock);
	if (err)
		jobs_fail(j, s->seq, err);
	s->state = SLOT_DONE;
	/* a producer waiting for room may enter now */
	if (held < s->cost) {
		j->bytes -= s->cost - held;
		s->cost = held;
		shrunk = true;
	}
	if (s->seq == j->head_seq || shrunk)
		pthread_cond_signal(&j->head_done);
	/* @j may be freed as soon as the lock is dropped: touch nothing after */
	pthread_mutex_unlock(&j->lock);
}

/*
 * Commit and release the finished items at the head, in order, stopping
 * at the first one still being processed. Called with the lock held; drops
 * it around the callbacks. Slots at or after the head are never touched by
 * the committer while a worker owns them, and no item before the head can
 * fail any more, so @stop_seq cannot move below the item being committed.
 */
static void retire_ready(struct kiln_jobs *j)
{
	while (j->head_seq < j->next_seq) {
		struct kiln_job_slot *s = &j->slots[j->head_seq % j->max_items];
		bool commit;
		int err = 0;

		if (s->state != SLOT_DONE)
			break;
		commit = !j->cancelled && s->seq < j->stop_seq;
		pthread_mutex_unlock(&j->lock);
		if (commit)
			err = j->ops.commit(j->ctx, s->item);
		if (j->ops.release)
			j->ops.release(j->ctx, s->item);
		pthread_mutex_lock(&j->lock);
		if (err)
			jobs_fail(j, s->seq, err);
		j->bytes -= s->cost;
		s->state = SLOT_FREE;
		s->item = NULL;
		j->head_seq++;
	}
}

/* Retire everything in flight, sleeping while the head is processed. */
static void retire_all(struct kiln_jobs *j)
{
	for (;;) {
		retire_ready(j);
		if (j->head_seq == j->next_seq)
			break;
		while (j->slots[j->head_seq % j->max_items].state != SLOT_DONE)
			pthread_cond_wait(&j->head_done, &j->lock);
	}
}

/* May an item of @cost enter now? Lock held. */
static bool has_room(const struct kiln_jobs *j, uint64_t cost)
{
	uint64_t in_flight = j->next_seq - j->head_seq;

	if (in_flight == 0)
		return true;	/* one item always fits: progress */
	if (in_flight >= j->max_items)
		return false;
	return !j->max_bytes ||
	       (j->bytes <= j->max_bytes && cost <= j->max_bytes - j->bytes);
}

static int submit_inline(struct kiln_jobs *j, void *item)
{
	int err = j->err;

	if (j->stop_seq == NOT_STOPPED) {
		err = j->ops.process(j->ctx, item, 0);
		if (!err)
			err = j->ops.commit(j->ctx, item);
		if (err)
			jobs_fail(j, j->next_seq, err);
	}
	if (j->ops.release)
		j->ops.release(j->ctx, item);
	j->next_seq++;
	j->head_seq++;
	return err;
}

int kiln_jobs_submit(struct kiln_jobs *j, void *item, uint64_t cost)
{
	struct kiln_job_slot *s;
	int err;

	if (!j->pool)
		return submit_inline(j, item);

	pthread_mutex_lock(&j->lock);
	for (;;) {
		retire_ready(j);
		if (j->stop_seq != NOT_STOPPED) {
			/* keep release() in order: the earlier items go first */
			retire_all(j);
			err = j->err;
			pthread_mutex_unlock(&j->lock);
			if (j->ops.release)
				j->ops.release(j->ctx, item);
			return err;
		}
		if (has_room(j, cost))
			break;
		/* full: wait for the head to finish or an item to shrink */
		pthread_cond_wait(&j->head_done, &j->lock);
	}
	s = &j->slots[j->next_seq % j->max_items];
	assert(s->state == SLOT_FREE);
	s->item = item;
	s->seq = j->next_seq++;
	s->cost = cost;
	s->state = SLOT_QUEUED;
	j->bytes += cost;
	pthread_mutex_unlock(&j->lock);

	err = kiln_threadpool_submit(j->pool, job_run, s);
	if (err) {
		/* not queued: it fails here, in order, like a process() error */
		pthread_mutex_lock(&j->lock);
		jobs_fail(j, s->seq, err);
		s->state = SLOT_DONE;
		pthread_mutex_unlock(&j->lock);
		return err;
	}
	return 0;
}

int kiln_jobs_poll(struct kiln_jobs *j)
{
	int err;

	if (!j->pool)
		return j->err;
	pthread_mutex_lock(&j->lock);
	retire_ready(j);
	err = j->err;
	pthread_mutex_unlock(&j->lock);
	return err;
}

int kiln_jobs_finish(struct kiln_jobs *j)
{
	int err;

	if (j->pool) {
		pthread_mutex_lock(&j->lock);
		retire_all(j);
		pthread_mutex_unlock(&j->lock);
	}
	err = j->err;
	j->err = 0;
	j->stop_seq = NOT_STOPPED;
	return err;
}

int kiln_jobs_new(const struct kiln_jobs_conf *conf, struct kiln_jobs **out)
{
	struct kiln_jobs *j;
	int err;

	*out = NULL;
	if (!conf->ops || !conf->ops->process || !conf->ops->commit)
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->ops = *conf->ops;
	j->ctx = conf->ctx;
	j->max_bytes = conf->max_bytes;
	j->stop_seq = NOT_STOPPED;
	j->pool = conf->pool;
	if (!j->pool && conf->threads > 1) {
		err = kiln_threadpool_new(conf->threads, &j->pool);
		if (err) {
			free(j);
			return err;
		}
		j->own_pool = true;
	}
	if (j->pool && !kiln_threadpool_size(j->pool))
		j->pool = NULL;		/* a pool without threads: inline */
	j->workers = j->pool ? kiln_threadpool_size(j->pool) : 1;
	j->max_items = conf->max_items ? conf->max_items : 4 * (size_t)j->workers;
	if (j->pool) {
		j->slots = calloc(j->max_items, sizeof(*j->slots));
		if (!j->slots) {
			if (j->own_pool)
				kiln_threadpool_free(j->pool);
			free(j);
			return -ENOMEM;
		}
		for (size_t i = 0; i < j->max_items; i++)
			j->slots[i].jobs = j;
	}
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->head_done, NULL);
	*out = j;
	return 0;
}

void kiln_jobs_free(struct kiln_jobs *j)
{
	if (!j)
		return;
	if (j->pool) {
		pthread_mutex_lock(&j->lock);
		j->cancelled = true;
		retire_all(j);
		pthread_mutex_unlock(&j->lock);
		if (j->own_pool)
			kiln_threadpool_free(j->pool);
	}
	pthread_cond_destroy(&j->head_done);
	pthread_mutex_destroy(&j->lock);
	free(j->slots);
	free(j);
}

unsigned int kiln_jobs_workers(const struct kiln_jobs *j)
{
	return j->workers;
}
