// SPDX-License-Identifier: MIT
/* kiln info: describe an image (superblock, features, what it holds). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kiln/fsck.h>
#include <kiln/image.h>
#include <kiln/kernel.h>

#include "cli.h"

enum {
	OPT_JSON = 256,
	OPT_WALK,
	OPT_NO_WALK,
	OPT_KERNELS,
};

static const struct cli_option info_options[] = {
	{ "json", OPT_JSON, NULL, "print one JSON object" },
	{ "walk", OPT_WALK, NULL, "count files by type (the default for a "
	  "local image, or with --verity)" },
	{ "no-walk", OPT_NO_WALK, NULL, "only read the superblock (the "
	  "default for a URL: nothing else is fetched)" },
	{ "kernels", OPT_KERNELS, NULL, "print the table of features and the "
					"first Linux that mounts each (no "
					"IMAGE)" },
	CLI_VERITY_OPTIONS,
	CLI_DEVICE_OPTION,
	CLI_REMOTE_OPTIONS,
};

static const struct cli_spec info_spec = {
	.cmd = "info",
	.usage = "[--json] [--no-walk] [--device PATH]... [--verity ROOT_HASH] IMAGE\n       kiln info --kernels",
	.summary = "Describe IMAGE: superblock, features, compression and the "
		   "files it holds.\n"
		   "With --verity, also the dm-verity tree's superblock "
		   "fields and whether the tree\nhashes to ROOT_HASH; when it "
		   "does, the walk checks every block against it\n(bad blocks "
		   "are counted: 'kiln fsck --verity' names their files). Exit "
		   "status 1\nwhen the root hash does not match or a block is "
		   "bad.",
	.opts = info_options,
	.nr_opts = sizeof(info_options) / sizeof(info_options[0]),
};

/* What --verity found: the tree's superblock fields and the root check. */
struct info_verity {
	int err;			/* probing the tree: 0 or -errno */
	bool root_ok;			/* it hashes to the root hash given */
	struct kiln_verity_info vi;	/* root: what the tree hashes to */
};

/* Feature bits by name; bits shared by two features list both names. */
struct feature_name {
	uint32_t bit;
	const char *name;
};

static const struct feature_name compat_names[] = {
	{ 0x01, "sb_csum" },
	{ 0x02, "mtime" },
	{ 0x04, "xattr_filter" },
	{ 0x08, "shared_ea_in_metabox" },
	{ 0x10, "plain_xattr_pfx" },
	{ 0x20, "ishare_xattrs" },
};

static const struct feature_name incompat_names[] = {
	{ 0x001, "0padding" },
	{ 0x002, "compr_cfgs" },
	{ 0x002, "big_pcluster" },
	{ 0x004, "chunked_file" },
	{ 0x008, "device_table" },
	{ 0x008, "compr_head2" },
	{ 0x010, "ztailpacking" },
	{ 0x020, "fragments" },
	{ 0x020, "dedupe" },
	{ 0x040, "xattr_prefixes" },
	{ 0x080, "48bit" },
	{ 0x100, "metabox" },
};

static const char *const algorithm_names[] = { "lz4", "lzma", "deflate",
					       "zstd" };

#define COMPAT_SB_CHKSUM	0x01u
#define INCOMPAT_ZERO_PADDING	0x001u
#define INCOMPAT_COMPR_CFGS	0x002u

/*
 * Call @fn for the name of each bit set in @bits ("unknown-0x..." for bits
 * without a name).
 */
static void for_each_feature(uint32_t bits, const struct feature_name *t,
			     size_t n, void (*fn)(void *, const char *),
			     void *ctx)
{
	uint32_t known = 0;

	for (size_t i = 0; i < n; i++) {
		known |= t[i].bit;
		if (bits & t[i].bit)
			fn(ctx, t[i].name);
	}
	for (unsigned int b = 0; b < 32; b++) {
		char tmp[32];

		if (!(bits & ~known & (1u << b)))
			continue;
		snprintf(tmp, sizeof(tmp), "unknown-0x%x", 1u << b);
		fn(ctx, tmp);
	}
}

