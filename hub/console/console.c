/* console.c: `txhub console` (see console.h): start-up and its refusals,
 * the routes, and the checks every request passes before a page or an
 * action sees it (console_int.h). The pages are in console_pages.c, the
 * actions in console_actions.c, the HTML around them in console_view.c.
 *
 * Order of the checks, cheapest and least revealing first: the Host (a
 * rebound DNS name is refused before anything else), the query arguments
 * the route takes, the session (or the login page), and for a POST its
 * content type, Origin and Sec-Fetch-Site, the form, and the CSRF token. */
#include "console.h"

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "console_assets.h"
#include "console_int.h"
#include "envelope.h"
#include "html.h"
#include "log.h"
#include "migrate.h"
#include "signals.h"
#include "tenant_ops.h"

/* Every reply carries these, the server's own 404/405/413 included: no
 * script but our own file, nothing inline, no framing, no referrer. */
static const char SECURITY_HEADERS[] =
	"Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
	"img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
	"base-uri 'none'\n"
	"X-Frame-Options: DENY\n"
	"Referrer-Policy: no-referrer\n"
	"Cross-Origin-Opener-Policy: same-origin\n"
	"Cross-Origin-Resource-Policy: same-origin\n";

/* Largest request body: an action on CONSOLE_SELECT_MAX messages with
 * the longest ids fits in a third of it. */
#define CONSOLE_BODY_MAX (96 * 1024)

enum {
	R_PUBLIC = 1, /* no session needed */
	R_API = 2,    /* answers 401 instead of sending to the login page */
	R_FORM = 4,   /* a POST with a form and its CSRF token */
	R_LOGIN = 8,  /* the login form: its nonce cookie instead of a session's token */
};

typedef struct {
	const char *method, *path;
	void (*fn)(console_req *q);
	unsigned flags;
	const char *const *params; /* query arguments (GET) or form fields (POST) */
	const char *const *repeat; /* form fields that may repeat */
} console_route;

static const char *const P_NONE[] = {NULL};
static const char *const P_NEXT[] = {"next", NULL};
static const char *const P_STUCK[] = {"biz", "age", "limit", "tenant", NULL};
static const char *const P_MESSAGE[] = {"biz", "key", "view", NULL};
static const char *const P_REJECTED[] = {"id", "before", "limit", "view", NULL};
static const char *const P_CONFLICTS[] = {"biz", "key", "before", "limit", NULL};
static const char *const P_SEARCH[] = {"biz", "key", "limit", "tenant", "scheduled", NULL};
static const char *const P_TENANTS[] = {"name", NULL};
static const char *const F_LOGIN[] = {"name", "token", "nonce", "next", NULL};
static const char *const F_LOGOUT[] = {"csrf", NULL};
static const char *const F_ACTION[] = {"csrf", "action", "reason", "sel", "back", NULL};
static const char *const F_REPEAT_SEL[] = {"sel", NULL};

static void serve_asset(console_req *q);

static const console_route routes[] = {
	{"GET", "/", page_root, 0, P_NONE, NULL},
	{"GET", "/login", page_login, R_PUBLIC, P_NEXT, NULL},
	{"POST", "/login", action_login, R_PUBLIC | R_FORM | R_LOGIN, F_LOGIN, NULL},
	{"POST", "/logout", action_logout, R_FORM, F_LOGOUT, NULL},
	{"GET", "/overview", page_overview, 0, P_NONE, NULL},
	{"GET", "/api/overview", page_api_overview, R_API, P_NONE, NULL},
	{"GET", "/stuck", page_stuck, 0, P_STUCK, NULL},
	{"GET", "/message", page_message, 0, P_MESSAGE, NULL},
	{"GET", "/rejected", page_rejected, 0, P_REJECTED, NULL},
	{"GET", "/conflicts", page_conflicts, 0, P_CONFLICTS, NULL},
	{"GET", "/search", page_search, 0, P_SEARCH, NULL},
	{"GET", "/tenants", page_tenants, 0, P_TENANTS, NULL},
	{"POST", "/actions", action_messages, R_FORM, F_ACTION, F_REPEAT_SEL},
	{"GET", "/static/", serve_asset, R_PUBLIC, P_NONE, NULL},
};
#define NROUTES (sizeof routes / sizeof routes[0])

/* What the server's opaque pointer holds for each route. */
typedef struct {
	console *c;
	const console_route *rt;
} bound_route;

/* ---- replies ---- */

