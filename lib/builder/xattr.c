// SPDX-License-Identifier: MIT
/*
 * Extended attributes: namespace prefixes, deduplication across the tree,
 * SELinux labels, the shared area, per-inode inline areas and the name
 * bloom filter.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "builder/internal.h"
#include "builder/selabel.h"
#include "format/erofs_fs.h"
#include "util/checked.h"
#include "util/grow.h"
#include "util/endian.h"

static const struct {
	const char *prefix;
	unsigned int index;
	bool exact;			/* the whole name, suffix empty */
} prefixes[] = {
	{ "user.", EROFS_XATTR_INDEX_USER, false },
	{ "system.posix_acl_access", EROFS_XATTR_INDEX_POSIX_ACL_ACCESS, true },
	{ "system.posix_acl_default", EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT, true },
	{ "trusted.", EROFS_XATTR_INDEX_TRUSTED, false },
	{ "security.", EROFS_XATTR_INDEX_SECURITY, false },
};

unsigned int kiln_xattr_prefix(const char *name, const char **suffix)
{
	for (size_t i = 0; i < KILN_ARRAY_SIZE(prefixes); i++) {
		size_t len = strlen(prefixes[i].prefix);

		if (strncmp(name, prefixes[i].prefix, len))
			continue;
		if (prefixes[i].exact ? name[len] != '\0' : name[len] == '\0')
			continue;
		*suffix = name + len;
		return prefixes[i].index;
	}
	return 0;
}

void kiln_xattr_table_init(struct kiln_xattr_table *xt)
{
	memset(xt, 0, sizeof(*xt));
}

void kiln_xattr_table_release(struct kiln_xattr_table *xt)
{
	for (size_t i = 0; i < xt->nr_items; i++) {
		free(xt->items[i]->name);
		free(xt->items[i]->value);
		free(xt->items[i]);
	}
	free(xt->items);
	free(xt->buckets);
	memset(xt, 0, sizeof(*xt));
}

static uint32_t item_hash(unsigned int index, const char *name, size_t nlen,
			  const void *value, size_t vlen)
{
	XXH64_hash_t h = XXH3_64bits_withSeed(name, nlen, index);

	return (uint32_t)XXH3_64bits_withSeed(value, vlen, h);
}

static int table_grow(struct kiln_xattr_table *xt)
{
	size_t cap = xt->nr_buckets ? xt->nr_buckets * 2 : 256;
	struct kiln_xattr_item **b = calloc(cap, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < xt->nr_items; i++) {
		struct kiln_xattr_item *it = xt->items[i];

		it->next = b[it->hash & (cap - 1)];
		b[it->hash & (cap - 1)] = it;
	}
	free(xt->buckets);
	xt->buckets = b;
	xt->nr_buckets = cap;
	return 0;
}

int kiln_xattr_intern(struct kiln_xattr_table *xt, unsigned int index,
		      const char *suffix, size_t suffix_len,
		      const void *value, size_t value_len,
		      struct kiln_xattr_item **item)
{
	uint32_t h = item_hash(index, suffix, suffix_len, value, value_len);
	struct kiln_xattr_item *it;

	if (suffix_len > EROFS_NAME_LEN || value_len > UINT16_MAX)
		return -E2BIG;
	if (xt->nr_buckets) {
		for (it = xt->buckets[h & (xt->nr_buckets - 1)]; it; it = it->next)
			if (it->hash == h && it->index == index &&
			    it->name_len == suffix_len &&
			    it->value_len == value_len &&
			    !memcmp(it->name, suffix, suffix_len) &&
			    !memcmp(it->value, value, value_len)) {
				*item = it;
				return 0;
			}
	}
	if (xt->nr_items * 2 >= xt->nr_buckets && table_grow(xt))
		return -ENOMEM;
	if (KILN_GROW(xt->items, xt->items_cap, xt->nr_items + 1))
		return -ENOMEM;
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->name = malloc(suffix_len + 1);
	it->value = malloc(value_len + 1);
	if (!it->name || !it->value) {
		free(it->name);
		free(it->value);
		free(it);
		return -ENOMEM;
	}
	memcpy(it->name, suffix, suffix_len);
	memcpy(it->value, value, value_len);
	it->index = (uint8_t)index;
	it->name_len = (uint8_t)suffix_len;
	it->value_len = (uint16_t)value_len;
	it->hash = h;
	it->shared_id = -1;
	it->next = xt->buckets[h & (xt->nr_buckets - 1)];
	xt->buckets[h & (xt->nr_buckets - 1)] = it;
	xt->items[xt->nr_items++] = it;
	*item = it;
	return 0;
}

static bool is_selinux_label(const struct kiln_xattr_item *it)
{
	return it->index == EROFS_XATTR_INDEX_SECURITY && it->name_len == 7 &&
	       !memcmp(it->name, "selinux", 7);
}

int kiln_xattr_set_label(struct kiln_build *b, struct kiln_node *n,
			 const char *rel, const char *what)
{
	struct kiln_xattr_item *item;
	uint16_t kept = 0;
	size_t len;
	char *ctx;
	int err;

	if (!b->selabel)
		return 0;
	/* the file_contexts file alone labels the image: no host labels */
	for (uint16_t i = 0; i < n->nr_xattrs; i++)
		if (!is_selinux_label(n->xattrs[i]))
			n->xattrs[kept++] = n->xattrs[i];
	n->nr_xattrs = kept;
	err = kiln_selabel_lookup(b->selabel, rel, n->mode, &ctx);
	if (err == -ENOENT)
		return 0;
	if (err) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: SELinux label lookup "
			 "failed: %s", what, strerror(-err));
		return err;
	}
	/* the value keeps the string's NUL, as setfiles and the kernel do */
	len = strlen(ctx) + 1;
	if (len > UINT16_MAX) {
		free(ctx);
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: SELinux label longer "
			 "than 65534 bytes", what);
		return -E2BIG;
	}
	err = kiln_xattr_intern(&b->xt, EROFS_XATTR_INDEX_SECURITY, "selinux",
				7, ctx, len, &item);
	free(ctx);
	if (err)
		return err;
	err = kiln_node_add_xattr(b, n, item, what);
	if (err)
		return err;
	kiln_xattr_sort(n->xattrs, &n->nr_xattrs);
	return 0;
}

