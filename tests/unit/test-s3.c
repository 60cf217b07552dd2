// SPDX-License-Identifier: MIT
/*
 * lib/source/s3.c: the URL an s3:// name gives (virtual-host and path
 * style, AWS and other endpoints, key encoding, refused names), the
 * credentials file parser (profiles, hostile lines, no secret in an
 * error), and the request libcurl signs with it, compared with AWS's
 * published SigV4 example ("GET /test.txt", 20130524T000000Z).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "source/s3.h"
#include "tap.h"

static char why[512];

static char *url_of(const char *s3url, const char *endpoint, bool path)
{
	char *u = NULL;

	why[0] = '\0';
	if (kiln_s3_url(&u, s3url, endpoint, "eu-west-3", path, why,
			sizeof(why)))
		return NULL;
	return u;
}

static bool url_is(const char *s3url, const char *endpoint, bool path,
		   const char *want)
{
	char *u = url_of(s3url, endpoint, path);
	bool ok = u && !strcmp(u, want);

	if (!ok)
		printf("#   %s -> %s (%s), expected %s\n", s3url,
		       u ? u : "error", why, want);
	free(u);
	return ok;
}

TEST(urls_in_both_styles)
{
	CHECK(url_is("s3://my-bucket/a/b.erofs", NULL, false,
		     "https://my-bucket.s3.eu-west-3.amazonaws.com/a/b.erofs"));
	CHECK(url_is("s3://my-bucket/a/b.erofs", NULL, true,
		     "https://s3.eu-west-3.amazonaws.com/my-bucket/a/b.erofs"));
	CHECK(url_is("s3://bkt/k", "http://127.0.0.1:9000", true,
		     "http://127.0.0.1:9000/bkt/k"));
	CHECK(url_is("s3://bkt/k", "http://s3.localhost:9000/", false,
		     "http://bkt.s3.localhost:9000/k"));
	CHECK(url_is("S3://bkt/k", "HTTPS://minio.lan", false,
		     "https://bkt.minio.lan/k"));
	/* a dotted bucket cannot be a TLS virtual host: path style */
	CHECK(url_is("s3://my.bucket/k", NULL, false,
		     "https://s3.eu-west-3.amazonaws.com/my.bucket/k"));
	CHECK(url_is("s3://my.bucket/k", "http://h:1", false,
		     "http://my.bucket.h:1/k"));
	/* the key is percent-encoded, its slashes kept */
	CHECK(url_is("s3://bkt/dir one/a+b?c#d%e~f_g.h", "http://h", true,
		     "http://h/bkt/dir%20one/a%2Bb%3Fc%23d%25e~f_g.h"));
	CHECK(url_is("s3://bkt/\xc3\xa9", "http://h", true,
		     "http://h/bkt/%C3%A9"));
}

TEST(bad_names_are_refused)
{
	static const char *const bad[] = {
		"s3://ab/k", "s3://Bucket/k", "s3://-bkt/k", "s3://bkt-/k",
		"s3://bkt/", "s3://bkt", "s3:///k", "s3://b_kt/k",
		"s3://bkt/a\nb", "http://bkt/k",
	};
	char longkey[1100];

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		char *u = url_of(bad[k], "http://h", true);

		CHECK(!u);
		CHECK(why[0]);
		free(u);
	}
	snprintf(longkey, sizeof(longkey), "s3://bkt/%01030d", 0);
	CHECK(!url_of(longkey, "http://h", true));
	CHECK(!url_of("s3://bkt/k", "ftp://h", true));
	CHECK(!url_of("s3://bkt/k", "http://h/path", true));
	CHECK(!url_of("s3://bkt/k", "http://user@h", true));
	CHECK(!url_of("s3://bkt/k", "http://", true));
	why[0] = '\0';
	CHECK(kiln_s3_url(&(char *){ NULL }, "s3://bkt/k", NULL, "bad/region",
			  false, why, sizeof(why)) == -EINVAL);
}

static int parse(const char *text, const char *profile,
		 struct kiln_s3_creds *cr)
{
	why[0] = '\0';
	return kiln_s3_parse_credentials(text, strlen(text), profile,
					 "/etc/creds", cr, why, sizeof(why));
}

