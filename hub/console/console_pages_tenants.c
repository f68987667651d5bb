/* console_pages_tenants.c: the console's Tenants page (docs/tenants.md: Sharing
 * one hub between teams): each tenant's rules, its rates over the last minute
 * and hour, its parked rows and its last rejections. The global session sees
 * every tenant (or the one named by ?name=); a session a tenant's token opened
 * sees its own tenant only, whatever it asks for.
 *
 * Every read is bounded: one statement for the rules and the capped counts
 * of all the tenants shown (console_db_tenants()), then ten parked rows of
 * each kind and twenty rejections per tenant, each through an index
 * (migrations/0011_tenant_indexes.sql). Tenants are few. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "html.h"
#include "tenant_rules.h"

/* Most entries of one rule list shown (the rest are counted). */
#define SHOWN_ENTRIES 50
#define RECENT_REJECTIONS 20

/* Add the tenant's parked rows and last rejections to t, as
 * "parked_rows" and "rejections". */
static ops_rc tenant_rows(struct pg_conn *conn, cJSON *t, char *err, size_t errsz)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(t, "name"));
	cJSON *parked = cJSON_AddArrayToObject(t, "parked_rows"), *rej = NULL;
	if (!parked || !name) {
		snprintf(err, errsz, "out of memory");
		return OPS_DB_ERROR;
	}
	ops_rc rc = console_parked_rows(conn, name, parked, err, errsz);
	ops_rejected_filter f = {.limit = RECENT_REJECTIONS, .value_max = CONSOLE_VALUE_PREVIEW,
	                         .tenant = name};
	if (rc == OPS_OK && (rc = ops_rejected_list(conn, &f, &rej, err, errsz)) == OPS_OK)
		cJSON_AddItemToObject(t, "rejections", rej);
	return rc;
}

static void rule_row(console_req *q, const cJSON *t, const char *label, const char *name)
{
	sbuf *b = view_out(q);
	const cJSON *list = cJSON_GetObjectItem(t, name), *e;
	sbuf_printf(b, "<tr><th>%s</th><td class=\"entries\" data-field=\"%s\">", label, name);
	int n = 0, all = cJSON_GetArraySize(list);
	if (all == 0)
		sbuf_puts(b, "<span class=\"none\">none</span>");
	cJSON_ArrayForEach(e, list) {
		if (n++ == SHOWN_ENTRIES) {
			sbuf_printf(b, "<span class=\"note\">and %d more</span>", all - SHOWN_ENTRIES);
			break;
		}
		sbuf_puts(b, "<code>");
		view_text(q, cJSON_GetStringValue(e));
		sbuf_puts(b, "</code> ");
	}
	sbuf_puts(b, "</td></tr>");
}

static void rules_card(console_req *q, const cJSON *t)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<div class=\"card rules\"><h3>Rules</h3><table class=\"fields\">");
	rule_row(q, t, "control topics", "control_topics");
	rule_row(q, t, "biz_ids", "biz_ids");
	rule_row(q, t, "forward topics", "forward_topics");
	rule_row(q, t, "check-back allow", "checkback_allow");
	const cJSON *cap = cJSON_GetObjectItem(t, "max_envelope_bytes");
	sbuf_puts(b, "<tr><th>envelope cap</th><td data-field=\"max_envelope_bytes\">");
	if (cJSON_IsNumber(cap))
		sbuf_printf(b, "%.0f bytes", cap->valuedouble);
	else
		sbuf_puts(b, "envelope.max_bytes");
	sbuf_puts(b, "</td></tr><tr><th>changed</th><td>");
	view_jtext(q, t, "updated_at");
	sbuf_puts(b, "</td></tr></table></div>");
}

/* A capped count (console_db_tenants()). */
static void count_cell(console_req *q, const cJSON *t, const char *name)
{
	double v = cJSON_GetNumberValue(cJSON_GetObjectItem(t, name));
	sbuf_printf(view_out(q), "<td class=\"num\" data-field=\"%s\">", name);
	if (v != v)
		sbuf_puts(view_out(q), "-");
	else if (v > CONSOLE_RATE_CAP)
		sbuf_printf(view_out(q), "&gt; %d", CONSOLE_RATE_CAP);
	else
		sbuf_printf(view_out(q), "%.0f", v);
	sbuf_puts(view_out(q), "</td>");
}

