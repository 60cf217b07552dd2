/* SPDX-License-Identifier: MIT */
/*
 * Test fixture for kiln_build(): a scratch directory (tmp) holding the
 * source tree in src/ and the images, its files read and written by
 * relative name, and the last error a build logged.
 */
#ifndef KILN_TESTS_BUILD_FIXTURE_H
#define KILN_TESTS_BUILD_FIXTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include "tap.h"

static char tmp[64];		/* the scratch directory */

/* A fresh /tmp/kiln-test-@name.XXXXXX with an empty src/ in it. */
static inline void scratch_make(const char *name)
{
	char path[256];

	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-%s.XXXXXX", name);
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(path, sizeof(path), "%s/src", tmp);
	CHECK(mkdir(path, 0755) == 0);
}

/* Write @len bytes of @data to @rel (below the scratch directory). */
static inline void scratch_write(const char *rel, const void *data,
				 size_t len)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

/* All of @rel in a malloc'd buffer (*@len bytes), or NULL (*@len 0). */
static inline void *scratch_load(const char *rel, size_t *len)
{
	char path[512];
	char *buf = NULL;
	FILE *f;
	long n;

	*len = 0;
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Remove the scratch directory and all in it. */
static inline void scratch_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
}

/* The last error a build logged, and how many: opts.log = capture_log. */
struct log_capture {
	char last[1024];
	int errors;
};

static inline void capture_log(void *ctx, enum kiln_log_level level,
			       const char *msg)
{
	struct log_capture *c = ctx;

	if (level != KILN_LOG_ERROR)
		return;
	snprintf(c->last, sizeof(c->last), "%s", msg);
	c->errors++;
}

#endif
