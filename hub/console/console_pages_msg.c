/* console_pages_msg.c: the console's pages about messages and records:
 * Stuck (with the action form), Message (one row, its payload and
 * history), Rejected and Conflicts. Each reads through ops.h and answers
 * 400 for a bad parameter, 404 for an unknown message or record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "duration.h"
#include "envelope.h"
#include "html.h"

/* The value of a text parameter that must be one of two words (the first
 * when absent); -1 after answering 400. */
static int choice_param(console_req *q, const char *name, const char *a, const char *b,
                        int *second)
{
	const char *v = console_param(q, name);
	*second = 0;
	if (!v || strcmp(v, a) == 0)
		return 0;
	if (strcmp(v, b) == 0) {
		*second = 1;
		return 0;
	}
	console_error(q, 400, "parameter %s: give %s or %s", name, a, b);
	return -1;
}

/* The form fields every action form carries: the token and where to come
 * back to (this page, as requested). */
static void action_hidden(console_req *q)
{
	sbuf target = {0};
	http_request_target(q->req, &target);
	view_csrf(q);
	sbuf_puts(view_out(q), "<input type=\"hidden\" name=\"back\" value=\"");
	html_attr(view_out(q), sbuf_str(&target));
	sbuf_puts(view_out(q), "\">");
	sbuf_free(&target);
}

/* The buttons of an action form: resolve (commit, roll back), redrive,
 * send now (a scheduled message), skip (a parked forward or one held for
 * its key: `txhub skip`); the reason field with resolve or skip (required
 * for a skip: the server refuses one without). */
static void action_buttons(console_req *q, int resolve, int redrive, int send_now, int skip)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<div class=\"actions\">");
	if (resolve || skip)
		sbuf_printf(b, "<label>Reason <input name=\"reason\" id=\"reason\" maxlength=\"%d\" "
		            "placeholder=\"ticket, what you checked\"></label>", OPS_REASON_MAX);
	if (resolve)
		sbuf_puts(b, "<button name=\"action\" value=\"commit\" class=\"commit\">Resolve: commit"
		             "</button><button name=\"action\" value=\"rollback\" class=\"rollback\">"
		             "Resolve: roll back</button>");
	if (redrive)
		sbuf_puts(b, "<button name=\"action\" value=\"redrive\" class=\"redrive\">Redrive"
		             "</button>");
	if (send_now) /* a scheduled message: redrive --now */
		sbuf_puts(b, "<button name=\"action\" value=\"send_now\" class=\"redrive\">Send now, "
		             "before its due time</button>");
	if (skip) /* never forwarded; its key's later messages flow */
		sbuf_puts(b, "<button name=\"action\" value=\"skip\" class=\"skip\" title=\"Give up "
		             "on its forward (send_status skipped, never sent); needs a reason\">Skip"
		             "</button>");
	sbuf_puts(b, "<span id=\"selected\" class=\"note\"></span></div>\n");
}

/* ---- stuck ---- */

static ops_rc stuck_lists(struct pg_conn *conn, const char *biz, const char *tenant,
                          int64_t age_ms, int limit, cJSON *lists[3], char *err, size_t errsz)
{
	static const char *const cf[] = {"check_failed"}, *const prep[] = {"prepared"};
	ops_list_filter f[3] = {
		{.statuses = cf, .nstatuses = 1, .biz_id = biz, .limit = limit, .tenant = tenant},
		{.send_status = "failed", .biz_id = biz, .limit = limit, .tenant = tenant},
		{.statuses = prep, .nstatuses = 1, .biz_id = biz, .older_ms = age_ms, .limit = limit,
		 .tenant = tenant},
	};
	for (int i = 0; i < 3; i++) {
		ops_rc rc = ops_list(conn, &f[i], &lists[i], err, errsz);
		if (rc != OPS_OK)
			return rc;
	}
	return OPS_OK;
}

static void stuck_filters(console_req *q, const char *biz, const char *age, const char *tenant)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<form class=\"filters\" method=\"get\" action=\"/stuck\"><label>biz_id "
	             "<input name=\"biz\" id=\"filter-biz\" maxlength=\"64\" value=\"");
	html_attr(b, biz ? biz : "");
	sbuf_puts(b, "\"></label><label>prepared for longer than <input name=\"age\" id=\"age\" "
	             "size=\"6\" value=\"");
	html_attr(b, age);
	sbuf_puts(b, "\"></label>");
	view_tenant_filter(q, tenant);
	sbuf_puts(b, "<button>Apply</button></form>\n");
}

