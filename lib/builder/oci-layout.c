// SPDX-License-Identifier: MIT
/*
 * An OCI image layout directory (oci-layout, index.json, blobs/) read down
 * to one image's layers: the manifest named by REF (or the only one),
 * through a nested image index to its linux/amd64 (or only) manifest.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/oci.h"
#include "util/fileio.h"

#define MT_INDEX	"application/vnd.oci.image.index.v1+json"
#define MT_MANIFEST	"application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST	"application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define REF_NAME	"org.opencontainers.image.ref.name"
/* indexes inside indexes followed before a manifest must come */
#define INDEX_DEPTH_MAX	4

static const struct {
	const char *type;
	enum kiln_oci_compression comp;
} layer_types[] = {
	{ "application/vnd.oci.image.layer.v1.tar", KILN_OCI_TAR },
	{ "application/vnd.oci.image.layer.v1.tar+gzip", KILN_OCI_GZIP },
	{ "application/vnd.oci.image.layer.v1.tar+zstd", KILN_OCI_ZSTD },
	/* what docker save and registries of the Docker format carry */
	{ "application/vnd.docker.image.rootfs.diff.tar.gzip", KILN_OCI_GZIP },
};

struct layout {
	struct kiln_oci_image *img;
	const struct kiln_logger *lg;
};

