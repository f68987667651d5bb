/* checkback_http.c: see checkback_http.h. */
#include "checkback_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trace.h"
#include "txhub.h"

size_t checkback_on_body(char *data, size_t size, size_t nmemb, void *opaque)
{
	slot *s = opaque;
	size_t n = size * nmemb;
	if (s->body_len + n > CHECKBACK_BODY_MAX) {
		s->too_long = 1;
		return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
	}
	char *b = realloc(s->body, s->body_len + n + 1);
	if (!b)
		return 0;
	memcpy(b + s->body_len, data, n);
	s->body = b;
	s->body_len += n;
	b[s->body_len] = '\0';
	return n;
}

/* ---- hosts: requests in flight and rows waiting, per host ---- */

/* The entry for key (taken over: freed here when it is not kept), or NULL
 * when out of memory. There are never more hosts than busy slots, so the
 * nslots entries always have room. */
host_load *checkback_host_get(host_load *hosts, size_t *nhosts, char *key)
{
	if (!key)
		return NULL;
	host_load *unused = NULL;
	for (size_t i = 0; i < *nhosts; i++) {
		host_load *h = &hosts[i];
		if (h->key && strcmp(h->key, key) == 0) {
			free(key);
			return h;
		}
		if (!h->key && !unused)
			unused = h;
	}
	if (!unused)
		unused = &hosts[(*nhosts)++];
	unused->key = key;
	return unused;
}

/* Let go of h when nothing runs or waits for it any more. */
void checkback_host_put(host_load *hosts, size_t *nhosts, host_load *h)
{
	if (h->running > 0 || h->waiting)
		return;
	free(h->key);
	memset(h, 0, sizeof *h);
	while (*nhosts > 0 && !hosts[*nhosts - 1].key)
		(*nhosts)--;
}

void checkback_host_wait(host_load *h, slot *s)
{
	s->next_waiting = NULL;
	if (h->last_waiting)
		h->last_waiting->next_waiting = s;
	else
		h->waiting = s;
	h->last_waiting = s;
}

/* Take s off h's queue, if it is on it. */
void checkback_host_unwait(host_load *h, slot *s)
{
	slot *prev = NULL;
	for (slot *w = h->waiting; w; prev = w, w = w->next_waiting) {
		if (w != s)
			continue;
		if (prev)
			prev->next_waiting = w->next_waiting;
		else
			h->waiting = w->next_waiting;
		if (h->last_waiting == w)
			h->last_waiting = prev;
		w->next_waiting = NULL;
		return;
	}
}

/* "host:port" with the host in lower case: what per_host counts by. Two
 * names of one server count apart, as they do for libcurl's limit. */
char *checkback_host_key(const checkback_url *u)
{
	size_t n = strlen(u->host) + 24;
	char *k = malloc(n);
	if (!k)
		return NULL;
	snprintf(k, n, "%s:%ld", u->host, u->port);
	for (char *p = k; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	return k;
}

/* The request headers: the attempt, and the signature when a secret is
 * set, made now so that its timestamp is the request's. NULL when out of
 * memory. */
struct curl_slist *checkback_request_headers(const char *secret, const slot *s)
{
	char att[40], ts_h[64], sig_h[100], sig[65];
	char tp_h[TRACE_PARENT_MAX + 16], tst_h[TRACE_STATE_MAX + 16];
	snprintf(att, sizeof att, "X-Txhub-Attempt: %d", s->claimed_attempts + 1);
	const char *h[6] = {att, NULL, NULL, NULL, NULL, NULL};
	size_t n = 1;
	long long ts = (long long)time(NULL);
	if (*secret && txhub_checkback_signature(secret, ts, s->biz_id, s->message_key, sig,
	                                         sizeof sig) == 0) {
		snprintf(ts_h, sizeof ts_h, "X-Txhub-Timestamp: %lld", ts);
		snprintf(sig_h, sizeof sig_h, "X-Txhub-Signature: v2=%s", sig);
		h[n++] = ts_h;
		h[n++] = sig_h;
	}
	/* valid W3C values only (take_check() leaves out any other): nothing
	 * in them can end the header line or start another */
	if (s->traceparent) {
		snprintf(tp_h, sizeof tp_h, "traceparent: %s", s->traceparent);
		h[n++] = tp_h;
	}
	if (s->traceparent && s->tracestate) {
		snprintf(tst_h, sizeof tst_h, "tracestate: %s", s->tracestate);
		h[n++] = tst_h;
	}
	h[n++] = "Accept: application/json, text/plain";
	struct curl_slist *l = NULL;
	for (size_t i = 0; i < n; i++) {
		struct curl_slist *more = curl_slist_append(l, h[i]);
		if (!more) {
			curl_slist_free_all(l);
			return NULL;
		}
		l = more;
	}
	return l;
}
