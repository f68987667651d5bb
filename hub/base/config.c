/* config.c: the configuration table and its loaders (see config.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "array.h"
#include "checkback_proto.h"
#include "dbid.h"
#include "duration.h"
#include "http.h"
#include "log.h"
#include "topics.h"
#include "url.h"

#define OFF(f) offsetof(txhub_config, f)
/* a row; the variadic part is the doc and, when docs/configuration.md
 * says more (links, ranges, reasons), .md = its markdown */
#define ROW(k, e, t, d, lo, hi, f, l, v, ...)                                                 \
	{.key = k, .env = e, .type = t, .def = d, .min = lo, .max = hi, .offset = OFF(f),    \
	 .live = l, .values = v, .doc = __VA_ARGS__}
#define STR(k, env, def, f, ...) ROW(k, env, CONFIG_STRING, def, 0, 0, f, 0, NULL, __VA_ARGS__)
#define INT(k, env, def, lo, hi, f, ...)                                                      \
	ROW(k, env, CONFIG_INT, def, lo, hi, f, 0, NULL, __VA_ARGS__)
#define BOOL(k, env, def, f, ...) ROW(k, env, CONFIG_BOOL, def, 0, 1, f, 0, bools, __VA_ARGS__)
#define ENUM(k, env, def, vals, f, ...)                                                       \
	ROW(k, env, CONFIG_ENUM, def, 0, 0, f, 0, vals, __VA_ARGS__)
#define DUR(k, env, def, f, ...) ROW(k, env, CONFIG_DURATION, def, 0, 0, f, 0, NULL, __VA_ARGS__)
/* keys a SIGHUP applies to a running hub */
#define LSTR(k, env, def, f, ...) ROW(k, env, CONFIG_STRING, def, 0, 0, f, 1, NULL, __VA_ARGS__)
#define LINT(k, env, def, lo, hi, f, ...)                                                     \
	ROW(k, env, CONFIG_INT, def, lo, hi, f, 1, NULL, __VA_ARGS__)
#define LENUM(k, env, def, vals, f, ...)                                                      \
	ROW(k, env, CONFIG_ENUM, def, 0, 0, f, 1, vals, __VA_ARGS__)

static const char *const bools[] = {"false", "true", NULL};
const char *const config_log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"text", "json", NULL};
static const char *const forward_modes[] = {"at_least_once", "exactly_once", NULL};
static const char *const forward_orders[] = {"partition", "key", NULL};

static const int64_t DAY_MS = 86400000;

