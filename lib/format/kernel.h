/* SPDX-License-Identifier: MIT */
/* The feature -> first Linux release table (public: kiln/kernel.h). */
#ifndef KILN_FORMAT_KERNEL_H
#define KILN_FORMAT_KERNEL_H

#include <kiln/kernel.h>

#endif
