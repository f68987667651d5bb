/* http_guard.c: see http_guard.h. The open connections are a list under
 * one mutex: libmicrohttpd adds one when it has accepted it and removes it
 * (http_guard_notify, MHD_CONNECTION_NOTIFY_CLOSED) before it closes the
 * socket, so a socket the guard shuts down under the mutex is still the
 * connection's own, never a number reused by another. */
#include "http_guard.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "log.h"

/* How often the guard looks for late requests, and how often at most it
 * logs what it counted. */
#define GUARD_TICK_MS 100
#define GUARD_REPORT_MS 60000
/* libmicrohttpd's own messages logged in a minute; the rest are counted. */
#define GUARD_LIBRARY_LINES 10

typedef struct guarded {
	struct guarded *prev, *next;
	int fd;
	int64_t since_ms; /* when the request being read began; 0: none is */
	int shut;         /* shut down for its deadline */
} guarded;

struct http_guard {
	http_guard_limits lim;
	char keys[32];       /* lim.keys */
	char listen_key[48]; /* "<keys>.listen" */
	pthread_t thread;
	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t wake;
	int stop;
	guarded *head;
	unsigned open, peak;      /* connections open now, and the most since the last line */
	unsigned long refused;    /* at the per-address limit, since the last line */
	unsigned long late;       /* closed for their deadline, since the last line */
	int64_t reported_ms;      /* the last line; 0: none yet */
	int64_t library_ms;       /* when the minute of libmicrohttpd's lines began */
	unsigned library_lines;   /* its lines logged in that minute */
	unsigned long library_left; /* its messages not logged, since the last line */
};

static guarded *guarded_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
	http_guard *g = cls;
	guarded *k = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || !(k = calloc(1, sizeof *k)))
			return; /* not guarded: the idle time-out still ends it */
		k->fd = ci->connect_fd;
		pthread_mutex_lock(&g->mu);
		k->since_ms = clock_ms();
		k->next = g->head;
		if (g->head)
			g->head->prev = k;
		g->head = k;
		if (++g->open > g->peak)
			g->peak = g->open;
		pthread_mutex_unlock(&g->mu);
		*socket_context = k;
		return;
	}
	if (!k)
		return;
	pthread_mutex_lock(&g->mu);
	if (k->prev)
		k->prev->next = k->next;
	else
		g->head = k->next;
	if (k->next)
		k->next->prev = k->prev;
	g->open--;
	pthread_mutex_unlock(&g->mu);
	free(k);
	*socket_context = NULL;
}

static void set_since(http_guard *g, struct MHD_Connection *c, int64_t since_ms)
{
	guarded *k = guarded_of(c);
	if (!k)
		return;
	pthread_mutex_lock(&g->mu);
	k->since_ms = since_ms;
	pthread_mutex_unlock(&g->mu);
}

void http_guard_request_in(http_guard *g, struct MHD_Connection *c) { set_since(g, c, 0); }

void http_guard_request_done(http_guard *g, struct MHD_Connection *c)
{
	set_since(g, c, clock_ms());
}

int http_guard_library_message(http_guard *g, const char *fmt)
{
	int64_t now = clock_ms();
	int counted = 1;
	pthread_mutex_lock(&g->mu);
	if (strstr(fmt, "connection limit")) {
		/* "Server reached connection limit. Closing inbound connection.":
		 * at the total limit libmicrohttpd stops accepting instead (the
		 * rest wait in the listen queue), so this is the per-address one */
		g->refused++;
	} else {
		if (now - g->library_ms >= GUARD_REPORT_MS) {
			g->library_ms = now;
			g->library_lines = 0;
		}
		counted = g->library_lines >= GUARD_LIBRARY_LINES;
		if (counted)
			g->library_left++;
		else
			g->library_lines++;
	}
	pthread_mutex_unlock(&g->mu);
	return counted;
}

/* Shut down the connections whose request is late. Under g->mu. */
static void close_late(http_guard *g, int64_t now)
{
	for (guarded *k = g->head; k; k = k->next) {
		if (k->shut || !k->since_ms || now - k->since_ms < (int64_t)g->lim.request_ms)
			continue;
		shutdown(k->fd, SHUT_RDWR);
		k->shut = 1;
		g->late++;
	}
}

/* The line of what was counted, at most once a minute. Under g->mu, which
 * it lets go while it logs. */
static void report(http_guard *g, int64_t now)
{
	int full = g->peak >= g->lim.max_connections;
	if ((!g->refused && !g->late && !g->library_left && !full) ||
	    (g->reported_ms && now - g->reported_ms < GUARD_REPORT_MS))
		return;
	unsigned long refused = g->refused, late = g->late, left = g->library_left;
	unsigned peak = g->peak;
	g->refused = g->late = g->library_left = 0;
	g->peak = g->open;
	g->reported_ms = now;
	pthread_mutex_unlock(&g->mu);
	const char *k = g->keys;
	log_warn("%s: %lu connections refused at %s.max_connections_per_address (%u), %lu closed "
	         "with their request not in within %s.request_timeout_ms (%u), at most %u of "
	         "%s.max_connections (%u) open at once, %lu messages of libmicrohttpd not logged; "
	         "counted since the last such line (one a minute at most)",
	         g->listen_key, refused, k, g->lim.per_address, late, k, g->lim.request_ms, peak, k,
	         g->lim.max_connections, left);
	pthread_mutex_lock(&g->mu);
}

static void *guard_main(void *arg)
{
	http_guard *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		int64_t now = clock_ms();
		if (g->lim.request_ms)
			close_late(g, now);
		report(g, now);
		struct timespec ts = clock_mono_deadline(GUARD_TICK_MS);
		pthread_cond_timedwait(&g->wake, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

http_guard *http_guard_start(const http_guard_limits *limits, char *err, size_t errsz)
{
	http_guard *g = calloc(1, sizeof *g);
	if (!g) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	g->lim = *limits;
	snprintf(g->keys, sizeof g->keys, "%s", limits->keys);
	snprintf(g->listen_key, sizeof g->listen_key, "%s.listen", limits->keys);
	g->lim.keys = g->keys;
	g->library_ms = clock_ms();
	pthread_mutex_init(&g->mu, NULL);
	clock_cond_init(&g->wake);
	if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
		snprintf(err, errsz, "cannot start a thread");
		pthread_cond_destroy(&g->wake);
		pthread_mutex_destroy(&g->mu);
		free(g);
		return NULL;
	}
	return g;
}

void http_guard_stop(http_guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = 1;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->thread, NULL);
	while (g->head) { /* none after MHD_stop_daemon; freed all the same */
		guarded *k = g->head;
		g->head = k->next;
		free(k);
	}
	pthread_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->mu);
	free(g);
}
