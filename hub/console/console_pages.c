/* console_pages.c: the console's front pages: login, Overview (and its
 * JSON, which app.js polls to refresh it without a reload) and Search.
 * The pages about messages are in console_pages_msg.c.
 *
 * Each page reads through ops.h on a pooled connection that it gives
 * back before doing anything slow: the Overview's lag asks the brokers
 * for up to OPS_LAG_BUDGET_MS without holding a PostgreSQL connection. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "console_int.h"
#include "envelope.h"
#include "html.h"
#include "log.h"

/* ---- / and login ---- */

void page_root(console_req *q)
{
	console_redirect(q, 302, "/overview");
}

void page_login_form(console_req *q, int status, const char *error, const char *next)
{
	char nonce[SECRET_HEX + 1], cookie[200];
	if (secret_random_hex(nonce) != 0) {
		console_text(q, 503, "no random bytes to be had for a login");
		return;
	}
	/* the double-submit nonce: a login form another site posts has none */
	snprintf(cookie, sizeof cookie, "txhub_login=%s; Path=/login; HttpOnly; SameSite=Strict; "
	         "Max-Age=3600", nonce);
	http_reply_header(q->reply, "Set-Cookie", cookie);
	sbuf *b = view_out(q);
	view_begin(q, "Log in", NULL);
	if (error) {
		sbuf_puts(b, "<p class=\"error\" id=\"error\" role=\"alert\">");
		view_text(q, error);
		sbuf_puts(b, "</p>\n");
	}
	sbuf_puts(b, "<form class=\"login\" method=\"post\" action=\"/login\">"
	             "<input type=\"hidden\" name=\"nonce\" value=\"");
	html_attr(b, nonce);
	sbuf_puts(b, "\">");
	if (next) {
		sbuf_puts(b, "<input type=\"hidden\" name=\"next\" value=\"");
		html_attr(b, next);
		sbuf_puts(b, "\">");
	}
	sbuf_printf(b, "<label>Your name <input name=\"name\" id=\"name\" required maxlength=\"%d\" "
	            "pattern=\"[A-Za-z0-9._@\\-]+\" autocomplete=\"username\" autofocus></label>",
	            CONSOLE_NAME_MAX);
	if (!q->c->open_mode)
		sbuf_puts(b, "<label>Token <input name=\"token\" id=\"token\" type=\"password\" required "
		             "autocomplete=\"current-password\"></label>");
	sbuf_puts(b, "<button id=\"login\">Log in</button></form>\n<p class=\"hint\">Your name goes "
	             "into the history of every message you resolve or redrive, as "
	             "<code>console:</code><i>name</i>.");
	if (q->c->open_mode)
		sbuf_puts(b, " This console runs with <code>console.open = true</code>: no token is "
		             "asked (loopback only).");
	sbuf_puts(b, "</p>\n");
	view_end(q);
	q->reply->status = status;
}

void page_login(console_req *q)
{
	const char *next = console_local_path(console_param(q, "next"));
	if (console_param(q, "next") && !next) {
		console_error(q, 400, "parameter next: not a page of this console");
		return;
	}
	if (q->logged_in) {
		console_redirect(q, 302, next ? next : "/overview");
		return;
	}
	page_login_form(q, 200, NULL, next);
}

/* ---- overview ---- */