const config_option config_options[] = {
	STR("brokers", "TXHUB_BROKERS", "localhost:9092", brokers,
	    "Kafka bootstrap servers"),
	STR("pg", "TXHUB_PG", "", pg,
	    "PostgreSQL connection string; empty: libpq defaults and the PG* variables",
	    .md = "PostgreSQL connection string (`host=... dbname=... user=...` or a "
	    "`postgresql://` URI); empty: libpq defaults and the `PG*` variables"),
	/* live: a refused partition is checked again every 5 s (intake.c) */
	LSTR("pg.adopt_from", NULL, "", pg_adopt_from,
	    "the database this hub's group worked against before a move or a restore into a new "
	    "cluster, as the alert database_mismatch names it (<system identifier>/<database "
	    "name>): partitions last worked against it are taken over; empty: a partition last "
	    "worked against another database is refused",
	    .md = "the database this hub's group worked against before a move or a restore into "
	    "a new cluster, written `<system identifier>/<database name>` as the alert "
	    "`database_mismatch` names it: partitions last worked against it are taken over (see "
	    "[One database per group](running.md#running-several-replicas)); empty: such "
	    "partitions are refused. SIGHUP applies it"),
	STR("control_topic", "TXHUB_CONTROL_TOPIC", "txhub.control", control_topic,
	    "topic producers send envelopes to; or a comma-separated list of topics (at most 64); "
	    "or one pattern beginning with ^ (a POSIX extended regular expression over topic "
	    "names, topics created later included)",
	    .md = "the topic producers send envelopes to; or a comma-separated list of topics "
	    "(at most 64); or one pattern beginning with `^` (see [Several control "
	    "topics](kafka.md#several-control-topics))"),
	STR("group", "TXHUB_GROUP", "txhub", group,
	    "consumer group shared by all replicas"),
	INT("envelope.max_bytes", NULL, "1048576", 64, 100 * 1024 * 1024, envelope_max_bytes,
	    "largest accepted envelope (record value), in bytes",
	    .md = "largest accepted envelope (record value), in bytes (64..104857600)"),
	LINT("checkback.first_after_ms", NULL, "30000", 0, 30 * DAY_MS, checkback_first_after_ms,
	    "delay from prepare to the first check-back",
	    .md = "delay from prepare to the first check-back; sets `next_check_at`"),
	LINT("checkback.backoff_ms", NULL, "10000", 1, DAY_MS, checkback_backoff_ms,
	    "delay before the second check-back; doubles after each attempt",
	    .md = "delay before the second check-back; doubles after each attempt, with jitter"),
	LINT("checkback.backoff_max_ms", NULL, "600000", 1, 30 * DAY_MS, checkback_backoff_max_ms,
	    "cap on the check-back retry delay",
	    .md = "cap on the check-back retry delay; must be ≥ `checkback.backoff_ms`"),
	LINT("checkback.max_attempts", NULL, "15", 1, 1000, checkback_max_attempts,
	    "check-backs before a message becomes check_failed",
	    .md = "check-backs before a message becomes `check_failed`"),
	LINT("checkback.timeout_ms", NULL, "3000", 1, 600000, checkback_timeout_ms,
	    "time-out of one check-back request",
	    .md = "time-out of one check-back request, connecting included"),
	INT("checkback.concurrency", NULL, "64", 1, 10000, checkback_concurrency,
	    "check-back requests in flight at once",
	    .md = "check-back requests in flight at once, per replica (1..10000); each holds a "
	    "socket, so above about 900 raise the open-file limit (`LimitNOFILE`, 65536 in "
	    "`deploy/txhub.service`)"),
	/* live: the checker sets it on its libcurl handle at its next turn */
	LINT("checkback.per_host", NULL, "8", 1, 10000, checkback_per_host,
	    "check-back requests in flight at once to one host (name and port); more due for it "
	    "wait, claimed, for one of them to finish, and their time-out starts when they do",
	    .md = "check-back requests in flight at once to one host (host name and port), per "
	    "replica (1..10000); more due for that host wait, their `checkback.timeout_ms` not "
	    "yet running (see [How many at once](producers.md#how-many-at-once))"),
	LSTR("checkback.allow", NULL, "", checkback_allow,
	    "comma-separated URLs check-backs may go to (that path or below it); "
	    "empty: any http or https URL",
	    .md = "comma-separated URLs check-backs may go to: same scheme, host and port, and "
	    "that path or below it (see [What the hub never "
	    "does](producers.md#what-the-hub-never-does)); empty: any http or https URL"),
	LSTR("checkback.default_url", NULL, "", checkback_default_url,
	    "check-back URL for prepares that name none"),
	LSTR("checkback.secret", "TXHUB_CHECKBACK_SECRET", "", checkback_secret,
	    "HMAC-SHA256 key for signing check-back requests; empty: unsigned"),
	LINT("forward.backoff_ms", NULL, "1000", 1, DAY_MS, forward_backoff_ms,
	    "delay before re-sending a forward whose delivery failed; doubles after each attempt"),
	LINT("forward.backoff_max_ms", NULL, "300000", 1, 30 * DAY_MS, forward_backoff_max_ms,
	    "cap on the forward retry delay",
	    .md = "cap on the forward retry delay; must be ≥ `forward.backoff_ms`"),
	LINT("forward.max_attempts", NULL, "15", 1, 1000, forward_max_attempts,
	    "delivery attempts before a message gets send_status failed",
	    .md = "delivery attempts before a message gets `send_status` `failed`"),
	DUR("forward.max_delay", NULL, "30d", forward_max_delay,
	    "longest delay a prepare may ask for (forward.not_before, forward.delay_ms), a "
	    "duration (90s, 15m, 12h, 7d); an envelope asking for more is rejected",
	    .md = "the longest delay a prepare may ask for (`forward.not_before`, "
	    "`forward.delay_ms`), a duration (`90s`, `15m`, `12h`, `7d`, `1d12h`); an envelope "
	    "asking for more is rejected, a `not_before` measured from PostgreSQL's clock "
	    "([Delayed delivery](consumers.md#delayed-delivery)). A restart applies a change"),
	ENUM("forward.mode", NULL, "at_least_once", forward_modes, forward_mode,
	    "at_least_once, or exactly_once: forwards written in Kafka transactions, so that a "
	    "consumer with isolation.level=read_committed sees each committed message once",
	    .md = "`at_least_once`, or `exactly_once`: forwards in Kafka transactions, each "
	    "committed message read once by `read_committed` consumers ([Forwarding exactly "
	    "once](consumers.md#forwarding-exactly-once)); needs a restart to change"),
	ENUM("forward.order", NULL, "partition", forward_orders, forward_order,
	    "partition, or key: a committed message with a forward key is not produced while an "
	    "earlier one (control-partition order) with the same forward topic and key is unsent "
	    "(pending, retrying, failed or delayed); txhub skip gives up on a parked one",
	    .md = "`partition`, or `key`: a committed message with a forward key is not produced "
	    "while an earlier one with the same forward topic and key is unsent; `txhub skip` "
	    "gives up on a parked one ([Order per "
	    "key](consumers.md#order-per-key-forwardorder--key)); anything else exits 2; needs a "
	    "restart to change"),
	LINT("forward.transaction_interval_ms", NULL, "40", 0, 5000, forward_transaction_interval_ms,
	    "exactly_once: a replica begins a Kafka transaction (all its partitions' runs) at most "
	    "this often; longer: fewer transactions, less CPU, more latency",
	    .md = "`exactly_once`: a replica begins a Kafka transaction (which holds the runs of all "
	    "its partitions' lanes) at most this often, however many partitions it owns (0..5000; "
	    "0: back to back); longer: fewer transactions and less CPU, more latency (see "
	    "[Forwarding exactly once](consumers.md#forwarding-exactly-once)); SIGHUP applies it "
	    "from the next transaction"),
	STR("forward.progress_topic", NULL, "", forward_progress_topic,
	    "exactly_once: the compacted topic of each control partition's progress marker; "
	    "empty: <control_topic>.progress for one control topic, txhub.progress for a list or "
	    "a pattern",
	    .md = "`exactly_once`: the compacted topic of the per-partition progress markers; "
	    "empty: `<control_topic>.progress` for one control topic, `txhub.progress` for a "
	    "list or a pattern (created when missing); never one of the control topics (exit 2)"),
	STR("forward.dead_letter_topic", NULL, "", forward_dead_letter_topic,
	    "a forward that gets send_status failed (parked) is also produced here once, with its "
	    "payload, key, headers and txhub-dlq-topic, txhub-dlq-error, txhub-dlq-attempts, "
	    "txhub-dlq-at; the row stays parked for redrive; empty: off",
	    .md = "a forward parked with `send_status` `failed` is also produced here once in "
	    "the forwarding mode in force (`at_least_once`: at least once; `exactly_once`: "
	    "exactly once for a `read_committed` consumer), with its payload, key, headers and "
	    "`txhub-dlq-topic`, `txhub-dlq-error`, `txhub-dlq-attempts`, `txhub-dlq-at`; the row "
	    "stays parked for `redrive` ([Dead-letter "
	    "topic](troubleshooting.md#dead-letter-topic)); empty: off; a valid topic name, not "
	    "a control topic nor the progress topic (exit 2), nor a forward topic of a tenant "
	    "(`txhub run` reads `txhub.tenants` at start and exits with 2); an envelope whose "
	    "`forward.topic` names it is rejected"),
	LSTR("alert.webhook", NULL, "", alert_webhook,
	    "URL that receives a JSON POST for every alert; empty: log only"),
	LINT("alert.awaiting_prepare_ms", NULL, "600000", 1000, 30 * DAY_MS,
	    alert_awaiting_prepare_ms,
	    "a decision waiting this long for its prepare (awaiting_prepare) raises the alert "
	    "prepare_missing once and counts as parked",
	    .md = "a decision waiting this long for its prepare (`awaiting_prepare`) raises the "
	    "alert `prepare_missing` once and counts as parked"),
	LINT("alert.database_failing_ms", NULL, "60000", 1000, DAY_MS, alert_database_failing_ms,
	    "PostgreSQL refusing the hub's writes this long raises the alert database_failing",
	    .md = "PostgreSQL refusing the hub's writes this long raises the alert "
	    "`database_failing`"),
	LINT("alert.lane_stuck_ms", NULL, "60000", 1000, DAY_MS, alert_lane_stuck_ms,
	    "exactly_once: a partition whose lane has not taken it for this long (Kafka refusing "
	    "the progress topic or the transactional id, ...) raises the alert lane_stuck and "
	    "fails /readyz",
	    .md = "`exactly_once`: a partition whose lane has not taken it this long (Kafka "
	    "refusing the progress topic or the transactional id, ...) raises the alert "
	    "`lane_stuck` and fails `/readyz` (1000..86400000)"),
	LENUM("log.level", "TXHUB_LOG_LEVEL", "info", config_log_levels, log_level,
	    "debug, info, warn or error",
	    .md = "`debug`, `info`, `warn` or `error`"),
	LENUM("log.format", NULL, "text", log_formats, log_format,
	    "text, or json: one JSON object per line",
	    .md = "`text`, or `json`: one JSON object per line (see [Logs](monitoring.md#logs))"),
	STR("http.listen", NULL, "", http_listen,
	    "host:port for /metrics, /healthz and /readyz (e.g. 127.0.0.1:9464); empty: none",
	    .md = "`host:port` (or `[v6]:port`) for `/metrics`, `/healthz` and `/readyz`, e.g. "
	    "`127.0.0.1:9464`; empty: no listener (see [Metrics and "
	    "health](monitoring.md#metrics-and-health))"),
	INT("http.max_connections", NULL, "256", 1, 100000, http_max_connections,
	    "connections open at once on http.listen; more wait in the listen queue",
	    .md = "connections open at once on `http.listen` (1..100000); more wait in the "
	    "listen queue"),
	INT("http.max_connections_per_address", NULL, "16", 1, 100000, http_max_per_address,
	    "connections open at once on http.listen from one client address; more are closed "
	    "at once",
	    .md = "connections open at once on `http.listen` from one client address (1..100000, "
	    "at most `http.max_connections`); more are closed at once"),
	INT("http.request_timeout_ms", NULL, "5000", 100, 3600000, http_request_timeout_ms,
	    "a client of http.listen must send a request in full (head and body) within this, "
	    "counted from its connection's opening or the previous answer; else the connection "
	    "is closed",
	    .md = "a client of `http.listen` must send each request in full, head and body, "
	    "within this (100..3600000), counted from its connection's opening or the previous "
	    "answer on it; else the connection is closed"),
	INT("intake.batch_max", NULL, "2000", 1, 100000, intake_batch_max,
	    "most control records applied in one PostgreSQL transaction"),
	INT("intake.batch_bytes", NULL, "16777216", 1024, 1024 * 1024 * 1024, intake_batch_bytes,
	    "most record bytes applied in one PostgreSQL transaction"),
	INT("intake.poll_ms", NULL, "100", 1, 60000, intake_poll_ms,
	    "longest wait for the first record of a batch"),
	/* live: retention is among the keys SIGHUP applies (docs/running.md:
	 * Reloading the configuration (SIGHUP)) */
	LINT("retention.finished_hours", NULL, "168", 0, 87600, retention_finished_hours,
	    "txhub run deletes finished messages (committed and sent, or rolled_back) and their "
	    "history this many hours after their last change, for the partitions it owns; 0 turns "
	    "retention off, for rejected and conflict rows too",
	    .md = "`txhub run` deletes finished messages (`committed` and `sent`, or "
	    "`rolled_back`) and their history this many hours after their last change, for the "
	    "partitions it owns (0..87600; 0 turns retention off, for rejected and conflict rows "
	    "too); see [Purge and retention](database.md#purge-and-retention)"),
	LINT("retention.rejected_hours", NULL, "720", 0, 87600, retention_rejected_hours,
	    "txhub run deletes rejected and conflict rows this many hours after they were "
	    "written; 0 keeps them",
	    .md = "`txhub run` deletes rejected and conflict rows this many hours after they "
	    "were written (0..87600; 0 keeps them)"),
	/* docs/tenants.md: Sharing one hub between teams: at intake
	 * (hub/intake/enforce.c); a restart applies a change */
	BOOL("tenants.enforce", NULL, "false", tenants_enforce,
	    "true: a record is accepted only within the rules of the tenant whose control topic "
	    "it arrived on (txhub tenant), else rejected; a decision for another tenant's "
	    "message is a conflict; no rules loaded yet: intake waits",
	    .md = "`true`: a record is accepted only within the rules of the tenant whose "
	    "control topic it arrived on, else rejected; a decision for another tenant's message "
	    "is a conflict; with no rules loaded yet intake waits ([Sharing one hub between "
	    "teams](tenants.md#sharing-one-hub-between-teams)). A restart applies a change"),
	/* txhub console (docs/configuration.md: Configuration; docs/console.md:
	 * Web console); the hub itself never reads them */
	STR("console.listen", NULL, "127.0.0.1:8080", console_listen,
	    "host:port the web console (txhub console) listens on",
	    .md = "`host:port` (or `[v6]:port`) the [web console](console.md#web-console) "
	    "listens on"),
	STR("console.token", "TXHUB_CONSOLE_TOKEN", "", console_token,
	    "the token that logs in to the web console (at least 16 characters); empty: the "
	    "console starts only on a loopback address with console.open = true",
	    .md = "the token that logs in to the console, at least 16 characters (`openssl rand "
	    "-hex 24`); empty: the console starts only with `console.open = true` on a loopback "
	    "address"),
	BOOL("console.open", NULL, "false", console_open,
	    "true: with no console.token, serve the console without a token (loopback only)",
	    .md = "`true`: with no `console.token`, serve the console on a loopback "
	    "`console.listen` with a name alone as the login; refused on any other address"),
	INT("console.login_failures", NULL, "5", 1, 1000, console_login_failures,
	    "wrong tokens one client address (an IPv6 /64) may try within console.login_window_ms; "
	    "the last of them starts a wait of as long, in which its logins are answered 429",
	    .md = "wrong tokens one client address (an IPv6 /64) may try within "
	    "`console.login_window_ms`; the last starts a wait of as long, in which its logins "
	    "are answered 429 ([throttling](console.md#web-console))"),
	INT("console.login_window_ms", NULL, "60000", 100, DAY_MS, console_login_window_ms,
	    "the window of console.login_failures, and the wait after them",
	    .md = "the window of `console.login_failures`, and the wait after them (100 to "
	    "86400000)"),
	INT("console.max_connections", NULL, "64", 1, 10000, console_max_connections,
	    "connections open at once on console.listen (a thread each); more wait in the "
	    "listen queue",
	    .md = "connections open at once on `console.listen`, a thread each (1..10000); more "
	    "wait in the listen queue"),
	INT("console.max_connections_per_address", NULL, "16", 1, 10000, console_max_per_address,
	    "connections open at once on console.listen from one client address (behind a "
	    "proxy: the proxy's); more are closed at once",
	    .md = "connections open at once on `console.listen` from one client address "
	    "(1..10000, at most `console.max_connections`; behind a proxy, the proxy's); more "
	    "are closed at once"),
	INT("console.request_timeout_ms", NULL, "10000", 100, 3600000, console_request_timeout_ms,
	    "a client of console.listen must send a request in full (head and body) within "
	    "this, counted from its connection's opening or the previous answer; else the "
	    "connection is closed",
	    .md = "a client of `console.listen` must send each request in full, head and body, "
	    "within this (100..3600000), counted from its connection's opening or the previous "
	    "answer on it; else the connection is closed"),
	{.key = NULL},
};

