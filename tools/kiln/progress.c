// SPDX-License-Identifier: MIT
/*
 * kiln build's progress display: a status line redrawn in place with \r on
 * a terminal, nothing otherwise; and the final summary line.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"

/* Append to @buf at *@len like snprintf, keeping the would-be length. */
static void appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*len < cap ? buf + *len : NULL,
		      *len < cap ? cap - *len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n;
}

const char *cli_duration(double seconds, char *buf, size_t cap)
{
	uint64_t s;

	if (!(seconds >= 0))		/* negative or NaN */
		seconds = 0;
	if (seconds < 59.95) {
		snprintf(buf, cap, "%.1f s", seconds);
		return buf;
	}
	s = seconds > 1e12 ? UINT64_C(1000000000000) : (uint64_t)(seconds + 0.5);
	if (s < 3600)
		snprintf(buf, cap, "%" PRIu64 ":%02" PRIu64, s / 60, s % 60);
	else
		snprintf(buf, cap, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64,
			 s / 3600, s / 60 % 60, s % 60);
	return buf;
}

/* "0:35", "12:03", "1:02:05": whole seconds, rounded up. */
static const char *eta_text(double seconds, char *buf, size_t cap)
{
	uint64_t s = seconds > 1e9 ? UINT64_C(1000000000) :
		     (uint64_t)seconds + (seconds > (double)(uint64_t)seconds);

	if (s < 3600)
		snprintf(buf, cap, "%" PRIu64 ":%02" PRIu64, s / 60, s % 60);
	else
		snprintf(buf, cap, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64,
			 s / 3600, s / 60 % 60, s % 60);
	return buf;
}

/* @part of @whole in percent, 0 when @whole is 0. */
static double percent(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

/*
 * Whole percent done, rounded down (100 only when done), at most 100: the
 * counters are read one at a time and may run ahead of the totals.
 */
static unsigned int percent_done(uint64_t part, uint64_t whole)
{
	double v = percent(part, whole);

	return v >= 100.0 ? 100 : (unsigned int)v;
}

size_t cli_progress_format(char *buf, size_t cap,
			   const struct kiln_build_progress *p)
{
	char a[32], b[32];
	size_t len = 0;

	if (cap)
		buf[0] = '\0';
	if (p->bytes_total)
		appendf(buf, cap, &len, "%3u%% ",
			percent_done(p->bytes_done, p->bytes_total));
	else if (p->files_total)
		appendf(buf, cap, &len, "%3u%% ",
			percent_done(p->files_done, p->files_total));
	if (p->files_total)
		appendf(buf, cap, &len, "%" PRIu64 "/%" PRIu64 " files, ",
			p->files_done, p->files_total);
	else
		appendf(buf, cap, &len, "%" PRIu64 " files, ", p->files_done);
	cli_human_size(p->bytes_done, a, sizeof(a));
	if (p->bytes_total)
		appendf(buf, cap, &len, "%s/%s in", a,
			cli_human_size(p->bytes_total, b, sizeof(b)));
	else
		appendf(buf, cap, &len, "%s in", a);
	appendf(buf, cap, &len, ", %s out",
		cli_human_size(p->out_bytes, a, sizeof(a)));
	if (p->bytes_done)
		appendf(buf, cap, &len, " (%.1f%%)",
			percent(p->out_bytes, p->bytes_done));
	if (p->rate > 0)
		appendf(buf, cap, &len, ", %s/s",
			cli_human_size((uint64_t)p->rate, a, sizeof(a)));
	if (p->eta >= 0)
		appendf(buf, cap, &len, ", ETA %s", eta_text(p->eta, a, sizeof(a)));
	return len;
}

size_t cli_build_summary(char *buf, size_t cap,
			 const struct kiln_build_stats *st)
{
	char a[32], b[32];
	size_t len = 0;
	uint64_t files = st->inodes >= st->directories ?
			 st->inodes - st->directories : 0;

	if (cap)
		buf[0] = '\0';
	appendf(buf, cap, &len, "%" PRIu64 " file%s, %" PRIu64 " director%s, "
		"%s in, %s image", files, files == 1 ? "" : "s",
		st->directories, st->directories == 1 ? "y" : "ies",
		cli_human_size(st->input_bytes, a, sizeof(a)),
		cli_human_size(st->image_bytes, b, sizeof(b)));
	if (st->input_bytes)
		appendf(buf, cap, &len, " (%.1f%%)",
			percent(st->image_bytes, st->input_bytes));
	appendf(buf, cap, &len, ", %s", cli_duration(st->seconds, a, sizeof(a)));
	if (st->peak_rss)
		appendf(buf, cap, &len, ", peak memory %s",
			cli_human_size(st->peak_rss, a, sizeof(a)));
	return len;
}

/*
 * Columns the line may use: the terminal's width less one (no wrap), from
 * TIOCGWINSZ, else $COLUMNS, else 80. Asked at every redraw, so a resized
 * window takes effect at once.
 */
static size_t line_width(FILE *out)
{
	const char *env = getenv("COLUMNS");
	struct winsize ws;
	long cols;

	if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
		return (size_t)ws.ws_col - 1;
	cols = env ? strtol(env, NULL, 10) : 0;
	if (cols > 1 && cols < 10000)
		return (size_t)cols - 1;
	return 79;
}

void cli_progress_init(struct cli_progress *cp, FILE *out)
{
	cp->out = out;
	cp->enabled = isatty(fileno(out)) == 1;
	cp->drawn = 0;
	cp->line_open = false;
	pthread_mutex_init(&cp->lock, NULL);
}

void cli_progress_release(struct cli_progress *cp)
{
	cli_progress_clear(cp);
	pthread_mutex_destroy(&cp->lock);
}

void cli_progress_show(void *ctx, const struct kiln_build_progress *p)
{
	struct cli_progress *cp = ctx;
	char line[512];
	size_t len, width;

	if (!cp->enabled)
		return;
	cli_progress_format(line, sizeof(line), p);
	len = strlen(line);
	width = line_width(cp->out);
	if (len > width)
		len = width;
	pthread_mutex_lock(&cp->lock);
	/* overwrite in place; spaces erase what the longer old line left */
	fprintf(cp->out, "\r%.*s%*s", (int)len, line,
		cp->drawn > len ? (int)(cp->drawn - len) : 0, "");
	if (cp->drawn > len)
		fprintf(cp->out, "\r%.*s", (int)len, line);
	fflush(cp->out);
	cp->drawn = len;
	cp->line_open = len != 0;
	pthread_mutex_unlock(&cp->lock);
}

void cli_progress_clear(struct cli_progress *cp)
{
	if (!cp->enabled)
		return;
	pthread_mutex_lock(&cp->lock);
	if (cp->drawn) {
		fprintf(cp->out, "\r%*s\r", (int)cp->drawn, "");
		fflush(cp->out);
		cp->drawn = 0;
		cp->line_open = false;
	}
	pthread_mutex_unlock(&cp->lock);
}