static void stuck_table(console_req *q, cJSON *lists[3], const char *age)
{
	static const char *const groups[] = {"check-back gave up (check_failed)",
	                                     "forward gave up (send_status failed)",
	                                     "prepared, no decision yet"};
	sbuf *b = view_out(q);
	sbuf_puts(b, "<form method=\"post\" action=\"/actions\" id=\"act\">");
	action_hidden(q);
	action_buttons(q, 1, 1, 0, 1);
	sbuf_puts(b, "<table class=\"rows\" id=\"stuck\">");
	view_row_head(q, 1, 1);
	sbuf_puts(b, "<tbody>");
	for (int g = 0; g < 3; g++) {
		sbuf_printf(b, "<tr class=\"group\"><th colspan=\"%d\">%s: %d",
		            console_scope(q) ? 9 : 10, groups[g], cJSON_GetArraySize(lists[g]));
		if (g == 2) {
			sbuf_puts(b, " older than ");
			view_text(q, age);
		}
		sbuf_puts(b, "</th></tr>\n");
		const cJSON *row;
		cJSON_ArrayForEach(row, lists[g])
			view_row_cells(q, row, g == 0 ? "check_failed" : g == 1 ? "send failed" : "prepared",
			               1);
	}
	sbuf_puts(b, "</tbody></table></form>\n");
}

void page_stuck(console_req *q)
{
	const char *biz, *tenant, *age = console_param(q, "age");
	long long limit;
	int64_t age_ms = 0;
	char why[256], err[1024];
	if (console_id_param(q, "biz", "biz_id", ENVELOPE_BIZ_ID_MAX, &biz) != 0 ||
	    console_int_param(q, "limit", 1, CONSOLE_PAGE_ROWS_MAX, 100, &limit) != 0 ||
	    console_tenant_param(q, "tenant", &tenant) != 0)
		return;
	if (duration_parse(age ? age : "5m", &age_ms, why, sizeof why) != 0) {
		console_error(q, 400, "parameter age: %s", why);
		return;
	}
	cJSON *lists[3] = {NULL, NULL, NULL};
	struct pg_conn *conn = console_conn(q);
	if (!conn)
		return;
	ops_rc rc = stuck_lists(conn, biz, tenant ? tenant : console_scope(q), age_ms, (int)limit,
	                        lists, err, sizeof err);
	console_conn_done(q, conn);
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
	} else {
		view_begin(q, "Stuck messages", "stuck");
		stuck_filters(q, biz, age ? age : "5m", tenant);
		stuck_table(q, lists, age ? age : "5m");
		view_end(q);
	}
	for (int i = 0; i < 3; i++)
		cJSON_Delete(lists[i]);
}

/* ---- message ---- */

static void field_row(console_req *q, const cJSON *m, const char *label, const char *name)
{
	sbuf_printf(view_out(q), "<tr><th>%s</th><td data-field=\"%s\">", label, name);
	view_jtext(q, m, name);
	sbuf_puts(view_out(q), "</td></tr>");
}

static void message_fields(console_req *q, const cJSON *m)
{
	static const char *const names[] = {
		"biz_id", "message_key", "status", "decision", "send_status", "forward_topic",
		"forward_key", "checkback_url", "check_attempts", "send_attempts", "last_error",
		"src_partition", "src_offset", "created_at", "updated_at", "next_check_at",
		"next_send_at", "not_before", "alerted_at", "trace_id", "traceparent", "tracestate",
		"dead_lettered_at"};
	sbuf_puts(view_out(q), "<table class=\"fields\" id=\"fields\">");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		field_row(q, m, names[i], names[i]);
	sbuf_puts(view_out(q), "<tr><th>forward headers</th><td>");
	const cJSON *h, *hs = cJSON_GetObjectItem(m, "forward_headers");
	if (!cJSON_IsObject(hs))
		hs = NULL;
	if (!hs || !hs->child)
		sbuf_puts(view_out(q), "-");
	cJSON_ArrayForEach(h, hs) {
		sbuf_puts(view_out(q), "<div><code>");
		view_text(q, h->string);
		sbuf_puts(view_out(q), "</code>: ");
		view_text(q, cJSON_IsString(h) ? h->valuestring : "(not text)");
		sbuf_puts(view_out(q), "</div>");
	}
	sbuf_puts(view_out(q), "</td></tr></table>\n");
}

