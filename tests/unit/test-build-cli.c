// SPDX-License-Identifier: MIT
/*
 * The library owns the defaults: one tree built through
 * kiln_build_opts_init() + kiln_build() and through `kiln build` with the
 * same options gives the same bytes, for every codec and several targets.
 * argv[1] is the kiln executable.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kiln/builder.h>
#include <kiln/kernel.h>

#include "build-fixture.h"

extern char **environ;

static const char *kiln_exe;
/* Small and big files, compressible and not, a duplicate, a sparse one. */
static void make_tree(void)
{
	static char text[300000], noise[70000];
	char path[256];
	uint32_t x = 1;
	int fd;

	scratch_make("cli");
	snprintf(path, sizeof(path), "%s/src/dir", tmp);
	CHECK(mkdir(path, 0755) == 0);
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = "kiln erofs pcluster\n"[(i * 7 + i / 1000) % 20];
	for (size_t i = 0; i < sizeof(noise); i++) {
		x = x * 1103515245u + 12345u;
		noise[i] = (char)(x >> 16);
	}
	scratch_write("src/a", "hello\n", 6);
	scratch_write("src/text", text, sizeof(text));
	scratch_write("src/dir/text-copy", text, sizeof(text));
	scratch_write("src/dir/tail", text, 5000);
	scratch_write("src/noise", noise, sizeof(noise));
	snprintf(path, sizeof(path), "%s/src/sparse", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "end", 3, 1 << 20) == 3);
	close(fd);
}

/* `kiln build -q ARGS... SRC IMG` (@args NULL-terminated); its status. */
static int run_cli(const char *const *args, const char *src, const char *img)
{
	const char *argv[16];
	size_t n = 0;
	pid_t pid;
	int st;

	argv[n++] = kiln_exe;
	argv[n++] = "build";
	argv[n++] = "-q";
	while (*args && n < 13)
		argv[n++] = *args++;
	argv[n++] = src;
	argv[n++] = img;
	argv[n] = NULL;
	if (posix_spawn(&pid, kiln_exe, NULL, NULL, (char **)argv, environ))
		return -1;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The tree built with @o by the library and with @args by the CLI. */
static void same_image(const struct kiln_build_opts *o,
		       const char *const *args, const char *what)
{
	char src[128], a[128], b[128];
	size_t alen = 0, blen = 0;
	char *da, *db;

	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(a, sizeof(a), "%s/lib.img", tmp);
	snprintf(b, sizeof(b), "%s/cli.img", tmp);
	CHECK_EQ(kiln_build(src, a, o, NULL), 0);
	CHECK_EQ(run_cli(args, src, b), 0);
	da = scratch_load("lib.img", &alen);
	db = scratch_load("cli.img", &blen);
	CHECK(da && db);
	CHECK_EQ(alen, blen);
	if (da && db && alen == blen && memcmp(da, db, alen)) {
		printf("# %s: the images differ\n", what);
		CHECK(0);
	}
	free(da);
	free(db);
}

static void same_bytes(const char *codec, enum kiln_codec_id id,
		       const char *kernel)
{
	struct kiln_build_opts o;
	const char *args[5] = { NULL };
	char what[64];
	size_t n = 0;

	kiln_build_opts_init(&o);
	/* the codec's default level (for lzma, level 0 is preset 0) */
	if (codec) {
		CHECK(kiln_compress_parse(codec, &o.compress, NULL, 0) == 0);
		args[n++] = "-z";
		args[n++] = codec;
	}
	CHECK_EQ(o.compress.codec, id);
	if (kernel) {
		CHECK(kiln_kernel_parse(kernel, &o.kernel) == 0);
		args[n++] = "--kernel";
		args[n++] = kernel;
	}
	snprintf(what, sizeof(what), "%s --kernel %s", codec ? codec : "none",
		 kernel ? kernel : "(default)");
	same_image(&o, args, what);
}

TEST(library_defaults_are_the_clis)
{
	static const struct {
		const char *name;
		enum kiln_codec_id id;
	} codecs[] = {
		{ NULL, KILN_CODEC_NONE }, { "lz4", KILN_CODEC_LZ4 },
		{ "lz4hc", KILN_CODEC_LZ4HC }, { "lzma", KILN_CODEC_LZMA },
		{ "deflate", KILN_CODEC_DEFLATE }, { "zstd", KILN_CODEC_ZSTD },
	};
	static const char *const kernels[] = { NULL, "5.4", "5.17", "latest" };

	/* the CLI reads SOURCE_DATE_EPOCH; the library does not */
	unsetenv("SOURCE_DATE_EPOCH");
	make_tree();
	for (size_t c = 0; c < sizeof(codecs) / sizeof(codecs[0]); c++) {
		for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]);
		     k++) {
			unsigned int r = 0;

			if (kernels[k])
				kiln_kernel_parse(kernels[k], &r);
			if (r && ((codecs[c].id == KILN_CODEC_LZMA && r < 516) ||
				  (codecs[c].id == KILN_CODEC_DEFLATE && r < 606) ||
				  (codecs[c].id == KILN_CODEC_ZSTD && r < 610)))
				continue;
			same_bytes(codecs[c].name, codecs[c].id, kernels[k]);
		}
	}
	scratch_remove();
}

/*
 * Options that change a default: the library's spelling of each (what a
 * program using libkiln would write) gives the CLI's bytes.
 */
TEST(option_sets_are_the_clis)
{
	static const struct {
		const char *args[5];
		const char *codec;
		unsigned int flags, off;
		uint32_t pcluster;
	} sets[] = {
		{ { "-z", "zstd", "--no-fragments" }, "zstd",
		  0, KILN_COMPRESS_FRAGMENTS, 0 },
		{ { "-z", "lz4hc", "--ztailpacking" }, "lz4hc",
		  KILN_COMPRESS_ZTAILPACKING, 0, 0 },
		{ { "-z", "lz4", "--no-dedupe" }, "lz4",
		  0, KILN_COMPRESS_DEDUPE, 0 },
		{ { "-z", "lzma", "-C", "32768" }, "lzma", 0, 0, 32768 },
		{ { "-z", "zstd", "--dedupe-shifted" }, "zstd",
		  KILN_COMPRESS_DEDUPE_SHIFTED, 0, 0 },
	};

	unsetenv("SOURCE_DATE_EPOCH");
	make_tree();
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		struct kiln_build_opts o;
		char what[96];

		kiln_build_opts_init(&o);
		CHECK(kiln_compress_parse(sets[i].codec, &o.compress, NULL,
					  0) == 0);
		o.compress_flags = sets[i].flags;
		o.compress_off = sets[i].off;
		o.pcluster_size = sets[i].pcluster;
		snprintf(what, sizeof(what), "%s %s %s", sets[i].args[1],
			 sets[i].args[2], sets[i].args[3] ? sets[i].args[3] : "");
		same_image(&o, sets[i].args, what);
	}
	scratch_remove();
}

int main(int argc, char **argv)
{
	static const struct tap_test tests[] = {
		TAP_ENTRY(library_defaults_are_the_clis),
		TAP_ENTRY(option_sets_are_the_clis),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s KILN\n", argv[0]);
		return 2;
	}
	kiln_exe = argv[1];
	return tap_run(tests, sizeof(tests) / sizeof(tests[0]));
}