int config_exactly_once(const txhub_config *cfg)
{
	return cfg->forward_mode == CONFIG_MODE_EXACTLY_ONCE;
}

int64_t config_max_delay_ms(const txhub_config *cfg)
{
	int64_t ms;
	char err[8];
	return duration_parse(cfg->forward_max_delay, &ms, err, sizeof err) == 0 ? ms : 0;
}

int config_order_by_key(const txhub_config *cfg) { return cfg->forward_order == CONFIG_ORDER_KEY; }

int config_tenants_enforce(const txhub_config *cfg) { return cfg->tenants_enforce == 1; }

/* "a, b or c" of a NULL-terminated list, into out */
static void list_values(const char *const *v, const char *last_sep, char *out, size_t outsz)
{
	size_t n = 0, l = 0;
	while (v[n])
		n++;
	out[0] = '\0';
	for (size_t i = 0; i < n && l < outsz; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? last_sep : ", ";
		l += (size_t)snprintf(out + l, outsz - l, "%s%s", sep, v[i]);
	}
}

const char *config_value_text(const config_option *o, const txhub_config *cfg)
{
	const void *f = (const char *)cfg + o->offset;
	switch (o->type) {
	case CONFIG_STRING:
	case CONFIG_DURATION: return *(char *const *)f;
	case CONFIG_BOOL:
	case CONFIG_ENUM: return o->values[*(const int64_t *)f];
	case CONFIG_INT: break;
	}
	return NULL;
}

