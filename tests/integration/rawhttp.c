/* rawhttp.c: see rawhttp.h. */
#include "rawhttp.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A socket bound to from, connecting to 127.0.0.1:port; non-blocking when
 * asked (the connect may then be under way). -1 on failure. */
static int connect_from(const char *from, int port, int nonblocking)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
	to.sin_port = htons((unsigned short)port);
	if (inet_pton(AF_INET, from, &a.sin_addr) != 1 ||
	    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    (connect(fd, (struct sockaddr *)&to, sizeof to) != 0 && errno != EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

int h_raw_request(const char *from, int port, const char *bytes, size_t len, int timeout_ms,
                  h_raw_reply *out)
{
	memset(out, 0, sizeof *out);
	out->first_ms = out->closed_ms = -1;
	long start = now_ms();
	int fd = connect_from(from, port, 0);
	if (fd < 0)
		return -1;
	if (send(fd, bytes, len, MSG_NOSIGNAL) != (ssize_t)len) {
		out->closed = 1;
		out->closed_ms = now_ms() - start;
	}
	while (!out->closed) {
		long left = timeout_ms - (now_ms() - start);
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n <= 0) {
			out->closed = 1;
			out->closed_ms = now_ms() - start;
			break;
		}
		size_t take = (size_t)n < sizeof out->data - 1 - out->len ? (size_t)n
		                                                       : sizeof out->data - 1 - out->len;
		if (take < (size_t)n)
			out->truncated = 1;
		memcpy(out->data + out->len, buf, take);
		out->len += take;
		out->data[out->len] = '\0';
		if (out->first_ms < 0 && strstr(out->data, "\r\n"))
			out->first_ms = now_ms() - start;
	}
	close(fd);
	return 0;
}

int h_raw_status(const h_raw_reply *r)
{
	int status = 0;
	if (sscanf(r->data, "HTTP/1.%*1[01] %3d ", &status) != 1)
		return 0;
	return status;
}

long h_raw_trickle(const char *from, int port, const char *head, int every_ms, int max_ms)
{
	int fd = connect_from(from, port, 0);
	if (fd < 0)
		return -1;
	long start = now_ms(), closed_at = -1;
	for (size_t i = 0; closed_at < 0 && now_ms() - start <= max_ms; i++) {
		char c = i < strlen(head) ? head[i] : 'a';
		if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
			closed_at = now_ms() - start;
			break;
		}
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, every_ms) > 0) {
			char buf[512];
			if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0)
				closed_at = now_ms() - start;
		}
	}
	close(fd);
	return closed_at;
}

long h_raise_nofile(long n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if ((long)rl.rlim_cur < n) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || (long)rl.rlim_max > n ? (rlim_t)n
		                                                                     : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return (long)rl.rlim_cur;
}

/* ---- the flood ---- */

struct h_flood {
	char from[64];
	int port, idle, trickle, every_ms;
	long max_opened;
	int *fd;     /* idle + trickle slots; -1: to open again */
	size_t *fed; /* bytes of the head each trickling slot has sent */
	pthread_t thread;
	pthread_mutex_t mu;
	int stop;
	h_flood_stats stats;
};

static const char FLOOD_HEAD[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

/* Whether the server has closed fd (end of stream, or an error). */
static int server_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN);
}

/* One turn: open what is missing, feed the trickling, drop what the
 * server closed. */
