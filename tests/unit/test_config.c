/* Unit tests for config: keys and defaults (docs/configuration.md:
 * Configuration), loaders, precedence, validation, example drift. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

static txhub_config cfg;
static char err[1024];
static char tmpfiles[8][64];
static int ntmp;

/* The environment variables the contract names; cleared before each test so
 * the caller's environment cannot leak in. */
static const char *env_vars[] = {"TXHUB_BROKERS", "TXHUB_PG", "TXHUB_CONTROL_TOPIC", "TXHUB_GROUP",
                                 "TXHUB_CHECKBACK_SECRET", "TXHUB_LOG_LEVEL",
                                 "TXHUB_CONSOLE_TOKEN", NULL};

static void setup(void)
{
	for (const char **e = env_vars; *e; e++)
		unsetenv(*e);
	err[0] = '\0';
	ntmp = 0;
	cr_assert_eq(config_init(&cfg), 0);
}

static void teardown(void)
{
	config_free(&cfg);
	for (int i = 0; i < ntmp; i++)
		unlink(tmpfiles[i]);
}

TestSuite(config, .init = setup, .fini = teardown);

/* Write text to a fresh temporary file; returns its path. */
static const char *temp_file(const char *text)
{
	cr_assert_lt(ntmp, 8);
	char *path = tmpfiles[ntmp++];
	snprintf(path, sizeof tmpfiles[0], "/tmp/txhub-config-test-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	size_t len = strlen(text);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static const config_option *option(const char *key)
{
	for (const config_option *o = config_options; o->key; o++)
		if (strcmp(o->key, key) == 0)
			return o;
	return NULL;
}

/* docs/configuration.md: Configuration: key, environment variable, default. */
static const struct {
	const char *key, *env, *def;
	config_type type;
} contract[] = {
	{"brokers", "TXHUB_BROKERS", "localhost:9092", CONFIG_STRING},
	{"pg", "TXHUB_PG", "", CONFIG_STRING},
	{"control_topic", "TXHUB_CONTROL_TOPIC", "txhub.control", CONFIG_STRING},
	{"group", "TXHUB_GROUP", "txhub", CONFIG_STRING},
	{"envelope.max_bytes", NULL, "1048576", CONFIG_INT},
	{"checkback.first_after_ms", NULL, "30000", CONFIG_INT},
	{"checkback.backoff_ms", NULL, "10000", CONFIG_INT},
	{"checkback.backoff_max_ms", NULL, "600000", CONFIG_INT},
	{"checkback.max_attempts", NULL, "15", CONFIG_INT},
	{"checkback.timeout_ms", NULL, "3000", CONFIG_INT},
	{"checkback.allow", NULL, "", CONFIG_STRING},
	{"checkback.default_url", NULL, "", CONFIG_STRING},
	{"checkback.secret", "TXHUB_CHECKBACK_SECRET", "", CONFIG_STRING},
	{"forward.backoff_ms", NULL, "1000", CONFIG_INT},
	{"forward.backoff_max_ms", NULL, "300000", CONFIG_INT},
	{"forward.max_attempts", NULL, "15", CONFIG_INT},
	{"forward.mode", NULL, "at_least_once", CONFIG_ENUM},
	{"alert.webhook", NULL, "", CONFIG_STRING},
	{"log.level", "TXHUB_LOG_LEVEL", "info", CONFIG_ENUM},
	{"retention.finished_hours", NULL, "168", CONFIG_INT},
	{"retention.rejected_hours", NULL, "720", CONFIG_INT},
	{"console.listen", NULL, "127.0.0.1:8080", CONFIG_STRING},
	{"console.token", "TXHUB_CONSOLE_TOKEN", "", CONFIG_STRING},
	{"console.open", NULL, "false", CONFIG_BOOL},
	{"checkback.per_host", NULL, "8", CONFIG_INT},
	{"tenants.enforce", NULL, "false", CONFIG_BOOL},
};
#define NCONTRACT (sizeof contract / sizeof contract[0])

Test(config, defaults_match_contract)
{
	cr_assert_str_eq(cfg.brokers, "localhost:9092");
	cr_assert_str_eq(cfg.pg, "");
	cr_assert_str_eq(cfg.control_topic, "txhub.control");
	cr_assert_str_eq(cfg.group, "txhub");
	cr_assert_eq(cfg.envelope_max_bytes, 1048576);
	cr_assert_eq(cfg.checkback_first_after_ms, 30000);
	cr_assert_eq(cfg.checkback_backoff_ms, 10000);
	cr_assert_eq(cfg.checkback_backoff_max_ms, 600000);
	cr_assert_eq(cfg.checkback_max_attempts, 15);
	cr_assert_eq(cfg.checkback_timeout_ms, 3000);
	cr_assert_eq(cfg.checkback_per_host, 8);
	cr_assert_str_eq(cfg.checkback_allow, "");
	cr_assert_str_eq(cfg.checkback_default_url, "");
	cr_assert_str_eq(cfg.checkback_secret, "");
	cr_assert_eq(cfg.forward_backoff_ms, 1000);
	cr_assert_eq(cfg.forward_backoff_max_ms, 300000);
	cr_assert_eq(cfg.forward_max_attempts, 15);
	cr_assert_str_eq(cfg.alert_webhook, "");
	cr_assert_eq(cfg.log_level, LOG_INFO);
	cr_assert_eq(cfg.kafka_cnt, 0);
	cr_assert_null(cfg.kafka);
}

Test(config, defaults_are_valid)
{
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

Test(config, every_contract_key_in_table)
{
	for (size_t i = 0; i < NCONTRACT; i++) {
		const config_option *o = option(contract[i].key);
		cr_assert_not_null(o, "contract key %s missing from config_options", contract[i].key);
		cr_assert_str_eq(o->def, contract[i].def, "default of %s", contract[i].key);
		cr_assert_eq(o->type, contract[i].type, "type of %s", contract[i].key);
		if (contract[i].env)
			cr_assert(o->env && strcmp(o->env, contract[i].env) == 0,
			          "%s: environment variable should be %s", o->key, contract[i].env);
		else
			cr_assert_null(o->env, "%s: no environment variable in the contract", o->key);
		cr_assert(o->doc && *o->doc, "%s has no documentation", o->key);
	}
}

Test(config, table_is_well_formed)
{
	int n = 0;
	for (const config_option *o = config_options; o->key; o++, n++) {
		cr_assert_eq(option(o->key), o, "duplicate key %s", o->key);
		cr_assert_neq(strncmp(o->key, "kafka.", 6), 0, "%s shadows the kafka. prefix", o->key);
		if (o->type == CONFIG_INT) {
			cr_assert_leq(o->min, o->max, "%s bounds", o->key);
			long long d = atoll(o->def);
			cr_assert(d >= o->min && d <= o->max, "%s default %s out of bounds", o->key, o->def);
		}
	}
	cr_assert_geq(n, (int)NCONTRACT);
}

Test(config, set_every_key_to_its_default_round_trips)
{
	for (const config_option *o = config_options; o->key; o++)
		cr_assert_eq(config_set(&cfg, o->key, o->def, err, sizeof err), 0, "%s: %s", o->key, err);
	txhub_config fresh;
	cr_assert_eq(config_init(&fresh), 0);
	cr_assert_str_eq(cfg.brokers, fresh.brokers);
	cr_assert_eq(cfg.checkback_max_attempts, fresh.checkback_max_attempts);
	cr_assert_eq(cfg.intake_batch_bytes, fresh.intake_batch_bytes);
	config_free(&fresh);
}

Test(config, set_string_and_int)
{
	cr_assert_eq(config_set(&cfg, "brokers", "k1:9092,k2:9092", err, sizeof err), 0);
	cr_assert_str_eq(cfg.brokers, "k1:9092,k2:9092");
	cr_assert_eq(config_set(&cfg, "checkback.max_attempts", "3", err, sizeof err), 0);
	cr_assert_eq(cfg.checkback_max_attempts, 3);
	cr_assert_eq(config_set(&cfg, "checkback.first_after_ms", "0", err, sizeof err), 0);
	cr_assert_eq(cfg.checkback_first_after_ms, 0);
	cr_assert_eq(config_set(&cfg, "pg", "host=db user=txhub", err, sizeof err), 0);
	cr_assert_str_eq(cfg.pg, "host=db user=txhub");
	cr_assert_eq(config_set(&cfg, "checkback.secret", "", err, sizeof err), 0);
	cr_assert_str_eq(cfg.checkback_secret, "");
}

Test(config, unknown_key_fails_naming_it)
{
	cr_assert_eq(config_set(&cfg, "checkback.retries", "3", err, sizeof err), -1);
	cr_assert(strstr(err, "checkback.retries"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "Brokers", "x", err, sizeof err), -1);
	cr_assert(strstr(err, "Brokers"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "", "x", err, sizeof err), -1);
	cr_assert_str_eq(cfg.brokers, "localhost:9092");
}

Test(config, non_integer_fails_naming_key)
{
	static const char *bad[] = {"", "abc", "12abc", "1e3", " 12", "12 ", "0x10", "1.5", "-",
	                            "99999999999999999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, "checkback.max_attempts", bad[i], err, sizeof err), -1,
		             "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "checkback.max_attempts"), "\"%s\": message %s", bad[i], err);
		cr_assert_eq(cfg.checkback_max_attempts, 15, "\"%s\" changed the value", bad[i]);
	}
}

Test(config, out_of_range_fails_naming_key)
{
	static const struct {
		const char *key, *value;
	} bad[] = {
		{"envelope.max_bytes", "63"},
		{"envelope.max_bytes", "104857601"},
		{"envelope.max_bytes", "-1"},
		{"checkback.max_attempts", "0"},
		{"checkback.max_attempts", "1001"},
		{"checkback.first_after_ms", "-1"},
		{"checkback.backoff_ms", "0"},
		{"forward.max_attempts", "-5"},
		{"checkback.timeout_ms", "9223372036854775807"},
		{"checkback.per_host", "0"},
		{"checkback.per_host", "10001"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, bad[i].key, bad[i].value, err, sizeof err), -1,
		             "%s=%s accepted", bad[i].key, bad[i].value);
		cr_assert(strstr(err, bad[i].key), "%s=%s: message %s", bad[i].key, bad[i].value, err);
		cr_assert(strstr(err, "range"), "%s=%s: message %s", bad[i].key, bad[i].value, err);
	}
	cr_assert_eq(cfg.envelope_max_bytes, 1048576);
}

Test(config, range_bounds_inclusive)
{
	cr_assert_eq(config_set(&cfg, "envelope.max_bytes", "64", err, sizeof err), 0, "%s", err);
	cr_assert_eq(cfg.envelope_max_bytes, 64);
	cr_assert_eq(config_set(&cfg, "envelope.max_bytes", "104857600", err, sizeof err), 0, "%s", err);
	cr_assert_eq(cfg.envelope_max_bytes, 104857600);
	cr_assert_eq(config_set(&cfg, "checkback.max_attempts", "1", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "checkback.max_attempts", "1000", err, sizeof err), 0);
	cr_assert_eq(cfg.checkback_max_attempts, 1000);
	cr_assert_eq(config_set(&cfg, "checkback.per_host", "1", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "checkback.per_host", "10000", err, sizeof err), 0);
	cr_assert_eq(cfg.checkback_per_host, 10000);
}

Test(config, kafka_keys_collected_in_order)
{
	cr_assert_eq(config_set(&cfg, "kafka.security.protocol", "SASL_SSL", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "kafka.sasl.mechanism", "PLAIN", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "kafka.client.id", "hub-1", err, sizeof err), 0);
	cr_assert_eq(cfg.kafka_cnt, 3);
	cr_assert_str_eq(cfg.kafka[0].key, "security.protocol");
	cr_assert_str_eq(cfg.kafka[0].value, "SASL_SSL");
	cr_assert_str_eq(cfg.kafka[1].key, "sasl.mechanism");
	cr_assert_str_eq(cfg.kafka[1].value, "PLAIN");
	cr_assert_str_eq(cfg.kafka[2].key, "client.id");
	cr_assert_str_eq(cfg.kafka[2].value, "hub-1");
}

Test(config, kafka_repeated_key_overrides)
{
	cr_assert_eq(config_set(&cfg, "kafka.client.id", "a", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "kafka.linger.ms", "5", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "kafka.client.id", "b", err, sizeof err), 0);
	cr_assert_eq(cfg.kafka_cnt, 2);
	cr_assert_str_eq(cfg.kafka[0].key, "client.id");
	cr_assert_str_eq(cfg.kafka[0].value, "b");
	cr_assert_str_eq(cfg.kafka[1].value, "5");
	cr_assert_eq(config_set(&cfg, "kafka.client.id", "", err, sizeof err), 0);
	cr_assert_str_eq(cfg.kafka[0].value, "");
	cr_assert_eq(cfg.kafka_cnt, 2);
}

Test(config, kafka_bad_property_name)
{
	cr_assert_eq(config_set(&cfg, "kafka.", "x", err, sizeof err), -1);
	cr_assert(strstr(err, "kafka."), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "kafka.bad key", "x", err, sizeof err), -1);
	cr_assert(strstr(err, "kafka.bad key"), "message: %s", err);
	cr_assert_eq(cfg.kafka_cnt, 0);
}

