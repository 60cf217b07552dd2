// SPDX-License-Identifier: MIT
/*
 * Tests for extra devices (lib/reader/device.c) and tar index images
 * (lib/builder/tar-index.c): a tar written here with libarchive is
 * indexed with kiln_build() and read back with the tar as device 1, or
 * without it, or with the wrong file; no root or kernel mount needed.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/builder.h>
#include <kiln/image.h>

#include "format/decode.h"
#include "tap.h"

static char tmp[64];
static char tar_path[128], img_path[128], other_path[128];

/* Member bodies: one under a record, one over several, one empty. */
static char big[70000];
static const char small[] = "hello, index";

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-devices.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(tar_path, sizeof(tar_path), "%s/layer.tar", tmp);
	snprintf(img_path, sizeof(img_path), "%s/index.erofs", tmp);
	snprintf(other_path, sizeof(other_path), "%s/other", tmp);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 511);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
}

static void add(struct archive *a, struct archive_entry *e, const char *name,
		unsigned int type, const char *data, size_t len)
{
	archive_entry_clear(e);
	archive_entry_set_pathname(e, name);
	archive_entry_set_mtime(e, 1600000000, 0);
	archive_entry_set_perm(e, 0644);
	if (type) {
		archive_entry_set_filetype(e, type);
	} else {
		archive_entry_set_hardlink(e, data);
		len = 0;
	}
	if (type == AE_IFREG)
		archive_entry_set_size(e, (la_int64_t)len);
	CHECK(archive_write_header(a, e) == ARCHIVE_OK);
	if (type == AE_IFREG && len)
		CHECK(archive_write_data(a, data, len) == (la_ssize_t)len);
}

/* The layer: a/small, a/big, empty, a hardlink to a/big. */
static void write_tar(const char *path, bool gzip)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	CHECK(archive_write_set_format_pax(a) == ARCHIVE_OK);
	if (gzip)
		CHECK(archive_write_add_filter_gzip(a) == ARCHIVE_OK);
	CHECK(archive_write_open_filename(a, path) == ARCHIVE_OK);
	add(a, e, "a", AE_IFDIR, NULL, 0);
	add(a, e, "a/small", AE_IFREG, small, strlen(small));
	add(a, e, "a/big", AE_IFREG, big, sizeof(big));
	add(a, e, "empty", AE_IFREG, NULL, 0);
	add(a, e, "link", 0, "a/big", 0);
	archive_entry_free(e);
	CHECK(archive_write_close(a) == ARCHIVE_OK);
	archive_write_free(a);
}

static int build_index(const char *tar)
{
	struct kiln_build_opts o = {
		.struct_size = sizeof(o),
		.source_kind = KILN_SOURCE_TAR_INDEX,
	};

	return kiln_build(tar, img_path, &o, NULL);
}

static int open_with(struct kiln_image **img, const char *image,
		     const char *const *devs, unsigned int n)
{
	struct kiln_image_opts o = {
		.struct_size = sizeof(o),
		.devices = devs,
		.nr_devices = n,
	};

	return kiln_image_open(img, image, &o);
}

/* pread of all of @path: its byte count, or the negative errno. */
static ssize_t read_all(struct kiln_image *img, const char *path, char *buf,
			size_t cap)
{
	struct kiln_file *f;
	kiln_nid_t nid;
	ssize_t n;
	int err = kiln_resolve(img, path, 0, &nid);

	if (!err)
		err = kiln_file_open(img, nid, &f);
	if (err)
		return err;
	n = kiln_file_pread(f, buf, cap, 0);
	kiln_file_close(f);
	return n;
}

static void copy_file(const char *from, const char *to, size_t max)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "head -c %zu '%s' > '%s'", max, from, to);
	CHECK(system(cmd) == 0);
}