static int layout_fail(struct layout *l, int err, const char *what,
		       const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int layout_fail(struct layout *l, int err, const char *what,
		       const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kiln_log(l->lg, KILN_LOG_ERROR, "%s: %s: %s", l->img->dir, what, msg);
	return -err;
}

/* A file of the layout itself (not a blob), at most KILN_OCI_JSON_MAX. */
static int file_load(struct layout *l, const char *name, char **bufp,
		     size_t *lenp)
{
	char path[4352];
	struct stat st;
	char *buf;
	ssize_t r;
	int fd;

	*bufp = NULL;
	snprintf(path, sizeof(path), "%s/%s", l->img->dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return layout_fail(l, errno, name, "%s%s", strerror(errno),
				   errno == ENOENT ? " (not an OCI image "
				   "layout)" : "");
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > KILN_OCI_JSON_MAX) {
		close(fd);
		return layout_fail(l, EUCLEAN, name, "not a regular file of "
				   "at most %u bytes", KILN_OCI_JSON_MAX);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	r = kiln_pread_full(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	if (r < 0) {
		free(buf);
		return layout_fail(l, (int)-r, name, "%s", strerror((int)-r));
	}
	buf[r] = '\0';
	*bufp = buf;
	*lenp = (size_t)r;
	return 0;
}

/* @buf (@len bytes) as a JSON object; @what names it in messages. */
static int json_parse(struct layout *l, const char *what, const char *buf,
		      size_t len, json_t **jp)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);

	*jp = NULL;
	if (!j)
		return layout_fail(l, EUCLEAN, what, "not JSON: %s (line %d, "
				   "column %d)", je.text, je.line, je.column);
	if (!json_is_object(j)) {
		json_decref(j);
		return layout_fail(l, EUCLEAN, what, "not a JSON object");
	}
	*jp = j;
	return 0;
}

/* The blob @d as a JSON object, checked against its digest. */
static int blob_json(struct layout *l, const char *what,
		     const struct kiln_oci_desc *d, json_t **jp)
{
	char *buf;
	int err = kiln_oci_blob_load(l->img->dir, d, KILN_OCI_JSON_MAX, l->lg,
				     &buf);

	*jp = NULL;
	if (err)
		return err;
	err = json_parse(l, what, buf, (size_t)d->size, jp);
	free(buf);
	return err;
}

/* A descriptor's digest and size; *@type its mediaType (or NULL). */
static int desc_parse(struct layout *l, const char *what, json_t *o,
		      struct kiln_oci_desc *d, const char **type)
{
	json_t *digest = json_object_get(o, "digest");
	json_t *size = json_object_get(o, "size");
	json_t *mt = json_object_get(o, "mediaType");

	memset(d, 0, sizeof(*d));
	if (!json_is_object(o))
		return layout_fail(l, EUCLEAN, what, "descriptor is not an "
				   "object");
	if (!json_is_string(digest) ||
	    !kiln_oci_digest_ok(json_string_value(digest)))
		return layout_fail(l, EUCLEAN, what, "no digest "
				   "\"sha256:<64 hex digits>\" (or sha512)");
	if (!json_is_integer(size) || json_integer_value(size) < 0)
		return layout_fail(l, EUCLEAN, what, "no size");
	if (mt && !json_is_string(mt))
		return layout_fail(l, EUCLEAN, what, "mediaType is not a "
				   "string");
	*type = mt ? json_string_value(mt) : NULL;
	d->size = (uint64_t)json_integer_value(size);
	d->digest = strdup(json_string_value(digest));
	return d->digest ? 0 : -ENOMEM;
}

static int layers_parse(struct layout *l, const char *what, json_t *layers)
{
	struct kiln_oci_image *img = l->img;
	size_t nr = json_array_size(layers);

	if (!json_is_array(layers))
		return layout_fail(l, EUCLEAN, what, "no layers array");
	if (nr > KILN_OCI_LAYERS_MAX)
		return layout_fail(l, EOPNOTSUPP, what, "%zu layers: at most "
				   "%d are read", nr, KILN_OCI_LAYERS_MAX);
	img->layers = calloc(nr ? nr : 1, sizeof(*img->layers));
	if (!img->layers)
		return -ENOMEM;
	for (size_t k = 0; k < nr; k++) {
		struct kiln_oci_desc *d = &img->layers[k];
		char lwhat[192];
		const char *type;
		size_t t;
		int err;

		snprintf(lwhat, sizeof(lwhat), "%s: layer %zu", what, k + 1);
		err = desc_parse(l, lwhat, json_array_get(layers, k), d, &type);
		img->nr_layers = k + !!d->digest;
		if (err)
			return err;
		for (t = 0; t < sizeof(layer_types) / sizeof(layer_types[0]);
		     t++)
			if (type && !strcmp(type, layer_types[t].type))
				break;
		if (t == sizeof(layer_types) / sizeof(layer_types[0]))
			return layout_fail(l, EOPNOTSUPP, lwhat, "media type "
					   "'%s' not supported (tar, tar+gzip "
					   "or tar+zstd layers)",
					   type ? type : "(none)");
		d->comp = layer_types[t].comp;
	}
	return 0;
}

/* The image manifest @d: its config checked, its layers listed. */
static int manifest_read(struct layout *l, const struct kiln_oci_desc *d)
{
	char what[160];
	struct kiln_oci_desc cfg;
	const char *type;
	json_t *m, *c = NULL;
	int err;

	snprintf(what, sizeof(what), "manifest %s", d->digest);
	err = blob_json(l, what, d, &m);
	if (err)
		return err;
	err = desc_parse(l, what, json_object_get(m, "config"), &cfg, &type);
	if (!err) {
		char cwhat[160];

		snprintf(cwhat, sizeof(cwhat), "config %s", cfg.digest);
		err = blob_json(l, cwhat, &cfg, &c);
	}
	free(cfg.digest);
	json_decref(c);
	if (!err)
		err = layers_parse(l, what, json_object_get(m, "layers"));
	json_decref(m);
	return err;
}

/*
 * Of an image index's manifests, the linux/amd64 one, or the only one.
 * *@pick: its position.
 */
static int index_pick_platform(struct layout *l, const char *what,
			       json_t *list, size_t *pick)
{
	size_t nr = json_array_size(list);

	if (nr == 1) {
		*pick = 0;
		return 0;
	}
	for (size_t k = 0; k < nr; k++) {
		json_t *p = json_object_get(json_array_get(list, k),
					    "platform");
		const char *os = json_string_value(json_object_get(p, "os"));
		const char *arch = json_string_value(
			json_object_get(p, "architecture"));

		if (os && arch && !strcmp(os, "linux") &&
		    !strcmp(arch, "amd64")) {
			*pick = k;
			return 0;
		}
	}
	return layout_fail(l, ENOENT, what, "%zu manifests, none for "
			   "linux/amd64", nr);
}

/* Of index.json's manifests, the one named @ref, or the only one. */
static int index_pick_ref(struct layout *l, json_t *list, const char *ref,
			  size_t *pick)
{
	size_t nr = json_array_size(list), found = nr;
	char names[512] = "";

	for (size_t k = 0; k < nr; k++) {
		json_t *a = json_object_get(json_array_get(list, k),
					    "annotations");
		const char *name = json_string_value(json_object_get(a,
								     REF_NAME));
		size_t used = strlen(names);

		if (name && used < sizeof(names) - 1)
			snprintf(names + used, sizeof(names) - used, "%s'%s'",
				 used ? ", " : "", name);
		if (ref && name && !strcmp(name, ref) && found == nr)
			found = k;
	}
	if (ref && found == nr)
		return layout_fail(l, ENOENT, "index.json", "no image named "
				   "'%s' (%s%s)", ref, *names ? "it names "
				   : "it names none", names);
	if (!ref && nr != 1)
		return layout_fail(l, ENOENT, "index.json", "%zu images: name "
				   "one as DIR:REF (%s%s)", nr, *names ?
				   "refs: " : "none has a ref", names);
	*pick = ref ? found : 0;
	return 0;
}

/*
 * The descriptor @pick of the index @j's manifests: an image manifest is
 * read, an index is followed.
 */
static int desc_follow(struct layout *l, const char *what, json_t *j,
		       size_t pick, unsigned int depth)
{
	json_t *list = json_object_get(j, "manifests");
	struct kiln_oci_desc d;
	const char *type;
	int err = desc_parse(l, what, json_array_get(list, pick), &d, &type);

	if (err) {
		free(d.digest);
		return err;
	}
	if (type && (!strcmp(type, MT_MANIFEST) ||
		     !strcmp(type, MT_DOCKER_MANIFEST))) {
		err = manifest_read(l, &d);
	} else if (type && (!strcmp(type, MT_INDEX) ||
			    !strcmp(type, MT_DOCKER_LIST))) {
		char iwhat[160];
		json_t *sub;

		snprintf(iwhat, sizeof(iwhat), "index %s", d.digest);
		if (depth >= INDEX_DEPTH_MAX)
			err = layout_fail(l, ELOOP, iwhat, "indexes nested "
					  "deeper than %d", INDEX_DEPTH_MAX);
		else
			err = blob_json(l, iwhat, &d, &sub);
		if (!err) {
			json_t *sl = json_object_get(sub, "manifests");

			if (!json_is_array(sl) || !json_array_size(sl))
				err = layout_fail(l, EUCLEAN, iwhat,
						  "no manifests");
			if (!err)
				err = index_pick_platform(l, iwhat, sl, &pick);
			if (!err)
				err = desc_follow(l, iwhat, sub, pick,
						  depth + 1);
			json_decref(sub);
		}
	} else {
		err = layout_fail(l, EOPNOTSUPP, what, "%s: media type '%s' is "
				  "neither an image manifest nor an index",
				  d.digest, type ? type : "(none)");
	}
	free(d.digest);
	return err;
}

/* oci-layout: {"imageLayoutVersion": "1.x.y"} */
static int layout_version(struct layout *l)
{
	const char *v;
	char *buf;
	size_t len;
	json_t *j;
	int err = file_load(l, "oci-layout", &buf, &len);

	if (err)
		return err;
	err = json_parse(l, "oci-layout", buf, len, &j);
	free(buf);
	if (err)
		return err;
	v = json_string_value(json_object_get(j, "imageLayoutVersion"));
	if (!v || strncmp(v, "1.", 2))
		err = layout_fail(l, EOPNOTSUPP, "oci-layout", "image layout "
				  "version %s%s%s not read (1.x)",
				  v ? "'" : "", v ? v : "missing", v ? "'" : "");
	json_decref(j);
	return err;
}

/* "DIR" if that is a directory, else "DIR:REF". */
static int source_split(struct kiln_oci_image *img, const char *source)
{
	const char *colon = strrchr(source, ':');
	struct stat st;

	if (!stat(source, &st) || !colon || colon == source || !colon[1]) {
		img->dir = strdup(source);
		return img->dir ? 0 : -ENOMEM;
	}
	img->dir = strndup(source, (size_t)(colon - source));
	img->ref = strdup(colon + 1);
	return img->dir && img->ref ? 0 : -ENOMEM;
}

int kiln_oci_image_open(struct kiln_oci_image **imgp, const char *source,
			const struct kiln_logger *lg)
{
	struct kiln_oci_image *img = calloc(1, sizeof(*img));
	struct layout l = { .img = img, .lg = lg };
	json_t *index = NULL, *list;
	struct stat st;
	size_t len, pick = 0;
	char *buf;
	int err;

	*imgp = NULL;
	if (!img)
		return -ENOMEM;
	err = source_split(img, source);
	if (!err && (stat(img->dir, &st) || !S_ISDIR(st.st_mode))) {
		kiln_log(lg, KILN_LOG_ERROR, "%s: not an OCI image layout "
			 "directory", img->dir);
		err = -ENOENT;
	}
	/* 1. the layout's version, 2. index.json, 3. the image it names */
	if (!err)
		err = layout_version(&l);
	if (!err)
		err = file_load(&l, "index.json", &buf, &len);
	if (!err) {
		err = json_parse(&l, "index.json", buf, len, &index);
		free(buf);
	}
	list = json_object_get(index, "manifests");
	if (!err && !json_is_array(list))
		err = layout_fail(&l, EUCLEAN, "index.json", "no manifests "
				  "array");
	if (!err)
		err = index_pick_ref(&l, list, img->ref, &pick);
	if (!err)
		err = desc_follow(&l, "index.json", index, pick, 0);
	json_decref(index);
	if (err) {
		kiln_oci_image_free(img);
		return err;
	}
	*imgp = img;
	return 0;
}

void kiln_oci_image_free(struct kiln_oci_image *img)
{
	if (!img)
		return;
	for (size_t k = 0; k < img->nr_layers; k++)
		free(img->layers[k].digest);
	free(img->layers);
	free(img->ref);
	free(img->dir);
	free(img);
}
