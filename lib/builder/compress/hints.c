// SPDX-License-Identifier: MIT
/*
 * Compress hints: a file of "PATTERN ALG[:LEVEL] [PCLUSTER_SIZE]" lines
 * that gives matching files their own codec, level and pcluster size.
 * Each line gets a compression context of its own, hung from the build's
 * (root) context; the first line whose glob matches a file's path wins.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/compress/internal.h"
#include "builder/internal.h"
#include "format/kernel.h"
#include "util/checked.h"

/* An image's lcluster maps name two algorithms: HEAD1 and HEAD2. */
#define HINTS_MAX_ALGS	2

/* Split @line in place into up to @max blank-separated words. */
static size_t split_words(char *line, char **w, size_t max)
{
	size_t n = 0;
	char *p = line;

	for (;;) {
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			return n;
		if (n == max)
			return max + 1;
		w[n++] = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		if (*p)
			*p++ = '\0';
	}
}

static int parse_pcluster(const char *s, uint32_t *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || !x || x > UINT32_MAX)
		return -EINVAL;
	*v = (uint32_t)x;
	return 0;
}

int kiln_zctx_new_child(struct kiln_zctx *root,
			const struct kiln_build_opts *opts,
			const struct kiln_compress_spec *spec, uint32_t pcluster,
			struct kiln_zctx **out)
{
	struct kiln_build_opts o = *opts;
	int err;

	o.compress = *spec;
	o.pcluster_size = pcluster;
	o.compress_hints = NULL;
	/* dedupe table and fragment buffer are the root's */
	o.compress_flags &= ~(unsigned int)(KILN_COMPRESS_DEDUPE |
					    KILN_COMPRESS_DEDUPE_SHIFTED |
					    KILN_COMPRESS_FRAGMENTS);
	err = kiln_zctx_new(&o, root->blkszbits, &root->lg, out);
	if (err)
		return err;
	(*out)->root = root;
	(*out)->flags = root->flags;
	(*out)->dd = root->dd;
	(*out)->frag = root->frag;
	return 0;
}

static int add_hint(struct kiln_zctx *zc, const char *pattern,
		    struct kiln_zctx *hz, bool owner)
{
	struct kiln_zhint *v = realloc(zc->hints,
				       (zc->nr_hints + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	zc->hints = v;
	v[zc->nr_hints].pattern = strdup(pattern);
	if (!v[zc->nr_hints].pattern)
		return -ENOMEM;
	v[zc->nr_hints].owner = owner;
	v[zc->nr_hints++].zc = hz;
	return 0;
}

/* Parse one non-comment line (@no for messages). */
static int parse_line(struct kiln_zctx *zc, const struct kiln_build_opts *opts,
		      const char *path, unsigned int no, char *line)
{
	struct kiln_compress_spec spec;
	struct kiln_zctx *hz = NULL;
	char *w[3], why[256];
	uint32_t pcluster = opts->pcluster_size;
	size_t n = split_words(line, w, 3);
	int err;

	if (n < 2 || n > 3) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "%s:%u: expected PATTERN ALG[:LEVEL] [PCLUSTER_SIZE]",
			 path, no);
		return -EINVAL;
	}
	if (kiln_compress_parse(w[1], &spec, why, sizeof(why))) {
		kiln_log(&zc->lg, KILN_LOG_ERROR, "%s:%u: %s", path, no, why);
		return -EINVAL;
	}
	if (n == 3 && parse_pcluster(w[2], &pcluster)) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "%s:%u: '%s' is not a pcluster size in bytes",
			 path, no, w[2]);
		return -EINVAL;
	}
	if (spec.codec != KILN_CODEC_NONE) {
		err = kiln_zctx_new_child(zc, opts, &spec, pcluster, &hz);
		if (err) {
			kiln_log(&zc->lg, KILN_LOG_ERROR, "%s:%u: bad hint",
				 path, no);
			return err;
		}
	}
	/* lines with the same settings share one context and its workspaces */
	for (size_t i = 0; hz && i < zc->nr_hints; i++) {
		struct kiln_zctx *h = zc->hints[i].zc;

		if (h && zc->hints[i].owner && h->ops == hz->ops &&
		    h->params.level == hz->params.level &&
		    h->pcluster_size == hz->pcluster_size) {
			kiln_zctx_free(hz);
			return add_hint(zc, w[0], h, false);
		}
	}
	err = add_hint(zc, w[0], hz, true);
	if (err)
		kiln_zctx_free(hz);
	return err;
}

