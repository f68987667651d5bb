/* Unit tests for the trace context of an envelope (docs/consumers.md: Trace context): W3C
 * traceparent and tracestate checks, and what envelope_parse keeps, drops
 * and never rejects. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "trace.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static envelope env;
static char err[512];

static void teardown(void) { envelope_free(&env); }

TestSuite(trace, .fini = teardown);

Test(trace, valid_traceparents)
{
	cr_assert_null(txhubi_trace_check_parent(TP));
	cr_assert_null(txhubi_trace_check_parent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
	/* a later version: 55 characters, or more after a '-' */
	cr_assert_null(txhubi_trace_check_parent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
	cr_assert_null(txhubi_trace_check_parent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what"));
}

Test(trace, malformed_traceparents_say_why)
{
	struct {
		const char *s, *why;
	} bad[] = {
		{"", "shorter than 55"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", "shorter than 55"},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version ff"},
		{"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version is not"},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "trace-id is not"},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "trace-id is all zeros"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "parent-id is all zeros"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01", "parent-id is not"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", "trace-flags"},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "separated"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", "exactly 55"},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", "without a '-'"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *why = txhubi_trace_check_parent(bad[i].s);
		cr_assert_not_null(why, "accepted %s", bad[i].s);
		cr_assert(strstr(why, bad[i].why), "%s: %s", bad[i].s, why);
	}
	char longer[600];
	memset(longer, 'a', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	memcpy(longer, "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", 56);
	cr_assert(strstr(txhubi_trace_check_parent(longer), "longer than 512"));
}

