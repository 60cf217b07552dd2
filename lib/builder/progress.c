// SPDX-License-Identifier: MIT
/*
 * Build progress: lock-free counters, and at most one report per
 * KILN_PROGRESS_INTERVAL_NS to the caller's callback with a smoothed rate
 * and an ETA.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "progress.h"

uint64_t kiln_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The process's own high-water mark (VmHWM). getrusage()'s ru_maxrss
 * survives execve(), so a build started by a large parent would report
 * the parent's peak; it is the fallback where /proc is missing.
 */
uint64_t kiln_peak_rss(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long kib = 0;
	struct rusage ru;
	char line[128];
	bool found = false;

	if (f) {
		while (!found && fgets(line, sizeof(line), f))
			found = sscanf(line, "VmHWM: %llu kB", &kib) == 1;
		fclose(f);
	}
	if (found)
		return (uint64_t)kib * 1024;
	if (getrusage(RUSAGE_SELF, &ru) || ru.ru_maxrss < 0)
		return 0;
	return (uint64_t)ru.ru_maxrss * 1024;	/* Linux: kilobytes */
}

void kiln_progress_init(struct kiln_progress *p, kiln_progress_fn fn,
			void *ctx)
{
	p->fn = fn;
	p->ctx = ctx;
	p->start_ns = kiln_monotonic_ns();
	atomic_init(&p->files_done, 0);
	atomic_init(&p->files_total, 0);
	atomic_init(&p->bytes_done, 0);
	atomic_init(&p->bytes_total, 0);
	atomic_init(&p->out_bytes, 0);
	atomic_init(&p->next_due_ns, 0);
	pthread_mutex_init(&p->report_lock, NULL);
	p->rate_ns = p->start_ns;
	p->rate_bytes = 0;
	p->rate = 0;
	p->have_rate = false;
}

void kiln_progress_init_opts(struct kiln_progress *p,
			     const struct kiln_build_opts *opts)
{
	size_t need = offsetof(struct kiln_build_opts, progress_ctx) +
		      sizeof(opts->progress_ctx);

	if (opts && opts->struct_size >= need)
		kiln_progress_init(p, opts->progress, opts->progress_ctx);
	else
		kiln_progress_init(p, NULL, NULL);
}

void kiln_progress_release(struct kiln_progress *p)
{
	pthread_mutex_destroy(&p->report_lock);
}

void kiln_progress_add_total(struct kiln_progress *p, uint64_t files,
			     uint64_t bytes)
{
	atomic_fetch_add_explicit(&p->files_total, files, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->bytes_total, bytes, memory_order_relaxed);
}

void kiln_progress_add_done(struct kiln_progress *p, uint64_t files,
			    uint64_t bytes)
{
	atomic_fetch_add_explicit(&p->files_done, files, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->bytes_done, bytes, memory_order_relaxed);
}

void kiln_progress_out_reach(struct kiln_progress *p, uint64_t end)
{
	uint64_t now = atomic_load_explicit(&p->out_bytes,
					    memory_order_relaxed);

	while (now < end &&
	       !atomic_compare_exchange_weak_explicit(&p->out_bytes, &now, end,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/*
 * Fold the input done since the last sample into the smoothed rate: an
 * exponential moving average whose weight grows with the time the sample
 * covers (dt / (tau + dt), first order in exp(-dt / tau)), so irregular
 * report intervals weigh correctly. The first sample with any
 * progress seeds it (no slow ramp from zero after a long scan). Lock held.
 */
static void rate_sample(struct kiln_progress *p, uint64_t now_ns,
			uint64_t bytes_done)
{
	double dt, inst, alpha;

	if (now_ns <= p->rate_ns || bytes_done < p->rate_bytes)
		return;
	dt = (double)(now_ns - p->rate_ns) / 1e9;
	inst = (double)(bytes_done - p->rate_bytes) / dt;
	if (!p->have_rate) {
		if (bytes_done == p->rate_bytes) {
			p->rate_ns = now_ns;	/* nothing yet: restart */
			return;
		}
		p->rate = inst;
		p->have_rate = true;
	} else {
		alpha = dt / (KILN_PROGRESS_RATE_TAU_S + dt);
		p->rate += alpha * (inst - p->rate);
	}
	p->rate_ns = now_ns;
	p->rate_bytes = bytes_done;
}

/* Counters, clock, rate and ETA into @out. Lock held. */
static void fill_report(struct kiln_progress *p, uint64_t now_ns,
			struct kiln_build_progress *out)
{
	*out = (struct kiln_build_progress){
		.struct_size = sizeof(*out),
		.files_done = atomic_load_explicit(&p->files_done,
						   memory_order_relaxed),
		.files_total = atomic_load_explicit(&p->files_total,
						    memory_order_relaxed),
		.bytes_done = atomic_load_explicit(&p->bytes_done,
						   memory_order_relaxed),
		.bytes_total = atomic_load_explicit(&p->bytes_total,
						    memory_order_relaxed),
		.out_bytes = atomic_load_explicit(&p->out_bytes,
						  memory_order_relaxed),
		.elapsed = now_ns > p->start_ns ?
			   (double)(now_ns - p->start_ns) / 1e9 : 0,
		.rate = p->have_rate ? p->rate : 0,
		.eta = -1,
	};
	if (out->bytes_total && out->bytes_done >= out->bytes_total)
		out->eta = 0;
	else if (out->bytes_total && out->rate > 0)
		out->eta = (double)(out->bytes_total - out->bytes_done) /
			   out->rate;
}

/* Sample the rate and call the callback. Lock held. */
static void report(struct kiln_progress *p, uint64_t now_ns)
{
	struct kiln_build_progress snap;

	rate_sample(p, now_ns,
		    atomic_load_explicit(&p->bytes_done, memory_order_relaxed));
	fill_report(p, now_ns, &snap);
	atomic_store_explicit(&p->next_due_ns,
			      now_ns + KILN_PROGRESS_INTERVAL_NS,
			      memory_order_relaxed);
	p->fn(p->ctx, &snap);
}

bool kiln_progress_tick_at(struct kiln_progress *p, uint64_t now_ns)
{
	if (!p->fn ||
	    now_ns < atomic_load_explicit(&p->next_due_ns, memory_order_relaxed))
		return false;
	if (pthread_mutex_trylock(&p->report_lock))
		return false;		/* someone else is reporting */
	/* re-check: another thread may have reported since our load */
	if (now_ns < atomic_load_explicit(&p->next_due_ns,
					  memory_order_relaxed)) {
		pthread_mutex_unlock(&p->report_lock);
		return false;
	}
	report(p, now_ns);
	pthread_mutex_unlock(&p->report_lock);
	return true;
}

bool kiln_progress_end_at(struct kiln_progress *p, uint64_t now_ns)
{
	if (!p->fn)
		return false;
	pthread_mutex_lock(&p->report_lock);
	report(p, now_ns);
	pthread_mutex_unlock(&p->report_lock);
	return true;
}

void kiln_progress_tick(struct kiln_progress *p)
{
	if (p->fn)
		kiln_progress_tick_at(p, kiln_monotonic_ns());
}

void kiln_progress_end(struct kiln_progress *p)
{
	kiln_progress_end_at(p, kiln_monotonic_ns());
}

void kiln_progress_snapshot(struct kiln_progress *p, uint64_t now_ns,
			    struct kiln_build_progress *out)
{
	pthread_mutex_lock(&p->report_lock);
	fill_report(p, now_ns, out);
	pthread_mutex_unlock(&p->report_lock);
}
