// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/progress.c: counters under concurrency, the report
 * rate limit, the smoothed rate and the ETA (on a fake clock).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "builder/progress.h"
#include "tap.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define MIB (1024.0 * 1024.0)

struct sink {
	unsigned int calls;
	struct kiln_build_progress last;
	_Atomic unsigned int inside, overlaps, acalls;
};

static void sink_fn(void *ctx, const struct kiln_build_progress *p)
{
	struct sink *s = ctx;

	if (atomic_exchange(&s->inside, 1))
		atomic_fetch_add(&s->overlaps, 1);
	s->calls++;
	atomic_fetch_add(&s->acalls, 1);
	s->last = *p;
	atomic_store(&s->inside, 0);
}

static bool near(double a, double b, double rel)
{
	double d = a > b ? a - b : b - a;

	return d <= rel * (b > 0 ? b : -b);
}

struct adder {
	struct kiln_progress *p;
	struct sink *s;
};

static void *add_many(void *arg)
{
	struct adder *a = arg;

	for (int i = 0; i < 100000; i++) {
		kiln_progress_add_done(a->p, 1, 3);
		kiln_progress_out_reach(a->p, (uint64_t)(i + 1) * 8);
		if (i % 1000 == 0)
			kiln_progress_add_total(a->p, 7, 11);
		kiln_progress_tick(a->p);
	}
	return NULL;
}

TEST(counters_add_up_across_threads_and_reports_never_overlap)
{
	struct sink s = { 0 };
	struct kiln_progress p;
	struct kiln_build_progress snap;
	struct adder a = { &p, &s };
	pthread_t th[4];

	kiln_progress_init(&p, sink_fn, &s);
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, add_many, &a);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	kiln_progress_snapshot(&p, kiln_monotonic_ns(), &snap);
	CHECK_EQ(snap.files_done, 400000);
	CHECK_EQ(snap.bytes_done, 1200000);
	CHECK_EQ(snap.out_bytes, 800000);	/* the furthest, never a sum */
	kiln_progress_out_reach(&p, 5);		/* and it never goes back */
	kiln_progress_snapshot(&p, kiln_monotonic_ns(), &snap);
	CHECK_EQ(snap.out_bytes, 800000);
	CHECK_EQ(snap.files_total, 4 * 100 * 7);
	CHECK_EQ(snap.bytes_total, 4 * 100 * 11);
	CHECK_EQ(snap.struct_size, sizeof(snap));
	CHECK_EQ(atomic_load(&s.overlaps), 0);
	CHECK(atomic_load(&s.acalls) >= 1);	/* the first tick is due */
	kiln_progress_end(&p);
	CHECK_EQ(s.last.files_done, 400000);
	kiln_progress_release(&p);
}

TEST(ticks_report_at_most_every_100ms)
{
	struct sink s = { 0 };
	struct kiln_progress p;
	uint64_t t0;
	unsigned int reported = 0;

	kiln_progress_init(&p, sink_fn, &s);
	t0 = p.start_ns;
	/* a tick every millisecond for two seconds */
	for (uint64_t ms = 0; ms < 2000; ms++)
		reported += kiln_progress_tick_at(&p, t0 + ms * MS);
	CHECK_EQ(reported, s.calls);
	CHECK_EQ(s.calls, 20);		/* at 0, 100, ..., 1900 ms */
	CHECK(near(s.last.elapsed, 1.9, 1e-9));
	/* end always reports, even right after a tick */
	CHECK(kiln_progress_end_at(&p, t0 + 1900 * MS + 1));
	CHECK_EQ(s.calls, 21);
	kiln_progress_release(&p);
}

TEST(rate_converges_to_steady_throughput_and_gives_eta)
{
	struct sink s = { 0 };
	struct kiln_progress p;
	uint64_t t0;

	kiln_progress_init(&p, sink_fn, &s);
	t0 = p.start_ns;
	kiln_progress_add_total(&p, 100, 2000 * MIB);
	/* 5 s of scanning with no input progress: rate stays unknown */
	for (uint64_t ms = 0; ms <= 5000; ms += 100)
		kiln_progress_tick_at(&p, t0 + ms * MS);
	CHECK(s.last.rate == 0);
	CHECK(s.last.eta < 0);
	/* then 10 MiB every 100 ms (100 MiB/s) for 10 s */
	for (uint64_t ms = 5100; ms <= 15000; ms += 100) {
		kiln_progress_add_done(&p, 0, 10 * MIB);
		kiln_progress_tick_at(&p, t0 + ms * MS);
		if (ms == 5100)	/* seeded by the first sample, no ramp */
			CHECK(near(s.last.rate, 100 * MIB, 1e-6));
	}
	CHECK(near(s.last.rate, 100 * MIB, 1e-6));
	CHECK_EQ(s.last.bytes_done, 1000 * MIB);
	CHECK(near(s.last.eta, 10.0, 1e-6));
	/* input stalls: the rate decays, the ETA grows */
	kiln_progress_tick_at(&p, t0 + 18000 * MS);
	CHECK(s.last.rate < 100 * MIB);
	CHECK(s.last.eta > 10.0);
	/* speed doubles: the rate follows within a few time constants */
	for (uint64_t ms = 18100; ms <= 30000; ms += 100) {
		kiln_progress_add_done(&p, 0, 20 * MIB);
		kiln_progress_tick_at(&p, t0 + ms * MS);
	}
	CHECK(near(s.last.rate, 200 * MIB, 0.05));
	kiln_progress_release(&p);
}

