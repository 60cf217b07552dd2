/* SPDX-License-Identifier: MIT */
/* The ordered job pipeline moved to lib/util; this name stays for its users. */
#ifndef KILN_BUILDER_JOBS_H
#define KILN_BUILDER_JOBS_H

#include "util/jobs.h"

#endif