Test(config, load_file_key_value_and_comments)
{
	const char *path = temp_file("# a comment\n"
	                             "   # an indented comment\n"
	                             "\n"
	                             "brokers = b1:9092,b2:9092\n"
	                             "  group=g1  \n"
	                             "\t\n"
	                             "pg = host=db user=txhub password=a=b\n"
	                             "checkback.max_attempts = 7\n"
	                             "checkback.default_url =\n"
	                             "kafka.client.id = hub-a\n"
	                             "log.level = debug   \n"
	                             "# checkback.timeout_ms = 1\n");
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.brokers, "b1:9092,b2:9092");
	cr_assert_str_eq(cfg.group, "g1");
	cr_assert_str_eq(cfg.pg, "host=db user=txhub password=a=b");
	cr_assert_eq(cfg.checkback_max_attempts, 7);
	cr_assert_str_eq(cfg.checkback_default_url, "");
	cr_assert_eq(cfg.log_level, LOG_DEBUG);
	cr_assert_eq(cfg.checkback_timeout_ms, 3000, "a commented-out line was applied");
	cr_assert_str_eq(cfg.control_topic, "txhub.control");
	cr_assert_eq(cfg.kafka_cnt, 1);
	cr_assert_str_eq(cfg.kafka[0].key, "client.id");
	cr_assert_str_eq(cfg.kafka[0].value, "hub-a");
}

