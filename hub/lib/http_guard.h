/* http_guard.h: what keeps idle and slow clients from holding an HTTP
 * listener (http.c's, internal to it): a deadline for each request to be
 * read in full, counted from the connection's opening or from the previous
 * answer on a kept-alive connection, where libmicrohttpd has only an idle
 * time-out that every byte resets; and the count of what was refused and
 * closed, logged once a minute at most instead of a line per connection.
 *
 * libmicrohttpd itself refuses connections past its per-address and total
 * limits (MHD_OPTION_PER_IP_CONNECTION_LIMIT, MHD_OPTION_CONNECTION_LIMIT);
 * the guard only counts them. It closes a late request with shutdown() on
 * the connection's socket, which libmicrohttpd then reads as the client's
 * end: it has no call to close a connection from outside its callbacks.
 *
 * Threads: the guard has a thread of its own (the deadline and the log);
 * its functions may be called from any of libmicrohttpd's threads. */
#ifndef TXHUB_HTTP_GUARD_H
#define TXHUB_HTTP_GUARD_H

#include <microhttpd.h>
#include <stddef.h>

typedef struct http_guard http_guard;

typedef struct {
	const char *keys;         /* the keys' prefix in log lines: "http", "console" (copied) */
	unsigned max_connections; /* as given to libmicrohttpd, for the log */
	unsigned per_address;     /* the same */
	unsigned request_ms;      /* the deadline; 0: none */
} http_guard_limits;

/* Start the guard's thread. Returns NULL with a reason in err. */
http_guard *http_guard_start(const http_guard_limits *limits, char *err, size_t errsz);
/* Stop the thread and free; after MHD_stop_daemon (every connection has
 * been closed by then). NULL is fine. */
void http_guard_stop(http_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION, with the guard as its closure: a
 * connection opened (its first request's deadline starts) or closed. */
void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* The request on c has been read in full (head and body): its deadline
 * no longer applies. */
void http_guard_request_in(http_guard *g, struct MHD_Connection *c);
/* The request on c has been answered: the deadline of the next one on the
 * same connection starts now. */
void http_guard_request_done(http_guard *g, struct MHD_Connection *c);
/* A message of libmicrohttpd's (its format string): returns 0 when the
 * caller is to log it, 1 when it is counted for the once-a-minute line
 * instead: a connection refused at a limit, or any message past the first
 * 10 in a minute (most are about one client's request: a flood of bad
 * requests would write a line each). */
int http_guard_library_message(http_guard *g, const char *fmt);

#endif
