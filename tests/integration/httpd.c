/* httpd.c: see httpd.h. Enough HTTP/1.1 for curl: request line, headers,
 * Content-Length bodies, keep-alive (the small server: HTTP/1.0 answers,
 * one per connection). Not for anything but tests. */
#include "httpd.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
	struct conn *next;
	int fd;
	pthread_t thread;
	struct h_httpd *srv;
} conn;

struct h_httpd {
	int lfd;
	int port;
	h_http_handler fn;
	void *opaque;
	pthread_t accept_thread;
	pthread_mutex_t mu;
	conn *conns;
	int stopping;
	long requests, in_flight, max_in_flight, connections;
	long max_connections; /* the small server's */
};

static int stopping(h_httpd *s)
{
	pthread_mutex_lock(&s->mu);
	int v = s->stopping;
	pthread_mutex_unlock(&s->mu);
	return v;
}

static void nap(h_httpd *s, int ms)
{
	while (ms > 0 && !stopping(s)) {
		int step = ms < 10 ? ms : 10;
		struct timespec ts = {0, step * 1000000L};
		nanosleep(&ts, NULL);
		ms -= step;
	}
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static const char *reason_of(int status)
{
	switch (status) {
	case 200: return "OK";
	case 302: return "Found";
	case 404: return "Not Found";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Status";
	}
}

/* Parse the head in buf (NUL-terminated, ends with the blank line). */
static int parse_head(const char *buf, h_http_request *r, size_t *content_length)
{
	const char *eol = strstr(buf, "\r\n");
	char target[2600];
	if (!eol || sscanf(buf, "%15s %2599s", r->method, target) != 2)
		return -1;
	char *q = strchr(target, '?');
	if (q) {
		*q = '\0';
		if (strlen(q + 1) >= sizeof r->query)
			return -1;
		memcpy(r->query, q + 1, strlen(q + 1) + 1);
	}
	if (strlen(target) >= sizeof r->path)
		return -1;
	memcpy(r->path, target, strlen(target) + 1);
	*content_length = 0;
	size_t ho = 0;
	for (const char *line = eol + 2; *line && strncmp(line, "\r\n", 2) != 0;) {
		const char *end = strstr(line, "\r\n");
		if (!end)
			break;
		const char *colon = memchr(line, ':', (size_t)(end - line));
		if (colon) {
			const char *v = colon + 1;
			while (*v == ' ')
				v++;
			int n = snprintf(r->headers + ho, sizeof r->headers - ho, "%.*s: %.*s\n",
			                 (int)(colon - line), line, (int)(end - v), v);
			for (int i = 0; i < (int)(colon - line) && ho + (size_t)i < sizeof r->headers; i++)
				r->headers[ho + (size_t)i] = (char)tolower((unsigned char)r->headers[ho + (size_t)i]);
			if (n > 0 && ho + (size_t)n < sizeof r->headers)
				ho += (size_t)n;
			if ((size_t)(colon - line) == 14 && strncasecmp(line, "content-length", 14) == 0)
				*content_length = (size_t)strtoul(v, NULL, 10);
		}
		line = end + 2;
	}
	return 0;
}

/* Read one request from fd into a new h_http_request (the caller frees it
 * and its body). buf holds cap + 1 bytes and *len of them are read ahead
 * from an earlier request; what follows this one stays in buf. */
static h_http_request *read_request(int fd, char *buf, size_t cap, size_t *len)
{
	char *head_end;
	buf[*len] = '\0';
	while (!(head_end = strstr(buf, "\r\n\r\n"))) {
		if (*len == cap)
			return NULL;
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		if (n <= 0)
			return NULL;
		*len += (size_t)n;
		buf[*len] = '\0';
	}
	size_t head_len = (size_t)(head_end - buf) + 4;
	h_http_request *req = calloc(1, sizeof *req);
	size_t clen = 0;
	if (!req || parse_head(buf, req, &clen) != 0 || clen > cap - head_len)
		goto fail;
	while (*len < head_len + clen) {
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		if (n <= 0)
			goto fail;
		*len += (size_t)n;
	}
	req->body = malloc(clen + 1);
	if (req->body) {
		memcpy(req->body, buf + head_len, clen);
		req->body[clen] = '\0';
		req->body_len = clen;
	}
	memmove(buf, buf + head_len + clen, *len - head_len - clen);
	*len -= head_len + clen;
	return req;
fail:
	free(req);
	return NULL;
}

/* Send ans on fd: HTTP/1.1 kept alive, or (http10) HTTP/1.0 with
 * "Connection: close". Returns 0 when sent. */
static int write_answer(int fd, const h_http_answer *ans, int http10)
{
	size_t blen = strlen(ans->body);
	size_t total = ans->pad_to > blen ? ans->pad_to : blen;
	char head[512];
	int hn = snprintf(head, sizeof head,
	                  "HTTP/1.%d %d %s\r\nContent-Type: text/plain\r\n"
	                  "Content-Length: %zu\r\n%s%s%s%s\r\n",
	                  http10 ? 0 : 1, ans->status, reason_of(ans->status), total,
	                  http10 ? "Connection: close\r\n" : "",
	                  ans->location[0] ? "Location: " : "", ans->location,
	                  ans->location[0] ? "\r\n" : "");
	/* head and body in one send: two small writes would meet Nagle's
	 * algorithm and the client's delayed ACK (40 ms) */
	char *out = malloc((size_t)hn + total + 1);
	if (!out)
		return -1;
	memcpy(out, head, (size_t)hn);
	memset(out + hn, ' ', total);
	memcpy(out + hn, ans->body, blen);
	int rc = send_all(fd, out, (size_t)hn + total);
	free(out);
	return rc;
}

static void *serve(void *arg)
{
	conn *c = arg;
	h_httpd *s = c->srv;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	h_http_request *req;
	while (buf && !stopping(s) && (req = read_request(c->fd, buf, cap, &len))) {
		pthread_mutex_lock(&s->mu);
		s->requests++;
		if (++s->in_flight > s->max_in_flight)
			s->max_in_flight = s->in_flight;
		pthread_mutex_unlock(&s->mu);

		h_http_answer *ans = calloc(1, sizeof *ans);
		int rc = -1;
		if (ans) {
			ans->status = 200;
			s->fn(s->opaque, req, ans);
			if (ans->delay_ms > 0)
				nap(s, ans->delay_ms);
			rc = write_answer(c->fd, ans, 0);
		}
		pthread_mutex_lock(&s->mu);
		s->in_flight--;
		pthread_mutex_unlock(&s->mu);
		free(ans);
		free(req->body);
		free(req);
		if (rc != 0)
			break;
	}
	free(buf);
	return NULL;
}

/* The small server's connection count at an accept: this one and those
 * still in the accept queue (for a listening socket, Linux reports the
 * queue's length in tcpi_unacked). */
static void note_backlog(h_httpd *s)
{
	struct tcp_info ti;
	socklen_t tl = sizeof ti;
	memset(&ti, 0, sizeof ti);
	getsockopt(s->lfd, IPPROTO_TCP, TCP_INFO, &ti, &tl);
	pthread_mutex_lock(&s->mu);
	s->connections++;
	if (1 + (long)ti.tcpi_unacked > s->max_connections)
		s->max_connections = 1 + (long)ti.tcpi_unacked;
	pthread_mutex_unlock(&s->mu);
}

/* The small server: one connection at a time, one request per connection,
 * on the accepting thread itself. */
static void *small_loop(void *arg)
{
	h_httpd *s = arg;
	size_t cap = 1 << 16;
	char *buf = malloc(cap + 1);
	while (buf) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			break; /* shut down */
		}
		note_backlog(s);
		/* a client that connects and never writes must not stall it for good */
		struct timeval tv = {2, 0};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		size_t len = 0;
		h_http_request *req = read_request(fd, buf, cap, &len);
		h_http_answer ans;
		memset(&ans, 0, sizeof ans);
		ans.status = 200;
		if (req) {
			pthread_mutex_lock(&s->mu);
			s->requests++;
			s->max_in_flight = 1;
			pthread_mutex_unlock(&s->mu);
			s->fn(s->opaque, req, &ans);
			write_answer(fd, &ans, 1);
			free(req->body);
			free(req);
		}
		close(fd);
	}
	free(buf);
	return NULL;
}

