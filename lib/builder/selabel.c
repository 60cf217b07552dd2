// SPDX-License-Identifier: MIT
/*
 * SELinux labels from a file_contexts file: libselinux's selabel_lookup()
 * on each file's path below the image's mount point.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <selinux/label.h>
#include <selinux/selinux.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/internal.h"
#include "builder/selabel.h"
#include "util/checked.h"

struct kiln_selabel {
	struct selabel_handle *h;
	char *prefix;		/* the mount point, "" for "/" */
	size_t prefix_len;
};

/*
 * libselinux reports a broken file through a process-wide log callback,
 * without a context pointer: while selabel_open() runs on this thread,
 * its first message is kept here and logged through the build's logger.
 */
struct capture {
	char msg[512];
	bool have;
};

static _Thread_local struct capture *capturing;
/* builds loading at once would give each other's callbacks back early */
static pthread_mutex_t loading = PTHREAD_MUTEX_INITIALIZER;

__attribute__((format(printf, 2, 3)))
static int capture_log(int type, const char *fmt, ...)
{
	struct capture *c = capturing;
	va_list ap;

	if (!c || c->have || (type != SELINUX_ERROR && type != SELINUX_WARNING))
		return 0;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->have = true;
	return 0;
}

/*
 * With no policy loaded the kernel cannot check a context, so the
 * validation selabel_open() does with SELABEL_OPT_VALIDATE (which is also
 * what compiles every regular expression up front, so a bad one fails
 * here and not halfway through the build) checks only the shape:
 * "user:role:type[:range]", none of the four empty (libselinux has
 * already split the line at blanks).
 */
static int check_context(char **ctx)
{
	const char *p = *ctx;

	for (int field = 0; field < 3; field++) {
		size_t len = strcspn(p, ":");

		if (!len)
			return -1;
		p += len;
		if (field < 2 && *p++ != ':')
			return -1;
	}
	return *p && (*p != ':' || !p[1]) ? -1 : 0;
}

/* libselinux's message, without its "<file>: " and the newline. */
static const char *capture_text(struct capture *c, const char *path)
{
	char *m = c->msg;
	size_t len = strlen(path), end;

	if (!strncmp(m, path, len) && m[len] == ':')
		m += len + 1;
	m += strspn(m, " \t");
	end = strlen(m);
	while (end && (m[end - 1] == '\n' || m[end - 1] == ' '))
		m[--end] = '\0';
	return m;
}

static int set_prefix(struct kiln_selabel *sl, const char *mount_point)
{
	const char *p = mount_point ? mount_point : "/";
	size_t out = 0;

	sl->prefix = malloc(strlen(p) + 2);
	if (!sl->prefix)
		return -ENOMEM;
	/* one '/' before each component: "vendor//x/" -> "/vendor/x" */
	while (*p) {
		size_t len;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (!len)
			break;
		sl->prefix[out++] = '/';
		memcpy(sl->prefix + out, p, len);
		out += len;
		p += len;
	}
	sl->prefix[out] = '\0';
	sl->prefix_len = out;
	return 0;
}

/* A file we can read, so that a missing one is not an empty policy. */
static int check_readable(const char *path, const struct kiln_logger *lg)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		kiln_log(lg, KILN_LOG_ERROR, "%s: cannot read file contexts: %s",
			 path, strerror(err));
		return -err;
	}
	close(fd);
	if (!S_ISREG(st.st_mode)) {
		kiln_log(lg, KILN_LOG_ERROR,
			 "%s: cannot read file contexts: not a regular file",
			 path);
		return -EINVAL;
	}
	return 0;
}

int kiln_selabel_open(struct kiln_selabel **out, const char *file_contexts,
		      const char *mount_point, const struct kiln_logger *lg)
{
	struct selinux_opt opts[] = {
		{ SELABEL_OPT_PATH, file_contexts },
		{ SELABEL_OPT_VALIDATE, (const char *)1 },
	};
	union selinux_callback old_log, old_validate, cb;
	struct capture cap = { .have = false };
	struct kiln_selabel *sl;
	int err;

	*out = NULL;
	err = check_readable(file_contexts, lg);
	if (err)
		return err;
	sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	err = set_prefix(sl, mount_point);
	if (err) {
		free(sl);
		return err;
	}
	/* 1. borrow libselinux's callbacks, 2. load, 3. give them back */
	pthread_mutex_lock(&loading);
	old_log = selinux_get_callback(SELINUX_CB_LOG);
	old_validate = selinux_get_callback(SELINUX_CB_VALIDATE);
	cb.func_log = capture_log;
	selinux_set_callback(SELINUX_CB_LOG, cb);
	cb.func_validate = check_context;
	selinux_set_callback(SELINUX_CB_VALIDATE, cb);
	capturing = &cap;
	errno = 0;
	sl->h = selabel_open(SELABEL_CTX_FILE, opts, KILN_ARRAY_SIZE(opts));
	err = errno;
	capturing = NULL;
	selinux_set_callback(SELINUX_CB_VALIDATE, old_validate);
	selinux_set_callback(SELINUX_CB_LOG, old_log);
	pthread_mutex_unlock(&loading);
	if (!sl->h) {
		if (cap.have)
			kiln_log(lg, KILN_LOG_ERROR, "%s: %s", file_contexts,
				 capture_text(&cap, file_contexts));
		else
			kiln_log(lg, KILN_LOG_ERROR,
				 "%s: cannot load file contexts: %s",
				 file_contexts, strerror(err ? err : EINVAL));
		kiln_selabel_close(sl);
		/* the message says what was wrong; errno says little */
		return cap.have || !err ? -EINVAL : -err;
	}
	*out = sl;
	return 0;
}

void kiln_selabel_close(struct kiln_selabel *sl)
{
	if (!sl)
		return;
	if (sl->h)
		selabel_close(sl->h);
	free(sl->prefix);
	free(sl);
}

int kiln_selabel_lookup(struct kiln_selabel *sl, const char *rel,
			uint32_t mode, char **ctx)
{
	size_t rel_len = strlen(rel);
	char *key = malloc(sl->prefix_len + rel_len + 2);
	char *raw = NULL;
	int err = 0;

	*ctx = NULL;
	if (!key)
		return -ENOMEM;
	/* the root is the mount point itself: "/" or "/vendor" */
	if (!rel_len && !sl->prefix_len)
		strcpy(key, "/");
	else
		snprintf(key, sl->prefix_len + rel_len + 2, "%s%s%s",
			 sl->prefix, rel_len ? "/" : "", rel);
	errno = 0;
	if (selabel_lookup_raw(sl->h, &raw, key, mode & S_IFMT) < 0)
		err = errno ? -errno : -EINVAL;
	free(key);
	if (err)
		return err;
	*ctx = strdup(raw);
	freecon(raw);
	return *ctx ? 0 : -ENOMEM;
}
