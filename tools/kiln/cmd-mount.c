// SPDX-License-Identifier: MIT
/*
 * kiln mount: parse options, open the image, mount it with FUSE, detach
 * once the mount stands, serve requests until unmounted or signalled.
 */
#include "fuse-ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "cli.h"

#define MAX_THREADS 256u

struct mount_opts {
	const char *image;
	const char *mountpoint;
	bool foreground;
	bool debug;
	bool single_thread;
	enum kiln_cache_mode cache;
	unsigned int threads;		/* 0: libfuse's default */
	unsigned int readahead_kb;	/* 0: the kernel's default */
	bool no_splice;
	bool no_store;			/* -o nostore */
	int image_fd;			/* the image's descriptor, ours */
	char mnt_path[PATH_MAX];	/* absolute mount point */
	bool user_fsname;		/* -o fsname= given */
	char fuse_o[4096];		/* -o list handed to libfuse */
	struct cli_verity verity;	/* --verity ... */
	struct cli_devices devs;	/* --device, in table order */
};

static const struct cli_option mount_options[] = {
	{ "foreground", 'f', NULL, "stay in the foreground" },
	{ "debug", 'd', NULL, "log every request (implies -f)" },
	{ "single-thread", 's', NULL, "handle requests in one thread" },
	{ "options", 'o', "OPT[,OPT...]", "mount options, see below" },
	CLI_VERITY_OPTIONS,
	CLI_DEVICE_OPTION,
	CLI_REMOTE_OPTIONS,
};

static const struct cli_spec mount_spec = {
	.cmd = "mount",
	.usage = "[OPTIONS] IMAGE MOUNTPOINT",
	.summary = "Mount an EROFS image read-only with FUSE. Without -f the "
		   "command returns once\nthe mount is in place and serves it "
		   "in the background.\nWith --verity, every block is checked "
		   "against the dm-verity root hash before\nuse; a file "
		   "read that needs a bad block fails with EIO.",
	.opts = mount_options,
	.nr_opts = sizeof(mount_options) / sizeof(mount_options[0]),
};

static void mount_o_help(void)
{
	printf("\nmount options (-o):\n"
"  ro                         read-only (the default and only mode)\n"
"  cache=none|default         decompressed-cluster cache (default: default)\n"
"  threads=N                  at most N request threads (default 10)\n"
"  readahead=KIB              kernel readahead window of the mount, KiB\n"
"                             (default %u; 0 keeps the kernel's; root only)\n"
"  nosplice                   copy raw file data instead of splicing it\n"
"  nostore                    hand the kernel only the bytes a read asks for\n"
"                             (by default a small read of a compressed file\n"
"                             decodes its whole extent and the kernel's page\n"
"                             cache gets every page of it)\n"
"  allow_other                let other users see the mount\n"
"  other FUSE mount options (allow_root, auto_unmount, fsname=...) are\n"
"  passed to libfuse\n"
"\nUnmount with 'kiln umount MOUNTPOINT', or send SIGTERM or SIGINT.\n"
"SIGUSR1 logs the read and page cache store counters, and a remote\n"
"image's (bytes fetched, requests, retries, hits, misses, failed reads)\n"
"(stderr with -f, else syslog).\n",
	       KILN_FUSE_READAHEAD_KB);
}

/* Append ",@opt" (or "@opt") to the libfuse -o list. */
static int fuse_o_add(struct mount_opts *o, const char *opt)
{
	size_t len = strlen(o->fuse_o);
	int n = snprintf(o->fuse_o + len, sizeof(o->fuse_o) - len, "%s%s",
			 len ? "," : "", opt);

	if (n < 0 || (size_t)n >= sizeof(o->fuse_o) - len) {
		fprintf(stderr, "kiln mount: mount options too long\n");
		return -1;
	}
	return 0;
}

static int o_ro(struct mount_opts *o, const char *val)
{
	(void)o;
	(void)val;
	return 0;
}

static int o_rw(struct mount_opts *o, const char *val)
{
	(void)o;
	(void)val;
	cli_usage_error(&mount_spec, "EROFS images are read-only: 'rw' is not supported");
	return -1;
}

static int o_cache(struct mount_opts *o, const char *val)
{
	if (!strcmp(val, "none")) {
		o->cache = KILN_CACHE_NONE;
	} else if (!strcmp(val, "default")) {
		o->cache = KILN_CACHE_DEFAULT;
	} else {
		cli_usage_error(&mount_spec, "cache=%s: expected 'none' or 'default'", val);
		return -1;
	}
	return 0;
}

