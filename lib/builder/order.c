// SPDX-License-Identifier: MIT
/*
 * The order file data goes into the image: depth first, each directory's
 * own entries (in name order) before its subdirectories' contents, so a
 * subtree's data is one run of the image, in about the order tar, cp -r
 * and find read it. With packed_order SIMILAR, the files that go whole
 * into the packed inode (small files, with fragments) then trade places
 * among themselves so that similar ones sit side by side there: grouped
 * by name suffix, then by a fingerprint of their first bytes, then in
 * that depth-first order. The
 * inodes keep b->nodes' breadth-first order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "builder/compress/compress.h"
#include "builder/internal.h"
#include "util/checked.h"
#include "util/fileio.h"

/*
 * Bytes of a file the fingerprint looks at: its head, where the license,
 * the includes or a format's header make files of one kind look alike.
 */
#define FP_HEAD_SIZE	4096u
/* Bytes per n-gram of the fingerprint. */
#define FP_GRAM		8u

/* Push @dir's subdirectories named from it, last first (popped first first). */
static size_t push_subdirs(struct kiln_node **stack, size_t top,
			   const struct kiln_node *dir)
{
	for (size_t j = dir->nr_children; j-- > 0;) {
		const struct kiln_dentry *d = &dir->children[j];

		if (S_ISDIR(d->node->mode) && d->node->first == d)
			stack[top++] = d->node;
	}
	return top;
}

/* Depth first into @order; false: the tree was not reached whole. */
static bool depth_first(struct kiln_build *b, struct kiln_node **order,
			struct kiln_node **stack)
{
	size_t nr = 0, top = 0;

	if (b->root && S_ISDIR(b->root->mode))
		stack[top++] = b->root;
	while (top && nr < b->nr_nodes) {
		struct kiln_node *dir = stack[--top];

		order[nr++] = dir;
		for (size_t j = 0; j < dir->nr_children && nr < b->nr_nodes; j++) {
			const struct kiln_dentry *d = &dir->children[j];

			if (!S_ISDIR(d->node->mode) && d->node->first == d)
				order[nr++] = d->node;
		}
		top = push_subdirs(stack, top, dir);
	}
	return nr == b->nr_nodes;
}

void kiln_order_suffix(const char *name, size_t len, const char **suffix,
		       size_t *suffix_len)
{
	/* a leading dot (".gitignore") names a kind, not a suffix */
	for (size_t i = len; i-- > 1;) {
		if (name[i] == '.') {
			*suffix = name + i + 1;
			*suffix_len = len - i - 1;
			return;
		}
	}
	*suffix = name;
	*suffix_len = len;
}

uint64_t kiln_order_fingerprint(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t min = UINT64_MAX;

	if (len < FP_GRAM)
		return len ? XXH3_64bits(p, len) : 0;
	for (size_t i = 0; i + FP_GRAM <= len; i++) {
		uint64_t h = XXH3_64bits(p + i, FP_GRAM);

		if (h < min)
			min = h;
	}
	return min;
}

