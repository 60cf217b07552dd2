// SPDX-License-Identifier: MIT
/*
 * Extended attributes of an inode: its inline entries, then the shared
 * entries it references, with short and long name prefixes.
 */
#include <string.h>
#include <xxhash.h>

#include "reader/internal.h"
#include "util/checked.h"
#include "util/endian.h"

/* The short prefixes Linux exposes, by on-disk index (lustre is not). */
static const struct {
	const char *str;
	size_t len;
} short_prefixes[] = {
#define P(idx, s) [idx] = { s, sizeof(s) - 1 }
	P(EROFS_XATTR_INDEX_USER, "user."),
	P(EROFS_XATTR_INDEX_POSIX_ACL_ACCESS, "system.posix_acl_access"),
	P(EROFS_XATTR_INDEX_POSIX_ACL_DEFAULT, "system.posix_acl_default"),
	P(EROFS_XATTR_INDEX_TRUSTED, "trusted."),
	P(EROFS_XATTR_INDEX_SECURITY, "security."),
#undef P
};

/* A decoded xattr: full name = prefix + infix + suffix. */
struct xattr {
	const char *prefix;
	size_t prefix_len;
	const char *infix;
	size_t infix_len;
	const uint8_t *suffix;
	size_t suffix_len;
	const uint8_t *value;
	uint16_t value_len;
};

typedef int (*xattr_fn)(void *ctx, const struct xattr *x);

/* Fill @x for the entry at @raw; false when its prefix is not exposed. */
static bool xattr_name(const struct kiln_image *img,
		       const struct kiln_xattr_entry *e, const uint8_t *raw,
		       struct xattr *x)
{
	unsigned int base = e->name_index;

	x->infix = NULL;
	x->infix_len = 0;
	if (base & EROFS_XATTR_LONG_PREFIX) {
		unsigned int k = base & EROFS_XATTR_LONG_PREFIX_MASK;

		if (k >= img->sb.xattr_prefix_count)
			return false;
		base = img->xprefixes[k].base_index;
		x->infix = img->xprefixes[k].infix;
		x->infix_len = img->xprefixes[k].infix_len;
	}
	if (base >= KILN_ARRAY_SIZE(short_prefixes) || !short_prefixes[base].str)
		return false;
	x->prefix = short_prefixes[base].str;
	x->prefix_len = short_prefixes[base].len;
	x->suffix = raw + sizeof(struct erofs_xattr_entry);
	x->suffix_len = e->name_len;
	x->value = x->suffix + e->name_len;
	x->value_len = e->value_size;
	return true;
}

static int visit_entry(struct kiln_image *img, const uint8_t *raw,
		       const struct kiln_xattr_entry *e, xattr_fn fn, void *ctx)
{
	struct xattr x;

	if (!xattr_name(img, e, raw, &x))
		return 0;
	return fn(ctx, &x);
}

static int visit_shared(struct kiln_image *img, const struct kiln_inode *in,
			uint32_t id, xattr_fn fn, void *ctx)
{
	struct kiln_xattr_entry e;
	const uint8_t *raw;
	uint64_t base, off;
	/* SHARED_EA_IN_METABOX: the shared area is in the metabox data */
	bool mbx = img->sb.feature_compat &
		   EROFS_FEATURE_COMPAT_SHARED_EA_IN_METABOX;
	const char *where = mbx ? "metabox" : "image";

	if (!kiln_blk_off(img, img->sb.xattr_blkaddr, &base) ||
	    kiln_add_overflow(base, (uint64_t)id * 4, &off) ||
	    (mbx && kiln_in_metabox(off)) ||
	    !(raw = kiln_metabuf_get(img, mbx ? off | KILN_MBX_BIT : off,
				     sizeof(struct erofs_xattr_entry))))
		return KILN_CORRUPT(img, "nid %llu: shared xattr %u outside the %s",
				    (unsigned long long)in->nid, id, where);
	kiln_decode_xattr_entry(raw, &e);
	if (!kiln_metabuf_get(img, mbx ? off | KILN_MBX_BIT : off, e.footprint))
		return KILN_CORRUPT(img, "nid %llu: shared xattr %u runs past the %s end",
				    (unsigned long long)in->nid, id, where);
	return visit_entry(img, raw, &e, fn, ctx);
}

/*
 * Call @fn for every exposed xattr of @in: inline ones, then shared ones.
 * Stops at the first non-zero return of @fn and returns it.
 */
