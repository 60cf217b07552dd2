// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the xattr decoder (lib/reader/xattr.c) on a fuzzed inline
 * xattr area and shared xattr area of one inode, with long name prefixes
 * and the bloom filter on or off.
 * Input: [0] bits 0-1 long prefixes (0..3), bit 2 filter, bit 3 shared
 * area in the (absent) metabox, bits 4-5 block size 2^(9+n);
 * [1] i_xattr_icount; then the inline area (12 + 4 * (icount - 1) bytes),
 * then the shared area.
 */
#include <errno.h>
#include <sys/stat.h>

#include "fuzz-meta.h"

static const struct kiln_xattr_prefix prefixes[] = {
	{ "org.", 4, EROFS_XATTR_INDEX_USER },
	{ "", 0, EROFS_XATTR_INDEX_TRUSTED },
	{ "selinux", 7, EROFS_XATTR_INDEX_SECURITY },
};

static const char *const names[] = {
	"user.", "user.a", "user.org.x", "trusted.", "security.selinux",
	"security.capability", "system.posix_acl_access", "lustre.x", "",
};

/*
 * Every name listed has one value length, whichever way it is asked for
 * (a name whose suffix holds a NUL lists as two, so absence is allowed).
 */
static void check_listed(struct kiln_image *img, const char *list, size_t len)
{
	static uint8_t value[65536 + 1];

	for (size_t off = 0; off < len;) {
		const char *name = list + off;
		size_t nlen = strnlen(name, len - off);
		ssize_t vlen, got;

		if (nlen == len - off)
			abort();	/* listxattr ends every name with NUL */
		vlen = kiln_getxattr(img, 0, name, NULL, 0);
		got = kiln_getxattr(img, 0, name, value, sizeof(value));
		if (vlen != got)
			abort();
		if (vlen > 1 && kiln_getxattr(img, 0, name, value,
					      (size_t)vlen - 1) != -ERANGE)
			abort();
		off += nlen + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fuzz_meta m;
	static char list[FUZZ_META_MAX * 2];
	uint8_t value[256];
	unsigned int blkszbits, icount;
	size_t isize, inline_len, shared_at, shared_len;
	ssize_t need, got;

	if (size < 2)
		return 0;
	blkszbits = 9 + ((data[0] >> 4) & 3);
	icount = data[1];
	isize = icount ? 12 + 4u * (icount - 1) : 0;
	data += 2;
	size -= 2;
	inline_len = KILN_MIN(size, isize);
	shared_at = kiln_round_up(32 + isize, 1u << blkszbits);
	shared_len = KILN_MIN(size - inline_len, FUZZ_META_MAX - shared_at);

	fuzz_meta_reset(&m, blkszbits, shared_at + shared_len);
	fuzz_meta_inode(&m, 0, (uint16_t)icount, S_IFREG | 0644, 0, 0);
	memcpy(m.map + 32, data, inline_len);
	memcpy(m.map + shared_at, data + inline_len, shared_len);
	m.img.sb.xattr_blkaddr = (uint32_t)(shared_at >> blkszbits);
	m.img.sb.xattr_prefix_count = data[-2] & 3;
	m.img.xprefixes = (struct kiln_xattr_prefix *)prefixes;
	m.img.sb.xattr_filter = data[-2] & 4;
	if (data[-2] & 8)
		m.img.sb.feature_compat |= EROFS_FEATURE_COMPAT_SHARED_EA_IN_METABOX;

	need = kiln_listxattr(&m.img, 0, NULL, 0);
	got = kiln_listxattr(&m.img, 0, list, sizeof(list));
	if (need != got)
		abort();
	if (got > 0) {
		if (got > 1 && kiln_listxattr(&m.img, 0, list, (size_t)got - 1) != -ERANGE)
			abort();
		kiln_listxattr(&m.img, 0, list, sizeof(list));
		check_listed(&m.img, list, (size_t)got);
	}
	for (size_t i = 0; i < KILN_ARRAY_SIZE(names); i++)
		kiln_getxattr(&m.img, 0, names[i], value, sizeof(value));
	fuzz_meta_release(&m);
	return 0;
}