static void flood_turn(h_flood *f)
{
	for (int i = 0; i < f->idle + f->trickle; i++) {
		if (f->fd[i] < 0 && f->stats.opened < f->max_opened) {
			f->fd[i] = connect_from(f->from, f->port, 1);
			f->fed[i] = 0;
			f->stats.opened += f->fd[i] >= 0;
			continue;
		}
		if (f->fd[i] < 0)
			continue;
		int gone = server_closed(f->fd[i]);
		if (!gone && i >= f->idle) {
			char c = f->fed[i] < sizeof FLOOD_HEAD - 1 ? FLOOD_HEAD[f->fed[i]] : 'a';
			ssize_t n = send(f->fd[i], &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			gone = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN;
			f->fed[i] += n == 1;
		}
		if (gone) {
			close(f->fd[i]);
			f->fd[i] = -1;
			f->stats.server_closed++;
		}
	}
}

static void *flood_main(void *arg)
{
	h_flood *f = arg;
	for (;;) {
		pthread_mutex_lock(&f->mu);
		int stop = f->stop;
		if (!stop)
			flood_turn(f);
		pthread_mutex_unlock(&f->mu);
		if (stop)
			return NULL;
		struct timespec ts = {f->every_ms / 1000, (long)(f->every_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

h_flood *h_flood_start(const char *from, int port, int idle, int trickle, int every_ms,
                       long max_opened)
{
	int n = idle + trickle;
	if (h_raise_nofile(n + 256) < n + 256)
		return NULL;
	h_flood *f = calloc(1, sizeof *f);
	f->fd = malloc((size_t)n * sizeof *f->fd);
	f->fed = calloc((size_t)n, sizeof *f->fed);
	snprintf(f->from, sizeof f->from, "%s", from);
	f->port = port;
	f->idle = idle;
	f->trickle = trickle;
	f->every_ms = every_ms;
	f->max_opened = max_opened;
	for (int i = 0; i < n; i++)
		f->fd[i] = -1;
	pthread_mutex_init(&f->mu, NULL);
	flood_turn(f); /* every connection opened before this returns */
	pthread_create(&f->thread, NULL, flood_main, f);
	return f;
}

void h_flood_stop(h_flood *f, h_flood_stats *stats)
{
	pthread_mutex_lock(&f->mu);
	f->stop = 1;
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	for (int i = 0; i < f->idle + f->trickle; i++)
		if (f->fd[i] >= 0)
			close(f->fd[i]);
	*stats = f->stats;
	pthread_mutex_destroy(&f->mu);
	free(f->fd);
	free(f->fed);
	free(f);
}

/* ---- ambiguous lengths ---- */

void h_raw_expect_length_refusals(int port, const char *method, const char *path,
                                  const char *extra)
{
	static const struct {
		const char *what, *headers, *body;
	} cases[] = {
		{"two equal Content-Length", "Content-Length: 6\r\nContent-Length: 6\r\n", "name=x"},
		{"two different Content-Length", "Content-Length: 6\r\nContent-Length: 7\r\n",
		 "name=x&"},
		{"a space before the colon", "Content-Length : 6\r\n", "name=x"},
		{"Content-Length and Transfer-Encoding",
		 "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "6\r\nname=x\r\n0\r\n\r\n"},
		{"one Content-Length (control)", "Content-Length: 6\r\n", "name=x"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char req[1024];
		int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%s\r\n%s",
		                 method, path, port, extra, cases[i].headers, cases[i].body);
		h_raw_reply r;
		cr_assert_eq(h_raw_request("127.0.0.2", port, req, (size_t)n, 2000, &r), 0,
		             "cannot connect to port %d", port);
		int control = i == sizeof cases / sizeof cases[0] - 1;
		if (control) {
			cr_expect(h_raw_status(&r) != 0 && h_raw_status(&r) != 400,
			          "%s %s, %s: %.200s", method, path, cases[i].what, r.data);
			continue;
		}
		cr_expect_eq(h_raw_status(&r), 400, "%s %s, %s: answered %.200s", method, path,
		             cases[i].what, r.len ? r.data : "nothing");
		cr_expect(r.closed, "%s %s, %s: the connection stayed open after %.60s", method, path,
		          cases[i].what, r.data);
	}
}

/* ---- the raw server ---- */

#define RAW_CONNS_MAX 64

struct h_raw_server {
	int fd, port;
	char *answer;
	pthread_t thread;
	pthread_mutex_t mu;
	int stop;
	h_raw_conn *conns; /* RAW_CONNS_MAX */
	size_t nconns;     /* done in all (more than RAW_CONNS_MAX: not kept) */
};

/* Read what fd brings into c until the head ends (head) or the peer
 * closes, up to deadline; 1 when the head ended. */
static int raw_read(int fd, h_raw_conn *c, int head, long deadline)
{
	for (;;) {
		if (head && strstr(c->data, "\r\n\r\n"))
			return 1;
		long left = deadline - now_ms();
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n <= 0)
			return 0;
		size_t room = sizeof c->data - 1 - c->len;
		size_t take = (size_t)n < room ? (size_t)n : room;
		c->truncated |= take < (size_t)n;
		memcpy(c->data + c->len, buf, take);
		c->len += take;
		c->data[c->len] = '\0';
	}
}

static void *raw_server_main(void *arg)
{
	h_raw_server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			return NULL;
		struct pollfd p = {s->fd, POLLIN, 0};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		h_raw_conn *c = calloc(1, sizeof *c);
		long deadline = now_ms() + 10000;
		if (raw_read(fd, c, 1, deadline))
			(void)send(fd, s->answer, strlen(s->answer), MSG_NOSIGNAL);
		raw_read(fd, c, 0, deadline); /* until the client closes */
		close(fd);
		pthread_mutex_lock(&s->mu);
		if (s->nconns < RAW_CONNS_MAX)
			s->conns[s->nconns] = *c;
		s->nconns++;
		pthread_mutex_unlock(&s->mu);
		free(c);
	}
}

h_raw_server *h_raw_server_start(const char *answer)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof a;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	h_raw_server *s = calloc(1, sizeof *s);
	s->fd = fd;
	s->port = ntohs(a.sin_port);
	s->answer = strdup(answer);
	s->conns = calloc(RAW_CONNS_MAX, sizeof *s->conns);
	pthread_mutex_init(&s->mu, NULL);
	pthread_create(&s->thread, NULL, raw_server_main, s);
	return s;
}

int h_raw_server_port(const h_raw_server *s) { return s->port; }

size_t h_raw_server_conns(h_raw_server *s, h_raw_conn *out, size_t max)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->nconns;
	for (size_t i = 0; i < n && i < max && i < RAW_CONNS_MAX; i++)
		out[i] = s->conns[i];
	pthread_mutex_unlock(&s->mu);
	return n;
}

void h_raw_server_stop(h_raw_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	close(s->fd);
	pthread_mutex_destroy(&s->mu);
	free(s->conns);
	free(s->answer);
	free(s);
}