/* Algorithms in use: bit n = on-disk algorithm n. */
static uint32_t algorithms(const struct kiln_image_info *in,
			   const struct kiln_fsck_report *rep, bool walked)
{
	if (in->feature_incompat & INCOMPAT_COMPR_CFGS)
		return in->compr_algs;
	/* without config records only LZ4 exists; is it used? */
	if ((in->feature_incompat & INCOMPAT_ZERO_PADDING) ||
	    (walked && rep->compressed_files))
		return 1;
	return 0;
}

/* The oldest Linux that mounts the image, from its superblock. */
static void image_need(const struct kiln_image_info *in,
		       struct kiln_kernel_need *k)
{
	uint16_t algs = (in->feature_incompat & INCOMPAT_COMPR_CFGS) ?
			in->compr_algs : 0;

	kiln_kernel_need(in->feature_compat, in->feature_incompat, algs,
			 (unsigned int)__builtin_ctz(in->block_size), k);
}

/* The feature table as a Markdown table (docs/kernels.md holds a copy). */
static void print_kernels(void)
{
	printf("| feature | on-disk marker | first Linux | older Linux "
	       "| EXPERIMENTAL |\n|---|---|---|---|---|\n");
	for (unsigned int f = 0; f < KILN_KF_COUNT; f++) {
		const struct kiln_kernel_feature *k = kiln_kernel_feature(f);

		printf("| %s | %s | %s | %s | %s |\n", k->name, k->marker,
		       k->version, (k->flags & KILN_KF_IGNORED_BEFORE) ?
		       "ignores it" : f ? "refuses the image" : "-",
		       k->experimental ? k->experimental : "no");
	}
}

static void format_uuid(const uint8_t u[16], char out[37])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u[i] >> 4];
		out[o++] = hex[u[i] & 15];
	}
	out[o] = '\0';
}

static void format_time(int64_t t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) ||
	    !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, cap, "@%lld", (long long)t);
}

static void print_word(void *ctx, const char *name)
{
	bool *first = ctx;

	printf("%s%s", *first ? "" : " ", name);
	*first = false;
}

static void print_features(const char *label, uint32_t bits,
			   const struct feature_name *t, size_t n)
{
	bool first = true;

	printf("%-22s", label);
	for_each_feature(bits, t, n, print_word, &first);
	printf("%s\n", first ? "(none)" : "");
}

/* The device table: one line per extra device, and the file given. */
static void print_devices_text(const struct kiln_image *img,
			       const struct kiln_image_info *in)
{
	for (unsigned int n = 1; n <= in->extra_devices; n++) {
		struct kiln_device_info d;
		char hs[32], tag[200];

		if (kiln_image_device(img, n, &d))
			continue;
		cli_escape(d.tag, tag, sizeof(tag));
		printf("%-22s%u: tag \"%s\", %llu blocks (%s), unified "
		       "address %llu", n == 1 ? "devices:" : "", n, tag,
		       (unsigned long long)d.blocks,
		       cli_human_size(d.blocks * in->block_size, hs,
				      sizeof(hs)),
		       (unsigned long long)d.uniaddr);
		if (d.present)
			printf(", given: %s", d.path ? d.path : "descriptor");
		else
			printf(", not given");
		printf("\n");
	}
}

static void print_verity_text(const struct info_verity *v,
			      const struct kiln_fsck_report *rep, bool walked)
{
	char hex[2 * KILN_VERITY_SALT_MAX + 1];

	if (v->err) {
		printf("%-22sno tree found (%s)\n", "verity:",
		       kiln_strerror(v->err));
		return;
	}
	kiln_hex_encode(v->vi.root, sizeof(v->vi.root), hex);
	if (v->root_ok)
		printf("%-22smatches\n", "verity root hash:");
	else
		printf("%-22sdoes not match: the tree hashes to %s\n",
		       "verity root hash:", hex);
	kiln_hex_encode(v->vi.salt, v->vi.salt_len, hex);
	printf("%-22s%s\n", "verity salt:", v->vi.salt_len ? hex : "(none)");
	printf("%-22s%llu\n", "verity hash offset:",
	       (unsigned long long)v->vi.hash_offset);
	printf("%-22s%llu of %u bytes\n", "verity data blocks:",
	       (unsigned long long)v->vi.data_blocks, v->vi.block_size);
	printf("%-22s%llu (superblock included), tree levels: %u\n",
	       "verity hash blocks:", (unsigned long long)v->vi.hash_blocks,
	       v->vi.levels);
	if (walked && v->root_ok)
		printf("%-22s%llu checked, %llu bad\n", "verity blocks:",
		       (unsigned long long)rep->verity_blocks,
		       (unsigned long long)rep->verity_bad_blocks);
}