Test(config, load_file_crlf_and_no_final_newline)
{
	const char *path = temp_file("brokers = x:1\r\n# c\r\ngroup = g2");
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.brokers, "x:1");
	cr_assert_str_eq(cfg.group, "g2");
}

Test(config, load_file_later_line_wins)
{
	const char *path = temp_file("group = first\ngroup = second\n");
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.group, "second");
}

Test(config, load_file_line_without_equals)
{
	const char *path = temp_file("# ok\nbrokers = a:1\nthis is not a setting\ngroup = g\n");
	char want[128];
	snprintf(want, sizeof want, "%s:3:", path);
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), -1);
	cr_assert(strstr(err, want), "want \"%s\" in: %s", want, err);
}

Test(config, load_file_unknown_key_reports_line_and_key)
{
	const char *path = temp_file("\n\n\n\nnot.a.key = 1\n");
	char want[128];
	snprintf(want, sizeof want, "%s:5:", path);
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), -1);
	cr_assert(strstr(err, want), "want \"%s\" in: %s", want, err);
	cr_assert(strstr(err, "not.a.key"), "message: %s", err);
}

Test(config, load_file_bad_integer_reports_line_and_key)
{
	const char *path = temp_file("brokers = a:1\ncheckback.timeout_ms = soon\n");
	char want[128];
	snprintf(want, sizeof want, "%s:2:", path);
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), -1);
	cr_assert(strstr(err, want), "want \"%s\" in: %s", want, err);
	cr_assert(strstr(err, "checkback.timeout_ms"), "message: %s", err);
}

