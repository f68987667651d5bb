/* test_traceinject.c: a trace context as an attacker writes it (issue 30,
 * items 4 and 8), end to end against a real PostgreSQL and broker. The
 * check-back endpoint is a raw socket (rawhttp.h) that keeps the exact
 * bytes the hub sent: no injected header line, no second request, nothing
 * outside printable ASCII but the CRLFs that end the lines. The forwarded
 * records and the dead letters, read back from Kafka, carry no such header
 * either. A malformed trace is dropped and counted, the message stored and
 * forwarded, \u0000 in it too; a row written by hand (or by an older hub)
 * with such a value goes out without it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"
#include "httpd.h"
#include "rawhttp.h"
#include "trace_common.h"

#define WAIT_MS 30000
#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP "00-" TID "-00f067aa0ba902b7-01"
#define TP1 "01-" TID "-00f067aa0ba902b7-01" /* a later version: may go on after a '-' */

/* What each message sends and what of its trace must reach the headers:
 * the traceparent and tracestate expected, or NULL for none; and the path
 * of its check-back URL (NULL: /cb). */
static const struct {
	const char *mk, *trace, *tp, *ts, *path;
} cases[] = {
	{"inj-1", "{\"traceparent\":\"" TP1 "-\\r\\nX-Evil: injected\",\"tracestate\":\"rojo=1\"}",
	 NULL, NULL, NULL},
	{"inj-2", "{\"traceparent\":\"" TP1 "-\\r\\n\\r\\nGET /smuggled HTTP/1.1\\r\\nHost: x\\r\\n\"}",
	 NULL, NULL, NULL},
	{"inj-3", "{\"traceparent\":\"" TP1 "-caf\\u00e9\\u0085\"}", NULL, NULL, NULL},
	{"inj-4", "{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\\r\\nX-Evil: state\"}", TP,
	 NULL, NULL},
	/* \u0000: cJSON would cut these to a valid TP and "rojo=1" */
	{"nul-1", "{\"traceparent\":\"" TP "\\u0000\\r\\nX-Evil: nul\",\"tracestate\":\"rojo=1\"}",
	 NULL, NULL, NULL},
	{"nul-2", "{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\\u0000\\r\\nX-Evil: nul\"}",
	 TP, NULL, NULL},
	{"ok-1", "{\"traceparent\":\"" TP1 "-what-comes-next\",\"tracestate\":\"rojo=1\"}",
	 TP1 "-what-comes-next", "rojo=1", NULL},
	/* the URL's own parts: a CRLF percent-encoded stays encoded */
	{"url-1", "{\"traceparent\":\"" TP "\"}", TP, NULL, "/cb%0d%0aX-Evil:%20url?q=%0D%0A"},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* Whether s[0..len) is printable ASCII but for CRLF pairs. */
static int printable_lines(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\r' && i + 1 < len && s[i + 1] == '\n')
			i++;
		else if (c < 0x20 || c > 0x7e)
			return 0;
	}
	return 1;
}

static size_t occurrences(const char *s, const char *needle)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The value of header line name in the request head (case-insensitive
 * name), into out; NULL when there is none. */
static const char *request_header(const char *head, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
			const char *v = p + 3 + nl, *end = strstr(v, "\r\n");
			while (*v == ' ')
				v++;
			snprintf(out, size, "%.*s", (int)(end - v), v);
			return out;
		}
	}
	return NULL;
}

/* One check-back request as the raw server received it: exactly one
 * request, nothing after its head, no injected line, no raw byte. (Here
 * and below cr_expect: every way a run fails is reported, not the first.) */
static void assert_one_clean_request(const h_raw_conn *c, const char *what)
{
	cr_expect(!c->truncated, "%s: more than the buffer", what);
	cr_expect(printable_lines(c->data, c->len), "%s: a raw control or non-ASCII byte in %s",
	          what, c->data);
	cr_expect_eq(occurrences(c->data, " HTTP/1.1\r\n"), 1, "%s: not one request: %s", what,
	             c->data);
	const char *end = strstr(c->data, "\r\n\r\n");
	cr_expect(end && (size_t)(end + 4 - c->data) == c->len, "%s: bytes after the head: %s", what,
	          c->data);
	char v[64];
	cr_expect_null(request_header(c->data, "X-Evil", v, sizeof v), "%s: injected: %s", what,
	               c->data);
	cr_expect_null(strstr(c->data, "smuggled"), "%s: %s", what, c->data);
}

