/* test_console.c: `txhub console`'s HTTP handlers without a browser
 * (libcurl), against a real PostgreSQL: the refusals at start-up, the
 * login, sessions and logout, every page's bad parameters (400), unknown
 * messages and records (404), wrong methods (405), oversized bodies
 * (413), cross-site POSTs (403), the security headers, the hostile key
 * escaped on every page, resolve and redrive with the console user in
 * the history, the Host check, a PostgreSQL restart, idle, slow and
 * ambiguous clients over raw sockets; and the read operations ops.c
 * gained for it (rejected, conflicts, list filters).
 * The same pages in Chromium: tests/browser/. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "httpd.h"
#include "rawhttp.h"
#include "ops.h"
#include "sbuf.h"

#define TOKEN "console-test-token-0123456789"
#define HOSTILE "<img src=x onerror=alert(1)>"

static void init(void) { curl_global_init(CURL_GLOBAL_ALL); }
static void fini(void) { curl_global_cleanup(); }

TestSuite(console, .init = init, .fini = fini, .timeout = 120);

/* ---- a console and requests to it ---- */

typedef struct {
	h_env e;
	pid_t pid;
	int port;
	char host[64];       /* 127.0.0.1:PORT */
	char cookie[160];    /* "txhub_session=..." after con_login() */
	char csrf[80];
	const char *from;    /* the address requests are sent from; NULL: the kernel's choice */
} con;

typedef struct {
	long status;
	sbuf body;
	sbuf headers;
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	sbuf_put(ud, p, sz * n);
	return sz * n;
}

static void resp_free(resp *r)
{
	sbuf_free(&r->body);
	sbuf_free(&r->headers);
}

/* method path [body]; headers: NULL-terminated extra lines; the
 * session's cookie unless with_cookie is 0. r is freed and refilled. */
static void req(con *c, const char *method, const char *path, const char *body,
                const char *const *headers, int with_cookie, resp *r)
{
	resp_free(r);
	memset(r, 0, sizeof *r);
	char url[4096], cookie[256];
	snprintf(url, sizeof url, "http://%s%s", c->host, path);
	CURL *h = curl_easy_init();
	struct curl_slist *hl = NULL;
	for (; headers && *headers; headers++)
		hl = curl_slist_append(hl, *headers);
	if (with_cookie && c->cookie[0]) {
		snprintf(cookie, sizeof cookie, "Cookie: %s", c->cookie);
		hl = curl_slist_append(hl, cookie);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->body);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &r->headers);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->from)
		curl_easy_setopt(h, CURLOPT_INTERFACE, c->from);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	CURLcode rc = curl_easy_perform(h);
	cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(h);
	sbuf_str(&r->body);
	sbuf_str(&r->headers);
}

static void get(con *c, const char *path, resp *r) { req(c, "GET", path, NULL, NULL, 1, r); }

/* The value of response header name (case-insensitive), or "". */
static const char *header(resp *r, const char *name)
{
	static char out[2048];
	out[0] = '\0';
	const char *p = sbuf_str(&r->headers);
	size_t n = strlen(name);
	for (; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1, *e = strpbrk(v, "\r\n");
			while (*v == ' ')
				v++;
			snprintf(out, sizeof out, "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
			return out;
		}
	}
	return out;
}

/* The text between after and the next quote, e.g. a hidden field's value. */
static void scrape(resp *r, const char *after, char *out, size_t outsz)
{
	const char *p = strstr(sbuf_str(&r->body), after);
	cr_assert_not_null(p, "no %s in %.400s", after, sbuf_str(&r->body));
	p += strlen(after);
	const char *e = strchr(p, '"');
	snprintf(out, outsz, "%.*s", (int)(e - p), p);
}

static void con_start(con *c, const char *name, const char *const *settings)
{
	memset(c, 0, sizeof *c);
	h_setup(&c->e, name);
	c->port = h_free_port();
	snprintf(c->host, sizeof c->host, "127.0.0.1:%d", c->port);
	static char listen[64];
	snprintf(listen, sizeof listen, "console.listen=127.0.0.1:%d", c->port);
	const char *all[16];
	int n = 0;
	all[n++] = listen;
	for (; settings && *settings && n < 15; settings++)
		all[n++] = *settings;
	all[n] = NULL;
	const char *args[] = {"console", NULL};
	c->pid = h_command_start(&c->e, args, all);
	resp r = {0};
	for (int i = 0; i < 200; i++) {
		CURL *h = curl_easy_init();
		char url[128];
		snprintf(url, sizeof url, "http://%s/static/style.css", c->host);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		CURLcode rc = curl_easy_perform(h);
		curl_easy_cleanup(h);
		if (rc == CURLE_OK)
			return;
		h_pause_ms(50);
	}
	resp_free(&r);
	cr_assert_fail("the console did not start on %s", c->host);
}

static const char *const WITH_TOKEN[] = {"console.token=" TOKEN, NULL};

static void con_stop(con *c)
{
	cr_expect_eq(h_hub_stop(c->pid), 0, "the console exits 0 on SIGTERM");
	h_teardown(&c->e);
}

/* Log in as name (token NULL: open mode); keeps the session and its CSRF
 * token in c. */
static void con_login(con *c, const char *name, const char *token)
{
	resp r = {0};
	c->cookie[0] = '\0';
	get(c, "/login", &r);
	cr_assert_eq(r.status, 200);
	char nonce[80], cookie[200], body[512];
	scrape(&r, "name=\"nonce\" value=\"", nonce, sizeof nonce);
	snprintf(cookie, sizeof cookie, "Cookie: txhub_login=%s", nonce);
	snprintf(body, sizeof body, "name=%s&nonce=%s%s%s", name, nonce, token ? "&token=" : "",
	         token ? token : "");
	const char *hs[] = {cookie, NULL};
	req(c, "POST", "/login", body, hs, 0, &r);
	cr_assert_eq(r.status, 303, "login: %ld %s", r.status, sbuf_str(&r.body));
	const char *set = header(&r, "Set-Cookie");
	cr_assert(strncmp(set, "txhub_session=", 14) == 0, "%s", set);
	snprintf(c->cookie, sizeof c->cookie, "%.*s", (int)strcspn(set, ";"), set);
	get(c, "/overview", &r);
	cr_assert_eq(r.status, 200, "%s", sbuf_str(&r.body));
	scrape(&r, "name=\"csrf\" value=\"", c->csrf, sizeof c->csrf);
	resp_free(&r);
}

/* POST a form with the session's token and the console's own Origin. */
static void post_form(con *c, const char *path, const char *fields, resp *r)
{
	char body[8192], origin[128];
	snprintf(body, sizeof body, "csrf=%s&%s", c->csrf, fields);
	snprintf(origin, sizeof origin, "Origin: http://%s", c->host);
	const char *hs[] = {origin, "Sec-Fetch-Site: same-origin", NULL};
	req(c, "POST", path, body, hs, 1, r);
}

static void sql(h_env *e, const char *q)
{
	PGresult *r = PQexec(e->db, q);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", q, PQerrorMessage(e->db));
	PQclear(r);
}

/* Rows the pages show: the hostile key (check_failed, with markup in its
 * error, payload and a forward header), more check_failed, a failed send,
 * a sent one, an old prepared; rejected records (markup, binary) and
 * conflicts. */