static void message_payload(console_req *q, const cJSON *m, int hex)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<h2>Payload <span class=\"note\">");
	view_jtext(q, m, "payload_bytes");
	sbuf_puts(b, " bytes, ");
	view_jtext(q, m, "payload_encoding");
	sbuf_puts(b, "</span> <span class=\"toggle\">");
	sbuf url = {0};
	sbuf_puts(&url, "/message?biz=");
	html_url_param(&url, cJSON_GetStringValue(cJSON_GetObjectItem(m, "biz_id")));
	sbuf_puts(&url, "&key=");
	html_url_param(&url, cJSON_GetStringValue(cJSON_GetObjectItem(m, "message_key")));
	sbuf_puts(b, hex ? "<a id=\"as-text\" href=\"" : "<b>text</b> | <a id=\"as-hex\" href=\"");
	html_text(b, sbuf_str(&url));
	sbuf_puts(b, hex ? "\">text</a> | <b>hex</b>" : "&amp;view=hex\">hex</a>");
	sbuf_free(&url);
	sbuf_puts(b, "</span></h2><div id=\"payload\">");
	view_bytes(q, cJSON_GetStringValue(cJSON_GetObjectItem(m, "payload")),
	           cJSON_GetStringValue(cJSON_GetObjectItem(m, "payload_encoding")),
	           hex ? VIEW_BYTES_HEX : VIEW_BYTES_TEXT, OPS_VALUE_MAX);
	sbuf_puts(b, "</div>\n");
}

static void message_history(console_req *q, const cJSON *hist)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<h2>History, oldest first</h2><table class=\"rows\" id=\"history\"><thead><tr>"
	             "<th class=\"c-at\">at</th><th class=\"c-event\">event</th>"
	             "<th class=\"c-actor\">actor</th><th>detail</th></tr></thead><tbody>");
	const cJSON *ev;
	cJSON_ArrayForEach(ev, hist) {
		int derived = cJSON_IsTrue(cJSON_GetObjectItem(ev, "derived"));
		sbuf_puts(b, derived ? "<tr class=\"derived\">" : "<tr>");
		view_jcell(q, VIEW_WHOLE, ev, "at");
		view_cell(q, VIEW_WHOLE, "event",
		          cJSON_GetStringValue(cJSON_GetObjectItem(ev, "event")));
		if (derived)
			view_cell(q, VIEW_WHOLE, "actor", "(from the row)");
		else
			view_cell(q, VIEW_WHOLE, "actor",
			          cJSON_GetStringValue(cJSON_GetObjectItem(ev, "actor")));
		view_jcell(q, VIEW_WHOLE, ev, "detail");
		sbuf_puts(b, "</tr>\n");
	}
	sbuf_puts(b, "</tbody></table>\n");
}

static void message_actions(console_req *q, const cJSON *m)
{
	const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(m, "status"));
	const char *send = cJSON_GetStringValue(cJSON_GetObjectItem(m, "send_status"));
	int resolve = st && (strcmp(st, "prepared") == 0 || strcmp(st, "check_failed") == 0);
	int redrive = (st && strcmp(st, "check_failed") == 0) || (send && strcmp(send, "failed") == 0);
	int send_now = cJSON_IsTrue(cJSON_GetObjectItem(m, "scheduled"));
	/* as `txhub skip`: a failed send, or one held for an earlier message of its key */
	int skip = (st && strcmp(st, "committed") == 0) &&
	           ((send && strcmp(send, "failed") == 0) ||
	            cJSON_IsTrue(cJSON_GetObjectItem(m, "held")));
	if (!resolve && !redrive && !send_now && !skip)
		return;
	sbuf *b = view_out(q);
	sbuf_puts(b, "<h2>Act on it</h2><form method=\"post\" action=\"/actions\" id=\"act\">");
	action_hidden(q);
	sbuf_puts(b, "<input type=\"hidden\" name=\"sel\" value=\"");
	view_selection(q, cJSON_GetStringValue(cJSON_GetObjectItem(m, "biz_id")),
	               cJSON_GetStringValue(cJSON_GetObjectItem(m, "message_key")));
	sbuf_puts(b, "\">");
	action_buttons(q, resolve, redrive, send_now, skip);
	sbuf_puts(b, "</form>\n");
}