static void *accept_loop(void *arg)
{
	h_httpd *s = arg;
	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			break; /* shut down */
		}
		conn *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		c->fd = fd;
		c->srv = s;
		pthread_mutex_lock(&s->mu);
		if (s->stopping || pthread_create(&c->thread, NULL, serve, c) != 0) {
			pthread_mutex_unlock(&s->mu);
			close(fd);
			free(c);
			continue;
		}
		c->next = s->conns;
		s->conns = c;
		s->connections++;
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static int listen_any(int *port, int backlog)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof a;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static h_httpd *start(h_http_handler fn, void *opaque, int backlog, void *(*loop)(void *))
{
	h_httpd *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->fn = fn;
	s->opaque = opaque;
	pthread_mutex_init(&s->mu, NULL);
	if ((s->lfd = listen_any(&s->port, backlog)) < 0 ||
	    pthread_create(&s->accept_thread, NULL, loop, s) != 0) {
		if (s->lfd >= 0)
			close(s->lfd);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return NULL;
	}
	return s;
}

h_httpd *h_httpd_start(h_http_handler fn, void *opaque)
{
	return start(fn, opaque, 512, accept_loop);
}

h_httpd *h_httpd_start_small(h_http_handler fn, void *opaque, int backlog)
{
	return start(fn, opaque, backlog, small_loop);
}

