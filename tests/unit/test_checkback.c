/* Unit tests for the check-back helpers: answer parsing (docs/producers.md: Check-back),
 * request URL building with escaping, and the allow list read on the
 * parsed URL, against every trick we could think of. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "checkback_proto.h"

static checkback_answer parse(long status, const char *body, char *reason, size_t rsz)
{
	return checkback_parse_answer(status, body, strlen(body), reason, rsz);
}

/* ---- answers ---- */

typedef struct {
	const char *body;
	checkback_answer want;
} answer_case;

Test(checkback_answer, every_contract_word_and_legacy_integer)
{
	static const answer_case cases[] = {
		{"committed", CHECKBACK_COMMITTED},
		{"commit", CHECKBACK_COMMITTED},
		{"2", CHECKBACK_COMMITTED},
		{"rolled_back", CHECKBACK_ROLLED_BACK},
		{"rollback", CHECKBACK_ROLLED_BACK},
		{"3", CHECKBACK_ROLLED_BACK},
		{"unknown", CHECKBACK_UNDECIDED},
		{"prepared", CHECKBACK_UNDECIDED},
		{"1", CHECKBACK_UNDECIDED},
		{"{\"status\":\"committed\"}", CHECKBACK_COMMITTED},
		{"{\"status\":\"commit\"}", CHECKBACK_COMMITTED},
		{"{\"status\":2}", CHECKBACK_COMMITTED},
		{"{\"status\":\"2\"}", CHECKBACK_COMMITTED},
		{"{\"status\":\"rolled_back\"}", CHECKBACK_ROLLED_BACK},
		{"{\"status\":\"rollback\"}", CHECKBACK_ROLLED_BACK},
		{"{\"status\":3}", CHECKBACK_ROLLED_BACK},
		{"{\"status\":\"unknown\"}", CHECKBACK_UNDECIDED},
		{"{\"status\":\"prepared\"}", CHECKBACK_UNDECIDED},
		{"{\"status\":1}", CHECKBACK_UNDECIDED},
		/* other fields are ignored; whitespace and case do not matter */
		{"{\"order\":17,\"status\":\"committed\",\"by\":{\"x\":[1]}}", CHECKBACK_COMMITTED},
		{"  committed\r\n", CHECKBACK_COMMITTED},
		{"\n{ \"status\" : \"rolled_back\" }\n", CHECKBACK_ROLLED_BACK},
		{"COMMITTED", CHECKBACK_COMMITTED},
		{"Rolled_Back", CHECKBACK_ROLLED_BACK},
		{"\"committed\"", CHECKBACK_COMMITTED},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char reason[256];
		checkback_answer a = parse(200, cases[i].body, reason, sizeof reason);
		cr_assert_eq(a, cases[i].want, "body %s: got %d, want %d", cases[i].body, a,
		             cases[i].want);
	}
}

Test(checkback_answer, any_2xx_counts)
{
	char reason[256];
	cr_assert_eq(parse(200, "committed", reason, sizeof reason), CHECKBACK_COMMITTED);
	cr_assert_eq(parse(201, "committed", reason, sizeof reason), CHECKBACK_COMMITTED);
	cr_assert_eq(parse(299, "3", reason, sizeof reason), CHECKBACK_ROLLED_BACK);
}

typedef struct {
	long status;
	const char *body;
	const char *reason; /* a piece of the reason */
} error_case;

