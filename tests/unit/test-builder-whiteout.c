// SPDX-License-Identifier: MIT
/* Tests for lib/builder/whiteout.c: what a name means, the default mode. */
#include <string.h>
#include <sys/stat.h>

#include "builder/internal.h"
#include "tap.h"

static enum kiln_whiteout_kind kind(const char *name, const char **target,
				    size_t *len)
{
	return kiln_whiteout_kind(name, strlen(name), target, len);
}

TEST(names_are_classified_as_aufs_writes_them)
{
	const char *t;
	size_t len;

	CHECK_EQ(kind("file", &t, &len), KILN_WH_NONE);
	CHECK_EQ(kind(".wh", &t, &len), KILN_WH_NONE);
	CHECK_EQ(kind(".whx", &t, &len), KILN_WH_NONE);
	CHECK_EQ(kind(".wh.gone", &t, &len), KILN_WH_FILE);
	CHECK(len == 4 && !memcmp(t, "gone", 4));
	/* a whiteout of a dotfile */
	CHECK_EQ(kind(".wh..bashrc", &t, &len), KILN_WH_FILE);
	CHECK(len == 7 && !memcmp(t, ".bashrc", 7));
	CHECK_EQ(kind(".wh..wh..opq", &t, &len), KILN_WH_OPAQUE);
	CHECK_EQ(kind(".wh..wh.plnk", &t, &len), KILN_WH_META);
	CHECK_EQ(kind(".wh..wh.aufs", &t, &len), KILN_WH_META);
	CHECK_EQ(kind(".wh..wh..opqx", &t, &len), KILN_WH_META);
	CHECK_EQ(kind(".wh.", &t, &len), KILN_WH_BAD);
	CHECK_EQ(kind(".wh..", &t, &len), KILN_WH_BAD);
	CHECK_EQ(kind(".wh...", &t, &len), KILN_WH_BAD);
	CHECK_EQ(kind(".wh....", &t, &len), KILN_WH_FILE);
}

TEST(default_mode_follows_the_source_kind)
{
	struct kiln_build_opts o;

	kiln_build_opts_init(&o);
	CHECK_EQ(kiln_whiteouts_mode(&o), KILN_WHITEOUTS_KEEP);
	o.source_kind = KILN_SOURCE_TAR;
	CHECK_EQ(kiln_whiteouts_mode(&o), KILN_WHITEOUTS_OVERLAY);
	/* one OCI layer is a tar */
	o.source_kind = KILN_SOURCE_OCI;
	CHECK_EQ(kiln_whiteouts_mode(&o), KILN_WHITEOUTS_OVERLAY);
	o.source_kind = KILN_SOURCE_TAR;
	o.whiteouts = KILN_WHITEOUTS_STRIP;
	CHECK_EQ(kiln_whiteouts_mode(&o), KILN_WHITEOUTS_STRIP);
	o.source_kind = KILN_SOURCE_DIR;
	o.whiteouts = KILN_WHITEOUTS_OVERLAY;
	CHECK_EQ(kiln_whiteouts_mode(&o), KILN_WHITEOUTS_OVERLAY);
}

TEST(only_a_zero_character_device_is_an_overlay_whiteout)
{
	CHECK(kiln_whiteout_is_overlay(S_IFCHR | 0644, 0));
	CHECK(!kiln_whiteout_is_overlay(S_IFCHR | 0644, 0x103));
	CHECK(!kiln_whiteout_is_overlay(S_IFBLK | 0644, 0));
	CHECK(!kiln_whiteout_is_overlay(S_IFREG | 0644, 0));
}

TAP_MAIN(TAP_ENTRY(names_are_classified_as_aufs_writes_them),
	 TAP_ENTRY(default_mode_follows_the_source_kind),
	 TAP_ENTRY(only_a_zero_character_device_is_an_overlay_whiteout))