TEST(eta_is_unknown_without_total_and_zero_when_done)
{
	struct sink s = { 0 };
	struct kiln_progress p;
	uint64_t t0;

	kiln_progress_init(&p, sink_fn, &s);
	t0 = p.start_ns;
	kiln_progress_add_done(&p, 1, 4096);
	kiln_progress_tick_at(&p, t0 + SEC);
	CHECK(s.last.rate > 0);
	CHECK(s.last.eta < 0);		/* no total known */
	kiln_progress_add_total(&p, 1, 4096);
	kiln_progress_end_at(&p, t0 + 2 * SEC);
	CHECK(s.last.eta == 0);
	CHECK_EQ(s.last.files_done, s.last.files_total);
	kiln_progress_release(&p);
}

TEST(no_callback_makes_ticks_no_ops)
{
	struct kiln_progress p;
	struct kiln_build_progress snap;

	kiln_progress_init(&p, NULL, NULL);
	kiln_progress_add_done(&p, 2, 10);
	CHECK(!kiln_progress_tick_at(&p, p.start_ns + SEC));
	CHECK(!kiln_progress_end_at(&p, p.start_ns + SEC));
	kiln_progress_tick(&p);
	kiln_progress_end(&p);
	kiln_progress_snapshot(&p, p.start_ns + 3 * SEC, &snap);
	CHECK_EQ(snap.files_done, 2);
	CHECK(near(snap.elapsed, 3.0, 1e-9));
	CHECK(snap.eta < 0);
	kiln_progress_release(&p);
}

TEST(options_give_the_callback_only_when_struct_size_covers_it)
{
	struct sink s = { 0 };
	struct kiln_build_opts opts = {
		.struct_size = sizeof(opts),
		.progress = sink_fn,
		.progress_ctx = &s,
	};
	struct kiln_progress p;

	kiln_progress_init_opts(&p, &opts);
	CHECK(kiln_progress_end_at(&p, p.start_ns));
	CHECK_EQ(s.calls, 1);
	kiln_progress_release(&p);
	/* a caller built against the header before the progress fields */
	opts.struct_size = offsetof(struct kiln_build_opts, progress);
	kiln_progress_init_opts(&p, &opts);
	CHECK(!kiln_progress_end_at(&p, p.start_ns));
	kiln_progress_release(&p);
	kiln_progress_init_opts(&p, NULL);
	CHECK(!kiln_progress_end_at(&p, p.start_ns));
	kiln_progress_release(&p);
	CHECK_EQ(s.calls, 1);
}

TEST(peak_rss_reflects_touched_memory)
{
	size_t len = 32u << 20;
	volatile unsigned char *buf = malloc(len);
	uint64_t rss;

	CHECK(buf != NULL);
	if (!buf)
		return;
	/* volatile: the compiler may not drop the writes that make it RSS */
	for (size_t i = 0; i < len; i += 4096)
		buf[i] = 0x5a;
	rss = kiln_peak_rss();
	CHECK(rss >= len);
	CHECK(rss < (uint64_t)1 << 40);
	free((void *)buf);
}

TAP_MAIN(TAP_ENTRY(counters_add_up_across_threads_and_reports_never_overlap),
	 TAP_ENTRY(ticks_report_at_most_every_100ms),
	 TAP_ENTRY(rate_converges_to_steady_throughput_and_gives_eta),
	 TAP_ENTRY(eta_is_unknown_without_total_and_zero_when_done),
	 TAP_ENTRY(no_callback_makes_ticks_no_ops),
	 TAP_ENTRY(options_give_the_callback_only_when_struct_size_covers_it),
	 TAP_ENTRY(peak_rss_reflects_touched_memory))
