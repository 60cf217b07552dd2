// SPDX-License-Identifier: MIT
/*
 * Tests for lib/builder/oci-blob.c and oci-layout.c: digests that name a
 * blob, blobs checked as they are read, layouts read down to one image's
 * layers (by REF, through a nested index), and the refusals.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/oci.h"
#include "tap.h"

static char tmp[64];
static char last_msg[1024];

static void catch_log(void *ctx, enum kiln_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	snprintf(last_msg, sizeof(last_msg), "%s", msg);
}

static const struct kiln_logger lg = { .fn = catch_log };

static void setup(void)
{
	char path[128];

	snprintf(tmp, sizeof(tmp), "/tmp/kiln-test-oci-XXXXXX");
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(path, sizeof(path), "%s/blobs", tmp);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/blobs/sha256", tmp);
	CHECK(mkdir(path, 0755) == 0);
	last_msg[0] = '\0';
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	CHECK(system(cmd) == 0);
}

static void write_file(const char *name, const char *data, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	f = fopen(path, "wb");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fwrite(data, 1, len, f) == len);
	fclose(f);
}

/* Store @data as a blob; *@digest: "sha256:<hex>" (72 bytes with NUL). */
static void put_blob(const char *data, char digest[72])
{
	unsigned char md[32];
	char name[128];

	CHECK(EVP_Digest(data, strlen(data), md, NULL, EVP_sha256(), NULL));
	strcpy(digest, "sha256:");
	for (int i = 0; i < 32; i++)
		sprintf(digest + 7 + 2 * i, "%02x", md[i]);
	snprintf(name, sizeof(name), "blobs/sha256/%s", digest + 7);
	write_file(name, data, strlen(data));
}

static const char layer_a[] = "sha256:"
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char layer_b[] = "sha256:"
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/* A manifest of two layers (@type2: the second one's media type). */
static void put_manifest(const char *type2, char digest[72], size_t *size)
{
	char cfg[72], man[1024];

	put_blob("{\"architecture\":\"amd64\",\"os\":\"linux\"}", cfg);
	snprintf(man, sizeof(man),
		 "{\"schemaVersion\":2,\"config\":{\"mediaType\":"
		 "\"application/vnd.oci.image.config.v1+json\",\"digest\":"
		 "\"%s\",\"size\":37},\"layers\":["
		 "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
		 "\"digest\":\"%s\",\"size\":10},"
		 "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":20}]}",
		 cfg, layer_a, type2, layer_b);
	put_blob(man, digest);
	*size = strlen(man);
}

