// SPDX-License-Identifier: MIT
/* Compressed file data: not yet supported. */
#include "reader/internal.h"

ssize_t kiln_zread(struct kiln_file *file, void *buf, size_t len,
		   uint64_t off)
{
	(void)buf;
	(void)len;
	(void)off;
	kiln_log(&file->img->logger, KILN_LOG_ERROR,
		 "nid %llu: compressed files are not supported yet",
		 (unsigned long long)file->inode.nid);
	return -EOPNOTSUPP;
}

void kiln_zread_release(struct kiln_file *file)
{
	(void)file;
}
