// SPDX-License-Identifier: MIT
/*
 * Exclude patterns (-x), the same for directory and tar sources:
 * "/usr/lib/lib?.a" is anchored: the whole path from the source root, '*'
 * and '?' never crossing a '/'. Any other pattern matches the path from
 * the root or the bare name, '*' crossing '/'.
 */
#include <fnmatch.h>

#include "builder/internal.h"

bool kiln_excluded(const struct kiln_build_opts *o, const char *rel,
		   const char *name)
{
	for (size_t i = 0; i < o->nr_excludes; i++) {
		const char *pat = o->excludes[i];

		if (pat[0] == '/') {
			if (!fnmatch(pat + 1, rel, FNM_PATHNAME))
				return true;
		} else if (!fnmatch(pat, rel, 0) || !fnmatch(pat, name, 0)) {
			return true;
		}
	}
	return false;
}