static void print_text(const struct kiln_image *img, const char *image,
		       const struct kiln_image_info *in,
		       const struct kiln_fsck_report *rep, bool walked,
		       int walk_err, const struct info_verity *verity)
{
	char uuid[37], when[48], hs[32], label[80];
	uint32_t algs = algorithms(in, rep, walked);
	struct kiln_kernel_need need;
	bool first = true;

	format_uuid(in->uuid, uuid);
	format_time(in->build_time, when, sizeof(when));
	printf("%-22s%s\n", "image:", image);
	printf("%-22s%u\n", "block size:", in->block_size);
	printf("%-22s%llu\n", "blocks:", (unsigned long long)in->blocks);
	printf("%-22s%llu (%s)\n", "image size:",
	       (unsigned long long)in->image_size,
	       cli_human_size(in->image_size, hs, sizeof(hs)));
	printf("%-22s%llu\n", "inodes:", (unsigned long long)in->inodes);
	printf("%-22s%llu\n", "root nid:", (unsigned long long)in->root_nid);
	if (in->packed_nid)
		printf("%-22s%llu\n", "packed nid:",
		       (unsigned long long)in->packed_nid);
	if (in->metabox_nid)
		printf("%-22s%llu\n", "metabox nid:",
		       (unsigned long long)in->metabox_nid);
	printf("%-22s%s\n", "uuid:", uuid);
	printf("%-22s%s\n", "label:", in->volume_name[0] ?
	       cli_escape(in->volume_name, label, sizeof(label)) : "(none)");
	printf("%-22s%s\n", "build time:", when);
	printf("%-22s%lld\n", "epoch:", (long long)in->epoch);
	print_features("compat features:", in->feature_compat, compat_names,
		       sizeof(compat_names) / sizeof(compat_names[0]));
	print_features("incompat features:", in->feature_incompat,
		       incompat_names,
		       sizeof(incompat_names) / sizeof(incompat_names[0]));
	printf("%-22s", "compression:");
	for (unsigned int i = 0; i < 16; i++) {
		char tmp[24];

		if (!(algs & (1u << i)))
			continue;
		snprintf(tmp, sizeof(tmp), "algorithm-%u", i);
		print_word(&first, i < 4 ? algorithm_names[i] : tmp);
	}
	printf("%s\n", first ? "none" : "");
	image_need(in, &need);
	printf("%-22sLinux %s (%s)\n", "oldest kernel:", need.version,
	       need.why);
	first = true;
	for (unsigned int f = 0; f < KILN_KF_COUNT; f++) {
		const struct kiln_kernel_feature *k = kiln_kernel_feature(f);

		if ((need.features & (1u << f)) && k->experimental) {
			printf("%-22s%s\n", first ? "experimental:" : "",
			       k->name);
			first = false;
		}
	}
	if (in->feature_compat & COMPAT_SB_CHKSUM)
		printf("%-22scrc32c 0x%08x (verified)\n", "checksum:",
		       in->sb_checksum);
	else
		printf("%-22snone\n", "checksum:");
	print_devices_text(img, in);
	if (verity)
		print_verity_text(verity, rep, walked);
	if (!walked)
		return;
	if (walk_err == -KILN_ECORRUPT)
		printf("%-22s%llu problems found (run 'kiln fsck')\n", "walk:",
		       (unsigned long long)rep->problems);
	else if (walk_err)
		printf("%-22sincomplete: %s\n", "walk:",
		       kiln_strerror(walk_err));
	printf("%-22s%llu\n", "directories:",
	       (unsigned long long)rep->directories);
	printf("%-22s%llu (%llu compressed)\n", "regular files:",
	       (unsigned long long)rep->regular_files,
	       (unsigned long long)rep->compressed_files);
	printf("%-22s%llu\n", "symlinks:", (unsigned long long)rep->symlinks);
	printf("%-22s%llu chr, %llu blk, %llu fifo, %llu sock\n", "special:",
	       (unsigned long long)rep->char_devices,
	       (unsigned long long)rep->block_devices,
	       (unsigned long long)rep->fifos,
	       (unsigned long long)rep->sockets);
	printf("%-22s%llu\n", "extra hardlinks:",
	       (unsigned long long)rep->extra_links);
	printf("%-22s%llu (%s)\n", "file data:",
	       (unsigned long long)rep->data_bytes,
	       cli_human_size(rep->data_bytes, hs, sizeof(hs)));
}

