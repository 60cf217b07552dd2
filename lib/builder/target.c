// SPDX-License-Identifier: MIT
/*
 * Options resolved against the target kernel: what the caller asked for is
 * checked against what that Linux mounts, and what it left open gets the
 * library's defaults (layout, savers, pcluster sizes), so every program
 * using libkiln makes the image kiln build makes.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "builder/internal.h"
#include "codec/codec.h"
#include "format/kernel.h"

/* The target when the caller names none, before the options raise it. */
#define DEFAULT_TARGET		601

/*
 * Default classic pcluster sizes (compressed bytes), where the target has
 * big pclusters: one-block pclusters make lz4 and lzma images clearly
 * bigger. lz4 and lz4hc take 64 KiB: LZ4's window, so a bigger pcluster
 * adds little but CPU, and it decodes in tens of microseconds. zstd takes
 * 128 KiB, squashfs's block and what mkfs.erofs users pick with -C: a
 * zstd pcluster is filled in about one pass whatever its size. deflate
 * takes 16 KiB: its fill searches over input lengths, and bigger ones
 * cost more time than they save. What was measured for each:
 * bench/README.md, "Measurements behind the defaults".
 */
#define LZ4_PCLUSTER_SIZE	(64u * 1024)
#define LZMA_PCLUSTER_SIZE	(64u * 1024)
#define DEFLATE_PCLUSTER_SIZE	(16u * 1024)
#define ZSTD_PCLUSTER_SIZE	(128u * 1024)

/* Fields appended to kiln_build_opts after its first release. */
#define OPT_LEN_HAS(len, field)						\
	((len) >= offsetof(struct kiln_build_opts, field) +		\
		  sizeof(((struct kiln_build_opts *)0)->field))

KILN_API void kiln_build_opts_init(struct kiln_build_opts *o)
{
	*o = (struct kiln_build_opts){ .struct_size = sizeof(*o) };
}

/* One feature an option asks for, with the option's spelling. */
struct ask {
	enum kiln_kfeature f;
	char what[192];
};

static enum kiln_kfeature codec_feature(enum kiln_codec_id codec)
{
	switch (codec) {
	case KILN_CODEC_LZMA:
		return KILN_KF_LZMA;
	case KILN_CODEC_DEFLATE:
		return KILN_KF_DEFLATE;
	case KILN_CODEC_ZSTD:
		return KILN_KF_ZSTD;
	default:
		return KILN_KF_EROFS;
	}
}

static uint32_t default_pcluster(enum kiln_codec_id codec)
{
	switch (codec) {
	case KILN_CODEC_LZ4:
	case KILN_CODEC_LZ4HC:
		return LZ4_PCLUSTER_SIZE;
	case KILN_CODEC_LZMA:
		return LZMA_PCLUSTER_SIZE;
	case KILN_CODEC_DEFLATE:
		return DEFLATE_PCLUSTER_SIZE;
	case KILN_CODEC_ZSTD:
		return ZSTD_PCLUSTER_SIZE;
	default:
		return 0;
	}
}

static unsigned int codec_alg(enum kiln_codec_id codec)
{
	const struct kiln_codec_ops *ops = kiln_codec_get(codec);

	return ops ? ops->erofs_alg : 0;
}

/* What the compress hints file asks for (at most 4 entries). */
static size_t list_hint_asks(const struct kiln_build *b, struct ask *a)
{
	const struct kiln_build_opts *o = &b->opts;
	uint32_t codecs, max_pcluster, algs = 1u << codec_alg(o->compress.codec);
	size_t n = 0;

	kiln_hints_needs(o->compress_hints, &codecs, &max_pcluster);
	for (unsigned int c = 0; c < 32; c++) {
		enum kiln_kfeature f = codec_feature((enum kiln_codec_id)c);

		if (!(codecs & (1u << c)))
			continue;
		algs |= 1u << codec_alg((enum kiln_codec_id)c);
		if (f == KILN_KF_EROFS || n == 3)
			continue;
		a[n].f = f;
		snprintf(a[n].what, sizeof(a[n].what), "%s in %s",
			 kiln_codec_name((enum kiln_codec_id)c),
			 o->compress_hints);
		n++;
	}
	if (algs & (algs - 1)) {
		a[n].f = KILN_KF_HEAD2;
		snprintf(a[n].what, sizeof(a[n].what), "%s with -z %s",
			 o->compress_hints, kiln_codec_name(o->compress.codec));
		n++;
	}
	if (max_pcluster > b->blksz &&
	    o->compress_layout != KILN_COMPRESS_LAYOUT_EXTENTS) {
		a[n].f = KILN_KF_BIG_PCLUSTER;
		snprintf(a[n].what, sizeof(a[n].what), "%s (pclusters of %u bytes)",
			 o->compress_hints, max_pcluster);
		n++;
	}
	return n;
}

