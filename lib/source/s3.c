// SPDX-License-Identifier: MIT
/*
 * S3 objects as http(s) URLs: the URL a bucket and key name, the
 * credentials (environment, shared credentials file) and the libcurl
 * options that sign a request. libcurl's CURLOPT_AWS_SIGV4 computes the
 * signature; nothing here hashes or signs.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source/s3.h"

#define DEFAULT_REGION	"us-east-1"
#define KEY_MAX		1024u	/* bytes of an object key */

bool kiln_s3_is_url(const char *url)
{
	return url && !strncasecmp(url, "s3://", 5);
}

/* S3's bucket names: 3..63 of [a-z0-9.-], starting and ending alnum. */
static bool bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) ||
	    !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t k = 0; k < n; k++)
		if (!islower((unsigned char)b[k]) &&
		    !isdigit((unsigned char)b[k]) && b[k] != '.' && b[k] != '-')
			return false;
	return true;
}

static bool region_ok(const char *r)
{
	size_t n = strlen(r);

	if (!n || n >= 64)
		return false;
	for (size_t k = 0; k < n; k++)
		if (!isalnum((unsigned char)r[k]) && r[k] != '-')
			return false;
	return true;
}

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

int kiln_s3_url(char **out, const char *s3url, const char *endpoint,
		const char *region, bool path_style, char *why, size_t why_cap)
{
	const char *bucket = s3url + 5, *slash, *key, *host, *scheme = "https://";
	char aws[128], *url, *p;
	size_t blen, klen, hlen, slen, cap;

	*out = NULL;
	if (!kiln_s3_is_url(s3url)) {
		snprintf(why, why_cap, "not an s3:// URL");
		return -EINVAL;
	}
	slash = strchr(bucket, '/');
	if (!slash || !bucket_ok(bucket, (size_t)(slash - bucket))) {
		snprintf(why, why_cap, "not s3://BUCKET/KEY with a bucket of 3 to 63 characters a-z 0-9 . -");
		return -EINVAL;
	}
	blen = (size_t)(slash - bucket);
	key = slash + 1;
	klen = strlen(key);
	if (!klen || klen > KEY_MAX) {
		snprintf(why, why_cap, "the key must have 1 to %u bytes", KEY_MAX);
		return -EINVAL;
	}
	for (size_t k = 0; k < klen; k++)
		if ((unsigned char)key[k] < 0x20 || key[k] == 0x7f) {
			snprintf(why, why_cap, "a control character in the key");
			return -EINVAL;
		}
	if (endpoint) {
		if (!strncasecmp(endpoint, "https://", 8)) {
			host = endpoint + 8;
		} else if (!strncasecmp(endpoint, "http://", 7)) {
			host = endpoint + 7;
			scheme = "http://";
		} else {
			snprintf(why, why_cap, "--s3-endpoint: not an http:// or https:// URL");
			return -EINVAL;
		}
	} else {
		if (!region_ok(region)) {
			snprintf(why, why_cap, "bad region \"%.64s\"", region);
			return -EINVAL;
		}
		snprintf(aws, sizeof(aws), "s3.%s.amazonaws.com", region);
		host = aws;
	}
	hlen = strlen(host);
	if (hlen && host[hlen - 1] == '/')
		hlen--;
	if (!hlen || memchr(host, '/', hlen) || memchr(host, '?', hlen) ||
	    memchr(host, '@', hlen) || memchr(host, '#', hlen)) {
		snprintf(why, why_cap, "--s3-endpoint: a scheme and a host (and port) only, no path");
		return -EINVAL;
	}
	/* a dotted bucket breaks the TLS wildcard of virtual hosts */
	if (!path_style && memchr(bucket, '.', blen) && !strcmp(scheme, "https://"))
		path_style = true;
	slen = strlen(scheme);
	cap = slen + hlen + blen + 3 * klen + 4;
	url = malloc(cap);
	if (!url) {
		snprintf(why, why_cap, "out of memory");
		return -ENOMEM;
	}
	p = url;
	memcpy(p, scheme, slen);
	p += slen;
	if (!path_style) {
		memcpy(p, bucket, blen);
		p += blen;
		*p++ = '.';
	}
	memcpy(p, host, hlen);
	p += hlen;
	*p++ = '/';
	if (path_style) {
		memcpy(p, bucket, blen);
		p += blen;
		*p++ = '/';
	}
	for (size_t k = 0; k < klen; k++) {
		unsigned char c = (unsigned char)key[k];

		if (unreserved(c) || c == '/') {
			*p++ = (char)c;
		} else {
			sprintf(p, "%%%02X", c);
			p += 3;
		}
	}
	*p = '\0';
	*out = url;
	return 0;
}

