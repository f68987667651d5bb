/* console_auth.h: who may use the web console, and how each request
 * proves it (docs/console.md: Web console tells the model to operators).
 *
 * - Start-up: console_check_config() refuses a console without
 *   console.token unless console.listen is a loopback address and
 *   console.open = true, and a token shorter than CONSOLE_TOKEN_MIN.
 * - Login: a name (console_name_check(): the actor "console:<name>" in
 *   txhub.history) and the token, compared in constant time
 *   (secret_token_equal()), after console_throttle.h's allowance of
 *   wrong tokens per client address. One token is shared, so the name is
 *   what the operator says they are: an audit trail, not an identity.
 * - Session: a random id in an HttpOnly, SameSite=Strict cookie, kept in a
 *   console_sessions table in memory (a restart logs everyone out); it
 *   ends after CONSOLE_IDLE_MS without a request, CONSOLE_LIFETIME_MS after
 *   the login, or at logout.
 * - Every POST: a CSRF token bound to the session, and
 *   console_origin_ok() on Origin and Sec-Fetch-Site (SameSite alone lets
 *   another port of the same host, a same-site origin, send the cookie).
 * - Every request to a loopback listener: console_host_ok() on Host, so a
 *   page whose DNS name is rebound to 127.0.0.1 cannot read the console.
 *
 * The pure checks take everything as arguments and may be called from any
 * thread. The session table has a mutex of its own: any thread may call
 * its functions at once. */
#ifndef TXHUB_CONSOLE_AUTH_H
#define TXHUB_CONSOLE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "secret.h"

#define CONSOLE_TOKEN_MIN 16      /* bytes of console.token */
#define CONSOLE_NAME_MAX 32       /* bytes of a login name */
#define CONSOLE_SESSIONS_MAX 64   /* sessions at once; a new login ends the oldest beyond */
#define CONSOLE_IDLE_MS (30LL * 60 * 1000)
#define CONSOLE_LIFETIME_MS (12LL * 3600 * 1000)
#define CONSOLE_FLASH_MAX 4096    /* the result of the last action, shown once */

/* ---- start-up ---- */

/* 1 when listen ("host:port", "[v6]:port") names a loopback address:
 * localhost, 127.0.0.0/8 or ::1. Nothing is resolved. */
int console_listen_is_loopback(const char *listen);

/* The refusal rules for cfg (validated). Returns 0 and sets *open_mode (1:
 * no token, a name alone logs in), or -1 with a message naming the keys. */
int console_check_config(const txhub_config *cfg, int *open_mode, char *err, size_t errsz);

/* ---- each request ---- */

/* 1 when a Host header fits a console listening on listen: for a loopback
 * listener the host must be localhost, a 127.0.0.0/8 address, [::1] or the
 * listen host, and the port the listen port; any Host is taken for another
 * listener (it needs the token anyway). host may be NULL (refused on
 * loopback). */
int console_host_ok(const char *host, const char *listen);

/* A state-changing request's origin: Sec-Fetch-Site, when sent, must be
 * same-origin, and Origin, when sent, must be "http://" + host, or "null"
 * along with Sec-Fetch-Site: same-origin (what a browser sends for a form
 * of a page under Referrer-Policy: no-referrer, as the console's are).
 * Either may be NULL (clients other than browsers send neither; the CSRF
 * token still holds them). Returns 0, or -1 with the reason in err. */
int console_origin_ok(const char *origin, const char *fetch_site, const char *host, char *err,
                      size_t errsz);

/* A login name: 1..CONSOLE_NAME_MAX of A-Z a-z 0-9 . _ - @. Returns 0, or
 * -1 with the reason in err. */
int console_name_check(const char *name, char *err, size_t errsz);

/* ---- sessions ---- */

typedef struct console_sessions console_sessions;

/* Longest tenant name (txhub.tenants.name). */
#define CONSOLE_TENANT_MAX 63

/* What a request learns about its session (copies). */
typedef struct {
	char name[CONSOLE_NAME_MAX + 1];
	char csrf[SECRET_HEX + 1];
	/* a session opened with a tenant's token (txhub.tenant_tokens): the
	 * tenant it sees and the token's id; "" and 0 for console.token's */
	char tenant[CONSOLE_TENANT_MAX + 1];
	int64_t token_id;
} console_session;

/* NULL when out of memory. */
console_sessions *console_sessions_new(void);
void console_sessions_free(console_sessions *t);

/* Start a session for name (checked by the caller) at now_ms; its id into
 * id. When the table is full the least recently used session ends.
 * Returns 0, or -1 when no random bytes could be had. */
int console_session_create(console_sessions *t, const char *name, int64_t now_ms,
                           char id[SECRET_HEX + 1]);
/* The same for a session scoped to tenant (checked by the caller; NULL or
 * "": the global session) opened with token token_id. */
int console_session_create_scoped(console_sessions *t, const char *name, const char *tenant,
                                  int64_t token_id, int64_t now_ms,
                                  char id[SECRET_HEX + 1]);

/* The live session with this id (a cookie's value; NULL is fine): fills
 * out, notes the request at now_ms, returns 1. An expired one is ended;
 * 0 then, as for an unknown id. */
int console_session_find(console_sessions *t, const char *id, int64_t now_ms,
                         console_session *out);

/* End the session with this id (logout); unknown ids are ignored. */
void console_session_end(console_sessions *t, const char *id);

/* Keep text (cut to CONSOLE_FLASH_MAX - 1 bytes) to show on the session's
 * next page, and take it from there (out gets "" when none). */
void console_session_set_flash(console_sessions *t, const char *id, const char *text);
void console_session_take_flash(console_sessions *t, const char *id, char *out, size_t outsz);

#endif