/* The connection whose request is about message_key mk, or NULL. */
static const h_raw_conn *conn_of(const h_raw_conn *c, size_t n, const char *mk)
{
	char want[64];
	snprintf(want, sizeof want, "&message_key=%s&", mk);
	for (size_t i = 0; i < n; i++)
		if (strstr(c[i].data, want))
			return &c[i];
	return NULL;
}

/* A record's headers ("name=value\n" lines) hold tp and ts as expected
 * (NULL: no such header) and nothing injected or unprintable. */
static void assert_record_headers(const h_record *r, const char *mk, const char *tp,
                                  const char *ts)
{
	cr_expect_not_null(r, "%s: no record", mk);
	if (!r)
		return;
	const char *h = r->headers;
	int raw = 0;
	for (const char *p = h; *p; p++)
		raw |= *p != '\n' && ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e);
	cr_expect(!raw, "%s: a raw byte in its headers: %s", mk, h);
	cr_expect_null(strstr(h, "X-Evil"), "%s: %s", mk, h);
	char want[256];
	snprintf(want, sizeof want, "traceparent=%s\n", tp ? tp : "");
	cr_expect_eq(strstr(h, tp ? want : "traceparent=") != NULL, tp != NULL, "%s: %s", mk, h);
	snprintf(want, sizeof want, "tracestate=%s\n", ts ? ts : "");
	cr_expect_eq(strstr(h, ts ? want : "tracestate=") != NULL, ts != NULL, "%s: %s", mk, h);
}

/* A prepared message's stored trace, replaced by hand with values no hub
 * accepts (an older hub's row, or a role's UPDATE). */
static void spoil_trace(h_env *e, const char *mk, const char *then)
{
	char sql[768];
	snprintf(sql, sizeof sql,
	         "UPDATE txhub.message_rows SET traceparent = E'" TP1 "-\\r\\nX-Evil: stored', "
	         "tracestate = E'rojo=1\\r\\nX-Evil: stored'%s WHERE message_key = '%s'", then, mk);
	h_exec(e->db, sql);
}