int h_httpd_port(const h_httpd *s) { return s->port; }

void h_httpd_stop(h_httpd *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = 1;
	pthread_mutex_unlock(&s->mu);
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->accept_thread, NULL);
	close(s->lfd);
	for (conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next;
		pthread_join(c->thread, NULL);
		close(c->fd);
		free(c);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

long h_httpd_requests(h_httpd *s)
{
	pthread_mutex_lock(&s->mu);
	long v = s->requests;
	pthread_mutex_unlock(&s->mu);
	return v;
}

long h_httpd_max_in_flight(h_httpd *s)
{
	pthread_mutex_lock(&s->mu);
	long v = s->max_in_flight;
	pthread_mutex_unlock(&s->mu);
	return v;
}

long h_httpd_connections(h_httpd *s)
{
	pthread_mutex_lock(&s->mu);
	long v = s->connections;
	pthread_mutex_unlock(&s->mu);
	return v;
}

long h_httpd_max_connections(h_httpd *s)
{
	pthread_mutex_lock(&s->mu);
	long v = s->max_connections;
	pthread_mutex_unlock(&s->mu);
	return v;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int h_http_param(const h_http_request *r, const char *name, char *out, size_t outsz)
{
	size_t nl = strlen(name);
	for (const char *p = r->query; *p;) {
		const char *end = strchr(p, '&');
		if (!end)
			end = p + strlen(p);
		if ((size_t)(end - p) > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			size_t o = 0;
			for (const char *v = p + nl + 1; v < end && o + 1 < outsz; v++) {
				int h1, h2;
				if (*v == '%' && v + 2 < end + 1 && (h1 = hexval(v[1])) >= 0 &&
				    (h2 = hexval(v[2])) >= 0) {
					out[o++] = (char)(h1 * 16 + h2);
					v += 2;
				} else {
					out[o++] = *v;
				}
			}
			out[o] = '\0';
			return 1;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

int h_http_header(const h_http_request *r, const char *name, char *out, size_t outsz)
{
	size_t nl = strlen(name);
	for (const char *p = r->headers; *p;) {
		const char *end = strchr(p, '\n');
		if (!end)
			break;
		if (strncmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 2;
			snprintf(out, outsz, "%.*s", (int)(end - v), v);
			return 1;
		}
		p = end + 1;
	}
	return 0;
}

int h_free_port(void)
{
	int port = 0;
	int fd = listen_any(&port, 512);
	if (fd >= 0)
		close(fd);
	return port;
}

struct h_webhook {
	h_httpd *srv;
	pthread_mutex_t mu;
	char bodies[H_WEBHOOK_MAX][2048];
	int n;
};

static void on_webhook(void *opaque, const h_http_request *r, h_http_answer *a)
{
	h_webhook *w = opaque;
	pthread_mutex_lock(&w->mu);
	if (w->n < H_WEBHOOK_MAX && r->body)
		snprintf(w->bodies[w->n++], sizeof w->bodies[0], "%s", r->body);
	pthread_mutex_unlock(&w->mu);
	a->status = 200;
}

h_webhook *h_webhook_start(void)
{
	h_webhook *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	pthread_mutex_init(&w->mu, NULL);
	if (!(w->srv = h_httpd_start(on_webhook, w))) {
		pthread_mutex_destroy(&w->mu);
		free(w);
		return NULL;
	}
	return w;
}

int h_webhook_port(const h_webhook *w) { return h_httpd_port(w->srv); }

int h_webhook_count(h_webhook *w)
{
	pthread_mutex_lock(&w->mu);
	int n = w->n;
	pthread_mutex_unlock(&w->mu);
	return n;
}

const char *h_webhook_body(h_webhook *w, int i, char *out, size_t outsz)
{
	pthread_mutex_lock(&w->mu);
	snprintf(out, outsz, "%s", i >= 0 && i < w->n ? w->bodies[i] : "");
	pthread_mutex_unlock(&w->mu);
	return out;
}

void h_webhook_stop(h_webhook *w)
{
	if (!w)
		return;
	h_httpd_stop(w->srv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
