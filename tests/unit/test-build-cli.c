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

#include "tap.h"

extern char **environ;

static const char *kiln_exe;
static char tmp[64];

static void put_file(const char *rel, const void *data, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/src/%s", tmp, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

/* Small and big files, compressible and not, a duplicate, a sparse one. */
static void make_tree(void)
{
	static char text[300000], noise[70000];
	char path[256];
	uint32_t x = 1;
	int fd;

	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-cli.XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(path, sizeof(path), "%s/src", tmp);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/src/dir", tmp);
	CHECK(mkdir(path, 0755) == 0);
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = "kiln erofs pcluster\n"[(i * 7 + i / 1000) % 20];
	for (size_t i = 0; i < sizeof(noise); i++) {
		x = x * 1103515245u + 12345u;
		noise[i] = (char)(x >> 16);
	}
	put_file("a", "hello\n", 6);
	put_file("text", text, sizeof(text));
	put_file("dir/text-copy", text, sizeof(text));
	put_file("dir/tail", text, 5000);
	put_file("noise", noise, sizeof(noise));
	snprintf(path, sizeof(path), "%s/src/sparse", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "end", 3, 1 << 20) == 3);
	close(fd);
}

static void remove_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* `kiln build -q [-z CODEC] [--kernel V] SRC IMG`; returns its status. */
static int run_cli(const char *codec, const char *kernel, const char *src,
		   const char *img)
{
	const char *argv[12];
	size_t n = 0;
	pid_t pid;
	int st;

	argv[n++] = kiln_exe;
	argv[n++] = "build";
	argv[n++] = "-q";
	if (codec) {
		argv[n++] = "-z";
		argv[n++] = codec;
	}
	if (kernel) {
		argv[n++] = "--kernel";
		argv[n++] = kernel;
	}
	argv[n++] = src;
	argv[n++] = img;
	argv[n] = NULL;
	if (posix_spawn(&pid, kiln_exe, NULL, NULL, (char **)argv, environ))
		return -1;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void same_bytes(const char *codec, enum kiln_codec_id id,
		       const char *kernel)
{
	struct kiln_build_opts o;
	char src[128], a[128], b[128];
	size_t alen = 0, blen = 0;
	char *da, *db;

	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(a, sizeof(a), "%s/lib.img", tmp);
	snprintf(b, sizeof(b), "%s/cli.img", tmp);
	kiln_build_opts_init(&o);
	/* the codec's default level (for lzma, level 0 is preset 0) */
	if (codec)
		CHECK(kiln_compress_parse(codec, &o.compress, NULL, 0) == 0);
	CHECK_EQ(o.compress.codec, id);
	if (kernel)
		CHECK(kiln_kernel_parse(kernel, &o.kernel) == 0);
	CHECK_EQ(kiln_build(src, a, &o, NULL), 0);
	CHECK_EQ(run_cli(codec, kernel, src, b), 0);
	da = slurp(a, &alen);
	db = slurp(b, &blen);
	CHECK(da && db);
	CHECK_EQ(alen, blen);
	if (da && db && alen == blen && memcmp(da, db, alen)) {
		printf("# %s --kernel %s: the images differ\n",
		       codec ? codec : "none", kernel ? kernel : "(default)");
		CHECK(0);
	}
	free(da);
	free(db);
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
	remove_tree();
}

int main(int argc, char **argv)
{
	static const struct tap_test tests[] = {
		TAP_ENTRY(library_defaults_are_the_clis),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s KILN\n", argv[0]);
		return 2;
	}
	kiln_exe = argv[1];
	return tap_run(tests, sizeof(tests) / sizeof(tests[0]));
}
