/* config.h: txhub's configuration, driven by one declarative table.
 *
 * Precedence, lowest first: built-in default, config file (-c FILE or
 * TXHUB_CONFIG), environment, -X key=value. Keys starting with "kafka." are
 * passed to librdkafka unchanged (minus the prefix). The table in config.c is
 * the single source of the key names, defaults, documentation, the help text
 * and deploy/txhub.conf.example (a unit test checks they agree). */
#ifndef TXHUB_CONFIG_H
#define TXHUB_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
	char *key;   /* without the "kafka." prefix */
	char *value;
} config_kv;

typedef struct txhub_config {
	char *brokers;
	char *pg;
	char *pg_adopt_from;          /* "" or "<system identifier>/<name>" (validated) */
	char *control_topic;
	char *group;
	int64_t envelope_max_bytes;
	int64_t checkback_first_after_ms;
	int64_t checkback_backoff_ms;
	int64_t checkback_backoff_max_ms;
	int64_t checkback_max_attempts;
	int64_t checkback_timeout_ms;
	int64_t checkback_concurrency;
	int64_t checkback_per_host;
	char *checkback_allow;
	char *checkback_default_url;
	char *checkback_secret;
	int64_t forward_backoff_ms;
	int64_t forward_backoff_max_ms;
	int64_t forward_max_attempts;
	char *forward_max_delay;      /* a duration (validated): config_max_delay_ms() */
	int64_t forward_transaction_interval_ms; /* exactly_once: a lane's pace */
	int64_t forward_mode;         /* CONFIG_MODE_*: config_exactly_once() */
	int64_t forward_order;        /* CONFIG_ORDER_*: config_order_by_key() */
	char *forward_progress_topic; /* "": <control_topic>.progress */
	char *forward_dead_letter_topic; /* "": off (deadletter.h) */
	char *alert_webhook;
	int64_t alert_awaiting_prepare_ms;
	int64_t alert_database_failing_ms;
	int64_t alert_lane_stuck_ms;
	int64_t log_level;            /* index into config_log_levels (log.h's order) */
	int64_t log_format;           /* log.h's log_format */
	char *http_listen;
	int64_t http_max_connections;
	int64_t http_max_per_address;
	int64_t http_request_timeout_ms;
	int64_t intake_batch_max;
	int64_t intake_batch_bytes;
	int64_t intake_poll_ms;
	int64_t retention_finished_hours;
	int64_t retention_rejected_hours;
	int64_t tenants_enforce; /* 0 or 1: config_tenants_enforce() */
	char *console_listen;
	char *console_token;
	int64_t console_open; /* 0 or 1 */
	int64_t console_login_failures;  /* wrong tokens per address and window */
	int64_t console_login_window_ms;
	int64_t console_max_connections;
	int64_t console_max_per_address;
	int64_t console_request_timeout_ms;

	config_kv *kafka;    /* kafka.* pass-through, in the order set */
	size_t kafka_cnt, kafka_cap;

	/* the references to one a reload loaded (config_share()); NULL for one
	 * its loader owns and frees (main()'s, the tests') */
	struct config_refs *refs;
} txhub_config;

/* A row's type, which decides how its text is parsed (at once, naming the
 * key, whatever source it came from), how txhub config, the man page and
 * the docs show it, and its field's C type:
 *   CONFIG_STRING    char *, as written
 *   CONFIG_INT       int64_t, an integer from min to max
 *   CONFIG_BOOL      int64_t, 0 or 1, from false or true
 *   CONFIG_ENUM      int64_t, the index of one of values
 *   CONFIG_DURATION  char *, a duration as duration.h reads it (90s, 15m,
 *                    12h, 7d); config_max_delay_ms() has it in ms */
typedef enum { CONFIG_STRING, CONFIG_INT, CONFIG_BOOL, CONFIG_ENUM, CONFIG_DURATION } config_type;

/* forward.mode's and forward.order's values, in their rows' order. */
enum { CONFIG_MODE_AT_LEAST_ONCE, CONFIG_MODE_EXACTLY_ONCE };
enum { CONFIG_ORDER_PARTITION, CONFIG_ORDER_KEY };
/* log.level's values, log.h's log_level order */
extern const char *const config_log_levels[];

