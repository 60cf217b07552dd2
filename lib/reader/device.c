// SPDX-License-Identifier: MIT
/*
 * Extra devices (INCOMPAT_DEVICE_TABLE): the device table, the files given
 * for its slots (checked against them), and where a data address lands:
 * the primary image, an extra device, or a device that was not given.
 */
#include <fcntl.h>
#include <stddef.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader/internal.h"
#include "util/checked.h"
#include "util/endian.h"

/* Bytes of block @blk of the image's block size, or false on overflow. */
static bool blk_bytes(const struct kiln_image *img, uint64_t blk,
		      uint64_t *bytes)
{
	if (blk > UINT64_MAX >> img->sb.blkszbits)
		return false;
	*bytes = blk << img->sb.blkszbits;
	return true;
}

/* "the tag" or, for an untagged slot, its size: for messages. */
static const char *slot_name(const struct kiln_image *img,
			     const struct kiln_device *d, char *buf,
			     size_t cap)
{
	if (d->slot.tag[0])
		return d->slot.tag;
	snprintf(buf, cap, "untagged, %llu blocks of %u bytes",
		 (unsigned long long)d->slot.blocks, img->sb.blksz);
	return buf;
}

static int device_size(int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, size) < 0 ? -errno : 0;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* A tag of 32 lowercase hex digits: mkfs.erofs's UUID of a source image. */
static bool tag_is_uuid(const char *tag, uint8_t uuid[16])
{
	for (unsigned int i = 0; i < 32; i++) {
		char c = tag[i];
		unsigned int v;

		if (c >= '0' && c <= '9')
			v = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = (unsigned int)(c - 'a' + 10);
		else
			return false;
		if (i % 2 == 0)
			uuid[i / 2] = (uint8_t)(v << 4);
		else
			uuid[i / 2] |= (uint8_t)v;
	}
	return tag[32] == '\0';
}

/*
 * The file given for slot @n agrees with it: big enough for the slot's
 * blocks (the last block may be partial: a tar need not end on one), and,
 * when the tag is an image UUID and the file is an EROFS image, that image.
 */
static int device_check(struct kiln_image *img, unsigned int n,
			const struct kiln_device *d, const char *name)
{
	uint64_t need = 0;
	uint8_t uuid[16];
	char buf[96];

	if (!blk_bytes(img, d->slot.blocks, &need))
		return KILN_CORRUPT(img, "device %u: %llu blocks overflow", n,
				    (unsigned long long)d->slot.blocks);
	if (d->size + img->sb.blksz - 1 < need) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "device %u (%s): %s has %llu bytes, the device table says %llu: not this device",
			 n, slot_name(img, d, buf, sizeof(buf)), name,
			 (unsigned long long)d->size,
			 (unsigned long long)need);
		return -EINVAL;
	}
	if (tag_is_uuid(d->slot.tag, uuid) &&
	    d->size >= EROFS_SUPER_OFFSET + EROFS_SB_BASE_SIZE &&
	    kiln_get_le32(d->map + EROFS_SUPER_OFFSET) == EROFS_SUPER_MAGIC) {
		const uint8_t *other = d->map + EROFS_SUPER_OFFSET +
			offsetof(struct erofs_super_block, uuid);

		if (memcmp(other, uuid, sizeof(uuid))) {
			kiln_log(&img->logger, KILN_LOG_ERROR,
				 "device %u (%s): %s is another EROFS image (its UUID differs): not this device",
				 n, d->slot.tag, name);
			return -EINVAL;
		}
	}
	return 0;
}

static int device_attach(struct kiln_image *img, unsigned int n,
			 struct kiln_device *d, const char *path, int fd)
{
	char name[32];
	int err;

	if (path) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			kiln_log(&img->logger, KILN_LOG_ERROR,
				 "device %u: %s: cannot open: %s", n, path,
				 kiln_strerror(err));
			return err;
		}
		d->fd = fd;
		d->path = strdup(path);
		if (!d->path)
			return -ENOMEM;
	} else {
		snprintf(name, sizeof(name), "descriptor %d", fd);
	}
	err = device_size(fd, &d->size);
	if (err) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "device %u: %s: neither a regular file nor a block device",
			 n, path ? path : name);
		return err;
	}
	if (d->size > SIZE_MAX)
		return -EFBIG;
	if (d->size) {
		void *map = mmap(NULL, (size_t)d->size, PROT_READ, MAP_SHARED,
				 fd, 0);

		if (map == MAP_FAILED)
			return -errno;
		d->map = map;
	}
	d->present = true;
	return device_check(img, n, d, path ? path : name);
}

int kiln_devices_open(struct kiln_image *img, const char *const *paths,
		      const int *fds, unsigned int count)
{
	unsigned int nr = img->sb.extra_devices;
	uint64_t off = (uint64_t)img->sb.devt_slotoff * EROFS_DEVT_SLOT_SIZE;
	const uint8_t *table;

	if (!nr) {
		if (count) {
			kiln_log(&img->logger, KILN_LOG_ERROR,
				 "%u extra device%s given, the image has no device table",
				 count, count == 1 ? "" : "s");
			return -EINVAL;
		}
		return 0;
	}
	table = kiln_metabuf_get(img, off, (size_t)nr * EROFS_DEVT_SLOT_SIZE);
	if (!table)
		return KILN_CORRUPT(img, "device table (%u slots at %llu) outside the image",
				    nr, (unsigned long long)off);
	if (count && count != nr) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "%u extra device%s given, the image's device table lists %u",
			 count, count == 1 ? "" : "s", nr);
		return -EINVAL;
	}
	img->devs = calloc(nr, sizeof(*img->devs));
	if (!img->devs)
		return -ENOMEM;
	for (unsigned int i = 0; i < nr; i++) {
		struct kiln_device *d = &img->devs[i];

		d->fd = -1;
		kiln_decode_devslot(&img->sb, table + i * EROFS_DEVT_SLOT_SIZE,
				    &d->slot);
	}
	img->have_devices = count != 0;
	for (unsigned int i = 0; i < count; i++) {
		int err = device_attach(img, i + 1, &img->devs[i],
					paths ? paths[i] : NULL,
					paths ? -1 : fds[i]);

		if (err)
			return err;
	}
	return 0;
}

