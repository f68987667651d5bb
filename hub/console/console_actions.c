/* console_actions.c: the console's POSTs: log in, log out, and resolve,
 * redrive or skip a selection of messages. console.c has already checked the
 * origin, the form's fields and its CSRF token (or, for the login, its
 * nonce); here each field's value is checked before anything is done,
 * and the whole selection before the first message is touched.
 *
 * An action answers 303 back to the page it came from, with what it did
 * kept in the session and shown there once (post, redirect, get: a
 * reload does not post again). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "console_int.h"
#include "envelope.h"
#include "log.h"
#include "tenant_ops.h"

#define SESSION_COOKIE "txhub_session"

/* ---- login and logout ---- */

/* Who a login's token makes the session: console.token the global one
 * (compared in constant time, here and nowhere else), a tenant's token
 * (looked up by its SHA-256 in txhub.tenant_tokens: tenant_ops.h) one
 * scoped to that tenant, when the tenant is enabled. */
typedef struct {
	char tenant[CONSOLE_TENANT_MAX + 1]; /* "" for console.token */
	int64_t token_id;
} login_scope;

/* 1 when token is the console's or an enabled tenant's (*who says which);
 * 0 when it is neither; -1 when PostgreSQL could not be asked (err). */
static int token_match(console_req *q, const char *token, login_scope *who, char *err,
                       size_t errsz)
{
	memset(who, 0, sizeof *who);
	if (secret_token_equal(token, q->c->cfg->console_token))
		return 1;
	if (!token || !*token)
		return 0;
	struct pg_conn *conn = console_db_take(q->c->db, err, errsz);
	if (!conn)
		return -1;
	ops_rc rc = tenant_token_lookup(conn, token, who->tenant, sizeof who->tenant, &who->token_id,
	                                err, errsz);
	console_db_give(q->c->db, conn);
	return rc == OPS_OK ? 1 : rc == OPS_NOT_FOUND ? 0 : -1;
}

/* The token of a login as name (checked) from this request's address,
 * through the throttle (console_throttle.h), which counts a wrong token
 * the same whether it was meant as the console's or a tenant's: 1 when it
 * logs in (*who: as whom), else 0 after answering 429 (the address must
 * wait: its token is not looked at), 401, or 503 (PostgreSQL could not
 * say; counted as a wrong try, the throttle having counted it first). */
static int login_token_ok(console_req *q, const char *name, const char *token, const char *next,
                          login_scope *who)
{
	char line[CONSOLE_THROTTLE_LINE], retry[32], msg[160], err[1024];
	const char *peer = http_peer(q->req);
	int64_t wait = console_throttle_begin(q->c->throttle, peer, clock_ms(), line);
	if (line[0])
		log_warn("%s", line);
	if (wait > 0) {
		snprintf(retry, sizeof retry, "%lld", (long long)wait);
		snprintf(msg, sizeof msg, "Too many wrong tokens from your address: try again in %lld s.",
		         (long long)wait);
		http_reply_header(q->reply, "Retry-After", retry);
		page_login_form(q, 429, msg, next);
		return 0;
	}
	int ok = token_match(q, token, who, err, sizeof err);
	console_throttle_end(q->c->throttle, peer, ok == 1, name, clock_ms(), line);
	if (line[0])
		log_warn("%s", line);
	if (ok < 0)
		console_text(q, 503, "the token cannot be checked now: %s", err);
	else if (!ok)
		page_login_form(q, 401, "That token is not the console's token nor a tenant's.", next);
	return ok == 1;
}

