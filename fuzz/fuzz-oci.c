// SPDX-License-Identifier: MIT
/*
 * Fuzz target: an OCI image layout of up to four layers, each an arbitrary
 * byte string stored as a plain tar layer (the harness writes the blobs,
 * the manifest, the config and index.json with the right digests, so the
 * bytes reach the layer scan), flattened or one layer built alone; then
 * the image is opened and walked. Input: [0] bit 0 = compress with lz4,
 * bit 1 = --verify, bits 2-3: 0 = flatten, else --oci-layer of that
 * number (past the last: the last), bit 4: the JSON is fuzzed too; [1]
 * bits 0-1: layers - 1; with bit 4, five templates, each a 2-byte
 * little-endian length and its text (empty: the usual document), for
 * index.json, a nested index, the manifest, the config and oci-layout,
 * in which the harness replaces $C/$c (config digest/size), $0-$3/#0-#3
 * (layers), $M/$m (manifest) and $I/$i (nested index), so a mutated
 * document still names blobs that exist; then each layer but the last
 * as a 2-byte little-endian length and its bytes, the last layer the rest.
 *
 * Every file written is bounded by RLIMIT_FSIZE, as in fuzz-tar.c.
 */
#include <dirent.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdbool.h>
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

/* The documents of the layout, a template each ("" or NULL: the usual). */
enum { DOC_INDEX, DOC_NESTED, DOC_MANIFEST, DOC_CONFIG, DOC_LAYOUT, NR_DOCS };

struct blob_ref {
	char digest[72];
	size_t size;
};

struct vars {
	struct blob_ref config, layer[LAYERS_MAX], manifest, nested;
};

/* The blob of @v a placeholder's letter names (NULL: none). */
static const struct blob_ref *var_ref(const struct vars *v, char c)
{
	switch (c) {
	case 'C': case 'c': return &v->config;
	case 'M': case 'm': return &v->manifest;
	case 'I': case 'i': return &v->nested;
	default: return NULL;
	}
}

/* @tpl (@n bytes) with its placeholders filled from @v, in *@out. */
static size_t expand(const uint8_t *tpl, size_t n, const struct vars *v,
		     char **out)
{
	size_t cap = n * 36 + 1, len = 0;
	char *b = malloc(cap);

	*out = b;
	if (!b)
		return 0;
	for (size_t k = 0; k < n; k++) {
		const struct blob_ref *r = NULL;
		bool size = false;

		if (k + 1 < n && (tpl[k] == '$' || tpl[k] == '#') &&
		    tpl[k + 1] >= '0' && tpl[k + 1] < '0' + LAYERS_MAX) {
			r = &v->layer[tpl[k + 1] - '0'];
			size = tpl[k] == '#';
		} else if (k + 1 < n && tpl[k] == '$') {
			r = var_ref(v, (char)tpl[k + 1]);
			size = tpl[k + 1] >= 'a';
		}
		if (!r) {
			b[len++] = (char)tpl[k];
			continue;
		}
		len += (size_t)(size ? snprintf(b + len, cap - len, "%zu",
						r->size) :
				snprintf(b + len, cap - len, "%s", r->digest));
		k++;
	}
	return len;
}

/* Document @which from @tpl, else the usual one, as a blob or a file. */
static int put_doc(const uint8_t *const *tpl, const size_t *tpl_len,
		   int which, const char *usual, const struct vars *v,
		   struct blob_ref *ref, const char *file)
{
	char *text, path[128];
	size_t len;
	int ret;

	if (tpl && tpl_len[which])
		len = expand(tpl[which], tpl_len[which], v, &text);
	else
		len = expand((const uint8_t *)usual, strlen(usual), v, &text);
	if (!text)
		return -1;
	if (file) {
		snprintf(path, sizeof(path), "%s/%s", dir_path, file);
		ret = write_file(path, text, len);
	} else {
		ret = put_blob(text, len, ref->digest);
		ref->size = len;
	}
	free(text);
	return ret;
}

/* The layout around @nr layers: config, manifest, index.json. */
static int put_layout(const uint8_t *const *layer, const size_t *len,
		      unsigned int nr, const uint8_t *const *tpl,
		      const size_t *tpl_len)
{
	static const char cfg[] = "{\"architecture\":\"amd64\",\"os\":\"linux\"}";
	static const char nested[] = "{\"schemaVersion\":2,\"mediaType\":"
		"\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{"
		"\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"$M\",\"size\":$m,\"platform\":{\"architecture\":"
		"\"amd64\",\"os\":\"linux\"}}]}";
	static const char index[] = "{\"schemaVersion\":2,\"manifests\":"
		"[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"$M\",\"size\":$m}]}";
	struct vars v;
	char man[1024];
	size_t off;

	memset(&v, 0, sizeof(v));
	for (unsigned int k = 0; k < nr; k++) {
		if (put_blob(layer[k], len[k], v.layer[k].digest))
			return -1;
		v.layer[k].size = len[k];
	}
	for (unsigned int k = nr; k < LAYERS_MAX; k++)
		v.layer[k] = v.layer[nr - 1];
	if (put_doc(tpl, tpl_len, DOC_CONFIG, cfg, &v, &v.config, NULL))
		return -1;
	off = (size_t)snprintf(man, sizeof(man), "{\"schemaVersion\":2,"
			       "\"config\":{\"mediaType\":\"application/"
			       "vnd.oci.image.config.v1+json\",\"digest\":"
			       "\"$C\",\"size\":$c},\"layers\":[");
	for (unsigned int k = 0; k < nr; k++)
		off += (size_t)snprintf(man + off, sizeof(man) - off,
					"%s{\"mediaType\":\"application/vnd.oci."
					"image.layer.v1.tar\",\"digest\":\"$%u\","
					"\"size\":#%u}", k ? "," : "", k, k);
	snprintf(man + off, sizeof(man) - off, "]}");
	if (put_doc(tpl, tpl_len, DOC_MANIFEST, man, &v, &v.manifest, NULL) ||
	    put_doc(tpl, tpl_len, DOC_NESTED, nested, &v, &v.nested, NULL) ||
	    put_doc(tpl, tpl_len, DOC_INDEX, index, &v, NULL, "index.json"))
		return -1;
	return put_doc(tpl, tpl_len, DOC_LAYOUT,
		       "{\"imageLayoutVersion\":\"1.0.0\"}", &v, NULL,
		       "oci-layout");
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
	const uint8_t *layer[LAYERS_MAX], *tpl[NR_DOCS];
	size_t len[LAYERS_MAX], tpl_len[NR_DOCS];
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
	for (int k = 0; k < NR_DOCS; k++) {
		tpl[k] = data;
		tpl_len[k] = 0;
		if (!(flags & 16))
			continue;
		if (size < 2)
			return 0;
		tpl_len[k] = (size_t)(data[0] | data[1] << 8);
		data += 2;
		size -= 2;
		if (tpl_len[k] > size)
			tpl_len[k] = size;
		tpl[k] = data;
		data += tpl_len[k];
		size -= tpl_len[k];
	}
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
	if (put_layout(layer, len, nr, tpl, tpl_len)) {
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