Test(trace, tracestates)
{
	cr_assert_null(txhubi_trace_check_state(""));
	cr_assert_null(txhubi_trace_check_state("rojo=00f067aa0ba902b7"));
	cr_assert_null(txhubi_trace_check_state("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"));
	cr_assert_null(txhubi_trace_check_state("a=1,,\tb=2 , t@sys=x y"));
	cr_assert_null(txhubi_trace_check_state("acme*/x_-=v"));
	cr_assert(strstr(txhubi_trace_check_state("Rojo=1"), "key"));
	cr_assert(strstr(txhubi_trace_check_state("rojo"), "key"));
	cr_assert(strstr(txhubi_trace_check_state("rojo="), "value"));
	cr_assert(strstr(txhubi_trace_check_state("rojo=a=b"), "value"));
	cr_assert(strstr(txhubi_trace_check_state("rojo=\xc3\xa9"), "value"));
	cr_assert(strstr(txhubi_trace_check_state("a=1,a=2"), "twice"));
	cr_assert(strstr(txhubi_trace_check_state("t@=1"), "key"));
	cr_assert(strstr(txhubi_trace_check_state("t@syst3mnametoolong=1"), "key"));
	/* 32 members pass, 33 do not */
	char s[600] = "";
	for (int i = 0; i < 33; i++) {
		size_t l = strlen(s);
		snprintf(s + l, sizeof s - l, "%sk%d=v", i ? "," : "", i);
		if (i == 31)
			cr_assert_null(txhubi_trace_check_state(s), "%s", s);
	}
	cr_assert(strstr(txhubi_trace_check_state(s), "more than 32"));
	char big[520];
	memset(big, 'v', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memcpy(big, "k=", 2);
	cr_assert(strstr(txhubi_trace_check_state(big), "longer than 512"));
}

/* Parse the record value s into env. */
static int parse_value(const char *s)
{
	envelope_free(&env);
	return envelope_parse(s, strlen(s), 1 << 20, &env, err, sizeof err);
}

static int parse(const char *trace)
{
	char s[2048];
	snprintf(s, sizeof s, "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\","
	                      "\"payload\":1,\"forward\":{\"topic\":\"t\"}%s%s}",
	         trace ? ",\"trace\":" : "", trace ? trace : "");
	return parse_value(s);
}

Test(trace, envelope_keeps_a_valid_trace)
{
	cr_assert_eq(parse("{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\"}"), 0, "%s", err);
	cr_assert_str_eq(env.traceparent, TP);
	cr_assert_str_eq(env.tracestate, "rojo=1");
	cr_assert_str_eq(env.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
	cr_assert_null(env.trace_dropped);
	cr_assert_eq(parse("{\"traceparent\":\"" TP "\",\"tracestate\":\"\",\"other\":1}"), 0);
	cr_assert_null(env.tracestate); /* empty: none */
	cr_assert_null(env.trace_dropped);
	cr_assert_eq(parse(NULL), 0);
	cr_assert_null(env.traceparent);
	cr_assert_str_eq(env.trace_id, "");
	cr_assert_eq(parse("null"), 0);
	cr_assert_null(env.traceparent);
	cr_assert_null(env.trace_dropped);
}

Test(trace, envelope_drops_a_malformed_trace_and_keeps_the_message)
{
	struct {
		const char *trace, *label;
		int keeps_parent;
		const char *why; /* in trace_dropped_why; NULL: any */
	} cases[] = {
		{"\"" TP "\"", "trace", 0, NULL},
		{"[]", "trace", 0, NULL},
		{"{\"traceparent\":\"" TP "\",\"traceparent\":\"" TP "\"}", "trace", 0, NULL},
		{"{}", "traceparent", 0, NULL},
		{"{\"traceparent\":7}", "traceparent", 0, NULL},
		{"{\"traceparent\":\"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\","
		 "\"tracestate\":\"rojo=1\"}", "traceparent", 0, NULL},
		{"{\"traceparent\":\"00-00000000000000000000000000000000-00f067aa0ba902b7-01\"}",
		 "traceparent", 0, NULL},
		{"{\"traceparent\":\"" TP "\",\"tracestate\":\"Bad Key=1\"}", "tracestate", 1, NULL},
		{"{\"traceparent\":\"" TP "\",\"tracestate\":5}", "tracestate", 1, NULL},
		/* \u0000 (cJSON cuts the string there: TP "\u0000..." would read
		 * as a valid TP) drops what holds it (issue 30, item 8) */
		{"{\"traceparent\":\"" TP "\\u0000\\r\\nX-Evil: 1\",\"tracestate\":\"rojo=1\"}",
		 "traceparent", 0, "\\u0000"},
		{"{\"traceparent\":\"\\u0000\"}", "traceparent", 0, "\\u0000"},
		{"{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\\u0000\\r\\nX-Evil: 1\"}",
		 "tracestate", 1, "\\u0000"},
		{"{\"traceparent\":\"" TP "\",\"tracestate\":\"\\u0000\"}", "tracestate", 1, "\\u0000"},
		{"{\"traceparent\\u0000x\":\"" TP "\"}", "trace", 0, "\\u0000"},
		{"{\"traceparent\":\"" TP "\",\"n\\u0000\":1}", "trace", 0, "\\u0000"},
		{"[\"\\u0000\"]", "trace", 0, "not an object"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cr_assert_eq(parse(cases[i].trace), 0, "%s rejected: %s", cases[i].trace, err);
		cr_assert_not_null(env.trace_dropped, "%s", cases[i].trace);
		cr_assert_str_eq(env.trace_dropped, cases[i].label, "%s", cases[i].trace);
		cr_assert_not_null(env.trace_dropped_why);
		if (cases[i].why)
			cr_assert(strstr(env.trace_dropped_why, cases[i].why), "%s: %s", cases[i].trace,
			          env.trace_dropped_why);
		cr_assert_null(env.tracestate, "%s", cases[i].trace);
		cr_assert_eq(env.traceparent != NULL, cases[i].keeps_parent, "%s", cases[i].trace);
		cr_assert_str_eq(env.message_key, "k");
	}
	/* a second "trace" field: dropped too, not a rejection */
	const char *twice = "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,"
	                    "\"forward\":{\"topic\":\"t\"},\"trace\":{},\"trace\":{}}";
	cr_assert_eq(parse_value(twice), 0, "%s", err);
	cr_assert_str_eq(env.trace_dropped, "trace");
}

/* A later version keeps what follows its flags, and that goes into the
 * check-back request's and the forwarded record's headers as it is: only
 * printable ASCII that does not end with a space (issue 30, item 4). */
Test(trace, a_later_version_is_printable_ascii_after_its_flags)
{
	const char *head = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	const char *ok[] = {"", "-", "-what the future holds", "-a~b!c\"d\\e"};
	const char *bad[] = {
		"-\r\nX-Evil: injected",
		"-\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n",
		"-a\nb", "-a\rb", "-a\tb", "-\x01", "-\x7f", "-caf\xc3\xa9", "-\xff", "-ends with a space ",
	};
	char s[600];
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		snprintf(s, sizeof s, "%s%s", head, ok[i]);
		cr_assert_null(txhubi_trace_check_parent(s), "refused %s: %s", s, txhubi_trace_check_parent(s));
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(s, sizeof s, "%s%s", head, bad[i]);
		const char *why = txhubi_trace_check_parent(s);
		cr_assert_not_null(why, "accepted %s", s);
		cr_assert(strstr(why, "printable ASCII") || strstr(why, "space"), "%s", why);
	}
	/* version 00 is exactly 55 characters, whatever follows */
	cr_assert_not_null(txhubi_trace_check_parent(TP "\r\nX-Evil: injected"));
	/* tracestate: nothing outside its grammar either */
	const char *bad_state[] = {"rojo=1\r\nX-Evil: injected", "rojo=1\n", "rojo=a\rb",
	                           "rojo=\x01", "rojo=\x7f", "ro\tjo=1", "rojo=1,\r\n"};
	for (size_t i = 0; i < sizeof bad_state / sizeof bad_state[0]; i++)
		cr_assert_not_null(txhubi_trace_check_state(bad_state[i]), "accepted %s", bad_state[i]);
}

Test(trace, the_trace_id_of_an_invalid_traceparent_is_empty)
{
	char tid[TRACE_ID_LEN + 1];
	txhubi_trace_id_of(TP, tid);
	cr_assert_str_eq(tid, "4bf92f3577b34da6a3ce929d0e0e4736");
	txhubi_trace_id_of("x", tid); /* a row written by hand: no read past its end */
	cr_assert_str_eq(tid, "");
	txhubi_trace_id_of("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\r\n", tid);
	cr_assert_str_eq(tid, "");
}

/* The header injection of issue 30 through an envelope: the trace is
 * dropped, the message kept. */
Test(trace, envelope_drops_a_trace_that_would_inject_a_header)
{
	const char *cases[] = {
		"{\"traceparent\":\"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\\r\\n"
		"X-Evil: injected\",\"tracestate\":\"rojo=1\"}",
		"{\"traceparent\":\"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\\r\\n\\r\\n"
		"GET /smuggled HTTP/1.1\\r\\nHost: x\\r\\n\"}",
		"{\"traceparent\":\"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-caf\\u00e9\"}",
		"{\"traceparent\":\"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\\u0001\"}",
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cr_assert_eq(parse(cases[i]), 0, "%s rejected: %s", cases[i], err);
		cr_assert_str_eq(env.trace_dropped, "traceparent", "%s", cases[i]);
		cr_assert_null(env.traceparent);
		cr_assert_null(env.tracestate);
		cr_assert_str_eq(env.trace_id, "");
		cr_assert_str_eq(env.message_key, "k");
	}
	cr_assert_eq(parse("{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\\r\\nX-Evil: 1\"}"), 0);
	cr_assert_str_eq(env.trace_dropped, "tracestate");
	cr_assert_str_eq(env.traceparent, TP);
	cr_assert_null(env.tracestate);
}

/* \u0000 in a trace is never a rejection (issue 30, item 8; the cases that
 * drop a part are in the table above): where the hub does not look, and
 * where it is no NUL at all. */
Test(trace, envelope_keeps_a_message_with_u0000_in_its_trace)
{
	/* in a member the hub does not read: cut short harmlessly, kept */
	cr_assert_eq(parse("{\"traceparent\":\"" TP "\",\"note\":\"a\\u0000b\"}"), 0, "%s", err);
	cr_assert_null(env.trace_dropped);
	cr_assert_str_eq(env.traceparent, TP);
	/* an escaped backslash before u0000 is no NUL: a valid tracestate */
	cr_assert_eq(parse("{\"traceparent\":\"" TP "\",\"tracestate\":\"k=\\\\u0000\"}"), 0, "%s",
	             err);
	cr_assert_null(env.trace_dropped);
	cr_assert_str_eq(env.tracestate, "k=\\u0000");
	/* two trace fields, both with \u0000: dropped as twice */
	const char *twice = "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,"
	                    "\"forward\":{\"topic\":\"t\"},\"trace\":{\"traceparent\":\"\\u0000\"},"
	                    "\"trace\":\"\\u0000\"}";
	cr_assert_eq(parse_value(twice), 0, "%s", err);
	cr_assert_str_eq(env.trace_dropped, "trace");
}

/* Outside the trace context \u0000 is still a rejection: anywhere else,
 * and in a name that cJSON would read as "trace". */
Test(trace, u0000_outside_the_trace_is_still_rejected)
{
	const char *bad[] = {
		"{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\\u0000\",\"payload\":1,"
		"\"forward\":{\"topic\":\"t\"},\"trace\":{\"traceparent\":\"" TP "\"}}",
		"{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,"
		"\"forward\":{\"topic\":\"t\"},\"trace\\u0000\":{\"traceparent\":\"\\u0000\"}}",
		"{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":\"\\u0000\","
		"\"forward\":{\"topic\":\"t\"},\"trace\":{\"traceparent\":\"\\u0000\"}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(parse_value(bad[i]), -1, "accepted %s", bad[i]);
		cr_assert(strstr(err, "\\u0000"), "%s", err);
	}
}