void config_type_text(const config_option *o, char *out, size_t outsz)
{
	char vals[256];
	switch (o->type) {
	case CONFIG_INT:
		snprintf(out, outsz, "an integer from %lld to %lld", (long long)o->min,
		         (long long)o->max);
		return;
	case CONFIG_BOOL: snprintf(out, outsz, "true or false"); return;
	case CONFIG_ENUM:
		list_values(o->values, " or ", vals, sizeof vals);
		snprintf(out, outsz, "%s", vals);
		return;
	case CONFIG_DURATION: snprintf(out, outsz, "a duration (90s, 15m, 12h, 7d, 1h30m)"); return;
	case CONFIG_STRING: snprintf(out, outsz, "text"); return;
	}
}

/* The index of value among o->values, or -1. */
static int64_t value_index(const config_option *o, const char *value)
{
	for (int64_t i = 0; o->values[i]; i++)
		if (strcmp(o->values[i], value) == 0)
			return i;
	return -1;
}

static const config_option *find_option(const char *key)
{
	for (const config_option *o = config_options; o->key; o++)
		if (strcmp(o->key, key) == 0)
			return o;
	return NULL;
}

static int set_option(txhub_config *cfg, const config_option *o, const char *value,
                      char *err, size_t errsz)
{
	void *field = (char *)cfg + o->offset;
	if (o->type == CONFIG_BOOL || o->type == CONFIG_ENUM) {
		int64_t i = value_index(o, value);
		if (i < 0) {
			char vals[256];
			if (o->type == CONFIG_BOOL)
				snprintf(vals, sizeof vals, "true or false");
			else
				list_values(o->values, o->values[2] ? ", " : " or ", vals, sizeof vals);
			snprintf(err, errsz, "%s: \"%s\" is not %s%s", o->key, value,
			         o->values[2] ? "one of " : "", vals);
			return -1;
		}
		*(int64_t *)field = i;
		return 0;
	}
	if (o->type == CONFIG_DURATION) {
		int64_t ms;
		char why[160];
		if (duration_parse(value, &ms, why, sizeof why) != 0) {
			snprintf(err, errsz, "%s: %s", o->key, why);
			return -1;
		}
	}
	if (o->type == CONFIG_STRING || o->type == CONFIG_DURATION) {
		char *copy = strdup(value);
		if (!copy) {
			snprintf(err, errsz, "%s: out of memory", o->key);
			return -1;
		}
		free(*(char **)field);
		*(char **)field = copy;
		return 0;
	}
	const char *d = value[0] == '-' ? value + 1 : value;
	char *end;
	errno = 0;
	long long v = strtoll(value, &end, 10);
	if (!isdigit((unsigned char)*d) || errno || *end != '\0') {
		snprintf(err, errsz, "%s: \"%s\" is not an integer", o->key, value);
		return -1;
	}
	if (v < o->min || v > o->max) {
		snprintf(err, errsz, "%s: %lld is out of range (%lld..%lld)", o->key, v,
		         (long long)o->min, (long long)o->max);
		return -1;
	}
	*(int64_t *)field = v;
	return 0;
}