static const char *trim(char *s, size_t *n)
{
	while (*n && (*s == ' ' || *s == '\t')) {
		s++;
		(*n)--;
	}
	while (*n && (s[*n - 1] == ' ' || s[*n - 1] == '\t' ||
		      s[*n - 1] == '\r'))
		(*n)--;
	s[*n] = '\0';
	return s;
}

/* Store value @v (@n bytes) of key @name into @dst; a message if not. */
static int set_value(char *dst, size_t cap, const char *v, size_t n,
		     const char *path, unsigned int line, const char *name,
		     char *why, size_t why_cap)
{
	if (!n || n >= cap) {
		snprintf(why, why_cap, "%s:%u: %s is %s", path, line, name,
			 n ? "too long" : "empty");
		return -EINVAL;
	}
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)v[k] < 0x21 || (unsigned char)v[k] > 0x7e) {
			snprintf(why, why_cap, "%s:%u: %s holds a character that is not printable ASCII",
				 path, line, name);
			return -EINVAL;
		}
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

int kiln_s3_parse_credentials(const char *text, size_t len,
			      const char *profile, const char *path,
			      struct kiln_s3_creds *cr, char *why,
			      size_t why_cap)
{
	char buf[KILN_S3_LINE_MAX + 1];
	bool in = false, found = false;
	unsigned int line = 0;
	size_t pos = 0;

	memset(cr, 0, sizeof(*cr));
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos, vn;
		const char *s, *eq, *v;
		char *name;
		int err;

		line++;
		if (n > KILN_S3_LINE_MAX) {
			snprintf(why, why_cap, "%s:%u: line longer than %u bytes",
				 path, line, KILN_S3_LINE_MAX);
			return -EINVAL;
		}
		if (memchr(text + pos, '\0', n)) {
			snprintf(why, why_cap, "%s:%u: a NUL byte", path, line);
			return -EINVAL;
		}
		memcpy(buf, text + pos, n);
		pos += n + (nl ? 1 : 0);
		s = trim(buf, &n);
		if (!n || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *sec = (char *)s + 1;
			size_t sn = n - 1;

			if (s[n - 1] != ']') {
				snprintf(why, why_cap, "%s:%u: a section header without ']'",
					 path, line);
				return -EINVAL;
			}
			sn--;
			sec = (char *)trim(sec, &sn);
			if (!strncmp(sec, "profile ", 8)) {
				sec += 8;
				sn -= 8;
				sec = (char *)trim(sec, &sn);
			}
			in = !strcmp(sec, profile);
			if (in && found) {
				snprintf(why, why_cap, "%s:%u: profile [%.64s] given twice",
					 path, line, profile);
				return -EINVAL;
			}
			found = found || in;
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(why, why_cap, "%s:%u: neither [profile] nor key = value",
				 path, line);
			return -EINVAL;
		}
		if (!in)
			continue;
		vn = (size_t)(eq - s);
		name = (char *)trim((char *)s, &vn);
		v = eq + 1;
		vn = n - (size_t)(v - s);
		v = trim((char *)v, &vn);
		err = 0;
		if (!strcasecmp(name, "aws_access_key_id"))
			err = set_value(cr->key_id, sizeof(cr->key_id), v, vn,
					path, line, name, why, why_cap);
		else if (!strcasecmp(name, "aws_secret_access_key"))
			err = set_value(cr->secret, sizeof(cr->secret), v, vn,
					path, line, name, why, why_cap);
		else if (!strcasecmp(name, "aws_session_token") ||
			 !strcasecmp(name, "aws_security_token"))
			err = set_value(cr->token, sizeof(cr->token), v, vn,
					path, line, name, why, why_cap);
		if (err) {
			memset(cr, 0, sizeof(*cr));
			return err;
		}
	}
	if (!found)
		return 1;
	if (!cr->key_id[0] || !cr->secret[0]) {
		snprintf(why, why_cap, "%s: profile [%.64s] lacks %s", path,
			 profile, cr->key_id[0] ? "aws_secret_access_key" :
			 "aws_access_key_id");
		memset(cr, 0, sizeof(*cr));
		return -EINVAL;
	}
	return 0;
}