static int for_each_xattr(struct kiln_image *img, const struct kiln_inode *in,
			  xattr_fn fn, void *ctx)
{
	struct kiln_xattr_ibody h;
	const char *why = NULL;
	const uint8_t *area;
	size_t pos, size = in->xattr_size;
	int err;

	if (!size)
		return 0;
	/* kiln_inode_load() checked the whole area against the image */
	area = kiln_metabuf_get(img, in->inode_off + in->core_size, size);
	if (!area)
		return KILN_CORRUPT(img, "nid %llu: xattr area unreadable",
				    (unsigned long long)in->nid);
	err = kiln_decode_xattr_ibody(area, size, &h, &why);
	if (err == -EOPNOTSUPP) {
		kiln_log(&img->logger, KILN_LOG_ERROR, "nid %llu: %s",
			 (unsigned long long)in->nid, why);
		return err;
	}
	if (err)
		return KILN_CORRUPT(img, "nid %llu: %s",
				    (unsigned long long)in->nid, why);

	for (pos = sizeof(struct erofs_xattr_ibody_header) + 4u * h.shared_count;
	     pos < size;) {
		struct kiln_xattr_entry e;

		if (size - pos < sizeof(struct erofs_xattr_entry))
			return KILN_CORRUPT(img, "nid %llu: xattr entry header at %zu past the area",
					    (unsigned long long)in->nid, pos);
		kiln_decode_xattr_entry(area + pos, &e);
		if (e.footprint > size - pos)
			return KILN_CORRUPT(img, "nid %llu: xattr entry at %zu (%u bytes) past the %zu-byte area",
					    (unsigned long long)in->nid, pos,
					    e.footprint, size);
		err = visit_entry(img, area + pos, &e, fn, ctx);
		if (err)
			return err;
		pos += e.footprint;
	}
	for (unsigned int i = 0; i < h.shared_count; i++) {
		uint32_t id = kiln_get_le32(area + 4u * i +
					    sizeof(struct erofs_xattr_ibody_header));

		err = visit_shared(img, in, id, fn, ctx);
		if (err)
			return err;
	}
	return 0;
}

struct list_ctx {
	char *buf;
	size_t cap;
	size_t len;
};

static int list_one(void *ctx, const struct xattr *x)
{
	struct list_ctx *l = ctx;
	size_t need = x->prefix_len + x->infix_len + x->suffix_len + 1;

	if (l->cap) {
		char *p;

		if (need > l->cap - l->len)
			return -ERANGE;
		p = l->buf + l->len;
		memcpy(p, x->prefix, x->prefix_len);
		p += x->prefix_len;
		if (x->infix_len)
			memcpy(p, x->infix, x->infix_len);
		p += x->infix_len;
		if (x->suffix_len)
			memcpy(p, x->suffix, x->suffix_len);
		p[x->suffix_len] = '\0';
	}
	l->len += need;
	return 0;
}

KILN_API ssize_t kiln_listxattr(struct kiln_image *img, kiln_nid_t nid,
				char *buf, size_t cap)
{
	struct list_ctx l = { .buf = buf, .cap = cap };
	struct kiln_inode in;
	int err;

	err = kiln_inode_load(img, nid, &in);
	if (!err)
		err = for_each_xattr(img, &in, list_one, &l);
	if (err)
		return err;
	return (ssize_t)l.len;
}

struct get_ctx {
	const char *name;
	size_t name_len;
	const struct xattr *found;
	struct xattr match;
};

static bool take(const char **p, size_t *left, const void *part, size_t len)
{
	if (len > *left || (len && memcmp(*p, part, len)))
		return false;
	*p += len;
	*left -= len;
	return true;
}

static int get_one(void *ctx, const struct xattr *x)
{
	struct get_ctx *g = ctx;
	const char *p = g->name;
	size_t left = g->name_len;

	if (take(&p, &left, x->prefix, x->prefix_len) &&
	    take(&p, &left, x->infix, x->infix_len) &&
	    take(&p, &left, x->suffix, x->suffix_len) && left == 0) {
		g->match = *x;
		g->found = &g->match;
		return 1;	/* stop the walk */
	}
	return 0;
}

/*
 * Bloom filter (notes 6.5): true when @name certainly is not an xattr of
 * @in. A bit is set for names whose hash no xattr of the inode has.
 */
static bool filtered_out(const struct kiln_image *img,
			 const struct kiln_inode *in, const char *name,
			 size_t len)
{
	const uint8_t *area;
	uint32_t filter;

	if (!img->sb.xattr_filter || in->xattr_size <= 12)
		return false;
	/* checked at inode load; the full walk reports it when unreadable */
	area = kiln_metabuf_get(img, in->inode_off + in->core_size, 4);
	if (!area)
		return false;
	filter = kiln_get_le32(area);
	for (unsigned int i = 0; i < KILN_ARRAY_SIZE(short_prefixes); i++) {
		const char *pfx = short_prefixes[i].str;
		size_t plen = short_prefixes[i].len;
		uint32_t bit;

		if (!pfx || len < plen || memcmp(name, pfx, plen))
			continue;
		bit = XXH32(name + plen, len - plen,
			    EROFS_XATTR_FILTER_SEED + i) &
		      (EROFS_XATTR_FILTER_BITS - 1);
		return (filter >> bit) & 1;
	}
	return false;
}

KILN_API ssize_t kiln_getxattr(struct kiln_image *img, kiln_nid_t nid,
			       const char *name, void *buf, size_t cap)
{
	struct get_ctx g = { .name = name, .name_len = strlen(name) };
	struct kiln_inode in;
	int err;

	err = kiln_inode_load(img, nid, &in);
	if (err)
		return err;
	if (!in.xattr_size || filtered_out(img, &in, name, g.name_len))
		return -ENODATA;
	err = for_each_xattr(img, &in, get_one, &g);
	if (err < 0)
		return err;
	if (!g.found)
		return -ENODATA;
	if (!cap)
		return g.found->value_len;
	if (cap < g.found->value_len)
		return -ERANGE;
	if (g.found->value_len)
		memcpy(buf, g.found->value, g.found->value_len);
	return g.found->value_len;
}