static void fixture(h_env *e)
{
	sql(e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	       "forward_topic, forward_key, forward_headers, check_attempts, send_attempts, last_error, "
	       "src_partition, src_offset, created_at, updated_at) VALUES "
	       "('shop', '" HOSTILE "', 'check_failed', NULL, '<b>payload</b>', 'fw', NULL, "
	       " '{\"x-h\": \"\\\"><svg onload=alert(3)>\"}', 3, 0, '<script>alert(2)</script>', 0, 1, "
	       " now() - interval '2 hours', now() - interval '1 hour'),"
	       "('shop', 'cf-1', 'check_failed', NULL, '\\x00ff10', 'fw', NULL, NULL, 3, 0, 'no answer',"
	       " 0, 2, now() - interval '2 hours', now() - interval '1 hour'),"
	       "('shop', 'cf-2', 'check_failed', NULL, 'p', 'fw', NULL, NULL, 3, 0, 'no answer',"
	       " 0, 3, now() - interval '2 hours', now() - interval '1 hour'),"
	       "('shop', 'fail-1', 'committed', 'failed', 'f', 'fw', NULL, NULL, 0, 15, 'denied',"
	       " 0, 4, now() - interval '2 hours', now() - interval '1 hour'),"
	       "('shop', 'sent-1', 'committed', 'sent', 's', 'fw', NULL, NULL, 0, 0, NULL,"
	       " 0, 5, now() - interval '2 hours', now() - interval '1 hour'),"
	       "('bank', 'prep-old', 'prepared', NULL, 'q', 'fw', NULL, NULL, 1, 0, NULL,"
	       " 1, 6, now() - interval '1 hour', now() - interval '1 hour'),"
	       "('bank', 'prep-new', 'prepared', NULL, 'q', 'fw', NULL, NULL, 0, 0, NULL,"
	       " 1, 7, now(), now())");
	sql(e, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, record_key, "
	       "record_value, reason, created_at) VALUES "
	       "('ctl', 0, 10, 'k', '\\x00ff', 'invalid JSON near byte 0', now() - interval '1 day'),"
	       "('ctl', 1, 11, '" HOSTILE "', '<script>alert(4)</script>', "
	       " 'invalid JSON near byte 0', now())");
	sql(e, "INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status, detail, "
	       "src_topic, src_partition, src_offset, created_at) VALUES "
	       "('shop', 'sent-1', 'rollback', 'committed', 'old', 'ctl', 0, 20, now() - interval '1 day'),"
	       "('shop', '" HOSTILE "', 'rollback', 'committed', '<i>x</i>', 'ctl', 0, 21, now())");
}

static const char *q1(h_env *e, const char *query)
{
	static char out[1024];
	return h_query(e, query, out, sizeof out);
}

/* ---- start-up ---- */

Test(console, refuses_to_start_without_a_token_unless_open_on_loopback)
{
	h_env e;
	h_setup(&e, "cnrefuse");
	char err[4096];
	static const struct {
		const char *listen, *token, *open, *names;
	} cases[] = {
		{"127.0.0.1:1", "", "false", "console.token"},
		{"0.0.0.0:1", "", "true", "console.listen"},
		{"[::]:1", "", "true", "console.token"},
		{"10.1.2.3:1", "", "true", "console.open"},
		{"127.0.0.1:1", "short", "false", "console.token"},
		{"127.0.0.1:1", "", "maybe", "console.open"},
		{"nonsense", TOKEN, "false", "console.listen"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char l[64], t[64], o[64];
		snprintf(l, sizeof l, "console.listen=%s", cases[i].listen);
		snprintf(t, sizeof t, "console.token=%s", cases[i].token);
		snprintf(o, sizeof o, "console.open=%s", cases[i].open);
		const char *args[] = {"-X", l, "-X", t, "-X", o, "console", NULL};
		cr_expect_eq(h_txhub(&e, args, err, sizeof err), 2, "%s %s %s: %s", l, t, o, err);
		cr_expect(strstr(err, cases[i].names), "%s %s %s: %s", l, t, o, err);
	}
	h_teardown(&e);
}

Test(console, open_mode_on_loopback_logs_in_with_a_name)
{
	con c;
	const char *open[] = {"console.open=true", NULL};
	con_start(&c, "cnopen", open);
	resp r = {0};
	get(&c, "/login", &r);
	cr_assert_eq(r.status, 200);
	cr_expect_null(strstr(sbuf_str(&r.body), "name=\"token\""), "no token field");
	cr_expect(strstr(sbuf_str(&r.body), "console.open"));
	con_login(&c, "carol", NULL);
	fixture(&c.e);
	post_form(&c, "/actions", "action=redrive&sel=4%3Ashopcf-2", &r);
	cr_assert_eq(r.status, 303, "%s", sbuf_str(&r.body));
	cr_expect_str_eq(q1(&c.e, "SELECT actor FROM txhub.history WHERE message_key = 'cf-2'"),
	                 "console:carol");
	resp_free(&r);
	con_stop(&c);
}

/* ---- login and sessions ---- */

Test(console, every_page_needs_a_login)
{
	con c;
	con_start(&c, "cnlogin", WITH_TOKEN);
	resp r = {0};
	static const char *const pages[] = {"/overview", "/stuck", "/rejected", "/conflicts",
	                                    "/search", "/message?biz=a&key=b"};
	for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
		get(&c, pages[i], &r);
		cr_expect_eq(r.status, 302, "%s: %ld", pages[i], r.status);
		cr_expect(strncmp(header(&r, "Location"), "/login?next=%2F", 15) == 0, "%s: %s",
		          pages[i], header(&r, "Location"));
	}
	get(&c, "/message?biz=a&key=b", &r);
	cr_expect_str_eq(header(&r, "Location"), "/login?next=%2Fmessage%3Fbiz%3Da%26key%3Db");
	get(&c, "/", &r);
	cr_expect_eq(r.status, 302);
	cr_expect_str_eq(header(&r, "Location"), "/login");
	get(&c, "/api/overview", &r);
	cr_expect_eq(r.status, 401);
	cr_expect(strstr(header(&r, "Content-Type"), "application/json"));
	req(&c, "POST", "/actions", "action=redrive", NULL, 0, &r);
	cr_expect_eq(r.status, 401);
	req(&c, "POST", "/logout", "", NULL, 0, &r);
	cr_expect_eq(r.status, 401);
	get(&c, "/static/app.js", &r);
	cr_expect_eq(r.status, 200, "the script needs no session");
	cr_expect(strstr(header(&r, "Content-Type"), "javascript"));
	strcpy(c.cookie, "txhub_session=0000000000000000000000000000000000000000000000000000000000000000");
	get(&c, "/overview", &r);
	cr_expect_eq(r.status, 302, "a made-up session");
	resp_free(&r);
	con_stop(&c);
}

