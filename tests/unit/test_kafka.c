/* Unit tests for kafka.c's limits: the forward producer's message.max.bytes
 * derived from envelope.max_bytes, and kafka.* settings that disagree with
 * it refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "kafka.h"

static txhub_config cfg;
static char err[1024];

static void setup(void)
{
	err[0] = '\0';
	cr_assert_eq(config_init(&cfg), 0);
}

static void teardown(void) { config_free(&cfg); }

TestSuite(kafka, .init = setup, .fini = teardown);

static void set(const char *key, const char *value)
{
	cr_assert_eq(config_set(&cfg, key, value, err, sizeof err), 0, "%s", err);
}

/* kafka_check_limits as main.c calls it, on a conf built without defaults. */
static int check(void)
{
	rd_kafka_conf_t *probe = kafka_conf_new(&cfg, NULL, err, sizeof err);
	cr_assert_not_null(probe, "%s", err);
	int rc = kafka_check_limits(&cfg, probe, err, sizeof err);
	rd_kafka_conf_destroy(probe);
	return rc;
}

Test(kafka, the_forward_limit_is_derived_from_envelope_max_bytes)
{
	cr_assert_eq(kafka_forward_max_bytes(&cfg), 1048576 + KAFKA_RECORD_ROOM);
	set("envelope.max_bytes", "104857600");
	cr_assert_eq(kafka_forward_max_bytes(&cfg), 104857600 + KAFKA_RECORD_ROOM);
	cr_assert_eq(kafka_receive_min_bytes(&cfg), 104857600 + KAFKA_FETCH_ROOM);
	cr_assert_eq(check(), 0, "%s", err);
}

Test(kafka, unset_and_large_enough_settings_pass)
{
	cr_assert_eq(check(), 0, "%s", err);
	set("kafka.message.max.bytes", "1049600");
	set("kafka.receive.message.max.bytes", "1114112");
	cr_assert_eq(check(), 0, "%s", err);
	set("envelope.max_bytes", "900000");
	set("kafka.message.max.bytes", "1000000");
	cr_assert_eq(check(), 0, "%s", err);
}

Test(kafka, a_message_max_bytes_too_small_is_refused_naming_both_keys)
{
	set("kafka.message.max.bytes", "1049599");
	cr_assert_eq(check(), -1);
	cr_assert(strstr(err, "kafka.message.max.bytes") && strstr(err, "envelope.max_bytes") &&
	          strstr(err, "1049600"), "%s", err);
}

Test(kafka, a_receive_message_max_bytes_too_small_is_refused_naming_both_keys)
{
	set("kafka.receive.message.max.bytes", "1114111");
	cr_assert_eq(check(), -1);
	cr_assert(strstr(err, "kafka.receive.message.max.bytes") && strstr(err, "envelope.max_bytes"),
	          "%s", err);
}

/* The consumer never jumps to another offset on its own (intake decides
 * and says so): kafka.auto.offset.reset may only be error. */
Test(kafka, an_auto_offset_reset_other_than_error_is_refused)
{
	static const char *const refused[] = {"earliest", "latest", "smallest", "beginning", "end"};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		set("kafka.auto.offset.reset", refused[i]);
		cr_assert_eq(check(), -1, "%s passed", refused[i]);
		cr_assert(strstr(err, "kafka.auto.offset.reset") && strstr(err, refused[i]), "%s", err);
	}
	set("kafka.auto.offset.reset", "error");
	cr_assert_eq(check(), 0, "%s", err);
}

Test(kafka, kafka_setting_finds_only_what_the_user_set)
{
	cr_assert_null(kafka_setting(&cfg, "message.max.bytes"));
	set("kafka.message.max.bytes", "2000000");
	cr_assert_str_eq(kafka_setting(&cfg, "message.max.bytes"), "2000000");
	cr_assert_null(kafka_setting(&cfg, "max.bytes"));
}

Test(kafka, the_consumer_receive_limit_is_raised_only_when_needed)
{
	cr_assert_eq(kafka_consumer_receive_bytes(&cfg), 0, "librdkafka's default fits 1 MiB");
	set("envelope.max_bytes", "104857600");
	cr_assert_eq(kafka_consumer_receive_bytes(&cfg), 104857600 + KAFKA_FETCH_ROOM);
	/* librdkafka wants at least fetch.max.bytes + 512 */
	set("kafka.fetch.max.bytes", "200000000");
	cr_assert_eq(kafka_consumer_receive_bytes(&cfg), 200000512);
	/* the user's own receive.message.max.bytes is left alone */
	set("kafka.receive.message.max.bytes", "300000000");
	cr_assert_eq(kafka_consumer_receive_bytes(&cfg), 0);
}