static int key_cmp(const void *a, const void *b)
{
	const struct kiln_order_key *x = a, *y = b;
	size_t n = KILN_MIN(x->suffix_len, y->suffix_len);
	int c = memcmp(x->suffix, y->suffix, n);

	if (c)
		return c;
	if (x->suffix_len != y->suffix_len)
		return x->suffix_len < y->suffix_len ? -1 : 1;
	if (x->fp != y->fp)
		return x->fp < y->fp ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/*
 * Files alike to fewer others than this keep their depth-first place
 * among their suffix's (fp 0): in a source tree a file's neighbours are
 * more like it than a random one (figures: bench/README.md, "Measurements behind the defaults").
 */
#define FP_GROUP_MIN	16u

static bool same_group(const struct kiln_order_key *x,
		       const struct kiln_order_key *y)
{
	return x->suffix_len == y->suffix_len && x->fp == y->fp &&
	       !memcmp(x->suffix, y->suffix, x->suffix_len);
}

void kiln_order_sort(struct kiln_order_key *keys, size_t nr)
{
	bool again = false;

	/* @pos is unique, so the order is total and qsort's is the only one */
	qsort(keys, nr, sizeof(*keys), key_cmp);
	for (size_t i = 0, j; i < nr; i = j) {
		for (j = i + 1; j < nr && same_group(&keys[i], &keys[j]); j++)
			;
		if (j - i < FP_GROUP_MIN) {
			for (size_t k = i; k < j; k++)
				keys[k].fp = 0;
			again = true;
		}
	}
	if (again)
		qsort(keys, nr, sizeof(*keys), key_cmp);
}

/* Whether all of @n's data goes to the packed inode (a small file). */
static bool packed_whole(const struct kiln_build *b, const struct kiln_node *n)
{
	if (!S_ISREG(n->mode) || !n->size || (n->flags & KILN_NODE_STREAMED) ||
	    !n->first)
		return false;
	return kiln_zctx_fragment_whole(kiln_node_zctx(b, n), n->size);
}

/* @n's head; a file that cannot be read now fails later, where it is read. */
static uint64_t head_fingerprint(const struct kiln_build *b,
				 const struct kiln_node *n, uint8_t *buf)
{
	size_t len = (size_t)KILN_MIN(n->size, (uint64_t)FP_HEAD_SIZE);
	int fd = kiln_node_open(b, n, NULL);
	ssize_t r;

	if (fd < 0)
		return 0;
	r = kiln_pread_full(fd, buf, len, 0);
	close(fd);
	return r > 0 ? kiln_order_fingerprint(buf, (size_t)r) : 0;
}

/* 2. Small files trade places: the similarity order, in their own slots. */
static int order_similar(struct kiln_build *b, struct kiln_node **order)
{
	struct kiln_order_key *keys;
	size_t *slots, nr = 0;
	uint8_t *head;

	keys = malloc(b->nr_nodes * sizeof(*keys));
	slots = malloc(b->nr_nodes * sizeof(*slots));
	head = malloc(FP_HEAD_SIZE);
	if (!keys || !slots || !head) {
		free(keys);
		free(slots);
		free(head);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->nr_nodes; i++) {
		struct kiln_node *n = order[i];
		struct kiln_order_key *k = &keys[nr];

		if (!packed_whole(b, n))
			continue;
		kiln_order_suffix(n->first->name, n->first->name_len,
				  &k->suffix, &k->suffix_len);
		k->fp = head_fingerprint(b, n, head);
		k->pos = i;
		k->node = n;
		slots[nr++] = i;
	}
	kiln_order_sort(keys, nr);
	for (size_t i = 0; i < nr; i++)
		order[slots[i]] = keys[i].node;
	free(keys);
	free(slots);
	free(head);
	return 0;
}

int kiln_data_order(struct kiln_build *b)
{
	struct kiln_node **order, **stack;
	int err = 0;

	free(b->order);
	b->order = NULL;
	if (!b->nr_nodes)
		return 0;
	order = malloc(b->nr_nodes * sizeof(*order));
	stack = malloc(b->nr_nodes * sizeof(*stack));
	if (!order || !stack) {
		free(order);
		free(stack);
		return -ENOMEM;
	}
	/* 1. depth first; a tree not reached whole keeps the inode order */
	if (!depth_first(b, order, stack)) {
		for (size_t i = 0; i < b->nr_nodes; i++)
			order[i] = b->nodes[i];
	}
	free(stack);
	if (b->opts.packed_order == KILN_PACKED_ORDER_SIMILAR &&
	    b->opts.source_kind == KILN_SOURCE_DIR)
		err = order_similar(b, order);
	if (err) {
		free(order);
		return err;
	}
	b->order = order;
	return 0;
}