static void add_read_at(cJSON *doc)
{
	char at[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(doc, "read_at", at);
}

ops_rc console_parked_rows(struct pg_conn *conn, const char *tenant, cJSON *rows, char *err,
                           size_t errsz)
{
	static const char *const cf[] = {"check_failed"};
	ops_list_filter f1 = {.statuses = cf, .nstatuses = 1, .limit = 10, .tenant = tenant};
	ops_list_filter f2 = {.send_status = "failed", .limit = 10, .tenant = tenant};
	const ops_list_filter *fs[] = {&f1, &f2};
	for (int i = 0; i < 2; i++) {
		cJSON *part = NULL;
		ops_rc rc = ops_list(conn, fs[i], &part, err, errsz);
		if (rc != OPS_OK)
			return rc;
		cJSON *row;
		while ((row = cJSON_DetachItemFromArray(part, 0)))
			cJSON_AddItemToArray(rows, row);
		cJSON_Delete(part);
	}
	return OPS_OK;
}

/* A scoped session's tenant, as console_db_tenants() gives it, into *t
 * (NULL for the global session). -1 after answering. */
static int scope_tenant(console_req *q, struct pg_conn *conn, cJSON **t)
{
	char err[1024];
	*t = NULL;
	if (!console_scope(q))
		return 0;
	if (console_db_tenants(conn, console_scope(q), t, err, sizeof err) != 0) {
		console_error(q, 503, "%s", err);
		return -1;
	}
	return 0;
}

cJSON *console_overview_doc(console_req *q)
{
	char err[1024];
	ops_status st;
	memset(&st, 0, sizeof st);
	cJSON *rows = cJSON_CreateArray(), *doc = NULL, *tenant = NULL;
	struct pg_conn *conn = rows ? console_conn(q) : NULL;
	if (!conn) {
		if (!rows)
			console_error(q, 503, "out of memory");
		cJSON_Delete(rows);
		return NULL;
	}
	ops_rc rc = ops_status_read_tenant(conn, q->c->cfg->alert_awaiting_prepare_ms,
	                                   console_scope(q), &st, err, sizeof err);
	if (rc == OPS_OK)
		rc = console_parked_rows(conn, console_scope(q), rows, err, sizeof err);
	int scope_rc = rc == OPS_OK ? scope_tenant(q, conn, &tenant) : 0;
	console_conn_done(q, conn);
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
		goto done;
	}
	if (scope_rc != 0)
		goto done;
	ops_status_lag(q->c->cfg, &st, OPS_LAG_BUDGET_MS);
	snprintf(st.dead_letters.topic, sizeof st.dead_letters.topic, "%s",
	         q->c->cfg->forward_dead_letter_topic);
	/* a tenant sees its own control topics' partitions; a tenant that is
	 * gone (removed a moment ago) sees none */
	if (console_scope(q) &&
	    console_scope_partitions(cJSON_GetArrayItem(tenant, 0), &st, err, sizeof err) != 0)
		log_warn("console: tenant %s: %s", console_scope(q), err);
	if (!(doc = ops_status_json(&st))) {
		console_error(q, 503, "out of memory");
		goto done;
	}
	cJSON_AddItemToObject(doc, "parked_rows", rows);
	rows = NULL;
	add_read_at(doc);
done:
	cJSON_Delete(rows);
	cJSON_Delete(tenant);
	ops_status_free(&st);
	return doc;
}

void page_api_overview(console_req *q)
{
	cJSON *doc = console_overview_doc(q);
	if (!doc)
		return;
	char *text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	if (!text) {
		console_text(q, 503, "out of memory");
		return;
	}
	q->reply->content_type = "application/json";
	sbuf_puts(&q->reply->body, text);
	free(text);
}

/* One number of the document at "a.b", in an element app.js refreshes. */
static void field(console_req *q, const cJSON *doc, const char *label, const char *path)
{
	char first[64];
	const char *dot = strchr(path, '.');
	snprintf(first, sizeof first, "%.*s", dot ? (int)(dot - path) : (int)strlen(path), path);
	const cJSON *v = cJSON_GetObjectItem(doc, first);
	if (dot)
		v = cJSON_GetObjectItem(v, dot + 1);
	sbuf_printf(view_out(q), "<tr><th>%s</th><td class=\"num\" data-field=\"%s\">", label, path);
	if (cJSON_IsNumber(v))
		sbuf_printf(view_out(q), "%.0f", v->valuedouble);
	else
		sbuf_puts(view_out(q), "-");
	sbuf_puts(view_out(q), "</td></tr>");
}

