/* console_view.c: the HTML around the console's pages (see
 * console_int.h). Every piece of data goes through html_text(): the
 * pages hold no markup built from what producers wrote, and no inline
 * script or style (the Content-Security-Policy would refuse it anyway). */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "duration.h"
#include "envelope.h"
#include "html.h"
#include "tenant_rules.h"

const char *console_scope(const console_req *q)
{
	return q->sess.tenant[0] ? q->sess.tenant : NULL;
}

sbuf *view_out(console_req *q) { return &q->reply->body; }

void view_text(console_req *q, const char *s) { html_text(view_out(q), s); }

/* A JSON member as the text a page shows: a string as it is, a number
 * whole (in num), yes or no, and "-" for null or absent. */
static const char *jstr(const cJSON *o, const char *name, char *num, size_t numsz)
{
	const cJSON *v = cJSON_GetObjectItem(o, name);
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsNumber(v)) {
		snprintf(num, numsz, "%.0f", v->valuedouble);
		return num;
	}
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v) ? "yes" : "no";
	return "-";
}

void view_jtext(console_req *q, const cJSON *o, const char *name)
{
	char num[64];
	view_text(q, jstr(o, name, num, sizeof num));
}

void view_td(console_req *q, view_fit kind, const char *cls, const char *title)
{
	static const char *const kinds[] = {"line", "prose", "whole"};
	sbuf *b = view_out(q);
	sbuf_printf(b, "<td class=\"%s%s%s\"", kinds[kind], cls ? " " : "", cls ? cls : "");
	if (title && kind != VIEW_WHOLE) {
		sbuf_puts(b, " title=\"");
		html_text(b, title);
		sbuf_puts(b, "\"");
	}
	sbuf_puts(b, ">");
}

void view_cell(console_req *q, view_fit kind, const char *cls, const char *text)
{
	if (!text)
		text = "-";
	view_td(q, kind, cls, text);
	sbuf_puts(view_out(q), kind == VIEW_PROSE ? "<div class=\"clamp\">" : "");
	view_text(q, text);
	sbuf_puts(view_out(q), kind == VIEW_PROSE ? "</div></td>" : "</td>");
}

void view_jcell(console_req *q, view_fit kind, const cJSON *o, const char *name)
{
	char num[64];
	view_cell(q, kind, NULL, jstr(o, name, num, sizeof num));
}

void view_src_cell(console_req *q, view_fit kind, const cJSON *o)
{
	char num[3][64];
	const char *part[3] = {jstr(o, "src_topic", num[0], sizeof num[0]),
	                       jstr(o, "src_partition", num[1], sizeof num[1]),
	                       jstr(o, "src_offset", num[2], sizeof num[2])};
	sbuf whole = {0};
	sbuf_printf(&whole, "%s / %s / %s", part[0], part[1], part[2]);
	sbuf *b = view_out(q);
	view_td(q, kind, NULL, whole.oom ? NULL : sbuf_str(&whole));
	sbuf_free(&whole);
	sbuf_puts(b, "<div class=\"src\"><span>");
	view_text(q, part[0]);
	sbuf_puts(b, "</span><span> / ");
	view_text(q, part[1]);
	sbuf_puts(b, " / ");
	view_text(q, part[2]);
	sbuf_puts(b, "</span></div></td>");
}

void view_csrf(console_req *q)
{
	sbuf_puts(view_out(q), "<input type=\"hidden\" name=\"csrf\" value=\"");
	html_attr(view_out(q), q->sess.csrf);
	sbuf_puts(view_out(q), "\">");
}

static void nav_item(console_req *q, const char *nav, const char *id, const char *label)
{
	sbuf_printf(view_out(q), "<a href=\"/%s\"%s>%s</a>", id,
	            nav && strcmp(nav, id) == 0 ? " class=\"current\" aria-current=\"page\"" : "",
	            label);
}

static void header_bar(console_req *q, const char *nav)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<header><a class=\"brand\" href=\"/overview\">txhub console</a>");
	if (!q->logged_in) {
		sbuf_puts(b, "</header>\n");
		return;
	}
	sbuf_puts(b, "<nav>");
	nav_item(q, nav, "overview", "Overview");
	nav_item(q, nav, "stuck", "Stuck");
	nav_item(q, nav, "rejected", "Rejected");
	nav_item(q, nav, "conflicts", "Conflicts");
	nav_item(q, nav, "tenants", console_scope(q) ? "Your tenant" : "Tenants");
	sbuf_puts(b, "</nav><form class=\"search\" method=\"get\" action=\"/search\">"
	             "<input name=\"biz\" placeholder=\"biz_id\" aria-label=\"biz_id\" maxlength=\"64\">"
	             "<input name=\"key\" placeholder=\"message_key\" aria-label=\"message_key\" "
	             "maxlength=\"255\"><button>Search</button></form>"
	             "<form class=\"user\" method=\"post\" action=\"/logout\"><span id=\"user\">console:");
	view_text(q, q->sess.name);
	sbuf_puts(b, "</span>");
	if (console_scope(q)) {
		sbuf_puts(b, "<span id=\"tenant\" class=\"tenant\" title=\"this session sees one "
		             "tenant's rows only\">tenant ");
		view_text(q, console_scope(q));
		sbuf_puts(b, "</span>");
	}
	view_csrf(q);
	sbuf_puts(b, "<button>Log out</button></form></header>\n");
}

