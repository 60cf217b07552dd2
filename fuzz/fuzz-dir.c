// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the directory-block decoder (lib/reader/dir.c) and name
 * lookup (namei.c) on fuzzed blocks of one directory, the image's root.
 * Input: [0] bits 0-1 block size 2^(9+n), bit 2 inline tail, bit 3
 * "." omitted; then the directory's data (at most MAX_BLOCKS blocks).
 */
#include <sys/stat.h>

#include "fuzz-meta.h"

#define MAX_BLOCKS	8
#define MAX_NAMES	64

struct names {
	char name[MAX_NAMES][EROFS_NAME_LEN + 1];
	uint64_t pos[MAX_NAMES];
	unsigned int count;
	uint64_t last_pos;
};

static int on_entry(void *ctx, const struct kiln_dirent *de)
{
	struct names *n = ctx;

	if (de->next_pos <= n->last_pos || de->name_len > EROFS_NAME_LEN)
		abort();	/* positions move forward, names fit */
	n->last_pos = de->next_pos;
	if (n->count < MAX_NAMES) {
		memcpy(n->name[n->count], de->name, de->name_len + 1);
		n->pos[n->count++] = de->next_pos;
	}
	return 0;
}

static int count_entry(void *ctx, const struct kiln_dirent *de)
{
	(void)de;
	++*(unsigned int *)ctx;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fuzz_meta m;
	static struct names n;
	static const char *const paths[] = { "a", "a/b", "./..", "x/../y" };
	unsigned int blkszbits, bs, format, after;
	size_t full, tail;
	kiln_nid_t nid;

	if (size < 1)
		return 0;
	blkszbits = 9 + (data[0] & 3);
	bs = 1u << blkszbits;
	format = data[0] & 8 ? EROFS_I_DOT_OMITTED_BIT : 0;
	data++;
	size = KILN_MIN(size - 1, (size_t)MAX_BLOCKS * bs);
	full = size;
	tail = 0;
	if (data[-1] & 4) {
		format |= EROFS_INODE_FLAT_INLINE << 1;
		full = size / bs * bs;
		tail = KILN_MIN(size - full, bs - 32);
		size = full + tail;
	}
	fuzz_meta_reset(&m, blkszbits, bs + full);
	fuzz_meta_inode(&m, (uint16_t)format, 0, S_IFDIR | 0755,
			(uint32_t)size, 1);
	memcpy(m.map + bs, data, full);
	memcpy(m.map + 32, data + full, tail);

	memset(&n, 0, sizeof(n));
	if (kiln_dir_iterate(&m.img, 0, 0, on_entry, &n) == 0 &&
	    n.count < MAX_NAMES) {
		/* resuming at an entry's position gives the entries after it */
		for (unsigned int i = 0; i < n.count; i++) {
			after = 0;
			if (kiln_dir_iterate(&m.img, 0, n.pos[i], count_entry,
					     &after) || after != n.count - i - 1)
				abort();
		}
	}
	for (unsigned int i = 0; i < n.count; i++)
		kiln_lookup(&m.img, 0, n.name[i], strlen(n.name[i]), &nid);
	kiln_lookup(&m.img, 0, "zz", 2, &nid);
	for (size_t i = 0; i < KILN_ARRAY_SIZE(paths); i++)
		kiln_resolve(&m.img, paths[i], KILN_RESOLVE_FOLLOW, &nid);
	fuzz_meta_release(&m);
	return 0;
}