int kiln_node_add_xattr(struct kiln_build *b, struct kiln_node *n,
			struct kiln_xattr_item *item, const char *what)
{
	size_t cap = n->cap_xattrs;

	if (n->nr_xattrs == UINT16_MAX) {
		if (what)
			kiln_log(&b->lg, KILN_LOG_ERROR, "%s: too many xattrs",
				 what);
		return -E2BIG;
	}
	/* at most UINT16_MAX elements are asked for: cap stays in 32 bits */
	if (KILN_GROW(n->xattrs, cap, n->nr_xattrs + 1u))
		return -ENOMEM;
	n->cap_xattrs = (uint32_t)cap;
	n->xattrs[n->nr_xattrs++] = item;
	return 0;
}

static uint32_t entry_size(const struct kiln_xattr_item *it)
{
	return (uint32_t)kiln_round_up(sizeof(struct erofs_xattr_entry) +
				       it->name_len + it->value_len, 4);
}

void kiln_xattr_assign_shared(struct kiln_xattr_table *xt,
			      unsigned int shared_min)
{
	uint64_t off = 0;

	/* ids follow the order of first use, which follows the sorted walk */
	for (size_t i = 0; i < xt->nr_items; i++) {
		struct kiln_xattr_item *it = xt->items[i];

		if (it->refs < shared_min || off / 4 > UINT32_MAX) {
			it->shared_id = -1;
			continue;
		}
		it->shared_id = (int64_t)(off / 4);
		off += entry_size(it);
		xt->nr_shared++;
	}
	xt->shared_size = off;
}

static int cmp_item(const void *a, const void *b)
{
	const struct kiln_xattr_item *x = *(struct kiln_xattr_item *const *)a;
	const struct kiln_xattr_item *y = *(struct kiln_xattr_item *const *)b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return kiln_dir_namecmp(x->name, x->name_len, y->name, y->name_len);
}

void kiln_xattr_sort(struct kiln_xattr_item **items, uint16_t *n)
{
	uint16_t kept = 0;

	if (!*n)
		return;
	qsort(items, *n, sizeof(*items), cmp_item);
	for (uint16_t i = 0; i < *n; i++)
		if (!kept || cmp_item(&items[kept - 1], &items[i]))
			items[kept++] = items[i];
	*n = kept;
}

/* The first 255 shared items go in the id list, the rest inline. */
static bool stored_shared(const struct kiln_xattr_item *it, size_t *nshared)
{
	if (it->shared_id < 0 || *nshared >= 255)
		return false;
	(*nshared)++;
	return true;
}

int kiln_xattr_ibody_size(struct kiln_xattr_item *const *items, size_t n,
			  uint32_t *size)
{
	uint64_t len = sizeof(struct erofs_xattr_ibody_header);
	size_t nshared = 0;

	*size = 0;
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		len += stored_shared(items[i], &nshared) ? 4 : entry_size(items[i]);
	/* i_xattr_icount is 16 bits: 12 + 4 * (icount - 1) */
	if (len > 12 + 4ull * (UINT16_MAX - 1))
		return -E2BIG;
	*size = (uint32_t)len;
	return 0;
}

uint32_t kiln_xattr_filter(struct kiln_xattr_item *const *items, size_t n)
{
	uint32_t filter = EROFS_XATTR_FILTER_DEFAULT;

	for (size_t i = 0; i < n; i++) {
		uint32_t h = XXH32(items[i]->name, items[i]->name_len,
				   EROFS_XATTR_FILTER_SEED + items[i]->index);

		filter &= ~(1u << (h & (EROFS_XATTR_FILTER_BITS - 1)));
	}
	return filter;
}

static uint8_t *encode_entry(const struct kiln_xattr_item *it, uint8_t *p)
{
	uint32_t len = entry_size(it);

	memset(p, 0, len);
	p[0] = it->name_len;
	p[1] = it->index;
	kiln_put_le16(p + 2, it->value_len);
	memcpy(p + 4, it->name, it->name_len);
	memcpy(p + 4 + it->name_len, it->value, it->value_len);
	return p + len;
}

void kiln_xattr_encode_ibody(struct kiln_xattr_item *const *items, size_t n,
			     bool filter, void *dst, uint32_t size)
{
	uint8_t *p = dst, *ids;
	size_t nshared = 0;

	memset(dst, 0, size);
	for (size_t i = 0; i < n; i++)
		stored_shared(items[i], &nshared);
	kiln_put_le32(p, filter ? kiln_xattr_filter(items, n) : 0);
	p[4] = (uint8_t)nshared;
	ids = p + sizeof(struct erofs_xattr_ibody_header);
	p = ids + 4 * nshared;
	nshared = 0;
	for (size_t i = 0; i < n; i++) {
		if (stored_shared(items[i], &nshared)) {
			kiln_put_le32(ids, (uint32_t)items[i]->shared_id);
			ids += 4;
		} else {
			p = encode_entry(items[i], p);
		}
	}
}

void kiln_xattr_encode_shared(const struct kiln_xattr_table *xt, void *dst)
{
	uint8_t *p = dst;

	for (size_t i = 0; i < xt->nr_items; i++)
		if (xt->items[i]->shared_id >= 0)
			p = encode_entry(xt->items[i], p);
}