int config_init(txhub_config *cfg)
{
	char err[256];
	memset(cfg, 0, sizeof *cfg);
	for (const config_option *o = config_options; o->key; o++)
		if (set_option(cfg, o, o->def, err, sizeof err) != 0)
			return -1;
	return 0;
}

static int valid_kafka_key(const char *k)
{
	if (!*k)
		return 0;
	for (; *k; k++)
		if (!(isalnum((unsigned char)*k) || *k == '.' || *k == '_' || *k == '-'))
			return 0;
	return 1;
}

int config_set(txhub_config *cfg, const char *key, const char *value,
               char *err, size_t errsz)
{
	if (strncmp(key, "kafka.", 6) == 0) {
		const char *k = key + 6;
		if (!valid_kafka_key(k)) {
			snprintf(err, errsz, "%s: not a valid librdkafka property name", key);
			return -1;
		}
		for (size_t i = 0; i < cfg->kafka_cnt; i++) {
			if (strcmp(cfg->kafka[i].key, k) == 0) {
				char *v = strdup(value);
				if (!v)
					goto oom;
				free(cfg->kafka[i].value);
				cfg->kafka[i].value = v;
				return 0;
			}
		}
		config_kv *n = array_grow(cfg->kafka, &cfg->kafka_cap, cfg->kafka_cnt + 1, sizeof *n);
		if (!n)
			goto oom;
		cfg->kafka = n;
		n[cfg->kafka_cnt].key = strdup(k);
		n[cfg->kafka_cnt].value = strdup(value);
		if (!n[cfg->kafka_cnt].key || !n[cfg->kafka_cnt].value) {
			free(n[cfg->kafka_cnt].key);
			free(n[cfg->kafka_cnt].value);
			goto oom;
		}
		cfg->kafka_cnt++;
		return 0;
	}
	const config_option *o = find_option(key);
	if (!o) {
		snprintf(err, errsz, "%s: unknown configuration key", key);
		return -1;
	}
	return set_option(cfg, o, value, err, errsz);
oom:
	snprintf(err, errsz, "%s: out of memory", key);
	return -1;
}

