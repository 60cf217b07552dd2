// SPDX-License-Identifier: MIT
/*
 * Opening an image: map it, check the superblock (checksum, features,
 * compression config records, long xattr prefixes) and the root inode.
 */
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/codec.h"
#include "reader/internal.h"
#include "reader/verity.h"
#include "source/cache.h"
#include "util/checked.h"
#include "util/endian.h"

/* CRC32C state after the magic and a zeroed checksum field (notes 1.3). */
#define SB_CRC_AFTER_FIELD	0x5045B54Au
#define SB_CHECKSUM_END		8u	/* CRC starts after magic + checksum */
/* a remote image's metadata run fetched in windows (set_hot()): at most */
#define KILN_HOT_MAX		(64ull << 20)
/* ... and a quarter of the image, unless this small */
#define KILN_HOT_SMALL		(4ull << 20)

static int check_checksum(struct kiln_image *img)
{
	uint32_t bs = img->sb.blksz;
	uint64_t len = bs > EROFS_SUPER_OFFSET ? bs - EROFS_SUPER_OFFSET : bs;
	const uint8_t *p = kiln_metabuf_get(img, EROFS_SUPER_OFFSET, len);
	uint32_t crc;

	if (!p)
		return KILN_CORRUPT(img, "superblock: checksummed block truncated");
	crc = crc32_iscsi((unsigned char *)(uintptr_t)(p + SB_CHECKSUM_END),
			  (int)(len - SB_CHECKSUM_END), SB_CRC_AFTER_FIELD);
	if (crc != img->sb.checksum)
		return KILN_CORRUPT(img,
				    "superblock: checksum %08x, computed %08x",
				    img->sb.checksum, crc);
	return 0;
}

/*
 * One config record's payload, checked as the kernel checks it at mount
 * (notes 1.5, 10.1): a record the kernel refuses makes the image unusable.
 */
static int check_compr_cfg(struct kiln_image *img, unsigned int alg,
			    const uint8_t *p, uint32_t len)
{
	static const uint32_t need[Z_EROFS_COMPRESSION_MAX] = {
		[Z_EROFS_COMPRESSION_LZ4] = sizeof(struct z_erofs_lz4_cfgs),
		[Z_EROFS_COMPRESSION_LZMA] = sizeof(struct z_erofs_lzma_cfgs),
		[Z_EROFS_COMPRESSION_DEFLATE] =
			sizeof(struct z_erofs_deflate_cfgs),
		[Z_EROFS_COMPRESSION_ZSTD] = sizeof(struct z_erofs_zstd_cfgs),
	};
	uint32_t v;

	if (len < need[alg])
		return KILN_CORRUPT(img, "compression config %u: %u bytes, at least %u expected",
				    alg, len, need[alg]);
	switch (alg) {
	case Z_EROFS_COMPRESSION_LZ4:
		v = kiln_get_le16(p + 2);	/* max_pclusterblks */
		if ((uint64_t)v << img->sb.blkszbits > Z_EROFS_PCLUSTER_MAX_SIZE)
			return KILN_CORRUPT(img, "lz4 config: pclusters of %u blocks, more than 1 MiB",
					    v);
		break;
	case Z_EROFS_COMPRESSION_LZMA:
		v = kiln_get_le32(p);		/* dict_size */
		if (kiln_get_le16(p + 4))
			return KILN_CORRUPT(img, "lzma config: unknown format %u",
					    kiln_get_le16(p + 4));
		if (v < (4u << 10) || v > (8u << 20))
			return KILN_CORRUPT(img, "lzma config: dictionary of %u bytes, not in 4 KiB..8 MiB",
					    v);
		break;
	case Z_EROFS_COMPRESSION_DEFLATE:
		if (p[0] > 15)
			return KILN_CORRUPT(img, "deflate config: window bits %u, more than 15",
					    p[0]);
		break;
	case Z_EROFS_COMPRESSION_ZSTD:
		if (p[0])
			return KILN_CORRUPT(img, "zstd config: unknown format %u",
					    p[0]);
		if (p[1] > KILN_ZSTD_WINDOW_LOG - 10)
			return KILN_CORRUPT(img, "zstd config: window log %u, more than %u",
					    p[1] + 10u, KILN_ZSTD_WINDOW_LOG);
		break;
	}
	return 0;
}

