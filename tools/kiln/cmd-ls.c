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
#include "util/grow.h"
#include "util/u64map.h"

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
	CLI_VERITY_OPTIONS,
	CLI_DEVICE_OPTION,
	CLI_REMOTE_OPTIONS,
};

static const struct cli_spec ls_spec = {
	.cmd = "ls",
	.usage = "[-l] [-a] [-R] [-n] [-d] [-i] [--device PATH]... "
		 "[--verity ROOT_HASH] IMAGE [PATH]",
	.summary = "List directory PATH (default /) of IMAGE, or show PATH "
		   "itself if it is not a directory.\n"
		   "With --verity, every metadata block is checked against "
		   "the dm-verity root\nhash before use: a directory or inode "
		   "on a bad block is an error naming it,\nand the exit "
		   "status is 1.",
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

/* The name of the last id looked up (ls -l shows runs of one owner). */
struct id_name {
	uint32_t id;
	bool valid;
	char name[64];
};

struct ls {
	struct kiln_image *img;
	const char *image;
	unsigned int flags;
	int status;
	struct kiln_u64map seen;	/* directories listed: -R must not loop */
	struct id_name users, groups;	/* the last uid's and gid's names */
};

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

/* @id's name (the number when it has none, or with -n), in @cache or @buf. */
static const char *id_name(const struct ls *ls, struct id_name *cache,
			   uint32_t id, bool group, char *buf, size_t cap)
{
	const char *name;

	if (ls->flags & LS_NUMERIC) {
		snprintf(buf, cap, "%u", id);
		return buf;
	}
	if (cache->valid && cache->id == id)
		return cache->name;
	if (group) {
		struct group *gr = getgrgid(id);

		name = gr ? gr->gr_name : NULL;
	} else {
		struct passwd *pw = getpwuid(id);

		name = pw ? pw->pw_name : NULL;
	}
	cache->id = id;
	cache->valid = true;
	if (name)
		snprintf(cache->name, sizeof(cache->name), "%s", name);
	else
		snprintf(cache->name, sizeof(cache->name), "%u", id);
	return cache->name;
}

static const char *owner_name(struct ls *ls, uint32_t uid, char *buf,
			      size_t cap)
{
	return id_name(ls, &ls->users, uid, false, buf, cap);
}

static const char *group_name(struct ls *ls, uint32_t gid, char *buf,
			      size_t cap)
{
	return id_name(ls, &ls->groups, gid, true, buf, cap);
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

	if (KILN_GROW(l->ents, l->cap, l->nr + 1))
		return -ENOMEM;
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

	if (!cur || kiln_u64map_insert(&ls->seen, nid, NULL) < 0) {
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
			int added, serr = 0;

			if (is_dot_or_dotdot(e->name) || !shown(ls, e->name))
				continue;
			if (e->have_stat)
				st = e->st;
			else
				serr = kiln_stat_nid(ls->img, e->nid, &st);
			sub = join(cur, e->name);
			if (serr) {
				/* an entry that cannot be read is not skipped */
				cli_error(ls->image, "%s: %s", sub ? sub : e->name,
					  kiln_strerror(serr));
				ls->status = 1;
			}
			if (serr || !S_ISDIR(st.mode)) {
				free(sub);
				continue;
			}
			added = sub ? kiln_u64map_insert(&ls->seen, e->nid, NULL)
				    : -ENOMEM;
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
			if (KILN_GROW(stack, cap, nr + 1)) {
				free(sub);
				ret = -ENOMEM;
				continue;
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
	struct cli_verity verity = { 0 };
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
		default:
			if (cli_image_option(&ls_spec, &devs, &verity, c, arg))
				return 2;
			break;
		}
	}
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (cli_verity_check(&ls_spec, &verity))
		return 2;
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_error(&ls_spec, "expected IMAGE [PATH]");
	image = argv[optind];
	path = argc - optind == 2 ? argv[optind + 1] : "/";

	cli_log_init(&lg, image, KILN_LOG_WARN);
	if (cli_open_image_verity(&img, image, &lg, &devs, &verity))
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
	kiln_u64map_release(&ls.seen);
	kiln_image_close(img);
	if (fflush(stdout) && !ls.status) {
		cli_error(image, "writing the listing failed");
		ls.status = 1;
	}
	return ls.status;
}
