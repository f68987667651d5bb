/* checkback_http.h: the HTTP side of the checker's requests
 * (checkback_http.c): a request slot and the host it is for, the hosts'
 * queues that checkback.per_host counts by, a request's headers and its
 * answer's body. The checker's thread only. */
#ifndef TXHUB_CHECKBACK_HTTP_H
#define TXHUB_CHECKBACK_HTTP_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "checkback_proto.h"
#include "metrics.h"
#include "topics.h"

typedef enum {
	SLOT_FREE,
	SLOT_WAITING, /* claimed; its host has no connection to spare yet */
	SLOT_RUNNING, /* its request is in flight */
} slot_state;

typedef struct host_load host_load;

typedef struct slot {
	slot_state state;
	CURL *easy;
	struct curl_slist *headers;
	char *biz_id, *message_key;
	char *url;                /* the request URL, built when claimed */
	char *traceparent, *tracestate; /* sent as headers (docs/consumers.md: Trace context), or NULL */
	char trace_id[33];        /* of traceparent, "" without: for log lines */
	host_load *host;
	struct slot *next_waiting; /* its host's queue */
	tp_key tp;
	int32_t claimed_attempts;
	metrics_tenant tenant;    /* the message's tenant label */
	int64_t timeout_ms;       /* checkback.timeout_ms when claimed: the lease is for it */
	int64_t start_by_ms;      /* a request started later could outlast the lease */
	int64_t started_ms;
	char *body;
	size_t body_len;
	int too_long;
	char curl_err[CURL_ERROR_SIZE];
} slot;

/* One host (name in lower case, and port) that claimed rows are for. */
struct host_load {
	char *key;                 /* "host:port"; NULL: the entry is unused */
	size_t running;            /* its requests in flight */
	slot *waiting, *last_waiting; /* claimed rows waiting for it, oldest first */
};

/* The body callback (CURLOPT_WRITEFUNCTION; opaque: the slot): the
 * answer kept in the slot, at most CHECKBACK_BODY_MAX bytes. */
size_t checkback_on_body(char *data, size_t size, size_t nmemb, void *opaque);

/* The entry of hosts[0..*nhosts) for key (taken over: freed when not
 * kept), a new one when none is, or NULL when key is NULL. */
host_load *checkback_host_get(host_load *hosts, size_t *nhosts, char *key);

/* Let go of h when nothing runs or waits for it any more. */
void checkback_host_put(host_load *hosts, size_t *nhosts, host_load *h);

/* Queue s on h, last. */
void checkback_host_wait(host_load *h, slot *s);

/* Take s off h's queue, if it is on it. */
void checkback_host_unwait(host_load *h, slot *s);

/* "host:port" with the host in lower case (malloc'd; NULL when out of
 * memory): what per_host counts by. */
char *checkback_host_key(const checkback_url *u);

/* A request's headers (secret: checkback.secret, "" for none); NULL when
 * out of memory. */
struct curl_slist *checkback_request_headers(const char *secret, const slot *s);

#endif