/* Bounds-check the config records after the superblock (notes 1.5). */
static int scan_compr_cfgs(struct kiln_image *img)
{
	uint64_t pos = EROFS_SUPER_OFFSET + img->sb.sb_size;

	if (!(img->sb.feature_incompat & EROFS_FEATURE_INCOMPAT_COMPR_CFGS))
		return 0;
	for (unsigned int alg = 0; alg < Z_EROFS_COMPRESSION_MAX; alg++) {
		const uint8_t *p;
		uint32_t len;
		int err;

		if (!(img->sb.compr_algs & (1u << alg)))
			continue;
		pos = kiln_round_up(pos, 4);
		p = kiln_metabuf_get(img, pos, 2);
		if (!p)
			return KILN_CORRUPT(img, "compression config %u: outside the image",
					    alg);
		len = kiln_get_le16(p);
		if (!len)
			len = 65536;
		p = kiln_metabuf_get(img, pos + 2, len);
		if (!p)
			return KILN_CORRUPT(img, "compression config %u: %u bytes past the image end",
					    alg, len);
		err = check_compr_cfg(img, alg, p, len);
		if (err)
			return err;
		img->zcfg_off[alg] = pos + 2;
		img->zcfg_len[alg] = len;
		pos += 2 + len;
	}
	return 0;
}

int kiln_image_compr_cfg(const struct kiln_image *img, unsigned int alg,
			 const void **payload, size_t *len)
{
	if (alg >= Z_EROFS_COMPRESSION_MAX || !img->zcfg_len[alg])
		return -ENOENT;
	*payload = img->map + img->zcfg_off[alg];
	*len = img->zcfg_len[alg];
	return 0;
}

/*
 * Where the long prefix table lives: with PLAIN_XATTR_PFX on the primary
 * device; otherwise in the metabox data if there is a metabox, else in
 * the packed inode if there is one, else on the primary device.
 */
struct prefix_src {
	struct kiln_image *img;
	struct kiln_file file;
	bool packed;
	bool metabox;
};

static int prefix_read(struct prefix_src *src, uint64_t pos, void *dst,
		       size_t len)
{
	const void *p;
	ssize_t n;

	if (!src->packed) {
		/* pos < 2^35: it never reaches bit 63 by itself */
		p = kiln_metabuf_get(src->img,
				     src->metabox ? pos | KILN_MBX_BIT : pos,
				     len);
		if (!p)
			return KILN_CORRUPT(src->img, "xattr prefix table: byte %llu outside the %s",
					    (unsigned long long)pos,
					    src->metabox ? "metabox" : "image");
		memcpy(dst, p, len);
		return 0;
	}
	n = kiln_file_pread(&src->file, dst, len, pos);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return KILN_CORRUPT(src->img, "xattr prefix table: past the end of packed inode %llu",
				    (unsigned long long)src->img->sb.packed_nid);
	return 0;
}

static int load_prefixes_from(struct kiln_image *img, struct prefix_src *src)
{
	unsigned int count = img->sb.xattr_prefix_count;
	uint64_t pos = (uint64_t)img->sb.xattr_prefix_start * 4;
	char *blob;

	img->xprefixes = calloc(count, sizeof(*img->xprefixes));
	img->xprefix_blob = blob = malloc((size_t)count * 256);
	if (!img->xprefixes || !blob)
		return -ENOMEM;
	for (unsigned int k = 0; k < count; k++) {
		uint8_t raw[2];
		uint16_t len;
		int err;

		pos = kiln_round_up(pos, 4);
		err = prefix_read(src, pos, raw, 2);
		if (err)
			return err;
		len = kiln_get_le16(raw);
		if (len < 1 || len > 256)
			return KILN_CORRUPT(img, "xattr prefix %u: length %u outside 1..256",
					    k, len);
		err = prefix_read(src, pos + 2, blob, len);
		if (err)
			return err;
		img->xprefixes[k].base_index = (uint8_t)blob[0];
		img->xprefixes[k].infix = blob + 1;
		img->xprefixes[k].infix_len = (uint8_t)(len - 1);
		blob += len;
		pos += 2 + (uint64_t)len;
	}
	return 0;
}

static int load_prefixes(struct kiln_image *img)
{
	struct prefix_src src = { .img = img };
	struct kiln_inode packed;
	int err;

	if (!img->sb.xattr_prefix_count)
		return 0;
	if (!(img->sb.feature_compat & EROFS_FEATURE_COMPAT_PLAIN_XATTR_PFX) &&
	    img->mbx) {
		src.metabox = true;
	} else if (!(img->sb.feature_compat &
		     EROFS_FEATURE_COMPAT_PLAIN_XATTR_PFX) &&
		   img->sb.packed_nid) {
		err = kiln_inode_load(img, img->sb.packed_nid, &packed);
		if (err)
			return err;
		err = kiln_file_init(&src.file, img, &packed);
		if (err)
			return err;
		src.packed = true;
	}
	err = load_prefixes_from(img, &src);
	if (src.packed)
		kiln_file_release(&src.file);
	return err;
}

