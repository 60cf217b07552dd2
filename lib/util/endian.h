/* SPDX-License-Identifier: MIT */
/* Little-endian loads and stores for on-disk fields. */
#ifndef KILN_UTIL_ENDIAN_H
#define KILN_UTIL_ENDIAN_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t kiln_le16(uint16_t v) { return le16toh(v); }
static inline uint32_t kiln_le32(uint32_t v) { return le32toh(v); }
static inline uint64_t kiln_le64(uint64_t v) { return le64toh(v); }
static inline uint16_t kiln_cpu_to_le16(uint16_t v) { return htole16(v); }
static inline uint32_t kiln_cpu_to_le32(uint32_t v) { return htole32(v); }
static inline uint64_t kiln_cpu_to_le64(uint64_t v) { return htole64(v); }

/* Unaligned little-endian loads from a byte buffer. */
static inline uint16_t kiln_get_le16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t kiln_get_le32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t kiln_get_le64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void kiln_put_le16(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void kiln_put_le32(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void kiln_put_le64(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

#endif
