/* rawhttp.h: HTTP as an attacker speaks it, over raw sockets, for the
 * tests of the hub's listeners (http.listen, console.listen): requests
 * with the exact bytes given (libcurl would fix or refuse them), from a
 * chosen client address (127.0.0.2 is another address on loopback), and a
 * flood of idle and trickling connections from one address. Every socket
 * opened is closed before a function returns (the flood's by
 * h_flood_stop). Servers are reached on 127.0.0.1. And the other way
 * round, a server that keeps the exact bytes a client sent it. */
#ifndef TXHUB_RAWHTTP_H
#define TXHUB_RAWHTTP_H

#include <stddef.h>

typedef struct {
	char data[256 * 1024]; /* what the server sent, NUL-terminated (cut to fit) */
	size_t len;
	int truncated;   /* more came than data holds */
	int closed;      /* the server closed the connection (end of stream or reset) */
	long first_ms;   /* from before the connect to the whole status line; -1: none came */
	long closed_ms;  /* from before the connect to the server's close; -1: open */
} h_raw_reply;

/* Connect from address `from` to 127.0.0.1:port, send len bytes, and read
 * until the server closes the connection or timeout_ms pass. Returns 0, or
 * -1 when the connection could not be made. */
int h_raw_request(const char *from, int port, const char *bytes, size_t len, int timeout_ms,
                  h_raw_reply *out);
/* The status code of the reply's first line, 0 when it has none. */
int h_raw_status(const h_raw_reply *r);

/* Open a connection from `from` and send head, then 'a' for ever, one byte
 * every every_ms. Returns the ms until the server closed it, or -1 when it
 * was still open after max_ms. */
long h_raw_trickle(const char *from, int port, const char *head, int every_ms, int max_ms);

/* Raise the soft limit on open files to at least n (up to the hard limit);
 * returns the limit now in force. */
long h_raise_nofile(long n);

typedef struct h_flood h_flood;
typedef struct {
	long opened;        /* connections opened in all */
	long server_closed; /* of them, closed by the server (refused or cut) */
} h_flood_stats;

/* From address `from`, hold `idle` connections to 127.0.0.1:port that send
 * nothing and `trickle` that send one byte of a request head that never
 * ends every every_ms; every connection the server closes is opened again
 * at the next turn (every every_ms), at most max_opened in all. On a
 * thread of its own, until h_flood_stop(). NULL when the open-file limit
 * cannot hold it. */
h_flood *h_flood_start(const char *from, int port, int idle, int trickle, int every_ms,
                       long max_opened);
/* Stop, close every socket, free; the counts in *stats. */
void h_flood_stop(h_flood *f, h_flood_stats *stats);

/* Send each request whose length framing is ambiguous (two Content-Length
 * headers, equal and different; "Content-Length :" with a space before the
 * colon; Content-Length with Transfer-Encoding: chunked) as `method path`
 * with Host: 127.0.0.1:port from 127.0.0.2, and check (Criterion
 * asserts) that each is answered 400 and its connection closed; the same
 * request with one Content-Length (control) is answered, not 400. extra:
 * more header lines ("Name: value\r\n"...) for every request, or "". */
void h_raw_expect_length_refusals(int port, const char *method, const char *path,
                                  const char *extra);

/* ---- a raw server: the exact bytes a client (the hub) sends ---- */

typedef struct h_raw_server h_raw_server;

/* Everything one connection brought, NUL-terminated (cut to fit). */
typedef struct {
	char data[16 * 1024];
	size_t len;
	int truncated;
} h_raw_conn;

/* Listen on 127.0.0.1 (a free port) on a thread of its own: each
 * connection, one at a time, is read to the end of its request head,
 * answered `answer` (a whole HTTP response, sent as it is; say
 * "Connection: close" in it) and read on until the client closes it (at
 * most 10 s), so that whatever a client sent after its request (a
 * smuggled second one) is kept with it. NULL when it cannot listen. */
h_raw_server *h_raw_server_start(const char *answer);
int h_raw_server_port(const h_raw_server *s);
/* The connections done so far (at most max into out); returns how many
 * were done in all. */
size_t h_raw_server_conns(h_raw_server *s, h_raw_conn *out, size_t max);
void h_raw_server_stop(h_raw_server *s);

#endif