Test(config, load_file_missing)
{
	const char *path = "/nonexistent/txhub-test.conf";
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), -1);
	cr_assert(strstr(err, path), "message: %s", err);
}

/* A file of exactly these len bytes (NULs included). */
static const char *temp_bytes(const char *bytes, size_t len)
{
	cr_assert_lt(ntmp, 8);
	char *path = tmpfiles[ntmp++];
	snprintf(path, sizeof tmpfiles[0], "/tmp/txhub-config-test-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, bytes, len), (ssize_t)len);
	close(fd);
	return path;
}

/* The load fails with a message holding path (and want, when given), and
 * leaves what the file set before the bad line out of the question: the
 * caller's configuration is not to be used. */
static void must_refuse(const char *path, const char *want)
{
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), -1, "%s loaded", path);
	cr_assert(strstr(err, path), "the message names no file: %s", err);
	if (want)
		cr_assert(strstr(err, want), "want \"%s\" in: %s", want, err);
}

Test(config, load_file_directory_is_an_error)
{
	/* fopen opens a directory and reads it as empty: every key would
	 * silently take its default */
	char dir[] = "/tmp/txhub-config-dir-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	must_refuse(dir, "is a directory");
	rmdir(dir);
}

Test(config, load_file_line_of_nuls_is_an_error)
{
	static const char bytes[] = "group = g\n\0\0\0\0\nbrokers = b:1\n";
	const char *path = temp_bytes(bytes, sizeof bytes - 1);
	char want[128];
	snprintf(want, sizeof want, "%s:2: NUL byte", path);
	must_refuse(path, want);
}

Test(config, load_file_nul_inside_a_value_is_an_error)
{
	/* was read as "group = g" with the rest cut off */
	static const char bytes[] = "brokers = b:1\ngroup = g\0roup-b\n";
	const char *path = temp_bytes(bytes, sizeof bytes - 1);
	char want[128];
	snprintf(want, sizeof want, "%s:2: NUL byte", path);
	must_refuse(path, want);
	cr_assert_str_neq(cfg.group, "g", "the cut value was applied");
}

Test(config, load_file_read_error_is_not_the_end)
{
	/* a regular file whose first read fails (EIO: nothing is mapped at
	 * address 0): it was taken for an empty file */
	must_refuse("/proc/self/mem", "read error");
}

Test(config, load_file_long_lines)
{
	char *text = malloc(9000);
	cr_assert_not_null(text);
	/* a value of 8,000 bytes is fine */
	int n = snprintf(text, 9000, "pg = ");
	memset(text + n, 'a', 8000);
	strcpy(text + n + 8000, "\n");
	cr_assert_eq(config_load_file(&cfg, temp_file(text), err, sizeof err), 0, "%s", err);
	cr_assert_eq(strlen(cfg.pg), 8000);
	/* one over the limit is refused, naming the line */
	memset(text + n, 'a', 8500);
	strcpy(text + n + 8500, "\n");
	const char *path = temp_file(text);
	free(text);
	must_refuse(path, ":1: line too long");
}

Test(config, load_env)
{
	setenv("TXHUB_BROKERS", "env:9092", 1);
	setenv("TXHUB_PG", "dbname=env", 1);
	setenv("TXHUB_CONTROL_TOPIC", "env.control", 1);
	setenv("TXHUB_GROUP", "env-group", 1);
	setenv("TXHUB_CHECKBACK_SECRET", "s3cret", 1);
	setenv("TXHUB_LOG_LEVEL", "warn", 1);
	cr_assert_eq(config_load_env(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.brokers, "env:9092");
	cr_assert_str_eq(cfg.pg, "dbname=env");
	cr_assert_str_eq(cfg.control_topic, "env.control");
	cr_assert_str_eq(cfg.group, "env-group");
	cr_assert_str_eq(cfg.checkback_secret, "s3cret");
	cr_assert_eq(cfg.log_level, LOG_WARN);
}

Test(config, load_env_unset_leaves_defaults)
{
	setenv("TXHUB_GROUP", "only-this", 1);
	cr_assert_eq(config_load_env(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.group, "only-this");
	cr_assert_str_eq(cfg.brokers, "localhost:9092");
	cr_assert_eq(cfg.log_level, LOG_INFO);
}

Test(config, load_env_empty_value_applies)
{
	setenv("TXHUB_BROKERS", "", 1);
	cr_assert_eq(config_load_env(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.brokers, "");
	/* and the empty value is then caught by validation, naming the key */
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "brokers"), "message: %s", err);
}

Test(config, precedence_file_env_set)
{
	const char *path = temp_file("brokers = file:1\n"
	                             "group = file-group\n"
	                             "control_topic = file.control\n"
	                             "log.level = debug\n");
	setenv("TXHUB_BROKERS", "env:1", 1);
	setenv("TXHUB_GROUP", "env-group", 1);
	setenv("TXHUB_LOG_LEVEL", "warn", 1);
	/* the order main.c applies them in */
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_load_env(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&cfg, "brokers", "cli:1", err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.brokers, "cli:1");               /* -X beats env and file */
	cr_assert_str_eq(cfg.group, "env-group");             /* env beats file */
	cr_assert_eq(cfg.log_level, LOG_WARN);              /* env beats file */
	cr_assert_str_eq(cfg.control_topic, "file.control");  /* file beats default */
	cr_assert_str_eq(cfg.pg, "");                         /* default stays */
}

Test(config, validate_log_level)
{
	static const char *good[] = {"debug", "info", "warn", "error"};
	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(config_set(&cfg, "log.level", good[i], err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s: %s", good[i], err);
	}
	static const char *bad[] = {"verbose", "", "INFO ", "trace"};
	for (size_t i = 0; i < 4; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, "log.level", bad[i], err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "log.level"), "message: %s", err);
	}
}