/* The features the caller's explicit choices need; returns the count. */
static size_t list_asks(const struct kiln_build *b, struct ask *a)
{
	const struct kiln_build_opts *o = &b->opts;
	bool z = o->compress.codec != KILN_CODEC_NONE;
	size_t n = 0;

#define ASK(feat, ...)							\
	do {								\
		a[n].f = (feat);					\
		snprintf(a[n].what, sizeof(a[n].what), __VA_ARGS__);	\
		n++;							\
	} while (0)

	if (z && codec_feature(o->compress.codec) != KILN_KF_EROFS)
		ASK(codec_feature(o->compress.codec), "-z %s",
		    kiln_codec_name(o->compress.codec));
	if (o->source_kind == KILN_SOURCE_TAR_INDEX)
		ASK(KILN_KF_DEVICES_SUBPAGE, "--tar-index");
	else if (b->blkszbits < 12)
		ASK(z ? KILN_KF_SUBPAGE_COMPRESSED : KILN_KF_SUBPAGE,
		    "-b %u%s", b->blksz, z ? " with compression" : "");
	if (!z)
		return n;
	if (o->compress_layout == KILN_COMPRESS_LAYOUT_EXTENTS)
		ASK(KILN_KF_48BIT, "--layout extents");
	else if (o->pcluster_size > b->blksz)
		ASK(KILN_KF_BIG_PCLUSTER, "--pcluster-size %u", o->pcluster_size);
	if (o->compress_flags & KILN_COMPRESS_METABOX)
		ASK(KILN_KF_METABOX, "--metabox");
	if (o->compress_hints)
		n += list_hint_asks(b, a + n);
	if (o->compress_flags & KILN_COMPRESS_FRAGMENTS)
		ASK(KILN_KF_FRAGMENTS, "--fragments");
	if ((o->compress_flags & KILN_COMPRESS_ZTAILPACKING) &&
	    o->compress_layout != KILN_COMPRESS_LAYOUT_EXTENTS)
		ASK(KILN_KF_ZTAILPACKING, "--ztailpacking");
#undef ASK
	return n;
}

/* 1. the target: the caller's, or the default raised to what is asked */
static int choose_target(struct kiln_build *b)
{
	struct ask asks[16];
	size_t n = list_asks(b, asks);
	unsigned int target = b->opts.kernel;

	if (!target) {
		target = DEFAULT_TARGET;
		b->stats.target_why = "the default";
		for (size_t i = 0; i < n; i++) {
			const struct kiln_kernel_feature *k =
				kiln_kernel_feature(asks[i].f);

			if (k->rank > target) {
				target = k->rank;
				b->stats.target_why = k->name;
			}
		}
		b->opts.kernel = target;
		b->stats.target = target;
		return 0;
	}
	if (target < kiln_kernel_feature(KILN_KF_EROFS)->rank) {
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "target Linux %u.%u: EROFS needs Linux 5.4 or newer",
			 target / 100, target % 100);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct kiln_kernel_feature *k =
			kiln_kernel_feature(asks[i].f);

		if (kiln_kernel_allows(target, asks[i].f))
			continue;
		kiln_log(&b->lg, KILN_LOG_ERROR,
			 "%s needs Linux %s (%s); the target is %u.%u",
			 asks[i].what, k->version, k->name, target / 100,
			 target % 100);
		return -EINVAL;
	}
	b->stats.target = target;
	b->stats.target_why = "as asked";
	return 0;
}