static void age_field(console_req *q, const cJSON *doc, const char *label, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(doc, name);
	sbuf_printf(view_out(q), "<tr><th>%s</th><td class=\"num\" data-age=\"%s\">", label, name);
	if (cJSON_IsNumber(v))
		view_age(q, v->valuedouble);
	else
		sbuf_puts(view_out(q), "none");
	sbuf_puts(view_out(q), "</td></tr>");
}

static void overview_cards(console_req *q, const cJSON *doc)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<section class=\"cards\"><div class=\"card\"><h2>Messages by state</h2><table>");
	for (int i = 0; i < OPS_NSTATUS; i++) {
		char path[64];
		snprintf(path, sizeof path, "messages.%s", ops_status_names[i]);
		field(q, doc, ops_status_names[i], path);
	}
	sbuf_puts(b, "</table></div><div class=\"card\"><h2>Forwards</h2><table>");
	field(q, doc, "pending", "send.pending");
	field(q, doc, "sent", "send.sent");
	field(q, doc, "failed", "send.failed");
	field(q, doc, "held for key order", "blocked.messages");
	sbuf_puts(b, "</table></div><div class=\"card attention\"><h2>Parked</h2><table>");
	field(q, doc, "all parked", "parked");
	field(q, doc, "check_failed", "parked_by.check_failed");
	field(q, doc, "failed sends", "parked_by.send_failed");
	field(q, doc, "awaiting_prepare, old", "parked_by.awaiting_prepare");
	/* forward.dead_letter_topic: failed sends produced there, not yet, failing */
	field(q, doc, "dead-lettered", "dead_letter.dead_lettered");
	field(q, doc, "not dead-lettered yet", "dead_letter.waiting");
	field(q, doc, "dead letter failing", "dead_letter.failing_messages");
	sbuf_puts(b, "</table></div><div class=\"card\"><h2>Oldest</h2><table>");
	age_field(q, doc, "prepared", "oldest_prepared_s");
	age_field(q, doc, "pending send", "oldest_pending_send_s");
	sbuf_puts(b, "</table></div><div class=\"card\"><h2>Rejected and conflicts</h2><table>");
	field(q, doc, "rejected, last hour", "rejected_1h");
	field(q, doc, "rejected, all", "rejected");
	field(q, doc, "conflicts, last hour", "conflicts_1h");
	field(q, doc, "conflicts, all", "conflicts");
	sbuf_puts(b, "</table></div></section>\n");
}

static void partitions_table(console_req *q, const cJSON *doc)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, console_scope(q) ? "<h2>Partitions of your control topics</h2>"
	                              : "<h2>Partitions of the control topic</h2>");
	sbuf_puts(b, "<table class=\"rows\" id=\"partitions\">"
	             "<thead><tr><th>topic</th><th class=\"c-num\">partition</th>"
	             "<th class=\"c-owner\">owner</th><th class=\"c-group\">group</th>"
	             "<th class=\"c-num\">epoch</th><th class=\"c-num\">next offset</th>"
	             "<th class=\"c-num\">lag</th><th class=\"c-age\">heartbeat</th></tr></thead>"
	             "<tbody>");
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "partitions")) {
		static const char *const cols[] = {"topic", "partition", "owner", "group", "epoch",
		                                   "next_offset", "lag"};
		sbuf_puts(b, "<tr>");
		for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
			view_jcell(q, VIEW_LINE, p, cols[i]);
		sbuf_puts(b, "<td class=\"line\">");
		const cJSON *hb = cJSON_GetObjectItem(p, "heartbeat_age_s");
		if (cJSON_IsNumber(hb)) {
			view_age(q, hb->valuedouble);
			sbuf_puts(b, " ago");
		} else {
			sbuf_puts(b, "-");
		}
		sbuf_puts(b, "</td></tr>");
	}
	sbuf_puts(b, "</tbody></table><p class=\"note\" id=\"lag-note\">");
	const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "lag_note"));
	if (note) {
		sbuf_puts(b, "Lag unknown: ");
		view_text(q, note);
	}
	sbuf_puts(b, "</p>\n");
}