/* Length of the valid UTF-8 sequence at @s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0)
		n = 2, cp = s[0] & 0x1F;
	else if ((s[0] & 0xF0) == 0xE0)
		n = 3, cp = s[0] & 0x0F;
	else if ((s[0] & 0xF8) == 0xF0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	/* no overlong forms, surrogates or values past U+10FFFF */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/*
 * A JSON string: valid UTF-8 is copied, control characters escaped, and a
 * byte that is not UTF-8 becomes \u00XX (its Latin-1 reading), so the
 * output always parses.
 */
static void json_str(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	putchar('"');
	while (*s) {
		size_t n = utf8_len(s);

		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if (*s < 0x20 || *s == 0x7f || n == 0)
			printf("\\u%04x", *s);
		else
			fwrite(s, 1, n, stdout);
		s += n ? n : 1;
	}
	putchar('"');
}

static void json_word(void *ctx, const char *name)
{
	bool *first = ctx;

	printf("%s", *first ? "" : ", ");
	json_str(name);
	*first = false;
}

static void print_devices_json(const struct kiln_image *img,
			       const struct kiln_image_info *in)
{
	printf(", \"devices\": [");
	for (unsigned int n = 1; n <= in->extra_devices; n++) {
		struct kiln_device_info d;

		if (kiln_image_device(img, n, &d))
			continue;
		printf("%s{\"id\": %u, \"tag\": ", n == 1 ? "" : ", ", n);
		json_str(d.tag);
		printf(", \"blocks\": %llu, \"uniaddr\": %llu, \"given\": ",
		       (unsigned long long)d.blocks,
		       (unsigned long long)d.uniaddr);
		if (d.present && d.path)
			json_str(d.path);
		else
			printf("%s", d.present ? "true" : "null");
		printf("}");
	}
	printf("]");
}

static void print_verity_json(const struct info_verity *v,
			      const struct kiln_fsck_report *rep, bool walked)
{
	char hex[2 * KILN_VERITY_SALT_MAX + 1];

	if (v->err) {
		printf(", \"verity\": {\"tree\": false, \"error\": ");
		json_str(kiln_strerror(v->err));
		printf("}");
		return;
	}
	kiln_hex_encode(v->vi.root, sizeof(v->vi.root), hex);
	printf(", \"verity\": {\"tree\": true, \"root_hash_matches\": %s"
	       ", \"tree_root_hash\": \"%s\"",
	       v->root_ok ? "true" : "false", hex);
	kiln_hex_encode(v->vi.salt, v->vi.salt_len, hex);
	printf(", \"salt\": \"%s\", \"hash_offset\": %llu"
	       ", \"data_blocks\": %llu, \"block_size\": %u"
	       ", \"hash_blocks\": %llu, \"levels\": %u",
	       hex, (unsigned long long)v->vi.hash_offset,
	       (unsigned long long)v->vi.data_blocks, v->vi.block_size,
	       (unsigned long long)v->vi.hash_blocks, v->vi.levels);
	if (walked && v->root_ok)
		printf(", \"blocks_checked\": %llu, \"bad_blocks\": %llu",
		       (unsigned long long)rep->verity_blocks,
		       (unsigned long long)rep->verity_bad_blocks);
	printf("}");
}