void action_login(console_req *q)
{
	const char *name = form_get(&q->form, "name"), *token = form_get(&q->form, "token");
	const char *next_in = form_get(&q->form, "next");
	const char *next = console_local_path(next_in);
	char err[256], id[SECRET_HEX + 1], cookie[256];
	login_scope who;
	memset(&who, 0, sizeof who);
	if (next_in && *next_in && !next) {
		console_text(q, 400, "field next: not a page of this console");
		return;
	}
	if (console_name_check(name, err, sizeof err) != 0) {
		page_login_form(q, 400, err, next);
		return;
	}
	if (!q->c->open_mode && !login_token_ok(q, name, token, next, &who))
		return;
	if (console_session_create_scoped(q->c->sessions, name, who.tenant, who.token_id, clock_ms(),
	                                  id) != 0) {
		console_text(q, 503, "no random bytes to be had for a session");
		return;
	}
	if (q->logged_in) /* a second login from one browser replaces its session */
		console_session_end(q->c->sessions, q->sid);
	snprintf(cookie, sizeof cookie, SESSION_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict", id);
	http_reply_header(q->reply, "Set-Cookie", cookie);
	http_reply_header(q->reply, "Set-Cookie",
	                  "txhub_login=; Path=/login; HttpOnly; SameSite=Strict; Max-Age=0");
	if (who.tenant[0])
		log_info("console: console:%s logged in from %s with token %lld of tenant %s", name,
		         http_peer(q->req), (long long)who.token_id, who.tenant);
	else
		log_info("console: console:%s logged in from %s", name, http_peer(q->req));
	console_redirect(q, 303, next ? next : "/overview");
}

void action_logout(console_req *q)
{
	console_session_end(q->c->sessions, q->sid);
	http_reply_header(q->reply, "Set-Cookie",
	                  SESSION_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
	log_info("console: console:%s logged out", q->sess.name);
	console_redirect(q, 303, "/login");
}

/* ---- resolve, redrive and skip ---- */

typedef struct {
	char biz[ENVELOPE_BIZ_ID_MAX + 1];
	char key[ENVELOPE_MESSAGE_KEY_MAX + 1];
} selected;

typedef enum { ACT_COMMIT, ACT_ROLLBACK, ACT_REDRIVE, ACT_SEND_NOW, ACT_SKIP } act_kind;

/* The action, reason and where to go back to, checked. -1 after 400. */
static int read_action(console_req *q, act_kind *kind, const char **reason, const char **back)
{
	const char *a = form_get(&q->form, "action"), *b = form_get(&q->form, "back");
	char why[256];
	if (a && strcmp(a, "commit") == 0)
		*kind = ACT_COMMIT;
	else if (a && strcmp(a, "rollback") == 0)
		*kind = ACT_ROLLBACK;
	else if (a && strcmp(a, "redrive") == 0)
		*kind = ACT_REDRIVE;
	else if (a && strcmp(a, "send_now") == 0) /* a scheduled message (redrive --now) */
		*kind = ACT_SEND_NOW;
	else if (a && strcmp(a, "skip") == 0) /* forward.order = key: txhub skip */
		*kind = ACT_SKIP;
	else {
		console_text(q, 400, "field action: give commit, rollback, redrive, send_now or skip");
		return -1;
	}
	*reason = form_get(&q->form, "reason");
	if (*reason && !**reason)
		*reason = NULL;
	if (*reason && envelope_check_id("reason", *reason, OPS_REASON_MAX, why, sizeof why) != 0) {
		console_text(q, 400, "field %s", why);
		return -1;
	}
	if (*kind == ACT_SKIP && !*reason) { /* as `txhub skip` requires --reason */
		console_text(q, 400, "field reason: a skip needs a reason (why the message is given "
		             "up; it goes into its history): nothing was skipped");
		return -1;
	}
	*back = b && *b ? console_local_path(b) : "/stuck";
	if (!*back) {
		console_text(q, 400, "field back: not a page of this console");
		return -1;
	}
	return 0;
}

/* Every sel field, parsed and checked. NULL after 400. */
static selected *read_selection(console_req *q, size_t *n)
{
	*n = form_count(&q->form, "sel");
	if (*n == 0 || *n > CONSOLE_SELECT_MAX) {
		console_text(q, 400, "field sel: select 1 to %d messages", CONSOLE_SELECT_MAX);
		return NULL;
	}
	selected *s = calloc(*n, sizeof *s);
	if (!s) {
		console_text(q, 503, "out of memory");
		return NULL;
	}
	size_t k = 0;
	char err[512];
	for (size_t i = 0; i < q->form.n; i++) {
		if (strcmp(q->form.fields[i].name, "sel") != 0)
			continue;
		if (view_selection_parse(q->form.fields[i].value, s[k].biz, sizeof s[k].biz, s[k].key,
		                         sizeof s[k].key, err, sizeof err) != 0) {
			console_text(q, 400, "%s", err);
			free(s);
			return NULL;
		}
		k++;
	}
	return s;
}

/* Run the action on one message, when it is in the session's scope
 * (tenant; NULL: any); a line for the flash into out, the message's trace
 * id into trace_id ("" without one, or out of scope). Another tenant's
 * message is "not found", word for word as a missing one. Returns 1 when
 * it was done. */
static int act_one(struct pg_conn *conn, const char *tenant, act_kind kind, const selected *s,
                   const char *reason, const char *actor, char *out, size_t outsz,
                   char trace_id[33])
{
	ops_change ch;
	char err[1200];
	memset(&ch, 0, sizeof ch);
	trace_id[0] = '\0';
	int in = tenant ? console_db_in_scope(conn, tenant, s->biz, s->key, err, sizeof err) : 1;
	if (in <= 0) {
		if (in == 0)
			console_no_message(s->biz, s->key, err, sizeof err);
		snprintf(out, outsz, "%s / %s: %s: %s", s->biz, s->key, in == 0 ? "not found" : "failed",
		         err);
		return 0;
	}
	ops_rc rc = kind == ACT_REDRIVE
		? ops_redrive(conn, s->biz, s->key, actor, &ch, err, sizeof err)
		: kind == ACT_SEND_NOW
		? ops_redrive_now(conn, s->biz, s->key, actor, &ch, err, sizeof err)
		: kind == ACT_SKIP
		? ops_skip(conn, s->biz, s->key, reason, actor, &ch, err, sizeof err)
		: ops_resolve(conn, s->biz, s->key, kind == ACT_COMMIT ? OPS_COMMIT : OPS_ROLLBACK,
		              reason, actor, &ch, err, sizeof err);
	memcpy(trace_id, ch.trace_id, sizeof ch.trace_id);
	if (rc == OPS_OK) {
		snprintf(out, outsz, "%s / %s: %s%s%s (was %s)", s->biz, s->key, ch.status,
		         ch.send_status[0] ? ", send " : "", ch.send_status, ch.previous);
		return 1;
	}
	snprintf(out, outsz, "%s / %s: %s: %s", s->biz, s->key,
	         rc == OPS_REFUSED ? "refused" : rc == OPS_NOT_FOUND ? "not found" : "failed", err);
	return 0;
}

static const char *act_name(act_kind k)
{
	return k == ACT_COMMIT     ? "resolve --commit"
	       : k == ACT_ROLLBACK ? "resolve --rollback"
	       : k == ACT_SEND_NOW ? "redrive --now"
	       : k == ACT_SKIP     ? "skip"
	                           : "redrive";
}

void action_messages(console_req *q)
{
	act_kind kind;
	const char *reason, *back;
	size_t n;
	selected *sel;
	if (read_action(q, &kind, &reason, &back) != 0 || !(sel = read_selection(q, &n)))
		return;
	char actor[OPS_ACTOR_MAX + 1], line[1600];
	console_actor(q, actor, sizeof actor);
	struct pg_conn *conn = console_conn(q);
	if (!conn) {
		free(sel);
		return;
	}
	sbuf lines = {0};
	size_t done = 0;
	for (size_t i = 0; i < n; i++) {
		char tid[33];
		int ok = act_one(conn, console_scope(q), kind, &sel[i], reason, actor, line,
		                 sizeof line, tid);
		done += (size_t)ok;
		sbuf_printf(&lines, "\n%s", line);
		char shown[400];
		log_about about = {sel[i].biz, sel[i].key, -1, tid};
		log_msg_about(LOG_INFO, "console", &about, "%s by %s: %s", act_name(kind), actor,
		              log_escape(line, strlen(line), shown, sizeof shown));
	}
	console_conn_done(q, conn);
	sbuf flash = {0};
	sbuf_printf(&flash, "%s by %s: %zu done, %zu not%s", act_name(kind), actor, done, n - done,
	            sbuf_str(&lines));
	console_session_set_flash(q->c->sessions, q->sid, flash.oom ? "(out of memory)"
	                                                            : sbuf_str(&flash));
	console_redirect(q, 303, back);
	sbuf_free(&lines);
	sbuf_free(&flash);
	free(sel);
}
