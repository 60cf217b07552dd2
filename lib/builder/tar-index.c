// SPDX-License-Identifier: MIT
/*
 * Tar index images (KILN_SOURCE_TAR_INDEX): the tar is mapped and read by
 * libarchive from memory, so each member's data is found where it lies in
 * the tar; regular files become chunk-based inodes whose chunks point at
 * those bytes on extra device 1, the tar itself. Nothing of the data is
 * read or copied: the image holds only the metadata.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "builder/internal.h"
#include "builder/tar-index.h"
#include "builder/tar-data.h"
#include "format/erofs_fs.h"
#include "util/checked.h"

/* Tar member data start on 512-byte records: the image's block size. */
#define TAR_RECORD_BITS 9u
/* chunkbits - blkszbits has 5 bits: chunks of up to 2^40 bytes. */
#define INDEX_CHUNK_MAX_BITS (TAR_RECORD_BITS + 31u)
/* Hole bytes a sparse member may claim, as for --tar (scan-tar.c). */
#define INDEX_HOLES_MAX (1ull << 40)
/* Chunks of one sparse member: an 8 MiB chunk table at most. */
#define INDEX_CHUNKS_MAX (1u << 20)

struct kiln_tar_index {
	int fd;
	const uint8_t *map;
	uint64_t size;
	uint64_t released;		/* map bytes [0, released) let go */
};

/*
 * The archive is read forward once: the pages of the map behind the
 * current header are let go now and then (they stay in the page cache),
 * so the build's resident memory does not grow with the tar.
 */
#define INDEX_RELEASE_STEP (32ull << 20)

static void release_behind(struct kiln_tar_index *ti, struct archive *a)
{
	int64_t at = archive_read_header_position(a);
	uint64_t pos;

	if (at <= 0)
		return;
	pos = (uint64_t)at & ~(INDEX_RELEASE_STEP - 1);
	if (pos <= ti->released || pos > ti->size)
		return;
	madvise((void *)(uintptr_t)(ti->map + ti->released),
		(size_t)(pos - ti->released), MADV_DONTNEED);
	ti->released = pos;
}

/* The tag of the tar's slot: its file name (the kernel reads no tag
 * when the device is given at mount). */
static void set_tag(struct kiln_build *b)
{
	const char *name = strrchr(b->source, '/');

	name = name ? name + 1 : b->source;
	memset(b->device_tag, 0, sizeof(b->device_tag));
	memcpy(b->device_tag, name,
	       KILN_MIN(strlen(name), sizeof(b->device_tag) - 1));
}

int kiln_tar_index_open(struct kiln_build *b, struct archive *a)
{
	struct kiln_tar_index *ti;
	struct stat st;
	void *map;

	if (!strcmp(b->source, "-")) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "--tar-index needs a tar file, "
			 "not a stream: the image points into it");
		return -EINVAL;
	}
	ti = calloc(1, sizeof(*ti));
	if (!ti)
		return -ENOMEM;
	b->tindex = ti;
	ti->fd = open(b->source, O_RDONLY | O_CLOEXEC);
	if (ti->fd < 0 || fstat(ti->fd, &st) < 0) {
		int err = -errno;

		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s", b->source,
			 kiln_strerror(err));
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: --tar-index needs a "
			 "regular file", b->source);
		return -EINVAL;
	}
	ti->size = (uint64_t)st.st_size;
	if (ti->size > SIZE_MAX)
		return -EFBIG;
	if ((ti->size + (1u << TAR_RECORD_BITS) - 1) >> TAR_RECORD_BITS >
	    UINT32_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a tar of %llu bytes: "
			 "--tar-index reaches 2 TiB at most", b->source,
			 (unsigned long long)ti->size);
		return -EFBIG;
	}
	if (ti->size) {
		map = mmap(NULL, (size_t)ti->size, PROT_READ, MAP_SHARED,
			   ti->fd, 0);
		if (map == MAP_FAILED)
			return -errno;
		ti->map = map;
	}
	b->device_bytes = ti->size;
	set_tag(b);
	if (archive_read_open_memory(a, ti->map ? ti->map : (const void *)"",
				     (size_t)ti->size) != ARCHIVE_OK) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s", b->source,
			 kiln_tar_error(a));
		return -EIO;
	}
	/* the filters were chosen at open: a compressed tar has two */
	if (archive_filter_count(a) != 1 ||
	    archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a %s-compressed tar "
			 "cannot be indexed: its members' data are not stored "
			 "as they are in it (decompress it first, or use --tar)",
			 b->source, archive_filter_name(a, 0));
		return -EOPNOTSUPP;
	}
	return 0;
}