Test(checkback_answer, everything_else_is_an_error_with_a_reason)
{
	static const error_case cases[] = {
		{500, "committed", "HTTP 500: committed"},
		{404, "", "HTTP 404"},
		{302, "", "HTTP 302"},
		{199, "committed", "HTTP 199"},
		{300, "committed", "HTTP 300"},
		{0, "", "HTTP 0"},
		{200, "", "empty answer"},
		{200, " \r\n\t", "empty answer"},
		{200, "yes", "unreadable answer: yes"},
		{200, "committed please", "unreadable answer"},
		{200, "4", "unreadable answer: 4"},
		{200, "0", "unreadable answer: 0"},
		{200, "22", "unreadable answer"},
		{200, "commit ted", "unreadable answer"},
		{200, "{\"status\":\"done\"}", "unknown status \"done\""},
		{200, "{\"status\":4}", "not 1, 2, 3"},
		{200, "{\"status\":2.5}", "not 1, 2, 3"},
		{200, "{\"status\":true}", "not 1, 2, 3"},
		{200, "{\"status\":null}", "not 1, 2, 3"},
		{200, "{\"Status\":\"committed\"}", "no \"status\""},
		{200, "{\"state\":\"committed\"}", "no \"status\""},
		{200, "{\"status\":\"committed\"", "unreadable answer"},
		{200, "[\"committed\"]", "unreadable answer"},
		{200, "<html>\x01\xff</html>", "unreadable answer: <html>\\x01\\xff</html>"},
		{200, "{\"status\":\"\\u0001bad\"}", "unknown status \"\\x01bad\""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char reason[256];
		checkback_answer a = parse(cases[i].status, cases[i].body, reason, sizeof reason);
		cr_assert_eq(a, CHECKBACK_ERROR, "HTTP %ld %s: got %d", cases[i].status, cases[i].body, a);
		cr_assert(strstr(reason, cases[i].reason), "HTTP %ld %s: reason \"%s\" lacks \"%s\"",
		          cases[i].status, cases[i].body, reason, cases[i].reason);
	}
}

Test(checkback_answer, a_second_top_level_status_is_an_error)
{
	/* cJSON keeps both members and its lookup returns the first: without
	 * this check the answer would depend on the producer's member order */
	static const char *const bodies[] = {
		"{\"status\":\"committed\",\"status\":\"rolled_back\"}",
		"{\"status\":\"committed\",\"status\":\"committed\"}",
		"{\"status\":2,\"order\":1,\"status\":3}",
		"{\"status\":\"rolled_back\",\"st\\u0061tus\":\"committed\"}",
		"{\"status\":\"committed\",\"status\":null}",
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		char reason[256] = "";
		cr_assert_eq(parse(200, bodies[i], reason, sizeof reason), CHECKBACK_ERROR, "%s",
		             bodies[i]);
		cr_assert_str_eq(reason, "the JSON answer has more than one \"status\" field", "%s",
		                 bodies[i]);
	}
	/* only the top level counts, and only that exact name */
	static const answer_case fine[] = {
		{"{\"status\":\"committed\",\"detail\":{\"status\":\"x\",\"status\":\"y\"}}",
		 CHECKBACK_COMMITTED},
		{"{\"status\":3,\"Status\":2,\"STATUS\":1}", CHECKBACK_ROLLED_BACK},
		{"{\"items\":[{\"status\":1},{\"status\":2}],\"status\":\"commit\"}",
		 CHECKBACK_COMMITTED},
		{"{\"note\":\"a\",\"note\":\"b\",\"status\":\"unknown\"}", CHECKBACK_UNDECIDED},
	};
	for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
		char reason[256];
		cr_assert_eq(parse(200, fine[i].body, reason, sizeof reason), fine[i].want, "%s: %s",
		             fine[i].body, reason);
	}
}

Test(checkback_answer, undecided_says_so)
{
	char reason[256];
	cr_assert_eq(parse(200, "unknown", reason, sizeof reason), CHECKBACK_UNDECIDED);
	cr_assert(strstr(reason, "not decided yet"), "%s", reason);
}

Test(checkback_answer, reasons_are_printable_and_bounded)
{
	char body[4096];
	for (size_t i = 0; i < sizeof body - 1; i++)
		body[i] = (char)(1 + i % 255);
	body[sizeof body - 1] = '\0';
	char reason[128];
	cr_assert_eq(parse(200, body, reason, sizeof reason), CHECKBACK_ERROR);
	cr_assert_lt(strlen(reason), sizeof reason);
	for (const char *p = reason; *p; p++)
		cr_assert(*p >= 0x20 && *p < 0x7f, "unprintable byte 0x%02x in the reason",
		          (unsigned char)*p);
	/* a NUL inside the body does not end it early */
	cr_assert_eq(checkback_parse_answer(200, "2\0garbage", 9, reason, sizeof reason),
	             CHECKBACK_ERROR);
	cr_assert_eq(checkback_parse_answer(200, "2\0garbage", 1, reason, sizeof reason),
	             CHECKBACK_COMMITTED);
}

/* ---- URLs ---- */

