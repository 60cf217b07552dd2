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

struct kiln_tar_index {
	int fd;
	const uint8_t *map;
	uint64_t size;
};

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

/*
 * Where the member's data lies in the tar: libarchive hands out the data
 * of an uncompressed archive read from memory as pointers into it. Data
 * that arrive split, copied or off a record boundary cannot be indexed.
 */
static int member_start(struct kiln_build *b, struct archive *a,
			const char *label, uint64_t size, uint64_t *start)
{
	const struct kiln_tar_index *ti = b->tindex;
	const void *buf;
	size_t len;
	int64_t off;
	int r = archive_read_data_block(a, &buf, &len, &off);
	uint64_t pos;

	if (r != ARCHIVE_OK) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: %s", label,
			 r == ARCHIVE_EOF ? "data missing" : kiln_tar_error(a));
		return -EIO;
	}
	pos = (uint64_t)((const uint8_t *)buf - ti->map);
	if ((const uint8_t *)buf < ti->map || off != 0 || len != size ||
	    !kiln_range_ok(pos, size, ti->size)) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: data not found as one "
			 "run in the tar: cannot be indexed", label);
		return -EINVAL;
	}
	if (pos & ((1u << TAR_RECORD_BITS) - 1)) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: data at byte %llu of the "
			 "tar, not on a 512-byte record: cannot be indexed",
			 label, (unsigned long long)pos);
		return -EINVAL;
	}
	*start = pos;
	return 0;
}

int kiln_tar_index_member(struct kiln_build *b, struct archive *a,
			  struct archive_entry *e, struct kiln_node *n,
			  const char *label)
{
	unsigned int bits = TAR_RECORD_BITS;
	uint64_t start = 0, blk;
	int err;

	n->flags |= KILN_NODE_STREAMED;
	n->datalayout = EROFS_INODE_FLAT_PLAIN;
	b->stats.input_bytes += n->size;
	if (archive_entry_sparse_count(e) > 0) {
		kiln_log(&b->lg, KILN_LOG_ERROR, "%s: a sparse member cannot "
			 "be indexed: the tar holds its data without the holes "
			 "between them (use --tar)", label);
		return -EOPNOTSUPP;
	}
	if (!n->size)
		return 0;
	err = member_start(b, a, label, n->size, &start);
	if (err)
		return err;
	if (b->opts.flags & KILN_BUILD_VERIFY) {
		n->data_hash = XXH3_64bits(b->tindex->map + start,
					   (size_t)n->size);
		n->flags |= KILN_NODE_HASHED;
	}
	/* one chunk per file when it fits, each a run of the tar */
	while (bits < INDEX_CHUNK_MAX_BITS && (n->size - 1) >> bits)
		bits++;
	n->nr_chunks = kiln_div_round_up(n->size, 1ull << bits);
	n->chunks = malloc(n->nr_chunks * sizeof(*n->chunks));
	if (!n->chunks)
		return -ENOMEM;
	blk = start >> TAR_RECORD_BITS;
	for (uint64_t i = 0; i < n->nr_chunks; i++)
		n->chunks[i] = (uint32_t)(blk + (i << (bits - TAR_RECORD_BITS)));
	n->datalayout = EROFS_INODE_CHUNK_BASED;
	n->chunk_format = (uint16_t)(EROFS_CHUNK_FORMAT_INDEXES |
				     (bits - TAR_RECORD_BITS));
	n->chunk_device = 1;
	b->feature_incompat |= EROFS_FEATURE_INCOMPAT_CHUNKED_FILE |
			       EROFS_FEATURE_INCOMPAT_DEVICE_TABLE;
	return 0;
}