static void conflict_rows(console_req *q, const cJSON *rows, int with_message);

/* Whether the message of ops_show()'s document is the session's to see. */
static int in_scope(console_req *q, const cJSON *doc)
{
	const char *t = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "message"), "tenant"));
	return !console_scope(q) || (t && strcmp(t, console_scope(q)) == 0);
}

void page_message(console_req *q)
{
	const char *biz, *key;
	int hex;
	char err[1024];
	if (console_id_param(q, "biz", "biz_id", ENVELOPE_BIZ_ID_MAX, &biz) != 0 ||
	    console_id_param(q, "key", "message_key", ENVELOPE_MESSAGE_KEY_MAX, &key) != 0 ||
	    choice_param(q, "view", "text", "hex", &hex) != 0)
		return;
	if (!biz || !key) {
		console_error(q, 400, "parameters biz and key are both required (the message's "
		              "biz_id and message_key)");
		return;
	}
	cJSON *doc = NULL, *conflicts = NULL;
	struct pg_conn *conn = console_conn(q);
	if (!conn)
		return;
	ops_conflicts_filter cf = {.biz_id = biz, .message_key = key, .limit = 20,
	                           .tenant = console_scope(q)};
	ops_rc rc = ops_show(conn, biz, key, &doc, err, sizeof err);
	if (rc == OPS_OK && !in_scope(q, doc)) {
		console_no_message(biz, key, err, sizeof err);
		rc = OPS_NOT_FOUND;
	}
	if (rc == OPS_OK)
		rc = ops_conflicts_list(conn, &cf, &conflicts, err, sizeof err);
	console_conn_done(q, conn);
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
	} else {
		const cJSON *m = cJSON_GetObjectItem(doc, "message");
		char title[ENVELOPE_BIZ_ID_MAX + ENVELOPE_MESSAGE_KEY_MAX + 32];
		snprintf(title, sizeof title, "Message %s / %s", biz, key);
		view_begin(q, title, NULL);
		message_fields(q, m);
		message_actions(q, m);
		message_payload(q, m, hex);
		message_history(q, cJSON_GetObjectItem(doc, "history"));
		if (cJSON_GetArraySize(conflicts) > 0) {
			sbuf_puts(view_out(q), "<h2>Conflicts of this message</h2>");
			conflict_rows(q, conflicts, 0);
		}
		view_end(q);
	}
	cJSON_Delete(doc);
	cJSON_Delete(conflicts);
}

/* ---- rejected ---- */

/* "Older" link: this page's path with before = the last id shown. */
static void older_link(console_req *q, const char *path, const cJSON *rows, long long limit,
                       const char *biz, const char *key)
{
	const cJSON *last = cJSON_GetArrayItem(rows, cJSON_GetArraySize(rows) - 1);
	if (!last || cJSON_GetArraySize(rows) < limit)
		return;
	sbuf url = {0};
	sbuf_printf(&url, "%s?before=%.0f&limit=%lld", path,
	            cJSON_GetNumberValue(cJSON_GetObjectItem(last, "id")), limit);
	if (biz) {
		sbuf_puts(&url, "&biz=");
		html_url_param(&url, biz);
	}
	if (key) {
		sbuf_puts(&url, "&key=");
		html_url_param(&url, key);
	}
	sbuf_puts(view_out(q), "<p><a id=\"older\" href=\"");
	html_text(view_out(q), sbuf_str(&url));
	sbuf_puts(view_out(q), "\">Older</a></p>\n");
	sbuf_free(&url);
}