static int check_root(struct kiln_image *img)
{
	struct kiln_inode root;
	int err;

	err = kiln_inode_load(img, img->sb.root_nid, &root);
	if (err)
		return err;
	if (!S_ISDIR(root.mode))
		return KILN_CORRUPT(img, "root nid %llu is not a directory",
				    (unsigned long long)img->sb.root_nid);
	if (img->sb.packed_nid) {
		struct kiln_inode packed;

		err = kiln_inode_load(img, img->sb.packed_nid, &packed);
		if (err)
			return err;
	}
	return 0;
}

static int open_devices(struct kiln_image *img,
			const struct kiln_image_opts *opts)
{
	size_t n = opts ? opts->struct_size : 0;

	if (n < offsetof(struct kiln_image_opts, nr_devices) +
		 sizeof(opts->nr_devices) || !opts->nr_devices)
		return kiln_devices_open(img, NULL, NULL, 0);
	if (!opts->devices && !opts->device_fds)
		return -EINVAL;
	return kiln_devices_open(img, opts->devices, opts->device_fds,
				 opts->nr_devices);
}

/*
 * A remote image laid out as kiln lays it out keeps its inodes, directory
 * blocks and shared xattrs in one run from meta_blkaddr to the end: tell
 * the lazy view, so a walk fetches that run in a few large requests. Not
 * where the run would hold file data too (mkfs.erofs's layout mixes
 * them): only when it is small in itself and beside the whole image.
 */
static void set_hot(struct kiln_image *img)
{
	uint64_t lo = (uint64_t)img->sb.meta_blkaddr << img->sb.blkszbits;
	uint64_t hi = img->size;

	if (img->sb.blocks && img->sb.blocks < img->size >> img->sb.blkszbits)
		hi = img->sb.blocks << img->sb.blkszbits;	/* no verity tree */
	if (lo >= hi || hi - lo > KILN_HOT_MAX ||
	    (hi - lo > KILN_HOT_SMALL && hi - lo > hi / 4))
		return;
	kiln_lazy_set_hot(img->lazy, lo, hi);
}

static int read_super(struct kiln_image *img,
		      const struct kiln_image_opts *opts)
{
	const char *why = NULL;
	size_t len;
	int err;

	if (img->size < EROFS_SUPER_OFFSET + EROFS_SB_BASE_SIZE) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "image of %llu bytes is too small to hold a superblock (not an EROFS image)",
			 (unsigned long long)img->size);
		return -KILN_ENOTEROFS;
	}
	len = (size_t)KILN_MIN(img->size - EROFS_SUPER_OFFSET,
			       4096u - EROFS_SUPER_OFFSET);
	if (img->lazy) {
		err = kiln_lazy_ensure(img->lazy, 0, EROFS_SUPER_OFFSET + len);
		if (err)
			return -EIO;
	}
	err = kiln_verity_check(img, 0, EROFS_SUPER_OFFSET + len, false);
	if (err)
		return err;
	err = kiln_decode_super(img->map + EROFS_SUPER_OFFSET, len, &img->sb,
				&why);
	if (err == -EOPNOTSUPP || err == -KILN_ENOTEROFS) {
		kiln_log(&img->logger, KILN_LOG_ERROR, "superblock: %s", why);
		return err;
	}
	if (err)
		return KILN_CORRUPT(img, "superblock: %s", why);
	if (img->sb.feature_compat & EROFS_FEATURE_COMPAT_SB_CHKSUM) {
		err = check_checksum(img);
		if (err)
			return err;
	}
	if (kiln_in_metabox(img->sb.root_nid) &&
	    !(img->sb.feature_incompat & EROFS_FEATURE_INCOMPAT_METABOX))
		return KILN_CORRUPT(img, "root nid %llx refers to a metabox the image lacks",
				    (unsigned long long)img->sb.root_nid);
	err = scan_compr_cfgs(img);
	if (!err)
		err = open_devices(img, opts);
	if (!err)
		err = kiln_mbx_open(img);
	if (!err)
		err = check_root(img);
	if (!err)
		err = load_prefixes(img);
	/* after the root's check: `kiln info` reads no more than that */
	if (!err && img->lazy)
		set_hot(img);
	return err;
}

