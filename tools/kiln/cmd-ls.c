// SPDX-License-Identifier: MIT
/* kiln ls: list a directory (or show one entry) of an image. */
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <kiln/image.h>

#include "cli.h"

enum ls_flags {
	LS_LONG		= 1u << 0,
	LS_ALL		= 1u << 1,
	LS_RECURSIVE	= 1u << 2,
	LS_NUMERIC	= 1u << 3,
	LS_DIRECTORY	= 1u << 4,
	LS_INODE	= 1u << 5,
};

static const struct cli_option ls_options[] = {
	{ "long", 'l', NULL, "long format: mode, links, owner, group, size, "
			     "mtime, name" },
	{ "all", 'a', NULL, "include names starting with '.', and . and .." },
	{ "recursive", 'R', NULL, "list subdirectories recursively" },
	{ "numeric-uid-gid", 'n', NULL, "long format with numeric owner and "
					"group" },
	{ "directory", 'd', NULL, "show a directory itself, not its "
				  "contents" },
	{ "inode", 'i', NULL, "show each entry's nid" },
	CLI_DEVICE_OPTION,
};

static const struct cli_spec ls_spec = {
	.cmd = "ls",
	.usage = "[-l] [-a] [-R] [-n] [-d] [-i] [--device PATH]... IMAGE "
		 "[PATH]",
	.summary = "List directory PATH (default /) of IMAGE, or show PATH "
		   "itself if it is not a directory.",
	.opts = ls_options,
	.nr_opts = sizeof(ls_options) / sizeof(ls_options[0]),
};

#define KILN_CLI_MAX(a, b) ((a) > (b) ? (a) : (b))

struct ls_entry {
	char *name;
	kiln_nid_t nid;
	uint8_t type;
	bool have_stat;
	struct kiln_stat st;
};

struct ls_list {
	struct ls_entry *ents;
	size_t nr, cap;
};

/* A set of directory nids already listed (-R must not loop on cycles). */
struct nid_set {
	kiln_nid_t *slots;	/* 0 = free; nids are stored + 1 */
	size_t cap, count;
};

struct ls {
	struct kiln_image *img;
	const char *image;
	unsigned int flags;
	int status;
	struct nid_set seen;
	uid_t cached_uid;
	gid_t cached_gid;
	char uname[64], gname[64];
	bool have_uid, have_gid;
};