Test(console, wrong_token_and_bad_logins_are_refused)
{
	con c;
	con_start(&c, "cnwrong", WITH_TOKEN);
	resp r = {0};
	get(&c, "/login", &r);
	char nonce[80], cookie[200], body[512];
	scrape(&r, "name=\"nonce\" value=\"", nonce, sizeof nonce);
	snprintf(cookie, sizeof cookie, "Cookie: txhub_login=%s", nonce);
	const char *hs[] = {cookie, NULL};
	static const struct {
		const char *fields;
		long status;
	} cases[] = {
		{"name=alice&token=console-test-token-012345678", 401}, /* one character short */
		{"name=alice&token=console-test-token-0123456789x", 401},
		{"name=alice&token=", 401},
		{"name=alice", 401},
		{"name=al%20ice&token=" TOKEN, 400},
		{"name=&token=" TOKEN, 400},
		{"name=%3Cb%3E&token=" TOKEN, 400},
		{"name=alice&token=" TOKEN "&next=http%3A%2F%2Fevil.example%2F", 400},
		{"name=alice&token=" TOKEN "&extra=1", 400},
		{"name=alice&name=bob&token=" TOKEN, 400},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(body, sizeof body, "%s&nonce=%s", cases[i].fields, nonce);
		req(&c, "POST", "/login", body, hs, 0, &r);
		cr_expect_eq(r.status, cases[i].status, "%s: %ld %s", cases[i].fields, r.status,
		             sbuf_str(&r.body));
		cr_expect_null(strstr(sbuf_str(&r.headers), "txhub_session="), "%s", cases[i].fields);
	}
	req(&c, "POST", "/login", "name=alice&token=" TOKEN "&nonce=x", hs, 0, &r);
	cr_expect_eq(r.status, 403, "a wrong nonce");
	snprintf(body, sizeof body, "name=alice&token=" TOKEN "&nonce=%s", nonce);
	req(&c, "POST", "/login", body, NULL, 0, &r);
	cr_expect_eq(r.status, 403, "no nonce cookie: a form another site posted");
	const char *foreign[] = {cookie, "Origin: http://evil.example", NULL};
	req(&c, "POST", "/login", body, foreign, 0, &r);
	cr_expect_eq(r.status, 403, "a login posted from another origin");
	char log[256];
	/* the first refusal at once, the others counted for a line a minute later */
	h_hub_log(log, sizeof log, &c.e);
	cr_expect_eq(h_log_lines(log, "refused 1 login from 127.0.0.1 (1 wrong token"), 1);
	cr_expect_eq(h_log_lines(log, "wrong token"), 1);
	cr_expect_eq(h_log_lines(log, TOKEN), 0, "the token is never logged");
	snprintf(body, sizeof body, "name=alice&token=" TOKEN "&nonce=%s&next=%%2Fstuck", nonce);
	req(&c, "POST", "/login", body, hs, 0, &r);
	cr_expect_eq(r.status, 303);
	cr_expect_str_eq(header(&r, "Location"), "/stuck");
	cr_expect(strstr(sbuf_str(&r.headers), "HttpOnly; SameSite=Strict"));
	resp_free(&r);
	con_stop(&c);
}

/* The refused logins the log counts for address from, in how many lines. */
static long refusals_logged(const char *log, const char *from, long *lines)
{
	char want[64], text[1024];
	snprintf(want, sizeof want, " from %s ", from);
	long n = 0, count;
	*lines = 0;
	FILE *f = fopen(log, "r");
	cr_assert_not_null(f, "%s", log);
	while (fgets(text, sizeof text, f)) {
		const char *p = strstr(text, "console: refused ");
		if (!p || !strstr(text, want))
			continue;
		(*lines)++;
		cr_assert_eq(sscanf(p, "console: refused %ld login", &count), 1, "%s", text);
		n += count;
	}
	fclose(f);
	return n;
}

Test(console, wrong_tokens_are_throttled_per_address)
{
	con c;
	static const char *const settings[] = {"console.token=" TOKEN, "console.login_failures=5",
	                                       "console.login_window_ms=4000", NULL};
	con_start(&c, "cnthrottle", settings);
	resp r = {0};
	get(&c, "/login", &r);
	char nonce[80], cookie[200], wrong[512], right[512];
	scrape(&r, "name=\"nonce\" value=\"", nonce, sizeof nonce);
	snprintf(cookie, sizeof cookie, "Cookie: txhub_login=%s", nonce);
	snprintf(wrong, sizeof wrong, "name=mallory&token=wrong-token-0123456789&nonce=%s", nonce);
	snprintf(right, sizeof right, "name=alice&token=" TOKEN "&nonce=%s", nonce);
	const char *hs[] = {cookie, NULL};
	long n401 = 0, n429 = 0, other = 0;
	for (int i = 0; i < 100; i++) {
		req(&c, "POST", "/login", wrong, hs, 0, &r);
		n401 += r.status == 401;
		n429 += r.status == 429;
		other += r.status != 401 && r.status != 429;
		if (r.status == 429) {
			long after = atol(header(&r, "Retry-After"));
			cr_expect(after >= 1 && after <= 4, "Retry-After: %s", header(&r, "Retry-After"));
			cr_expect(strstr(sbuf_str(&r.body), "Too many wrong tokens"), "%s",
			          sbuf_str(&r.body));
		}
	}
	cr_expect_eq(n401, 5, "five tries: %ld answered 401", n401);
	cr_expect_eq(n429, 95, "then 429: %ld", n429);
	cr_expect_eq(other, 0);
	req(&c, "POST", "/login", right, hs, 0, &r);
	cr_expect_eq(r.status, 429, "the right token waits too, from the throttled address");
	long after = atol(header(&r, "Retry-After"));
	cr_assert(after >= 1 && after <= 4, "Retry-After: %s", header(&r, "Retry-After"));

	con other_addr = c;
	other_addr.from = "127.0.0.2";
	con_login(&other_addr, "bob", TOKEN); /* asserts that its first try logs in */

	h_pause_ms(after * 1000 + 100);
	req(&c, "POST", "/login", right, hs, 0, &r);
	cr_expect_eq(r.status, 303, "after the wait the right token logs in: %ld %s", r.status,
	             sbuf_str(&r.body));
	resp_free(&r);

	cr_expect_eq(h_hub_stop(c.pid), 0);
	char log[256];
	h_hub_log(log, sizeof log, &c.e);
	long lines = 0;
	cr_expect_eq(refusals_logged(log, "127.0.0.1", &lines), 101, "every refusal is counted");
	cr_expect(lines >= 1 && lines <= 2, "in %ld lines, not one per refusal", lines);
	cr_expect_eq(refusals_logged(log, "127.0.0.2", &lines), 0);
	cr_expect_eq(h_log_lines(log, "wrong token"), 2);
	cr_expect_eq(h_log_lines(log, TOKEN), 0, "the token is never logged");
	h_teardown(&c.e);
}

Test(console, logout_ends_the_session)
{
	con c;
	con_start(&c, "cnlogout", WITH_TOKEN);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	req(&c, "POST", "/logout", "", NULL, 1, &r);
	cr_expect_eq(r.status, 403, "logout needs the CSRF token too");
	post_form(&c, "/logout", "", &r);
	cr_assert_eq(r.status, 303, "%s", sbuf_str(&r.body));
	cr_expect(strstr(header(&r, "Set-Cookie"), "Max-Age=0"));
	get(&c, "/overview", &r);
	cr_expect_eq(r.status, 302, "the old cookie no longer works");
	resp_free(&r);
	con_stop(&c);
}