/* Attach the source: its own mapping, or a lazy view of a remote one. */
static int image_attach(struct kiln_image *img, struct kiln_source *src,
			struct kiln_cache *cache, uint32_t unit)
{
	int err;

	img->src = src;
	img->size = src->size;
	img->map_len = src->size;
	if (src->map) {
		img->map = src->map;
		return 0;
	}
	err = kiln_lazy_open(&img->lazy, src, cache, unit);
	if (err)
		return err;
	img->map = kiln_lazy_map(img->lazy);
	return 0;
}

static struct kiln_image *image_new(const struct kiln_image_opts *opts)
{
	struct kiln_image *img = calloc(1, sizeof(*img));

	if (!img)
		return NULL;
	img->fd = -1;
	if (opts) {
		size_t n = opts->struct_size;

#define HAS(field) (n >= offsetof(struct kiln_image_opts, field) + \
		    sizeof(opts->field))
		if (HAS(log_ctx)) {
			img->logger.fn = opts->log;
			img->logger.ctx = opts->log_ctx;
		}
		if (HAS(cache))
			img->cache = opts->cache;
		if (HAS(cache_size))
			img->cache_size = opts->cache_size;
		if (HAS(flags))
			img->flags = opts->flags;
#undef HAS
	}
	return img;
}

static bool opts_have_verity(const struct kiln_image_opts *opts)
{
	return opts && opts->struct_size >=
		       offsetof(struct kiln_image_opts, verity_root) +
		       sizeof(opts->verity_root) && opts->verity_root;
}

/* Steps after the source is attached: verity, superblock, root. */
static int image_finish(struct kiln_image *img,
			const struct kiln_image_opts *opts)
{
	int err = 0;

	if (opts) {
		/* an older caller's struct is shorter: the rest stays zero */
		struct kiln_image_opts o = { 0 };

		memcpy(&o, opts, KILN_MIN(opts->struct_size, sizeof(o)));
		err = kiln_verity_open(img, &o);
	}
	if (!err)
		err = read_super(img, opts);
	return err;
}

static int image_open(struct kiln_image **out, int fd, bool own_fd,
		      const struct kiln_image_opts *opts)
{
	struct kiln_image *img = image_new(opts);
	struct kiln_source *src;
	int err;

	*out = NULL;
	if (!img) {
		if (own_fd)
			close(fd);
		return -ENOMEM;
	}
	if (own_fd)
		img->fd = fd;
	err = kiln_source_open_fd(&src, fd, &img->logger);
	if (!err)
		err = image_attach(img, src, NULL, 0);
	if (!err)
		err = image_finish(img, opts);
	if (err) {
		kiln_image_close(img);
		return err;
	}
	*out = img;
	return 0;
}

static const struct kiln_remote_opts *opts_remote(
	const struct kiln_image_opts *opts)
{
	if (!opts || opts->struct_size < offsetof(struct kiln_image_opts,
						  remote) +
					 sizeof(opts->remote))
		return NULL;
	return opts->remote;
}

/* An http(s):// image: probe it, then read it through a lazy view. */
static int image_open_url(struct kiln_image **out, const char *url,
			  const struct kiln_image_opts *opts)
{
	const struct kiln_remote_opts *ro = opts_remote(opts);
	size_t n = ro ? ro->struct_size : 0;
	struct kiln_image *img = image_new(opts);
	const char *dir = NULL;
	struct kiln_source *src = NULL;
	struct kiln_cache *cache = NULL;
	uint32_t unit = KILN_REMOTE_UNIT_MIN;
	unsigned int flags;
	uint64_t cap = 0;
	int err;

	*out = NULL;
	if (!img)
		return -ENOMEM;
	if (n >= offsetof(struct kiln_remote_opts, cache_dir) +
		 sizeof(ro->cache_dir))
		dir = ro->cache_dir;
	if (n >= offsetof(struct kiln_remote_opts, fetch_size) +
		 sizeof(ro->fetch_size) && ro->fetch_size) {
		if (ro->fetch_size < KILN_REMOTE_UNIT_MIN ||
		    (ro->fetch_size & (ro->fetch_size - 1)) ||
		    ro->fetch_size > KILN_LAZY_MAX_RUN) {
			kiln_log(&img->logger, KILN_LOG_ERROR,
				 "fetch size %u: not a power of two in 512 KiB..8 MiB",
				 ro->fetch_size);
			kiln_image_close(img);
			return -EINVAL;
		}
		unit = ro->fetch_size;
	}
	if (opts_have_verity(opts)) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "dm-verity checks of a remote image are not supported");
		kiln_image_close(img);
		return -EOPNOTSUPP;
	}
	if (n >= offsetof(struct kiln_remote_opts, cache_size) +
		 sizeof(ro->cache_size))
		cap = ro->cache_size;
	flags = n >= offsetof(struct kiln_remote_opts, flags) +
		     sizeof(ro->flags) ? ro->flags : 0;
	/* the first unit holds the superblock: one request opens the image */
	if (flags & KILN_REMOTE_OFFLINE)
		err = kiln_source_open_offline(&src, url, dir, unit,
					       &img->logger);
	else
		err = kiln_source_open_http(&src, url, ro, unit, &img->logger);
	/* a cache that cannot be used is logged, and the image read without */
	if (!err && !(flags & KILN_REMOTE_NO_CACHE) &&
	    kiln_cache_open(&cache, dir, url, src->identity, unit, cap,
			    &img->logger))
		cache = NULL;
	if (!err)
		err = image_attach(img, src, cache, unit);
	else
		img->src = NULL;
	if (!err)
		err = image_finish(img, opts);
	if (!err && (flags & KILN_REMOTE_PREFETCH_ALL) &&
	    !(flags & KILN_REMOTE_OFFLINE))
		err = kiln_prefetch_start(img, n >= offsetof(struct kiln_remote_opts,
							    prefetch_rate) +
						sizeof(ro->prefetch_rate) ?
					  ro->prefetch_rate : 0);
	if (err) {
		kiln_image_close(img);
		return err;
	}
	*out = img;
	return 0;
}