/* One row of the table. */
typedef struct {
	const char *key;
	const char *env;        /* environment variable, or NULL */
	config_type type;
	const char *def;        /* default as text */
	int64_t min, max;       /* bounds for CONFIG_INT */
	size_t offset;          /* offsetof(txhub_config, field) */
	const char *doc;
	int live;               /* SIGHUP applies a new value to a running hub */
	const char *const *values; /* CONFIG_ENUM: its values, NULL-terminated */
	const char *md;         /* docs/configuration.md's description, markdown, when it
	                         * says more than doc (links, ranges, reasons); or NULL */
} config_option;

/* A row's value as text (a static string for BOOL and ENUM; the field for
 * STRING and DURATION; NULL for INT, whose text the caller formats). */
const char *config_value_text(const config_option *o, const txhub_config *cfg);
/* What a row takes, for people: "an integer from 1 to 1000", "true or
 * false", "one of debug, info, warn, error", "a duration (90s, 15m, 12h,
 * 7d)", "text". */
void config_type_text(const config_option *o, char *out, size_t outsz);

/* The table, terminated by a row with key == NULL. */
extern const config_option config_options[];

/* Whether forward.mode is exactly_once. */
int config_exactly_once(const txhub_config *cfg);
/* Whether forward.order is key (docs/consumers.md: Order per key). */
int config_order_by_key(const txhub_config *cfg);
/* tenants.enforce = true (docs/tenants.md: Sharing one hub between teams). */
int config_tenants_enforce(const txhub_config *cfg);

/* forward.max_delay in milliseconds (a validated configuration). */
int64_t config_max_delay_ms(const txhub_config *cfg);

/* Fill cfg with the built-in defaults. Returns 0, or -1 on allocation failure. */
int config_init(txhub_config *cfg);

/* Set one key from text. "kafka.*" keys are appended to the pass-through
 * list. Returns 0, or -1 with a message naming the key in err. */
int config_set(txhub_config *cfg, const char *key, const char *value,
               char *err, size_t errsz);

/* Read a "key = value" file ('#' starts a comment line). Returns 0, or -1
 * with the file name and line number in err. */
int config_load_file(txhub_config *cfg, const char *path, char *err, size_t errsz);

/* Apply every table row that names an environment variable that is set. */
int config_load_env(txhub_config *cfg, char *err, size_t errsz);

/* Cross-key checks after everything is loaded (URLs, bounds between keys). */
int config_validate(const txhub_config *cfg, char *err, size_t errsz);

/* After a reload: every key that cannot change while running (not live,
 * and the kafka.* list) that differs in next is set back to its value in
 * running, and named in changed (comma-separated, "" when none). Returns
 * 0, or -1 when out of memory. */
int config_keep_fixed(const txhub_config *running, txhub_config *next, char *changed,
                      size_t changedsz);

/* Set the logger's level and format from cfg (validated). */
void config_apply_logging(const txhub_config *cfg);

/* Print the table as a commented example config file. */
void config_write_example(FILE *out);

/* Print "key  default  doc" lines for --help. */
void config_write_help(FILE *out);

/* Free everything cfg owns; cfg may be zeroed or partly filled. */
void config_free(txhub_config *cfg);

/* A configuration loaded by a reload, which several threads may read at
 * once (the run loop, the check-back thread, the lanes, the HTTP
 * threads): each part that keeps a pointer to it holds a reference, and
 * the last one dropped frees it. config_share() gives cfg (allocated with
 * malloc, loaded) its first reference; returns 0, or -1 when out of memory
 * (cfg is then as it was). config_hold() adds one and returns cfg;
 * config_drop() takes one away. Both do nothing to a configuration that was
 * never shared (the one main() loaded, which outlives every part) or NULL;
 * both may be called from any thread. */
int config_share(txhub_config *cfg);
const txhub_config *config_hold(const txhub_config *cfg);
void config_drop(const txhub_config *cfg);

#endif
