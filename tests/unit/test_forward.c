/* Unit tests for forward_describe_failure (the reason a failed forward
 * leaves in last_error, the alert and the log) and forward_make_headers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "forward.h"
#include "forward_record.h"

static char topic[FORWARD_TOPIC_MAX + 1];

static void setup(void)
{
	/* the longest topic name, ending in a marker a cut would lose */
	memset(topic, 'a', FORWARD_TOPIC_MAX);
	memcpy(topic + FORWARD_TOPIC_MAX - 4, ".end", 4);
	topic[FORWARD_TOPIC_MAX] = '\0';
}

TestSuite(forward, .init = setup);

static int printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return 0;
	return 1;
}

Test(forward, every_error_fits_whole_with_the_longest_topic_name)
{
	const struct rd_kafka_err_desc *d;
	size_t n;
	rd_kafka_get_err_descs(&d, &n);
	cr_assert_gt(n, 100);
	for (size_t i = 0; i < n; i++) {
		if (!d[i].desc)
			continue;
		for (int refused = 0; refused <= 1; refused++) {
			char buf[FORWARD_ERROR_MAX];
			forward_describe_failure(buf, sizeof buf, topic, refused, d[i].code);
			size_t len = strlen(buf);
			cr_assert_lt(len, sizeof buf - 1, "%s may have been cut: %s", d[i].name, buf);
			cr_assert(strstr(buf, topic), "%s: the topic name is cut: %s", d[i].name, buf);
			cr_assert(strstr(buf, rd_kafka_err2str(d[i].code)), "%s: reason cut: %s",
			          d[i].name, buf);
			cr_assert(printable(buf), "%s: not printable ASCII: %s", d[i].name, buf);
		}
	}
}

Test(forward, an_unknown_topic_is_named_as_such)
{
	char buf[FORWARD_ERROR_MAX];
	forward_describe_failure(buf, sizeof buf, "orders", 0, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
	cr_assert_str_eq(buf, "delivery to orders failed: the broker has no such topic "
	                      "(Broker: Unknown topic or partition)");
	forward_describe_failure(buf, sizeof buf, "orders", 1, RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC);
	cr_assert_str_eq(buf, "produce to orders refused: the broker has no such topic "
	                      "(Local: Unknown topic)");
	forward_describe_failure(buf, sizeof buf, "orders", 0, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
	cr_assert(strstr(buf, "Broker: Message size too large") && strstr(buf, "max.message.bytes"),
	          "%s", buf);
	forward_describe_failure(buf, sizeof buf, "orders", 0,
	                         RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
	cr_assert_str_eq(buf, "delivery to orders failed: Broker: Topic authorization failed");
}

Test(forward, an_unprintable_topic_is_escaped)
{
	char buf[FORWARD_ERROR_MAX];
	forward_describe_failure(buf, sizeof buf, "a\nb\xc2\x85", 0, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
	cr_assert_str_eq(buf, "delivery to a\\x0ab\\xc2\\x85 failed: Local: Message timed out");
}

/* The value of header name in h, or NULL. */
static const char *header_of(rd_kafka_headers_t *h, const char *name, char *buf, size_t size)
{
	const void *v;
	size_t len;
	if (rd_kafka_header_get_last(h, name, &v, &len) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return NULL;
	snprintf(buf, size, "%.*s", (int)len, (const char *)v);
	return buf;
}

/* A trace context stored by an older hub (or written by hand) that is not
 * valid W3C is left out of the record's headers (issue 30, item 4); a
 * valid one replaces the producer's headers of those names. */
Test(forward, a_stored_trace_context_goes_out_only_when_valid)
{
	char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	char evil[] = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\r\nX-Evil: 1";
	char state[] = "rojo=1", evil_state[] = "rojo=1\r\nX-Evil: 1";
	char hdrs[] = "{\"traceparent\":\"mine\",\"h\":\"v\"}";
	char b[] = "b", k[] = "k", buf[256];
	store_forward f = {.biz_id = b, .message_key = k, .headers = hdrs};

	f.traceparent = tp;
	f.tracestate = state;
	rd_kafka_headers_t *h = forward_make_headers(&f);
	cr_assert_str_eq(header_of(h, "traceparent", buf, sizeof buf), tp);
	cr_assert_str_eq(header_of(h, "tracestate", buf, sizeof buf), state);
	cr_assert_eq(rd_kafka_header_cnt(h), 5); /* h, the ids, the trace context */
	rd_kafka_headers_destroy(h);

	f.tracestate = evil_state; /* the traceparent stays */
	h = forward_make_headers(&f);
	cr_assert_str_eq(header_of(h, "traceparent", buf, sizeof buf), tp);
	cr_assert_null(header_of(h, "tracestate", buf, sizeof buf));
	rd_kafka_headers_destroy(h);

	f.traceparent = evil; /* neither goes; the producer's own header does */
	f.tracestate = state;
	h = forward_make_headers(&f);
	cr_assert_str_eq(header_of(h, "traceparent", buf, sizeof buf), "mine");
	cr_assert_null(header_of(h, "tracestate", buf, sizeof buf));
	cr_assert_str_eq(header_of(h, "txhub-message-key", buf, sizeof buf), "k");
	rd_kafka_headers_destroy(h);
}
