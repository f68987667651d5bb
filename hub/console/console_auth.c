/* console_auth.c: see console_auth.h. */
#include "console_auth.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

/* ---- start-up ---- */

static int host_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (strcasecmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

int console_listen_is_loopback(const char *listen)
{
	char host[256], port[8], err[256];
	if (http_listen_split(listen, host, sizeof host, port, sizeof port, err, sizeof err) != 0)
		return 0;
	return host_is_loopback(host);
}

int console_check_config(const txhub_config *cfg, int *open_mode, char *err, size_t errsz)
{
	int open = cfg->console_open == 1;
	size_t tlen = strlen(cfg->console_token);
	*open_mode = 0;
	if (tlen > 0 && tlen < CONSOLE_TOKEN_MIN) {
		snprintf(err, errsz, "console.token: %zu characters is too short to guess-proof the "
		         "console (at least %d; e.g. openssl rand -hex 24)", tlen, CONSOLE_TOKEN_MIN);
		return -1;
	}
	if (tlen > 0)
		return 0;
	if (!open) {
		snprintf(err, errsz, "console.token is empty (TXHUB_CONSOLE_TOKEN): set one, or, for a "
		         "console on a loopback address only, set console.open = true");
		return -1;
	}
	if (!console_listen_is_loopback(cfg->console_listen)) {
		snprintf(err, errsz, "console.open = true serves without console.token only on a "
		         "loopback address, and console.listen is %s: set console.token", cfg->console_listen);
		return -1;
	}
	*open_mode = 1;
	return 0;
}

/* ---- each request ---- */

/* Split a Host header into host (brackets dropped) and port ("80" when
 * none). Returns 0, or -1 when it is malformed. */
static int split_host(const char *h, char *host, size_t hostsz, char *port, size_t portsz)
{
	const char *colon, *hs = h, *he;
	if (*h == '[') {
		he = strchr(h, ']');
		if (!he || (he[1] && he[1] != ':'))
			return -1;
		hs = h + 1;
		colon = he[1] ? he + 1 : NULL;
	} else {
		colon = strchr(h, ':');
		he = colon ? colon : h + strlen(h);
	}
	size_t hl = (size_t)(he - hs);
	if (hl == 0 || hl >= hostsz)
		return -1;
	memcpy(host, hs, hl);
	host[hl] = '\0';
	snprintf(port, portsz, "%s", colon ? colon + 1 : "80");
	return 0;
}

int console_host_ok(const char *host, const char *listen)
{
	char lhost[256], lport[8], err[256], hhost[256], hport[16];
	if (http_listen_split(listen, lhost, sizeof lhost, lport, sizeof lport, err, sizeof err) != 0)
		return 0;
	if (!host_is_loopback(lhost))
		return 1;
	if (!host || split_host(host, hhost, sizeof hhost, hport, sizeof hport) != 0)
		return 0;
	if (strcmp(hport, lport) != 0)
		return 0;
	return host_is_loopback(hhost) || strcasecmp(hhost, lhost) == 0;
}

int console_origin_ok(const char *origin, const char *fetch_site, const char *host, char *err,
                      size_t errsz)
{
	if (fetch_site && strcmp(fetch_site, "same-origin") != 0) {
		snprintf(err, errsz, "a request from another site or origin is refused "
		         "(Sec-Fetch-Site: %.40s)", fetch_site);
		return -1;
	}
	/* our own pages send Referrer-Policy: no-referrer, under which a
	 * browser sends "Origin: null" with their forms; Sec-Fetch-Site, which
	 * no page can set, then tells where the form came from */
	if (!origin || (strcmp(origin, "null") == 0 && fetch_site))
		return 0;
	char want[300];
	snprintf(want, sizeof want, "http://%s", host ? host : "");
	if (!host || strcasecmp(origin, want) != 0) {
		snprintf(err, errsz, "a request from another origin is refused (Origin: %.100s)", origin);
		return -1;
	}
	return 0;
}

int console_name_check(const char *name, char *err, size_t errsz)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > CONSOLE_NAME_MAX) {
		snprintf(err, errsz, "name: give 1 to %d characters (letters, digits, . _ - @)",
		         CONSOLE_NAME_MAX);
		return -1;
	}
	for (const char *p = name; *p; p++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == '@')) {
			snprintf(err, errsz, "name: only letters, digits, . _ - and @ (it becomes the actor "
			         "console:<name> in the history)");
			return -1;
		}
	}
	return 0;
}

