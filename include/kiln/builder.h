/* SPDX-License-Identifier: MIT */
/*
 * Building EROFS images from a directory tree (or a tar stream).
 *
 * The image is written to a temporary file beside @image and renamed into
 * place only when complete: a failed or interrupted build leaves whatever
 * was at @image untouched. The same input and options give the same bytes.
 */
#ifndef KILN_BUILDER_H
#define KILN_BUILDER_H

#include <kiln/kiln.h>
#include <kiln/codec.h>
#include <kiln/verity.h>

#ifdef __cplusplus
extern "C" {
#endif

enum kiln_source_kind {
	KILN_SOURCE_DIR = 0,	/* @source is a directory */
	KILN_SOURCE_TAR = 1,	/* @source is a tar file, "-" = stdin */
	/*
	 * @source is an uncompressed tar file that stays beside the image:
	 * its members' data are not copied, the image's regular files point
	 * into the tar, its extra device 1 (mount -o device=TAR). 512-byte
	 * blocks, no compression; Linux 6.4+.
	 */
	KILN_SOURCE_TAR_INDEX = 2,
	/*
	 * @source is an OCI image layout directory, "DIR" or "DIR:REF"
	 * (REF: the org.opencontainers.image.ref.name of one of index.json's
	 * manifests; without it the layout must hold one image; an image
	 * index in between resolves to linux/amd64, or its only manifest).
	 * Every blob read is checked against its sha256 digest and size.
	 * Layers are tar, tar+gzip or tar+zstd. With opts.oci_layer 0 the
	 * layers are applied in order into the image of the final root
	 * filesystem (whiteouts and opaque directories delete what lower
	 * layers hold; none remains in the image); with oci_layer N, layer N
	 * alone is built as a KILN_SOURCE_TAR of it would be (opts.whiteouts
	 * AUTO: overlay).
	 */
	KILN_SOURCE_OCI = 3,
};

enum kiln_build_flags {
	KILN_BUILD_ALL_ROOT	= 1u << 0,	/* uid = gid = 0 everywhere */
	KILN_BUILD_FORCE_UID	= 1u << 1,	/* use opts.force_uid */
	KILN_BUILD_FORCE_GID	= 1u << 2,	/* use opts.force_gid */
	KILN_BUILD_FIXED_MTIME	= 1u << 3,	/* every mtime = opts.fixed_mtime */
	KILN_BUILD_CLAMP_MTIME	= 1u << 4,	/* mtimes > build_time clamped */
	KILN_BUILD_BUILD_TIME	= 1u << 5,	/* use opts.build_time */
	KILN_BUILD_UUID		= 1u << 6,	/* use opts.uuid */
	KILN_BUILD_RANDOM_UUID	= 1u << 7,	/* not content-derived */
	KILN_BUILD_NO_XATTRS	= 1u << 8,	/* drop all xattrs */
	KILN_BUILD_NO_XATTR_FILTER = 1u << 9,	/* no name bloom filter */
	KILN_BUILD_VERIFY	= 1u << 10,	/* re-read and compare before rename */
	KILN_BUILD_VERITY	= 1u << 11,	/* append a dm-verity hash tree */
};

/* How compressed files are mapped (docs/format.md, "Compressed files"). */
enum kiln_compress_layout {
	KILN_COMPRESS_LAYOUT_AUTO = 0,	/* classic: what every target mounts */
	KILN_COMPRESS_LAYOUT_CLASSIC,	/* fixed-output pclusters, lcluster indexes */
	KILN_COMPRESS_LAYOUT_EXTENTS,	/* fixed-input extents (48-bit, 6.15+) */
};

enum kiln_compress_flags {
	KILN_COMPRESS_ZTAILPACKING = 1u << 0,	/* inline the last pcluster */
	KILN_COMPRESS_FRAGMENTS	= 1u << 1,	/* tails into the packed inode */
	KILN_COMPRESS_DEDUPE	= 1u << 2,	/* share identical pclusters */
	KILN_COMPRESS_METABOX	= 1u << 3,	/* compress the inodes (6.17+) */
	/*
	 * Also share data that recurs at other offsets: extents (pclusters
	 * in the classic layout) end at both ends of content-defined chunks
	 * found in more than one file (a directory source is read twice;
	 * with DEDUPE).
	 */
	KILN_COMPRESS_DEDUPE_SHIFTED = 1u << 4,
};

/* Order of the small files in the packed inode (kiln_build_opts). */
enum kiln_packed_order {
	/*
	 * Depth first, like the rest of the data: in source trees, whose
	 * neighbours are alike, the smallest.
	 */
	KILN_PACKED_ORDER_PATH = 0,
	/*
	 * Similar files side by side, so they compress together: grouped
	 * by name suffix, then by a fingerprint of their first 4 KiB, then
	 * in depth-first order (a directory source is read twice). Pays
	 * where alike files are scattered (bench/README.md has figures).
	 */
	KILN_PACKED_ORDER_SIMILAR,
};

/*
 * What becomes of OCI / aufs whiteouts (kiln_build_opts.whiteouts): a
 * member ".wh.NAME" deletes NAME of the layers below, ".wh..wh..opq" makes
 * its directory opaque (hides what the layers below hold there), and the
 * other ".wh..wh.*" names are aufs bookkeeping.
 */
enum kiln_whiteouts {
	/* OVERLAY for a tar source, KEEP for a directory source */
	KILN_WHITEOUTS_AUTO = 0,
	/* stored as the names they are: plain files */
	KILN_WHITEOUTS_KEEP,
	/*
	 * Turned into what overlayfs reads: ".wh.NAME" becomes the character
	 * device 0:0 NAME (with the whiteout's mode bits, owner, mtime and
	 * xattrs), ".wh..wh..opq" the xattr trusted.overlay.opaque="y" on its
	 * directory (kept even with KILN_BUILD_NO_XATTRS), other ".wh..wh.*"
	 * are dropped (with what is below them); a directory holding such
	 * whiteouts gets an empty trusted.overlay.origin, so that overlayfs
	 * hides them from its listing. In a tar, a whiteout and a member of the same name
	 * follow extraction order, as mkfs.erofs --aufs: the later one wins.
	 * In a directory the real file wins. 0:0 character devices already
	 * in the source stay as they are.
	 */
	KILN_WHITEOUTS_OVERLAY,
	/*
	 * Dropped, for a flattened image: ".wh.*" names, 0:0 character
	 * devices and trusted.overlay.opaque xattrs.
	 */
	KILN_WHITEOUTS_STRIP,
};

/* A snapshot of a running build, handed to kiln_build_opts.progress. */
struct kiln_build_progress {
	size_t struct_size;		/* sizeof as the library knows it */
	uint64_t files_done;		/* regular files whose data is written */
	uint64_t files_total;		/* 0 while still unknown (scanning) */
	uint64_t bytes_done;		/* input bytes read and processed */
	uint64_t bytes_total;		/* input bytes to process; 0: unknown */
	uint64_t out_bytes;		/* image bytes written so far */
	double elapsed;			/* seconds since the build started */
	double rate;			/* recent input bytes per second */
	double eta;			/* seconds left; < 0: unknown */
};

struct kiln_build_opts {
	size_t struct_size;		/* sizeof(struct kiln_build_opts) */
	kiln_log_fn log;		/* NULL: messages are dropped */
	void *log_ctx;
	enum kiln_source_kind source_kind;
	unsigned int flags;		/* enum kiln_build_flags */
	unsigned int blkszbits;		/* 0 = 12 (4096-byte blocks) */
	const char *volume_label;	/* NULL or at most 15 bytes */
	uint32_t force_uid, force_gid;
	int64_t fixed_mtime;		/* seconds, KILN_BUILD_FIXED_MTIME */
	int64_t build_time;		/* seconds, KILN_BUILD_BUILD_TIME */
	uint8_t uuid[16];		/* KILN_BUILD_UUID */
	/*
	 * Exclude patterns (fnmatch(3)). One that starts with '/' is anchored
	 * at the source root: it must match the whole path ("/var/cache",
	 * "/usr/lib/lib?.a"), with FNM_PATHNAME ('*', '?' and [...] never match a
	 * '/'); directory sources only (-EINVAL with a tar source). Any other
	 * pattern, FNM_PATHNAME off, is matched against the path relative to
	 * the root without a leading '/' and against the bare name ("*.o",
	 * "cache"). An excluded directory is skipped whole.
	 */
	const char *const *excludes;
	size_t nr_excludes;
	unsigned int shared_xattr_min;	/* share xattrs used this often; 0 = 2 */
	unsigned int threads;		/* 0 = all cores */
	/*
	 * Progress callback, NULL for none: called at most about ten times a
	 * second while the build runs, and once more at its end. Calls never
	 * overlap, but may come from any of the build's threads; @p is valid
	 * only during the call.
	 */
	void (*progress)(void *ctx, const struct kiln_build_progress *p);
	void *progress_ctx;
	/*
	 * Compression of regular files. codec KILN_CODEC_NONE (the zeroed
	 * default) stores every file uncompressed; the rest is then ignored.
	 */
	struct kiln_compress_spec compress;
	/*
	 * Classic layout: largest pcluster (compressed bytes, a multiple of
	 * the block size up to 1 MiB; 0 = the codec's default where the
	 * target has big pclusters, else one block). Extent layout: input
	 * bytes per extent (a power of two, block size .. 1 MiB; 0 = 64 KiB).
	 */
	uint32_t pcluster_size;
	enum kiln_compress_layout compress_layout;
	unsigned int compress_flags;	/* enum kiln_compress_flags */
	/*
	 * A pcluster stays compressed only if that saves at least this many
	 * bytes of image; otherwise its data is stored raw. 0 = one block.
	 */
	uint32_t raw_margin;
	/*
	 * Bytes the build may use for file data in flight and codec
	 * workspaces together (0 = 64 MiB or 8 MiB per thread, whichever is
	 * more, plus workspaces up to 1 GiB). Whatever the value, one
	 * workspace and one item always fit, so a tiny limit only makes the
	 * build slower; the image is the same. Metadata (about 200 bytes per
	 * file plus its names) comes on top.
	 */
	uint64_t memory_limit;
	/*
	 * Compress hints file, or NULL: lines "PATTERN ALG[:LEVEL]
	 * [PCLUSTER_SIZE]" ('#' starts a comment line). PATTERN is a glob
	 * (fnmatch(3), '*' matches '/' too) on the path relative to the
	 * source root, or on the bare name when it has no '/'; the first
	 * matching line gives a file its codec ("none": stored as is),
	 * level and pcluster size; other files use @compress. Needs
	 * @compress; with it the image may use at most two on-disk
	 * algorithms (lz4 and lz4hc are one).
	 */
	const char *compress_hints;
	/*
	 * Input bytes per segment the workers compress the packed inode
	 * (fragments) in: a multiple of 1 MiB up to 1 GiB; 0 = 32 MiB.
	 * Each segment ends in a partly filled pcluster (a restart, and a
	 * half-empty block unless the image is 48-bit); each running one
	 * holds about twice its size in memory.
	 */
	uint64_t packed_segment_size;
	/*
	 * SELinux file contexts file (file_contexts(5), read by libselinux's
	 * selabel_open(SELABEL_CTX_FILE)), or NULL. Each inode's
	 * security.selinux xattr is then what selabel_lookup() gives for
	 * its path below @mount_point and its file type, stored as the
	 * context string with its trailing NUL (as setfiles stores it;
	 * mkfs.erofs leaves the NUL out, and the kernel reads both); a
	 * label from the source is dropped either way, so a "<<none>>" file
	 * (or one no line matches) is unlabelled. Labels are stored even
	 * with KILN_BUILD_NO_XATTRS (which drops the source's xattrs). A
	 * file with several names takes the label of the first one seen: in
	 * image order for a directory source, in archive order for tar. A
	 * file that libselinux cannot read or parse fails the build before
	 * anything is written. While the file loads, libselinux's
	 * process-wide log and validate callbacks (selinux_set_callback())
	 * are the library's; the caller's are set back before the scan.
	 */
	const char *file_contexts;
	/*
	 * Where the image will be mounted, for @file_contexts only (NULL =
	 * "/"): the file "etc/x" is looked up as "<mount_point>/etc/x", the
	 * root as "<mount_point>" itself. A missing leading '/' is added.
	 */
	const char *mount_point;
	/*
	 * The oldest Linux release the image must mount on without warnings,
	 * as a rank (major * 100 + minor: 601 = Linux 6.1; kiln_kernel_parse()
	 * in kiln/kernel.h reads "6.1" or "latest"). Options asking for a
	 * feature that kernel lacks are an error naming both. 0: the default
	 * target, Linux 6.1, raised to what the options ask for (the codec's
	 * first kernel, 6.10 for zstd; 6.15 for the extents layout ...).
	 * The target picks the defaults: compact lcluster indexes and
	 * one-block pclusters before 5.13, ztailpacking instead of
	 * fragments from 5.17 to 6.0, fragments from 6.1; never the 48-bit
	 * layout, metabox, DEFLATE or sub-page compressed blocks, which the
	 * kernel logs as EXPERIMENTAL, unless asked for.
	 */
	unsigned int kernel;
	/*
	 * Savers the caller turns off (enum kiln_compress_flags), so that a
	 * flag is on (in compress_flags), off (here) or left to the library
	 * (neither): when compressing, dedupe is on by default, fragments
	 * too where the target has them unless ztailpacking is asked for,
	 * and ztailpacking where it has ztailpacking but not fragments.
	 * A caller whose struct ends before this field gets no defaults.
	 */
	unsigned int compress_off;
	/*
	 * The order of the files that go whole into the packed inode (small
	 * files, with fragments). The inodes and every other file's data keep
	 * the depth-first order either way.
	 */
	enum kiln_packed_order packed_order;
	/*
	 * Classic layout with fragments: largest pcluster of the packed
	 * inode (compressed bytes, a multiple of the block size up to
	 * 1 MiB; 0 = 256 KiB; never less than pcluster_size). Bigger: a
	 * smaller image, and more to decode for each cold read of a small
	 * file.
	 */
	uint32_t packed_pcluster_size;
	/* OCI / aufs whiteouts in the source (enum kiln_whiteouts) */
	enum kiln_whiteouts whiteouts;
	/*
	 * Added to every file's owner and group (as mkfs.erofs
	 * --uid-offset/--gid-offset), after KILN_BUILD_ALL_ROOT and the
	 * forced ids: --all-root with an offset of 100000 makes every file
	 * 100000's. An id that would pass 2^32-1 fails the build, naming the
	 * file. ACL entries keep the ids they name.
	 */
	uint32_t uid_offset, gid_offset;
	/*
	 * With KILN_BUILD_VERITY: the salt of the dm-verity tree (at most
	 * KILN_VERITY_SALT_MAX bytes; length 0 is no salt), or NULL for one
	 * derived from the image's content (32 bytes, reproducible). The
	 * tree (docs/verity.md) follows the image at a block-aligned offset:
	 * veritysetup's superblock in one block, then the levels, SHA-256,
	 * hash format version 1, data and hash blocks of the image's size.
	 * A block device must hold the image and the tree.
	 */
	const uint8_t *verity_salt;
	size_t verity_salt_len;
	/*
	 * KILN_SOURCE_OCI: 0 flattens the image's layers; N (1-based, in the
	 * manifest's order) builds layer N alone, for an overlayfs stack.
	 */
	unsigned int oci_layer;
};

/*
 * Fill @o with the defaults kiln build uses (all fields zero but
 * struct_size): a program that sets the same options gets the same image.
 */
KILN_API void kiln_build_opts_init(struct kiln_build_opts *o);

struct kiln_build_stats {
	uint64_t inodes;		/* files of every type */
	uint64_t regular_files;
	uint64_t directories;
	uint64_t input_bytes;		/* regular file bytes read */
	uint64_t image_bytes;
	uint64_t shared_xattrs;
	double seconds;
	uint64_t peak_rss;		/* bytes: getrusage() ru_maxrss */
	/* oldest Linux that mounts the image ("6.15"), and the feature why */
	const char *min_kernel;		/* constant strings */
	const char *min_kernel_why;
	/* the target the options were resolved against (a rank: 610), why */
	unsigned int target;
	const char *target_why;		/* "Zstandard", "the default": constant */
	/* features the image uses that Linux logs as EXPERIMENTAL */
	uint32_t experimental;		/* 1u << enum kiln_kfeature */
	/*
	 * KILN_BUILD_VERITY: the tree (root hash, salt, hash offset = the
	 * image's bytes, data blocks = the image's blocks); else zeros.
	 * image_bytes does not count the tree; total_bytes does.
	 */
	struct kiln_verity_info verity;
	uint64_t total_bytes;
};

/*
 * Build the image at @image from @source. @opts may be NULL (defaults).
 * @stats may be NULL. Returns 0 or a negative errno; the reason (with the
 * source path) has been logged at KILN_LOG_ERROR.
 */
KILN_API int kiln_build(const char *source, const char *image,
			const struct kiln_build_opts *opts,
			struct kiln_build_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
