// SPDX-License-Identifier: MIT
/*
 * Tests for tools/kiln/progress.c: the status and summary lines, and the
 * in-place redraw on a terminal (a pseudo-terminal here).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"
#include "tap.h"

#define MIB (UINT64_C(1) << 20)

static struct kiln_build_progress sample(void)
{
	return (struct kiln_build_progress){
		.struct_size = sizeof(struct kiln_build_progress),
		.files_done = 1234,
		.files_total = 5678,
		.bytes_done = 1536 * MIB,
		.bytes_total = 4608 * MIB,
		.out_bytes = 512 * MIB,
		.elapsed = 10,
		.rate = 100.0 * MIB,
		.eta = 30.5,
	};
}

TEST(status_line_shows_counts_sizes_ratio_rate_and_eta)
{
	struct kiln_build_progress p = sample();
	char line[256];
	size_t len = cli_progress_format(line, sizeof(line), &p);

	CHECK_EQ(len, strlen(line));
	CHECK(!strcmp(line, " 33% 1234/5678 files, 1.5 GiB/4.5 GiB in, "
		      "512.0 MiB out (33.3%), 100.0 MiB/s, ETA 0:31"));
	CHECK(!strchr(line, '\n'));
}

TEST(status_line_while_totals_are_unknown)
{
	struct kiln_build_progress p = {
		.files_done = 7, .bytes_done = 100, .out_bytes = 0, .eta = -1,
	};
	char line[256];

	cli_progress_format(line, sizeof(line), &p);
	CHECK(!strcmp(line, "7 files, 100 B in, 0 B out (0.0%)"));
	p.bytes_done = 0;
	cli_progress_format(line, sizeof(line), &p);
	CHECK(!strcmp(line, "7 files, 0 B in, 0 B out"));
}

TEST(percent_never_shows_100_before_done_nor_more_than_100)
{
	struct kiln_build_progress p = sample();
	char line[256];

	p.bytes_done = p.bytes_total - 1;
	cli_progress_format(line, sizeof(line), &p);
	CHECK(!strncmp(line, " 99% ", 5));
	p.bytes_done = p.bytes_total + 4096;
	cli_progress_format(line, sizeof(line), &p);
	CHECK(!strncmp(line, "100% ", 5));
	p.bytes_total = 0;	/* falls back to files */
	cli_progress_format(line, sizeof(line), &p);
	CHECK(!strncmp(line, " 21% 1234/5678 files", 20));
}

TEST(eta_and_duration_formats)
{
	struct kiln_build_progress p = sample();
	char line[256], d[32];

	p.eta = 3725;
	cli_progress_format(line, sizeof(line), &p);
	CHECK(strstr(line, ", ETA 1:02:05") != NULL);
	p.eta = 0;
	cli_progress_format(line, sizeof(line), &p);
	CHECK(strstr(line, ", ETA 0:00") != NULL);
	CHECK(!strcmp(cli_duration(35.24, d, sizeof(d)), "35.2 s"));
	CHECK(!strcmp(cli_duration(125, d, sizeof(d)), "2:05"));
	CHECK(!strcmp(cli_duration(3725, d, sizeof(d)), "1:02:05"));
	CHECK(!strcmp(cli_duration(-1, d, sizeof(d)), "0.0 s"));
}

TEST(formatting_truncates_safely)
{
	struct kiln_build_progress p = sample();
	char full[256], small[16];
	size_t len = cli_progress_format(full, sizeof(full), &p);

	CHECK_EQ(cli_progress_format(small, sizeof(small), &p), len);
	CHECK_EQ(strlen(small), sizeof(small) - 1);
	CHECK(!strncmp(small, full, sizeof(small) - 1));
	CHECK_EQ(cli_progress_format(NULL, 0, &p), len);
}

TEST(summary_line_has_files_sizes_ratio_time_and_peak_memory)
{
	struct kiln_build_stats st = {
		.inodes = 5798, .regular_files = 5600, .directories = 120,
		.input_bytes = 4608 * MIB, .image_bytes = 1940 * MIB,
		.seconds = 35.21, .peak_rss = 312 * MIB,
	};
	char line[256];

	CHECK_EQ(cli_build_summary(line, sizeof(line), &st), strlen(line));
	CHECK(!strcmp(line, "5678 files, 120 directories, 4.5 GiB in, "
		      "1.9 GiB image (42.1%), 35.2 s, peak memory 312.0 MiB"));
	st = (struct kiln_build_stats){ .inodes = 2, .directories = 1 };
	cli_build_summary(line, sizeof(line), &st);
	CHECK(!strcmp(line, "1 file, 1 directory, 0 B in, 0 B image, 0.0 s"));
}

/* Read what is available on @fd into @buf (NUL-terminated). */
static size_t drain(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return len;
}

TEST(terminal_line_is_redrawn_in_place_and_cleared)
{
	struct kiln_build_progress p = sample();
	struct cli_progress cp;
	char buf[2048], *name;
	int master, slave;
	FILE *f;

	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) || unlockpt(master) ||
	    !(name = ptsname(master)))
		SKIP("no pseudo-terminal");
	slave = open(name, O_RDWR | O_NOCTTY);
	CHECK(slave >= 0);
	if (slave < 0)
		return;
	f = fdopen(slave, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fcntl(master, F_SETFL, O_NONBLOCK);

	cli_progress_init(&cp, f);
	CHECK(cp.enabled);
	cli_progress_show(&cp, &p);
	p.files_total = 0;	/* a shorter line must erase the longer one */
	p.bytes_total = 0;
	p.eta = -1;
	cli_progress_show(&cp, &p);
	cli_progress_release(&cp);
	fclose(f);
	usleep(10000);
	drain(master, buf, sizeof(buf));
	close(master);
	CHECK(buf[0] == '\r');
	CHECK(strstr(buf, "1234/5678 files") != NULL);
	CHECK(strstr(buf, "\r1234 files, 1.5 GiB in") != NULL);
	CHECK(!strchr(buf, '\n'));	/* never a new line */
	CHECK(buf[strlen(buf) - 1] == '\r');	/* cleared: cursor at column 0 */
}

TEST(not_a_terminal_stays_silent)
{
	struct kiln_build_progress p = sample();
	struct cli_progress cp;
	char buf[64];
	FILE *f = tmpfile();

	CHECK(f != NULL);
	if (!f)
		return;
	cli_progress_init(&cp, f);
	CHECK(!cp.enabled);
	cli_progress_show(&cp, &p);
	cli_progress_clear(&cp);
	cli_progress_release(&cp);
	rewind(f);
	CHECK_EQ(fread(buf, 1, sizeof(buf), f), 0);
	fclose(f);
}

TAP_MAIN(TAP_ENTRY(status_line_shows_counts_sizes_ratio_rate_and_eta),
	 TAP_ENTRY(status_line_while_totals_are_unknown),
	 TAP_ENTRY(percent_never_shows_100_before_done_nor_more_than_100),
	 TAP_ENTRY(eta_and_duration_formats),
	 TAP_ENTRY(formatting_truncates_safely),
	 TAP_ENTRY(summary_line_has_files_sizes_ratio_time_and_peak_memory),
	 TAP_ENTRY(terminal_line_is_redrawn_in_place_and_cleared),
	 TAP_ENTRY(not_a_terminal_stays_silent))
