// SPDX-License-Identifier: MIT
/*
 * Blobs of an OCI image layout (blobs/<alg>/<hex>), read forward once and
 * checked against their descriptor: the size when opened, the digest when
 * the last byte has been taken.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/oci.h"
#include "util/checked.h"
#include "util/fileio.h"

#define BLOB_DRAIN_CHUNK (1u << 20)	/* bytes per read of a blob's rest */

struct kiln_oci_blob {
	int fd;
	char *path;			/* "<dir>/blobs/<alg>/<hex>" */
	const char *digest;		/* the descriptor's, borrowed */
	uint64_t size;			/* the descriptor's */
	uint64_t taken;			/* bytes hashed so far */
	EVP_MD_CTX *md;
	const struct kiln_logger *lg;
	int err;			/* the failure, sticky; 1: checked */
	char why[4608];		/* "<path>: <reason>" */
};

bool kiln_oci_digest_ok(const char *digest)
{
	size_t hex;

	if (!strncmp(digest, "sha256:", 7))
		hex = 64;
	else if (!strncmp(digest, "sha512:", 7))
		hex = 128;
	else
		return false;
	digest += 7;
	if (strlen(digest) != hex)
		return false;
	for (size_t i = 0; i < hex; i++)
		if (!((digest[i] >= '0' && digest[i] <= '9') ||
		      (digest[i] >= 'a' && digest[i] <= 'f')))
			return false;
	return true;
}