/* delayed delivery (docs/consumers.md: Delayed delivery): a duration as the admin commands take */
Test(config, validate_forward_max_delay)
{
	cr_assert_eq(config_max_delay_ms(&cfg), 30LL * 86400000, "the default is 30d");
	static const struct {
		const char *v;
		long long ms;
	} good[] = {{"0s", 0}, {"90s", 90000}, {"1h30m", 5400000}, {"365d", 365LL * 86400000}};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert_eq(config_set(&cfg, "forward.max_delay", good[i].v, err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s: %s", good[i].v, err);
		cr_assert_eq(config_max_delay_ms(&cfg), good[i].ms, "%s", good[i].v);
	}
	static const char *bad[] = {"", "30", "-1d", "5x", "1d 2h", "36501d"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, "forward.max_delay", bad[i], err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "forward.max_delay"), "message: %s", err);
	}
}

Test(config, validate_pg_adopt_from)
{
	static const char *good[] = {"", "7712026944935744815/orders", "1/a/b"};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert_eq(config_set(&cfg, "pg.adopt_from", good[i], err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s: %s", good[i], err);
	}
	static const char *bad[] = {"orders", "/orders", "7712026944935744815", "77x/orders"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "pg.adopt_from", bad[i], err, sizeof err), 0);
		err[0] = '\0';
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "pg.adopt_from"), "message: %s", err);
	}
}