static void print_json(const struct kiln_image *img, const char *image,
		       const struct kiln_image_info *in,
		       const struct kiln_fsck_report *rep, bool walked,
		       int walk_err, const struct info_verity *verity)
{
	char uuid[37], when[48];
	uint32_t algs = algorithms(in, rep, walked);
	struct kiln_kernel_need need;
	bool first;

	format_uuid(in->uuid, uuid);
	format_time(in->build_time, when, sizeof(when));
	printf("{\"image\": ");
	json_str(image);
	printf(", \"block_size\": %u, \"blocks\": %llu, \"image_size\": %llu"
	       ", \"inodes\": %llu, \"root_nid\": %llu, \"packed_nid\": %llu"
	       ", \"metabox_nid\": %llu",
	       in->block_size, (unsigned long long)in->blocks,
	       (unsigned long long)in->image_size,
	       (unsigned long long)in->inodes,
	       (unsigned long long)in->root_nid,
	       (unsigned long long)in->packed_nid,
	       (unsigned long long)in->metabox_nid);
	printf(", \"uuid\": \"%s\", \"label\": ", uuid);
	json_str(in->volume_name);
	printf(", \"build_time\": \"%s\", \"build_time_unix\": %lld"
	       ", \"epoch\": %lld, \"fixed_nsec\": %u",
	       when, (long long)in->build_time, (long long)in->epoch,
	       in->fixed_nsec);
	printf(", \"feature_compat\": %u, \"feature_incompat\": %u",
	       in->feature_compat, in->feature_incompat);
	printf(", \"features_compat\": [");
	first = true;
	for_each_feature(in->feature_compat, compat_names,
			 sizeof(compat_names) / sizeof(compat_names[0]),
			 json_word, &first);
	printf("], \"features_incompat\": [");
	first = true;
	for_each_feature(in->feature_incompat, incompat_names,
			 sizeof(incompat_names) / sizeof(incompat_names[0]),
			 json_word, &first);
	printf("], \"compression\": [");
	first = true;
	for (unsigned int i = 0; i < 4; i++)
		if (algs & (1u << i))
			json_word(&first, algorithm_names[i]);
	printf("], \"checksum\": {\"present\": %s, \"value\": %u, "
	       "\"verified\": %s}",
	       in->feature_compat & COMPAT_SB_CHKSUM ? "true" : "false",
	       in->sb_checksum,
	       in->feature_compat & COMPAT_SB_CHKSUM ? "true" : "false");
	printf(", \"meta_blkaddr\": %u, \"xattr_blkaddr\": %u",
	       in->meta_blkaddr, in->xattr_blkaddr);
	image_need(in, &need);
	printf(", \"min_kernel\": \"%s\", \"min_kernel_why\": ", need.version);
	json_str(need.why);
	printf(", \"experimental\": [");
	first = true;
	for (unsigned int f = 0; f < KILN_KF_COUNT; f++) {
		const struct kiln_kernel_feature *k = kiln_kernel_feature(f);

		if ((need.features & (1u << f)) && k->experimental)
			json_word(&first, k->name);
	}
	printf("]");
	print_devices_json(img, in);
	if (verity)
		print_verity_json(verity, rep, walked);
	if (walked) {
		printf(", \"walk\": {\"complete\": %s, \"problems\": %llu"
		       ", \"directories\": %llu"
		       ", \"regular_files\": %llu, \"compressed_files\": %llu"
		       ", \"symlinks\": %llu, \"char_devices\": %llu"
		       ", \"block_devices\": %llu, \"fifos\": %llu"
		       ", \"sockets\": %llu, \"extra_links\": %llu"
		       ", \"data_bytes\": %llu}",
		       walk_err ? "false" : "true",
		       (unsigned long long)rep->problems,
		       (unsigned long long)rep->directories,
		       (unsigned long long)rep->regular_files,
		       (unsigned long long)rep->compressed_files,
		       (unsigned long long)rep->symlinks,
		       (unsigned long long)rep->char_devices,
		       (unsigned long long)rep->block_devices,
		       (unsigned long long)rep->fifos,
		       (unsigned long long)rep->sockets,
		       (unsigned long long)rep->extra_links,
		       (unsigned long long)rep->data_bytes);
	}
	printf("}\n");
}

