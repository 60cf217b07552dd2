// SPDX-License-Identifier: MIT
/*
 * The order file data goes into the image: depth first, each directory's
 * own entries (in name order) before its subdirectories' contents, so a
 * subtree's data is one run of the image, in about the order tar, cp -r
 * and find read it, and files that sit together compress side by side in
 * the packed inode. The inodes keep b->nodes' breadth-first order.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "builder/internal.h"

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

int kiln_data_order(struct kiln_build *b)
{
	struct kiln_node **order, **stack;
	size_t nr = 0, top = 0;

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
	free(stack);
	/* a tree not reached whole from the root keeps the inode order */
	if (nr != b->nr_nodes) {
		for (size_t i = 0; i < b->nr_nodes; i++)
			order[i] = b->nodes[i];
	}
	b->order = order;
	return 0;
}