/* The longest line a configuration file may hold, its newline included. */
enum { CONFIG_LINE_MAX = 8192 };

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Open path for reading as a configuration file: a regular file, or a
 * pipe or character device (`-c <(...)`, /dev/null). Anything else, a
 * directory first of all (which fopen opens and reads as empty), is an
 * error naming the file. */
static FILE *open_config_file(const char *path, char *err, size_t errsz)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		fclose(f);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
		snprintf(err, errsz, "%s: %s", path,
		         S_ISDIR(st.st_mode) ? "is a directory, not a configuration file"
		                             : "not a regular file");
		fclose(f);
		return NULL;
	}
	return f;
}

/* One line of the file (NUL-terminated, length len as read): applied to
 * cfg, or -1 with a message naming path and lineno. */
static int load_line(txhub_config *cfg, char *line, size_t len, const char *path, int lineno,
                     char *err, size_t errsz)
{
	if (len > CONFIG_LINE_MAX) {
		snprintf(err, errsz, "%s:%d: line too long (over %d bytes)", path, lineno,
		         CONFIG_LINE_MAX);
		return -1;
	}
	/* a NUL would end the line for every string function below: a line
	 * of NULs would pass for blank and a value would be cut at it */
	if (memchr(line, '\0', len)) {
		snprintf(err, errsz, "%s:%d: NUL byte in the line", path, lineno);
		return -1;
	}
	char *s = trim(line);
	if (*s == '\0' || *s == '#')
		return 0;
	char *eq = strchr(s, '=');
	if (!eq) {
		snprintf(err, errsz, "%s:%d: expected \"key = value\"", path, lineno);
		return -1;
	}
	*eq = '\0';
	char *key = trim(s), *value = trim(eq + 1);
	char sub[512];
	if (config_set(cfg, key, value, sub, sizeof sub) != 0) {
		snprintf(err, errsz, "%s:%d: %s", path, lineno, sub);
		return -1;
	}
	return 0;
}

int config_load_file(txhub_config *cfg, const char *path, char *err, size_t errsz)
{
	FILE *f = open_config_file(path, err, errsz);
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;
	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (load_line(cfg, line, (size_t)len, path, ++lineno, err, errsz) != 0) {
			rc = -1;
			break;
		}
		errno = 0;
	}
	/* getline's -1 is the end of the file or an error: an error must not
	 * pass for the end (the keys after it would silently keep defaults) */
	if (rc == 0 && ferror(f)) {
		snprintf(err, errsz, "%s:%d: read error: %s", path, lineno + 1,
		         strerror(errno ? errno : EIO));
		rc = -1;
	}
	free(line);
	fclose(f);
	return rc;
}

int config_load_env(txhub_config *cfg, char *err, size_t errsz)
{
	for (const config_option *o = config_options; o->key; o++) {
		if (!o->env)
			continue;
		const char *v = getenv(o->env);
		if (!v)
			continue;
		char sub[512];
		if (set_option(cfg, o, v, sub, sizeof sub) != 0) {
			snprintf(err, errsz, "%s (from %s)", sub, o->env);
			return -1;
		}
	}
	return 0;
}

/* checkback.allow and checkback.default_url, read by the same parser the
 * check-back thread uses, so that an entry that could never hold a URL, or
 * a default URL the list refuses, stops the start instead of failing every
 * check-back later. */
static int check_checkback_urls(const txhub_config *cfg, char *err, size_t errsz)
{
	char why[400];
	if (checkback_allow_validate(cfg->checkback_allow, why, sizeof why) != 0) {
		snprintf(err, errsz, "checkback.allow: %s", why);
		return -1;
	}
	if (!*cfg->checkback_default_url)
		return 0;
	checkback_url u;
	if (checkback_url_parse(cfg->checkback_default_url, &u, why, sizeof why) != 0) {
		snprintf(err, errsz, "checkback.default_url: must be an http:// or https:// URL: %s",
		         why);
		return -1;
	}
	int inside = checkback_url_permitted(cfg->checkback_allow, &u, why, sizeof why);
	checkback_url_clear(&u);
	if (!inside) {
		snprintf(err, errsz, "checkback.default_url: outside checkback.allow: %s", why);
		return -1;
	}
	return 0;
}

