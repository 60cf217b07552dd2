// SPDX-License-Identifier: MIT
/*
 * Fuzz target: open a byte string through its dm-verity tree and read it.
 * Input: a 32-byte root hash, one mode byte, then the image with its tree.
 * Mode bit 0: an empty salt given (a tree without superblock is read too);
 * bit 1: the hash offset is (mode >> 2) * 512 bytes instead of the default.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <kiln/image.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES	256
#define MAX_READ	(64u << 10)

struct walk {
	struct kiln_image *img;
	unsigned int entries;
	uint8_t buf[16384];
};

static int on_entry(void *ctx, const struct kiln_dirent *de)
{
	struct walk *w = ctx;
	struct kiln_file *f;

	if (++w->entries > MAX_ENTRIES)
		return 1;
	if (de->type != 8 /* DT_REG */ || kiln_file_open(w->img, de->nid, &f))
		return 0;
	for (uint64_t off = 0; off < kiln_file_size(f) && off < MAX_READ;
	     off += sizeof(w->buf))
		if (kiln_file_pread(f, w->buf, sizeof(w->buf), off) <= 0)
			break;
	kiln_file_close(f);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct walk w;
	static const uint8_t no_salt[1];
	struct kiln_image_opts o = { .struct_size = sizeof(o) };
	struct kiln_verity_info vi;
	uint64_t bad;
	int fd;

	if (size < KILN_VERITY_DIGEST_SIZE + 1)
		return 0;
	o.verity_root = data;
	if (data[KILN_VERITY_DIGEST_SIZE] & 1) {
		o.verity_salt = no_salt;
		o.verity_salt_len = 0;
	}
	if (data[KILN_VERITY_DIGEST_SIZE] & 2)
		o.verity_hash_offset = (uint64_t)(data[KILN_VERITY_DIGEST_SIZE] >> 2) *
				       512;
	data += KILN_VERITY_DIGEST_SIZE + 1;
	size -= KILN_VERITY_DIGEST_SIZE + 1;
	fd = memfd_create("fuzz-verity", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	memset(&w, 0, sizeof(w));
	if (kiln_image_open_fd(&w.img, fd, &o) == 0) {
		kiln_image_verity_info(w.img, &vi);
		kiln_dir_iterate(w.img, kiln_image_root(w.img), 0, on_entry, &w);
		kiln_image_verity_check(w.img, NULL, NULL, &bad);
		kiln_image_close(w.img);
	}
	close(fd);
	return 0;
}
