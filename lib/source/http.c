// SPDX-License-Identifier: MIT
/*
 * An image over http:// or https:// (libcurl): single-range GETs pinned to
 * the object seen at open (If-Match, or If-Unmodified-Since), every reply
 * checked (status, Content-Range, length, identity) before a byte is kept,
 * bounded retries with jittered exponential backoff honouring Retry-After,
 * and mirror URLs tried in turn. An s3:// URL is its http(s) URL with
 * each request signed (s3.c); a refusal (401, 403) reads the credentials
 * again and tries once more. A batch of ranges goes out together on a
 * multi handle (HTTP/2 streams on one connection when offered); what
 * fails there is retried one range at a time.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "source/http-reply.h"
#include "source/s3.h"
#include "source/source.h"
#include "util/checked.h"

#define DEF_CONNECT_MS	10000u
#define DEF_STALL_MS	10000u
#define DEF_REQUEST_MS	60000u
#define DEF_READ_MS	120000u
#define DEF_RETRIES	4u
#define BACKOFF_BASE_MS	100u
#define BACKOFF_MAX_MS	5000u
#define MULTI_MAX	8u	/* ranges in flight at once */

/* One URL of the image and the identity it showed when first probed. */
struct http_url {
	char *url;
	pthread_mutex_t probe_lock;
	atomic_bool probed;
	atomic_bool dead;	/* refused for good (404, TLS, no ranges) */
	bool s3;		/* an s3:// URL: requests are signed */
	char etag[200];		/* strong ETag, "" if none */
	char last_modified[64];	/* "" if none */
};

struct http_handle {
	CURL *curl;
	struct http_handle *next;
};