/* control_topic (topics.h) and, for exactly_once, its progress topic:
 * never one of the control topics, or the hub would read its own markers
 * as envelopes. */
static int check_control_topics(const txhub_config *cfg, char *err, size_t errsz)
{
	topics_spec spec;
	char sub[512], progress[300];
	int rc = -1;
	if (topics_parse(cfg->control_topic, &spec, sub, sizeof sub) != 0) {
		snprintf(err, errsz, "control_topic: %s", sub);
		goto done;
	}
	topics_progress_name(&spec, cfg->forward_progress_topic, progress, sizeof progress);
	if (*cfg->forward_progress_topic &&
	    !txhubi_topic_valid(cfg->forward_progress_topic, strlen(cfg->forward_progress_topic))) {
		snprintf(err, errsz, "forward.progress_topic: \"%s\" is not a valid topic name",
		         cfg->forward_progress_topic);
		goto done;
	}
	if (topics_match(&spec, progress)) {
		snprintf(err, errsz, "control_topic: names the progress topic %s (forward.progress_topic)",
		         progress);
		goto done;
	}
	const char *dlq = cfg->forward_dead_letter_topic;
	if (*dlq && (topics_match(&spec, dlq) || strcmp(dlq, progress) == 0)) {
		snprintf(err, errsz, "forward.dead_letter_topic: \"%s\" names %s", dlq,
		         topics_match(&spec, dlq) ? "a control topic" : "the progress topic");
		goto done;
	}
	rc = 0;
done:
	topics_free(&spec);
	return rc;
}

int config_validate(const txhub_config *cfg, char *err, size_t errsz)
{
	/* (booleans, enumerations and durations are checked as they are set) */
	char sub[512];
	if (*cfg->http_listen && http_listen_valid(cfg->http_listen, sub, sizeof sub) != 0) {
		snprintf(err, errsz, "http.listen: %s", sub);
		return -1;
	}
	if (cfg->http_max_per_address > cfg->http_max_connections) {
		snprintf(err, errsz, "http.max_connections_per_address: must be <= "
		                     "http.max_connections");
		return -1;
	}
	if (cfg->console_max_per_address > cfg->console_max_connections) {
		snprintf(err, errsz, "console.max_connections_per_address: must be <= "
		                     "console.max_connections");
		return -1;
	}
	if (http_listen_valid(cfg->console_listen, sub, sizeof sub) != 0) {
		snprintf(err, errsz, "console.listen: %s", sub);
		return -1;
	}
	if (!*cfg->brokers) {
		snprintf(err, errsz, "brokers: must not be empty");
		return -1;
	}
	if (check_control_topics(cfg, err, errsz) != 0)
		return -1;
	if (!*cfg->group) {
		snprintf(err, errsz, "group: must not be empty");
		return -1;
	}
	dbid adopt;
	if (*cfg->pg_adopt_from && dbid_parse(cfg->pg_adopt_from, &adopt) != 0) {
		snprintf(err, errsz, "pg.adopt_from: \"%s\" is not <system identifier>/<database "
		         "name> (e.g. 7301234567890123456/orders)", cfg->pg_adopt_from);
		return -1;
	}
	if (cfg->checkback_backoff_max_ms < cfg->checkback_backoff_ms) {
		snprintf(err, errsz, "checkback.backoff_max_ms: must be >= checkback.backoff_ms");
		return -1;
	}
	if (cfg->forward_backoff_max_ms < cfg->forward_backoff_ms) {
		snprintf(err, errsz, "forward.backoff_max_ms: must be >= forward.backoff_ms");
		return -1;
	}
	if (*cfg->forward_progress_topic &&
	    !txhubi_topic_valid(cfg->forward_progress_topic, strlen(cfg->forward_progress_topic))) {
		snprintf(err, errsz, "forward.progress_topic: \"%s\" is not a valid topic name "
		                     "(1..249 of a-z A-Z 0-9 . _ -, not . or ..)",
		         cfg->forward_progress_topic);
		return -1;
	}
	const char *dlq = cfg->forward_dead_letter_topic;
	if (*dlq && (!txhubi_topic_valid(dlq, strlen(dlq)) ||
	             envelope_reserved_topic(dlq, strlen(dlq)))) {
		snprintf(err, errsz, "forward.dead_letter_topic: \"%s\" is not a valid topic name "
		                     "(1..249 of a-z A-Z 0-9 . _ -, not . or .., not beginning with __)",
		         dlq);
		return -1;
	}
	if (check_checkback_urls(cfg, err, errsz) != 0)
		return -1;
	if (*cfg->alert_webhook && !envelope_valid_url(cfg->alert_webhook)) {
		snprintf(err, errsz, "alert.webhook: must be an http:// or https:// URL");
		return -1;
	}
	return 0;
}