Test(traceinject, no_trace_context_puts_a_header_into_a_request_or_a_record, .timeout = 240)
{
	h_env e;
	h_setup(&e, "tinject");
	char dlq[128], dlqset[160], listen[64], fwd[128], buf[4096];
	snprintf(dlq, sizeof dlq, "dlq.%s", e.name);
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=%s", dlq);
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	const char *deny[] = {"--deny-topic", "denied", NULL};
	pid_t broker = h_devbroker_start(&e, deny, NULL);
	h_raw_server *srv = h_raw_server_start("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	                                       "Content-Length: 9\r\nConnection: close\r\n\r\n"
	                                       "committed");
	cr_assert_not_null(srv);
	int port = h_free_port(), cb = h_raw_server_port(srv);
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	const char *settings[] = {"kafka.message.timeout.ms=1000", "forward.backoff_ms=100",
	                          "forward.backoff_max_ms=200", "forward.max_attempts=2", dlqset,
	                          listen, NULL};
	pid_t hub = h_hub_start(&e, settings);

	for (size_t i = 0; i < NCASES; i++) {
		snprintf(buf, sizeof buf,
		         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"%s\","
		         "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"},\"checkback\":{\"url\":"
		         "\"http://127.0.0.1:%d%s\",\"first_after_ms\":0},\"trace\":%s}",
		         cases[i].mk, fwd, cb, cases[i].path ? cases[i].path : "/cb", cases[i].trace);
		h_send_str(&e, -1, cases[i].mk, buf);
	}
	/* rows written by hand: a check-back and forward (old-1), a dead
	 * letter (old-2), each held back until its trace is spoiled */
	const char *late = "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"%s\","
	                   "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"},\"checkback\":{\"url\":"
	                   "\"http://127.0.0.1:%d/cb\",\"first_after_ms\":3600000},"
	                   "\"trace\":{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\"}}";
	snprintf(buf, sizeof buf, late, "old-1", fwd, cb);
	h_send_str(&e, -1, "old-1", buf);
	snprintf(buf, sizeof buf, late, "old-2", "denied", cb);
	h_send_str(&e, -1, "old-2", buf);
	/* and a dead letter whose trace was dropped at intake */
	h_send_str(&e, -1, "dl-1", "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"dl-1\","
	                           "\"payload\":\"x\",\"forward\":{\"topic\":\"denied\"},\"trace\":"
	                           "{\"traceparent\":\"" TP1 "-\\r\\nX-Evil: dl\"}}");
	h_flush();
	cr_assert(h_wait(&e, status_of("old-1"), "prepared/-", WAIT_MS));
	cr_assert(h_wait(&e, status_of("old-2"), "prepared/-", WAIT_MS));
	spoil_trace(&e, "old-1", ", next_check_at = now()");
	spoil_trace(&e, "old-2", "");
	h_send_str(&e, -1, "old-2", "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"old-2\"}");
	h_flush();

	/* every message is stored, checked back and forwarded: none rejected */
	for (size_t i = 0; i < NCASES; i++)
		cr_expect(h_wait(&e, status_of(cases[i].mk), "committed/sent", WAIT_MS), "%s: %s",
		          cases[i].mk, h_query(&e, status_of(cases[i].mk), buf, sizeof buf));
	cr_assert(h_wait(&e, status_of("old-1"), "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, status_of("dl-1"), "committed/failed", 60000));
	cr_assert(h_wait(&e, status_of("old-2"), "committed/failed", 60000));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE dead_lettered_at IS NOT NULL",
	                 "2", WAIT_MS));
	/* nothing the hub stored from an envelope holds a raw control byte */
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key NOT LIKE "
	                         "'old-%' AND (traceparent ~ '[^ -~]' OR tracestate ~ '[^ -~]')"), 0);

	/* the exact bytes of every check-back request */
	static h_raw_conn conns[16];
	size_t n = h_raw_server_conns(srv, conns, 16);
	cr_expect_eq(n, NCASES + 1, "%zu requests", n);
	char v[600];
	for (size_t i = 0; i < NCASES; i++) {
		const h_raw_conn *c = conn_of(conns, n, cases[i].mk);
		cr_expect_not_null(c, "no check-back of %s", cases[i].mk);
		if (!c)
			continue;
		assert_one_clean_request(c, cases[i].mk);
		if (cases[i].path) /* asked as written: still encoded */
			cr_expect(strncmp(c->data + 4, cases[i].path, strlen(cases[i].path)) == 0, "%s: %s",
			          cases[i].mk, c->data);
		const char *tp = request_header(c->data, "traceparent", v, sizeof v);
		cr_expect_eq(tp != NULL, cases[i].tp != NULL, "%s: %s", cases[i].mk, c->data);
		if (tp && cases[i].tp)
			cr_expect_str_eq(tp, cases[i].tp, "%s", cases[i].mk);
		const char *ts = request_header(c->data, "tracestate", v, sizeof v);
		cr_expect_eq(ts != NULL, cases[i].ts != NULL, "%s: %s", cases[i].mk, c->data);
		if (ts && cases[i].ts)
			cr_expect_str_eq(ts, cases[i].ts, "%s", cases[i].mk);
	}
	const h_raw_conn *old = conn_of(conns, n, "old-1");
	cr_expect_not_null(old, "no check-back of old-1");
	if (old) {
		assert_one_clean_request(old, "old-1");
		cr_expect_null(request_header(old->data, "traceparent", v, sizeof v), "%s", old->data);
		cr_expect_null(request_header(old->data, "tracestate", v, sizeof v), "%s", old->data);
	}

	/* the forwarded records and the dead letters, from Kafka */
	h_record *r;
	size_t nr = h_read_topic(&e, fwd, 1500, &r);
	cr_expect_eq(nr, NCASES + 1);
	for (size_t i = 0; i < NCASES; i++)
		assert_record_headers(record_of(r, nr, cases[i].mk), cases[i].mk, cases[i].tp,
		                      cases[i].ts);
	assert_record_headers(record_of(r, nr, "old-1"), "old-1", NULL, NULL);
	h_records_free(r, nr);
	nr = h_read_topic(&e, dlq, 1500, &r);
	cr_assert_eq(nr, 2);
	assert_record_headers(record_of(r, nr, "old-2"), "old-2", NULL, NULL);
	assert_record_headers(record_of(r, nr, "dl-1"), "dl-1", NULL, NULL);
	h_records_free(r, nr);

	/* dropped and counted by reason; the hand-written rows are logged */
	cr_expect_eq(dropped_count(port, "traceparent"), 5);
	cr_expect_eq(dropped_count(port, "tracestate"), 2);
	char logf[256];
	h_hub_log(logf, sizeof logf, &e);
	cr_expect_eq(h_log_lines(logf, "trace context dropped"), 7);
	cr_expect_geq(h_log_lines(logf, "the stored traceparent is not valid"), 3,
	              "the check-back of old-1, its forward, old-2's forwards and dead letter");

	cr_assert_eq(h_hub_stop(hub), 0);
	h_raw_server_stop(srv);
	h_teardown(&e);
	h_devbroker_stop(broker, NULL);
}
