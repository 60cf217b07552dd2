/* SPDX-License-Identifier: MIT */
/*
 * Tar index images (tar-index.c): members' data stay in the tar, extra
 * device 1 of the image. Used by scan-tar.c for KILN_SOURCE_TAR_INDEX.
 */
#ifndef KILN_BUILDER_TAR_INDEX_H
#define KILN_BUILDER_TAR_INDEX_H

struct archive;
struct archive_entry;
struct kiln_build;
struct kiln_node;

/*
 * Map the tar b->source and open @a on it (b->tindex, b->device_bytes,
 * b->device_tag); refuses a stream or a compressed tar. 0 or -errno,
 * logged; kiln_tar_index_close() in every case.
 */
int kiln_tar_index_open(struct kiln_build *b, struct archive *a);
void kiln_tar_index_close(struct kiln_build *b);

/*
 * Regular file @n is member @e, the archive's current entry: point its
 * chunks at the member's data in the tar (no data is read). Refuses
 * sparse members and data the tar does not hold as one aligned run.
 * 0 or -errno, logged with @label.
 */
int kiln_tar_index_member(struct kiln_build *b, struct archive *a,
			  struct archive_entry *e, struct kiln_node *n,
			  const char *label);

#endif
