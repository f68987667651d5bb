/* Unit tests for the check-back helpers: answer parsing (CONTRACT §5),
 * request URL building with escaping, and the allow list. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "checkback.h"

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

Test(checkback_allow, prefixes_match_at_a_boundary)
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
	/* a prefix ending in '/' matches anything below it */
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