void view_begin(console_req *q, const char *title, const char *nav)
{
	sbuf *b = view_out(q);
	q->reply->content_type = "text/html; charset=utf-8";
	sbuf_puts(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
	             "<title>");
	view_text(q, title);
	sbuf_puts(b, " - txhub console</title><link rel=\"stylesheet\" href=\"/static/style.css\">"
	             "<link rel=\"icon\" href=\"/static/favicon.svg\">"
	             "<script src=\"/static/app.js\" defer></script></head>\n<body data-page=\"");
	view_text(q, nav ? nav : "");
	sbuf_puts(b, "\">");
	header_bar(q, nav);
	sbuf_puts(b, "<main>\n");
	char flash[CONSOLE_FLASH_MAX];
	if (q->logged_in)
		console_session_take_flash(q->c->sessions, q->sid, flash, sizeof flash);
	if (q->logged_in && flash[0]) {
		sbuf_puts(b, "<pre class=\"flash\" id=\"flash\" role=\"status\">");
		view_text(q, flash);
		sbuf_puts(b, "</pre>\n");
	}
	sbuf_puts(b, "<h1>");
	view_text(q, title);
	sbuf_puts(b, "</h1>\n");
}

void view_end(console_req *q)
{
	sbuf_puts(view_out(q), "</main></body></html>\n");
}

void view_message_link(console_req *q, const char *biz_id, const char *message_key)
{
	sbuf url = {0};
	sbuf_puts(&url, "/message?biz=");
	html_url_param(&url, biz_id);
	sbuf_puts(&url, "&key=");
	html_url_param(&url, message_key);
	sbuf_puts(view_out(q), "<a class=\"key\" href=\"");
	view_text(q, sbuf_str(&url));
	sbuf_puts(view_out(q), "\">");
	view_text(q, message_key);
	sbuf_puts(view_out(q), "</a>");
	sbuf_free(&url);
}

void view_age(console_req *q, double seconds)
{
	char age[64];
	if (!(seconds >= 0 && seconds < 1e15)) /* negative, NaN (a null), absurd */
		sbuf_puts(view_out(q), "-");
	else
		sbuf_puts(view_out(q), duration_format((int64_t)seconds, age, sizeof age));
}

/* value as its bytes: the text itself, or base64 decoded. NULL when out
 * of memory or not base64. */
