/* console_throttle.c: see console_throttle.h. */
#include "console_throttle.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_auth.h"

typedef struct {
	int used;
	unsigned char key[16];             /* IPv4 as ::ffff:a.b.c.d, IPv6 its /64 */
	char shown[INET6_ADDRSTRLEN + 8];  /* the address (or prefix) as logged */
	int64_t until_ms;                  /* the end of the window or the wait */
	unsigned failures;                 /* tries counted until then */
	int logged;                        /* a line about it was logged at logged_ms */
	int64_t logged_ms;
	int64_t first_ms, last_ms;         /* the refusals not logged yet: the oldest, newest */
	unsigned wrong, throttled;         /* refusals not logged yet */
	char name[CONSOLE_NAME_MAX + 1];   /* of the last wrong token, or "" */
} tslot;

struct console_throttle {
	pthread_mutex_t mu;
	unsigned failures;
	int64_t window_ms;
	tslot slots[CONSOLE_THROTTLE_SLOTS];
	tslot others; /* every address beyond a full table */
};

console_throttle *console_throttle_new(unsigned failures, int64_t window_ms)
{
	console_throttle *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	pthread_mutex_init(&t->mu, NULL);
	t->failures = failures ? failures : 1;
	t->window_ms = window_ms > 0 ? window_ms : 1;
	t->others.used = 1;
	snprintf(t->others.shown, sizeof t->others.shown, "addresses beyond the %d tracked",
	         CONSOLE_THROTTLE_SLOTS);
	return t;
}

void console_throttle_free(console_throttle *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* The key of peer and how it is shown. Text that is no address (the
 * server could not tell) has a key of its own. */
static void key_of(const char *peer, unsigned char key[16], char *shown, size_t shownsz)
{
	struct in_addr a4;
	struct in6_addr a6;
	char buf[INET6_ADDRSTRLEN];
	memset(key, 0, 16);
	if (peer && inet_pton(AF_INET, peer, &a4) == 1) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &a4, 4);
		snprintf(shown, shownsz, "%s", peer);
	} else if (peer && inet_pton(AF_INET6, peer, &a6) == 1 && IN6_IS_ADDR_V4MAPPED(&a6)) {
		memcpy(key, &a6, 16);
		inet_ntop(AF_INET, key + 12, buf, sizeof buf);
		snprintf(shown, shownsz, "%s", buf);
	} else if (peer && inet_pton(AF_INET6, peer, &a6) == 1) {
		memcpy(key, &a6, 8);
		inet_ntop(AF_INET6, key, buf, sizeof buf);
		snprintf(shown, shownsz, "%s/64", buf);
	} else {
		memset(key, 0xff, 16);
		snprintf(shown, shownsz, "an unknown address");
	}
}

static unsigned pending(const tslot *s) { return s->wrong + s->throttled; }

/* A slot that holds nothing worth keeping at now_ms: unused, or its
 * window over and its refusals logged. */
static int reusable(const tslot *s, int64_t now_ms)
{
	return !s->used || (now_ms >= s->until_ms && pending(s) == 0);
}

/* peer's slot; when it has none, a reusable one taken for it (an unused
 * one first, else the one whose window ended first), else the shared
 * one. claim 0: NULL instead of taking one. Under t->mu. */
static tslot *slot_for(console_throttle *t, const char *peer, int64_t now_ms, int claim)
{
	unsigned char key[16];
	char shown[sizeof t->others.shown];
	key_of(peer, key, shown, sizeof shown);
	tslot *spare = NULL;
	for (int i = 0; i < CONSOLE_THROTTLE_SLOTS; i++) {
		tslot *s = &t->slots[i];
		if (s->used && memcmp(s->key, key, sizeof key) == 0)
			return s;
		if (reusable(s, now_ms) &&
		    (!spare || (spare->used && (!s->used || s->until_ms < spare->until_ms))))
			spare = s;
	}
	if (!claim)
		return NULL;
	if (!spare)
		return &t->others;
	memset(spare, 0, sizeof *spare);
	spare->used = 1;
	memcpy(spare->key, key, sizeof key);
	snprintf(spare->shown, sizeof spare->shown, "%s", shown);
	return spare;
}

static int64_t wait_s(const console_throttle *t, const tslot *s, int64_t now_ms)
{
	if (s->failures < t->failures || now_ms >= s->until_ms)
		return 0;
	int64_t w = (s->until_ms - now_ms + 999) / 1000;
	return w > 0 ? w : 1;
}