/* ---- sessions ---- */

typedef struct {
	int used;
	char id[SECRET_HEX + 1];
	console_session pub;
	int64_t created_ms, seen_ms;
	char flash[CONSOLE_FLASH_MAX];
} slot;

struct console_sessions {
	pthread_mutex_t mu;
	slot slots[CONSOLE_SESSIONS_MAX];
};

console_sessions *console_sessions_new(void)
{
	console_sessions *t = calloc(1, sizeof *t);
	if (t)
		pthread_mutex_init(&t->mu, NULL);
	return t;
}

void console_sessions_free(console_sessions *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->mu);
	OPENSSL_cleanse(t->slots, sizeof t->slots);
	free(t);
}

/* The slot holding id, or NULL. Every used slot is compared, in constant
 * time each. Under t->mu. */
static slot *find_slot(console_sessions *t, const char *id)
{
	slot *hit = NULL;
	for (int i = 0; i < CONSOLE_SESSIONS_MAX; i++)
		if (t->slots[i].used && secret_equal(t->slots[i].id, id))
			hit = &t->slots[i];
	return hit;
}

int console_session_create(console_sessions *t, const char *name, int64_t now_ms,
                           char id[SECRET_HEX + 1])
{
	return console_session_create_scoped(t, name, NULL, 0, now_ms, id);
}

int console_session_create_scoped(console_sessions *t, const char *name, const char *tenant,
                                  int64_t token_id, int64_t now_ms,
                                  char id[SECRET_HEX + 1])
{
	slot fresh;
	memset(&fresh, 0, sizeof fresh);
	if (secret_random_hex(fresh.id) != 0 || secret_random_hex(fresh.pub.csrf) != 0)
		return -1;
	fresh.used = 1;
	snprintf(fresh.pub.name, sizeof fresh.pub.name, "%s", name);
	snprintf(fresh.pub.tenant, sizeof fresh.pub.tenant, "%s", tenant ? tenant : "");
	fresh.pub.token_id = tenant && *tenant ? token_id : 0;
	fresh.created_ms = fresh.seen_ms = now_ms;
	pthread_mutex_lock(&t->mu);
	slot *s = &t->slots[0];
	for (int i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
		slot *c = &t->slots[i];
		if (!c->used) {
			s = c;
			break;
		}
		if (c->seen_ms < s->seen_ms)
			s = c;
	}
	*s = fresh;
	pthread_mutex_unlock(&t->mu);
	memcpy(id, fresh.id, sizeof fresh.id);
	OPENSSL_cleanse(&fresh, sizeof fresh);
	return 0;
}

int console_session_find(console_sessions *t, const char *id, int64_t now_ms,
                         console_session *out)
{
	if (!id)
		return 0;
	pthread_mutex_lock(&t->mu);
	slot *s = find_slot(t, id);
	int live = s && now_ms - s->seen_ms < CONSOLE_IDLE_MS &&
	           now_ms - s->created_ms < CONSOLE_LIFETIME_MS;
	if (s && !live)
		OPENSSL_cleanse(s, sizeof *s);
	if (live) {
		s->seen_ms = now_ms;
		*out = s->pub;
	}
	pthread_mutex_unlock(&t->mu);
	return live;
}

void console_session_end(console_sessions *t, const char *id)
{
	if (!id)
		return;
	pthread_mutex_lock(&t->mu);
	slot *s = find_slot(t, id);
	if (s)
		OPENSSL_cleanse(s, sizeof *s);
	pthread_mutex_unlock(&t->mu);
}

void console_session_set_flash(console_sessions *t, const char *id, const char *text)
{
	pthread_mutex_lock(&t->mu);
	slot *s = id ? find_slot(t, id) : NULL;
	if (s)
		snprintf(s->flash, sizeof s->flash, "%s", text);
	pthread_mutex_unlock(&t->mu);
}

void console_session_take_flash(console_sessions *t, const char *id, char *out, size_t outsz)
{
	out[0] = '\0';
	pthread_mutex_lock(&t->mu);
	slot *s = id ? find_slot(t, id) : NULL;
	if (s) {
		snprintf(out, outsz, "%s", s->flash);
		s->flash[0] = '\0';
	}
	pthread_mutex_unlock(&t->mu);
}