/* 1: @nid added, 0: it was there already, -ENOMEM. */
static int nid_set_add(struct nid_set *s, kiln_nid_t nid)
{
	size_t i;

	if ((s->count + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		kiln_nid_t *slots = calloc(cap, sizeof(*slots));

		if (!slots)
			return -ENOMEM;
		for (size_t j = 0; j < s->cap; j++) {
			if (!s->slots[j])
				continue;
			i = (size_t)(s->slots[j] * 0x9E3779B97F4A7C15ull) &
			    (cap - 1);
			while (slots[i])
				i = (i + 1) & (cap - 1);
			slots[i] = s->slots[j];
		}
		free(s->slots);
		s->slots = slots;
		s->cap = cap;
	}
	i = (size_t)((nid + 1) * 0x9E3779B97F4A7C15ull) & (s->cap - 1);
	while (s->slots[i]) {
		if (s->slots[i] == nid + 1)
			return 0;
		i = (i + 1) & (s->cap - 1);
	}
	s->slots[i] = nid + 1;
	s->count++;
	return 1;
}

static void mode_string(uint32_t mode, char out[11])
{
	static const char types[] = "?pc?d?b?-?l?s???";

	out[0] = types[(mode & S_IFMT) >> 12];
	out[1] = mode & S_IRUSR ? 'r' : '-';
	out[2] = mode & S_IWUSR ? 'w' : '-';
	out[3] = mode & S_ISUID ? (mode & S_IXUSR ? 's' : 'S') :
				  (mode & S_IXUSR ? 'x' : '-');
	out[4] = mode & S_IRGRP ? 'r' : '-';
	out[5] = mode & S_IWGRP ? 'w' : '-';
	out[6] = mode & S_ISGID ? (mode & S_IXGRP ? 's' : 'S') :
				  (mode & S_IXGRP ? 'x' : '-');
	out[7] = mode & S_IROTH ? 'r' : '-';
	out[8] = mode & S_IWOTH ? 'w' : '-';
	out[9] = mode & S_ISVTX ? (mode & S_IXOTH ? 't' : 'T') :
				  (mode & S_IXOTH ? 'x' : '-');
	out[10] = '\0';
}

static const char *owner_name(struct ls *ls, uint32_t uid, char *buf,
			      size_t cap)
{
	if (!(ls->flags & LS_NUMERIC)) {
		if (!ls->have_uid || ls->cached_uid != uid) {
			struct passwd *pw = getpwuid(uid);

			ls->cached_uid = uid;
			ls->have_uid = true;
			if (pw)
				snprintf(ls->uname, sizeof(ls->uname), "%s",
					 pw->pw_name);
			else
				snprintf(ls->uname, sizeof(ls->uname), "%u",
					 uid);
		}
		return ls->uname;
	}
	snprintf(buf, cap, "%u", uid);
	return buf;
}

static const char *group_name(struct ls *ls, uint32_t gid, char *buf,
			      size_t cap)
{
	if (!(ls->flags & LS_NUMERIC)) {
		if (!ls->have_gid || ls->cached_gid != gid) {
			struct group *gr = getgrgid(gid);

			ls->cached_gid = gid;
			ls->have_gid = true;
			if (gr)
				snprintf(ls->gname, sizeof(ls->gname), "%s",
					 gr->gr_name);
			else
				snprintf(ls->gname, sizeof(ls->gname), "%u",
					 gid);
		}
		return ls->gname;
	}
	snprintf(buf, cap, "%u", gid);
	return buf;
}

static void size_field(const struct kiln_stat *st, char *buf, size_t cap)
{
	if (S_ISCHR(st->mode) || S_ISBLK(st->mode))
		snprintf(buf, cap, "%u, %u", st->rdev_major, st->rdev_minor);
	else
		snprintf(buf, cap, "%llu", (unsigned long long)st->size);
}

/* Column widths of a long listing. */
struct ls_widths {
	int nid, nlink, owner, group, size;
};

static int width_of(const char *s)
{
	return (int)strlen(s);
}

static void measure(struct ls *ls, const struct ls_entry *e,
		    struct ls_widths *w)
{
	char buf[64], tmp[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)e->nid);
	w->nid = KILN_CLI_MAX(w->nid, width_of(buf));
	if (!e->have_stat)
		return;
	snprintf(buf, sizeof(buf), "%u", e->st.nlink);
	w->nlink = KILN_CLI_MAX(w->nlink, width_of(buf));
	w->owner = KILN_CLI_MAX(w->owner, width_of(owner_name(ls, e->st.uid,
							       tmp,
							       sizeof(tmp))));
	w->group = KILN_CLI_MAX(w->group, width_of(group_name(ls, e->st.gid,
							       tmp,
							       sizeof(tmp))));
	size_field(&e->st, buf, sizeof(buf));
	w->size = KILN_CLI_MAX(w->size, width_of(buf));
}