static void parked_table(console_req *q, const cJSON *doc)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<h2>Parked messages, newest first <a class=\"more\" href=\"/stuck\">all stuck "
	             "messages</a></h2><table class=\"rows\" id=\"parked\">");
	view_row_head(q, 0, 0);
	sbuf_puts(b, "<tbody>");
	const cJSON *row;
	cJSON_ArrayForEach(row, cJSON_GetObjectItem(doc, "parked_rows"))
		view_row_cells(q, row, NULL, 0);
	sbuf_puts(b, "</tbody></table>\n");
}

/* forward.order = key: the keys held for an earlier unsent message, with
 * that message (to redrive or skip). */
static void blocked_table(console_req *q, const cJSON *doc)
{
	sbuf *b = view_out(q);
	const cJSON *keys = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "blocked"), "keys");
	if (cJSON_GetArraySize(keys) == 0)
		return;
	sbuf_puts(b, "<h2>Blocked forward keys (forward.order = key)</h2>"
	             "<table class=\"rows\" id=\"blocked\"><thead><tr><th>forward topic</th>"
	             "<th>forward key</th><th>control topic</th><th class=\"c-num\">partition</th>"
	             "<th class=\"c-num\">held</th><th>blocked by</th></tr></thead><tbody>");
	const cJSON *k;
	cJSON_ArrayForEach(k, keys) {
		static const char *const cols[] = {"forward_topic", "forward_key", "control_topic",
		                                   "partition", "held"};
		sbuf_puts(b, "<tr>");
		for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
			view_jcell(q, VIEW_LINE, k, cols[i]);
		sbuf_puts(b, "<td class=\"line\">");
		const cJSON *by = cJSON_GetObjectItem(k, "blocked_by");
		const char *biz = cJSON_GetStringValue(cJSON_GetObjectItem(by, "biz_id"));
		const char *mk = cJSON_GetStringValue(cJSON_GetObjectItem(by, "message_key"));
		if (biz && mk) {
			view_text(q, biz);
			sbuf_puts(b, " / ");
			view_message_link(q, biz, mk);
			sbuf_puts(b, " (");
			view_jtext(q, by, "send_status");
			sbuf_puts(b, ")");
		} else {
			sbuf_puts(b, "sent: released within about a second");
		}
		sbuf_puts(b, "</td></tr>");
	}
	sbuf_puts(b, "</tbody></table>\n");
}

void page_overview(console_req *q)
{
	cJSON *doc = console_overview_doc(q);
	if (!doc)
		return;
	view_begin(q, "Overview", "overview");
	overview_cards(q, doc);
	partitions_table(q, doc);
	blocked_table(q, doc);
	parked_table(q, doc);
	sbuf_puts(view_out(q), "<p class=\"note\">Read at <span id=\"read-at\">");
	view_jtext(q, doc, "read_at");
	sbuf_puts(view_out(q), "</span>; refreshed every 5 seconds. <span id=\"refresh-error\" "
	                       "class=\"error-text\"></span></p>\n");
	view_end(q);
	cJSON_Delete(doc);
}

/* ---- search ---- */

static void search_form(console_req *q, const char *biz, const char *key, const char *tenant,
                        int scheduled)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<form class=\"filters\" method=\"get\" action=\"/search\"><label>biz_id "
	             "<input name=\"biz\" maxlength=\"64\" value=\"");
	html_attr(b, biz ? biz : "");
	sbuf_puts(b, "\"></label><label>message_key <input name=\"key\" maxlength=\"255\" value=\"");
	html_attr(b, key ? key : "");
	sbuf_puts(b, "\"></label>");
	view_tenant_filter(q, tenant);
	sbuf_printf(b, "<label><input type=\"checkbox\" name=\"scheduled\" id=\"scheduled\" "
	            "value=\"1\"%s> scheduled only</label>", scheduled ? " checked" : "");
	sbuf_puts(b, "<button>Search</button></form>\n");
}