Test(config, validate_default_url_must_be_http)
{
	static const char *bad[] = {"ftp://shop/check", "shop/check", "http://", "https://", "mailto:x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "checkback.default_url", bad[i], err, sizeof err), 0);
		err[0] = '\0';
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "checkback.default_url"), "message: %s", err);
	}
	cr_assert_eq(config_set(&cfg, "checkback.default_url", "https://shop/check", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&cfg, "checkback.default_url", "http://shop:80/c", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

Test(config, validate_alert_webhook_and_allow)
{
	cr_assert_eq(config_set(&cfg, "alert.webhook", "smtp://x", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "alert.webhook"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "alert.webhook", "https://alerts.example/hook", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);

	cr_assert_eq(config_set(&cfg, "checkback.allow", "https://a.example/, http://b.example/cb",
	                        err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&cfg, "checkback.allow", "https://a.example/, ftp://b.example/",
	                        err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "checkback.allow"), "message: %s", err);
	cr_assert(strstr(err, "ftp://b.example/"), "message: %s", err);
}

/* checkback.allow entries are read by the check-back's own URL parser: an
 * entry that could never hold a URL safely stops the start (exit 2). */
Test(config, validate_allow_entries_on_the_parsed_url)
{
	static const char *const bad[] = {
		"http://user@a.example/",      /* userinfo */
		"http://a.example/x\\y",       /* backslash */
		"http://2130706433/",          /* a host libcurl rewrites */
		"http://0x7f000001/",
		"http://127.1/",
		"http://a.example/%2e%2e/",    /* hidden dot segment */
		"http://a.example/cb?x=1",     /* a query: entries hold scheme, host, port, path */
		"http://a.example/cb#f",
		"http://a.example:99999/",
		"https://a.example/, http://[0:0::1]/",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "checkback.allow", bad[i], err, sizeof err), 0);
		err[0] = '\0';
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "checkback.allow"), "message: %s", err);
	}
	cr_assert_eq(config_set(&cfg, "checkback.allow", "HTTP://A.Example:80/cb/, http://[::1]:8080/ok",
	                        err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

Test(config, validate_default_url_on_the_parsed_url_and_the_allow_list)
{
	static const char *const bad[] = {"http://a.example:99999/", "http://[zz]/check"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "checkback.default_url", bad[i], err, sizeof err), 0);
		err[0] = '\0';
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "checkback.default_url"), "message: %s", err);
	}
	/* a default URL the list refuses would fail every prepare without one */
	cr_assert_eq(config_set(&cfg, "checkback.allow", "http://shop.example/tx", err, sizeof err), 0);
	static const char *const outside[] = {"http://shop.example/tx/../admin",
	                                      "http://shop.example/txx", "http://u@shop.example/tx"};
	for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
		cr_assert_eq(config_set(&cfg, "checkback.default_url", outside[i], err, sizeof err), 0);
		err[0] = '\0';
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "\"%s\" accepted", outside[i]);
		cr_assert(strstr(err, "checkback.default_url") && strstr(err, "checkback.allow"),
		          "message: %s", err);
	}
	cr_assert_eq(config_set(&cfg, "checkback.default_url", "http://SHOP.example:80/tx/check",
	                        err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

Test(config, validate_backoff_max_below_backoff)
{
	cr_assert_eq(config_set(&cfg, "checkback.backoff_ms", "20000", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "checkback.backoff_max_ms", "19999", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "checkback.backoff_max_ms"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "checkback.backoff_max_ms", "20000", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "equal bounds are fine: %s", err);

	cr_assert_eq(config_set(&cfg, "forward.backoff_ms", "5000", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "forward.backoff_max_ms", "4000", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "forward.backoff_max_ms"), "message: %s", err);
}

/* The listeners' limits: their ranges, and a per-address limit above the
 * total refused, naming the key (the defaults are asserted by what the
 * listeners do: tests/integration, monitor and console-http). */
Test(config, listener_limits)
{
	static const char *const bad[][2] = {
		{"http.max_connections", "0"},       {"http.max_connections_per_address", "0"},
		{"http.request_timeout_ms", "99"},   {"console.max_connections", "10001"},
		{"console.max_connections_per_address", "0"}, {"console.request_timeout_ms", "0"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, bad[i][0], bad[i][1], err, sizeof err), -1, "%s", bad[i][0]);
		cr_assert(strstr(err, bad[i][0]), "message: %s", err);
	}
	static const char *const pairs[][2] = {
		{"http.max_connections", "http.max_connections_per_address"},
		{"console.max_connections", "console.max_connections_per_address"},
	};
	for (size_t i = 0; i < 2; i++) {
		cr_assert_eq(config_set(&cfg, pairs[i][0], "8", err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
		cr_assert(strstr(err, pairs[i][1]), "message: %s", err);
		cr_assert_eq(config_set(&cfg, pairs[i][1], "8", err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "equal is fine: %s", err);
	}
}

/* exactly_once's pace: 40 ms unless set, 0 (back to back) to 5000;
 * outside that refused, naming the key, and the value kept. */
Test(config, transaction_interval)
{
	cr_assert_eq(cfg.forward_transaction_interval_ms, 40);
	cr_assert_eq(config_set(&cfg, "forward.transaction_interval_ms", "0", err, sizeof err), 0);
	cr_assert_eq(cfg.forward_transaction_interval_ms, 0);
	cr_assert_eq(config_set(&cfg, "forward.transaction_interval_ms", "120", err, sizeof err), 0);
	static const char *const bad[] = {"-1", "5001", "40ms", ""};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "forward.transaction_interval_ms", bad[i], err, sizeof err),
		             -1, "\"%s\" taken", bad[i]);
		cr_assert(strstr(err, "forward.transaction_interval_ms"), "message: %s", err);
	}
	cr_assert_eq(cfg.forward_transaction_interval_ms, 120, "a refused value changes nothing");
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

Test(config, validate_names_and_topics)
{
	cr_assert_eq(config_set(&cfg, "control_topic", "bad topic", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "control_topic"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "control_topic", "", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "control_topic"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "control_topic", "ok.topic_1-x", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&cfg, "group", "", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "group"), "message: %s", err);
}

/* control_topic as a list or a pattern (topics.h has the cases): refused
 * forms name the key; a progress topic among the control topics is too. */
Test(config, validate_control_topic_lists_and_patterns)
{
	static const char *const good[] = {"a,b,c", "^team-.*\\.control$", " a , b "};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert_eq(config_set(&cfg, "control_topic", good[i], err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s: %s", good[i], err);
	}
	static const char *const bad[][2] = {
		{"^a(b", "not a valid regular expression"},
		{"a,,b", "empty"},
		{"a,b,a", "named twice"},
		{"a,^b", "pattern"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "control_topic", bad[i][0], err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "%s accepted", bad[i][0]);
		cr_assert(strstr(err, "control_topic: ") == err, "message: %s", err);
		cr_assert(strstr(err, bad[i][1]), "message: %s", err);
	}
	/* the progress topic may not be one of the control topics */
	cr_assert_eq(config_set(&cfg, "control_topic", "^txhub\\..*", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "txhub.progress"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "forward.progress_topic", "ops.progress", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&cfg, "control_topic", "a,ops.progress", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "ops.progress"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "forward.progress_topic", "bad topic", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "control_topic", "a", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "forward.progress_topic"), "message: %s", err);
}

Test(config, free_twice_and_zeroed)
{
	cr_assert_eq(config_set(&cfg, "kafka.a", "b", err, sizeof err), 0);
	config_free(&cfg);
	cr_assert_null(cfg.brokers);
	cr_assert_null(cfg.kafka);
	cr_assert_eq(cfg.kafka_cnt, 0);
	config_free(&cfg);
	txhub_config zero;
	memset(&zero, 0, sizeof zero);
	config_free(&zero);
	config_free(NULL);
	cr_assert_eq(config_init(&cfg), 0); /* teardown frees it again */
}

Test(config, help_lists_every_key)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	config_write_help(f);
	fclose(f);
	for (const config_option *o = config_options; o->key; o++)
		cr_assert(strstr(buf, o->key), "help lacks %s", o->key);
	free(buf);
}

Test(config, example_lists_every_key_with_default)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	config_write_example(f);
	fclose(f);
	for (const config_option *o = config_options; o->key; o++) {
		char line[256];
		/* an empty default leaves no trailing space */
		snprintf(line, sizeof line, "\n# %s =%s%s\n", o->key, *o->def ? " " : "", o->def);
		cr_assert(strstr(buf, line), "example lacks the line \"%s\"", line + 1);
	}
	free(buf);
}

Test(config, example_file_loads_to_defaults)
{
	/* every setting in the shipped example is commented out */
	const char *path = TXHUB_SOURCE_ROOT "/deploy/txhub.conf.example";
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.brokers, "localhost:9092");
	cr_assert_eq(cfg.checkback_max_attempts, 15);
	cr_assert_eq(cfg.kafka_cnt, 0);
}

Test(config, example_file_matches_table)
{
	const char *path = TXHUB_SOURCE_ROOT "/deploy/txhub.conf.example";
	char *want = NULL;
	size_t want_len = 0;
	FILE *m = open_memstream(&want, &want_len);
	cr_assert_not_null(m);
	config_write_example(m);
	fclose(m);

	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	char *have = NULL;
	size_t have_len = 0, cap = 0, n;
	char chunk[4096];
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (have_len + n > cap) {
			cap = (have_len + n) * 2;
			have = realloc(have, cap);
			cr_assert_not_null(have);
		}
		memcpy(have + have_len, chunk, n);
		have_len += n;
	}
	fclose(f);

	size_t i = 0;
	while (i < have_len && i < want_len && have[i] == want[i])
		i++;
	cr_assert(i == have_len && i == want_len,
	          "%s differs from `txhub config` at byte %zu (file %zu bytes, table %zu bytes); "
	          "regenerate it with: txhub config > deploy/txhub.conf.example",
	          path, i, have_len, want_len);
	free(have);
	free(want);
}

