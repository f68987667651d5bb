/* Unit tests for kafka.c's limits: the forward producer's message.max.bytes
 * derived from envelope.max_bytes, and kafka.* settings that disagree with
 * it refused; and the hint on a refused SCRAM login (librdkafka before
 * 2.6.1 against Apache Kafka 4.x). */
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

/* The decision behind the hint on a refused SCRAM login: librdkafka's
 * version, the mechanism and the error, nothing else. */
Test(kafka, a_refused_scram_login_on_a_librdkafka_before_2_6_1_names_the_fix)
{
	char hint[400];
	/* Debian 12's 2.0.2 and the last one before the fix */
	cr_assert_eq(kafka_scram_hint(0x020002ff, "SCRAM-SHA-512", RD_KAFKA_RESP_ERR__AUTHENTICATION,
	                              hint, sizeof hint), 1);
	cr_assert(strstr(hint, "SCRAM against Apache Kafka 4.x needs librdkafka 2.6.1 or later"),
	          "%s", hint);
	cr_assert(strstr(hint, "librdkafka #4895"), "%s", hint);
	cr_assert(strstr(hint, "this hub runs librdkafka 2.0.2"), "%s", hint);
	cr_assert_eq(kafka_scram_hint(0x020600ff, "scram-sha-256", RD_KAFKA_RESP_ERR__AUTHENTICATION,
	                              hint, sizeof hint), 1);
	cr_assert(strstr(hint, "this hub runs librdkafka 2.6.0"), "%s", hint);
	/* cut to fit, never overrun */
	char small[16];
	memset(small, 'x', sizeof small);
	cr_assert_eq(kafka_scram_hint(0x020002ff, "SCRAM-SHA-512", RD_KAFKA_RESP_ERR__AUTHENTICATION,
	                              small, 8), 1);
	cr_assert_eq(strlen(small), 7);
	cr_assert_eq(small[8], 'x');
}

Test(kafka, no_scram_hint_for_a_fixed_librdkafka_another_mechanism_or_another_error)
{
	char hint[400] = "left";
	/* 2.6.1 and later: a refusal is the password's */
	cr_assert_eq(kafka_scram_hint(0x020601ff, "SCRAM-SHA-512", RD_KAFKA_RESP_ERR__AUTHENTICATION,
	                              hint, sizeof hint), 0);
	cr_assert_str_empty(hint);
	cr_assert_eq(kafka_scram_hint(0x020f00ff, "SCRAM-SHA-256", RD_KAFKA_RESP_ERR__AUTHENTICATION,
	                              hint, sizeof hint), 0);
	/* PLAIN, GSSAPI, OAUTHBEARER: not the nonce bug */
	const char *others[] = {"PLAIN", "GSSAPI", "OAUTHBEARER", "", NULL};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
		cr_assert_eq(kafka_scram_hint(0x020002ff, others[i], RD_KAFKA_RESP_ERR__AUTHENTICATION,
		                              hint, sizeof hint), 0, "%s", others[i] ? others[i] : "NULL");
	/* other errors of a SCRAM client: TLS, brokers down, an ACL */
	const int errs[] = {RD_KAFKA_RESP_ERR__SSL, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
	                    RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
	                    RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED};
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		cr_assert_eq(kafka_scram_hint(0x020002ff, "SCRAM-SHA-512", errs[i], hint, sizeof hint), 0,
		             "%s", rd_kafka_err2name(errs[i]));
}

/* The line for the log and /readyz puts the hint first, for the client's
 * own sasl.mechanisms, when this process's librdkafka is before 2.6.1. */
Test(kafka, the_error_line_of_a_scram_client_carries_the_hint_on_an_old_librdkafka)
{
	set("kafka.security.protocol", "SASL_PLAINTEXT");
	set("kafka.sasl.mechanisms", "SCRAM-SHA-512");
	set("kafka.sasl.username", "u");
	set("kafka.sasl.password", "p");
	rd_kafka_t *rk = kafka_client_new(&cfg, RD_KAFKA_PRODUCER, NULL, NULL, err, sizeof err);
	cr_assert_not_null(rk, "%s", err);
	char line[1200];
	const char *reason = "SASL authentication error: Authentication failed";
	int hinted = kafka_describe_error(rk, RD_KAFKA_RESP_ERR__AUTHENTICATION, reason, line,
	                                  sizeof line);
	char version[64];
	snprintf(version, sizeof version, "this hub runs librdkafka %s", rd_kafka_version_str());
	if (rd_kafka_version() < KAFKA_SCRAM_FIXED_VERSION) {
		cr_assert_eq(hinted, 1);
		cr_assert(strncmp(line, "_AUTHENTICATION: SCRAM against Apache Kafka 4.x needs", 53) == 0,
		          "%s", line);
		cr_assert(strstr(line, version), "%s", line);
	} else {
		cr_assert_eq(hinted, 0);
		cr_assert_str_eq(line, "_AUTHENTICATION: SASL authentication error: Authentication failed");
	}
	cr_assert(strstr(line, reason), "%s", line);
	/* another error of the same client: its line as before */
	cr_assert_eq(kafka_describe_error(rk, RD_KAFKA_RESP_ERR__TRANSPORT, "down", line, sizeof line),
	             0);
	cr_assert_str_eq(line, "_TRANSPORT: down");
	rd_kafka_destroy(rk);
}

/* kafka.group.protocol = consumer (KIP-848): refused before librdkafka
 * 2.12, naming the version run; from 2.12 taken, without the keys the
 * broker owns under it. Any other protocol is librdkafka's to judge. */
Test(kafka, the_consumer_group_protocol_needs_2_12_and_leaves_the_broker_its_keys)
{
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020002ff, err, sizeof err), 0, "unset");
	set("kafka.group.protocol", "classic");
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020002ff, err, sizeof err), 0, "%s", err);
	set("kafka.group.protocol", "Consumer");
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020002ff, err, sizeof err), -1);
	cr_assert(strstr(err, "needs librdkafka 2.12 or later, and this hub runs librdkafka 2.0.2"),
	          "%s", err);
	/* 2.4 to 2.11 know the key (a preview) */
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020b01ff, err, sizeof err), -1);
	cr_assert(strstr(err, "runs librdkafka 2.11.1"), "%s", err);
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020c00ff, err, sizeof err), 0, "%s", err);
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020f00ff, err, sizeof err), 0, "%s", err);
	set("kafka.max.poll.interval.ms", "10000"); /* still the client's */
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020f00ff, err, sizeof err), 0, "%s", err);
	set("kafka.group.protocol.type", "consumer");
	cr_assert_eq(kafka_check_group_protocol(&cfg, 0x020f00ff, err, sizeof err), -1);
	cr_assert(strstr(err, "kafka.group.protocol.type: not with kafka.group.protocol = consumer"),
	          "%s", err);
}