static int env_creds(struct kiln_s3_creds *cr, char *why, size_t why_cap)
{
	const char *id = getenv("AWS_ACCESS_KEY_ID");
	const char *sec = getenv("AWS_SECRET_ACCESS_KEY");
	const char *tok = getenv("AWS_SESSION_TOKEN");
	int err;

	if (!id || !*id)
		return 1;
	if (!sec || !*sec) {
		snprintf(why, why_cap, "AWS_ACCESS_KEY_ID is set, AWS_SECRET_ACCESS_KEY is not");
		return -EINVAL;
	}
	err = set_value(cr->key_id, sizeof(cr->key_id), id, strlen(id),
			"environment", 0, "AWS_ACCESS_KEY_ID", why, why_cap);
	if (!err)
		err = set_value(cr->secret, sizeof(cr->secret), sec,
				strlen(sec), "environment", 0,
				"AWS_SECRET_ACCESS_KEY", why, why_cap);
	if (!err && tok && *tok)
		err = set_value(cr->token, sizeof(cr->token), tok, strlen(tok),
				"environment", 0, "AWS_SESSION_TOKEN", why,
				why_cap);
	return err;
}

/* The whole of file @path, at most KILN_S3_CRED_FILE_MAX bytes. */
static int slurp(const char *path, char **text, size_t *len, char *why,
		 size_t why_cap)
{
	struct stat st;
	size_t got = 0;
	char *b;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(why, why_cap, "%s: %s", path, strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size > KILN_S3_CRED_FILE_MAX) {
		snprintf(why, why_cap, "%s: not a regular file of at most %u bytes",
			 path, KILN_S3_CRED_FILE_MAX);
		close(fd);
		return -EINVAL;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		snprintf(why, why_cap, "out of memory");
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, why_cap, "%s: %s", path, strerror(errno));
			free(b);
			close(fd);
			return -EINVAL;
		}
		if (!r)
			break;
		got += (size_t)r;
	}
	close(fd);
	*text = b;
	*len = got;
	return 0;
}

int kiln_s3_load_credentials(struct kiln_s3_creds *cr, char *why,
			     size_t why_cap)
{
	const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE");
	const char *profile = getenv("AWS_PROFILE");
	const char *home = getenv("HOME");
	char path[4096], *text = NULL;
	size_t len = 0;
	int err;

	memset(cr, 0, sizeof(*cr));
	err = env_creds(cr, why, why_cap);
	if (err <= 0)
		return err;
	memset(cr, 0, sizeof(*cr));
	if (file && *file)
		snprintf(path, sizeof(path), "%s", file);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	else
		return 0;
	err = slurp(path, &text, &len, why, why_cap);
	if (err == 1) {
		if (profile && *profile) {
			snprintf(why, why_cap, "AWS_PROFILE is %.64s but %s does not exist",
				 profile, path);
			return -EINVAL;
		}
		return 0;	/* no file: unsigned requests */
	}
	if (err)
		return err;
	err = kiln_s3_parse_credentials(text, len,
					profile && *profile ? profile : "default",
					path, cr, why, why_cap);
	free(text);
	if (err == 1) {
		if (profile && *profile) {
			snprintf(why, why_cap, "%s: no profile [%.64s]", path,
				 profile);
			return -EINVAL;
		}
		return 0;
	}
	return err;
}

