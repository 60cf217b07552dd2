/* SPDX-License-Identifier: MIT */
/*
 * Checking an image: walk every inode reachable from the root (and the
 * packed inode), cross-check directories, link counts and types, and read
 * every byte of data and every xattr through the reader.
 */
#ifndef KILN_FSCK_H
#define KILN_FSCK_H

#include <kiln/image.h>

#ifdef __cplusplus
extern "C" {
#endif

enum kiln_fsck_flags {
	KILN_FSCK_METADATA_ONLY	= 1u << 0,	/* do not read file data */
	KILN_FSCK_NO_XATTRS	= 1u << 1,	/* do not list/read xattrs */
};

/* One problem found by kiln_fsck(); every pointer is valid during the call. */
struct kiln_fsck_problem {
	const char *path;	/* path inside the image ("/a/b"), or "<packed>" */
	kiln_nid_t nid;
	/*
	 * The reader's error when a call failed on this object (e.g.
	 * -KILN_ECORRUPT, -EOPNOTSUPP), 0 for an inconsistency fsck found
	 * itself (wrong nlink, bad "..", unsorted names, ...).
	 */
	int err;
	const char *what;	/* what is wrong, one line, no trailing newline */
};

/*
 * Called for each problem in walk order. Return 0 to go on, non-zero to
 * stop the walk (kiln_fsck() then still returns -KILN_ECORRUPT).
 */
typedef int (*kiln_fsck_problem_fn)(void *ctx,
				    const struct kiln_fsck_problem *p);

struct kiln_fsck_opts {
	size_t struct_size;		/* sizeof(struct kiln_fsck_opts) */
	unsigned int flags;		/* enum kiln_fsck_flags */
	kiln_fsck_problem_fn problem;	/* NULL: problems are only counted */
	void *ctx;
	unsigned int max_depth;		/* directory levels; 0 = 4096 */
};

struct kiln_fsck_report {
	uint64_t directories;
	uint64_t regular_files;		/* distinct inodes */
	uint64_t compressed_files;	/* regular files, compressed layouts */
	uint64_t symlinks;
	uint64_t char_devices, block_devices, fifos, sockets;
	uint64_t extra_links;		/* names beyond the first of an inode */
	uint64_t xattrs;		/* xattrs listed and read */
	uint64_t data_bytes;		/* sum of i_size of distinct regular files */
	uint64_t bytes_read;		/* file and symlink bytes actually read */
	uint64_t problems;
	double seconds;
	/* an image opened with dm-verity: blocks checked (tree included), bad */
	uint64_t verity_blocks;
	uint64_t verity_bad_blocks;
};

/*
 * Check @img. When @img was opened with a dm-verity root hash, every data
 * and tree block is checked against it too (after the walk, whose reads
 * name the files on bad blocks), which proves the data as well. @opts
 * may be NULL (defaults, problems only counted); @report may be NULL.
 * Returns 0 for a sound image, -KILN_ECORRUPT when problems
 * were found (each passed to opts->problem), or another negative errno
 * (-ENOMEM, -EIO) when the check itself could not go on. Walks with an
 * explicit stack; memory grows with the number of inodes.
 * Thread-safety: as the reader; @img may be used by other threads meanwhile.
 */
KILN_API int kiln_fsck(struct kiln_image *img,
		       const struct kiln_fsck_opts *opts,
		       struct kiln_fsck_report *report);

#ifdef __cplusplus
}
#endif
#endif