/* A consumer made as intake makes it (the derived fetch.max.bytes and
 * receive.message.max.bytes, then the kafka.* keys): librdkafka takes it,
 * and reads back fetch.max.bytes into out. */
static int consumer_accepted(char *out, size_t outsz)
{
	char fetch[24], receive[24];
	int64_t f = kafka_consumer_fetch_bytes(&cfg), r = kafka_consumer_receive_bytes(&cfg);
	snprintf(fetch, sizeof fetch, "%lld", (long long)f);
	snprintf(receive, sizeof receive, "%lld", (long long)r);
	const char *defaults[] = {f > 0 ? "fetch.max.bytes" : "client.id", f > 0 ? fetch : "t",
	                          r > 0 ? "receive.message.max.bytes" : "client.id",
	                          r > 0 ? receive : "t", "group.id", "t", NULL};
	rd_kafka_conf_t *conf = kafka_conf_new(&cfg, defaults, err, sizeof err);
	cr_assert_not_null(conf, "%s", err);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
	if (!rk) {
		rd_kafka_conf_destroy(conf);
		return 0;
	}
	size_t n = outsz;
	cr_assert_eq(rd_kafka_conf_get(rd_kafka_conf(rk), "fetch.max.bytes", out, &n),
	             RD_KAFKA_CONF_OK);
	rd_kafka_destroy(rk);
	return 1;
}

Test(kafka, the_consumer_fetches_2_mib_a_response_unless_an_envelope_needs_more)
{
	char v[32];
	cr_assert_eq(kafka_consumer_fetch_bytes(&cfg), KAFKA_FETCH_DEFAULT);
	cr_assert(consumer_accepted(v, sizeof v), "%s", err);
	cr_assert_str_eq(v, "2097152");
	set("envelope.max_bytes", "10485760");
	cr_assert_eq(kafka_consumer_fetch_bytes(&cfg), 10485760 + KAFKA_FETCH_ROOM - 512);
	cr_assert(consumer_accepted(v, sizeof v), "%s", err);
	set("envelope.max_bytes", "104857600"); /* above librdkafka's receive limit */
	cr_assert_eq(kafka_consumer_fetch_bytes(&cfg), 104857600 + KAFKA_FETCH_ROOM - 512);
	cr_assert(consumer_accepted(v, sizeof v), "%s", err);
}

Test(kafka, the_consumer_fetch_limit_bends_to_the_users_keys)
{
	char v[32];
	/* librdkafka wants fetch.max.bytes >= message.max.bytes ... */
	set("kafka.message.max.bytes", "5000000");
	cr_assert_eq(kafka_consumer_fetch_bytes(&cfg), 5000000);
	cr_assert(consumer_accepted(v, sizeof v), "%s", err);
	/* ... and <= receive.message.max.bytes - 512 */
	set("kafka.message.max.bytes", "1000000");
	set("kafka.receive.message.max.bytes", "1500000");
	cr_assert_eq(kafka_consumer_fetch_bytes(&cfg), 1500000 - 512);
	cr_assert(consumer_accepted(v, sizeof v), "%s", err);
	/* the user's own fetch.max.bytes stands */
	set("kafka.fetch.max.bytes", "1200000");
	cr_assert_eq(kafka_consumer_fetch_bytes(&cfg), 0);
	cr_assert(consumer_accepted(v, sizeof v), "%s", err);
	cr_assert_str_eq(v, "1200000");
}

Test(kafka, the_producers_queue_holds_16_mib_or_two_of_the_largest_forwards)
{
	cr_assert_eq(kafka_producer_queue_kbytes(&cfg), 16384);
	set("envelope.max_bytes", "104857600");
	cr_assert_eq(kafka_producer_queue_kbytes(&cfg), (2 * (104857600 + KAFKA_RECORD_ROOM)) / 1024);
	cr_assert_eq(check(), 0, "%s", err);
	set("kafka.queue.buffering.max.kbytes", "4096");
	cr_assert_eq(kafka_producer_queue_kbytes(&cfg), 0, "the user's stands");
}

Test(kafka, a_producer_queue_too_small_for_the_largest_forward_is_refused)
{
	set("kafka.queue.buffering.max.kbytes", "1025"); /* 1,049,600 bytes fit */
	cr_assert_eq(check(), 0, "%s", err);
	set("kafka.queue.buffering.max.kbytes", "1024");
	cr_assert_eq(check(), -1);
	cr_assert(strstr(err, "kafka.queue.buffering.max.kbytes") && strstr(err, "envelope.max_bytes"),
	          "%s", err);
}