static void url_is(const char *base, const char *biz, const char *mk, const char *want)
{
	char *u = checkback_request_url(base, biz, mk);
	cr_assert_not_null(u);
	cr_assert_str_eq(u, want, "base %s", base);
	free(u);
}

Test(checkback_url, parameters_after_question_mark_or_ampersand)
{
	url_is("http://p.example/check", "shop", "o-1",
	       "http://p.example/check?biz_id=shop&message_key=o-1&bizID=shop&messageKey=o-1");
	url_is("http://p.example/check?tenant=7", "shop", "o-1",
	       "http://p.example/check?tenant=7&biz_id=shop&message_key=o-1&bizID=shop&messageKey=o-1");
	url_is("http://p.example/check?", "shop", "o-1",
	       "http://p.example/check?biz_id=shop&message_key=o-1&bizID=shop&messageKey=o-1");
	url_is("http://p.example/check?a=1&", "shop", "o-1",
	       "http://p.example/check?a=1&biz_id=shop&message_key=o-1&bizID=shop&messageKey=o-1");
	url_is("https://p.example:8443/", "42", "k",
	       "https://p.example:8443/?biz_id=42&message_key=k&bizID=42&messageKey=k");
	/* a fragment is never sent: the parameters must not end up in it */
	url_is("http://p.example/check#frag", "b", "k",
	       "http://p.example/check?biz_id=b&message_key=k&bizID=b&messageKey=k");
	url_is("http://p.example/check?x=1#frag?y", "b", "k",
	       "http://p.example/check?x=1&biz_id=b&message_key=k&bizID=b&messageKey=k");
}

Test(checkback_url, odd_keys_are_percent_encoded)
{
	url_is("http://p/c", "a b", "x&y=z",
	       "http://p/c?biz_id=a%20b&message_key=x%26y%3Dz&bizID=a%20b&messageKey=x%26y%3Dz");
	url_is("http://p/c", "b", "%+#?/\\\"'",
	       "http://p/c?biz_id=b&message_key=%25%2B%23%3F%2F%5C%22%27&bizID=b"
	       "&messageKey=%25%2B%23%3F%2F%5C%22%27");
	/* unreserved characters stay; UTF-8 bytes are encoded one by one */
	url_is("http://p/c", "A-z_0.9~", "\xc3\xa9\xe2\x82\xac",
	       "http://p/c?biz_id=A-z_0.9~&message_key=%C3%A9%E2%82%AC&bizID=A-z_0.9~"
	       "&messageKey=%C3%A9%E2%82%AC");
}

Test(checkback_url, longest_keys_fit)
{
	char biz[65], mk[256];
	memset(biz, '&', 64);
	biz[64] = '\0';
	memset(mk, '\xff', 255);
	mk[255] = '\0';
	char *u = checkback_request_url("http://p/c", biz, mk);
	cr_assert_not_null(u);
	cr_assert_eq(strlen(u), strlen("http://p/c?biz_id=&message_key=&bizID=&messageKey=") +
	                            2 * 3 * 64 + 2 * 3 * 255);
	free(u);
}

/* ---- allow list ---- */

Test(checkback_allow, empty_list_allows_everything)
{
	cr_assert(checkback_url_allowed("", "http://anything.example/x"));
	cr_assert(checkback_url_allowed(NULL, "https://anything.example/x"));
}

Test(checkback_allow, entries_match_at_a_segment_boundary)
{
	const char *allow = "http://a.example";
	cr_assert(checkback_url_allowed(allow, "http://a.example"));
	cr_assert(checkback_url_allowed(allow, "http://a.example/check"));
	cr_assert(checkback_url_allowed(allow, "http://a.example?x=1"));
	cr_assert(checkback_url_allowed(allow, "http://a.example#f"));
	cr_assert_not(checkback_url_allowed(allow, "http://a.example.evil.net/check"));
	cr_assert_not(checkback_url_allowed(allow, "http://a.example:8080/check"));
	cr_assert_not(checkback_url_allowed(allow, "http://a.example@evil.net/"));
	cr_assert_not(checkback_url_allowed(allow, "https://a.example/check"));
	cr_assert_not(checkback_url_allowed(allow, "http://b.example/check"));
	/* an entry path ending in '/' is a directory: anything below it */
	cr_assert(checkback_url_allowed("http://a.example/tx/", "http://a.example/tx/check"));
	cr_assert_not(checkback_url_allowed("http://a.example/tx/", "http://a.example/txx"));
	cr_assert_not(checkback_url_allowed("http://a.example/tx", "http://a.example/txx"));
	cr_assert(checkback_url_allowed("http://a.example/tx", "http://a.example/tx/y"));
}

