// SPDX-License-Identifier: MIT
/*
 * --prefetch=all of a remote image: a background thread walks every
 * directory (inodes, directory blocks and xattrs come first, so listing
 * the tree needs no more round trips), then fetches every unit in order
 * at a bounded rate, pausing whenever a read waits for bytes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "reader/internal.h"
#include "util/threadpool.h"

#define DEF_RATE	(16ull << 20)

struct kiln_prefetch {
	struct kiln_image *img;
	pthread_t tid;
	atomic_bool stop;
	uint64_t rate;
};

struct walk {
	kiln_nid_t *stack;
	size_t n, cap;
	uint64_t budget;	/* entries left: a hostile image cannot loop */
	const atomic_bool *stop;
};

static int push(struct walk *w, kiln_nid_t nid)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		kiln_nid_t *s = realloc(w->stack, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		w->stack = s;
		w->cap = cap;
	}
	w->stack[w->n++] = nid;
	return 0;
}

static int visit(void *ctx, const struct kiln_dirent *de)
{
	struct walk *w = ctx;

	if (atomic_load(w->stop) || !w->budget)
		return 1;
	w->budget--;
	if (de->name_len <= 2 && de->name[0] == '.' &&
	    (de->name_len == 1 || de->name[1] == '.'))
		return 0;
	return push(w, de->nid);
}

static void walk_metadata(struct kiln_prefetch *p)
{
	struct kiln_image *img = p->img;
	struct walk w = { .stop = &p->stop,
			  .budget = img->sb.inos * 2 + 1024 };
	struct kiln_stat st;

	if (push(&w, img->sb.root_nid))
		return;
	while (w.n && !atomic_load(&p->stop)) {
		kiln_nid_t nid = w.stack[--w.n];

		if (kiln_stat_nid(img, nid, &st))
			continue;
		kiln_listxattr(img, nid, NULL, 0);
		if ((st.mode & 0170000) == 0040000 &&
		    kiln_dir_iterate(img, nid, 0, visit, &w) < 0)
			continue;
	}
	free(w.stack);
}

static void *prefetch_main(void *arg)
{
	struct kiln_prefetch *p = arg;

	walk_metadata(p);
	if (!atomic_load(&p->stop) &&
	    !kiln_lazy_prefetch_all(p->img->lazy, p->rate, &p->stop))
		kiln_log(&p->img->logger, KILN_LOG_INFO,
			 "prefetch: the whole image is here");
	return NULL;
}

int kiln_prefetch_start(struct kiln_image *img, uint64_t rate)
{
	struct kiln_prefetch *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->img = img;
	p->rate = rate ? rate : DEF_RATE;
	atomic_init(&p->stop, false);
	if (kiln_thread_start(&p->tid, prefetch_main, p)) {
		free(p);
		return -EAGAIN;
	}
	img->prefetch = p;
	return 0;
}

void kiln_prefetch_stop(struct kiln_image *img)
{
	struct kiln_prefetch *p = img->prefetch;

	if (!p)
		return;
	/* a fetch under way ends within its own time limits */
	atomic_store(&p->stop, true);
	pthread_join(p->tid, NULL);
	free(p);
	img->prefetch = NULL;
}
