/* SPDX-License-Identifier: MIT */
/*
 * kiln build's progress display: one status line on a terminal, redrawn in
 * place, and the summary line printed when the build is done.
 *
 * Use: cli_progress_init(&cp, stderr); opts.progress = cli_progress_show;
 * opts.progress_ctx = &cp; after kiln_build(), cli_progress_clear() and
 * print cli_build_summary(). A log sink that prints while a build runs
 * calls cli_progress_clear() first; the next report redraws the line.
 */
#ifndef KILN_CLI_PROGRESS_H
#define KILN_CLI_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <kiln/builder.h>

struct cli_progress {
	FILE *out;
	bool enabled;		/* @out is a terminal: draw; otherwise silent */
	size_t drawn;		/* columns of the line now on screen */
	volatile bool line_open;	/* drawn != 0, for a signal handler */
	pthread_mutex_t lock;	/* show and clear may come from two threads */
};

/* Draw on @out only when it is a terminal (isatty). */
void cli_progress_init(struct cli_progress *cp, FILE *out);
/* Erase the line (if any) and release @cp. */
void cli_progress_release(struct cli_progress *cp);

/*
 * kiln_build_opts.progress: redraw the status line (@ctx is the struct
 * cli_progress), cut to the terminal's width so it never wraps.
 */
void cli_progress_show(void *ctx, const struct kiln_build_progress *p);
/* Erase the status line, leaving the cursor at the start of the line. */
void cli_progress_clear(struct cli_progress *cp);

/*
 * The status line for @p, e.g.
 * "42% 1234/5678 files, 1.2 GiB/4.5 GiB in, 512.0 MiB out (41.7%),
 * 98.3 MiB/s, ETA 0:35" (one line). Returns the length snprintf would
 * give; @buf always ends in a NUL when @cap > 0.
 */
size_t cli_progress_format(char *buf, size_t cap,
			   const struct kiln_build_progress *p);

/*
 * The summary line for a finished build, e.g. "5678 files, 4.5 GiB in,
 * 1.9 GiB image (42.1%), 35.2 s, peak memory 312.0 MiB" (no newline).
 * Returns the length snprintf would give.
 */
size_t cli_build_summary(char *buf, size_t cap,
			 const struct kiln_build_stats *st);

/* "35.2 s" below a minute, "2:05" below an hour, then "1:02:05". */
const char *cli_duration(double seconds, char *buf, size_t cap);

#endif