Test(checkback_allow, lists_with_spaces_and_empty_items)
{
	const char *allow = " http://a.example/ , https://b.example:8443/cb,, ";
	cr_assert(checkback_url_allowed(allow, "http://a.example/x"));
	cr_assert(checkback_url_allowed(allow, "https://b.example:8443/cb?x"));
	cr_assert_not(checkback_url_allowed(allow, "https://b.example/cb"));
	cr_assert_not(checkback_url_allowed(allow, "http://c.example/"));
	cr_assert_not(checkback_url_allowed(",,", "http://c.example/"));
}

/* ---- the allow list against crafted URLs (docs/producers.md: Check-back) ----
 *
 * Inside means: the URL as libcurl parses it has an entry's scheme, host
 * (any case) and port (default filled in), and a normalized path equal to
 * the entry's or continuing it after '/'; and it has no userinfo,
 * backslash, hidden dot segment or separator, and a host written as
 * libcurl keeps it. Hosts are compared as written: 2130706433, 0x7f000001,
 * 0177.0.0.1 and 127.1 all reach 127.0.0.1, but an entry 127.0.0.1 holds
 * only 127.0.0.1 (libcurl would rewrite them, so they are refused). */

typedef struct {
	const char *allow, *url;
	int inside;
	const char *why; /* what the case tries */
} allow_case;

#define OK "http://127.0.0.1:8080/ok"