TEST(credentials_profiles)
{
	struct kiln_s3_creds cr;
	const char *f =
		"# shared credentials\n"
		"[default]\r\n"
		"aws_access_key_id = AKIDDEFAULT\r\n"
		"aws_secret_access_key=sec/def\r\n"
		"\n"
		"; another\n"
		"[ profile ci ]\n"
		"  aws_access_key_id =AKIDCI  \n"
		"aws_secret_access_key = sec+ci/=\n"
		"aws_session_token = TOK/en+==\n"
		"region = eu-west-3\n"
		"[other]\n"
		"aws_access_key_id = AKIDOTHER\n";

	CHECK_EQ(parse(f, "default", &cr), 0);
	CHECK(!strcmp(cr.key_id, "AKIDDEFAULT"));
	CHECK(!strcmp(cr.secret, "sec/def"));
	CHECK(!cr.token[0]);
	CHECK_EQ(parse(f, "ci", &cr), 0);
	CHECK(!strcmp(cr.key_id, "AKIDCI"));
	CHECK(!strcmp(cr.secret, "sec+ci/="));
	CHECK(!strcmp(cr.token, "TOK/en+=="));
	CHECK_EQ(parse(f, "absent", &cr), 1);
	/* a profile without its secret is an error naming the file */
	CHECK_EQ(parse(f, "other", &cr), -EINVAL);
	CHECK(strstr(why, "/etc/creds") && strstr(why, "aws_secret_access_key"));
	CHECK(!cr.key_id[0]);
	CHECK_EQ(parse("", "default", &cr), 1);
}

TEST(hostile_credentials_files)
{
	struct kiln_s3_creds cr;
	char *big = malloc(KILN_S3_LINE_MAX + 64);
	char nul[] = "[default]\naws_access_key_id = A\0B\n";

	CHECK_EQ(parse("[default]\njunk line\n", "default", &cr), -EINVAL);
	CHECK(!strcmp(why, "/etc/creds:2: neither [profile] nor key = value"));
	CHECK_EQ(parse("[default\n", "default", &cr), -EINVAL);
	CHECK(strstr(why, "/etc/creds:1:"));
	CHECK_EQ(parse("[default]\naws_access_key_id =\n", "default", &cr),
		 -EINVAL);
	CHECK(strstr(why, ":2: aws_access_key_id is empty"));
	CHECK_EQ(parse("[default]\naws_secret_access_key = a b\n", "default",
		       &cr), -EINVAL);
	CHECK(strstr(why, ":2:") && !strstr(why, "a b"));
	CHECK_EQ(parse("[a]\n[default]\nx=1\n[default]\n", "default", &cr),
		 -EINVAL);
	CHECK(strstr(why, ":4:") && strstr(why, "twice"));
	CHECK_EQ(kiln_s3_parse_credentials(nul, sizeof(nul) - 1, "default",
					   "/etc/creds", &cr, why, sizeof(why)),
		 -EINVAL);
	CHECK(strstr(why, ":2: a NUL byte"));
	/* a secret too long for its field is not echoed back */
	if (big) {
		strcpy(big, "[default]\naws_secret_access_key = ");
		memset(big + strlen(big), 'S', 300);
		big[35 + 300] = '\0';
		CHECK_EQ(parse(big, "default", &cr), -EINVAL);
		CHECK(strstr(why, ":2: aws_secret_access_key is too long"));
		CHECK(!strstr(why, "SSSS"));
		memset(big, 'x', KILN_S3_LINE_MAX + 10);
		big[KILN_S3_LINE_MAX + 10] = '\0';
		CHECK_EQ(parse(big, "default", &cr), -EINVAL);
		CHECK(strstr(why, ":1: line longer than"));
		free(big);
	}
	/* sections of other profiles may hold anything but junk lines */
	CHECK_EQ(parse("[x]\naws_secret_access_key = a b\n[default]\n"
		       "aws_access_key_id=K\naws_secret_access_key=S\n",
		       "default", &cr), 0);
	CHECK(!strcmp(cr.key_id, "K"));
}

/* One HTTP request's head, caught by a socket that answers 404. */
struct catcher {
	int fd;
	int port;
	char req[8192];
};

static void *catch_one(void *arg)
{
	struct catcher *c = arg;
	int s = accept(c->fd, NULL, NULL);
	size_t got = 0;
	static const char reply[] =
		"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n";

	if (s < 0)
		return NULL;
	while (got < sizeof(c->req) - 1 && !strstr(c->req, "\r\n\r\n")) {
		ssize_t r = read(s, c->req + got, sizeof(c->req) - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		c->req[got] = '\0';
	}
	if (write(s, reply, sizeof(reply) - 1) < 0)
		c->req[0] = '\0';
	close(s);
	return NULL;
}

static int listen_local(struct catcher *c)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof(a);

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(c->fd, 1) ||
	    getsockname(c->fd, (struct sockaddr *)&a, &n))
		return -1;
	c->port = ntohs(a.sin_port);
	return 0;
}

static const char aws_example_auth[] =
	"Authorization: AWS4-HMAC-SHA256 "
	"Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
	"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
	"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\r\n";

