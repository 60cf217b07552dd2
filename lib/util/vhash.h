/* SPDX-License-Identifier: MIT */
/*
 * The hash of a dm-verity block: SHA-256 over the salt, then the block
 * (hash format version 1), through OpenSSL's libcrypto.
 */
#ifndef KILN_UTIL_VHASH_H
#define KILN_UTIL_VHASH_H

#include <stddef.h>
#include <stdint.h>

#include <kiln/verity.h>

struct evp_md_ctx_st;

/* One hashing context: belongs to one thread at a time. */
struct kiln_vhash {
	struct evp_md_ctx_st *ctx;
	const uint8_t *salt;		/* borrowed, must outlive the context */
	size_t salt_len;
};

/* 0, or -ENOMEM. */
int kiln_vhash_init(struct kiln_vhash *h, const uint8_t *salt,
		    size_t salt_len);
void kiln_vhash_release(struct kiln_vhash *h);

/* @out = SHA-256(salt || @data[0 .. @len)). 0, or -EIO when libcrypto fails. */
int kiln_vhash_block(struct kiln_vhash *h, const void *data, size_t len,
		     uint8_t out[KILN_VERITY_DIGEST_SIZE]);

/* Plain SHA-256 of @len bytes of @data (no salt). 0 or -EIO. */
int kiln_sha256(const void *data, size_t len,
		uint8_t out[KILN_VERITY_DIGEST_SIZE]);

#endif