static const allow_case allow_cases[] = {
	/* the entry itself and what is under it */
	{OK, "http://127.0.0.1:8080/ok", 1, "the entry"},
	{OK, "http://127.0.0.1:8080/ok/", 1, "trailing slash"},
	{OK, "http://127.0.0.1:8080/ok/sub", 1, "below the entry"},
	{OK, "http://127.0.0.1:8080/ok/sub/deeper?x=1", 1, "deeper, with a query"},
	{OK, "http://127.0.0.1:8080/ok?x=1", 1, "query"},
	{OK, "http://127.0.0.1:8080/ok#frag", 1, "fragment (never sent)"},
	{OK, "http://127.0.0.1:8080/ok/sub%20x", 1, "an encoded space is just a byte"},
	{OK, "http://127.0.0.1:8080/ok/...", 1, "three dots are a name, not a dot segment"},
	{OK, "http://127.0.0.1:8080/ok/.hidden", 1, "a name starting with a dot"},
	/* @ ? # tricks: the host is the host libcurl connects to */
	{OK, "http://127.0.0.1:8080/ok?@evil.example/admin", 1, "?@: only a query"},
	{OK, "http://127.0.0.1:8080/ok#@evil.example/admin", 1, "#@: only a fragment"},
	{OK, "http://127.0.0.1:8080/ok?x=/../admin", 1, "dots in the query only"},
	{OK, "http://127.0.0.1:8080@evil.example/ok", 0, "@: userinfo, host evil.example"},
	{OK, "http://evil.example@127.0.0.1:8080/ok", 0, "userinfo on the right host"},
	{OK, "http://user:pw@127.0.0.1:8080/ok", 0, "user and password"},
	{OK, "http://:@127.0.0.1:8080/ok", 0, "empty userinfo"},
	{OK, "http://127.0.0.1:8080\\@evil.example/ok", 0, "backslash before @"},
	{OK, "http://127.0.0.1:8080.evil.example/ok", 0, "port text running into a name"},
	/* dot segments, plain and hidden */
	{OK, "http://127.0.0.1:8080/ok/../admin", 0, ".. out of the entry"},
	{OK, "http://127.0.0.1:8080/ok/..", 0, ".. to the root"},
	{OK, "http://127.0.0.1:8080/ok/sub/../../admin", 0, "two levels up"},
	{OK, "http://127.0.0.1:8080/ok//../../admin", 0, "empty segment then up"},
	{OK, "http://127.0.0.1:8080/ok/./sub", 1, ". stays inside"},
	{OK, "http://127.0.0.1:8080/ok/x/../sub", 1, ".. that stays inside"},
	{OK, "http://127.0.0.1:8080/ok/.", 1, "/ok/. is /ok/"},
	{OK, "http://127.0.0.1:8080/admin/../ok/sub", 1, "normalizes into the entry"},
	{OK, "http://127.0.0.1:8080/ok/%2e%2e/admin", 0, "%2e%2e"},
	{OK, "http://127.0.0.1:8080/ok/%2E%2E/admin", 0, "%2E%2E"},
	{OK, "http://127.0.0.1:8080/ok/%2E./admin", 0, "%2E."},
	{OK, "http://127.0.0.1:8080/ok/.%2e/admin", 0, ".%2e"},
	{OK, "http://127.0.0.1:8080/ok/%2e/admin", 0, "%2e alone"},
	{OK, "http://127.0.0.1:8080/ok/%2e%2e", 0, "%2e%2e at the end"},
	{OK, "http://127.0.0.1:8080/ok/%2e%2e/../sub", 0, "hidden .. that libcurl would cancel"},
	{OK, "http://127.0.0.1:8080/ok/..;/admin", 0, "..; (Tomcat path parameter)"},
	{OK, "http://127.0.0.1:8080/ok/%2e%2e;x/admin", 0, "%2e%2e;x"},
	{OK, "http://127.0.0.1:8080/ok%2f..%2fadmin", 0, "encoded slashes"},
	{OK, "http://127.0.0.1:8080/ok/x%2F..%2F..%2Fadmin", 0, "encoded slashes below the entry"},
	{OK, "http://127.0.0.1:8080/ok/..%5cadmin", 0, "encoded backslash"},
	{OK, "http://127.0.0.1:8080/ok\\..\\admin", 0, "backslashes"},
	{OK, "http://127.0.0.1:8080/ok/sub\\x", 0, "any backslash"},
	/* the path is compared byte for byte after normalization */
	{OK, "http://127.0.0.1:8080/okay", 0, "/okay is not under /ok"},
	{OK, "http://127.0.0.1:8080/ok.txt", 0, "/ok.txt is not under /ok"},
	{OK, "http://127.0.0.1:8080/ok;x", 0, "/ok;x is not under /ok"},
	{OK, "http://127.0.0.1:8080/OK", 0, "paths are case-sensitive"},
	{OK, "http://127.0.0.1:8080/o%6b", 0, "encoded letters are not decoded"},
	{OK, "http://127.0.0.1:8080/", 0, "the root"},
	{OK, "http://127.0.0.1:8080", 0, "no path"},
	/* scheme and port */
	{OK, "HTTP://127.0.0.1:8080/ok", 1, "scheme in capitals"},
	{OK, "hTtP://127.0.0.1:8080/ok/x", 1, "scheme in mixed case"},
	{OK, "https://127.0.0.1:8080/ok", 0, "other scheme"},
	{OK, "ftp://127.0.0.1:8080/ok", 0, "not http"},
	{OK, "//127.0.0.1:8080/ok", 0, "no scheme"},
	{OK, "http:/127.0.0.1:8080/ok", 0, "one slash"},
	{OK, "http:///127.0.0.1:8080/ok", 0, "three slashes"},
	{OK, "http://127.0.0.1:8081/ok", 0, "other port"},
	{OK, "http://127.0.0.1/ok", 0, "implicit port 80"},
	{OK, "http://127.0.0.1:/ok", 0, "empty port is 80"},
	{OK, "http://127.0.0.1:08080/ok", 1, "leading zero: the same port"},
	{OK, "http://127.0.0.1:65616/ok", 0, "port over 65535"},
	/* other spellings of 127.0.0.1 */
	{OK, "http://2130706433:8080/ok", 0, "decimal IPv4"},
	{OK, "http://0x7f000001:8080/ok", 0, "hex IPv4"},
	{OK, "http://0x7f.0.0.1:8080/ok", 0, "hex first part"},
	{OK, "http://0177.0.0.1:8080/ok", 0, "octal first part"},
	{OK, "http://127.1:8080/ok", 0, "short IPv4"},
	{OK, "http://127.0.1:8080/ok", 0, "three-part IPv4"},
	{OK, "http://127.000.000.001:8080/ok", 0, "zero-padded IPv4"},
	{OK, "http://127.0.0.1.:8080/ok", 0, "trailing dot"},
	{OK, "http://%31%32%37.0.0.1:8080/ok", 0, "percent-encoded host"},
	{OK, "http://localhost:8080/ok", 0, "a name for it"},
	{OK, "http://[::1]:8080/ok", 0, "IPv6 loopback"},
	{OK, "http://[::ffff:127.0.0.1]:8080/ok", 0, "IPv4-mapped IPv6"},
	{OK, "http://127.0.0.2:8080/ok", 0, "another address"},
	/* white space, control bytes, unicode */
	{OK, "http://127.0.0.1:8080/ok ", 0, "trailing space"},
	{OK, " http://127.0.0.1:8080/ok", 0, "leading space"},
	{OK, "http://127.0.0.1:8080/ok\t", 0, "tab"},
	{OK, "http://127.0.0.1:8080/ok\n", 0, "newline"},
	{OK, "http://127.0.0.1:8080/ok\r\nX: y", 0, "header injection"},
	{OK, "http://127.0.0.1:8080/o k", 0, "space inside"},
	{OK, "http://127.0.0.1:8080/ok/\xc3\xa9", 0, "raw UTF-8 in the path"},
	{OK, "http://127.0.0.1:8080/ok/%C3%A9", 1, "encoded UTF-8 in the path"},
	{OK, "", 0, "empty"},
	/* a host name entry: case, trailing dot, default port */
	{"http://a.example/tx/", "http://A.EXAMPLE/tx/check", 1, "host in capitals"},
	{"http://A.Example/tx/", "http://a.example/tx/check", 1, "entry in capitals"},
	{"http://a.example/tx/", "HtTp://a.Example/tx/x", 1, "mixed case"},
	{"http://a.example/tx/", "http://a.example:80/tx/x", 1, "explicit port 80"},
	{"http://a.example:80/tx/", "http://a.example/tx/x", 1, "entry with explicit 80"},
	{"http://a.example/tx/", "http://a.example:/tx/x", 1, "empty port"},
	{"http://a.example/tx/", "http://a.example:8080/tx/x", 0, "other port"},
	{"http://a.example/tx/", "http://a.example./tx/x", 0, "trailing dot"},
	{"http://a.example/tx/", "http://a.example.evil.net/tx/", 0, "suffix host"},
	{"http://a.example/tx/", "http://evil-a.example/tx/", 0, "prefix host"},
	{"http://a.example/tx/", "http://a.example/txx", 0, "sibling path"},
	{"http://a.example/tx/", "http://a.example/tx", 0, "entry is a directory"},
	{"http://a.example/tx/", "http://a.example/tx/%2e%2e/admin", 0, "%2e%2e"},
	{"http://a.example/tx/", "http://a%2eexample/tx/x", 0, "encoded dot in the host"},
	{"http://a.example/tx/", "http://\xc3\xa4.example/tx/x", 0, "raw unicode host"},
	{"http://xn--4ca.example/", "http://%C3%A4.example/x", 0, "encoded unicode host"},
	{"http://xn--4ca.example/", "http://xn--4ca.example/x", 1, "punycode as written"},
	{"https://b.example/cb", "https://b.example:443/cb", 1, "explicit port 443"},
	{"https://b.example/cb", "https://B.example/cb/x", 1, "host case"},
	{"https://b.example/cb", "https://b.example:8443/cb", 0, "other port"},
	{"https://b.example/cb", "http://b.example:443/cb", 0, "http on 443"},
	/* IPv6 entries */
	{"http://[::1]:8080/ok", "http://[::1]:8080/ok/x", 1, "IPv6 as written"},
	{"http://[::1]:8080/ok", "http://[0:0::1]:8080/ok", 0, "IPv6 uncompressed"},
	{"http://[::1]:8080/ok", "http://[0000::1]:8080/ok", 0, "IPv6 zero-padded"},
	{"http://[::1]:8080/ok", "http://[::1%25lo]:8080/ok", 0, "IPv6 zone"},
	{"http://[::1]:8080/ok", "http://127.0.0.1:8080/ok", 0, "IPv4 loopback"},
	{"http://[::1]:8080/ok", "http://[::1]:8080/ok/../admin", 0, ".. out"},
	{"http://[fe80::a]/", "http://[FE80::A]/x", 1, "IPv6 hex case"},
	/* an entry without a path holds the whole origin */
	{"http://a.example", "http://a.example", 1, "the origin"},
	{"http://a.example", "http://a.example/anything/at/all", 1, "any path"},
	{"http://a.example", "http://a.example?x", 1, "a query"},
	{"http://a.example", "http://a.example:8080/", 0, "other port"},
	{"http://a.example", "http://a.example@evil.net/", 0, "userinfo"},
	{"http://a.example", "http://a.example/%2e%2e/x", 0, "hidden dot segment anywhere"},
	/* lists */
	{" http://x.example/a , " OK ",,", "http://127.0.0.1:8080/ok/x", 1, "second entry"},
	{",,", "http://127.0.0.1:8080/ok", 0, "a list of nothing holds nothing"},
	{"http://2130706433:8080/ok", "http://127.0.0.1:8080/ok", 0, "an unsafe entry holds nothing"},
	{"http://2130706433:8080/ok", "http://2130706433:8080/ok", 0, "not even itself"},
};