static unsigned char *value_bytes(const char *value, const char *encoding, size_t *len)
{
	size_t n = strlen(value);
	if (strcmp(encoding, "base64") != 0) {
		unsigned char *p = malloc(n + 1);
		if (p)
			memcpy(p, value, n + 1);
		*len = n;
		return p;
	}
	if (n % 4 != 0 || n > (size_t)1 << 30)
		return NULL;
	unsigned char *p = malloc(n / 4 * 3 + 1);
	int got = p ? EVP_DecodeBlock(p, (const unsigned char *)value, (int)n) : -1;
	if (got < 0) {
		free(p);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes */
	size_t pad = n >= 2 && value[n - 1] == '=' ? (value[n - 2] == '=' ? 2 : 1) : 0;
	*len = (size_t)got - pad;
	return p;
}

void view_bytes(console_req *q, const char *value, const char *encoding, int how,
                size_t max_bytes)
{
	sbuf *b = view_out(q);
	if (!value) {
		sbuf_puts(b, "<span class=\"none\">(null)</span>");
		return;
	}
	int text = encoding && strcmp(encoding, "utf8") == 0;
	if (text && how != VIEW_BYTES_HEX) {
		size_t n = strlen(value);
		sbuf_puts(b, "<pre class=\"text\">");
		html_text_n(b, value, n < max_bytes ? n : max_bytes);
		if (n > max_bytes)
			sbuf_printf(b, "\n... %zu more byte(s)", n - max_bytes);
		sbuf_puts(b, "</pre>");
		return;
	}
	size_t len = 0;
	unsigned char *raw = value_bytes(value, text ? "utf8" : "base64", &len);
	if (!raw) {
		sbuf_puts(b, "<span class=\"none\">(cannot be shown)</span>");
		return;
	}
	if (how == VIEW_BYTES_PREVIEW) {
		sbuf_puts(b, "<pre class=\"hex pairs\">");
		html_hex_pairs(b, raw, len, max_bytes);
	} else {
		sbuf_puts(b, "<pre class=\"hex\">");
		html_hexdump(b, raw, len, max_bytes);
	}
	sbuf_puts(b, "</pre>");
	free(raw);
}

void view_selection(console_req *q, const char *biz_id, const char *message_key)
{
	char head[32];
	snprintf(head, sizeof head, "%zu:", strlen(biz_id));
	sbuf_puts(view_out(q), head);
	html_attr(view_out(q), biz_id);
	html_attr(view_out(q), message_key);
}

int view_selection_parse(const char *v, char *biz, size_t bizsz, char *key, size_t keysz,
                         char *err, size_t errsz)
{
	size_t n = 0;
	const char *p = v;
	for (; *p >= '0' && *p <= '9' && n <= ENVELOPE_BIZ_ID_MAX; p++)
		n = n * 10 + (size_t)(*p - '0');
	if (p == v || *p != ':' || n == 0 || n > ENVELOPE_BIZ_ID_MAX || n >= bizsz ||
	    strlen(p + 1) <= n || strlen(p + 1) - n >= keysz) {
		snprintf(err, errsz, "field sel: expected <bytes of biz_id>:<biz_id><message_key>");
		return -1;
	}
	memcpy(biz, p + 1, n);
	biz[n] = '\0';
	snprintf(key, keysz, "%s", p + 1 + n);
	return ops_check_ids(biz, key, err, errsz) == OPS_OK ? 0 : -1;
}

void view_row_head(console_req *q, int why, int checkbox)
{
	sbuf *b = view_out(q);
	sbuf_puts(b, "<thead><tr>");
	if (checkbox)
		sbuf_puts(b, "<th class=\"c-sel\"><input type=\"checkbox\" id=\"select-all\" "
		             "aria-label=\"select all\"></th>");
	if (why)
		sbuf_puts(b, "<th class=\"c-why\">why</th>");
	if (!console_scope(q))
		sbuf_puts(b, "<th class=\"c-tenant\">tenant</th>");
	sbuf_puts(b, "<th class=\"c-biz\">biz_id</th><th class=\"c-key\">message_key</th>"
	             "<th class=\"c-status\">status</th><th class=\"c-send\">send</th>"
	             "<th class=\"c-tries\">checks / sends</th><th class=\"c-age\">updated</th>"
	             "<th>last error</th></tr></thead>\n");
}

void view_row_cells(console_req *q, const cJSON *row, const char *why, int checkbox)
{
	sbuf *b = view_out(q);
	const char *biz = cJSON_GetStringValue(cJSON_GetObjectItem(row, "biz_id"));
	const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(row, "message_key"));
	if (!biz || !key)
		return;
	sbuf_puts(b, "<tr>");
	if (checkbox) {
		sbuf_puts(b, "<td><input type=\"checkbox\" class=\"sel\" name=\"sel\" value=\"");
		view_selection(q, biz, key);
		sbuf_puts(b, "\" aria-label=\"select\"></td>");
	}
	if (why)
		view_cell(q, VIEW_LINE, "why", why);
	if (!console_scope(q))
		view_cell(q, VIEW_LINE, "tenant",
		          cJSON_GetStringValue(cJSON_GetObjectItem(row, "tenant")));
	view_cell(q, VIEW_LINE, NULL, biz);
	view_td(q, VIEW_LINE, NULL, key);
	view_message_link(q, biz, key);
	sbuf_puts(b, "</td>");
	view_cell(q, VIEW_LINE, "status",
	          cJSON_GetStringValue(cJSON_GetObjectItem(row, "status")));
	view_jcell(q, VIEW_LINE, row, "send_status");
	char tries[80], num[2][32]; /* two numbers of at most 31 bytes and " / " */
	snprintf(tries, sizeof tries, "%s / %s", jstr(row, "check_attempts", num[0], sizeof num[0]),
	         jstr(row, "send_attempts", num[1], sizeof num[1]));
	view_cell(q, VIEW_LINE, NULL, tries);
	sbuf_puts(b, "<td class=\"line\">");
	view_age(q, cJSON_GetNumberValue(cJSON_GetObjectItem(row, "updated_age_s")));
	sbuf_puts(b, " ago</td>");
	view_cell(q, VIEW_PROSE, "error-text",
	          cJSON_GetStringValue(cJSON_GetObjectItem(row, "last_error")));
	sbuf_puts(b, "</tr>\n");
}

void view_tenant_filter(console_req *q, const char *tenant)
{
	if (console_scope(q))
		return;
	sbuf *b = view_out(q);
	sbuf_printf(b, "<label>tenant <input name=\"tenant\" id=\"filter-tenant\" size=\"12\" "
	            "maxlength=\"%d\" pattern=\"[a-z0-9][a-z0-9._\\-]*\" value=\"", TENANT_NAME_MAX);
	html_attr(b, tenant ? tenant : "");
	sbuf_puts(b, "\"></label>");
}