void kiln_tar_index_close(struct kiln_build *b)
{
	struct kiln_tar_index *ti = b->tindex;

	if (!ti)
		return;
	if (ti->map)
		munmap((void *)(uintptr_t)ti->map, (size_t)ti->size);
	if (ti->fd >= 0)
		close(ti->fd);
	free(ti);
	b->tindex = NULL;
}

/* One run of a member's data: file bytes [off, off + len) at tar byte pos. */
struct seg {
	uint64_t off, len, pos;
};

struct segs {
	struct seg *v;
	size_t nr, cap;
};

static int segs_add(struct segs *s, uint64_t off, uint64_t len, uint64_t pos)
{
	struct seg *last = s->nr ? &s->v[s->nr - 1] : NULL;

	if (last && last->off + last->len == off &&
	    last->pos + last->len == pos) {
		last->len += len;
		return 0;
	}
	if (s->nr == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct seg *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->nr++] = (struct seg){ off, len, pos };
	return 0;
}

/*
 * Where the member's data lie in the tar: libarchive hands out the data
 * of an uncompressed archive read from memory as pointers into it, one
 * block per run (a sparse member has one per data run, the holes between
 * them skipped). Data copied or off a record boundary cannot be indexed.
 */
static int member_segs(struct kiln_build *b, struct archive *a,
		       const char *label, uint64_t size, struct segs *s)
{
	const struct kiln_tar_index *ti = b->tindex;

	for (;;) {
		const void *buf = NULL;
		size_t len = 0;
		int64_t off = 0;
		int r = archive_read_data_block(a, &buf, &len, &off);
		uintptr_t at = (uintptr_t)buf, base = (uintptr_t)ti->map;
		uint64_t pos;
		int err;

		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK) {
			kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s", label,
				 kiln_tar_error(a));
			return -EIO;
		}
		if (!len)
			continue;
		pos = at >= base ? (uint64_t)(at - base) : UINT64_MAX;
		if (pos == UINT64_MAX || off < 0 ||
		    !kiln_range_ok(pos, len, ti->size) ||
		    !kiln_range_ok((uint64_t)off, len, size)) {
			kiln_log(&b->lg, KILN_LOG_ERROR, "%s: data not found "
				 "in the tar as they are: cannot be indexed",
				 label);
			return -EINVAL;
		}
		if (pos & ((1u << TAR_RECORD_BITS) - 1)) {
			kiln_log(&b->lg, KILN_LOG_ERROR, "%s: data at byte %llu "
				 "of the tar, not on a 512-byte record: cannot "
				 "be indexed", label, (unsigned long long)pos);
			return -EINVAL;
		}
		err = segs_add(s, (uint64_t)off, len, pos);
		if (err)
			return err;
	}
}

/* Lowest set bit of @x as a shift (64 for 0). */
static unsigned int low_bit(uint64_t x)
{
	return x ? (unsigned int)__builtin_ctzll(x) : 64u;
}

/*
 * The largest chunk size at which every chunk is one run of the tar or a
 * hole: runs start on chunk boundaries and fill whole chunks, except the
 * one that ends the file. One chunk per file when it has no holes.
 */
static unsigned int chunk_bits(const struct segs *s, uint64_t size)
{
	unsigned int bits = TAR_RECORD_BITS;

	while (bits < INDEX_CHUNK_MAX_BITS && (size - 1) >> bits)
		bits++;
	for (size_t i = 0; i < s->nr; i++) {
		const struct seg *g = &s->v[i];

		bits = KILN_MIN(bits, low_bit(g->off));
		if (g->off + g->len < size)
			bits = KILN_MIN(bits, low_bit(g->len));
	}
	return bits;
}