/* A reload keeps every key that cannot change while running (and names
 * it), and takes the others. */
Test(config, keep_fixed_names_and_restores_what_cannot_change)
{
	txhub_config run, next;
	char err[256], changed[256];
	cr_assert_eq(config_init(&run), 0);
	cr_assert_eq(config_init(&next), 0);
	cr_assert_eq(config_set(&run, "kafka.linger.ms", "5", err, sizeof err), 0);
	cr_assert_eq(config_set(&next, "kafka.linger.ms", "50", err, sizeof err), 0);
	cr_assert_eq(config_set(&next, "group", "other", err, sizeof err), 0);
	cr_assert_eq(config_set(&next, "intake.batch_max", "7", err, sizeof err), 0);
	cr_assert_eq(config_set(&next, "log.level", "debug", err, sizeof err), 0);
	cr_assert_eq(config_set(&next, "checkback.max_attempts", "3", err, sizeof err), 0);
	cr_assert_eq(config_set(&next, "checkback.per_host", "2", err, sizeof err), 0);
	cr_assert_eq(config_keep_fixed(&run, &next, changed, sizeof changed), 0);
	cr_assert_str_eq(changed, "group, intake.batch_max, kafka.*");
	cr_assert_str_eq(next.group, "txhub");
	cr_assert_eq(next.intake_batch_max, 2000);
	cr_assert_eq(next.kafka_cnt, 1);
	cr_assert_str_eq(next.kafka[0].value, "5");
	cr_assert_eq(next.log_level, LOG_DEBUG);
	cr_assert_eq(next.checkback_max_attempts, 3);
	cr_assert_eq(next.checkback_per_host, 2, "checkback.per_host is applied by a reload");
	config_free(&next);
	cr_assert_eq(config_init(&next), 0);
	cr_assert_eq(config_set(&next, "kafka.linger.ms", "5", err, sizeof err), 0);
	cr_assert_eq(config_keep_fixed(&run, &next, changed, sizeof changed), 0);
	cr_assert_str_eq(changed, "");
	config_free(&run);
	config_free(&next);
}

