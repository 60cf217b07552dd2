// SPDX-License-Identifier: MIT
/*
 * Fuzz target: extent lookup (and decoding) of a compressed inode whose
 * map header and index come from the input. Layout of the input:
 *   [0]    bit 0: COMPRESSED_FULL, else COMPACT; bit 1: cache off
 *   [1..4] i_size (le32)
 *   [5]    superblock algorithm bitmap (low 4 bits)
 *   [6]    superblock incompat feature bits
 *   [7..]  the map header and everything after it
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/erofs_fs.h"
#include "reader/internal.h"
#include "reader/zmap.h"
#include "util/endian.h"

#define MAP_SIZE	(256u * 1024)
#define INODE_OFF	4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t scratch[1u << 16];
	struct kiln_image img;
	struct kiln_file file;
	struct kiln_zmap zm;
	struct kiln_zext ext;
	uint8_t *map;
	uint64_t isize;

	if (size < 8)
		return 0;
	map = calloc(1, MAP_SIZE);
	if (!map)
		return 0;
	memcpy(map + INODE_OFF + 32, data + 7,
	       size - 7 < MAP_SIZE - INODE_OFF - 32 ? size - 7 :
						      MAP_SIZE - INODE_OFF - 32);
	memset(&img, 0, sizeof(img));
	img.fd = -1;
	img.map = map;
	img.size = MAP_SIZE;
	img.sb.blkszbits = 12;
	img.sb.blksz = 4096;
	img.sb.compr_algs = data[5] & 0xF;
	img.sb.feature_incompat = data[6];
	img.cache = data[0] & 2 ? KILN_CACHE_NONE : KILN_CACHE_DEFAULT;
	img.cache_size = 1u << 20;
	isize = kiln_get_le32(data + 1) & 0xFFFFFF;
	memset(&file, 0, sizeof(file));
	file.img = &img;
	file.inode.nid = 128;
	file.inode.inode_off = INODE_OFF;
	file.inode.core_size = 32;
	file.inode.datalayout = data[0] & 1 ? EROFS_INODE_COMPRESSED_FULL :
					      EROFS_INODE_COMPRESSED_COMPACT;
	file.inode.size = isize;

	/* 1. lookups at spread-out offsets, checking what comes back */
	if (isize && !kiln_zmap_init(&zm, &img, &file.inode)) {
		for (uint64_t i = 0; i < 64; i++) {
			uint64_t off = (isize - 1) * i / 63;

			if (kiln_zmap_lookup(&zm, off, &ext))
				continue;
			if (ext.la > off || off - ext.la >= ext.llen)
				abort();
		}
	}
	/* 2. reads through zread (no packed inode: fragments are corrupt) */
	for (uint64_t off = 0; off < isize && off < 4u << 20;
	     off += sizeof(scratch) - 4321) {
		size_t n = isize - off < sizeof(scratch) ? (size_t)(isize - off) :
							   sizeof(scratch);

		if (kiln_zread(&file, scratch, n, off) < 0)
			break;
	}
	kiln_zread_release(&file);
	kiln_zimage_release(&img);
	free(map);
	return 0;
}