TEST(index_image_reads_its_files_from_the_tar)
{
	const char *devs[] = { tar_path };
	static char buf[sizeof(big) + 16];
	struct kiln_device_info d;
	struct kiln_image_info info;
	struct kiln_image *img = NULL;
	struct kiln_stat st;
	kiln_nid_t nid;
	struct stat tst;

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	CHECK_EQ(open_with(&img, img_path, devs, 1), 0);
	if (!img) {
		teardown();
		return;
	}
	kiln_image_get_info(img, &info);
	CHECK_EQ(info.block_size, 512u);
	CHECK_EQ(info.extra_devices, 1u);
	CHECK_EQ(kiln_image_device(img, 1, &d), 0);
	CHECK(!strcmp(d.tag, "layer.tar"));
	CHECK_EQ(stat(tar_path, &tst), 0);
	CHECK_EQ(d.blocks, ((uint64_t)tst.st_size + 511) / 512);
	CHECK_EQ(d.uniaddr, info.blocks);
	CHECK_EQ(d.present, 1);
	CHECK_EQ(kiln_image_device(img, 2, &d), -EINVAL);
	CHECK_EQ(read_all(img, "/a/small", buf, sizeof(buf)),
		 (ssize_t)strlen(small));
	CHECK(!memcmp(buf, small, strlen(small)));
	CHECK_EQ(read_all(img, "/a/big", buf, sizeof(buf)),
		 (ssize_t)sizeof(big));
	CHECK(!memcmp(buf, big, sizeof(big)));
	CHECK_EQ(read_all(img, "/empty", buf, sizeof(buf)), 0);
	/* the hardlink is the same inode, two names */
	CHECK_EQ(kiln_resolve(img, "/link", 0, &nid), 0);
	CHECK_EQ(kiln_stat_nid(img, nid, &st), 0);
	CHECK_EQ(st.nlink, 2u);
	CHECK_EQ(st.datalayout, 4u);	/* chunk-based */
	/* the image holds metadata only: a few blocks for 70 KB of data */
	CHECK(info.image_size < 8192);
	kiln_image_close(img);
	teardown();
}

TEST(without_the_device_data_reads_fail_with_enodev_not_corrupt)
{
	struct kiln_image *img = NULL;
	char buf[64];

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	/* metadata needs no device: open, resolve and stat work */
	CHECK_EQ(kiln_image_open(&img, img_path, NULL), 0);
	if (img) {
		CHECK_EQ(read_all(img, "/a/small", buf, sizeof(buf)), -ENODEV);
		CHECK_EQ(read_all(img, "/empty", buf, sizeof(buf)), 0);
		kiln_image_close(img);
	}
	teardown();
}

TEST(wrong_devices_are_refused_at_open)
{
	const char *devs[] = { other_path, other_path };
	struct kiln_image *img = NULL;

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	/* a file shorter than the slot says: not this device */
	copy_file(tar_path, other_path, 1024);
	CHECK_EQ(open_with(&img, img_path, devs, 1), -EINVAL);
	CHECK(img == NULL);
	/* two devices for a table of one */
	CHECK_EQ(open_with(&img, img_path, devs, 2), -EINVAL);
	CHECK(img == NULL);
	/* a missing file */
	devs[0] = "/nonexistent/layer.tar";
	CHECK_EQ(open_with(&img, img_path, devs, 1), -ENOENT);
	teardown();
}

TEST(device_descriptors_work_like_paths)
{
	struct kiln_image_opts o = { .struct_size = sizeof(o) };
	struct kiln_image *img = NULL;
	char buf[64];
	int fd;

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	fd = open(tar_path, O_RDONLY);
	CHECK(fd >= 0);
	o.device_fds = &fd;
	o.nr_devices = 1;
	CHECK_EQ(kiln_image_open(&img, img_path, &o), 0);
	if (img) {
		CHECK_EQ(read_all(img, "/a/small", buf, sizeof(buf)),
			 (ssize_t)strlen(small));
		kiln_image_close(img);
	}
	close(fd);
	teardown();
}

TEST(image_and_tar_concatenated_read_without_devices)
{
	static char buf[sizeof(big)];
	struct kiln_image *img = NULL;
	char cmd[512];

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	snprintf(cmd, sizeof(cmd), "cat '%s' '%s' > '%s'", img_path, tar_path,
		 other_path);
	CHECK(system(cmd) == 0);
	CHECK_EQ(kiln_image_open(&img, other_path, NULL), 0);
	if (img) {
		CHECK_EQ(read_all(img, "/a/big", buf, sizeof(buf)),
			 (ssize_t)sizeof(big));
		CHECK(!memcmp(buf, big, sizeof(big)));
		kiln_image_close(img);
	}
	teardown();
}

TEST(compressed_tar_or_stream_cannot_be_indexed_and_leave_no_image)
{
	struct kiln_build_opts o = {
		.struct_size = sizeof(o),
		.source_kind = KILN_SOURCE_TAR_INDEX,
	};

	setup();
	write_tar(tar_path, true);
	CHECK_EQ(build_index(tar_path), -EOPNOTSUPP);
	CHECK(access(img_path, F_OK) != 0);
	CHECK_EQ(kiln_build("-", img_path, &o, NULL), -EINVAL);
	/* neither compression nor other block sizes */
	write_tar(tar_path, false);
	o.blkszbits = 12;
	CHECK_EQ(kiln_build(tar_path, img_path, &o, NULL), -EINVAL);
	o.blkszbits = 0;
	o.compress.codec = KILN_CODEC_LZ4;
	CHECK_EQ(kiln_build(tar_path, img_path, &o, NULL), -EINVAL);
	CHECK(access(img_path, F_OK) != 0);
	teardown();
}