static void put_index(const char *entries)
{
	char index[2048];

	write_file("oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	snprintf(index, sizeof(index), "{\"schemaVersion\":2,\"manifests\":"
		 "[%s]}", entries);
	write_file("index.json", index, strlen(index));
}

static int open_image(const char *ref, struct kiln_oci_image **img)
{
	char src[128];

	snprintf(src, sizeof(src), "%s%s%s", tmp, ref ? ":" : "",
		 ref ? ref : "");
	return kiln_oci_image_open(img, src, &lg);
}

TEST(digests_name_blob_files_and_nothing_else)
{
	CHECK(kiln_oci_digest_ok(layer_a));
	CHECK(!kiln_oci_digest_ok("sha256:"));
	CHECK(!kiln_oci_digest_ok("sha256:../../../../etc/passwd"));
	CHECK(!kiln_oci_digest_ok("sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
	CHECK(!kiln_oci_digest_ok("md5:d41d8cd98f00b204e9800998ecf8427e"));
	CHECK(!kiln_oci_digest_ok(layer_a + 1));
}

TEST(blob_is_checked_as_it_is_read)
{
	struct kiln_oci_desc d = { .size = 5 };
	struct kiln_oci_blob *bl;
	char digest[72], buf[16];
	char name[128];

	setup();
	put_blob("hello", digest);
	d.digest = digest;
	CHECK_EQ(kiln_oci_blob_open(&bl, tmp, &d, &lg), 0);
	CHECK_EQ(kiln_oci_blob_read(bl, buf, 3), 3);
	CHECK_EQ(kiln_oci_blob_read(bl, buf, sizeof(buf)), 2);
	CHECK_EQ(kiln_oci_blob_read(bl, buf, sizeof(buf)), 0);
	CHECK_EQ(kiln_oci_blob_finish(bl), 0);
	kiln_oci_blob_close(bl);
	/* the same size, other bytes: the digest says so at the end */
	snprintf(name, sizeof(name), "blobs/sha256/%s", digest + 7);
	write_file(name, "jello", 5);
	CHECK_EQ(kiln_oci_blob_open(&bl, tmp, &d, &lg), 0);
	CHECK_EQ(kiln_oci_blob_read(bl, buf, 3), 3);
	CHECK_EQ(kiln_oci_blob_read(bl, buf, sizeof(buf)), -EUCLEAN);
	CHECK(strstr(kiln_oci_blob_why(bl), "digest mismatch") != NULL);
	CHECK(strstr(kiln_oci_blob_why(bl), digest + 7) != NULL);
	/* sticky: no later read or finish passes it */
	CHECK_EQ(kiln_oci_blob_read(bl, buf, sizeof(buf)), -EUCLEAN);
	CHECK_EQ(kiln_oci_blob_finish(bl), -EUCLEAN);
	kiln_oci_blob_close(bl);
	/* finish alone reads the rest and checks it */
	CHECK_EQ(kiln_oci_blob_open(&bl, tmp, &d, &lg), 0);
	CHECK_EQ(kiln_oci_blob_finish(bl), -EUCLEAN);
	CHECK(strstr(last_msg, "digest mismatch") != NULL);
	kiln_oci_blob_close(bl);
	teardown();
}

TEST(blob_of_another_size_or_missing_is_refused_when_opened)
{
	struct kiln_oci_desc d = { .size = 6 };
	struct kiln_oci_blob *bl;
	char digest[72];

	setup();
	put_blob("hello", digest);
	d.digest = digest;
	CHECK_EQ(kiln_oci_blob_open(&bl, tmp, &d, &lg), -EUCLEAN);
	CHECK(bl == NULL);
	CHECK(strstr(last_msg, "5 bytes, but its descriptor says 6") != NULL);
	d.digest = (char *)layer_a;
	CHECK_EQ(kiln_oci_blob_open(&bl, tmp, &d, &lg), -ENOENT);
	CHECK(strstr(last_msg, layer_a) != NULL);
	teardown();
}

TEST(layout_lists_the_layers_of_its_only_image)
{
	struct kiln_oci_image *img;
	char man[72], entry[512];
	size_t size;

	setup();
	put_manifest("application/vnd.oci.image.layer.v1.tar+zstd", man,
		     &size);
	snprintf(entry, sizeof(entry), "{\"mediaType\":"
		 "\"application/vnd.oci.image.manifest.v1+json\",\"digest\":"
		 "\"%s\",\"size\":%zu}", man, size);
	put_index(entry);
	CHECK_EQ(open_image(NULL, &img), 0);
	if (img) {
		CHECK_EQ(img->nr_layers, 2);
		CHECK(!strcmp(img->layers[0].digest, layer_a));
		CHECK_EQ(img->layers[0].size, 10);
		CHECK_EQ(img->layers[0].comp, KILN_OCI_GZIP);
		CHECK_EQ(img->layers[1].comp, KILN_OCI_ZSTD);
	}
	kiln_oci_image_free(img);
	/* a REF the index does not name */
	CHECK_EQ(open_image("latest", &img), -ENOENT);
	CHECK(strstr(last_msg, "no image named 'latest'") != NULL);
	teardown();
}

TEST(ref_picks_one_of_several_images)
{
	struct kiln_oci_image *img;
	char m1[72], m2[72], entries[1024];
	size_t s1, s2;

	setup();
	put_manifest("application/vnd.oci.image.layer.v1.tar", m1, &s1);
	put_manifest("application/vnd.oci.image.layer.v1.tar+gzip", m2, &s2);
	snprintf(entries, sizeof(entries),
		 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"%s\",\"size\":%zu,\"annotations\":{"
		 "\"org.opencontainers.image.ref.name\":\"one\"}},"
		 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"%s\",\"size\":%zu,\"annotations\":{"
		 "\"org.opencontainers.image.ref.name\":\"two\"}}",
		 m1, s1, m2, s2);
	put_index(entries);
	CHECK_EQ(open_image(NULL, &img), -ENOENT);
	CHECK(strstr(last_msg, "2 images") != NULL);
	CHECK(strstr(last_msg, "'one', 'two'") != NULL);
	CHECK_EQ(open_image("two", &img), 0);
	if (img)
		CHECK_EQ(img->layers[1].comp, KILN_OCI_GZIP);
	kiln_oci_image_free(img);
	CHECK_EQ(open_image("one", &img), 0);
	if (img)
		CHECK_EQ(img->layers[1].comp, KILN_OCI_TAR);
	kiln_oci_image_free(img);
	teardown();
}

TEST(nested_index_resolves_to_linux_amd64)
{
	struct kiln_oci_image *img;
	char man[72], idx[72], nested[1024], entry[512];
	size_t size;

	setup();
	put_manifest("application/vnd.oci.image.layer.v1.tar", man, &size);
	/* arm64's manifest is not in the layout: reading it would fail */
	snprintf(nested, sizeof(nested), "{\"schemaVersion\":2,\"manifests\":["
		 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"%s\",\"size\":1,\"platform\":{\"os\":\"linux\","
		 "\"architecture\":\"arm64\"}},"
		 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"os\":\"linux\","
		 "\"architecture\":\"amd64\"}}]}", layer_a, man, size);
	put_blob(nested, idx);
	snprintf(entry, sizeof(entry), "{\"mediaType\":"
		 "\"application/vnd.oci.image.index.v1+json\",\"digest\":"
		 "\"%s\",\"size\":%zu}", idx, strlen(nested));
	put_index(entry);
	CHECK_EQ(open_image(NULL, &img), 0);
	if (img)
		CHECK_EQ(img->nr_layers, 2);
	kiln_oci_image_free(img);
	teardown();
}

TEST(unknown_layer_media_type_and_bad_json_are_refused)
{
	struct kiln_oci_image *img;
	char man[72], entry[512];
	size_t size;

	setup();
	put_manifest("application/vnd.example.squashfs", man, &size);
	snprintf(entry, sizeof(entry), "{\"mediaType\":"
		 "\"application/vnd.oci.image.manifest.v1+json\",\"digest\":"
		 "\"%s\",\"size\":%zu}", man, size);
	put_index(entry);
	CHECK_EQ(open_image(NULL, &img), -EOPNOTSUPP);
	CHECK(strstr(last_msg, "layer 2") != NULL);
	CHECK(strstr(last_msg, "vnd.example.squashfs") != NULL);
	/* index.json cut short */
	write_file("index.json", "{\"schemaVersion\":2,\"manif", 25);
	CHECK_EQ(open_image(NULL, &img), -EUCLEAN);
	CHECK(strstr(last_msg, "index.json: not JSON") != NULL);
	/* a descriptor whose digest would leave blobs/ */
	put_index("{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		  "\"digest\":\"sha256:../../x\",\"size\":1}");
	CHECK_EQ(open_image(NULL, &img), -EUCLEAN);
	CHECK(strstr(last_msg, "no digest") != NULL);
	teardown();
}

TAP_MAIN(TAP_ENTRY(digests_name_blob_files_and_nothing_else),
	 TAP_ENTRY(blob_is_checked_as_it_is_read),
	 TAP_ENTRY(blob_of_another_size_or_missing_is_refused_when_opened),
	 TAP_ENTRY(layout_lists_the_layers_of_its_only_image),
	 TAP_ENTRY(ref_picks_one_of_several_images),
	 TAP_ENTRY(nested_index_resolves_to_linux_amd64),
	 TAP_ENTRY(unknown_layer_media_type_and_bad_json_are_refused))