void view_rejected_rows(console_req *q, const cJSON *rows, const char *id)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<table class=\"rows\" id=\"");
	view_text(q, id);
	sbuf_puts(b, "\"><thead><tr><th class=\"c-id\">id</th>"
	             "<th class=\"c-at\">at</th><th class=\"c-src\">topic / partition / offset</th>"
	             "<th class=\"c-reason\">reason</th><th class=\"c-bytes\">key</th><th>value</th>"
	             "</tr></thead><tbody>");
	const cJSON *r;
	cJSON_ArrayForEach(r, rows) {
		double id = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "id"));
		sbuf_printf(b, "<tr><td class=\"line\"><a href=\"/rejected?id=%.0f\" title=\"record "
		            "%.0f, whole\">%.0f</a></td>", id, id, id);
		view_jcell(q, VIEW_LINE, r, "created_at");
		view_src_cell(q, VIEW_LINE, r);
		view_cell(q, VIEW_PROSE, "error-text",
		          cJSON_GetStringValue(cJSON_GetObjectItem(r, "reason")));
		sbuf_puts(b, "<td class=\"value\">");
		view_bytes(q, cJSON_GetStringValue(cJSON_GetObjectItem(r, "key")),
		           cJSON_GetStringValue(cJSON_GetObjectItem(r, "key_encoding")),
		           VIEW_BYTES_PREVIEW, 64);
		sbuf_puts(b, "</td><td class=\"value\">");
		view_bytes(q, cJSON_GetStringValue(cJSON_GetObjectItem(r, "value")),
		           cJSON_GetStringValue(cJSON_GetObjectItem(r, "value_encoding")),
		           VIEW_BYTES_PREVIEW, CONSOLE_VALUE_PREVIEW);
		sbuf_puts(b, "</td></tr>\n");
	}
	sbuf_puts(b, "</tbody></table>\n");
}

static void rejected_one(console_req *q, const cJSON *r, int hex)
{
	sbuf *b = view_out(q);
	int how = hex ? VIEW_BYTES_HEX : VIEW_BYTES_TEXT;
	static const char *const names[] = {"id", "created_at", "src_topic", "src_partition",
	                                    "src_offset", "reason", "key_bytes", "value_bytes"};
	sbuf_puts(b, "<table class=\"fields\" id=\"fields\">");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		field_row(q, r, names[i], names[i]);
	sbuf_puts(b, "</table><h2>Key</h2>");
	view_bytes(q, cJSON_GetStringValue(cJSON_GetObjectItem(r, "key")),
	           cJSON_GetStringValue(cJSON_GetObjectItem(r, "key_encoding")), how, OPS_VALUE_MAX);
	sbuf_printf(b, "<h2>Value <span class=\"toggle\">%s<a href=\"/rejected?id=%.0f%s\">%s</a>"
	            "</span></h2><div id=\"value\">", hex ? "<b>hex</b> | " : "<b>text</b> | ",
	            cJSON_GetNumberValue(cJSON_GetObjectItem(r, "id")), hex ? "" : "&amp;view=hex",
	            hex ? "text" : "hex");
	view_bytes(q, cJSON_GetStringValue(cJSON_GetObjectItem(r, "value")),
	           cJSON_GetStringValue(cJSON_GetObjectItem(r, "value_encoding")), how, OPS_VALUE_MAX);
	sbuf_puts(b, "</div>\n");
}

void page_rejected(console_req *q)
{
	long long id, before, limit;
	int hex;
	char err[1024];
	if (console_int_param(q, "id", 1, INT64_MAX / 2, 0, &id) != 0 ||
	    console_int_param(q, "before", 1, INT64_MAX / 2, 0, &before) != 0 ||
	    console_int_param(q, "limit", 1, CONSOLE_PAGE_ROWS_MAX, 50, &limit) != 0 ||
	    choice_param(q, "view", "text", "hex", &hex) != 0)
		return;
	ops_rejected_filter f = {.id = id, .before_id = before, .limit = id ? 1 : (int)limit,
	                         .value_max = id ? OPS_VALUE_MAX : CONSOLE_VALUE_PREVIEW,
	                         .tenant = console_scope(q)};
	cJSON *rows = NULL;
	struct pg_conn *conn = console_conn(q);
	if (!conn)
		return;
	ops_rc rc = ops_rejected_list(conn, &f, &rows, err, sizeof err);
	console_conn_done(q, conn);
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
	} else if (id && cJSON_GetArraySize(rows) == 0) {
		console_error(q, 404, "no rejected record with id %lld", id);
	} else {
		view_begin(q, id ? "Rejected record" : "Rejected records, newest first", "rejected");
		if (id)
			rejected_one(q, cJSON_GetArrayItem(rows, 0), hex);
		else {
			view_rejected_rows(q, rows, "rejected");
			older_link(q, "/rejected", rows, limit, NULL, NULL);
		}
		view_end(q);
	}
	cJSON_Delete(rows);
}