void console_text(console_req *q, int status, const char *fmt, ...)
{
	va_list ap;
	q->reply->status = status;
	q->reply->content_type = "text/plain; charset=utf-8";
	sbuf_reset(&q->reply->body);
	va_start(ap, fmt);
	char line[2048];
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	sbuf_puts(&q->reply->body, line);
	sbuf_puts(&q->reply->body, "\n");
}

void console_error(console_req *q, int status, const char *fmt, ...)
{
	va_list ap;
	char line[2048];
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (!q->logged_in || strcmp(http_method(q->req), "GET") != 0 ||
	    strncmp(http_path(q->req), "/api/", 5) == 0) {
		console_text(q, status, "%s", line);
		return;
	}
	sbuf_reset(&q->reply->body);
	view_begin(q, status == 404 ? "Not found" : "Error", NULL);
	sbuf_puts(view_out(q), "<p class=\"error\" id=\"error\">");
	view_text(q, line);
	sbuf_puts(view_out(q), "</p>\n");
	view_end(q);
	q->reply->status = status;
}

void console_redirect(console_req *q, int status, const char *location)
{
	q->reply->status = status;
	q->reply->content_type = "text/plain; charset=utf-8";
	sbuf_reset(&q->reply->body);
	http_reply_header(q->reply, "Location", location);
}

void console_ops_error(console_req *q, ops_rc rc, const char *err)
{
	switch (rc) {
	case OPS_BAD_ARG: console_error(q, 400, "%s", err); return;
	case OPS_NOT_FOUND: console_error(q, 404, "%s", err); return;
	case OPS_REFUSED: console_error(q, 409, "%s", err); return;
	case OPS_OK:
	case OPS_DB_ERROR: break;
	}
	console_error(q, 503, "PostgreSQL: %s", err);
}

void console_no_message(const char *biz_id, const char *message_key, char *err, size_t errsz)
{
	snprintf(err, errsz, "no message with biz_id \"%s\" and message_key \"%s\"", biz_id,
	         message_key);
}

struct pg_conn *console_conn(console_req *q)
{
	char err[1024];
	struct pg_conn *conn = console_db_take(q->c->db, err, sizeof err);
	if (!conn)
		console_error(q, 503, "%s", err);
	return conn;
}

void console_conn_done(console_req *q, struct pg_conn *conn)
{
	console_db_give(q->c->db, conn);
}

int console_tenant_param(console_req *q, const char *name, const char **out)
{
	char why[256];
	*out = console_param(q, name);
	if (!*out)
		return 0;
	if (console_scope(q)) {
		console_error(q, 400, "parameter %s: a console token of a tenant sees that tenant only",
		              name);
		return -1;
	}
	if (tenant_name_check(*out, why, sizeof why) != 0) {
		console_error(q, 400, "parameter %s: %s", name, why);
		return -1;
	}
	return 0;
}

void console_actor(const console_req *q, char *out, size_t outsz)
{
	snprintf(out, outsz, "console:%s", q->sess.name);
}

/* ---- parameters ---- */

const char *console_param(console_req *q, const char *name)
{
	const char *v = http_query(q->req, name);
	return v && *v ? v : NULL;
}

int console_int_param(console_req *q, const char *name, long long lo, long long hi,
                      long long def, long long *out)
{
	const char *v = console_param(q, name);
	*out = def;
	if (!v)
		return 0;
	long long n = 0;
	const char *p = v;
	for (; *p >= '0' && *p <= '9' && n <= hi; p++)
		n = n * 10 + (*p - '0');
	if (p == v || *p || n < lo || n > hi) {
		char shown[64];
		console_error(q, 400, "parameter %s: \"%s\" is not a whole number from %lld to %lld",
		              name, log_escape(v, strlen(v), shown, sizeof shown), lo, hi);
		return -1;
	}
	*out = n;
	return 0;
}

int console_id_param(console_req *q, const char *name, const char *field, size_t max,
                     const char **out)
{
	char why[256];
	*out = console_param(q, name);
	if (*out && envelope_check_id(field, *out, max, why, sizeof why) != 0) {
		console_error(q, 400, "parameter %s: %s", name, why);
		return -1;
	}
	return 0;
}

const char *console_local_path(const char *v)
{
	static const char *const pages[] = {"/overview", "/stuck", "/message", "/rejected",
	                                    "/conflicts", "/search", "/tenants", NULL};
	if (!v || strlen(v) > 2048)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f || *p == '\\')
			return NULL; /* a path we write is percent-encoded ASCII */
	for (const char *const *pg = pages; *pg; pg++) {
		size_t n = strlen(*pg);
		if (strncmp(v, *pg, n) == 0 && (v[n] == '\0' || v[n] == '?'))
			return v;
	}
	return NULL;
}

