/* Unit tests for forward_describe_failure: the reason a failed forward
 * leaves in last_error, the alert and the log. */
#include <criterion/criterion.h>
#include <string.h>

#include "forward.h"

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
