/* SPDX-License-Identifier: MIT */
/*
 * The fragment buffer (frag.c): the bytes that become the packed inode's
 * content, appended file tail by file tail, identical fragments stored
 * once. Used by the one writer that commits files, in commit order, so
 * offsets do not depend on the thread count. Only kiln_frag_read() may
 * be called from other threads, at the same time as the writer appends.
 */
#ifndef KILN_BUILDER_COMPRESS_FRAG_H
#define KILN_BUILDER_COMPRESS_FRAG_H

#include <stddef.h>
#include <stdint.h>

struct kiln_frag;

/*
 * Bytes in memory by default. The committed segments' bytes leave memory
 * (kiln_frag_release()), so this bounds the bytes not yet compressed:
 * the segment being filled and those in flight. Past it the oldest go to
 * the temporary file: on trees of small files the data pass runs ahead
 * of the packed inode's compression, and writing the bytes out and
 * reading them back costs system time (bench/README.md, "Measurements
 * behind the defaults").
 */
#define KILN_FRAG_MEM_DEFAULT	((size_t)48 << 20)

/*
 * An empty buffer that keeps up to @mem_limit bytes in memory (0:
 * KILN_FRAG_MEM_DEFAULT), in pieces of at most 1 MiB, and moves its oldest
 * pieces to an unlinked temporary file in @tmpdir (NULL: $TMPDIR or
 * /tmp) when more would not fit. Pieces released with
 * kiln_frag_release() leave memory without going there. 0 or -errno.
 */
int kiln_frag_new(size_t mem_limit, const char *tmpdir,
		   struct kiln_frag **fr);
void kiln_frag_free(struct kiln_frag *fr);

/*
 * Store @len bytes of @data (@len > 0) and give their offset in *@off.
 * Bytes equal to a fragment stored before (same hash, same bytes) are
 * not stored again: *@off is that fragment's offset. 0 or -errno; after
 * an error the buffer only repeats it.
 */
int kiln_frag_add(struct kiln_frag *fr, const void *data, size_t len,
		   uint64_t *off);

/*
 * The longest run of stored bytes that ends like @data (@len bytes): sets
 * *@same to its length, at most @len and 0 when shorter than
 * FRAG_TAIL_KEY (the run must end where a stored fragment ends), and
 * *@end to the offset just past it. Only the bytes of earlier
 * kiln_frag_add() calls count. 0 or -errno.
 */
#define FRAG_TAIL_KEY	4096u
int kiln_frag_find_tail(struct kiln_frag *fr, const void *data, size_t len,
			 uint64_t *end, size_t *same);
/* Count @len bytes as shared (a fragment found by kiln_frag_find_tail()). */
void kiln_frag_share(struct kiln_frag *fr, size_t len);

/* Bytes stored (the packed inode's size). */
uint64_t kiln_frag_size(const struct kiln_frag *fr);
/* Bytes given to kiln_frag_add() that dedupe did not have to store. */
uint64_t kiln_frag_saved(const struct kiln_frag *fr);
/* Whether some contents moved to the temporary file. */
int kiln_frag_spilled(const struct kiln_frag *fr);
/* Bytes written to the temporary file. */
uint64_t kiln_frag_spill_bytes(const struct kiln_frag *fr);

/*
 * Copy @len stored bytes at @off into @buf. 0, -EINVAL past the end, -EIO
 * for released bytes. Any thread, also while the writer adds fragments.
 */
int kiln_frag_read(struct kiln_frag *fr, void *buf, size_t len,
		    uint64_t off);

/*
 * Released bytes come back from where they went: fill @buf with the @len
 * stored bytes at @off (all released ones). 0 or -errno.
 */
typedef int (*kiln_frag_recover_fn)(void *ctx, void *buf, size_t len,
				     uint64_t off);
/*
 * Who gives released bytes back when dedupe compares against them (@fn
 * NULL: nobody; nothing may be released then). The writer's thread calls
 * @fn, from kiln_frag_add() and kiln_frag_find_tail().
 */
void kiln_frag_set_recover(struct kiln_frag *fr, kiln_frag_recover_fn fn,
			    void *ctx);
/*
 * Free the memory of the whole pieces below @end that are still in
 * memory: their bytes are to be had from the recover callback from now
 * on. Nothing happens without one. The writer only.
 */
void kiln_frag_release(struct kiln_frag *fr, uint64_t end);
/*
 * The reader of bytes [@from, @to) will not read them again: their whole
 * pieces are freed first when the writer needs room, and come back from
 * the recover callback (which may have to wait for them). Mark only
 * bytes the callback can give back. Any thread.
 */
void kiln_frag_consumed(struct kiln_frag *fr, uint64_t from, uint64_t to);

#endif