/* ---- static files ---- */

static void serve_asset(console_req *q)
{
	const console_asset *a = console_asset_find(http_path(q->req));
	if (!a) {
		console_text(q, 404, "not found");
		return;
	}
	q->reply->content_type = a->type;
	sbuf_put(&q->reply->body, a->data, a->len);
}

/* ---- the checks of every request ---- */

static void to_login(console_req *q)
{
	sbuf loc = {0}, target = {0};
	http_request_target(q->req, &target);
	sbuf_puts(&loc, "/login");
	if (strcmp(http_path(q->req), "/") != 0) {
		sbuf_puts(&loc, "?next=");
		html_url_param(&loc, sbuf_str(&target));
	}
	console_redirect(q, 302, loc.oom || target.oom ? "/login" : sbuf_str(&loc));
	sbuf_free(&loc);
	sbuf_free(&target);
}

/* A session a tenant's token opened lives only as long as the token does:
 * asked of PostgreSQL on every request but the public ones (the login
 * page, the static files), so a revoked token, or a tenant removed or
 * disabled, ends its sessions at their next request. Returns 0 when the
 * request may go on (the session ended: as if there were none), or -1
 * after answering 503. */
static int check_scope(console_req *q)
{
	char err[1024];
	struct pg_conn *conn = console_conn(q);
	if (!conn)
		return -1;
	ops_rc rc = tenant_token_live(conn, q->sess.token_id, q->sess.tenant, err, sizeof err);
	console_conn_done(q, conn);
	if (rc == OPS_NOT_FOUND) {
		log_info("console: the session of console:%s (tenant %s) ended: %s", q->sess.name,
		         q->sess.tenant, err);
		console_session_end(q->c->sessions, q->sid);
		q->logged_in = 0;
		q->sid[0] = '\0';
		memset(&q->sess, 0, sizeof q->sess);
		return 0;
	}
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
		return -1;
	}
	return 0;
}

/* Refuse a request that has no live session. Returns 0 when it may go on. */
static int need_session(console_req *q, const console_route *rt)
{
	if (q->logged_in || (rt->flags & R_PUBLIC))
		return 0;
	if (rt->flags & R_API) {
		console_text(q, 401, "{\"error\": \"log in first\"}");
		q->reply->content_type = "application/json";
	} else if (strcmp(rt->method, "GET") == 0) {
		to_login(q);
	} else {
		console_text(q, 401, "log in first (the session is missing or has expired)");
	}
	return -1;
}

/* A POST's content type, origin, form and token. Returns 0 when it may go
 * on, else it has answered. */
static int check_form(console_req *q, const console_route *rt)
{
	char err[512];
	const char *ct = http_header(q->req, "Content-Type");
	const char *want = "application/x-www-form-urlencoded";
	if (!ct || strncasecmp(ct, want, strlen(want)) != 0 ||
	    (ct[strlen(want)] && ct[strlen(want)] != ';')) {
		console_text(q, 415, "send the form as %s", want);
		return -1;
	}
	if (console_origin_ok(http_header(q->req, "Origin"), http_header(q->req, "Sec-Fetch-Site"),
	                      http_header(q->req, "Host"), err, sizeof err) != 0) {
		console_text(q, 403, "%s", err);
		return -1;
	}
	size_t len;
	const char *body = http_body(q->req, &len);
	if (form_parse(body, len, 2 * CONSOLE_SELECT_MAX + 16, &q->form, err, sizeof err) != 0 ||
	    form_check(&q->form, rt->params, rt->repeat, err, sizeof err) != 0) {
		console_text(q, 400, "%s", err);
		return -1;
	}
	const char *expected = (rt->flags & R_LOGIN) ? http_cookie(q->req, "txhub_login")
	                                             : q->sess.csrf;
	const char *given = form_get(&q->form, (rt->flags & R_LOGIN) ? "nonce" : "csrf");
	if (!secret_equal(given, expected)) {
		console_text(q, 403, "the form's %s is missing or wrong: reload the page and try again",
		             (rt->flags & R_LOGIN) ? "login nonce" : "CSRF token");
		return -1;
	}
	return 0;
}

