// SPDX-License-Identifier: MIT
/* SHA-256 of salt || block for dm-verity, on libcrypto's EVP interface. */
#include <errno.h>

#include <openssl/evp.h>

#include "util/vhash.h"

int kiln_vhash_init(struct kiln_vhash *h, const uint8_t *salt,
		    size_t salt_len)
{
	h->ctx = EVP_MD_CTX_new();
	h->salt = salt;
	h->salt_len = salt_len;
	return h->ctx ? 0 : -ENOMEM;
}

void kiln_vhash_release(struct kiln_vhash *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

int kiln_vhash_block(struct kiln_vhash *h, const void *data, size_t len,
		     uint8_t out[KILN_VERITY_DIGEST_SIZE])
{
	unsigned int n = 0;

	if (EVP_DigestInit_ex2(h->ctx, EVP_sha256(), NULL) != 1 ||
	    (h->salt_len &&
	     EVP_DigestUpdate(h->ctx, h->salt, h->salt_len) != 1) ||
	    EVP_DigestUpdate(h->ctx, data, len) != 1 ||
	    EVP_DigestFinal_ex(h->ctx, out, &n) != 1 ||
	    n != KILN_VERITY_DIGEST_SIZE)
		return -EIO;
	return 0;
}

int kiln_sha256(const void *data, size_t len,
		uint8_t out[KILN_VERITY_DIGEST_SIZE])
{
	unsigned int n = 0;

	if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 ||
	    n != KILN_VERITY_DIGEST_SIZE)
		return -EIO;
	return 0;
}
