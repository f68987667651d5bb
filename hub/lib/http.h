/* http.h: the hub's small HTTP servers (metrics and health on `txhub run`,
 * the web console on `txhub console`), on libmicrohttpd: a maintained
 * server with threads of its own, so no request ever runs on the hub's hot
 * path.
 *
 * Routes are matched on method and exact path. Handlers run on a server
 * thread, one request at a time per connection: by default one thread
 * serves every connection (handlers must be quick: /metrics), with
 * http_options.thread_per_connection each connection has its own (handlers
 * may wait on PostgreSQL: the console). Several connections may run
 * handlers at once, so a handler must be thread-safe. */
#ifndef TXHUB_HTTP_H
#define TXHUB_HTTP_H

#include <stddef.h>
#include <sys/socket.h>

#include "sbuf.h"

/* Largest request body read by default (a larger one is answered 413). */
#define HTTP_BODY_MAX 65536

typedef struct http_request http_request;

/* A request header, query argument or cookie, or NULL. Valid during the
 * handler call. */
const char *http_header(const http_request *r, const char *name);
const char *http_query(const http_request *r, const char *name);
const char *http_cookie(const http_request *r, const char *name);
const char *http_method(const http_request *r);
const char *http_path(const http_request *r);
/* The request body (POST), NUL-terminated, and its length. */
const char *http_body(const http_request *r, size_t *len);
/* Check the query arguments: every name is one of allowed (NULL-
 * terminated), none is given twice, no value holds a NUL byte (%00).
 * Returns 0, or -1 with a reason naming the argument in err. */
int http_query_check(const http_request *r, const char *const *allowed, char *err,
                     size_t errsz);
/* Append the request's path and its query arguments, percent-encoded
 * again ("/message?biz=shop&key=a%20b"), to out: where to come back to. */
void http_request_target(const http_request *r, sbuf *out);
/* The peer's address as text (for logs). */
const char *http_peer(const http_request *r);

typedef struct {
	int status;               /* default 200 */
	const char *content_type; /* a string literal; default text/plain */
	sbuf body;                /* freed by the server */
	char headers[4096];       /* extra "Name: value\n" lines, set with http_reply_header */
} http_reply;

/* Add a response header (e.g. Set-Cookie, Location). */
void http_reply_header(http_reply *reply, const char *name, const char *value);

typedef void (*http_handler)(void *opaque, const http_request *req, http_reply *reply);

typedef struct {
	const char *method; /* "GET", "POST", ... */
	const char *path;   /* exact; a path ending in '/' matches everything under it */
	http_handler fn;
	void *opaque;
} http_route;

typedef struct http_server http_server;

/* How a server runs; a zeroed struct (or NULL) gives the defaults. */
typedef struct {
	int thread_per_connection; /* a thread per connection, for handlers that block */
	unsigned max_connections;  /* open at once; 0: 64 */
	unsigned max_per_address;  /* open at once from one client address; 0: no limit */
	/* a request's head and body must be in within this, counted from the
	 * connection's opening or the previous answer on it; 0: no deadline
	 * (only the idle time-out of 10 s that each byte resets) */
	unsigned request_timeout_ms;
	/* the prefix of the listener's keys, for the log ("http": http.listen,
	 * http.max_connections, ...); NULL: "http" */
	const char *keys;
	size_t body_max;           /* largest request body; 0: HTTP_BODY_MAX */
	/* "Name: value\n" lines added to every reply, the server's own 404, 405
	 * and 413 included (security headers); copied; NULL: none */
	const char *headers;
} http_options;

/* Parse "host:port" or "[v6]:port" (port 1..65535). Returns 0, or -1 with
 * a reason in err. Pure: nothing is resolved. */
int http_listen_valid(const char *listen, char *err, size_t errsz);
/* The same, splitting it: host (without the brackets of an IPv6 address)
 * and port as text. */
int http_listen_split(const char *listen, char *host, size_t hostsz, char *port, size_t portsz,
                      char *err, size_t errsz);

/* Listen on `listen` (resolved now) and serve routes[0..n) (copied; the
 * opaque pointers must outlive the server). Unknown paths get 404, a known
 * path with another method 405 (with an Allow header), a body larger than
 * body_max 413 (before it is read, when its Content-Length says so). A
 * head whose body's length could be read two ways (two Content-Length
 * headers, Content-Length with Transfer-Encoding, a space before a
 * header's colon) gets 400 and the connection is closed; so does an
 * HTTP/1.1 request without Host. Connections past the limits are closed
 * at once, a request late for its deadline by closing its connection;
 * both are counted and logged once a minute at most (http_guard.h).
 * opts may be NULL. Returns NULL with a reason in err. */
http_server *http_start(const char *listen, const http_route *routes, size_t n,
                        const http_options *opts, char *err, size_t errsz);

/* Stop serving (waits for handlers in progress) and free. NULL is fine. */
void http_stop(http_server *s);

#endif