TEST(signing_matches_the_aws_example)
{
	struct catcher c = { 0 };
	struct curl_slist *hdrs = NULL, *t;
	struct kiln_s3 s3;
	char connect[128];
	pthread_t th;
	CURL *curl;

	setenv("AWS_ACCESS_KEY_ID", "", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	unsetenv("AWS_PROFILE");
	CHECK_EQ(kiln_s3_init(&s3, "us-east-1", NULL), 0);
	CHECK(!s3.creds.key_id[0]);
	snprintf(s3.creds.key_id, sizeof(s3.creds.key_id),
		 "AKIAIOSFODNN7EXAMPLE");
	snprintf(s3.creds.secret, sizeof(s3.creds.secret),
		 "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
	if (listen_local(&c))
		SKIP("no loopback socket");
	pthread_create(&th, NULL, catch_one, &c);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	curl = curl_easy_init();
	CHECK(curl != NULL);
	t = curl_slist_append(NULL, "Range: bytes=0-9");
	CHECK(t != NULL);
	hdrs = t;
	CHECK_EQ(kiln_s3_sign(&s3, curl, &hdrs, "20130524T000000Z",
			      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
		 0);
	/* the example's host, reached on the socket above */
	snprintf(connect, sizeof(connect),
		 "examplebucket.s3.amazonaws.com:80:127.0.0.1:%d", c.port);
	t = curl_slist_append(NULL, connect);
	curl_easy_setopt(curl, CURLOPT_URL,
			 "http://examplebucket.s3.amazonaws.com/test.txt");
	curl_easy_setopt(curl, CURLOPT_CONNECT_TO, t);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
	CHECK_EQ(curl_easy_perform(curl), CURLE_OK);
	pthread_join(th, NULL);
	close(c.fd);
	if (!strstr(c.req, aws_example_auth))
		printf("#   sent:\n%s", c.req);
	CHECK(strstr(c.req, aws_example_auth) != NULL);
	CHECK(strstr(c.req, "\r\nHost: examplebucket.s3.amazonaws.com\r\n"));
	curl_easy_cleanup(curl);
	curl_slist_free_all(hdrs);
	curl_slist_free_all(t);
	kiln_s3_release(&s3);
}

TEST(unsigned_without_credentials_and_token_header)
{
	struct catcher c = { 0 };
	struct curl_slist *hdrs = NULL;
	struct kiln_s3 s3;
	char url[128];
	pthread_t th;
	CURL *curl;

	setenv("AWS_ACCESS_KEY_ID", "", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
	CHECK_EQ(kiln_s3_init(&s3, NULL, NULL), 0);
	for (int pass = 0; pass < 2; pass++) {
		memset(&c, 0, sizeof(c));
		if (listen_local(&c))
			SKIP("no loopback socket");
		pthread_create(&th, NULL, catch_one, &c);
		curl = curl_easy_init();
		hdrs = NULL;
		CHECK_EQ(kiln_s3_sign(&s3, curl, &hdrs, NULL, NULL), 0);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/bkt/k", c.port);
		curl_easy_setopt(curl, CURLOPT_URL, url);
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
		CHECK_EQ(curl_easy_perform(curl), CURLE_OK);
		pthread_join(th, NULL);
		close(c.fd);
		if (!pass) {
			CHECK(!strstr(c.req, "Authorization:"));
			CHECK(!strstr(c.req, "x-amz-"));
			/* the environment gains credentials: read again */
			setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
			setenv("AWS_SECRET_ACCESS_KEY", "env/secret", 1);
			setenv("AWS_SESSION_TOKEN", "TOKENVALUE", 1);
			CHECK(kiln_s3_reload(&s3));
			CHECK(!kiln_s3_reload(&s3));
		} else {
			if (!strstr(c.req, "Credential=AKIDENV/"))
				printf("#   sent:\n%s", c.req);
			CHECK(strstr(c.req, "Authorization: AWS4-HMAC-SHA256 Credential=AKIDENV/"));
			CHECK(strstr(c.req, "/us-east-1/s3/aws4_request"));
			CHECK(strstr(c.req, "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"));
			CHECK(strstr(c.req, "x-amz-security-token: TOKENVALUE\r\n"));
			CHECK(strstr(c.req, "x-amz-security-token;") ||
			      strstr(c.req, ";x-amz-security-token"));
			CHECK(!strstr(c.req, "env/secret"));
		}
		curl_easy_cleanup(curl);
		curl_slist_free_all(hdrs);
	}
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	setenv("AWS_ACCESS_KEY_ID", "", 1);
	kiln_s3_release(&s3);
}

TAP_MAIN(TAP_ENTRY(urls_in_both_styles),
	 TAP_ENTRY(bad_names_are_refused),
	 TAP_ENTRY(credentials_profiles),
	 TAP_ENTRY(hostile_credentials_files),
	 TAP_ENTRY(signing_matches_the_aws_example),
	 TAP_ENTRY(unsigned_without_credentials_and_token_header))