/* ---- headers, methods, sizes ---- */

static void expect_security_headers(resp *r, const char *what)
{
	const char *csp = header(r, "Content-Security-Policy");
	cr_expect(strstr(csp, "script-src 'self'"), "%s: %s", what, csp);
	cr_expect(strstr(csp, "frame-ancestors 'none'"), "%s: %s", what, csp);
	cr_expect(strstr(csp, "default-src 'none'"), "%s: %s", what, csp);
	cr_expect_null(strstr(csp, "unsafe-inline"), "%s: %s", what, csp);
	cr_expect_str_eq(header(r, "X-Frame-Options"), "DENY", "%s", what);
	cr_expect_str_eq(header(r, "Referrer-Policy"), "no-referrer", "%s", what);
	cr_expect_str_eq(header(r, "X-Content-Type-Options"), "nosniff", "%s", what);
	cr_expect_str_eq(header(r, "Cache-Control"), "no-store", "%s", what);
}

Test(console, security_headers_methods_and_sizes)
{
	con c;
	con_start(&c, "cnhdr", WITH_TOKEN);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	static const char *const paths[] = {"/overview", "/login", "/static/app.js", "/nope",
	                                    "/message?biz=a&key=b", "/api/overview"};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		get(&c, paths[i], &r);
		expect_security_headers(&r, paths[i]);
	}
	get(&c, "/overview", &r);
	cr_expect(strstr(header(&r, "Content-Type"), "text/html; charset=utf-8"));
	cr_expect_null(strstr(sbuf_str(&r.body), "<script>"), "no inline script");
	cr_expect_null(strstr(sbuf_str(&r.body), "style=\""), "no inline style");
	get(&c, "/nope", &r);
	cr_expect_eq(r.status, 404);
	get(&c, "/static/nope.js", &r);
	cr_expect_eq(r.status, 404);
	static const struct {
		const char *method, *path, *allow;
	} wrong[] = {
		{"PUT", "/overview", "GET"}, {"DELETE", "/stuck", "GET"}, {"POST", "/overview", "GET"},
		{"GET", "/actions", "POST"}, {"GET", "/logout", "POST"}, {"PATCH", "/login", "GET, POST"},
	};
	for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
		req(&c, wrong[i].method, wrong[i].path, NULL, NULL, 1, &r);
		cr_expect_eq(r.status, 405, "%s %s: %ld", wrong[i].method, wrong[i].path, r.status);
		cr_expect_str_eq(header(&r, "Allow"), wrong[i].allow, "%s %s", wrong[i].method,
		                 wrong[i].path);
		expect_security_headers(&r, "405");
	}
	/* a body over the limit is refused before it is read */
	size_t big = 200 * 1024;
	char *body = malloc(big + 1);
	memset(body, 'a', big);
	memcpy(body, "action=", 7);
	body[big] = '\0';
	const char *no_expect[] = {"Expect:", NULL};
	req(&c, "POST", "/actions", body, no_expect, 1, &r);
	cr_expect_eq(r.status, 413);
	expect_security_headers(&r, "413");
	req(&c, "POST", "/login", body, NULL, 0, &r);
	cr_expect_eq(r.status, 413, "before any login");
	free(body);
	char longq[12000] = "/search?key=";
	memset(longq + strlen(longq), 'k', 10000);
	get(&c, longq, &r);
	cr_expect(r.status == 414 || r.status == 431 || r.status == 400, "a 10 KB key: %ld",
	          r.status);
	const char *text[] = {"Content-Type: text/plain", NULL};
	char origin[128];
	snprintf(origin, sizeof origin, "csrf=%s&action=redrive&sel=4%%3Ashopcf-1", c.csrf);
	req(&c, "POST", "/actions", origin, text, 1, &r);
	cr_expect_eq(r.status, 415, "only a form body");
	resp_free(&r);
	con_stop(&c);
}

/* POST a chunked body of `total` bytes (no Content-Length) from a read
 * callback; returns curl's result and, in *status, the answer's code. */
typedef struct {
	size_t left;
} stream_src;

static size_t stream_read(char *buf, size_t sz, size_t n, void *ud)
{
	stream_src *src = ud;
	size_t k = sz * n < src->left ? sz * n : src->left;
	memset(buf, 'a', k);
	src->left -= k;
	return k;
}

static CURLcode stream_post(con *c, size_t total, long *status, size_t *sent)
{
	char url[128];
	snprintf(url, sizeof url, "http://%s/actions", c->host);
	stream_src src = {total};
	CURL *h = curl_easy_init();
	struct curl_slist *hl = curl_slist_append(NULL, "Transfer-Encoding: chunked");
	hl = curl_slist_append(hl, "Expect:");
	hl = curl_slist_append(hl, "Content-Type: application/x-www-form-urlencoded");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, stream_read);
	curl_easy_setopt(h, CURLOPT_READDATA, &src);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	sbuf sink = {0};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
	CURLcode rc = curl_easy_perform(h);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	*sent = total - src.left;
	curl_slist_free_all(hl);
	curl_easy_cleanup(h);
	sbuf_free(&sink);
	return rc;
}

Test(console, bodies_without_a_length_are_bounded)
{
	con c;
	con_start(&c, "cnchunked", WITH_TOKEN);
	long status;
	size_t sent;
	CURLcode rc = stream_post(&c, 300 * 1024, &status, &sent);
	cr_expect_eq(rc, CURLE_OK, "%s", curl_easy_strerror(rc));
	cr_expect_eq(status, 413, "a chunked body over the limit");
	/* "for ever": the console closes the connection after 1 MiB */
	size_t huge = (size_t)1 << 30;
	rc = stream_post(&c, huge, &status, &sent);
	cr_expect_neq(rc, CURLE_OK, "the connection is closed");
	cr_expect_lt(sent, (size_t)64 << 20, "sent %zu bytes before it was cut off", sent);
	resp r = {0};
	get(&c, "/login", &r);
	cr_expect_eq(r.status, 200, "and the console goes on serving");
	resp_free(&r);
	con_stop(&c);
}

/* One address holds 300 idle and 200 trickling connections (opening again
 * every one the console closes); the login page still answers another
 * address within 2 s, for 5 s. What was refused is logged as one line
 * with a count, not a line per connection. At the defaults. */
Test(console, a_page_is_served_while_one_address_floods)
{
	con c;
	con_start(&c, "cnflood", WITH_TOKEN);
	char log[256], line[1024], page[256];
	h_hub_log(log, sizeof log, &c.e);
	int n = snprintf(page, sizeof page,
	                 "GET /login HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", c.host);
	h_flood *f = h_flood_start("127.0.0.1", c.port, 300, 200, 500, 20000);
	cr_assert_not_null(f, "the open-file limit cannot hold 500 connections");
	for (int round = 0; round < 5; round++) {
		h_raw_reply r;
		cr_assert_eq(h_raw_request("127.0.0.2", c.port, page, (size_t)n, 4000, &r), 0);
		cr_expect_eq(h_raw_status(&r), 200, "round %d: %.100s", round, r.len ? r.data : "nothing");
		cr_expect(r.first_ms >= 0 && r.first_ms <= 2000, "round %d: %ld ms", round, r.first_ms);
		h_pause_ms(1000);
	}
	h_flood_stats st;
	h_flood_stop(f, &st);
	cr_expect_gt(st.opened, 1000, "the flood opened only %ld connections", st.opened);
	long lines = h_log_first(log, "connections refused at console.max_connections_per_address (16)",
	                         line, sizeof line);
	long refused = 0;
	cr_expect_eq(lines, 1, "%ld lines on refused connections in %s", lines, log);
	cr_expect(sscanf(strstr(line, "console.listen: ") ? strstr(line, "console.listen: ") : "",
	                 "console.listen: %ld connections", &refused) == 1 && refused > 0,
	          "no count: %s", line);
	cr_expect_eq(h_log_lines(log, "connection limit"), 0, "libmicrohttpd's line per connection");
	con_stop(&c);
}