void kiln_devices_close(struct kiln_image *img)
{
	if (!img->devs)
		return;
	for (unsigned int i = 0; i < img->sb.extra_devices; i++) {
		struct kiln_device *d = &img->devs[i];

		if (d->map)
			munmap((void *)(uintptr_t)d->map, (size_t)d->size);
		if (d->fd >= 0)
			close(d->fd);
		free(d->path);
	}
	free(img->devs);
	img->devs = NULL;
}

/* The unified range of device @d in bytes: false when it has none. */
static bool uni_range(const struct kiln_image *img,
		      const struct kiln_device *d, uint64_t *start,
		      uint64_t *end)
{
	uint64_t len = 0;

	return d->slot.uniaddr && blk_bytes(img, d->slot.uniaddr, start) &&
	       blk_bytes(img, d->slot.blocks, &len) &&
	       !kiln_add_overflow(*start, len, end);
}

static int needs_device(struct kiln_image *img, kiln_nid_t nid,
			unsigned int n)
{
	char buf[96];

	kiln_log(&img->logger, KILN_LOG_ERROR,
		 "nid %llu: data on extra device %u: needs device %u (%s)",
		 (unsigned long long)nid, n, n,
		 slot_name(img, &img->devs[n - 1], buf, sizeof(buf)));
	return -ENODEV;
}

int kiln_dev_resolve(struct kiln_image *img, kiln_nid_t nid, uint16_t *dev,
		     uint64_t *off, uint64_t len)
{
	unsigned int nr = img->sb.extra_devices;
	const struct kiln_device *d;
	uint64_t start, end;

	if (*dev == 0) {
		/*
		 * A primary address inside an extra device's unified range
		 * goes to that device (the kernel's rule when devices are
		 * given); without them, it is read from the image itself,
		 * unless the image ends before it.
		 */
		for (unsigned int i = 0; i < nr; i++) {
			d = &img->devs[i];
			if (!uni_range(img, d, &start, &end) || *off < start ||
			    *off >= end)
				continue;
			if (img->have_devices) {
				*dev = (uint16_t)(i + 1);
				*off -= start;
				break;
			}
			if (!kiln_metabuf_range_ok(img, *off, len))
				return needs_device(img, nid, i + 1);
			return 0;
		}
		if (!*dev)
			return 0;
	} else {
		if (*dev > nr)
			return KILN_CORRUPT(img, "nid %llu: data on device %u, the table lists %u",
					    (unsigned long long)nid, *dev, nr);
		d = &img->devs[*dev - 1];
		if (!img->have_devices) {
			/* a flattened image holds every device at uniaddr */
			if (uni_range(img, d, &start, &end) &&
			    !kiln_add_overflow(start, *off, &start) &&
			    kiln_metabuf_range_ok(img, start, len) &&
			    start + len <= end) {
				*off = start;
				*dev = 0;
				return 0;
			}
			return needs_device(img, nid, *dev);
		}
	}
	d = &img->devs[*dev - 1];
	if (!kiln_range_ok(*off, len, d->size))
		return KILN_CORRUPT(img, "nid %llu: data at byte %llu (+%llu) beyond the end of device %u (%llu bytes)",
				    (unsigned long long)nid,
				    (unsigned long long)*off,
				    (unsigned long long)len, *dev,
				    (unsigned long long)d->size);
	return 0;
}

const void *kiln_dev_get(const struct kiln_image *img, uint16_t dev,
			 uint64_t off, size_t len)
{
	const struct kiln_device *d;

	if (!dev)
		return kiln_databuf_get(img, off, len);
	/* a dm-verity tree covers the image's own blocks, not a device's */
	if (img->verity) {
		kiln_log(&img->logger, KILN_LOG_ERROR,
			 "data on device %u: not covered by the image's dm-verity tree",
			 dev);
		return NULL;
	}
	if (dev > img->sb.extra_devices)
		return NULL;
	d = &img->devs[dev - 1];
	if (!d->present || !kiln_range_ok(off, len, d->size))
		return NULL;
	return d->map + off;
}

KILN_API int kiln_image_device(const struct kiln_image *img, unsigned int n,
			       struct kiln_device_info *info)
{
	const struct kiln_device *d;

	if (n < 1 || n > img->sb.extra_devices || !img->devs)
		return -EINVAL;
	d = &img->devs[n - 1];
	memset(info, 0, sizeof(*info));
	info->tag = d->slot.tag;
	info->blocks = d->slot.blocks;
	info->uniaddr = d->slot.uniaddr;
	info->size = d->size;
	info->path = d->path;
	info->present = d->present;
	return 0;
}