/* Delayed delivery (docs/consumers.md: Delayed delivery): the scheduled messages, next due first,
 * with their due time. */
static void scheduled_table(console_req *q, const cJSON *rows)
{
	sbuf *b = view_out(q);
	sbuf_printf(b, "<p id=\"count\">%d scheduled message(s), next due first</p>"
	            "<table class=\"rows\" id=\"results\"><thead><tr>%s<th class=\"c-biz\">"
	            "biz_id</th><th class=\"c-key\">message_key</th><th class=\"c-at\">due "
	            "(not_before)</th><th>forward topic</th></tr></thead><tbody>",
	            cJSON_GetArraySize(rows), console_scope(q) ? "" : "<th class=\"c-tenant\">tenant</th>");
	const cJSON *row;
	cJSON_ArrayForEach(row, rows) {
		const char *biz = cJSON_GetStringValue(cJSON_GetObjectItem(row, "biz_id"));
		const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(row, "message_key"));
		if (!biz || !key)
			continue;
		sbuf_puts(b, "<tr>");
		if (!console_scope(q))
			view_jcell(q, VIEW_LINE, row, "tenant");
		view_cell(q, VIEW_LINE, NULL, biz);
		view_td(q, VIEW_LINE, NULL, key);
		view_message_link(q, biz, key);
		sbuf_puts(b, "</td>");
		view_jcell(q, VIEW_LINE, row, "not_before");
		view_jcell(q, VIEW_LINE, row, "forward_topic");
		sbuf_puts(b, "</tr>\n");
	}
	sbuf_puts(b, "</tbody></table>\n");
}

void page_search(console_req *q)
{
	const char *biz, *key, *tenant;
	long long limit;
	if (console_id_param(q, "biz", "biz_id", ENVELOPE_BIZ_ID_MAX, &biz) != 0 ||
	    console_id_param(q, "key", "message_key", ENVELOPE_MESSAGE_KEY_MAX, &key) != 0 ||
	    console_int_param(q, "limit", 1, CONSOLE_PAGE_ROWS_MAX, 100, &limit) != 0 ||
	    console_tenant_param(q, "tenant", &tenant) != 0)
		return;
	const char *sch = console_param(q, "scheduled");
	if (sch && strcmp(sch, "1") != 0) {
		console_error(q, 400, "parameter scheduled: give 1 or leave it out");
		return;
	}
	cJSON *rows = NULL;
	if (biz || key || sch) {
		char err[1024];
		ops_list_filter f = {.biz_id = biz, .message_key = key, .limit = (int)limit,
		                     .tenant = tenant ? tenant : console_scope(q), .scheduled = !!sch};
		struct pg_conn *conn = console_conn(q);
		if (!conn)
			return;
		ops_rc rc = ops_list(conn, &f, &rows, err, sizeof err);
		console_conn_done(q, conn);
		if (rc != OPS_OK) {
			console_ops_error(q, rc, err);
			return;
		}
	}
	view_begin(q, "Search", "search");
	search_form(q, biz, key, tenant, sch != NULL);
	sbuf *b = view_out(q);
	if (rows && sch) {
		scheduled_table(q, rows);
	} else if (!rows) {
		sbuf_puts(b, "<p class=\"hint\">Give a biz_id (its messages, newest first), a "
		             "message_key (that key under any biz_id: PostgreSQL reads the whole table, "
		             "slow on a large one), or both (one message); or tick <i>scheduled only</i> "
		             "for the delayed messages not yet due.</p>\n");
	} else {
		sbuf_printf(b, "<p id=\"count\">%d message(s)</p><table class=\"rows\" id=\"results\">",
		            cJSON_GetArraySize(rows));
		view_row_head(q, 0, 0);
		sbuf_puts(b, "<tbody>");
		const cJSON *row;
		cJSON_ArrayForEach(row, rows)
			view_row_cells(q, row, NULL, 0);
		sbuf_puts(b, "</tbody></table>\n");
	}
	view_end(q);
	cJSON_Delete(rows);
}