static int o_threads(struct mount_opts *o, const char *val)
{
	char *end;
	unsigned long n = strtoul(val, &end, 10);

	if (!*val || *end || n < 1 || n > MAX_THREADS) {
		cli_usage_error(&mount_spec, "threads=%s: expected 1 to %u",
				val, MAX_THREADS);
		return -1;
	}
	o->threads = (unsigned int)n;
	return 0;
}

/* At most 1 GiB: the kernel caps the window well below that anyway. */
#define MAX_READAHEAD_KB (1024u * 1024u)

static int o_readahead(struct mount_opts *o, const char *val)
{
	char *end;
	unsigned long n = strtoul(val, &end, 10);

	if (!*val || *end || *val == '-' || n > MAX_READAHEAD_KB) {
		cli_usage_error(&mount_spec, "readahead=%s: expected 0 to %u (KiB)",
				val, MAX_READAHEAD_KB);
		return -1;
	}
	o->readahead_kb = (unsigned int)n;
	return 0;
}

static int o_nostore(struct mount_opts *o, const char *val)
{
	(void)val;
	o->no_store = true;
	return 0;
}

static int o_nosplice(struct mount_opts *o, const char *val)
{
	(void)val;
	o->no_splice = true;
	return 0;
}

/* The -o options kiln handles itself; everything else goes to libfuse. */
static const struct mount_o_opt {
	const char *name;
	bool has_value;
	int (*apply)(struct mount_opts *o, const char *val);
} mount_o_opts[] = {
	{ "ro",      false, o_ro },
	{ "rw",      false, o_rw },
	{ "cache",   true,  o_cache },
	{ "threads", true,  o_threads },
	{ "readahead", true, o_readahead },
	{ "nosplice", false, o_nosplice },
	{ "nostore", false, o_nostore },
};

static int apply_o_one(struct mount_opts *o, char *opt)
{
	char *eq = strchr(opt, '=');
	size_t name_len = eq ? (size_t)(eq - opt) : strlen(opt);

	if (!*opt)
		return 0;
	if (!strncmp(opt, "fsname=", 7))
		o->user_fsname = true;
	for (size_t i = 0; i < sizeof(mount_o_opts) / sizeof(mount_o_opts[0]); i++) {
		const struct mount_o_opt *m = &mount_o_opts[i];

		if (strlen(m->name) != name_len || strncmp(m->name, opt, name_len))
			continue;
		if (m->has_value != (eq != NULL)) {
			cli_usage_error(&mount_spec, "-o %s: %s", opt,
					m->has_value ? "needs a value" : "takes no value");
			return -1;
		}
		return m->apply(o, eq ? eq + 1 : NULL);
	}
	return fuse_o_add(o, opt);
}

static int apply_o(struct mount_opts *o, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	int err = 0;

	if (!copy)
		return -1;
	for (char *tok = strtok_r(copy, ",", &save); tok && !err;
	     tok = strtok_r(NULL, ",", &save))
		err = apply_o_one(o, tok);
	free(copy);
	return err;
}

/* Returns 0, 1 after --help, or -1 on a usage error (already reported). */
static int parse_args(struct mount_opts *o, int argc, char **argv)
{
	const char *arg;
	int c;

	while ((c = cli_getopt(argc, argv, &mount_spec, &arg)) != CLI_OPT_END) {
		switch (c) {
		case 'f':
			o->foreground = true;
			break;
		case 'd':
			o->debug = true;
			o->foreground = true;
			break;
		case 's':
			o->single_thread = true;
			break;
		case 'o':
			if (apply_o(o, arg))
				return -1;
			break;
		case CLI_OPT_VERITY:
		case CLI_OPT_VERITY_SALT:
		case CLI_OPT_VERITY_HASH_OFFSET:
			if (cli_verity_option(&mount_spec, &o->verity, c, arg))
				return -1;
			break;
		case CLI_OPT_DEVICE:
			if (cli_add_device(&mount_spec, &o->devs, arg))
				return -1;
			break;
		case CLI_OPT_HELP:
			mount_o_help();
			return 1;
		case CLI_OPT_VERSION:
			return 1;
		default:
			if (!cli_is_remote_option(c) ||
			    cli_remote_option(&mount_spec, &o->devs, c, arg))
				return -1;
			break;
		}
	}
	if (cli_verity_check(&mount_spec, &o->verity))
		return -1;
	if (argc - optind != 2) {
		cli_usage_error(&mount_spec, "expected IMAGE and MOUNTPOINT");
		return -1;
	}
	o->image = argv[optind];
	o->mountpoint = argv[optind + 1];
	return 0;
}