/* ---- conflicts ---- */

/* The conflicts, a row each: cut to their columns on the Conflicts page
 * (with_message: its biz_id and message_key too, the key linked to the
 * message's page), whole on the message's own page. */
static void conflict_rows(console_req *q, const cJSON *rows, int with_message)
{
	view_fit line = with_message ? VIEW_LINE : VIEW_WHOLE;
	sbuf *b = view_out(q);
	sbuf_puts(b, "<table class=\"rows\" id=\"conflicts\"><thead><tr><th class=\"c-id\">id</th>"
	             "<th class=\"c-at\">at</th>");
	if (with_message)
		sbuf_puts(b, "<th class=\"c-biz\">biz_id</th><th class=\"c-key\">message_key</th>");
	sbuf_puts(b, "<th class=\"c-word\">arrived</th><th class=\"c-word\">met</th><th>detail</th>"
	             "<th class=\"c-src\">topic / partition / offset</th></tr></thead><tbody>");
	const cJSON *r;
	cJSON_ArrayForEach(r, rows) {
		sbuf_puts(b, "<tr>");
		view_jcell(q, line, r, "id");
		view_jcell(q, line, r, "created_at");
		if (with_message) {
			const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(r, "message_key"));
			view_jcell(q, line, r, "biz_id");
			view_td(q, line, NULL, key);
			view_message_link(q, cJSON_GetStringValue(cJSON_GetObjectItem(r, "biz_id")), key);
			sbuf_puts(b, "</td>");
		}
		view_jcell(q, line, r, "arrived");
		view_jcell(q, line, r, "met_status");
		view_jcell(q, with_message ? VIEW_PROSE : VIEW_WHOLE, r, "detail");
		view_src_cell(q, line, r);
		sbuf_puts(b, "</tr>\n");
	}
	sbuf_puts(b, "</tbody></table>\n");
}

void page_conflicts(console_req *q)
{
	const char *biz, *key;
	long long before, limit;
	char err[1024];
	if (console_id_param(q, "biz", "biz_id", ENVELOPE_BIZ_ID_MAX, &biz) != 0 ||
	    console_id_param(q, "key", "message_key", ENVELOPE_MESSAGE_KEY_MAX, &key) != 0 ||
	    console_int_param(q, "before", 1, INT64_MAX / 2, 0, &before) != 0 ||
	    console_int_param(q, "limit", 1, CONSOLE_PAGE_ROWS_MAX, 50, &limit) != 0)
		return;
	ops_conflicts_filter f = {.biz_id = biz, .message_key = key, .before_id = before,
	                          .limit = (int)limit, .tenant = console_scope(q)};
	cJSON *rows = NULL;
	struct pg_conn *conn = console_conn(q);
	if (!conn)
		return;
	ops_rc rc = ops_conflicts_list(conn, &f, &rows, err, sizeof err);
	console_conn_done(q, conn);
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
		return;
	}
	view_begin(q, "Conflicts, newest first", "conflicts");
	sbuf *b = view_out(q);
	sbuf_puts(b, "<form class=\"filters\" method=\"get\" action=\"/conflicts\"><label>biz_id "
	             "<input name=\"biz\" maxlength=\"64\" value=\"");
	html_attr(b, biz ? biz : "");
	sbuf_puts(b, "\"></label><label>message_key <input name=\"key\" maxlength=\"255\" value=\"");
	html_attr(b, key ? key : "");
	sbuf_puts(b, "\"></label><button>Filter</button></form>\n");
	conflict_rows(q, rows, 1);
	older_link(q, "/conflicts", rows, limit, biz, key);
	view_end(q);
	cJSON_Delete(rows);
}
