/* SPDX-License-Identifier: MIT */
/* The oldest Linux release that mounts an image with given features. */
#ifndef KILN_FORMAT_KERNEL_H
#define KILN_FORMAT_KERNEL_H

#include <stdint.h>

struct kiln_kernel_need {
	const char *version;	/* "6.15": constant string */
	const char *why;	/* the feature that needs it */
	unsigned int rank;	/* major * 100 + minor */
};

/*
 * Fill @k from superblock values: feature bits, the algorithm bitmap
 * (meaningful with COMPR_CFGS) and the block size.
 */
void kiln_kernel_need(uint32_t compat, uint32_t incompat, uint16_t algs,
		      unsigned int blkszbits, struct kiln_kernel_need *k);

#endif