/* A request must be in within console.request_timeout_ms (10 s by
 * default), however steadily its bytes come. */
Test(console, a_request_has_a_deadline)
{
	con c;
	con_start(&c, "cndeadline", WITH_TOKEN);
	char head[128];
	snprintf(head, sizeof head, "GET /login HTTP/1.1\r\nHost: %s\r\nX-Slow: ", c.host);
	long cut = h_raw_trickle("127.0.0.2", c.port, head, 200, 14000);
	cr_expect(cut >= 9000 && cut <= 11500, "a trickled head was cut after %ld ms (-1: never)",
	          cut);
	con_stop(&c);
}

/* A request whose body's length could be read two ways is answered 400
 * and its connection closed: GET and the login's POST. */
Test(console, ambiguous_lengths_are_refused)
{
	con c;
	con_start(&c, "cnlengths", WITH_TOKEN);
	h_raw_expect_length_refusals(c.port, "GET", "/login", "");
	h_raw_expect_length_refusals(c.port, "POST", "/login",
	                             "Content-Type: application/x-www-form-urlencoded\r\n");
	con_stop(&c);
}

Test(console, host_header_must_name_the_console)
{
	con c;
	con_start(&c, "cnhost", WITH_TOKEN);
	resp r = {0};
	const char *rebound[] = {"Host: evil.example", NULL};
	req(&c, "GET", "/login", NULL, rebound, 0, &r);
	cr_expect_eq(r.status, 400, "a DNS name rebound to 127.0.0.1");
	char other[64];
	snprintf(other, sizeof other, "Host: localhost:%d", c.port);
	const char *local[] = {other, NULL};
	req(&c, "GET", "/login", NULL, local, 0, &r);
	cr_expect_eq(r.status, 200);
	resp_free(&r);
	con_stop(&c);
}

/* ---- parameters ---- */

Test(console, bad_parameters_are_400_unknown_things_404)
{
	con c;
	con_start(&c, "cnparams", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	static const struct {
		const char *path, *says;
		long status;
	} cases[] = {
		{"/message", "biz and key", 400},
		{"/message?biz=shop", "biz and key", 400},
		{"/message?key=cf-1", "biz and key", 400},
		{"/message?biz=shop&key=a%01b", "key", 400},
		{"/message?biz=shop&key=a%C2%85b", "key", 400},
		{"/message?biz=shop&key=%FF", "key", 400},
		{"/message?biz=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa&key=k",
		 "biz", 400},
		{"/message?biz=shop&key=cf-1&view=xml", "view", 400},
		{"/message?biz=shop&key=cf-1&biz=bank", "more than once", 400},
		{"/message?biz=shop&key=cf-1&x=1", "unknown parameter", 400},
		{"/message?biz=shop%00x&key=cf-1", "NUL", 400},
		{"/message?biz=shop&key=nope", "no message", 404},
		{"/message?biz=nope&key=cf-1", "no message", 404},
		{"/stuck?age=5", "age", 400},
		{"/stuck?age=-5m", "age", 400},
		{"/stuck?age=5", "age", 400},
		{"/stuck?limit=0", "limit", 400},
		{"/stuck?limit=501", "limit", 400},
		{"/stuck?limit=abc", "limit", 400},
		{"/stuck?biz=a%0Ab", "biz", 400},
		{"/rejected?id=0", "id", 400},
		{"/rejected?id=abc", "id", 400},
		{"/rejected?id=99999", "no rejected record", 404},
		{"/rejected?before=-1", "before", 400},
		{"/rejected?limit=1000", "limit", 400},
		{"/rejected?view=raw", "view", 400},
		{"/conflicts?limit=x", "limit", 400},
		{"/conflicts?key=%1B", "key", 400},
		{"/conflicts?before=1e3", "before", 400},
		{"/search?limit=-1", "limit", 400},
		{"/search?biz=%7F", "biz", 400},
		{"/overview?refresh=1", "unknown parameter", 400},
		{"/login?next=http%3A%2F%2Fevil.example", "next", 400},
		{"/login?next=%2F%2Fevil.example", "next", 400},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		get(&c, cases[i].path, &r);
		cr_expect_eq(r.status, cases[i].status, "%s: %ld %.300s", cases[i].path, r.status,
		             sbuf_str(&r.body));
		cr_expect(strstr(sbuf_str(&r.body), cases[i].says), "%s: %.300s", cases[i].path,
		          sbuf_str(&r.body));
	}
	static const char *const fine[] = {
		"/message?biz=shop&key=cf-1", "/message?biz=shop&key=cf-1&view=hex",
		"/stuck?age=90s&biz=shop&limit=5", "/stuck?biz=&age=", "/rejected?id=1",
		"/rejected?id=2&view=hex", "/rejected?before=2&limit=1", "/conflicts?biz=shop&key=sent-1",
		"/search?key=cf-1", "/search?biz=shop", "/search", "/api/overview", "/overview"};
	for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
		get(&c, fine[i], &r);
		cr_expect_eq(r.status, 200, "%s: %ld %.300s", fine[i], r.status, sbuf_str(&r.body));
	}
	resp_free(&r);
	con_stop(&c);
}

/* ---- what producers wrote is text ---- */