Test(config, validate_log_format_and_http_listen)
{
	txhub_config cfg;
	char err[256];
	cr_assert_eq(config_init(&cfg), 0);
	err[0] = '\0';
	cr_assert_eq(config_set(&cfg, "log.format", "xml", err, sizeof err), -1);
	cr_assert(strstr(err, "log.format"), "%s", err);
	cr_assert_eq(config_set(&cfg, "log.format", "json", err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "http.listen", "9464", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "http.listen"), "%s", err);
	cr_assert_eq(config_set(&cfg, "http.listen", "127.0.0.1:9464", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	config_free(&cfg);
}

Test(config, validate_forward_mode_and_progress_topic)
{
	static const char *bad_modes[] = {"exactly-once", "EXACTLY_ONCE", "", "at_most_once"};
	for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, "forward.mode", bad_modes[i], err, sizeof err), -1, "\"%s\" accepted", bad_modes[i]);
		cr_assert(strstr(err, "forward.mode"), "message: %s", err);
	}
	cr_assert_eq(config_set(&cfg, "forward.mode", "exactly_once", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert(config_exactly_once(&cfg));
	cr_assert_eq(config_set(&cfg, "forward.progress_topic", "bad topic", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "forward.progress_topic"), "message: %s", err);
	cr_assert_eq(config_set(&cfg, "forward.progress_topic", "orders.progress", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&cfg, "forward.mode", "at_least_once", err, sizeof err), 0);
	cr_assert(!config_exactly_once(&cfg));
}

Test(config, validate_dead_letter_topic)
{
	cr_assert_str_eq(cfg.forward_dead_letter_topic, ""); /* off by default */
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	static const char *const bad[][2] = {
		{"bad topic", "not a valid topic name"},
		{"__consumer_offsets", "not a valid topic name"},
		{"txhub.control", "names a control topic"},
		{"txhub.control.progress", "names the progress topic"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(config_set(&cfg, "forward.dead_letter_topic", bad[i][0], err, sizeof err), 0);
		err[0] = '\0';
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "%s accepted", bad[i][0]);
		cr_assert(strstr(err, "forward.dead_letter_topic: "), "message: %s", err);
		cr_assert(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
	}
	cr_assert_eq(config_set(&cfg, "forward.dead_letter_topic", "orders.dlq", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

Test(config, validate_forward_order)
{
	cr_assert_eq(cfg.forward_order, CONFIG_ORDER_PARTITION);
	cr_assert(!config_order_by_key(&cfg));
	static const char *bad[] = {"keys", "KEY", "", "partition ", "topic"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, "forward.order", bad[i], err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "forward.order"), "message: %s", err);
	}
	cr_assert_eq(config_set(&cfg, "forward.order", "key", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert(config_order_by_key(&cfg));
}

Test(config, validate_console_keys)
{
	txhub_config cfg;
	char err[256];
	cr_assert_eq(config_init(&cfg), 0);
	cr_assert_str_eq(cfg.console_listen, "127.0.0.1:8080");
	cr_assert_str_eq(cfg.console_token, "");
	cr_assert_eq(cfg.console_open, 0);
	err[0] = '\0';
	cr_assert_eq(config_set(&cfg, "console.open", "yes", err, sizeof err), -1);
	cr_assert(strstr(err, "console.open"), "%s", err);
	cr_assert_eq(config_set(&cfg, "console.open", "true", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	const char *bad_listen[] = {"", "8080", "127.0.0.1:0", "127.0.0.1:65536", "[::1]8080", NULL};
	for (const char **l = bad_listen; *l; l++) {
		cr_assert_eq(config_set(&cfg, "console.listen", *l, err, sizeof err), 0);
		cr_assert_eq(config_validate(&cfg, err, sizeof err), -1, "%s accepted", *l);
		cr_assert(strstr(err, "console.listen"), "%s", err);
	}
	cr_assert_eq(config_set(&cfg, "console.listen", "[::1]:8443", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	setenv("TXHUB_CONSOLE_TOKEN", "from-the-environment", 1);
	cr_assert_eq(config_load_env(&cfg, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(cfg.console_token, "from-the-environment");
	unsetenv("TXHUB_CONSOLE_TOKEN");
	config_free(&cfg);
}

/* docs/tenants.md: Sharing one hub between teams: tenants.enforce is true or
 * false (false by default); it is read and checked, not acted on yet. */
Test(config, validate_tenants_enforce)
{
	cr_assert_eq(cfg.tenants_enforce, 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
	static const char *const bad[] = {"yes", "1", "TRUE", "", "on"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, "tenants.enforce", bad[i], err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "tenants.enforce"), "%s", err);
	}
	cr_assert_eq(config_set(&cfg, "tenants.enforce", "true", err, sizeof err), 0);
	cr_assert_eq(config_validate(&cfg, err, sizeof err), 0, "%s", err);
}

/* Typed rows: a boolean, an enumeration or a duration is refused as it is
 * set, whatever source it comes from, naming the key and what it takes;
 * txhub config, the man page and the docs say the same of each row. */
Test(config, typed_rows_refuse_as_they_are_set)
{
	static const char *const cases[][3] = {
		{"log.level", "trace", "log.level: \"trace\" is not one of debug, info, warn, error"},
		{"log.format", "xml", "log.format: \"xml\" is not text or json"},
		{"forward.mode", "exactly-once",
		 "forward.mode: \"exactly-once\" is not at_least_once or exactly_once"},
		{"forward.order", "keys", "forward.order: \"keys\" is not partition or key"},
		{"tenants.enforce", "yes", "tenants.enforce: \"yes\" is not true or false"},
		{"console.open", "1", "console.open: \"1\" is not true or false"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(config_set(&cfg, cases[i][0], cases[i][1], err, sizeof err), -1);
		cr_assert_str_eq(err, cases[i][2]);
	}
	err[0] = '\0';
	cr_assert_eq(config_set(&cfg, "forward.max_delay", "5w", err, sizeof err), -1);
	cr_assert(strncmp(err, "forward.max_delay: ", 19) == 0, "%s", err);
	cr_assert_str_eq(cfg.forward_max_delay, "30d", "a refused value leaves the row as it was");
	setenv("TXHUB_LOG_LEVEL", "loud", 1);
	cr_assert_eq(config_load_env(&cfg, err, sizeof err), -1);
	cr_assert(strstr(err, "log.level: \"loud\""), "%s", err);
	unsetenv("TXHUB_LOG_LEVEL");
	cr_assert_eq(config_set(&cfg, "log.format", "json", err, sizeof err), 0);
	cr_assert_str_eq(config_value_text(option("log.format"), &cfg), "json");
	cr_assert_str_eq(config_value_text(option("tenants.enforce"), &cfg), "false");
	char t[128];
	config_type_text(option("log.level"), t, sizeof t);
	cr_assert_str_eq(t, "debug, info, warn or error");
	config_type_text(option("console.open"), t, sizeof t);
	cr_assert_str_eq(t, "true or false");
	config_type_text(option("checkback.max_attempts"), t, sizeof t);
	cr_assert_str_eq(t, "an integer from 1 to 1000");
}
