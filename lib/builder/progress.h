/* SPDX-License-Identifier: MIT */
/*
 * Build progress: counters any thread may bump without locking, and the
 * rate-limited report to the caller's kiln_build_opts.progress callback,
 * with a smoothed input rate and the ETA it gives against the known total.
 *
 * Usage: kiln_progress_init() when the build starts; the scan adds to the
 * totals, data jobs add files/bytes done and bytes written, and anyone may
 * call kiln_progress_tick() as often as they like (a no-op unless 100 ms
 * have passed); kiln_progress_end() sends the final report.
 */
#ifndef KILN_BUILDER_PROGRESS_H
#define KILN_BUILDER_PROGRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <kiln/builder.h>

typedef void (*kiln_progress_fn)(void *ctx,
				 const struct kiln_build_progress *p);

/* Minimum time between two reports. */
#define KILN_PROGRESS_INTERVAL_NS 100000000ull
/* Time constant of the rate's exponential smoothing. */
#define KILN_PROGRESS_RATE_TAU_S 3.0

struct kiln_progress {
	kiln_progress_fn fn;		/* NULL: every call is (almost) free */
	void *ctx;
	uint64_t start_ns;		/* kiln_monotonic_ns() at init */
	_Atomic uint64_t files_done, files_total;
	_Atomic uint64_t bytes_done, bytes_total;
	_Atomic uint64_t out_bytes;
	_Atomic uint64_t next_due_ns;	/* no report before this time */
	/* held while reporting: serializes fn and guards the rate state */
	pthread_mutex_t report_lock;
	uint64_t rate_ns, rate_bytes;	/* last rate sample */
	double rate;			/* smoothed input bytes per second */
	bool have_rate;
};

/* Start the clock; @fn may be NULL. Embedded struct: _init/_release. */
void kiln_progress_init(struct kiln_progress *p, kiln_progress_fn fn,
			void *ctx);
/*
 * The same with the callback of @opts (NULL allowed), taken only when
 * @opts->struct_size shows the caller knows the progress fields.
 */
void kiln_progress_init_opts(struct kiln_progress *p,
			     const struct kiln_build_opts *opts);
void kiln_progress_release(struct kiln_progress *p);

/* Counters: thread-safe, lock-free, never report by themselves. */
void kiln_progress_add_total(struct kiln_progress *p, uint64_t files,
			     uint64_t bytes);
void kiln_progress_add_done(struct kiln_progress *p, uint64_t files,
			    uint64_t bytes);
/* out_bytes becomes @end if that is more (the image grew to @end bytes). */
void kiln_progress_out_reach(struct kiln_progress *p, uint64_t end);

/*
 * Report if at least KILN_PROGRESS_INTERVAL_NS passed since the last
 * report. Thread-safe and cheap when not due (one atomic load); when
 * another thread is reporting, returns without waiting.
 */
void kiln_progress_tick(struct kiln_progress *p);
/* Report now, unconditionally (waits for a report in progress). */
void kiln_progress_end(struct kiln_progress *p);

/*
 * The same with the clock given (nanoseconds on kiln_monotonic_ns()'s
 * scale), for tests. Return whether the callback was called.
 */
bool kiln_progress_tick_at(struct kiln_progress *p, uint64_t now_ns);
bool kiln_progress_end_at(struct kiln_progress *p, uint64_t now_ns);

/*
 * Fill @out with the counters, elapsed time, and the rate and ETA as of
 * the last report. Thread-safe; the counters are read one by one, so a
 * snapshot taken while others add may mix neighbouring moments.
 */
void kiln_progress_snapshot(struct kiln_progress *p, uint64_t now_ns,
			    struct kiln_build_progress *out);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t kiln_monotonic_ns(void);
/* Peak resident set size of this process in bytes (getrusage), 0 if unknown. */
uint64_t kiln_peak_rss(void);

#endif