Test(console, hostile_key_and_markup_are_escaped_everywhere)
{
	con c;
	con_start(&c, "cnxss", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	static const char *const pages[] = {
		"/stuck", "/overview", "/search?biz=shop", "/conflicts", "/rejected", "/rejected?id=2",
		"/message?biz=shop&key=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
		"/message?biz=shop&key=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E&view=hex"};
	static const char *const raw[] = {"<img", "<script>alert", "<svg", "<b>payload", "<i>x"};
	for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
		get(&c, pages[i], &r);
		cr_assert_eq(r.status, 200, "%s: %ld %.300s", pages[i], r.status, sbuf_str(&r.body));
		for (size_t j = 0; j < sizeof raw / sizeof raw[0]; j++)
			cr_expect_null(strstr(sbuf_str(&r.body), raw[j]), "%s holds %s raw", pages[i],
			               raw[j]);
		cr_expect(strstr(sbuf_str(&r.body), "&lt;img src=x onerror=alert(1)&gt;"),
		          "%s: the key is not shown as text", pages[i]);
	}
	get(&c, "/message?biz=shop&key=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", &r);
	cr_expect(strstr(sbuf_str(&r.body), "&lt;script&gt;alert(2)&lt;/script&gt;"), "last_error");
	cr_expect(strstr(sbuf_str(&r.body), "&quot;&gt;&lt;svg onload=alert(3)&gt;"), "header");
	cr_expect(strstr(sbuf_str(&r.body), "&lt;b&gt;payload&lt;/b&gt;"), "payload");
	get(&c, "/rejected?id=2", &r);
	cr_expect(strstr(sbuf_str(&r.body), "&lt;script&gt;alert(4)&lt;/script&gt;"), "raw value");
	get(&c, "/rejected?id=1", &r);
	cr_expect(strstr(sbuf_str(&r.body), "00 ff"), "a binary value as hex: %s", sbuf_str(&r.body));
	get(&c, "/api/overview", &r);
	cr_expect(strstr(header(&r, "Content-Type"), "application/json"));
	cJSON *doc = cJSON_Parse(sbuf_str(&r.body));
	cr_assert_not_null(doc);
	const cJSON *row;
	int found = 0;
	cJSON_ArrayForEach(row, cJSON_GetObjectItem(doc, "parked_rows"))
		found += strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(row, "message_key")), HOSTILE) == 0;
	cr_expect_eq(found, 1, "the JSON carries the key as it is; app.js shows it as text");
	cJSON_Delete(doc);
	resp_free(&r);
	con_stop(&c);
}

/* ---- actions ---- */

static long count(h_env *e, const char *query) { return h_count(e, query); }

Test(console, cross_site_posts_are_refused)
{
	con c;
	con_start(&c, "cncsrf", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	con other;
	memcpy(&other, &c, sizeof other);
	con_login(&other, "bob", TOKEN); /* a second session: its token is not alice's */
	resp r = {0};
	char good_origin[128], evil_same_site[128], body[512];
	snprintf(good_origin, sizeof good_origin, "Origin: http://%s", c.host);
	snprintf(evil_same_site, sizeof evil_same_site, "Origin: http://127.0.0.1:%d", c.port + 1);
	const char *sel = "action=rollback&sel=4%3Ashopcf-1";
	static const char *const none[] = {NULL};
	const char *foreign[] = {"Origin: http://evil.example", NULL};
	const char *same_site[] = {evil_same_site, "Sec-Fetch-Site: same-site", NULL};
	const char *cross[] = {"Sec-Fetch-Site: cross-site", NULL};
	const char *null_origin[] = {"Origin: null", NULL};
	const char *good[] = {good_origin, "Sec-Fetch-Site: same-origin", NULL};
	struct {
		const char *what;
		const char *csrf;
		const char *const *headers;
	} cases[] = {
		{"no token", NULL, good},
		{"a wrong token", "0000000000000000000000000000000000000000000000000000000000000000", good},
		{"bob's token in alice's session", other.csrf, good},
		{"a foreign Origin", c.csrf, foreign},
		{"another port of the host (same site)", c.csrf, same_site},
		{"Sec-Fetch-Site: cross-site", c.csrf, cross},
		{"Origin: null", c.csrf, null_origin},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (cases[i].csrf)
			snprintf(body, sizeof body, "csrf=%s&%s", cases[i].csrf, sel);
		else
			snprintf(body, sizeof body, "%s", sel);
		req(&c, "POST", "/actions", body, cases[i].headers, 1, &r);
		cr_expect_eq(r.status, 403, "%s: %ld %s", cases[i].what, r.status, sbuf_str(&r.body));
	}
	cr_expect_str_eq(q1(&c.e, "SELECT status FROM txhub.messages WHERE message_key = 'cf-1'"),
	                 "check_failed", "nothing was changed");
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.history"), 0);
	snprintf(body, sizeof body, "csrf=%s&%s", c.csrf, sel);
	req(&c, "POST", "/actions", body, none, 1, &r);
	cr_expect_eq(r.status, 303, "no Origin (not a browser) with the token: %s",
	             sbuf_str(&r.body));
	cr_expect_str_eq(q1(&c.e, "SELECT status FROM txhub.messages WHERE message_key = 'cf-1'"),
	                 "rolled_back");
	resp_free(&r);
	con_stop(&c);
}

Test(console, resolve_and_redrive_a_selection)
{
	con c;
	con_start(&c, "cnact", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	/* the hostile key and cf-1 committed, sent-1 refused (already sent) */
	post_form(&c, "/actions",
	          "action=commit&reason=paid%2C+ticket+OPS-1&back=%2Fstuck%3Fbiz%3Dshop"
	          "&sel=4%3Ashop%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E&sel=4%3Ashopcf-1"
	          "&sel=4%3Ashopsent-1",
	          &r);
	cr_assert_eq(r.status, 303, "%s", sbuf_str(&r.body));
	cr_expect_str_eq(header(&r, "Location"), "/stuck?biz=shop");
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                         "AND send_status = 'pending'"), 2);
	cr_expect_str_eq(q1(&c.e, "SELECT string_agg(DISTINCT actor, ',') FROM txhub.history "
	                          "WHERE event = 'resolve'"), "console:alice");
	cr_expect_str_eq(q1(&c.e, "SELECT detail FROM txhub.history WHERE message_key = 'cf-1'"),
	                 "commit (was check_failed): paid, ticket OPS-1");
	get(&c, "/stuck?biz=shop", &r);
	cr_expect(strstr(sbuf_str(&r.body), "2 done, 1 not"), "the flash: %.2000s",
	          sbuf_str(&r.body));
	cr_expect(strstr(sbuf_str(&r.body), "shop / sent-1: refused"), "%.2000s", sbuf_str(&r.body));
	cr_expect(strstr(sbuf_str(&r.body), "shop / &lt;img src=x"), "the key in the flash is text");
	get(&c, "/stuck?biz=shop", &r);
	cr_expect_null(strstr(sbuf_str(&r.body), "2 done"), "the flash is shown once");
	post_form(&c, "/actions", "action=redrive&sel=4%3Ashopfail-1&sel=4%3Ashopcf-2", &r);
	cr_assert_eq(r.status, 303);
	cr_expect_str_eq(header(&r, "Location"), "/stuck");
	cr_expect_str_eq(q1(&c.e, "SELECT send_status || '/' || send_attempts FROM txhub.messages "
	                          "WHERE message_key = 'fail-1'"), "pending/0");
	cr_expect_str_eq(q1(&c.e, "SELECT status FROM txhub.messages WHERE message_key = 'cf-2'"),
	                 "prepared");
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.history WHERE event = 'redrive' AND "
	                         "actor = 'console:alice'"), 2);
	get(&c, "/message?biz=shop&key=cf-1", &r);
	cr_expect(strstr(sbuf_str(&r.body), "console:alice"), "the history shows the actor");
	resp_free(&r);
	con_stop(&c);
}

/* Delayed delivery (docs/consumers.md: Delayed delivery): a scheduled message's due time on its
 * page, the Search filter "scheduled only", and Send now (redrive --now) */
