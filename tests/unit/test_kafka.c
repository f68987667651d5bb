/* Unit tests for kafka.c's limits: the forward producer's message.max.bytes
 * derived from envelope.max_bytes, and kafka.* settings that disagree with
 * it refused. */
#include <criterion/criterion.h>
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