static void print_entry(struct ls *ls, const struct ls_entry *e,
			const struct ls_widths *w)
{
	char mode[11], size[64], when[32], ubuf[32], gbuf[32];
	struct tm tm;
	time_t t;

	if (ls->flags & LS_INODE)
		printf("%*llu ", w->nid, (unsigned long long)e->nid);
	if (!(ls->flags & LS_LONG)) {
		printf("%s\n", e->name);
		return;
	}
	if (!e->have_stat) {
		printf("?????????? %*s %*s %*s %*s %16s %s\n", w->nlink, "?",
		       w->owner, "?", w->group, "?", w->size, "?", "?",
		       e->name);
		return;
	}
	mode_string(e->st.mode, mode);
	size_field(&e->st, size, sizeof(size));
	t = (time_t)e->st.mtime;
	if (localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	else
		snprintf(when, sizeof(when), "%lld", (long long)e->st.mtime);
	printf("%s %*u %-*s %-*s %*s %s %s", mode, w->nlink, e->st.nlink,
	       w->owner, owner_name(ls, e->st.uid, ubuf, sizeof(ubuf)),
	       w->group, group_name(ls, e->st.gid, gbuf, sizeof(gbuf)),
	       w->size, size, when, e->name);
	if (S_ISLNK(e->st.mode)) {
		char target[4097];
		ssize_t n = kiln_readlink(ls->img, e->nid, target,
					  sizeof(target));

		printf(" -> %s", n >= 0 ? target : "?");
		if (n < 0) {
			cli_error(ls->image, "%s: reading the symlink: %s",
				  e->name, kiln_strerror((int)n));
			ls->status = 1;
		}
	}
	putchar('\n');
}

static int collect(void *ctx, const struct kiln_dirent *de)
{
	struct ls_list *l = ctx;

	if (l->nr == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct ls_entry *p = realloc(l->ents, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->ents = p;
		l->cap = cap;
	}
	l->ents[l->nr].name = strndup(de->name, de->name_len);
	if (!l->ents[l->nr].name)
		return -ENOMEM;
	l->ents[l->nr].nid = de->nid;
	l->ents[l->nr].type = de->type;
	l->ents[l->nr].have_stat = false;
	l->nr++;
	return 0;
}

static void free_list(struct ls_list *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->ents[i].name);
	free(l->ents);
	memset(l, 0, sizeof(*l));
}

static bool shown(const struct ls *ls, const char *name)
{
	return name[0] != '.' || (ls->flags & LS_ALL);
}

static bool is_dot_or_dotdot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

static void print_list(struct ls *ls, struct ls_list *l)
{
	struct ls_widths w = { 0 };

	for (size_t i = 0; i < l->nr; i++) {
		struct ls_entry *e = &l->ents[i];
		int err;

		if (!shown(ls, e->name) || !(ls->flags & LS_LONG))
			goto measure;
		err = kiln_stat_nid(ls->img, e->nid, &e->st);
		if (err) {
			cli_error(ls->image, "%s: %s", e->name,
				  kiln_strerror(err));
			ls->status = 1;
		}
		e->have_stat = !err;
measure:
		if (shown(ls, e->name))
			measure(ls, e, &w);
	}
	for (size_t i = 0; i < l->nr; i++)
		if (shown(ls, l->ents[i].name))
			print_entry(ls, &l->ents[i], &w);
}

#define NO_PARENT UINT64_MAX

/*
 * Directory @nid at @path has one "." naming itself and one ".." naming
 * @parent (NO_PARENT: not known). Another entry with either name was
 * renamed by damage: its subtree would vanish from the listing unseen.
 */
static void check_dots(struct ls *ls, const char *path, kiln_nid_t nid,
		       kiln_nid_t parent, const struct ls_list *l)
{
	bool have_dot = false, have_dotdot = false;

	for (size_t i = 0; i < l->nr; i++) {
		const struct ls_entry *e = &l->ents[i];
		bool dot = !strcmp(e->name, ".");

		if (!dot && strcmp(e->name, ".."))
			continue;
		if (dot && !have_dot && e->nid == nid) {
			have_dot = true;
			continue;
		}
		if (!dot && !have_dotdot &&
		    (parent == NO_PARENT || e->nid == parent)) {
			have_dotdot = true;
			continue;
		}
		cli_error(ls->image, "%s: an entry named \"%s\" leads to "
			  "nid %llu, not to %s: %s", path, e->name,
			  (unsigned long long)e->nid,
			  dot ? "the directory itself" : "its parent",
			  kiln_strerror(-KILN_ECORRUPT));
		ls->status = 1;
	}
}

/* A directory still to list with -R. */
struct ls_pending {
	char *path;
	kiln_nid_t nid;
	kiln_nid_t parent;
};

static char *join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	bool slash = dl == 0 || dir[dl - 1] != '/';
	char *p = malloc(dl + slash + nl + 1);

	if (!p)
		return NULL;
	memcpy(p, dir, dl);
	if (slash)
		p[dl] = '/';
	memcpy(p + dl + slash, name, nl + 1);
	return p;
}