Test(console, scheduled_messages_are_found_and_sent_now)
{
	con c;
	con_start(&c, "cnsched", WITH_TOKEN);
	fixture(&c.e);
	sql(&c.e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	          "forward_topic, src_partition, src_offset, not_before, next_send_at) VALUES "
	          "('shop', 'later-1', 'committed', 'pending', 'l', 'fw', 0, 30, "
	          " '2099-01-01T00:00:00Z', '2099-01-01T00:00:00Z'),"
	          "('shop', 'later-2', 'committed', 'pending', 'l', 'fw', 0, 31, "
	          " '2098-01-01T00:00:00Z', '2098-01-01T00:00:00Z')");
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	get(&c, "/search?scheduled=1", &r);
	cr_assert_eq(r.status, 200);
	const char *body = sbuf_str(&r.body);
	char *a = strstr(body, "later-2"), *b = strstr(body, "later-1");
	cr_expect(a && b && a < b, "next due first: %.3000s", body);
	cr_expect(strstr(body, "2 scheduled message(s)"), "%.3000s", body);
	cr_expect(strstr(body, "2098-01-01T00:00:00.000Z"), "the due time: %.3000s", body);
	cr_expect_null(strstr(body, "fail-1"), "a failed send is not scheduled");
	get(&c, "/search?scheduled=yes", &r);
	cr_expect_eq(r.status, 400);
	get(&c, "/message?biz=shop&key=later-1", &r);
	cr_expect(strstr(sbuf_str(&r.body), "data-field=\"not_before\">2099-01-01T00:00:00.000Z"),
	          "%.3000s", sbuf_str(&r.body));
	cr_expect(strstr(sbuf_str(&r.body), "value=\"send_now\""), "a Send now button");
	get(&c, "/message?biz=shop&key=sent-1", &r);
	cr_expect_null(strstr(sbuf_str(&r.body), "value=\"send_now\""), "not for a sent one");
	post_form(&c, "/actions", "action=send_now&sel=4%3Ashoplater-1&sel=4%3Ashopsent-1", &r);
	cr_assert_eq(r.status, 303, "%s", sbuf_str(&r.body));
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.messages WHERE message_key = "
	                         "'later-1' AND not_before <= now() AND next_send_at <= now()"), 1);
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.history WHERE message_key = 'later-1' "
	                         "AND event = 'redrive' AND actor = 'console:alice' "
	                         "AND detail LIKE 'scheduled for 2099-01-01T00:00:00.000Z%'"), 1);
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.history WHERE message_key = 'sent-1' "
	                         "AND event = 'redrive'"), 0, "a sent message is refused");
	get(&c, "/search?scheduled=1", &r);
	cr_expect(strstr(sbuf_str(&r.body), "1 scheduled message(s)"), "%.3000s",
	          sbuf_str(&r.body));
	cr_expect(strstr(sbuf_str(&r.body), "shop / sent-1: refused"), "the flash: %.3000s",
	          sbuf_str(&r.body));
	resp_free(&r);
	con_stop(&c);
}