static void rates_card(console_req *q, const cJSON *t)
{
	static const struct {
		const char *label, *m, *h;
	} rows[] = {
		{"new messages", "stored_1m", "stored_1h"},
		{"rejected", "rejected_1m", "rejected_1h"},
		{"forwards sent", "sent_1m", "sent_1h"},
	};
	sbuf *b = view_out(q);
	sbuf_puts(b, "<div class=\"card\"><h3>Rates</h3><table><tr><th></th><th class=\"num\">last "
	             "minute</th><th class=\"num\">last hour</th></tr>");
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		sbuf_printf(b, "<tr><th>%s</th>", rows[i].label);
		count_cell(q, t, rows[i].m);
		count_cell(q, t, rows[i].h);
		sbuf_puts(b, "</tr>");
	}
	sbuf_puts(b, "</table></div><div class=\"card attention\"><h3>Parked</h3><table>"
	             "<tr><th>check_failed</th>");
	count_cell(q, t, "check_failed");
	sbuf_puts(b, "</tr><tr><th>failed sends</th>");
	count_cell(q, t, "send_failed");
	sbuf_puts(b, "</tr></table></div>");
}

static void tenant_section(console_req *q, const cJSON *t)
{
	sbuf *b = view_out(q);
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(t, "name"));
	int on = cJSON_IsTrue(cJSON_GetObjectItem(t, "enabled"));
	sbuf_puts(b, "<section class=\"tenant\" id=\"tenant-");
	view_text(q, name);
	sbuf_puts(b, "\"><h2>");
	view_text(q, name);
	sbuf_printf(b, " <span class=\"badge %s\">%s</span>", on ? "on" : "off",
	            on ? "enabled" : "disabled");
	if (!console_scope(q)) {
		sbuf_puts(b, "<a class=\"more\" href=\"/stuck?tenant=");
		view_text(q, name);
		sbuf_puts(b, "\">its stuck messages</a>");
	}
	sbuf_puts(b, "</h2><div class=\"cards tenant-cards\">");
	rules_card(q, t);
	rates_card(q, t);
	sbuf_puts(b, "</div><h3>Parked messages, newest first</h3><table class=\"rows\" id=\"parked-");
	view_text(q, name);
	sbuf_puts(b, "\">");
	view_row_head(q, 0, 0);
	sbuf_puts(b, "<tbody>");
	const cJSON *row;
	cJSON_ArrayForEach(row, cJSON_GetObjectItem(t, "parked_rows"))
		view_row_cells(q, row, NULL, 0);
	sbuf_printf(b, "</tbody></table>\n<h3>Last %d rejections, newest first</h3>",
	            RECENT_REJECTIONS);
	sbuf id = {0};
	sbuf_printf(&id, "rejections-%s", name ? name : "");
	view_rejected_rows(q, cJSON_GetObjectItem(t, "rejections"), id.oom ? "" : sbuf_str(&id));
	sbuf_free(&id);
	sbuf_puts(b, "</section>\n");
}

void page_tenants(console_req *q)
{
	const char *name = console_param(q, "name");
	char err[1024];
	if (name && tenant_name_check(name, err, sizeof err) != 0) {
		console_error(q, 400, "parameter name: %s", err);
		return;
	}
	/* a scoped session asking for another tenant hears what a name no
	 * tenant has would get */
	int other = console_scope(q) && name && strcmp(name, console_scope(q)) != 0;
	cJSON *tenants = NULL;
	struct pg_conn *conn = console_conn(q);
	if (!conn)
		return;
	ops_rc rc = OPS_OK;
	if (other)
		tenants = cJSON_CreateArray();
	else if (console_db_tenants(conn, console_scope(q) ? console_scope(q) : name, &tenants, err,
	                            sizeof err) != 0)
		rc = OPS_DB_ERROR;
	cJSON *t;
	cJSON_ArrayForEach(t, tenants) {
		if (rc == OPS_OK)
			rc = tenant_rows(conn, t, err, sizeof err);
	}
	console_conn_done(q, conn);
	if (rc != OPS_OK) {
		console_ops_error(q, rc, err);
	} else if (name && cJSON_GetArraySize(tenants) == 0) {
		console_error(q, 404, "no tenant %s", name);
	} else {
		view_begin(q, console_scope(q) ? "Your tenant" : "Tenants", "tenants");
		if (cJSON_GetArraySize(tenants) == 0)
			sbuf_puts(view_out(q), "<p class=\"hint\" id=\"no-tenants\">No tenants: "
			                       "<code>txhub tenant add</code> makes one (docs/tenants.md: Sharing "
			                       "one hub between teams).</p>\n");
		cJSON_ArrayForEach(t, tenants)
			tenant_section(q, t);
		view_end(q);
	}
	cJSON_Delete(tenants);
}
