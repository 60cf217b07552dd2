// SPDX-License-Identifier: MIT
/*
 * Fuzz target: an OCI image layout of up to four layers, each an arbitrary
 * byte string stored as a plain tar layer (the harness writes the blobs,
 * the manifest, the config and index.json with the right digests, so the
 * bytes reach the layer scan), flattened or one layer built alone; then
 * the image is opened and walked. Input: [0] bit 0 = compress with lz4,
 * bit 1 = --verify, bits 2-3: 0 = flatten, else --oci-layer of that
 * number (past the last: the last); [1] bits 0-1: layers - 1; then each
 * layer but the last as a 2-byte little-endian length and its bytes, the
 * last layer the rest.
 *
 * Every file written is bounded by RLIMIT_FSIZE, as in fuzz-tar.c.
 */
#include <dirent.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kiln/builder.h>

#include "fuzz-walk.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_MAX	(16ull << 20)	/* bytes any file written may grow to */
#define LAYERS_MAX	4

static char dir_path[64], image_path[96];

static void setup(void)
{
	struct rlimit rl = { FILE_MAX, FILE_MAX };
	const char *tmp = getenv("TMPDIR");
	char blobs[128];

	if (dir_path[0])
		return;
	signal(SIGXFSZ, SIG_IGN);	/* writes past the bound give EFBIG */
	if (setrlimit(RLIMIT_FSIZE, &rl))
		abort();
	snprintf(dir_path, sizeof(dir_path), "%s/kiln-fuzz-oci-%d",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp", (int)getpid());
	snprintf(image_path, sizeof(image_path), "%s.img", dir_path);
	mkdir(dir_path, 0700);
	snprintf(blobs, sizeof(blobs), "%s/blobs", dir_path);
	mkdir(blobs, 0700);
	snprintf(blobs, sizeof(blobs), "%s/blobs/sha256", dir_path);
	if (mkdir(blobs, 0700) && access(blobs, W_OK))
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setup();
	return 0;
}

static int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(data, 1, len, f) == len;
	return fclose(f) || !ok ? -1 : 0;
}

/* Store @len bytes as a blob; @digest gets "sha256:<hex>". */
static int put_blob(const void *data, size_t len, char digest[72])
{
	unsigned char md[32];
	char path[192];

	if (!EVP_Digest(data, len, md, NULL, EVP_sha256(), NULL))
		return -1;
	strcpy(digest, "sha256:");
	for (int i = 0; i < 32; i++)
		snprintf(digest + 7 + 2 * i, 3, "%02x", md[i]);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", dir_path,
		 digest + 7);
	return write_file(path, data, len);
}

/* The layout around @nr layers: config, manifest, index.json. */
static int put_layout(const uint8_t *const *layer, const size_t *len,
		      unsigned int nr)
{
	static const char cfg[] = "{\"architecture\":\"amd64\",\"os\":\"linux\"}";
	char digest[72], man[1024], index[512], path[128];
	size_t off;

	if (put_blob(cfg, strlen(cfg), digest))
		return -1;
	off = (size_t)snprintf(man, sizeof(man), "{\"schemaVersion\":2,"
			       "\"config\":{\"mediaType\":\"application/"
			       "vnd.oci.image.config.v1+json\",\"digest\":"
			       "\"%s\",\"size\":%zu},\"layers\":[", digest,
			       strlen(cfg));
	for (unsigned int k = 0; k < nr; k++) {
		if (put_blob(layer[k], len[k], digest))
			return -1;
		off += (size_t)snprintf(man + off, sizeof(man) - off,
					"%s{\"mediaType\":\"application/vnd.oci."
					"image.layer.v1.tar\",\"digest\":\"%s\","
					"\"size\":%zu}", k ? "," : "", digest,
					len[k]);
	}
	off += (size_t)snprintf(man + off, sizeof(man) - off, "]}");
	if (put_blob(man, off, digest))
		return -1;
	snprintf(index, sizeof(index), "{\"schemaVersion\":2,\"manifests\":"
		 "[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"%s\",\"size\":%zu}]}", digest, off);
	snprintf(path, sizeof(path), "%s/index.json", dir_path);
	if (write_file(path, index, strlen(index)))
		return -1;
	snprintf(path, sizeof(path), "%s/oci-layout", dir_path);
	return write_file(path, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
}

/* Empty the blob directory for the next input. */
static void clear_blobs(void)
{
	char path[384];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/blobs/sha256", dir_path);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/blobs/sha256/%s", dir_path,
			 de->d_name);
		unlink(path);
	}
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *layer[LAYERS_MAX];
	size_t len[LAYERS_MAX];
	struct kiln_build_opts o;
	unsigned int nr, pick, flags;
	int ret;

	setup();
	if (size < 2)
		return 0;
	flags = data[0];
	nr = (data[1] & 3) + 1;
	pick = (flags >> 2) & 3;
	data += 2;
	size -= 2;
	for (unsigned int k = 0; k < nr; k++) {
		size_t n = size;

		if (k + 1 < nr) {
			if (size < 2)
				return 0;
			n = (size_t)(data[0] | data[1] << 8);
			data += 2;
			size -= 2;
			if (n > size)
				n = size;
		}
		layer[k] = data;
		len[k] = n;
		data += n;
		size -= n;
	}
	if (put_layout(layer, len, nr)) {
		clear_blobs();
		return 0;
	}
	kiln_build_opts_init(&o);
	o.source_kind = KILN_SOURCE_OCI;
	o.oci_layer = pick > nr ? nr : pick;
	o.threads = 1;
	o.memory_limit = 1u << 20;	/* as small as the library allows */
	o.flags = KILN_BUILD_FIXED_MTIME | KILN_BUILD_BUILD_TIME |
		  KILN_BUILD_UUID;
	if (flags & 1)
		o.compress = (struct kiln_compress_spec){ KILN_CODEC_LZ4, 0 };
	if (flags & 2)
		o.flags |= KILN_BUILD_VERIFY;
	ret = kiln_build(dir_path, image_path, &o, NULL);
	if (ret == 0)
		walk_image(image_path);
	unlink(image_path);
	clear_blobs();
	return 0;
}