/* fsname=<image>, with the separators libfuse's option parser knows escaped. */
static int add_fsname(struct mount_opts *o)
{
	char path[PATH_MAX], opt[2 * PATH_MAX + 16], *d = opt;
	const char *src = realpath(o->image, path) ? path : o->image;

	if (o->user_fsname)
		return 0;
	if (strlen(src) >= PATH_MAX)
		src = "kiln";	/* a name past PATH_MAX would not fit @opt */
	d += sprintf(d, "fsname=");
	for (const char *s = src; *s; s++) {
		if (*s == ',' || *s == '\\')
			*d++ = '\\';
		*d++ = *s;
	}
	*d = '\0';
	return fuse_o_add(o, opt);
}

static int check_mountpoint(struct mount_opts *o)
{
	const char *mp = o->mountpoint;
	struct stat st;

	if (stat(mp, &st) || !realpath(mp, o->mnt_path)) {
		cli_error(mp, "cannot mount here: %s", strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error(mp, "cannot mount here: %s", strerror(ENOTDIR));
		return -1;
	}
	return 0;
}

static int open_image(struct mount_opts *o, struct kiln_fuse_fs *fs)
{
	struct kiln_image_opts io = {
		.struct_size = sizeof(io),
		.log = kiln_fuse_lib_log,
		.log_ctx = fs,
		.cache = o->cache,
		.devices = o->devs.paths,
		.nr_devices = o->devs.count,
	};
	struct kiln_image *img;
	int fd = -1, err;

	cli_verity_apply(&o->verity, &io);
	io.remote = cli_remote_opts(&o->devs);
	if (kiln_is_url(o->image)) {
		/* no descriptor to splice from: reads go through the library */
		err = kiln_image_open(&img, o->image, &io);
	} else {
		fd = open(o->image, O_RDONLY | O_CLOEXEC);
		err = fd < 0 ? -errno : kiln_image_open_fd(&img, fd, &io);
	}
	if (err) {
		if (fd >= 0)
			close(fd);
		cli_error(o->image, "cannot open image: %s", kiln_strerror(err));
		return -1;
	}
	kiln_fuse_fs_attach(fs, img);
	/* the descriptor lives as long as the image: splice reads from it */
	o->image_fd = fd;
	fs->image_fd = o->no_splice ? -1 : fd;
	fs->remote = kiln_is_url(o->image);
	fs->mnt_path = o->mnt_path;
	fs->readahead_kb = o->readahead_kb;
	return 0;
}

static int serve(struct fuse_session *se, const struct mount_opts *o)
{
	struct fuse_loop_config *cfg;
	int res;

	if (o->single_thread)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	/* One /dev/fuse descriptor per worker: no contention on reads. */
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	if (o->threads) {
		fuse_loop_cfg_set_max_threads(cfg, o->threads);
		fuse_loop_cfg_set_idle_threads(cfg, o->threads);
	}
	res = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return res;
}

/*
 * SIGUSR1 logs the counters: blocked in every thread (the request and
 * store threads inherit the mask), taken by one thread with sigwait().
 * It ends on a SIGUSR1 of our own once told to quit.
 */
struct stats_ctl {
	struct kiln_fuse_fs *fs;
	atomic_bool quit;
	pthread_t thread;
};

static void *stats_thread(void *arg)
{
	struct stats_ctl *sc = arg;
	sigset_t set;
	int sig;

	pthread_setname_np(pthread_self(), "kiln-stats");
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (!atomic_load(&sc->quit))
		if (!sigwait(&set, &sig) && !atomic_load(&sc->quit))
			kiln_fuse_log_stats(sc->fs);
	return NULL;
}

static int stats_start(struct stats_ctl *sc, struct kiln_fuse_fs *fs)
{
	sigset_t set;

	sc->fs = fs;
	atomic_init(&sc->quit, false);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return -1;
	return pthread_create(&sc->thread, NULL, stats_thread, sc) ? -1 : 0;
}

static void stats_stop(struct stats_ctl *sc)
{
	atomic_store(&sc->quit, true);
	pthread_kill(sc->thread, SIGUSR1);
	pthread_join(sc->thread, NULL);
}

/*
 * SIGTERM, SIGINT and SIGHUP end the request loop (libfuse's handlers),
 * but the loop waits for every request under way: one stuck on a server
 * that stopped answering would hold the unmount for its whole time limit.
 * So the signal first cancels the image's network reads (an atomic store),
 * then goes on to libfuse's handler.
 */
static const int stop_signals[] = { SIGTERM, SIGINT, SIGHUP };
#define NR_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))
static struct sigaction fuse_actions[NR_STOP_SIGNALS];
static struct kiln_image *_Atomic cancel_img;

static void on_stop_signal(int sig)
{
	kiln_image_cancel(atomic_load(&cancel_img));
	for (size_t i = 0; i < NR_STOP_SIGNALS; i++)
		if (stop_signals[i] == sig &&
		    fuse_actions[i].sa_handler != SIG_DFL &&
		    fuse_actions[i].sa_handler != SIG_IGN)
			fuse_actions[i].sa_handler(sig);
}

/*
 * A signal the mount was started with ignored (nohup, a background job
 * of a shell) stays ignored, as libfuse leaves it: it neither stops the
 * mount nor cancels the image's requests.
 */
static void stop_signals_hook(struct kiln_image *img)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	atomic_store(&cancel_img, img);
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NR_STOP_SIGNALS; i++) {
		sigaction(stop_signals[i], NULL, &fuse_actions[i]);
		if (fuse_actions[i].sa_handler != SIG_IGN)
			sigaction(stop_signals[i], &sa, NULL);
	}
}