/*
 * Find the tree after *@img (opened without verity) and compare its root
 * with the one given; when they match, reopen *@img through the tree so
 * that the walk checks every block. 0, or 1 when the image cannot be
 * reopened (reported).
 */
static int probe_verity(struct kiln_image **img, const char *image,
			struct cli_log *lg, const struct cli_devices *devs,
			const struct cli_verity *verity, struct info_verity *iv)
{
	struct kiln_image_opts o = { .struct_size = sizeof(o) };

	cli_verity_apply(verity, &o);
	iv->err = kiln_image_verity_probe(*img, &o, &iv->vi);
	iv->root_ok = !iv->err && !memcmp(iv->vi.root, verity->root,
					  sizeof(verity->root));
	if (!iv->root_ok)
		return 0;
	kiln_image_close(*img);
	return cli_open_image_verity(img, image, lg, devs, verity) ? 1 : 0;
}

int cmd_info(int argc, char **argv)
{
	struct kiln_fsck_opts fopts = {
		.struct_size = sizeof(fopts),
		.flags = KILN_FSCK_METADATA_ONLY | KILN_FSCK_NO_XATTRS,
	};
	struct kiln_fsck_report rep;
	struct kiln_image_info info;
	struct cli_devices devs = { .count = 0 };
	struct cli_verity verity = { 0 };
	struct info_verity iv = { 0 };
	struct kiln_image *img;
	struct cli_log lg;
	const char *arg, *image;
	bool json = false, walk = true, walk_set = false, kernels = false;
	int c, walk_err = 0;

	while ((c = cli_getopt(argc, argv, &info_spec, &arg)) >= 0) {
		switch (c) {
		case OPT_JSON: json = true; break;
		case OPT_WALK: walk = walk_set = true; break;
		case OPT_NO_WALK: walk = false; walk_set = true; break;
		case OPT_KERNELS: kernels = true; break;
		default:
			if (cli_image_option(&info_spec, &devs, &verity, c,
					     arg))
				return 2;
			break;
		}
	}
	if (c != CLI_OPT_END)
		return cli_opt_exit(c);
	if (cli_verity_check(&info_spec, &verity))
		return 2;
	if (kernels) {
		if (argc != optind)
			return cli_usage_error(&info_spec,
					       "--kernels takes no IMAGE");
		print_kernels();
		return 0;
	}
	if (argc - optind != 1)
		return cli_usage_error(&info_spec, "expected IMAGE");
	image = argv[optind];
	/* a remote image: the superblock's unit alone, unless asked */
	if (!walk_set && !verity.on && kiln_is_url(image))
		walk = false;

	cli_log_init(&lg, image, KILN_LOG_WARN);
	if (cli_open_image(&img, image, &lg, &devs))
		return 1;
	kiln_image_get_info(img, &info);
	if (verity.on && probe_verity(&img, image, &lg, &devs, &verity, &iv))
		return 1;
	memset(&rep, 0, sizeof(rep));
	if (walk)
		walk_err = kiln_fsck(img, &fopts, &rep);
	if (json)
		print_json(img, image, &info, &rep, walk, walk_err,
			   verity.on ? &iv : NULL);
	else
		print_text(img, image, &info, &rep, walk, walk_err,
			   verity.on ? &iv : NULL);
	kiln_image_close(img);
	if (walk_err)
		cli_error(image, "walking the image: %s", kiln_strerror(walk_err));
	if (verity.on && !iv.err && !iv.root_ok)
		cli_error(image, "dm-verity: the tree does not hash to the "
			  "root hash given");
	return walk_err || (verity.on && !iv.root_ok) ? 1 : 0;
}