Test(checkback_allow, crafted_urls)
{
	for (size_t i = 0; i < sizeof allow_cases / sizeof allow_cases[0]; i++) {
		const allow_case *c = &allow_cases[i];
		int got = checkback_url_allowed(c->allow, c->url);
		cr_expect_eq(got, c->inside, "case %zu (%s): \"%s\" against \"%s\" is %s", i, c->why,
		             c->url, c->allow, got ? "inside" : "outside");
	}
}

/* What is requested is the normalized URL that was checked: dot segments
 * removed, no fragment; and libcurl, told CURLOPT_PATH_AS_IS as the
 * checker does, reads back exactly that path, host and port. */
Test(checkback_allow, the_checked_url_is_the_requested_url)
{
	static const char *const cases[][2] = {
		{"http://127.0.0.1:8080/ok", "http://127.0.0.1:8080/ok"},
		{"http://127.0.0.1:8080/ok/x/../sub#frag", "http://127.0.0.1:8080/ok/sub"},
		{"http://127.0.0.1:8080/admin/../ok/./sub", "http://127.0.0.1:8080/ok/sub"},
		{"http://127.0.0.1:8080/ok//../x", "http://127.0.0.1:8080/ok/x"},
		{"http://127.0.0.1:8080/ok/.", "http://127.0.0.1:8080/ok/"},
		{"HTTP://A.Example:80/ok/./x?q=1#f", "http://A.Example:80/ok/x?q=1"},
		{"http://127.0.0.1:8080/ok?@evil.example/admin", "http://127.0.0.1:8080/ok?@evil.example/admin"},
		{"http://127.0.0.1:8080/ok#@evil.example/", "http://127.0.0.1:8080/ok"},
		{"http://127.0.0.1:08080/ok", "http://127.0.0.1:8080/ok"},
		{"http://a.example", "http://a.example/"},
		{"http://[::1]:8080/ok/../x", "http://[::1]:8080/x"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		checkback_url u;
		char err[200];
		cr_assert_eq(checkback_url_parse(cases[i][0], &u, err, sizeof err), 0, "%s: %s",
		             cases[i][0], err);
		cr_expect_str_eq(u.url, cases[i][1], "%s", cases[i][0]);
		CURLU *h = curl_url();
		cr_assert_not_null(h);
		cr_assert_eq(curl_url_set(h, CURLUPART_URL, u.url, CURLU_PATH_AS_IS), CURLUE_OK);
		char *path = NULL, *host = NULL, *port = NULL;
		curl_url_get(h, CURLUPART_PATH, &path, 0);
		curl_url_get(h, CURLUPART_HOST, &host, 0);
		curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
		cr_expect_str_eq(path, u.path, "%s: libcurl would send %s, %s was checked", cases[i][0],
		                 path, u.path);
		cr_expect_str_eq(host, u.host);
		cr_expect_eq(strtol(port, NULL, 10), u.port);
		curl_free(path);
		curl_free(host);
		curl_free(port);
		curl_url_cleanup(h);
		checkback_url_clear(&u);
	}
}

Test(checkback_allow, parts_and_default_ports)
{
	checkback_url u;
	char err[200];
	cr_assert_eq(checkback_url_parse("HTTPS://Shop.Example/cb/../check?a=1#top", &u, err,
	                                 sizeof err), 0, "%s", err);
	cr_assert_str_eq(u.scheme, "https");
	cr_assert_str_eq(u.host, "Shop.Example");
	cr_assert_eq(u.port, 443);
	cr_assert_str_eq(u.path, "/check");
	cr_assert(u.has_query);
	cr_assert(u.has_fragment);
	cr_assert_null(u.unsafe);
	checkback_url_clear(&u);
	checkback_url_clear(&u); /* clearing twice is fine */
	cr_assert_eq(checkback_url_parse("http://shop.example", &u, err, sizeof err), 0);
	cr_assert_eq(u.port, 80);
	cr_assert_str_eq(u.path, "/");
	cr_assert(!u.has_query && !u.has_fragment);
	checkback_url_clear(&u);
}

Test(checkback_allow, reasons)
{
	static const char *const cases[][2] = {
		{"http://u@a.example/", "userinfo"},
		{"http://a.example/x\\y", "a backslash"},
		{"http://2130706433/", "a host not written in its normal form"},
		{"http://a.example/%2e%2e/x", "a percent-encoded dot segment"},
		{"http://a.example/..;/x", "a dot segment with parameters"},
		{"http://a.example/a%2Fb", "a percent-encoded / or \\"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		checkback_url u;
		char err[200], why[200] = "";
		cr_assert_eq(checkback_url_parse(cases[i][0], &u, err, sizeof err), 0, "%s", err);
		cr_assert_not_null(u.unsafe, "%s", cases[i][0]);
		cr_assert(strstr(u.unsafe, cases[i][1]), "%s: %s", cases[i][0], u.unsafe);
		/* unsafe matters only against a list: with none, anything goes */
		cr_assert(checkback_url_permitted("", &u, why, sizeof why));
		cr_assert_not(checkback_url_permitted("http://a.example", &u, why, sizeof why));
		cr_assert(strstr(why, cases[i][1]), "%s: %s", cases[i][0], why);
		checkback_url_clear(&u);
	}
	checkback_url u;
	char err[200], why[200];
	cr_assert_eq(checkback_url_parse("http://a.example/y", &u, err, sizeof err), 0);
	cr_assert_not(checkback_url_permitted("http://a.example/x", &u, why, sizeof why));
	cr_assert(strstr(why, "no entry"), "%s", why);
	checkback_url_clear(&u);
	static const char *const unreadable[] = {"ftp://a/", "http://", "http://a:99999/",
	                                         "http://[zz]/", "http://a/\x7f", "http:/a"};
	for (size_t i = 0; i < sizeof unreadable / sizeof unreadable[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(checkback_url_parse(unreadable[i], &u, err, sizeof err), -1, "%s",
		             unreadable[i]);
		cr_assert_gt(strlen(err), 0);
		cr_assert_null(u.url);
	}
}

Test(checkback_allow, entries_are_checked_like_urls)
{
	static const char *const good[] = {
		"", ",,", "http://a.example", "https://a.example:8443/cb, http://b.example/tx/",
		"http://[::1]:8080/ok", "http://127.0.0.1:80/ok", "HTTP://A.Example/x",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		char err[300] = "";
		cr_assert_eq(checkback_allow_validate(good[i], err, sizeof err), 0, "%s: %s", good[i],
		             err);
	}
	static const char *const bad[][2] = {
		{"ftp://a.example/", "ftp://a.example/"},
		{"http://a.example/, a.example/x", "a.example/x"},
		{"http://u@a.example/", "userinfo"},
		{"http://a.example/x\\", "backslash"},
		{"http://2130706433/", "normal form"},
		{"http://127.1/", "normal form"},
		{"http://[0:0::1]/", "normal form"},
		{"http://a.example/%2e%2e/", "dot segment"},
		{"http://a.example/x?y=1", "a query"},
		{"http://a.example/x#y", "a fragment"},
		{"http://a.example:99999/", "Port"},
		{"http://a.example/\xc3\xa9", "non-ASCII"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char err[300] = "";
		cr_assert_eq(checkback_allow_validate(bad[i][0], err, sizeof err), -1, "%s", bad[i][0]);
		cr_assert(strstr(err, bad[i][1]), "%s: message %s", bad[i][0], err);
	}
}