/* The XXH3-64 of the member's bytes, holes as zeros (for --verify). */
static int member_hash(const struct kiln_tar_index *ti, const struct segs *s,
		       uint64_t size, uint64_t *hash)
{
	static const uint8_t zeros[65536];
	XXH3_state_t *st = XXH3_createState();
	uint64_t at = 0;

	if (!st)
		return -ENOMEM;
	XXH3_64bits_reset(st);
	for (size_t i = 0; i <= s->nr; i++) {
		uint64_t next = i < s->nr ? s->v[i].off : size;

		while (at < next) {
			size_t len = (size_t)KILN_MIN(next - at, sizeof(zeros));

			XXH3_64bits_update(st, zeros, len);
			at += len;
		}
		if (i < s->nr) {
			XXH3_64bits_update(st, ti->map + s->v[i].pos,
					   (size_t)s->v[i].len);
			at = s->v[i].off + s->v[i].len;
		}
	}
	*hash = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return 0;
}

/* Bytes of @size the runs leave as holes. */
static uint64_t hole_bytes(const struct segs *s, uint64_t size)
{
	for (size_t i = 0; i < s->nr; i++)
		size -= s->v[i].len;
	return size;
}

int kiln_tar_index_member(struct kiln_build *b, struct archive *a,
			  struct archive_entry *e, struct kiln_node *n,
			  const char *label)
{
	struct segs s = { 0 };
	unsigned int bits;
	int err;

	(void)e;
	n->flags |= KILN_NODE_STREAMED;
	n->datalayout = EROFS_INODE_FLAT_PLAIN;
	b->stats.input_bytes += n->size;
	release_behind(b->tindex, a);
	if (!n->size)
		return 0;
	err = member_segs(b, a, label, n->size, &s);
	if (err)
		goto out;
	if (hole_bytes(&s, n->size) > INDEX_HOLES_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a sparse member of %llu "
			 "bytes, more than 1 TiB of them holes: refused as "
			 "--tar does", label, (unsigned long long)n->size);
		err = -EFBIG;
		goto out;
	}
	bits = chunk_bits(&s, n->size);
	if (bits < TAR_RECORD_BITS) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a sparse member whose "
			 "data runs do not start and end on 512-byte blocks "
			 "cannot be indexed (use --tar)", label);
		err = -EOPNOTSUPP;
		goto out;
	}
	n->nr_chunks = kiln_div_round_up(n->size, 1ull << bits);
	if (n->nr_chunks > INDEX_CHUNKS_MAX) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a sparse member of %llu "
			 "chunks of %llu bytes: more than an index holds "
			 "(%u; use --tar)", label,
			 (unsigned long long)n->nr_chunks,
			 1ull << bits, INDEX_CHUNKS_MAX);
		err = -EOPNOTSUPP;
		goto out;
	}
	n->chunks = malloc(n->nr_chunks * sizeof(*n->chunks));
	if (!n->chunks) {
		err = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n->nr_chunks; i++)
		n->chunks[i] = EROFS_NULL_ADDR32;
	for (size_t i = 0; i < s.nr; i++) {
		const struct seg *g = &s.v[i];
		uint64_t first = g->off >> bits;
		uint64_t count = kiln_div_round_up(g->len, 1ull << bits);
		uint64_t blk = g->pos >> TAR_RECORD_BITS;

		for (uint64_t j = 0; j < count; j++)
			n->chunks[first + j] = (uint32_t)
				(blk + (j << (bits - TAR_RECORD_BITS)));
	}
	if (b->opts.flags & KILN_BUILD_VERIFY) {
		err = member_hash(b->tindex, &s, n->size, &n->data_hash);
		if (err)
			goto out;
		n->flags |= KILN_NODE_HASHED;
	}
	n->datalayout = EROFS_INODE_CHUNK_BASED;
	n->chunk_format = (uint16_t)(EROFS_CHUNK_FORMAT_INDEXES |
				     (bits - TAR_RECORD_BITS));
	n->chunk_device = 1;
	b->feature_incompat |= EROFS_FEATURE_INCOMPAT_CHUNKED_FILE;
out:
	free(s.v);
	return err;
}