/* List @nid; with -R, walk its subdirectories depth first (ls order). */
static int list_tree(struct ls *ls, const char *path, kiln_nid_t nid)
{
	struct ls_pending *stack = NULL;
	size_t nr = 0, cap = 0;
	bool first = true;
	char *cur = strdup(path);
	kiln_nid_t parent = nid == kiln_image_root(ls->img) ? nid : NO_PARENT;
	int ret = 0;

	if (!cur || nid_set_add(&ls->seen, nid) < 0) {
		free(cur);
		return -ENOMEM;
	}
	for (;;) {
		struct ls_list l = { 0 };
		int err;

		if (ls->flags & LS_RECURSIVE)
			printf("%s%s:\n", first ? "" : "\n", cur);
		first = false;
		err = kiln_dir_iterate(ls->img, nid, 0, collect, &l);
		if (err) {
			cli_error(ls->image, "%s: %s", cur, kiln_strerror(err));
			ls->status = 1;
		}
		print_list(ls, &l);
		check_dots(ls, cur, nid, parent, &l);
		/* push subdirectories in reverse so they come out in order */
		for (size_t i = l.nr; (ls->flags & LS_RECURSIVE) && i-- > 0;) {
			struct ls_entry *e = &l.ents[i];
			struct kiln_stat st;
			char *sub;
			int added;

			if (is_dot_or_dotdot(e->name) || !shown(ls, e->name))
				continue;
			if (e->have_stat)
				st = e->st;
			else if (kiln_stat_nid(ls->img, e->nid, &st))
				continue;
			if (!S_ISDIR(st.mode))
				continue;
			sub = join(cur, e->name);
			added = sub ? nid_set_add(&ls->seen, e->nid) : -ENOMEM;
			if (added == 0) {
				cli_error(ls->image, "%s: directory reached a "
					  "second time (cycle or hardlinked "
					  "directory): %s", sub,
					  kiln_strerror(-KILN_ECORRUPT));
				ls->status = 1;
			}
			if (added <= 0)
				free(sub);
			if (added < 0)
				ret = -ENOMEM;
			if (added <= 0)
				continue;
			if (nr == cap) {
				size_t ncap = cap ? cap * 2 : 32;
				struct ls_pending *p = realloc(stack,
							ncap * sizeof(*p));

				if (!p) {
					free(sub);
					ret = -ENOMEM;
					continue;
				}
				stack = p;
				cap = ncap;
			}
			stack[nr].path = sub;
			stack[nr].nid = e->nid;
			stack[nr].parent = nid;
			nr++;
		}
		free_list(&l);
		free(cur);
		if (!nr || ret)
			break;
		nr--;
		cur = stack[nr].path;
		nid = stack[nr].nid;
		parent = stack[nr].parent;
	}
	while (nr)
		free(stack[--nr].path);
	free(stack);
	return ret;
}

int cmd_ls(int argc, char **argv)
{
	struct ls ls = { .status = 0 };
	struct cli_devices devs = { .count = 0 };
	struct kiln_image *img;
	struct cli_log lg;
	struct kiln_stat st;
	const char *arg, *image, *path;
	kiln_nid_t nid;
	int c, err;

	while ((c = cli_getopt(argc, argv, &ls_spec, &arg)) >= 0) {
		switch (c) {
		case 'l': ls.flags |= LS_LONG; break;
		case 'a': ls.flags |= LS_ALL; break;
		case 'R': ls.flags |= LS_RECURSIVE; break;
		case 'n': ls.flags |= LS_NUMERIC | LS_LONG; break;
		case 'd': ls.flags |= LS_DIRECTORY; break;
		case 'i': ls.flags |= LS_INODE; break;
		case CLI_OPT_DEVICE:
			if (cli_add_device(&ls_spec, &devs, arg))
				return 2;
			break;
		}
	}
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_error(&ls_spec, "expected IMAGE [PATH]");
	image = argv[optind];
	path = argc - optind == 2 ? argv[optind + 1] : "/";

	cli_log_init(&lg, image, KILN_LOG_WARN);
	if (cli_open_image(&img, image, &lg, &devs))
		return 1;
	ls.img = img;
	ls.image = image;
	/* like ls(1): a symlink operand is followed unless -l or -d */
	err = kiln_resolve(img, path,
			   ls.flags & (LS_LONG | LS_DIRECTORY) ? 0 :
			   KILN_RESOLVE_FOLLOW, &nid);
	if (!err)
		err = kiln_stat_nid(img, nid, &st);
	if (err) {
		cli_error(image, "%s: %s", path, kiln_strerror(err));
		kiln_image_close(img);
		return 1;
	}
	if (S_ISDIR(st.mode) && !(ls.flags & LS_DIRECTORY)) {
		err = list_tree(&ls, path, nid);
		if (err) {
			cli_error(image, "%s: %s", path, kiln_strerror(err));
			ls.status = 1;
		}
	} else {
		struct ls_entry e = {
			.name = (char *)path, .nid = nid, .have_stat = true,
			.st = st,
		};
		struct ls_widths w = { 0 };

		measure(&ls, &e, &w);
		print_entry(&ls, &e, &w);
	}
	free(ls.seen.slots);
	kiln_image_close(img);
	if (fflush(stdout) && !ls.status) {
		cli_error(image, "writing the listing failed");
		ls.status = 1;
	}
	return ls.status;
}
