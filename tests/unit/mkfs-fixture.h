/* SPDX-License-Identifier: MIT */
/*
 * Test fixture: a scratch directory, trees built with shell commands,
 * images made from them by the system's mkfs.erofs, and byte patches that
 * turn a good image into a hostile one.
 */
#ifndef KILN_TESTS_MKFS_FIXTURE_H
#define KILN_TESTS_MKFS_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fixture {
	char dir[64];		/* scratch directory, removed by fixture_done */
	char path[512];		/* scratch buffer for fixture_path() */
};

/* A fresh scratch directory; false (with a TAP note) when unusable. */
static inline bool fixture_init(struct fixture *fx)
{
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/kiln-test-XXXXXX");
	if (!mkdtemp(fx->dir)) {
		printf("# mkdtemp failed\n");
		return false;
	}
	return true;
}

static inline void fixture_done(struct fixture *fx)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s'; rm -rf '%s'",
		 fx->dir, fx->dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", fx->dir);
}

/* "<scratch>/<rel>", valid until the next call. */
static inline const char *fixture_path(struct fixture *fx, const char *rel)
{
	snprintf(fx->path, sizeof(fx->path), "%s/%s", fx->dir, rel);
	return fx->path;
}

/* Run @script with the scratch directory as working directory. */
static inline bool fixture_sh(struct fixture *fx, const char *script)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd), "cd '%s' && { %s ; }", fx->dir, script);
	return system(cmd) == 0;
}

static inline bool have_mkfs_erofs(void)
{
	return system("command -v mkfs.erofs >/dev/null 2>&1") == 0;
}

/* mkfs.erofs <scratch>/<image> <scratch>/<tree>, quietly. */
static inline bool fixture_mkfs(struct fixture *fx, const char *tree,
				const char *image)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "mkfs.erofs --quiet '%s' '%s' >/dev/null",
		 image, tree);
	return fixture_sh(fx, cmd);
}

/*
 * Replace the single occurrence of the @len bytes @old in image @image by
 * @new and clear the superblock checksum feature so the change is not
 * caught there. False if @old is missing or not unique.
 */
static inline bool fixture_patch_bytes(struct fixture *fx, const char *image,
				       const void *old, const void *new_,
				       size_t len)
{
	size_t size, hits = 0, at = 0;
	bool ok = false;
	char *buf;
	FILE *f;

	f = fopen(fixture_path(fx, image), "r+b");
	if (!f)
		return false;
	fseek(f, 0, SEEK_END);
	size = (size_t)ftell(f);
	buf = malloc(size);
	rewind(f);
	if (!buf || fread(buf, 1, size, f) != size)
		goto out;
	for (size_t i = 0; i + len <= size; i++) {
		if (!memcmp(buf + i, old, len)) {
			hits++;
			at = i;
		}
	}
	if (hits != 1 || size < 1033)
		goto out;
	memcpy(buf + at, new_, len);
	buf[1032] &= ~1;	/* feature_compat: SB_CHKSUM off */
	rewind(f);
	ok = fwrite(buf, 1, size, f) == size;
out:
	free(buf);
	ok = fclose(f) == 0 && ok;
	return ok;
}

/* fixture_patch_bytes() for NUL-free strings of the same length. */
static inline bool fixture_patch(struct fixture *fx, const char *image,
				 const char *old, const char *new_)
{
	return fixture_patch_bytes(fx, image, old, new_, strlen(old));
}

/* Write @len bytes of @data at byte @off of @image (checksum bit off). */
static inline bool fixture_poke(struct fixture *fx, const char *image,
				uint64_t off, const void *data, size_t len)
{
	unsigned char compat = 0;
	FILE *f = fopen(fixture_path(fx, image), "r+b");
	bool ok;

	if (!f)
		return false;
	ok = fseek(f, 1032, SEEK_SET) == 0 && fread(&compat, 1, 1, f) == 1;
	compat &= (unsigned char)~1u;
	ok = ok && fseek(f, 1032, SEEK_SET) == 0 &&
	     fwrite(&compat, 1, 1, f) == 1;
	ok = ok && fseek(f, (long)off, SEEK_SET) == 0 &&
	     fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok;
}

#endif
