/* SPDX-License-Identifier: MIT */
/*
 * s3://BUCKET/KEY: the http(s) URL it names (virtual-host or path style,
 * AWS or an S3-compatible endpoint), the credentials that sign its
 * requests (the AWS environment variables, else a profile of the shared
 * credentials file; none: unsigned requests), and the libcurl options
 * that sign one request with AWS SigV4 (libcurl computes the signature).
 */
#ifndef KILN_SOURCE_S3_H
#define KILN_SOURCE_S3_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/log.h"

#define KILN_S3_CRED_FILE_MAX	(1u << 20)	/* bytes of a credentials file */
#define KILN_S3_LINE_MAX	8192u		/* bytes of one of its lines */

struct kiln_s3_creds {
	char key_id[256];	/* "": none, requests go unsigned */
	char secret[256];
	char token[8192];	/* session token, "" if none */
};

struct kiln_s3 {
	pthread_mutex_t lock;	/* guards @creds */
	struct kiln_s3_creds creds;
	char region[64];
	char sigv4[128];	/* "aws:amz:REGION:s3" */
	const struct kiln_logger *lg;
};

/* Whether @url starts with s3:// (any case). */
bool kiln_s3_is_url(const char *url);

/*
 * The http(s) URL of s3://BUCKET/KEY @s3url: on @endpoint (NULL: AWS's,
 * https://s3.REGION.amazonaws.com), virtual-host style
 * (scheme://BUCKET.host/KEY) unless @path_style (scheme://host/BUCKET/KEY),
 * the key percent-encoded. *@out is malloc'd. 0, or -EINVAL with the
 * reason in @why.
 */
int kiln_s3_url(char **out, const char *s3url, const char *endpoint,
		const char *region, bool path_style, char *why, size_t why_cap);

/*
 * The credentials of profile @profile in the text of a shared credentials
 * file (@path names it in errors): 0, 1 when the profile is not there, or
 * -EINVAL with "PATH:LINE: reason" in @why. Never puts a secret in @why.
 */
int kiln_s3_parse_credentials(const char *text, size_t len,
			      const char *profile, const char *path,
			      struct kiln_s3_creds *cr, char *why,
			      size_t why_cap);

/*
 * The credentials in force: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
 * (with AWS_SESSION_TOKEN), else profile AWS_PROFILE (default "default")
 * of AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials); none of
 * them: no credentials (cr->key_id ""). 0 or -EINVAL with @why.
 */
int kiln_s3_load_credentials(struct kiln_s3_creds *cr, char *why,
			     size_t why_cap);

/* Region @region (NULL: AWS_REGION, AWS_DEFAULT_REGION, us-east-1). */
int kiln_s3_init(struct kiln_s3 *s3, const char *region,
		 const struct kiln_logger *lg);
void kiln_s3_release(struct kiln_s3 *s3);

/* Read the credentials again (after a 401 or 403): whether they changed. */
bool kiln_s3_reload(struct kiln_s3 *s3);

/*
 * Set up @c to sign its request: SigV4 with the credentials in force
 * (none: unsigned), and into *@hdrs the headers S3 wants signed with it
 * (x-amz-content-sha256, x-amz-security-token; @amz_date and
 * @payload_hash NULL but in tests). The caller puts the Range in *@hdrs
 * so that it is signed too. -ENOMEM or 0.
 */
int kiln_s3_sign(struct kiln_s3 *s3, CURL *c, struct curl_slist **hdrs,
		 const char *amz_date, const char *payload_hash);

#endif