/* At most HINTS_MAX_ALGS on-disk algorithms, the default's included. */
static int check_algs(struct kiln_zctx *zc, const char *path)
{
	unsigned int algs = 1u << zc->ops->erofs_alg, count = 0;
	char names[128] = "";

	for (size_t i = 0; i < zc->nr_hints; i++)
		if (zc->hints[i].zc)
			algs |= 1u << zc->hints[i].zc->ops->erofs_alg;
	for (unsigned int alg = 0; alg < 16; alg++) {
		const struct kiln_codec_ops *ops;

		if (!(algs & (1u << alg)))
			continue;
		ops = kiln_codec_by_erofs_alg(alg);
		count++;
		strncat(names, count > 1 ? ", " : "",
			sizeof(names) - strlen(names) - 1);
		strncat(names, ops ? ops->name : "?",
			sizeof(names) - strlen(names) - 1);
	}
	if (count > 1 && zc->target &&
	    !kiln_kernel_allows(zc->target, KILN_KF_HEAD2)) {
		kiln_log(&zc->lg, KILN_LOG_ERROR,
			 "%s: two compression algorithms (%s) need Linux %s; "
			 "the target is %u.%u", path, names,
			 kiln_kernel_feature(KILN_KF_HEAD2)->version,
			 zc->target / 100, zc->target % 100);
		return -EINVAL;
	}
	if (count <= HINTS_MAX_ALGS)
		return 0;
	kiln_log(&zc->lg, KILN_LOG_ERROR,
		 "%s: %u compression algorithms (%s) with the default; an image "
		 "may use at most %u (lz4 and lz4hc count as one)",
		 path, count, names, HINTS_MAX_ALGS);
	return -EINVAL;
}

int kiln_zctx_load_hints(struct kiln_zctx *zc, const char *path,
			 const struct kiln_build_opts *opts)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	unsigned int no = 0;
	ssize_t len;
	int err = 0;

	if (!f) {
		err = -errno;
		kiln_log(&zc->lg, KILN_LOG_ERROR, "%s: %s", path,
			 strerror(errno));
		return err;
	}
	while (!err && (len = getline(&line, &cap, f)) >= 0) {
		char *p = line;

		no++;
		while (len && isspace((unsigned char)line[len - 1]))
			line[--len] = '\0';
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		err = parse_line(zc, opts, path, no, p);
	}
	if (!err && ferror(f)) {
		err = -EIO;
		kiln_log(&zc->lg, KILN_LOG_ERROR, "%s: read error", path);
	}
	free(line);
	fclose(f);
	return err ? err : check_algs(zc, path);
}

void kiln_hints_needs(const char *path, uint32_t *codecs,
		      uint32_t *max_pcluster)
{
	FILE *f = fopen(path, "re");
	char *line = NULL, *w[3];
	size_t cap = 0;

	*codecs = 0;
	*max_pcluster = 0;
	if (!f)
		return;
	while (getline(&line, &cap, f) >= 0) {
		struct kiln_compress_spec spec;
		size_t n = split_words(line, w, 3);
		uint32_t pcluster;

		if (n < 2 || n > 3 || w[0][0] == '#' ||
		    kiln_compress_parse(w[1], &spec, NULL, 0))
			continue;
		if (spec.codec == KILN_CODEC_NONE)
			continue;
		*codecs |= 1u << spec.codec;
		if (n == 3 && !parse_pcluster(w[2], &pcluster))
			*max_pcluster = KILN_MAX(*max_pcluster, pcluster);
	}
	free(line);
	fclose(f);
}

void kiln_zctx_free_hints(struct kiln_zctx *zc)
{
	for (size_t i = 0; i < zc->nr_hints; i++) {
		free(zc->hints[i].pattern);
		if (zc->hints[i].owner)
			kiln_zctx_free(zc->hints[i].zc);
	}
	free(zc->hints);
	zc->hints = NULL;
	zc->nr_hints = 0;
}

struct kiln_zctx *kiln_zctx_for_path(struct kiln_zctx *zc, const char *rel)
{
	const char *base;

	if (!zc)
		return NULL;
	base = strrchr(rel, '/');
	base = base ? base + 1 : rel;
	for (size_t i = 0; i < zc->nr_hints; i++) {
		const char *pat = zc->hints[i].pattern;

		if (!fnmatch(pat, rel, 0) ||
		    (!strchr(pat, '/') && !fnmatch(pat, base, 0)))
			return zc->hints[i].zc;
	}
	return zc;
}

struct kiln_zctx *kiln_node_zctx(const struct kiln_build *b,
				 const struct kiln_node *n)
{
	char rel[KILN_PATH_BUF];
	size_t pos = sizeof(rel) - 1;

	if (n->flags & KILN_NODE_ZCTX)
		return n->zctx;
	if (!b->zctx || !b->zctx->nr_hints)
		return b->zctx;
	/* the path from the root, built backwards from the file's name */
	rel[pos] = '\0';
	for (; n && n->first; n = n->parent) {
		const struct kiln_dentry *d = n->first;
		size_t need = d->name_len + (pos < sizeof(rel) - 1);

		if (need > pos)
			return b->zctx;	/* longer than any path on Linux */
		if (pos < sizeof(rel) - 1)
			rel[--pos] = '/';
		pos -= d->name_len;
		memcpy(rel + pos, d->name, d->name_len);
	}
	return kiln_zctx_for_path(b->zctx, rel + pos);
}

void kiln_node_pick_zctx(const struct kiln_build *b, struct kiln_node *n,
			 const char *rel)
{
	n->zctx = kiln_zctx_for_path(b->zctx, rel);
	n->flags |= KILN_NODE_ZCTX;
}
