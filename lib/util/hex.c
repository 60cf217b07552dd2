// SPDX-License-Identifier: MIT
/* Hex strings <-> bytes, for root hashes and salts given on command lines. */
#include <errno.h>
#include <string.h>

#include <kiln/verity.h>

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

KILN_API ssize_t kiln_hex_decode(const char *hex, uint8_t *dst, size_t cap)
{
	size_t len = strlen(hex);

	if (len % 2)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (hex_digit(hex[i]) < 0)
			return -EINVAL;
	if (len / 2 > cap)
		return -ERANGE;
	for (size_t i = 0; i < len / 2; i++)
		dst[i] = (uint8_t)(hex_digit(hex[2 * i]) << 4 |
				   hex_digit(hex[2 * i + 1]));
	return (ssize_t)(len / 2);
}

KILN_API void kiln_hex_encode(const uint8_t *src, size_t len, char *dst)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		dst[2 * i] = digits[src[i] >> 4];
		dst[2 * i + 1] = digits[src[i] & 15];
	}
	dst[2 * len] = '\0';
}
