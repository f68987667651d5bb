/* httpd.h: a small HTTP/1.1 server for the tests and the check-back
 * benchmark, standing in for a producer's check-back endpoint and an alert
 * webhook. One thread per connection, keep-alive, answers decided by a
 * handler the caller supplies. Listens on 127.0.0.1, any free port.
 * h_httpd_start_small() is the other kind: the smallest endpoint a
 * producer may run. */
#ifndef TXHUB_HTTPD_H
#define TXHUB_HTTPD_H

#include <stddef.h>

typedef struct {
	char method[16];
	char path[512];     /* without the query */
	char query[2048];   /* after '?', raw */
	char headers[4096]; /* "name: value\n" lines, names lower-cased */
	char *body;         /* NUL-terminated */
	size_t body_len;
} h_http_request;

typedef struct {
	int status;            /* default 200 */
	char body[512];        /* default empty */
	size_t pad_to;         /* pad the body with spaces up to this many bytes */
	int delay_ms;          /* wait this long before answering */
	char location[256];    /* a Location header, when set */
} h_http_answer;

/* Called from a connection thread; must be thread-safe. */
typedef void (*h_http_handler)(void *opaque, const h_http_request *req, h_http_answer *ans);

typedef struct h_httpd h_httpd;

h_httpd *h_httpd_start(h_http_handler fn, void *opaque);
/* A deliberately small endpoint: one thread that accepts, reads one
 * request, answers it in HTTP/1.0 with "Connection: close" and closes,
 * then takes the next; its listen backlog is `backlog` (Linux queues
 * backlog + 1 connections and drops further SYNs, which the client resends
 * after a second). delay_ms is not honoured: it answers at once. */
h_httpd *h_httpd_start_small(h_http_handler fn, void *opaque, int backlog);
int h_httpd_port(const h_httpd *s);
void h_httpd_stop(h_httpd *s);

/* Requests answered or being answered, and the most ever handled at once. */
long h_httpd_requests(h_httpd *s);
long h_httpd_max_in_flight(h_httpd *s);
/* Connections accepted so far. */
long h_httpd_connections(h_httpd *s);
/* The small server only: the most connections it ever had at once, the one
 * it accepted plus those waiting in its accept queue then (sampled at each
 * accept with TCP_INFO on the listening socket). */
long h_httpd_max_connections(h_httpd *s);

/* The query parameter `name`, percent-decoded ('+' stays '+'), into out.
 * Returns 1 when present. */
int h_http_param(const h_http_request *r, const char *name, char *out, size_t outsz);
/* The header `name` (lower-case) into out. Returns 1 when present. */
int h_http_header(const h_http_request *r, const char *name, char *out, size_t outsz);

/* A port with nothing listening on it (for "connection refused"). */
int h_free_port(void);

/* An alert webhook for the tests: a server that answers 200 and keeps the
 * first H_WEBHOOK_MAX bodies POSTed to it. */
#define H_WEBHOOK_MAX 16
typedef struct h_webhook h_webhook;
h_webhook *h_webhook_start(void);
int h_webhook_port(const h_webhook *w);
/* Bodies received so far. */
int h_webhook_count(h_webhook *w);
/* Body i (0 <= i < h_webhook_count()) into out; returns out. */
const char *h_webhook_body(h_webhook *w, int i, char *out, size_t outsz);
void h_webhook_stop(h_webhook *w);

#endif