static int same_option(const config_option *o, const txhub_config *a, const txhub_config *b)
{
	const void *fa = (const char *)a + o->offset, *fb = (const char *)b + o->offset;
	if (o->type == CONFIG_STRING || o->type == CONFIG_DURATION)
		return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
	return *(const int64_t *)fa == *(const int64_t *)fb;
}

static int same_kafka(const txhub_config *a, const txhub_config *b)
{
	if (a->kafka_cnt != b->kafka_cnt)
		return 0;
	for (size_t i = 0; i < a->kafka_cnt; i++)
		if (strcmp(a->kafka[i].key, b->kafka[i].key) != 0 ||
		    strcmp(a->kafka[i].value, b->kafka[i].value) != 0)
			return 0;
	return 1;
}

static void note_changed(char *changed, size_t changedsz, const char *key)
{
	size_t l = strlen(changed);
	snprintf(changed + l, changedsz - l, "%s%s", l ? ", " : "", key);
}

int config_keep_fixed(const txhub_config *running, txhub_config *next, char *changed,
                      size_t changedsz)
{
	changed[0] = '\0';
	char err[256];
	for (const config_option *o = config_options; o->key; o++) {
		if (o->live || same_option(o, running, next))
			continue;
		note_changed(changed, changedsz, o->key);
		void *f = (char *)running + o->offset;
		if (o->type == CONFIG_STRING || o->type == CONFIG_DURATION) {
			if (set_option(next, o, *(char **)f, err, sizeof err) != 0)
				return -1;
		} else {
			*(int64_t *)((char *)next + o->offset) = *(int64_t *)f;
		}
	}
	if (same_kafka(running, next))
		return 0;
	note_changed(changed, changedsz, "kafka.*");
	for (size_t i = 0; i < next->kafka_cnt; i++) {
		free(next->kafka[i].key);
		free(next->kafka[i].value);
	}
	next->kafka_cnt = 0;
	for (size_t i = 0; i < running->kafka_cnt; i++) {
		char key[512];
		snprintf(key, sizeof key, "kafka.%s", running->kafka[i].key);
		if (config_set(next, key, running->kafka[i].value, err, sizeof err) != 0)
			return -1;
	}
	return 0;
}

void config_apply_logging(const txhub_config *cfg)
{
	/* the rows' values are in log.h's order */
	log_set_level((log_level)cfg->log_level);
	log_set_format((log_format)cfg->log_format);
}

void config_write_example(FILE *out)
{
	fprintf(out, "# txhub configuration: \"key = value\" lines, '#' starts a comment.\n"
	             "# Every key is shown with its default. Environment variables (named\n"
	             "# below) override this file; -X key=value overrides both.\n"
	             "# Keys starting with kafka. go to librdkafka, e.g.:\n"
	             "# kafka.security.protocol = SASL_SSL\n");
	for (const config_option *o = config_options; o->key; o++) {
		fprintf(out, "\n# %s", o->doc);
		if (o->env)
			fprintf(out, " (environment: %s)", o->env);
		if (o->live)
			fprintf(out, " (SIGHUP applies it to a running hub)");
		fprintf(out, "\n# %s =%s%s\n", o->key, *o->def ? " " : "", o->def);
	}
}

void config_write_help(FILE *out)
{
	int width = 0; /* the longest key's */
	for (const config_option *o = config_options; o->key; o++)
		if ((int)strlen(o->key) > width)
			width = (int)strlen(o->key);
	for (const config_option *o = config_options; o->key; o++) {
		char def[64];
		snprintf(def, sizeof def, "%s", *o->def ? o->def : "(empty)");
		fprintf(out, "  %-*s %-16s %s%s%s\n", width, o->key, def, o->doc,
		        o->env ? "; env " : "", o->env ? o->env : "");
	}
}

void config_free(txhub_config *cfg)
{
	if (!cfg)
		return;
	for (const config_option *o = config_options; o->key; o++) {
		if (o->type == CONFIG_STRING || o->type == CONFIG_DURATION) {
			char **f = (char **)((char *)cfg + o->offset);
			free(*f);
			*f = NULL;
		}
	}
	for (size_t i = 0; i < cfg->kafka_cnt; i++) {
		free(cfg->kafka[i].key);
		free(cfg->kafka[i].value);
	}
	free(cfg->kafka);
	cfg->kafka = NULL;
	cfg->kafka_cnt = cfg->kafka_cap = 0;
}

/* ---- shared after a reload ---- */

struct config_refs {
	atomic_int n;
};

int config_share(txhub_config *cfg)
{
	struct config_refs *r = malloc(sizeof *r);
	if (!r)
		return -1;
	atomic_init(&r->n, 1);
	cfg->refs = r;
	return 0;
}

const txhub_config *config_hold(const txhub_config *cfg)
{
	if (cfg && cfg->refs)
		atomic_fetch_add(&cfg->refs->n, 1);
	return cfg;
}

void config_drop(const txhub_config *cfg)
{
	if (!cfg || !cfg->refs || atomic_fetch_sub(&cfg->refs->n, 1) != 1)
		return;
	txhub_config *own = (txhub_config *)cfg; /* the last reference: nothing else reads it */
	free(own->refs);
	config_free(own);
	free(own);
	log_debug("config: a configuration a reload replaced is freed (nothing holds it any more)");
}