KILN_API int kiln_image_open(struct kiln_image **out, const char *path,
			     const struct kiln_image_opts *opts)
{
	int fd;

	if (kiln_is_url(path))
		return image_open_url(out, path, opts);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*out = NULL;
		return -errno;
	}
	return image_open(out, fd, true, opts);
}

KILN_API int kiln_image_open_fd(struct kiln_image **out, int fd,
				const struct kiln_image_opts *opts)
{
	return image_open(out, fd, false, opts);
}

KILN_API void kiln_image_remote_stats(const struct kiln_image *img,
				      struct kiln_remote_stats *st)
{
	const struct kiln_source_counters *c = &img->src->count;

	memset(st, 0, sizeof(*st));
	if (!img->lazy)
		return;
	st->bytes_fetched = atomic_load(&c->bytes_fetched);
	st->requests = atomic_load(&c->requests);
	st->retries = atomic_load(&c->retries);
	st->hits = atomic_load(&c->hits);
	st->misses = atomic_load(&c->misses);
	st->failures = atomic_load(&c->failures);
}

KILN_API void kiln_image_cancel(struct kiln_image *img)
{
	if (img && img->src)
		atomic_store(&img->src->cancelled, true);
}

KILN_API void kiln_image_close(struct kiln_image *img)
{
	if (!img)
		return;
	kiln_prefetch_stop(img);
	kiln_mbx_close(img);
	kiln_zimage_release(img);
	kiln_verity_close(img);
	kiln_devices_close(img);
	kiln_lazy_close(img->lazy);
	kiln_source_close(img->src);
	if (img->fd >= 0)
		close(img->fd);
	free(img->xprefixes);
	free(img->xprefix_blob);
	free(img);
}

KILN_API void kiln_image_get_info(const struct kiln_image *img,
				  struct kiln_image_info *info)
{
	const struct kiln_sb *sb = &img->sb;

	memset(info, 0, sizeof(*info));
	info->block_size = sb->blksz;
	info->blocks = sb->blocks;
	info->image_size = img->size;
	info->inodes = sb->inos;
	info->root_nid = sb->root_nid;
	info->packed_nid = sb->packed_nid;
	info->feature_compat = sb->feature_compat;
	info->feature_incompat = sb->feature_incompat;
	info->compr_algs = sb->compr_algs;
	memcpy(info->uuid, sb->uuid, sizeof(info->uuid));
	memcpy(info->volume_name, sb->volume_name, sizeof(info->volume_name));
	info->epoch = sb->epoch;
	info->build_time = (int64_t)((uint64_t)sb->epoch + sb->build_time);
	info->fixed_nsec = sb->fixed_nsec;
	info->sb_checksum = sb->checksum;
	info->meta_blkaddr = sb->meta_blkaddr;
	info->xattr_blkaddr = sb->xattr_blkaddr;
	info->metabox_nid = sb->metabox_nid;
	info->extra_devices = sb->extra_devices;
}

KILN_API kiln_nid_t kiln_image_root(const struct kiln_image *img)
{
	return img->sb.root_nid;
}