struct http_source {
	struct kiln_source base;
	struct http_url *urls;
	unsigned int nr_urls;
	atomic_uint current;	/* the URL that served last */
	unsigned int flags;
	char *ca_file;
	long connect_ms, stall_s, request_ms, read_ms;
	unsigned int retries;
	pthread_mutex_t lock;	/* guards @idle */
	struct http_handle *idle;
	pthread_mutex_t multi_lock;	/* guards @multi, held for a batch */
	CURLM *multi;		/* batches of ranges (NULL: none) */
	atomic_bool changed;	/* the object was replaced: every read fails */
	atomic_uint_fast64_t rng;
	bool has_s3;		/* @s3 is set up */
	struct kiln_s3 s3;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

KILN_API int kiln_is_url(const char *path)
{
	return path && (!strncasecmp(path, "http://", 7) ||
			!strncasecmp(path, "https://", 8) ||
			kiln_s3_is_url(path));
}

KILN_API void kiln_remote_opts_init(struct kiln_remote_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sleep @ms, in slices, until then or until the source is cancelled. */
static void sleep_ms(const struct kiln_source *src, uint64_t ms)
{
	while (ms && !atomic_load(&src->cancelled)) {
		uint64_t slice = ms < 100 ? ms : 100;
		struct timespec ts = { .tv_sec = 0,
				       .tv_nsec = (long)slice * 1000000 };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ms -= slice;
	}
}

/* curl's progress callback: non-zero aborts the transfer. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	const struct kiln_source *src = ctx;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return atomic_load(&src->cancelled) ? 1 : 0;
}

/* A value in [@lo, @hi] from a shared xorshift state. */
static uint64_t jitter(struct http_source *hs, uint64_t lo, uint64_t hi)
{
	uint64_t x = atomic_load(&hs->rng), y;

	do {
		y = x;
		y ^= y << 13;
		y ^= y >> 7;
		y ^= y << 17;
	} while (!atomic_compare_exchange_weak(&hs->rng, &x, y));
	return hi > lo ? lo + y % (hi - lo + 1) : lo;
}

static CURL *handle_get(struct http_source *hs, struct http_handle **h)
{
	pthread_mutex_lock(&hs->lock);
	*h = hs->idle;
	if (*h)
		hs->idle = (*h)->next;
	pthread_mutex_unlock(&hs->lock);
	if (!*h) {
		*h = calloc(1, sizeof(**h));
		if (!*h)
			return NULL;
		(*h)->curl = curl_easy_init();
		if (!(*h)->curl) {
			free(*h);
			*h = NULL;
			return NULL;
		}
	}
	return (*h)->curl;
}

/* Back to the pool: its connection stays open for the next request. */
static void handle_put(struct http_source *hs, struct http_handle *h)
{
	pthread_mutex_lock(&hs->lock);
	h->next = hs->idle;
	hs->idle = h;
	pthread_mutex_unlock(&hs->lock);
}

/*
 * S3's reason for an error reply (its <Code>), printable characters only,
 * appended to @why.
 */
static void s3_reason(const struct kiln_http_reply *x, char *why,
		      size_t why_cap)
{
	const char *a = strstr(x->err_body, "<Code>"), *b;
	size_t n = strlen(why);
	char code[64];
	size_t k = 0;

	if (!a || !(b = strstr(a, "</Code>")))
		return;
	for (a += 6; a < b && k < sizeof(code) - 1; a++)
		if (isalnum((unsigned char)*a) || *a == '.' || *a == '-')
			code[k++] = *a;
	code[k] = '\0';
	if (k && n < why_cap)
		snprintf(why + n, why_cap - n, " (%s)", code);
}

/* One request being made: its handle and what must outlive the transfer. */
struct http_req {
	struct http_handle *h;
	CURL *c;
	struct curl_slist *hdrs;
	char errbuf[CURL_ERROR_SIZE];
};

/*
 * Set up a GET of [@off, @off + @len) from URL @u into reply @x on a
 * pooled handle (@len bytes from 0 of unknown total for a probe: see
 * probe()). @budget_ms caps the request. 0, or -ENOMEM with nothing held.
 */
static int req_prepare(struct http_source *hs, struct http_url *u,
		       struct kiln_http_reply *x, uint64_t off, size_t len,
		       bool pin, uint64_t budget_ms, struct http_req *r)
{
	char range[64], cond[300], rhdr[80];
	CURL *c = handle_get(hs, &r->h);

	r->hdrs = NULL;
	r->errbuf[0] = '\0';
	r->c = c;
	if (!c)
		return -ENOMEM;
	kiln_http_reply_reset(x);
	snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, off,
		 off + len - 1);
	if (pin && kiln_http_etag_strong(u->etag)) {
		snprintf(cond, sizeof(cond), "If-Match: %s", u->etag);
		r->hdrs = curl_slist_append(r->hdrs, cond);
	} else if (pin && u->last_modified[0]) {
		snprintf(cond, sizeof(cond), "If-Unmodified-Since: %s",
			 u->last_modified);
		r->hdrs = curl_slist_append(r->hdrs, cond);
	}
	curl_easy_reset(c);
	if (u->s3) {
		struct curl_slist *t;

		/* a header, not CURLOPT_RANGE, so that the signature covers it */
		snprintf(rhdr, sizeof(rhdr), "Range: bytes=%s", range);
		t = curl_slist_append(r->hdrs, rhdr);
		if (!t || kiln_s3_sign(&hs->s3, c, &t, NULL, NULL)) {
			curl_slist_free_all(t ? t : r->hdrs);
			handle_put(hs, r->h);
			return -ENOMEM;
		}
		r->hdrs = t;
	} else {
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	}
	curl_easy_setopt(c, CURLOPT_URL, u->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "kiln");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 KILN_MIN(hs->connect_ms, (long)budget_ms));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
			 KILN_MIN(hs->request_ms, (long)budget_ms));
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, hs->stall_s);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER,
			 (hs->flags & KILN_REMOTE_INSECURE) ? 0L : 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST,
			 (hs->flags & KILN_REMOTE_INSECURE) ? 0L : 2L);
	if (hs->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, hs->ca_file);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, kiln_http_on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, kiln_http_on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	/* called about once a second even while nothing arrives */
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, &hs->base);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	atomic_fetch_add_explicit(&hs->base.count.requests, 1,
				  memory_order_relaxed);
	return 0;
}