/* libfuse's handlers back, so that it removes them itself. */
static void stop_signals_unhook(void)
{
	for (size_t i = 0; i < NR_STOP_SIGNALS; i++)
		sigaction(stop_signals[i], &fuse_actions[i], NULL);
	atomic_store(&cancel_img, NULL);
}

/* 1. open the image, 2. mount, 3. detach, 4. serve, 5. unmount. */
static int run_mount(struct mount_opts *o, struct kiln_fuse_fs *fs)
{
	char *fargv[] = { "kiln", "-o", o->fuse_o, "-d", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, fargv);
	struct fuse_session *se;
	struct stats_ctl stats;
	sigset_t stop_set;
	bool stats_on = false;
	int res, ret = 1;

	sigemptyset(&stop_set);
	for (size_t i = 0; i < NR_STOP_SIGNALS; i++)
		sigaddset(&stop_set, stop_signals[i]);
	if (open_image(o, fs))
		return 1;
	se = fuse_session_new(&args, &kiln_fuse_ops, sizeof(kiln_fuse_ops), fs);
	/* Option parsing may have copied the vector: free what it made. */
	fuse_opt_free_args(&args);
	if (!se)
		goto out_image;	/* libfuse said why */
	if (fuse_set_signal_handlers(se))
		goto out_session;
	stop_signals_hook(fs->img);
	if (fuse_session_mount(se, o->mountpoint))
		goto out_signals;
	if (fuse_daemonize(o->foreground))
		goto out_unmount;
	if (!o->foreground) {
		openlog("kiln", LOG_PID, LOG_DAEMON);
		atomic_store(&fs->to_syslog, true);
	}
	/*
	 * after the fork of fuse_daemonize(): threads do not survive it.
	 * They block the stop signals: one taken there would set the loop's
	 * exit flag without waking the threads that wait in the loop.
	 */
	pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
	stats_on = !stats_start(&stats, fs);
	res = o->no_store ? 0 : kiln_fuse_store_start(fs, se);
	/* SIGUSR1 stays blocked here: the stats thread takes it */
	pthread_sigmask(SIG_UNBLOCK, &stop_set, NULL);
	if (res)
		kiln_fuse_log(fs, LOG_WARNING, "page cache stores off: %s",
			      strerror(-res));
	atomic_store(&fs->serving, true);
	res = serve(se, o);
	kiln_fuse_store_stop(fs);
	if (stats_on)
		stats_stop(&stats);
	if (o->debug)
		kiln_fuse_log_stats(fs);
	/* A signal ends the loop with its number: that is a clean stop. */
	ret = (res == 0 || res == SIGTERM || res == SIGINT || res == SIGHUP) ? 0 : 1;
	if (ret)
		kiln_fuse_log(fs, LOG_ERR, "request loop failed: %s", strerror(-res));
out_unmount:
	fuse_session_unmount(se);
out_signals:
	stop_signals_unhook();
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_image:
	kiln_fuse_fs_detach(fs);
	kiln_image_close(fs->img);
	if (o->image_fd >= 0)
		close(o->image_fd);
	return ret;
}

int cmd_mount(int argc, char **argv)
{
	struct mount_opts o = {
		.cache = KILN_CACHE_DEFAULT,
		.readahead_kb = KILN_FUSE_READAHEAD_KB,
	};
	struct kiln_fuse_fs fs;
	int ret;

	/* Defaults first so that the user's options can add to them. */
	if (fuse_o_add(&o, "ro") || fuse_o_add(&o, "default_permissions") ||
	    fuse_o_add(&o, "subtype=kiln"))
		return 1;
	ret = parse_args(&o, argc, argv);
	if (ret)
		return ret > 0 ? 0 : 2;
	if (add_fsname(&o) || check_mountpoint(&o))
		return 1;
	if (kiln_fuse_fs_init(&fs, o.image, o.debug)) {
		fprintf(stderr, "kiln mount: out of memory\n");
		return 1;
	}
	ret = run_mount(&o, &fs);
	kiln_fuse_fs_release(&fs);
	return ret;
}
