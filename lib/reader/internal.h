/* SPDX-License-Identifier: MIT */
/*
 * The reader's private view of an image: the mapped image, the decoded
 * superblock and decoded inodes. Shared by every lib/reader/ file.
 */
#ifndef KILN_READER_INTERNAL_H
#define KILN_READER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <kiln/image.h>

#include "format/decode.h"
#include "source/source.h"
#include "util/log.h"

struct kiln_image {
	struct kiln_logger logger;
	int fd;			/* owned when opened by path, else -1 */
	struct kiln_source *src;	/* where the bytes come from */
	/* a remote image's fetched bytes (NULL for a local one) */
	struct kiln_lazy *lazy;
	struct kiln_prefetch *prefetch;	/* prefetch.c, NULL without */
	/*
	 * The whole image, read-only: the source's own mapping, or the lazy
	 * view's, where only ranges kiln_metabuf_get() returned are present.
	 */
	const uint8_t *map;
	uint64_t size;		/* bytes the reader may use (verity: its data) */
	uint64_t map_len;	/* bytes mapped */
	struct kiln_verity *verity;	/* verity.c, NULL without */
	struct kiln_sb sb;	/* decoded, checked superblock */
	unsigned int flags;	/* enum kiln_image_flags */
	enum kiln_cache_mode cache;
	size_t cache_size;
	void *zctx;		/* compressed-read state (zread.c), may be NULL */
	/* COMPR_CFGS config payloads by algorithm id (len 0: none), image.c */
	uint64_t zcfg_off[Z_EROFS_COMPRESSION_MAX];
	uint32_t zcfg_len[Z_EROFS_COMPRESSION_MAX];
	/* long xattr name prefixes (sb.xattr_prefix_count of them), image.c */
	struct kiln_xattr_prefix *xprefixes;
	char *xprefix_blob;	/* owns the infixes when not in the map */
	/* METABOX: the metabox inode's decoded data (metabox.c), else NULL */
	struct kiln_mbx *mbx;
	/* INCOMPAT_DEVICE_TABLE: sb.extra_devices slots (device.c), else NULL */
	struct kiln_device *devs;
	bool have_devices;	/* devices were given at open */
};

/* One extra device: its slot and, when given, the mapped file. */
struct kiln_device {
	struct kiln_devslot slot;
	char *path;		/* as given (a copy), NULL for a descriptor */
	int fd;			/* owned when opened by path, else -1 */
	const uint8_t *map;	/* whole device, read-only (NULL: none, empty) */
	uint64_t size;		/* bytes */
	bool present;
};

/*
 * Read the device table and attach the devices given (@count paths, or
 * @fds when @paths is NULL: 0, or exactly sb.extra_devices), checking
 * each against its slot; kiln_devices_close() releases them.
 */
int kiln_devices_open(struct kiln_image *img, const char *const *paths,
		      const int *fds, unsigned int count);
void kiln_devices_close(struct kiln_image *img);

/*
 * Where @len data bytes at byte @off of device *@dev (0: primary) live:
 * rewrites *@dev and *@off to the device that holds them (0: the image's
 * own bytes, read with kiln_metabuf_get()), bounds-checked on that device.
 * Returns 0, -ENODEV (logged: "needs device N") when the device was not
 * given and the image does not hold it flattened, or KILN_CORRUPT.
 */
int kiln_dev_resolve(struct kiln_image *img, kiln_nid_t nid, uint16_t *dev,
		     uint64_t *off, uint64_t len);
/* @len bytes at @off of device @dev as resolved above, or NULL. */
const void *kiln_dev_get(const struct kiln_image *img, uint16_t dev,
			 uint64_t off, size_t len);

/* One long xattr name prefix: short prefix @base_index, then @infix. */
struct kiln_xattr_prefix {
	const char *infix;
	uint8_t infix_len;
	uint8_t base_index;
};

/*
 * Config record payload of compression algorithm @alg (enum erofs_compr_alg):
 * sets *@payload (into the map, valid until close) and *@len. Returns 0, or
 * -ENOENT when the image has no record for @alg (no COMPR_CFGS, or the
 * algorithm is not in the bitmap).
 */
int kiln_image_compr_cfg(const struct kiln_image *img, unsigned int alg,
			 const void **payload, size_t *len);

/*
 * --prefetch=all (prefetch.c): start the background fetch of @img (a
 * remote image) at @rate bytes a second (0: the default); stop it, which
 * kiln_image_close() does first.
 */
int kiln_prefetch_start(struct kiln_image *img, uint64_t rate);
void kiln_prefetch_stop(struct kiln_image *img);

/* Corruption exits: logs function, line and message; yields -KILN_ECORRUPT. */
#define KILN_CORRUPT(img, ...) \
	kiln_corrupt(&(img)->logger, __func__, __LINE__, __VA_ARGS__)

/*
 * Metadata has two address spaces. Offsets below 2^63 are image bytes;
 * offsets with bit 63 set are bytes of the metabox inode's decoded data
 * (METABOX images): an inode whose nid has bit 63 set sits at
 * KILN_MBX_BIT | (nid & mask) * 32, and every offset derived from it
 * (xattrs, inline tails, map headers, indexes, inline pclusters) is too.
 */
#define KILN_MBX_BIT	(1ull << 63)

static inline bool kiln_in_metabox(uint64_t off)
{
	return off >> 63;
}

/*
 * The one metadata cursor: a pointer to @len bytes at metadata offset @off
 * (either space), or NULL when [@off, @off + @len) is not inside the image
 * or the metabox, or the metabox bytes could not be decoded (the caller
 * turns that into KILN_CORRUPT naming its object; decoding failures are
 * logged first). The pointer is valid until kiln_image_close().
 * Thread-safe.
 */