static long find_bytes(const char *path, const void *pat, size_t len)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;

	if (f)
		fclose(f);
	for (size_t i = 0; i + len <= n; i++)
		if (!memcmp(buf + i, pat, len))
			return (long)i;
	return -1;
}

static void patch(const char *path, long off, const void *data, size_t len)
{
	FILE *f = fopen(path, "r+b");

	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ(fseek(f, off, SEEK_SET), 0);
	CHECK_EQ(fwrite(data, 1, len, f), len);
	fclose(f);
}

TEST(chunk_past_the_device_end_is_corrupt_not_a_crash)
{
	const char *devs[] = { tar_path };
	struct kiln_image *img = NULL;
	uint8_t idx[8] = { 0, 0, 1, 0 };
	long at, entry;
	char buf[64];
	uint32_t blk;

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	/* a/small's chunk index: device 1, the block of its data */
	at = find_bytes(tar_path, small, strlen(small));
	CHECK(at > 0 && at % 512 == 0);
	blk = (uint32_t)(at / 512);
	memcpy(idx + 4, &blk, 4);	/* little-endian host */
	entry = find_bytes(img_path, idx, sizeof(idx));
	CHECK(entry > 0);
	blk = 0x7ffffff0u;
	patch(img_path, entry + 4, &blk, 4);
	/* the superblock checksum covers only its block: still opens */
	CHECK_EQ(open_with(&img, img_path, devs, 1), 0);
	if (img) {
		CHECK_EQ(read_all(img, "/a/small", buf, sizeof(buf)),
			 -KILN_ECORRUPT);
		kiln_image_close(img);
	}
	teardown();
}

TEST(device_table_outside_the_image_is_corrupt)
{
	const char *devs[] = { tar_path };
	struct kiln_image *img = NULL;
	uint8_t compat[4] = { 0 }, v[2];

	setup();
	write_tar(tar_path, false);
	CHECK_EQ(build_index(tar_path), 0);
	/* clear the checksum bit so the damage reaches the table check */
	patch(img_path, 1024 + 8, compat, 4);
	v[0] = 0xff;
	v[1] = 0xff;
	patch(img_path, 1024 + 0x56, v, 2);	/* extra_devices 65535 */
	CHECK_EQ(kiln_image_open(&img, img_path, NULL), -KILN_ECORRUPT);
	CHECK(img == NULL);
	v[0] = 1;
	v[1] = 0;
	patch(img_path, 1024 + 0x56, v, 2);
	v[0] = 0xf0;				/* devt_slotoff far out */
	patch(img_path, 1024 + 0x58, v, 2);
	CHECK_EQ(open_with(&img, img_path, devs, 1), -KILN_ECORRUPT);
	CHECK(img == NULL);
	teardown();
}

TEST(device_slot_decodes_48bit_fields_only_with_the_48bit_feature)
{
	uint8_t raw[128] = { 'b', 'l', 'o', 'b' };
	struct kiln_sb sb = { .blkszbits = 12 };
	struct kiln_devslot d;

	raw[64] = 0x10;			/* blocks_lo = 16 */
	raw[68] = 0x02;			/* uniaddr_lo = 2 */
	raw[72] = 0x01;			/* blocks_hi = 1 */
	raw[74] = 0x03;			/* uniaddr_hi = 3 */
	kiln_decode_devslot(&sb, raw, &d);
	CHECK(!strcmp(d.tag, "blob"));
	CHECK_EQ(d.blocks, 16u);
	CHECK_EQ(d.uniaddr, 2u);
	sb.feature_incompat = EROFS_FEATURE_INCOMPAT_48BIT;
	kiln_decode_devslot(&sb, raw, &d);
	CHECK_EQ(d.blocks, (1ull << 32) | 16);
	CHECK_EQ(d.uniaddr, (3ull << 32) | 2);
	/* a tag filling all 64 bytes stays terminated */
	memset(raw, 'x', 64);
	kiln_decode_devslot(&sb, raw, &d);
	CHECK_EQ(strlen(d.tag), 64u);
}

TAP_MAIN(TAP_ENTRY(index_image_reads_its_files_from_the_tar),
	 TAP_ENTRY(without_the_device_data_reads_fail_with_enodev_not_corrupt),
	 TAP_ENTRY(wrong_devices_are_refused_at_open),
	 TAP_ENTRY(device_descriptors_work_like_paths),
	 TAP_ENTRY(image_and_tar_concatenated_read_without_devices),
	 TAP_ENTRY(compressed_tar_or_stream_cannot_be_indexed_and_leave_no_image),
	 TAP_ENTRY(chunk_past_the_device_end_is_corrupt_not_a_crash),
	 TAP_ENTRY(device_table_outside_the_image_is_corrupt),
	 TAP_ENTRY(device_slot_decodes_48bit_fields_only_with_the_48bit_feature))