/* 2. combinations no target fixes */
static int check_combinations(struct kiln_build *b)
{
	const struct kiln_build_opts *o = &b->opts;
	const char *why = NULL;

	if ((o->compress_flags & KILN_COMPRESS_METABOX) &&
	    o->compress.codec == KILN_CODEC_NONE)
		why = "--metabox needs a compression algorithm (-z)";
	else if (!(o->compress_flags & KILN_COMPRESS_DEDUPE_SHIFTED))
		return 0;
	else if (o->compress.codec == KILN_CODEC_NONE)
		why = "--dedupe-shifted needs a compression algorithm (-z)";
	else if (o->compress_off & KILN_COMPRESS_DEDUPE)
		why = "--dedupe-shifted and --no-dedupe contradict each other";
	else if (o->source_kind == KILN_SOURCE_TAR ||
		 o->source_kind == KILN_SOURCE_OCI)
		why = "--dedupe-shifted needs a directory SOURCE (a tar "
		      "stream is read only once)";
	if (!why)
		return 0;
	kiln_log(&b->lg, KILN_LOG_ERROR, "%s", why);
	return -EINVAL;
}

/*
 * 3. defaults for what the caller left open. Dedupe shares whole
 * pclusters and whole uncompressed files only (never a partial
 * reference, the 6.1 bit), so every target has it.
 */
static void apply_defaults(struct kiln_build *b)
{
	struct kiln_build_opts *o = &b->opts;
	unsigned int off = o->compress_off, *flags = &o->compress_flags;
	bool classic = o->compress_layout != KILN_COMPRESS_LAYOUT_EXTENTS;

	if (o->compress.codec == KILN_CODEC_NONE)
		return;
	if (!(off & KILN_COMPRESS_DEDUPE))
		*flags |= KILN_COMPRESS_DEDUPE;
	/*
	 * Copies at other offsets (a library inside its static archive)
	 * are shared too when the source can be read twice: only long
	 * shared runs are cut (shifted.c), so trees without such copies
	 * come out as they would without it.
	 */
	if (!(off & (KILN_COMPRESS_DEDUPE | KILN_COMPRESS_DEDUPE_SHIFTED)) &&
	    o->source_kind == KILN_SOURCE_DIR)
		*flags |= KILN_COMPRESS_DEDUPE_SHIFTED;
	/*
	 * Packing tails and small files together is what keeps trees of
	 * small files small; an explicit --ztailpacking asks for tails
	 * inline instead, so it alone turns the default off. Targets
	 * without fragments inline tails instead.
	 */
	if (!(off & KILN_COMPRESS_FRAGMENTS) &&
	    !(*flags & KILN_COMPRESS_ZTAILPACKING) &&
	    kiln_kernel_allows(o->kernel, KILN_KF_FRAGMENTS))
		*flags |= KILN_COMPRESS_FRAGMENTS;
	if (classic && !(off & KILN_COMPRESS_ZTAILPACKING) &&
	    !(*flags & KILN_COMPRESS_FRAGMENTS) &&
	    !kiln_kernel_allows(o->kernel, KILN_KF_FRAGMENTS) &&
	    kiln_kernel_allows(o->kernel, KILN_KF_ZTAILPACKING))
		*flags |= KILN_COMPRESS_ZTAILPACKING;
	if (classic && !o->pcluster_size &&
	    kiln_kernel_allows(o->kernel, KILN_KF_BIG_PCLUSTER))
		o->pcluster_size = default_pcluster(o->compress.codec);
}

int kiln_target_resolve(struct kiln_build *b, size_t opts_len)
{
	int err;

	/* no target or default turns the 48-bit layout on */
	if (b->opts.compress_layout == KILN_COMPRESS_LAYOUT_AUTO)
		b->opts.compress_layout = KILN_COMPRESS_LAYOUT_CLASSIC;
	if (!OPT_LEN_HAS(opts_len, compress_off))
		b->opts.compress_off = 0;
	err = choose_target(b);
	if (!err)
		err = check_combinations(b);
	if (err)
		return err;
	if (OPT_LEN_HAS(opts_len, compress_off))
		apply_defaults(b);
	b->opts.compress_flags &= ~b->opts.compress_off;
	return 0;
}
