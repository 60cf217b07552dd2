// SPDX-License-Identifier: MIT
/* Whole-range pread/pwrite (fileio.h). */
#include <errno.h>
#include <unistd.h>

#include "util/fileio.h"

kiln_fileio_fault_fn kiln_fileio_fault;

/* The test hook's say on one transfer: 0 (go on, maybe shorter) or -errno. */
static int fault(int fd, bool write, size_t *len, uint64_t off)
{
	size_t want = *len;
	int err;

	if (!kiln_fileio_fault)
		return 0;
	err = kiln_fileio_fault(fd, write, len, off);
	if (err)
		return -err;
	if (!*len || *len > want)
		*len = want;
	return 0;
}

ssize_t kiln_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		size_t want = len - done;
		int err = fault(fd, false, &want, off + done);
		ssize_t n;

		if (err)
			return err;
		n = pread(fd, (char *)buf + done, want, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int kiln_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		size_t want = len - done;
		int err = fault(fd, true, &want, off + done);
		ssize_t n;

		if (err)
			return err;
		n = pwrite(fd, (const char *)buf + done, want,
			   (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}