static int blob_fail(struct kiln_oci_blob *bl, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int blob_fail(struct kiln_oci_blob *bl, int err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(bl->why, sizeof(bl->why), "%s: %s", bl->path, msg);
	bl->err = -err;
	return -err;
}

int kiln_oci_blob_open(struct kiln_oci_blob **blp, const char *dir,
		       const struct kiln_oci_desc *desc,
		       const struct kiln_logger *lg)
{
	struct kiln_oci_blob *bl = calloc(1, sizeof(*bl));
	const char *colon = strchr(desc->digest, ':');
	const EVP_MD *alg;
	struct stat st;
	int err = 0;

	*blp = NULL;
	if (!bl)
		return -ENOMEM;
	bl->fd = -1;
	bl->lg = lg;
	bl->digest = desc->digest;
	bl->size = desc->size;
	/* kiln_oci_desc digests were checked: "<alg>:<hex>" */
	if (asprintf(&bl->path, "%s/blobs/%.*s/%s", dir,
		     (int)(colon - desc->digest), desc->digest,
		     colon + 1) < 0) {
		bl->path = NULL;
		free(bl);
		return -ENOMEM;
	}
	alg = !strncmp(desc->digest, "sha512:", 7) ? EVP_sha512()
						   : EVP_sha256();
	bl->md = EVP_MD_CTX_new();
	if (!bl->md || !EVP_DigestInit_ex(bl->md, alg, NULL))
		err = -ENOMEM;
	if (!err) {
		bl->fd = open(bl->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (bl->fd < 0)
			err = blob_fail(bl, errno, "blob %s: %s", desc->digest,
					strerror(errno));
	}
	if (!err && fstat(bl->fd, &st))
		err = blob_fail(bl, errno, "%s", strerror(errno));
	if (!err && !S_ISREG(st.st_mode))
		err = blob_fail(bl, EUCLEAN, "not a regular file");
	if (!err && (uint64_t)st.st_size != desc->size)
		err = blob_fail(bl, EUCLEAN, "%llu bytes, but its descriptor "
				"says %llu: not the blob %s",
				(unsigned long long)st.st_size,
				(unsigned long long)desc->size, desc->digest);
	if (err) {
		if (err != -ENOMEM)
			kiln_log(lg, KILN_LOG_ERROR, "%s", bl->why);
		kiln_oci_blob_close(bl);
		return err;
	}
	*blp = bl;
	return 0;
}

/* The last byte is in: the digest must be the descriptor's. */
static int blob_check(struct kiln_oci_blob *bl)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	char got[2 * EVP_MAX_MD_SIZE + 1];
	unsigned int len = 0;
	const char *want = strchr(bl->digest, ':') + 1;

	if (!EVP_DigestFinal_ex(bl->md, md, &len))
		return blob_fail(bl, EIO, "digest failed");
	for (unsigned int i = 0; i < len; i++) {
		got[2 * i] = hex[md[i] >> 4];
		got[2 * i + 1] = hex[md[i] & 15];
	}
	got[2 * len] = '\0';
	if (strcmp(got, want))
		return blob_fail(bl, EUCLEAN, "digest mismatch: the blob's "
				 "content is %.*s:%s, its descriptor says %s",
				 (int)(want - 1 - bl->digest), bl->digest,
				 got, bl->digest);
	bl->err = 1;
	return 0;
}

ssize_t kiln_oci_blob_read(struct kiln_oci_blob *bl, void *buf, size_t len)
{
	ssize_t r;
	int err;

	if (bl->err)
		return bl->err > 0 ? 0 : bl->err;
	len = (size_t)KILN_MIN((uint64_t)len, bl->size - bl->taken);
	if (!len) {
		err = blob_check(bl);
		return err ? err : 0;
	}
	r = kiln_pread_full(bl->fd, buf, len, bl->taken);
	if (r < 0)
		return blob_fail(bl, (int)-r, "%s", strerror((int)-r));
	if (!r)
		return blob_fail(bl, EUCLEAN, "ends after %llu of its %llu "
				 "bytes (changed while read)",
				 (unsigned long long)bl->taken,
				 (unsigned long long)bl->size);
	if (!EVP_DigestUpdate(bl->md, buf, (size_t)r))
		return blob_fail(bl, EIO, "digest failed");
	bl->taken += (uint64_t)r;
	if (bl->taken == bl->size) {
		err = blob_check(bl);
		if (err)
			return err;
	}
	return r;
}

int kiln_oci_blob_finish(struct kiln_oci_blob *bl)
{
	uint8_t *buf;
	ssize_t r;

	if (bl->err < 0)
		return bl->err;	/* the reader that met it said why */
	buf = malloc(BLOB_DRAIN_CHUNK);
	r = buf ? 1 : -ENOMEM;

	while (r > 0)
		r = kiln_oci_blob_read(bl, buf, BLOB_DRAIN_CHUNK);
	free(buf);
	if (r < 0 && r != -ENOMEM)
		kiln_log(bl->lg, KILN_LOG_ERROR, "%s", bl->why);
	return (int)r;
}

const char *kiln_oci_blob_why(const struct kiln_oci_blob *bl)
{
	return bl->err < 0 && bl->why[0] ? bl->why : "read failed";
}

void kiln_oci_blob_close(struct kiln_oci_blob *bl)
{
	if (!bl)
		return;
	if (bl->fd >= 0)
		close(bl->fd);
	EVP_MD_CTX_free(bl->md);
	free(bl->path);
	free(bl);
}

int kiln_oci_blob_load(const char *dir, const struct kiln_oci_desc *desc,
		       size_t max, const struct kiln_logger *lg, char **bufp)
{
	struct kiln_oci_blob *bl;
	char *buf;
	ssize_t r;
	int err;

	*bufp = NULL;
	if (desc->size > max) {
		kiln_log(lg, KILN_LOG_ERROR, "%s: blob %s: %llu bytes, more "
			 "than the %zu read as JSON", dir, desc->digest,
			 (unsigned long long)desc->size, max);
		return -EFBIG;
	}
	err = kiln_oci_blob_open(&bl, dir, desc, lg);
	if (err)
		return err;
	buf = malloc((size_t)desc->size + 1);
	if (!buf) {
		kiln_oci_blob_close(bl);
		return -ENOMEM;
	}
	for (size_t got = 0; got < desc->size; got += (size_t)r) {
		r = kiln_oci_blob_read(bl, buf + got, (size_t)desc->size - got);
		if (r < 0)
			kiln_log(lg, KILN_LOG_ERROR, "%s",
				 kiln_oci_blob_why(bl));
		if (r <= 0)
			break;
	}
	buf[desc->size] = '\0';
	err = kiln_oci_blob_finish(bl);
	kiln_oci_blob_close(bl);
	if (err) {
		free(buf);
		return err;
	}
	*bufp = buf;
	return 0;
}