/*
 * Request @r is over with curl's result @rc: give its handle back and
 * judge the reply @x. Sets *@why on failure.
 */
static enum kiln_http_outcome req_conclude(struct http_source *hs,
					   struct http_url *u,
					   struct kiln_http_reply *x,
					   struct http_req *r, CURLcode rc,
					   char *why, size_t why_cap)
{
	enum kiln_http_outcome o;

	curl_easy_setopt(r->c, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(r->hdrs);
	handle_put(hs, r->h);

	if (rc == CURLE_WRITE_ERROR && x->overflow) {
		if (x->status == 200) {
			snprintf(why, why_cap,
				 "the server ignores range requests (HTTP 200 to a range)");
			return KILN_HTTP_URL_FAILED;
		}
		snprintf(why, why_cap, "the server sent more bytes than asked for");
		return KILN_HTTP_RETRY;
	}
	if (rc != CURLE_OK) {
		snprintf(why, why_cap, "%s", r->errbuf[0] ? r->errbuf :
			 curl_easy_strerror(rc));
		switch (rc) {
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
		case CURLE_TOO_MANY_REDIRECTS:
			return KILN_HTTP_URL_FAILED;
		default:
			return KILN_HTTP_RETRY;
		}
	}
	o = kiln_http_check_status(x, why, why_cap);
	if (o == KILN_HTTP_URL_FAILED && u->s3)
		s3_reason(x, why, why_cap);
	return o;
}

/* One GET, made here and now: req_prepare(), perform, req_conclude(). */
static enum kiln_http_outcome request_once(struct http_source *hs,
					   struct http_url *u,
					   struct kiln_http_reply *x,
					   uint64_t off, size_t len, bool pin,
					   uint64_t budget_ms, char *why,
					   size_t why_cap)
{
	struct http_req r;

	if (req_prepare(hs, u, x, off, len, pin, budget_ms, &r)) {
		snprintf(why, why_cap, "out of memory");
		return KILN_HTTP_RETRY;
	}
	return req_conclude(hs, u, x, &r, curl_easy_perform(r.c), why,
			    why_cap);
}

/*
 * request_once(), and for an s3:// URL refused with 401 or 403 (the
 * credentials may have expired or been rotated) once more with the
 * credentials read again.
 */
static enum kiln_http_outcome request(struct http_source *hs,
				      struct http_url *u,
				      struct kiln_http_reply *x, uint64_t off,
				      size_t len, bool pin, uint64_t budget_ms,
				      char *why, size_t why_cap)
{
	uint64_t t0 = now_ms(), spent;
	enum kiln_http_outcome o = request_once(hs, u, x, off, len, pin,
						budget_ms, why, why_cap);

	if (o != KILN_HTTP_URL_FAILED || !u->s3 ||
	    (x->status != 401 && x->status != 403))
		return o;
	kiln_log(hs->base.lg, KILN_LOG_WARN,
		 "%s; reading the S3 credentials again", why);
	kiln_s3_reload(&hs->s3);
	spent = now_ms() - t0;
	if (spent >= budget_ms)
		return o;
	return request_once(hs, u, x, off, len, pin, budget_ms - spent, why,
			    why_cap);
}

/*
 * First contact with URL @u: GET its first @want bytes (fewer when it is
 * smaller) and record size and identity. *@size is the size to match, or
 * 0 to learn it.
 */
static enum kiln_http_outcome probe(struct http_source *hs,
				    struct http_url *u, uint8_t *buf,
				    size_t want, uint64_t *size, size_t *got,
				    uint64_t budget_ms, long *retry_after_ms,
				    char *why, size_t why_cap)
{
	struct kiln_http_reply x = { .dst = buf, .cap = want,
				     .whole_ok = true };
	enum kiln_http_outcome o = request(hs, u, &x, 0, want, false,
					   budget_ms, why, why_cap);

	*retry_after_ms = x.retry_after_ms;
	if (o == KILN_HTTP_CHANGED && x.status == 416) {
		snprintf(why, why_cap, "the object is empty (not an EROFS image)");
		return KILN_HTTP_URL_FAILED;
	}
	if (o != KILN_HTTP_DONE)
		return o;
	o = kiln_http_check_probe(&x, want, size, why, why_cap);
	if (o != KILN_HTTP_DONE)
		return o;
	*got = x.got;
	snprintf(u->etag, sizeof(u->etag), "%s",
		 kiln_http_etag_strong(x.etag) ? x.etag : "");
	snprintf(u->last_modified, sizeof(u->last_modified), "%s",
		 x.last_modified);
	u->probed = true;
	return KILN_HTTP_DONE;
}

/* Probe mirror @u on its first use; false when it cannot serve. */
static bool mirror_ready(struct http_source *hs, struct http_url *u,
			 uint64_t budget_ms)
{
	uint8_t one[1];
	uint64_t size = hs->base.size;
	size_t got;
	char why[512];
	long ra;
	enum kiln_http_outcome o;

	pthread_mutex_lock(&u->probe_lock);
	if (!u->probed && !u->dead) {
		o = probe(hs, u, one, 1, &size, &got, budget_ms, &ra, why,
			  sizeof(why));
		if (o != KILN_HTTP_DONE) {
			kiln_log(hs->base.lg, KILN_LOG_WARN, "mirror %s: %s",
				 u->url, why);
			if (o != KILN_HTTP_RETRY)
				u->dead = true;
		}
	}
	pthread_mutex_unlock(&u->probe_lock);
	return u->probed && !u->dead;
}

/* How messages name URL @u: the image's own goes without saying. */
static const char *url_name(const struct http_source *hs,
			    const struct http_url *u)
{
	static _Thread_local char buf[600];

	if (u == &hs->urls[0])
		return "";
	snprintf(buf, sizeof(buf), "mirror %.500s: ", u->url);
	return buf;
}

static bool all_dead(const struct http_source *hs)
{
	for (unsigned int k = 0; k < hs->nr_urls; k++)
		if (!hs->urls[k].dead)
			return false;
	return true;
}

/*
 * Bytes [@off, @off + @len) into @dst by @deadline, @tries made already:
 * retried, and served by the next URL when one fails for good.
 */
static int fetch_until(struct http_source *hs, void *dst, size_t len,
		       uint64_t off, uint64_t deadline, unsigned int tries)
{
	struct kiln_source *src = &hs->base;
	unsigned int k = atomic_load(&hs->current);
	char why[512] = "";

	if (atomic_load(&hs->changed))
		goto changed;
	for (;;) {
		struct http_url *u = &hs->urls[k % hs->nr_urls];
		struct kiln_http_reply x = { .dst = dst, .cap = len,
				  .whole_ok = !off && len == src->size };
		uint64_t now = now_ms(), wait;
		enum kiln_http_outcome o;

		if (atomic_load(&src->cancelled)) {
			/* closing: whoever closes knows why */
			kiln_log(src->lg, KILN_LOG_INFO,
				 "bytes %" PRIu64 "-%" PRIu64 ": cancelled (the image is being closed)",
				 off, off + len - 1);
			return -ECANCELED;
		}

		if (now >= deadline) {
			kiln_log(src->lg, KILN_LOG_ERROR,
				 "bytes %" PRIu64 "-%" PRIu64 ": no answer within %ld ms (%u tries): %s",
				 off, off + len - 1, hs->read_ms, tries, why);
			return -EIO;
		}
		if (u->dead) {
			if (all_dead(hs))
				break;
			k++;
			continue;
		}
		if (tries)
			atomic_fetch_add_explicit(&src->count.retries, 1,
						  memory_order_relaxed);
		tries++;
		if (!u->probed && !mirror_ready(hs, u, deadline - now)) {
			snprintf(why, sizeof(why), "mirror %s did not answer",
				 u->url);
			o = u->dead ? KILN_HTTP_URL_FAILED : KILN_HTTP_RETRY;
		} else {
			o = request(hs, u, &x, off, len, true, deadline - now,
				    why, sizeof(why));
			if (o == KILN_HTTP_DONE)
				o = kiln_http_check_reply(u->etag,
							  u->last_modified, &x,
							  off, len, src->size,
							  why, sizeof(why));
		}
		if (o == KILN_HTTP_DONE) {
			atomic_store(&hs->current, k % hs->nr_urls);
			atomic_fetch_add_explicit(&src->count.bytes_fetched,
						  len, memory_order_relaxed);
			return 0;
		}
		if (o == KILN_HTTP_CHANGED) {
			if (!atomic_exchange(&hs->changed, true))
				kiln_log(src->lg, KILN_LOG_ERROR,
					 "image changed on the server (%s%s%s); no more reads",
					 why, hs->nr_urls > 1 ? ": " : "",
					 hs->nr_urls > 1 ? u->url : "");
			goto changed;
		}
		if (o == KILN_HTTP_URL_FAILED) {
			kiln_log(src->lg, KILN_LOG_ERROR, "%s%s",
				 url_name(hs, u), why);
			u->dead = true;
			if (all_dead(hs))
				break;
			k++;
			continue;
		}
		/* aborted by the close: no retry to announce */
		if (atomic_load(&src->cancelled))
			continue;
		if (tries > hs->retries) {
			kiln_log(src->lg, KILN_LOG_ERROR,
				 "bytes %" PRIu64 "-%" PRIu64 ": giving up after %u tries: %s",
				 off, off + len - 1, tries, why);
			return -EIO;
		}
		wait = x.retry_after_ms >= 0 ? (uint64_t)x.retry_after_ms :
		       jitter(hs, 0, KILN_MIN(BACKOFF_MAX_MS,
					(uint64_t)BACKOFF_BASE_MS << (tries - 1)));
		now = now_ms();
		if (now + wait >= deadline) {
			kiln_log(src->lg, KILN_LOG_ERROR,
				 "bytes %" PRIu64 "-%" PRIu64 ": no answer within %ld ms (%u tries): %s",
				 off, off + len - 1, hs->read_ms, tries, why);
			return -EIO;
		}
		kiln_log(src->lg, KILN_LOG_WARN,
			 "bytes %" PRIu64 "-%" PRIu64 ": %s; retrying in %" PRIu64 " ms",
			 off, off + len - 1, why, wait);
		sleep_ms(src, wait);
		k++;
	}
	kiln_log(src->lg, KILN_LOG_ERROR, "no URL of the image can serve it");
	return -EIO;
changed:
	return -ESTALE;
}

static int http_fetch(struct kiln_source *src, void *dst, size_t len,
		      uint64_t off)
{
	struct http_source *hs = (struct http_source *)src;

	return fetch_until(hs, dst, len, off,
			   now_ms() + (uint64_t)hs->read_ms, 0);
}

/*
 * Ranges @f[0..@n) (at most MULTI_MAX) on URL @u, all in flight at once
 * on one multi handle (one HTTP/2 connection when the server offers it,
 * else a connection each, kept alive for the next batch). A range that
 * fails here is left with @f[i].err = 1 for the caller to retry.
 */
static void fetch_together(struct http_source *hs, struct http_url *u,
			   CURLM *m, struct kiln_fetch *f, unsigned int n,
			   uint64_t deadline)
{
	struct kiln_http_reply x[MULTI_MAX];
	struct http_req r[MULTI_MAX];
	CURLcode rc[MULTI_MAX];
	bool added[MULTI_MAX] = { false };
	int running = 0;

	for (unsigned int i = 0; i < n; i++) {
		uint64_t now = now_ms();

		f[i].err = 1;
		rc[i] = CURLE_ABORTED_BY_CALLBACK;	/* until it is done */
		x[i] = (struct kiln_http_reply){ .dst = f[i].dst,
						 .cap = f[i].len };
		if (now >= deadline ||
		    req_prepare(hs, u, &x[i], f[i].off, f[i].len, true,
				deadline - now, &r[i]))
			continue;
		/* wait for a connection that can carry several streams */
		curl_easy_setopt(r[i].c, CURLOPT_PIPEWAIT, 1L);
		if (curl_multi_add_handle(m, r[i].c) != CURLM_OK) {
			req_conclude(hs, u, &x[i], &r[i], CURLE_FAILED_INIT,
				     (char[8]){ 0 }, 8);
			continue;
		}
		added[i] = true;
	}
	do {
		CURLMsg *msg;
		int left;

		if (curl_multi_perform(m, &running) != CURLM_OK)
			break;
		while ((msg = curl_multi_info_read(m, &left)))
			for (unsigned int i = 0; i < n; i++)
				if (added[i] && msg->msg == CURLMSG_DONE &&
				    msg->easy_handle == r[i].c)
					rc[i] = msg->data.result;
		if (running && curl_multi_poll(m, NULL, 0, 100, NULL) !=
			       CURLM_OK)
			break;
	} while (running && !atomic_load(&hs->base.cancelled));
	for (unsigned int i = 0; i < n; i++) {
		char why[512] = "";
		enum kiln_http_outcome o;

		if (!added[i])
			continue;
		curl_multi_remove_handle(m, r[i].c);
		o = req_conclude(hs, u, &x[i], &r[i], rc[i], why, sizeof(why));
		if (o == KILN_HTTP_DONE)
			o = kiln_http_check_reply(u->etag, u->last_modified,
						  &x[i], f[i].off, f[i].len,
						  hs->base.size, why,
						  sizeof(why));
		if (o == KILN_HTTP_DONE) {
			f[i].err = 0;
			atomic_fetch_add_explicit(&hs->base.count.bytes_fetched,
						  f[i].len,
						  memory_order_relaxed);
		} else if (!atomic_load(&hs->base.cancelled)) {
			kiln_log(hs->base.lg, KILN_LOG_WARN,
				 "bytes %" PRIu64 "-%" PRIu64 ": %s; retrying",
				 f[i].off, f[i].off + f[i].len - 1, why);
		}
	}
}

/* A multi handle that carries several transfers on one HTTP/2 connection. */
static CURLM *multi_new(void)
{
	CURLM *m = curl_multi_init();

	if (m)
		curl_multi_setopt(m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
	return m;
}

static int http_fetch_many(struct kiln_source *src, struct kiln_fetch *f,
			   unsigned int n)
{
	struct http_source *hs = (struct http_source *)src;
	uint64_t deadline = now_ms() + (uint64_t)hs->read_ms;
	struct http_url *u = &hs->urls[atomic_load(&hs->current) %
				       hs->nr_urls];
	CURLM *m = NULL;
	bool own = false;
	int first = 0;

	for (unsigned int i = 0; i < n; i++)
		f[i].err = 1;		/* not yet fetched */
	if (!atomic_load(&hs->changed) && u->probed && !u->dead) {
		/* a second batch at the same time gets a multi handle of its own */
		if (!pthread_mutex_trylock(&hs->multi_lock)) {
			m = hs->multi;
			own = true;
		} else {
			m = multi_new();
		}
	}
	for (unsigned int i = 0; m && i < n; i += MULTI_MAX)
		fetch_together(hs, u, m, f + i, KILN_MIN(n - i, MULTI_MAX),
			       deadline);
	if (own)
		pthread_mutex_unlock(&hs->multi_lock);
	else if (m)
		curl_multi_cleanup(m);
	/* what failed together is tried alone, with the usual retries */
	for (unsigned int i = 0; i < n; i++) {
		if (f[i].err)
			f[i].err = fetch_until(hs, f[i].dst, f[i].len,
					       f[i].off, deadline, m ? 1 : 0);
		if (f[i].err && !first)
			first = f[i].err;
	}
	return first;
}

static void http_close(struct kiln_source *src)
{
	struct http_source *hs = (struct http_source *)src;

	/* first: its connections, which the easy handles no longer use */
	if (hs->multi)
		curl_multi_cleanup(hs->multi);
	pthread_mutex_destroy(&hs->multi_lock);
	while (hs->idle) {
		struct http_handle *h = hs->idle;

		hs->idle = h->next;
		curl_easy_cleanup(h->curl);
		free(h);
	}
	for (unsigned int k = 0; k < hs->nr_urls; k++) {
		free(hs->urls[k].url);
		pthread_mutex_destroy(&hs->urls[k].probe_lock);
	}
	free(hs->urls);
	free(hs->ca_file);
	if (hs->has_s3)
		kiln_s3_release(&hs->s3);
	free(hs->base.head);
	pthread_mutex_destroy(&hs->lock);
	free(hs);
}

static const struct kiln_source_ops http_ops = {
	.fetch = http_fetch,
	.fetch_many = http_fetch_many,
	.close = http_close,
};

static long pick(size_t have, size_t n, unsigned int v, unsigned int def)
{
	return (long)(have >= n && v ? v : def);
}

/* URL @u is s3:// URL @s: the http(s) URL it names, signed requests. */
static int s3_url(struct http_source *hs, struct http_url *u, const char *s,
		  const char *endpoint, const char *region)
{
	char why[512];
	int err;

	if (!hs->has_s3) {
		err = kiln_s3_init(&hs->s3, region, hs->base.lg);
		if (err)
			return err;
		hs->has_s3 = true;
	}
	err = kiln_s3_url(&u->url, s, endpoint, hs->s3.region,
			  hs->flags & KILN_REMOTE_S3_PATH_STYLE, why,
			  sizeof(why));
	if (err) {
		kiln_log(hs->base.lg, KILN_LOG_ERROR, "%s: %s", s, why);
		return err;
	}
	u->s3 = true;
	kiln_log(hs->base.lg, KILN_LOG_DEBUG, "%s is %s, %s", s, u->url,
		 hs->s3.creds.key_id[0] ? "signed" : "unsigned (no credentials)");
	return 0;
}

static int http_setup(struct http_source *hs, const char *url,
		      const struct kiln_remote_opts *o)
{
	size_t n = o ? o->struct_size : 0;
	const char *endpoint = NULL, *region = NULL;
	unsigned int mirrors = 0;
	int err;

#define AT(f) (offsetof(struct kiln_remote_opts, f) + sizeof(o->f))
	if (n >= AT(nr_mirrors) && o->mirrors)
		mirrors = o->nr_mirrors;
	hs->flags = n >= AT(flags) ? o->flags : 0;
	if (n >= AT(ca_file) && o->ca_file &&
	    !(hs->ca_file = strdup(o->ca_file)))
		return -ENOMEM;
	hs->connect_ms = pick(n, AT(connect_timeout_ms),
			      n ? o->connect_timeout_ms : 0, DEF_CONNECT_MS);
	hs->stall_s = (pick(n, AT(stall_timeout_ms),
			    n ? o->stall_timeout_ms : 0, DEF_STALL_MS) + 999) /
		      1000;
	hs->request_ms = pick(n, AT(request_timeout_ms),
			      n ? o->request_timeout_ms : 0, DEF_REQUEST_MS);
	hs->read_ms = pick(n, AT(read_timeout_ms),
			   n ? o->read_timeout_ms : 0, DEF_READ_MS);
	/* then fetch them here: a read still ends within the time limit */
	hs->base.wait_ms = (uint32_t)(hs->read_ms / 4);
	hs->retries = n >= AT(retries) && o->retries ?
		      (o->retries == ~0u ? 0 : o->retries) : DEF_RETRIES;
	if (n >= AT(s3_region)) {
		endpoint = o->s3_endpoint;
		region = o->s3_region;
	}
#undef AT
	hs->urls = calloc(1 + (size_t)mirrors, sizeof(*hs->urls));
	if (!hs->urls)
		return -ENOMEM;
	for (unsigned int k = 0; k <= mirrors; k++) {
		const char *s = k ? o->mirrors[k - 1] : url;
		struct http_url *u = &hs->urls[k];

		if (!kiln_is_url(s)) {
			kiln_log(hs->base.lg, KILN_LOG_ERROR,
				 "mirror %s: not an http://, https:// or s3:// URL",
				 s);
			return -EINVAL;
		}
		pthread_mutex_init(&u->probe_lock, NULL);
		hs->nr_urls = k + 1;
		if (kiln_s3_is_url(s)) {
			err = s3_url(hs, u, s, endpoint, region);
			if (err)
				return err;
		} else if (!(u->url = strdup(s))) {
			return -ENOMEM;
		}
	}
	return 0;
}

int kiln_source_open_http(struct kiln_source **out, const char *url,
			  const struct kiln_remote_opts *o, size_t head_want,
			  const struct kiln_logger *lg)
{
	struct http_source *hs;
	uint64_t size = 0, deadline;
	unsigned int tries = 0, dead = 0, k = 0;
	char why[512] = "";
	int err;

	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return -ENOMEM;
	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	hs->base.ops = &http_ops;
	hs->base.lg = lg;
	pthread_mutex_init(&hs->lock, NULL);
	pthread_mutex_init(&hs->multi_lock, NULL);
	hs->multi = multi_new();
	atomic_init(&hs->rng, (uint64_t)now_ms() * 0x9E3779B97F4A7C15ull | 1);
	err = http_setup(hs, url, o);
	if (!err && !(hs->base.head = malloc(head_want)))
		err = -ENOMEM;
	if (err) {
		http_close(&hs->base);
		return err;
	}
	deadline = now_ms() + (uint64_t)hs->read_ms;
	/* the first URL that answers gives the size and the identity */
	for (;;) {
		struct http_url *u = &hs->urls[k];
		uint64_t now = now_ms(), wait;
		enum kiln_http_outcome r;
		long ra;

		if (u->dead) {
			k = (k + 1) % hs->nr_urls;
			continue;
		}
		if (now >= deadline ||
		    (tries > hs->retries && tries >= hs->nr_urls)) {
			kiln_log(lg, KILN_LOG_ERROR, "cannot open: %s", why);
			http_close(&hs->base);
			return -EIO;
		}
		tries++;
		r = probe(hs, u, hs->base.head, head_want, &size,
			  &hs->base.head_len, deadline - now, &ra, why,
			  sizeof(why));
		if (r == KILN_HTTP_DONE) {
			atomic_store(&hs->current, k);
			atomic_fetch_add(&hs->base.count.bytes_fetched,
					 hs->base.head_len);
			break;
		}
		if (r != KILN_HTTP_RETRY) {
			u->dead = true;
			kiln_log(lg, KILN_LOG_ERROR, "%s%s", url_name(hs, u),
				 why);
			if (++dead == hs->nr_urls) {
				http_close(&hs->base);
				return strstr(why, "empty") ? -KILN_ENOTEROFS :
				       -EIO;
			}
			k = (k + 1) % hs->nr_urls;
			continue;
		}
		if (tries > hs->retries && tries >= hs->nr_urls)
			continue;	/* the check above gives up */
		wait = ra >= 0 ? (uint64_t)ra :
		       jitter(hs, 0, KILN_MIN(BACKOFF_MAX_MS,
				(uint64_t)BACKOFF_BASE_MS << (tries - 1)));
		kiln_log(lg, KILN_LOG_WARN, "%s%s; retrying in %" PRIu64 " ms",
			 url_name(hs, u), why, wait);
		sleep_ms(&hs->base, wait);
		k = (k + 1) % hs->nr_urls;
	}
	hs->base.size = size;
	if (!hs->urls[k].etag[0] && !hs->urls[k].last_modified[0])
		kiln_log(lg, KILN_LOG_WARN,
			 "the server names no ETag or Last-Modified: a replaced image is noticed only by its size");
	snprintf(hs->base.identity, sizeof(hs->base.identity), "%" PRIu64 " %s",
		 size, hs->urls[k].etag[0] ? hs->urls[k].etag :
		 hs->urls[k].last_modified);
	*out = &hs->base;
	return 0;
}