static void dispatch(void *opaque, const http_request *req, http_reply *reply)
{
	const bound_route *b = opaque;
	console_req q;
	memset(&q, 0, sizeof q);
	q.c = b->c;
	q.req = req;
	q.reply = reply;
	char err[512];
	if (!console_host_ok(http_header(req, "Host"), b->c->cfg->console_listen)) {
		console_text(&q, 400, "the Host header does not name this console's address");
		return;
	}
	const char *sid = http_cookie(req, "txhub_session");
	q.logged_in = console_session_find(b->c->sessions, sid, clock_ms(), &q.sess);
	if (q.logged_in)
		snprintf(q.sid, sizeof q.sid, "%s", sid);
	int is_post = strcmp(b->rt->method, "POST") == 0;
	if (http_query_check(req, is_post ? P_NONE : b->rt->params, err, sizeof err) != 0) {
		console_error(&q, 400, "%s", err);
		return;
	}
	if (q.logged_in && console_scope(&q) && !(b->rt->flags & R_PUBLIC) && check_scope(&q) != 0)
		return;
	if (need_session(&q, b->rt) != 0)
		return;
	if ((b->rt->flags & R_FORM) && check_form(&q, b->rt) != 0) {
		form_free(&q.form);
		return;
	}
	b->rt->fn(&q);
	form_free(&q.form);
}

/* ---- start-up ---- */

/* The database, when it answers: behind this binary is refused (exit 1),
 * unreachable is only a warning (pages answer 503 until it is back). */
static int check_database(console *c)
{
	char err[1024];
	struct pg_conn *conn = console_db_take(c->db, err, sizeof err);
	if (!conn) {
		log_warn("console: %s; starting anyway, pages answer 503 until it answers", err);
		return 0;
	}
	int version = 0, rc = 0;
	if (console_db_schema_version(conn, &version, err, sizeof err) != 0) {
		log_warn("console: %s", err);
	} else if (version < migrate_latest()) {
		log_error("console: the database schema is at version %d, this txhub needs %d: run "
		          "`txhub migrate` first", version, migrate_latest());
		rc = -1;
	}
	console_db_give(c->db, conn);
	return rc;
}

static int serve(console *c, bound_route *bound)
{
	http_route hr[NROUTES];
	for (size_t i = 0; i < NROUTES; i++) {
		bound[i].c = c;
		bound[i].rt = &routes[i];
		hr[i] = (http_route){routes[i].method, routes[i].path, dispatch, &bound[i]};
	}
	const txhub_config *cfg = c->cfg;
	http_options o = {.thread_per_connection = 1,
	                  .max_connections = (unsigned)cfg->console_max_connections,
	                  .max_per_address = (unsigned)cfg->console_max_per_address,
	                  .request_timeout_ms = (unsigned)cfg->console_request_timeout_ms,
	                  .keys = "console", .body_max = CONSOLE_BODY_MAX,
	                  .headers = SECURITY_HEADERS};
	char err[512];
	if (!(c->http = http_start(c->cfg->console_listen, hr, NROUTES, &o, err, sizeof err))) {
		log_error("console: console.listen: %s", err);
		return -1;
	}
	log_info("console: serving http://%s/ (%s)", c->cfg->console_listen,
	         c->open_mode ? "console.open: no token, a name logs in" : "login with console.token");
	return 0;
}

/* A line about refused logins (console_throttle_sweep()). */
static void log_refusals(void *ud, const char *line)
{
	(void)ud;
	log_warn("%s", line);
}

int console_main(const txhub_config *cfg)
{
	char err[512];
	console c = {.cfg = cfg};
	if (console_check_config(cfg, &c.open_mode, err, sizeof err) != 0) {
		fprintf(stderr, "txhub console: %s\n", err);
		return 2;
	}
	bound_route bound[NROUTES];
	int status = 1;
	if (!(c.sessions = console_sessions_new()) || !(c.db = console_db_new(cfg)) ||
	    !(c.throttle = console_throttle_new((unsigned)cfg->console_login_failures,
	                                        cfg->console_login_window_ms))) {
		log_error("console: out of memory");
		goto out;
	}
	if (check_database(&c) != 0 || serve(&c, bound) != 0)
		goto out;
	while (!signals_stop_requested()) {
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
		console_throttle_sweep(c.throttle, clock_ms(), 0, log_refusals, NULL);
	}
	log_info("console: stopping");
	status = 0;
out:
	http_stop(c.http);
	if (c.throttle) /* the refusals counted since their last line */
		console_throttle_sweep(c.throttle, clock_ms(), 1, log_refusals, NULL);
	console_throttle_free(c.throttle);
	console_db_free(c.db);
	console_sessions_free(c.sessions);
	return status;
}