int kiln_s3_init(struct kiln_s3 *s3, const char *region,
		 const struct kiln_logger *lg)
{
	char why[512];
	int err;

	memset(s3, 0, sizeof(*s3));
	s3->lg = lg;
	if (!region || !*region)
		region = getenv("AWS_REGION");
	if (!region || !*region)
		region = getenv("AWS_DEFAULT_REGION");
	if (!region || !*region)
		region = DEFAULT_REGION;
	if (!region_ok(region)) {
		kiln_log(lg, KILN_LOG_ERROR, "bad S3 region \"%.64s\"", region);
		return -EINVAL;
	}
	snprintf(s3->region, sizeof(s3->region), "%s", region);
	snprintf(s3->sigv4, sizeof(s3->sigv4), "aws:amz:%s:s3", region);
	err = kiln_s3_load_credentials(&s3->creds, why, sizeof(why));
	if (err) {
		kiln_log(lg, KILN_LOG_ERROR, "S3 credentials: %s", why);
		return err;
	}
	pthread_mutex_init(&s3->lock, NULL);
	return 0;
}

void kiln_s3_release(struct kiln_s3 *s3)
{
	pthread_mutex_destroy(&s3->lock);
	memset(&s3->creds, 0, sizeof(s3->creds));
}

bool kiln_s3_reload(struct kiln_s3 *s3)
{
	struct kiln_s3_creds cr;
	char why[512];
	bool changed;

	if (kiln_s3_load_credentials(&cr, why, sizeof(why))) {
		kiln_log(s3->lg, KILN_LOG_WARN,
			 "S3 credentials: %s; keeping the ones in use", why);
		return false;
	}
	pthread_mutex_lock(&s3->lock);
	changed = memcmp(&cr, &s3->creds, sizeof(cr)) != 0;
	if (changed)
		s3->creds = cr;
	pthread_mutex_unlock(&s3->lock);
	memset(&cr, 0, sizeof(cr));
	kiln_log(s3->lg, KILN_LOG_INFO, "S3 credentials read again: %s",
		 changed ? "new ones in use" : "unchanged");
	return changed;
}

int kiln_s3_sign(struct kiln_s3 *s3, CURL *c, struct curl_slist **hdrs,
		 const char *amz_date, const char *payload_hash)
{
	char line[sizeof(s3->creds.token) + 32];
	struct kiln_s3_creds cr;
	struct curl_slist *h = *hdrs;
	int err = 0;

	pthread_mutex_lock(&s3->lock);
	cr = s3->creds;
	pthread_mutex_unlock(&s3->lock);
	if (!cr.key_id[0])
		goto out;	/* no credentials: a public object */
	snprintf(line, sizeof(line), "x-amz-content-sha256: %s",
		 payload_hash ? payload_hash : "UNSIGNED-PAYLOAD");
	h = curl_slist_append(h, line);
	if (h && amz_date) {
		*hdrs = h;
		snprintf(line, sizeof(line), "x-amz-date: %s", amz_date);
		h = curl_slist_append(h, line);
	}
	if (h && cr.token[0]) {
		*hdrs = h;
		snprintf(line, sizeof(line), "x-amz-security-token: %s",
			 cr.token);
		h = curl_slist_append(h, line);
	}
	if (!h) {
		err = -ENOMEM;
		goto out;
	}
	*hdrs = h;
	if (curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s3->sigv4) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_USERNAME, cr.key_id) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_PASSWORD, cr.secret) != CURLE_OK)
		err = -ENOMEM;
out:
	memset(line, 0, sizeof(line));
	memset(&cr, 0, sizeof(cr));
	return err;
}