/* s's refusals not logged yet as one line, then counted as logged. */
static void format_line(const console_throttle *t, tslot *s, int64_t now_ms, char *line)
{
	unsigned n = pending(s);
	char span[48] = "", name[CONSOLE_NAME_MAX + 16] = "", state[64] = "";
	long long ms = (long long)(s->last_ms - s->first_ms);
	if (n > 1)
		snprintf(span, sizeof span, " over %lld.%lld s", ms / 1000, ms % 1000 / 100);
	if (s->name[0])
		snprintf(name, sizeof name, "; the last as %s", s->name);
	int64_t w = wait_s(t, s, now_ms);
	if (w > 0)
		snprintf(state, sizeof state, "; answering 429 for %lld s more", (long long)w);
	snprintf(line, CONSOLE_THROTTLE_LINE,
	         "console: refused %u login%s from %s%s (%u wrong token%s, %u while throttled%s)%s", n,
	         n == 1 ? "" : "s", s->shown, span, s->wrong, s->wrong == 1 ? "" : "s", s->throttled,
	         name, state);
	s->wrong = s->throttled = 0;
	s->name[0] = '\0';
	s->logged = 1;
	s->logged_ms = now_ms;
}

/* One more refusal of s (wrong: a wrong token, else throttled): a line
 * now when none about s was logged for CONSOLE_THROTTLE_LOG_MS. */
static void refused(const console_throttle *t, tslot *s, int wrong, int64_t now_ms, char *line)
{
	if (pending(s) == 0)
		s->first_ms = now_ms;
	s->last_ms = now_ms;
	if (wrong)
		s->wrong++;
	else
		s->throttled++;
	line[0] = '\0';
	if (!s->logged || now_ms - s->logged_ms >= CONSOLE_THROTTLE_LOG_MS)
		format_line(t, s, now_ms, line);
}

int64_t console_throttle_begin(console_throttle *t, const char *peer, int64_t now_ms,
                               char line[CONSOLE_THROTTLE_LINE])
{
	line[0] = '\0';
	pthread_mutex_lock(&t->mu);
	tslot *s = slot_for(t, peer, now_ms, 1);
	if (now_ms >= s->until_ms) { /* a new window */
		s->failures = 0;
		s->until_ms = now_ms + t->window_ms;
	}
	int64_t w = wait_s(t, s, now_ms);
	if (w > 0)
		refused(t, s, 0, now_ms, line);
	else if (++s->failures == t->failures)
		s->until_ms = now_ms + t->window_ms; /* the last try starts the wait */
	pthread_mutex_unlock(&t->mu);
	return w;
}

void console_throttle_end(console_throttle *t, const char *peer, int ok, const char *name,
                          int64_t now_ms, char line[CONSOLE_THROTTLE_LINE])
{
	line[0] = '\0';
	pthread_mutex_lock(&t->mu);
	/* a success forgets the failures of its own address only, never the
	 * allowance the addresses beyond a full table share */
	tslot *s = slot_for(t, peer, now_ms, !ok);
	if (ok && s) {
		s->failures = 0;
		s->until_ms = now_ms;
	} else if (!ok) {
		snprintf(s->name, sizeof s->name, "%s", name ? name : "");
		refused(t, s, 1, now_ms, line);
	}
	pthread_mutex_unlock(&t->mu);
}

void console_throttle_sweep(console_throttle *t, int64_t now_ms, int all,
                            void (*emit)(void *ud, const char *line), void *ud)
{
	char line[CONSOLE_THROTTLE_LINE];
	pthread_mutex_lock(&t->mu);
	for (int i = 0; i <= CONSOLE_THROTTLE_SLOTS; i++) {
		tslot *s = i < CONSOLE_THROTTLE_SLOTS ? &t->slots[i] : &t->others;
		int quiet = !s->logged || now_ms - s->logged_ms >= CONSOLE_THROTTLE_LOG_MS;
		if (s->used && pending(s) > 0 && (all || quiet)) {
			format_line(t, s, now_ms, line);
			emit(ud, line);
		} else if (s != &t->others && s->used && quiet && reusable(s, now_ms)) {
			s->used = 0; /* nothing left to remember */
		}
	}
	pthread_mutex_unlock(&t->mu);
}