const void *kiln_metabuf_get(const struct kiln_image *img, uint64_t off,
			     size_t len);

/*
 * kiln_metabuf_get() for bytes of file data: with verity, a block that
 * fails is remembered as one some file's data needed.
 */
const void *kiln_databuf_get(const struct kiln_image *img, uint64_t off,
			     size_t len);

/*
 * Whether [@off, @off + @len) lies inside its address space (the image or
 * the metabox), without reading or decoding anything.
 */
bool kiln_metabuf_range_ok(const struct kiln_image *img, uint64_t off,
			   uint64_t len);

/*
 * The metabox (metabox.c): set up img->mbx from the superblock's metabox
 * nid (checks the inode; decodes nothing yet), and free it. Decoded bytes
 * come through kiln_metabuf_get(), which calls kiln_mbx_get().
 */
int kiln_mbx_open(struct kiln_image *img);
void kiln_mbx_close(struct kiln_image *img);
/* Bytes of the metabox's decoded data (0 without a metabox). */
uint64_t kiln_mbx_size(const struct kiln_image *img);
/* @len decoded bytes at metabox byte @off (no KILN_MBX_BIT), or NULL. */
const void *kiln_mbx_get(const struct kiln_image *img, uint64_t off,
			 size_t len);

/* Byte offset of block @blk, with overflow checked: false when it overflows. */
bool kiln_blk_off(const struct kiln_image *img, uint64_t blk, uint64_t *off);

/* Load and check inode @nid (see struct kiln_inode in format/decode.h). */
int kiln_inode_load(struct kiln_image *img, kiln_nid_t nid,
		    struct kiln_inode *inode);

struct kiln_file {
	struct kiln_image *img;
	struct kiln_inode inode;
	void *zstate;		/* per-file compressed-read state, may be NULL */
	/* data.c: precomputed layout geometry */
	struct kiln_chunk_geo chunk;	/* CHUNK_BASED */
	const uint8_t *chunk_table;	/* CHUNK_BASED: entry 0, checked */
	uint64_t inline_start;	/* FLAT_INLINE: file offset of the inline part */
	uint64_t inline_off;	/* FLAT_INLINE: image offset of the inline part */
};

/*
 * Embedded file handles (dir.c, namei.c, xattr.c): set up @file for the
 * loaded inode @in, checking its layout geometry; pair with
 * kiln_file_release(). kiln_file_open() is the allocating wrapper.
 */
int kiln_file_init(struct kiln_file *file, struct kiln_image *img,
		   const struct kiln_inode *in);
void kiln_file_release(struct kiln_file *file);

/*
 * Lend a pointer to file bytes [@off, @off + @len) when they lie contiguous
 * in the map (flat and chunk layouts): *@ptr is set, or NULL when the range
 * is a hole, compressed or split; the caller then uses kiln_file_pread().
 * Returns 0 or a negative errno (range outside the file or the image).
 */
int kiln_file_direct(struct kiln_file *file, uint64_t off, size_t len,
		     const void **ptr);

/* One checked directory block (dir.c). */
struct kiln_dirblk {
	const uint8_t *data;	/* into the map, or the caller's scratch */
	size_t len;		/* block size, or less for the final block */
	unsigned int count;	/* dirents in the block */
	uint64_t blk;		/* block index within the directory */
};

/*
 * Read block @blk of directory @dir (an embedded file handle on a directory
 * inode) and check its dirent count. @scratch (block size bytes) is used
 * only when the block is not contiguous in the map.
 */
int kiln_dirblk_read(struct kiln_file *dir, uint64_t blk, uint8_t *scratch,
		     struct kiln_dirblk *b);

/* Load directory @nid into the embedded handle @dir (-ENOTDIR if not one). */
int kiln_dir_open(struct kiln_image *img, kiln_nid_t nid,
		  struct kiln_file *dir);

/* Entry @i of @b with its name, every bound checked. */
int kiln_dirblk_entry(struct kiln_file *dir, const struct kiln_dirblk *b,
		      unsigned int i, struct kiln_dirent_disk *de,
		      const uint8_t **name, unsigned int *name_len);

/* st_blocks of @in (512-byte units of image space used), for stat. */
int kiln_inode_blocks(struct kiln_image *img, const struct kiln_inode *in,
		      uint64_t *blocks);

/*
 * Compressed data (zread.c): read @len bytes at @off of a compressed inode
 * into @buf. Called by kiln_file_pread() for COMPRESSED_FULL/COMPACT inodes
 * after it has clamped the range to the file size.
 */
ssize_t kiln_zread(struct kiln_file *file, void *buf, size_t len,
		   uint64_t off);
void kiln_zread_release(struct kiln_file *file);
/* kiln_file_read_extent() for compressed inodes; @off < the file size. */
int kiln_zread_extent(struct kiln_file *file, void *buf, size_t cap,
		      uint64_t off, uint64_t *ext_off, size_t *ext_len);
/*
 * kiln_file_next_data() for compressed inodes: holes are the hole extents
 * of the 48-bit layout; everything else is data.
 */
int kiln_zread_next_data(struct kiln_file *file, uint64_t off,
			 uint64_t *data_off, uint64_t *data_end);
/* kiln_file_locate() for compressed inodes: raw (PLAIN) extents only. */
int kiln_zread_locate(struct kiln_file *file, uint64_t off, uint64_t max,
		      uint64_t *img_off, uint64_t *len);
/* Free the image's compressed-read state (img->zctx); kiln_image_close(). */
void kiln_zimage_release(struct kiln_image *img);

#endif