Test(console, bad_actions_change_nothing)
{
	con c;
	con_start(&c, "cnbadact", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	sbuf many = {0};
	sbuf_puts(&many, "action=redrive");
	for (int i = 0; i < 101; i++)
		sbuf_printf(&many, "&sel=4%%3Ashopk-%d", i);
	static const struct {
		const char *fields, *says;
	} cases[] = {
		{"action=delete&sel=4%3Ashopcf-1", "action"},
		{"sel=4%3Ashopcf-1", "action"},
		{"action=commit", "select 1 to"},
		{"action=commit&sel=shopcf-1", "sel"},
		{"action=commit&sel=9%3Ashopcf-1", "sel"},
		{"action=commit&sel=4%3Ashopa%01b", "message_key"},
		{"action=commit&reason=a%0Ab&sel=4%3Ashopcf-1", "reason"},
		{"action=commit&back=http%3A%2F%2Fevil.example&sel=4%3Ashopcf-1", "back"},
		{"action=commit&back=%2Flogin&sel=4%3Ashopcf-1", "back"},
		{"action=commit&action=rollback&sel=4%3Ashopcf-1", "more than once"},
		{"action=commit&bogus=1&sel=4%3Ashopcf-1", "unknown field"},
		{"action=commit&sel=4%3Ashopcf-1&sel=%ZZ", "escape"},
		{"action=commit&sel=4%3Ashopcf-1%00", "NUL"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		post_form(&c, "/actions", cases[i].fields, &r);
		cr_expect_eq(r.status, 400, "%s: %ld %s", cases[i].fields, r.status, sbuf_str(&r.body));
		cr_expect(strstr(sbuf_str(&r.body), cases[i].says), "%s: %s", cases[i].fields,
		          sbuf_str(&r.body));
	}
	post_form(&c, "/actions", sbuf_str(&many), &r);
	cr_expect_eq(r.status, 400, "101 messages: %s", sbuf_str(&r.body));
	sbuf_free(&many);
	cr_expect_eq(count(&c.e, "SELECT count(*) FROM txhub.history"), 0, "nothing was done");
	post_form(&c, "/actions", "action=commit&sel=4%3Ashopnope", &r);
	cr_expect_eq(r.status, 303);
	get(&c, "/stuck", &r);
	cr_expect(strstr(sbuf_str(&r.body), "shop / nope: not found"), "%.3000s", sbuf_str(&r.body));
	resp_free(&r);
	con_stop(&c);
}

/* ---- the overview's numbers ---- */

Test(console, overview_json_matches_txhub_status)
{
	con c;
	con_start(&c, "cnstatus", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	get(&c, "/api/overview", &r);
	cr_assert_eq(r.status, 200);
	cJSON *mine = cJSON_Parse(sbuf_str(&r.body));
	static char out[1 << 16], err[4096];
	const char *args[] = {"status", "--json", NULL};
	cr_assert_eq(h_txhub_io(&c.e, args, out, sizeof out, err, sizeof err), 0, "%s", err);
	cJSON *theirs = cJSON_Parse(out);
	cr_assert(mine && theirs);
	static const char *const keys[] = {"messages", "send", "parked", "parked_by", "rejected",
	                                   "rejected_1h", "conflicts", "conflicts_1h"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		cr_expect(cJSON_Compare(cJSON_GetObjectItem(mine, keys[i]),
		                        cJSON_GetObjectItem(theirs, keys[i]), 1), "%s differs", keys[i]);
	cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(mine, "parked_rows")), 4,
	             "three check_failed and a failed send");
	cJSON_Delete(mine);
	cJSON_Delete(theirs);
	resp_free(&r);
	con_stop(&c);
}

/* ---- PostgreSQL goes away and comes back ---- */

static void pgctl(const char *what)
{
	const char *ctl = getenv("TXHUB_TEST_PGCTL");
	cr_assert_not_null(ctl, "TXHUB_TEST_PGCTL is not set: run through tests/with-services.sh");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", ctl, what);
	cr_assert_eq(system(cmd), 0, "pg_ctl %s", what);
}

Test(console, keeps_working_across_a_postgres_restart, .timeout = 180)
{
	con c;
	con_start(&c, "cnpgrestart", WITH_TOKEN);
	fixture(&c.e);
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	get(&c, "/stuck", &r);
	cr_assert_eq(r.status, 200);
	PQfinish(c.e.db);
	c.e.db = NULL;
	pgctl("stop");
	get(&c, "/stuck", &r);
	cr_expect_eq(r.status, 503, "%s", sbuf_str(&r.body));
	cr_expect(strstr(sbuf_str(&r.body), "PostgreSQL"), "%s", sbuf_str(&r.body));
	get(&c, "/static/app.js", &r);
	cr_expect_eq(r.status, 200, "what needs no database still answers");
	pgctl("start");
	get(&c, "/stuck", &r);
	cr_expect_eq(r.status, 200, "the first request after the restart reconnects: %s",
	             sbuf_str(&r.body));
	c.e.db = PQconnectdb(c.e.conninfo);
	resp_free(&r);
	con_stop(&c);
}

/* ---- the read operations the console added to ops.c ---- */

Test(console, ops_reads_rejected_conflicts_and_list_filters)
{
	h_env e;
	h_setup(&e, "cnops");
	fixture(&e);
	char err[1024];
	cJSON *rows = NULL;
	ops_rejected_filter rf = {.limit = 10, .value_max = 4};
	cr_assert_eq(ops_rejected_list(e.db, &rf, &rows, err, sizeof err), OPS_OK, "%s", err);
	cr_assert_eq(cJSON_GetArraySize(rows), 2);
	const cJSON *newest = cJSON_GetArrayItem(rows, 0), *oldest = cJSON_GetArrayItem(rows, 1);
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(newest, "src_offset")), 11,
	             "newest first");
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(newest, "value")), "<scr");
	cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(newest, "value_truncated")));
	cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(newest, "value_bytes")), 25);
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(oldest, "value_encoding")),
	                 "base64");
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(oldest, "value")), "AP8=");
	double id = cJSON_GetNumberValue(cJSON_GetObjectItem(newest, "id"));
	cJSON_Delete(rows);
	rf.before_id = (int64_t)id;
	cr_assert_eq(ops_rejected_list(e.db, &rf, &rows, err, sizeof err), OPS_OK);
	cr_expect_eq(cJSON_GetArraySize(rows), 1, "the page before the newest");
	cJSON_Delete(rows);
	ops_rejected_filter one = {.id = (int64_t)id, .limit = 1, .value_max = OPS_VALUE_MAX};
	cr_assert_eq(ops_rejected_list(e.db, &one, &rows, err, sizeof err), OPS_OK);
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0),
	                                                          "value")),
	                 "<script>alert(4)</script>");
	cJSON_Delete(rows);
	ops_rejected_filter bad[] = {{.limit = 0}, {.limit = OPS_LIST_MAX + 1},
	                             {.limit = 1, .before_id = -1}, {.limit = 1, .id = -1},
	                             {.limit = 1, .value_max = OPS_VALUE_MAX + 1},
	                             {.limit = 1, .value_max = -1}};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_expect_eq(ops_rejected_list(e.db, &bad[i], &rows, err, sizeof err), OPS_BAD_ARG,
		             "case %zu", i);
		cr_expect_null(rows);
	}

	ops_conflicts_filter cf = {.limit = 10};
	cr_assert_eq(ops_conflicts_list(e.db, &cf, &rows, err, sizeof err), OPS_OK, "%s", err);
	cr_expect_eq(cJSON_GetArraySize(rows), 2);
	cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0),
	                                                          "message_key")), HOSTILE);
	cJSON_Delete(rows);
	ops_conflicts_filter one_msg = {.biz_id = "shop", .message_key = "sent-1", .limit = 10};
	cr_assert_eq(ops_conflicts_list(e.db, &one_msg, &rows, err, sizeof err), OPS_OK);
	cr_expect_eq(cJSON_GetArraySize(rows), 1);
	cJSON_Delete(rows);
	ops_conflicts_filter cbad[] = {{.limit = 0}, {.limit = 1, .before_id = -1},
	                               {.limit = 1, .biz_id = ""}, {.limit = 1, .message_key = "a\x1b"}};
	for (size_t i = 0; i < sizeof cbad / sizeof cbad[0]; i++)
		cr_expect_eq(ops_conflicts_list(e.db, &cbad[i], &rows, err, sizeof err), OPS_BAD_ARG,
		             "case %zu", i);

	static const char *const prep[] = {"prepared"};
	ops_list_filter old = {.statuses = prep, .nstatuses = 1, .older_ms = 30 * 60 * 1000,
	                       .limit = 10};
	cr_assert_eq(ops_list(e.db, &old, &rows, err, sizeof err), OPS_OK, "%s", err);
	cr_expect_eq(cJSON_GetArraySize(rows), 1, "only prep-old is older than 30 minutes");
	cJSON_Delete(rows);
	ops_list_filter bykey = {.message_key = "cf-1", .limit = 10};
	cr_assert_eq(ops_list(e.db, &bykey, &rows, err, sizeof err), OPS_OK);
	cr_expect_eq(cJSON_GetArraySize(rows), 1);
	cJSON_Delete(rows);
	ops_list_filter lbad[] = {{.message_key = "", .limit = 1}, {.older_ms = -1, .limit = 1}};
	for (size_t i = 0; i < sizeof lbad / sizeof lbad[0]; i++)
		cr_expect_eq(ops_list(e.db, &lbad[i], &rows, err, sizeof err), OPS_BAD_ARG, "case %zu", i);
	h_teardown(&e);
}

/* forward.order = key: the overview lists a key whose messages are held,
 * with the parked message before them (a link to it), the key escaped. */
Test(console, overview_lists_the_keys_held_for_their_order, .timeout = 60)
{
	con c;
	con_start(&c, "con_blocked", WITH_TOKEN);
	sql(&c.e, "INSERT INTO txhub.message_rows (biz_id, message_key, status, decision, "
	          "send_status, payload, forward_topic, forward_key, send_attempts, last_error, "
	          "src_topic, src_partition, src_offset, next_send_at) VALUES "
	          "('ord', 'park-1', 'committed', 'commit', 'failed', 'p', 'fw.o', '<k&1>', 15, "
	          " 'denied', 'ctl', 2, 10, now()), "
	          "('ord', 'held-1', 'committed', 'commit', 'pending', 'h', 'fw.o', '<k&1>', 0, NULL, "
	          " 'ctl', 2, 11, 'infinity'), "
	          "('ord', 'held-2', 'committed', 'commit', 'pending', 'h', 'fw.o', '<k&1>', 0, NULL, "
	          " 'ctl', 2, 12, 'infinity')");
	con_login(&c, "alice", TOKEN);
	resp r = {0};
	get(&c, "/overview", &r);
	cr_assert_eq(r.status, 200);
	const char *b = sbuf_str(&r.body);
	cr_assert(strstr(b, "Blocked forward keys"), "%.2000s", b);
	cr_assert(strstr(b, "&lt;k&amp;1&gt;") && !strstr(b, "<k&1>"), "the key escaped");
	cr_assert(strstr(b, "/message?biz=ord&amp;key=park-1"), "a link to the parked message");
	cr_assert(strstr(b, "data-field=\"blocked.messages\">2<"), "held count");
	resp_free(&r);
	get(&c, "/api/overview", &r);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(sbuf_str(&r.body), "\"blocked\":{\"keys\":[{\"forward_topic\":\"fw.o\""),
	          "%.2000s", sbuf_str(&r.body));
	resp_free(&r);
	con_stop(&c);
}
