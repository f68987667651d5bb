/* Unit tests for the web console's pure parts: HTML escaping (html.c),
 * form bodies (form.c), the login, session, origin and start-up rules
 * (console_auth.c), and the selection and back-path checks. No services:
 * the HTTP handlers are tested in tests/integration/test_console.c, the
 * pages in a browser in tests/browser/. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "console_auth.h"
#include "console_int.h"
#include "form.h"
#include "html.h"

static char *escaped(const char *s)
{
	static char out[4096];
	sbuf b = {0};
	html_text(&b, s);
	cr_assert(!b.oom);
	snprintf(out, sizeof out, "%s", sbuf_str(&b));
	sbuf_free(&b);
	return out;
}

/* ---- html ---- */

Test(html, hostile_key_is_text)
{
	cr_assert_str_eq(escaped("<img src=x onerror=alert(1)>"),
	                 "&lt;img src=x onerror=alert(1)&gt;");
	cr_assert_str_eq(escaped("\"'&"), "&quot;&#39;&amp;");
	cr_assert_str_eq(escaped("</pre><script>alert(1)</script>"),
	                 "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;");
}

Test(html, controls_and_invalid_utf8_are_shown_as_bytes)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"a\tb\nc", "a\tb\nc"},            /* tab and newline are text */
		{"a\rb", "a\\x0db"},
		{"\x01\x1b[31m", "\\x01\\x1b[31m"}, /* a terminal escape */
		{"\x7f", "\\x7f"},
		{"\xc2\x85", "\\xc2\\x85"},          /* C1 NEL */
		{"\xff\xfe", "\\xff\\xfe"},          /* not UTF-8 */
		{"\xc0\xbc", "\\xc0\\xbc"},          /* an overlong '<' */
		{"\xed\xa0\x80", "\\xed\\xa0\\x80"}, /* a surrogate */
		{"\xe2\x82", "\\xe2\\x82"},          /* cut short */
		{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
		{"abc\xe2\x80\xaeTXT", "abc\\u{202e}TXT"}, /* right-to-left override */
		{"\xe2\x81\xa6x", "\\u{2066}x"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		cr_expect_str_eq(escaped(cases[i].in), cases[i].out, "case %zu", i);
	cr_assert_str_eq(escaped(""), "");
}

Test(html, attr_keeps_text_for_round_trips)
{
	sbuf b = {0};
	html_attr(&b, "a\"b'<c>&d \xe2\x80\xae");
	cr_assert_str_eq(sbuf_str(&b), "a&quot;b&#39;&lt;c&gt;&amp;d \xe2\x80\xae");
	sbuf_free(&b);
}

Test(html, url_param_encodes_everything_but_unreserved)
{
	sbuf b = {0};
	html_url_param(&b, "a b+c/&=?#%<\xc3\xa9-._~Z9");
	cr_assert_str_eq(sbuf_str(&b), "a%20b%2Bc%2F%26%3D%3F%23%25%3C%C3%A9-._~Z9");
	sbuf_free(&b);
}

Test(html, hexdump_escapes_and_cuts)
{
	sbuf b = {0};
	const unsigned char data[] = "<a>&\x00\xff";
	html_hexdump(&b, data, 6, 1024);
	cr_assert(strstr(sbuf_str(&b), "3c 61 3e 26 00 ff"), "%s", sbuf_str(&b));
	cr_assert(strstr(sbuf_str(&b), "|&lt;a&gt;&amp;..|"), "%s", sbuf_str(&b));
	sbuf_reset(&b);
	unsigned char big[40];
	memset(big, 'x', sizeof big);
	html_hexdump(&b, big, sizeof big, 16);
	cr_assert(strstr(sbuf_str(&b), "... 24 more byte(s)"), "%s", sbuf_str(&b));
	sbuf_free(&b);
}

Test(html, hex_pairs_wrap_and_cut)
{
	sbuf b = {0};
	const unsigned char data[] = {0x3c, 0x00, 0xff};
	html_hex_pairs(&b, data, 3, 1024);
	cr_assert_str_eq(sbuf_str(&b), "3c 00 ff\n");
	sbuf_reset(&b);
	html_hex_pairs(&b, data, 3, 2);
	cr_assert_str_eq(sbuf_str(&b), "3c 00\n... 1 more byte(s)\n");
	sbuf_reset(&b);
	html_hex_pairs(&b, data, 0, 2);
	cr_assert_str_eq(sbuf_str(&b), "");
	sbuf_free(&b);
}

/* ---- forms ---- */

Test(form, parses_and_decodes)
{
	form f;
	char err[256];
	const char *body = "a=1&b=x+y%2Bz&empty=&flag&&sel=1&sel=2&u=%C3%A9";
	cr_assert_eq(form_parse(body, strlen(body), 20, &f, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(form_get(&f, "a"), "1");
	cr_assert_str_eq(form_get(&f, "b"), "x y+z");
	cr_assert_str_eq(form_get(&f, "empty"), "");
	cr_assert_str_eq(form_get(&f, "flag"), "");
	cr_assert_str_eq(form_get(&f, "u"), "\xc3\xa9");
	cr_assert_null(form_get(&f, "missing"));
	cr_assert_eq(form_count(&f, "sel"), 2);
	const char *allowed[] = {"a", "b", "empty", "flag", "sel", "u", NULL};
	const char *repeat[] = {"sel", NULL};
	cr_assert_eq(form_check(&f, allowed, repeat, err, sizeof err), 0, "%s", err);
	cr_assert_eq(form_check(&f, allowed, NULL, err, sizeof err), -1);
	cr_assert(strstr(err, "sel"), "%s", err);
	const char *fewer[] = {"a", "b", "empty", "flag", "sel", NULL};
	cr_assert_eq(form_check(&f, fewer, repeat, err, sizeof err), -1);
	cr_assert(strstr(err, "unknown field \"u\""), "%s", err);
	form_free(&f);
	cr_assert_eq(form_parse("", 0, 4, &f, err, sizeof err), 0);
	cr_assert_eq(f.n, 0);
	form_free(&f);
}

Test(form, refuses_what_it_cannot_read)
{
	static const char *const bad[] = {"a=%", "a=%4", "a=%zz", "a=%00", "%00=1", "=1",
	                                  "a=%ff", "a=%c3", "a=1&=2"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		form f;
		char err[256] = "";
		cr_expect_eq(form_parse(bad[i], strlen(bad[i]), 10, &f, err, sizeof err), -1, "%s",
		             bad[i]);
		cr_expect(err[0], "%s: no reason", bad[i]);
		cr_expect_eq(f.n, 0);
		form_free(&f);
	}
	form f;
	char err[256];
	cr_assert_eq(form_parse("a&b&c&d", 7, 3, &f, err, sizeof err), -1);
	cr_assert(strstr(err, "more than 3 fields"), "%s", err);
}

/* ---- selection and paths ---- */

Test(console, selection_round_trip)
{
	char biz[65], key[256], err[256];
	cr_assert_eq(view_selection_parse("4:shop<img src=x>", biz, sizeof biz, key, sizeof key, err,
	                                  sizeof err), 0, "%s", err);
	cr_assert_str_eq(biz, "shop");
	cr_assert_str_eq(key, "<img src=x>");
	cr_assert_eq(view_selection_parse("3:a:bc:d", biz, sizeof biz, key, sizeof key, err,
	                                  sizeof err), 0);
	cr_assert_str_eq(biz, "a:b");
	cr_assert_str_eq(key, "c:d");
	static const char *const bad[] = {"", "shop", ":x", "0:x", "4:shop", "5:shop",
	                                  "65:x", "x:shopkey", "2:a\x01" "b", "99999999999999:x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(view_selection_parse(bad[i], biz, sizeof biz, key, sizeof key, err,
		                                  sizeof err), -1, "%s", bad[i]);
}

Test(console, back_paths_are_local_pages)
{
	cr_assert_not_null(console_local_path("/stuck"));
	cr_assert_not_null(console_local_path("/message?biz=a&key=b%20c"));
	cr_assert_not_null(console_local_path("/overview"));
	static const char *const bad[] = {"//evil.example/", "http://evil.example/", "/stuckx",
	                                  "/static/app.js", "/login", "stuck", "/stuck?a=b c",
	                                  "/stuck\\x", "/\\evil", "", "/actions", "/message\x7f"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_null(console_local_path(bad[i]), "%s", bad[i]);
	cr_assert_null(console_local_path(NULL));
}

/* ---- auth rules ---- */

Test(auth, names)
{
	char err[256];
	cr_assert_eq(console_name_check("alice", err, sizeof err), 0);
	cr_assert_eq(console_name_check("a.b_c-d@ops", err, sizeof err), 0);
	static const char *const bad[] = {"", "al ice", "a<b", "a\nb", "élodie", "a/b",
	                                  "abcdefghijklmnopqrstuvwxyz0123456"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(console_name_check(bad[i], err, sizeof err), -1, "%s", bad[i]);
	cr_assert_eq(console_name_check(NULL, err, sizeof err), -1);
}

Test(auth, tokens_and_secrets)
{
	cr_assert(secret_token_equal("0123456789abcdef", "0123456789abcdef"));
	cr_assert(!secret_token_equal("0123456789abcdeF", "0123456789abcdef"));
	cr_assert(!secret_token_equal("0123456789abcdef0", "0123456789abcdef"));
	cr_assert(!secret_token_equal("", "0123456789abcdef"));
	cr_assert(!secret_token_equal(NULL, "0123456789abcdef"));
	cr_assert(!secret_token_equal("", ""), "an empty token never matches");
	char a[SECRET_HEX + 1], b[SECRET_HEX + 1];
	cr_assert_eq(secret_random_hex(a), 0);
	cr_assert_eq(secret_random_hex(b), 0);
	cr_assert_eq(strlen(a), SECRET_HEX);
	cr_assert_str_neq(a, b);
	cr_assert(secret_equal(a, a));
	cr_assert(!secret_equal(a, b));
	cr_assert(!secret_equal(a, NULL));
	cr_assert(!secret_equal("abc", "abc"), "only full-length secrets");
}

Test(auth, loopback_and_start_up_rules)
{
	cr_assert(console_listen_is_loopback("127.0.0.1:8080"));
	cr_assert(console_listen_is_loopback("127.3.2.1:8080"));
	cr_assert(console_listen_is_loopback("localhost:8080"));
	cr_assert(console_listen_is_loopback("[::1]:8080"));
	cr_assert(!console_listen_is_loopback("0.0.0.0:8080"));
	cr_assert(!console_listen_is_loopback("[::]:8080"));
	cr_assert(!console_listen_is_loopback("10.0.0.1:8080"));
	cr_assert(!console_listen_is_loopback("console.example:8080"));

	txhub_config cfg;
	char err[512];
	int open = -1;
	cr_assert_eq(config_init(&cfg), 0);
	cr_assert_eq(console_check_config(&cfg, &open, err, sizeof err), -1, "no token, not open");
	cr_assert(strstr(err, "console.token") && strstr(err, "console.open"), "%s", err);
	config_set(&cfg, "console.open", "true", err, sizeof err);
	cr_assert_eq(console_check_config(&cfg, &open, err, sizeof err), 0, "%s", err);
	cr_assert_eq(open, 1);
	config_set(&cfg, "console.listen", "0.0.0.0:8080", err, sizeof err);
	cr_assert_eq(console_check_config(&cfg, &open, err, sizeof err), -1, "open off loopback");
	cr_assert(strstr(err, "console.listen") && strstr(err, "console.token"), "%s", err);
	config_set(&cfg, "console.token", "short", err, sizeof err);
	cr_assert_eq(console_check_config(&cfg, &open, err, sizeof err), -1, "a short token");
	cr_assert(strstr(err, "console.token"), "%s", err);
	config_set(&cfg, "console.token", "0123456789abcdef", err, sizeof err);
	cr_assert_eq(console_check_config(&cfg, &open, err, sizeof err), 0, "%s", err);
	cr_assert_eq(open, 0, "a token always wins over console.open");
	config_free(&cfg);
}

Test(auth, host_header_on_loopback)
{
	const char *l = "127.0.0.1:8080";
	cr_assert(console_host_ok("127.0.0.1:8080", l));
	cr_assert(console_host_ok("localhost:8080", l));
	cr_assert(console_host_ok("LOCALHOST:8080", l));
	cr_assert(console_host_ok("[::1]:8080", l));
	cr_assert(!console_host_ok("evil.example:8080", l), "a rebound name");
	cr_assert(!console_host_ok("127.0.0.1:8081", l));
	cr_assert(!console_host_ok("127.0.0.1", l));
	cr_assert(!console_host_ok(NULL, l));
	cr_assert(!console_host_ok("", l));
	cr_assert(!console_host_ok("[::1", l));
	cr_assert(console_host_ok("evil.example", "0.0.0.0:8080"), "not loopback: the token guards");
	cr_assert(console_host_ok(NULL, "10.1.2.3:8080"));
}

Test(auth, origin_of_a_post)
{
	char err[256];
	const char *h = "127.0.0.1:8080";
	cr_assert_eq(console_origin_ok(NULL, NULL, h, err, sizeof err), 0, "curl sends neither");
	cr_assert_eq(console_origin_ok("http://127.0.0.1:8080", "same-origin", h, err, sizeof err), 0);
	cr_assert_eq(console_origin_ok("http://127.0.0.1:9999", NULL, h, err, sizeof err), -1,
	             "another port of the same host: same site, not same origin");
	cr_assert_eq(console_origin_ok("http://evil.example", NULL, h, err, sizeof err), -1);
	cr_assert(strstr(err, "evil.example"), "%s", err);
	cr_assert_eq(console_origin_ok("null", NULL, h, err, sizeof err), -1);
	cr_assert_eq(console_origin_ok("null", "same-origin", h, err, sizeof err), 0,
	             "our own form under Referrer-Policy: no-referrer");
	cr_assert_eq(console_origin_ok("null", "cross-site", h, err, sizeof err), -1,
	             "a sandboxed frame or a data: URL elsewhere");
	cr_assert_eq(console_origin_ok("https://127.0.0.1:8080", NULL, h, err, sizeof err), -1);
	cr_assert_eq(console_origin_ok(NULL, "same-site", h, err, sizeof err), -1);
	cr_assert_eq(console_origin_ok(NULL, "cross-site", h, err, sizeof err), -1);
	cr_assert_eq(console_origin_ok(NULL, "none", h, err, sizeof err), -1);
	cr_assert_eq(console_origin_ok("http://127.0.0.1:8080", NULL, NULL, err, sizeof err), -1);
}

/* ---- sessions ---- */

Test(sessions, create_find_end)
{
	console_sessions *t = console_sessions_new();
	char id[SECRET_HEX + 1], other[SECRET_HEX + 1];
	console_session s;
	cr_assert_eq(console_session_create(t, "alice", 1000, id), 0);
	cr_assert_eq(console_session_create(t, "bob", 1000, other), 0);
	cr_assert(console_session_find(t, id, 2000, &s));
	cr_assert_str_eq(s.name, "alice");
	cr_assert_eq(strlen(s.csrf), SECRET_HEX);
	console_session o;
	cr_assert(console_session_find(t, other, 2000, &o));
	cr_assert_str_neq(s.csrf, o.csrf, "a CSRF token per session");
	cr_assert(!console_session_find(t, "nope", 2000, &s));
	cr_assert(!console_session_find(t, NULL, 2000, &s));
	console_session_end(t, id);
	cr_assert(!console_session_find(t, id, 2000, &s), "logged out");
	cr_assert(console_session_find(t, other, 2000, &s), "the other stays");
	console_sessions_free(t);
}

Test(sessions, a_tenants_session_keeps_its_tenant_and_token)
{
	console_sessions *t = console_sessions_new();
	char id[SECRET_HEX + 1], global[SECRET_HEX + 1];
	console_session s;
	cr_assert_eq(console_session_create_scoped(t, "alice", "team-a", 42, 1000, id), 0);
	cr_assert_eq(console_session_create(t, "root", 1000, global), 0);
	cr_assert(console_session_find(t, id, 2000, &s));
	cr_assert_str_eq(s.tenant, "team-a");
	cr_assert_eq(s.token_id, 42);
	cr_assert(console_session_find(t, global, 2000, &s));
	cr_assert_str_eq(s.tenant, "", "console.token's session is global");
	cr_assert_eq(s.token_id, 0);
	cr_assert_eq(console_session_create_scoped(t, "bob", "", 7, 1000, id), 0);
	cr_assert(console_session_find(t, id, 2000, &s));
	cr_assert_eq(s.token_id, 0, "no tenant, no token id");
	console_sessions_free(t);
}

Test(sessions, expire_when_idle_and_after_their_lifetime)
{
	console_sessions *t = console_sessions_new();
	char id[SECRET_HEX + 1];
	console_session s;
	cr_assert_eq(console_session_create(t, "alice", 0, id), 0);
	cr_assert(console_session_find(t, id, CONSOLE_IDLE_MS - 1, &s));
	/* each request moves the idle clock, not the lifetime */
	int64_t now = CONSOLE_IDLE_MS - 1;
	while (now + CONSOLE_IDLE_MS - 1 < CONSOLE_LIFETIME_MS) {
		now += CONSOLE_IDLE_MS - 1;
		cr_assert(console_session_find(t, id, now, &s));
	}
	cr_assert(!console_session_find(t, id, CONSOLE_LIFETIME_MS, &s), "lifetime over");
	cr_assert_eq(console_session_create(t, "bob", 0, id), 0);
	cr_assert(!console_session_find(t, id, CONSOLE_IDLE_MS, &s), "idle too long");
	cr_assert(!console_session_find(t, id, 1, &s), "and gone for good");
	console_sessions_free(t);
}

Test(sessions, a_full_table_ends_the_least_recently_used)
{
	console_sessions *t = console_sessions_new();
	char ids[CONSOLE_SESSIONS_MAX + 1][SECRET_HEX + 1];
	console_session s;
	for (int i = 0; i < CONSOLE_SESSIONS_MAX; i++)
		cr_assert_eq(console_session_create(t, "u", i, ids[i]), 0);
	cr_assert(console_session_find(t, ids[0], 1000, &s)); /* the oldest is used again */
	cr_assert_eq(console_session_create(t, "new", 1001, ids[CONSOLE_SESSIONS_MAX]), 0);
	cr_assert(console_session_find(t, ids[0], 1002, &s));
	cr_assert(!console_session_find(t, ids[1], 1002, &s), "the least recently used went");
	cr_assert(console_session_find(t, ids[CONSOLE_SESSIONS_MAX], 1002, &s));
	console_sessions_free(t);
}

Test(sessions, flash_is_shown_once)
{
	console_sessions *t = console_sessions_new();
	char id[SECRET_HEX + 1], out[CONSOLE_FLASH_MAX];
	cr_assert_eq(console_session_create(t, "alice", 0, id), 0);
	console_session_set_flash(t, id, "done");
	console_session_take_flash(t, id, out, sizeof out);
	cr_assert_str_eq(out, "done");
	console_session_take_flash(t, id, out, sizeof out);
	cr_assert_str_eq(out, "");
	console_session_set_flash(t, "unknown", "x");
	console_session_take_flash(t, NULL, out, sizeof out);
	cr_assert_str_eq(out, "");
	console_sessions_free(t);
}
