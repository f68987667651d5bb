/* metrics.c: see metrics.h. Plain C11 atomics: counters only ever grow,
 * so a reader that sees a histogram's buckets a moment apart from its
 * count prints a scrape that is off by the observations in between, which
 * Prometheus tolerates. */
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alert.h"
#include "array.h"

#ifndef TXHUB_VERSION
#define TXHUB_VERSION "0.0.0"
#endif

typedef _Atomic uint64_t counter;

static const char *type_names[METRICS_NTYPES] = {"prepare", "commit", "rollback", "invalid"};
static const char *outcome_names[METRICS_NOUTCOMES] = {"applied", "rejected", "conflict",
                                                       "duplicate"};
static const char *cb_names[METRICS_CB_NOUTCOMES] = {"committed", "rolled_back", "undecided",
                                                     "error", "not_requested"};
static const char *fw_names[METRICS_FW_NOUTCOMES] = {"sent", "retried", "failed"};
/* alert.h's kinds, then "other" (any kind not there) */
#define NALERTS (ALERT_NKINDS + 1)
static const char *alert_name(size_t i) { return i < ALERT_NKINDS ? alert_kinds[i].kind : "other"; }

/* docs/monitoring.md: Metrics and health lists these (txhub reference metrics) */
const metrics_metric metrics_table[] = {
	{"txhub_envelopes_total", "counter", "type,outcome,tenant",
	 "Control records by envelope type, what applying them did, and the "
	 "tenant of the topic they arrived on.",
	 "control records applied, by `type` (`prepare`, `commit`, `rollback`, "
	 "or `invalid` for records that are not a valid envelope), `outcome` (`applied`: "
	 "changed a state; `duplicate`: a no-op; `conflict`; `rejected`) and `tenant` (of "
	 "the topic it arrived on; `\"\"`: none; see [Sharing one hub between "
	 "teams](tenants.md#sharing-one-hub-between-teams))"},
	{"txhub_checkbacks_total", "counter", "outcome,tenant",
	 "Check-backs by outcome and tenant.",
	 "check-backs: `committed`, `rolled_back`, `undecided`, `error`, "
	 "`not_requested` (no URL, outside the allow list); `tenant`: the message's"},
	{"txhub_forwards_total", "counter", "outcome,tenant",
	 "Forward delivery attempts by outcome and tenant.",
	 "delivery reports: `sent`, `retried` (failed, tried again), `failed` "
	 "(failed for good); `tenant`: the message's"},
	{"txhub_database_errors_total", "counter", "",
	 "Failed PostgreSQL operations.",
	 NULL},
	{"txhub_database_rewinds_total", "counter", "",
	 "Partitions read again because PostgreSQL lost its last transactions.",
	 "control partitions read again because PostgreSQL lost its last "
	 "transactions ([When PostgreSQL fails "
	 "over](database.md#when-postgresql-fails-over))"},
	{"txhub_database_rewound_offsets_total", "counter", "",
	 "Control-topic offsets read again because PostgreSQL lost them.",
	 "the offsets read again because PostgreSQL lost its last transactions "
	 "([When PostgreSQL fails over](database.md#when-postgresql-fails-over))"},
	{"txhub_forwards_after_rewind_total", "counter", "outcome",
	 "exactly_once: messages applied again after PostgreSQL lost them, by "
	 "what their progress marker said: already_sent (not forwarded again), sent_again "
	 "(possibly a duplicate); decided_again: decided again by a check-back or an "
	 "operator after the database lost the first decision (possibly a duplicate).",
	 "`exactly_once`: messages applied again (or set back) by such a loss "
	 "that their progress marker shows forwarded already (`already_sent`, stored as "
	 "sent, not forwarded again) or cannot vouch for (`sent_again`: forwarded, possibly "
	 "a second time), and messages decided again by a check-back or an operator whose "
	 "first decision the database lost (`decided_again`: possibly a second time)"},
	{"txhub_kafka_errors_total", "counter", "",
	 "Errors reported by librdkafka.",
	 "errors librdkafka reported"},
	{"txhub_trace_context_dropped_total", "counter", "reason",
	 "Envelopes whose trace context was malformed and dropped (the message "
	 "was kept): reason trace (not an object), traceparent (it and its tracestate), "
	 "tracestate.",
	 "envelopes whose malformed trace context was dropped (the message was "
	 "kept): `trace` (not an object), `traceparent` (it and its tracestate), "
	 "`tracestate` (it alone); what is dropped: [Trace "
	 "context](producers.md#trace-context)"},
	{"txhub_dead_letters_total", "counter", "outcome",
	 "Parked forwards produced to forward.dead_letter_topic (sent), and "
	 "attempts to that failed (failed; tried again).",
	 "parked forwards produced to `forward.dead_letter_topic` (`sent`), "
	 "attempts that failed (`failed`, tried again); see [Dead-letter "
	 "topic](troubleshooting.md#dead-letter-topic)"},
	{"txhub_alerts_total", "counter", "kind",
	 "Alerts raised, by kind.",
	 "alerts raised, by kind (the kinds: [Alerts](producers.md#alerts); "
	 "`other`: none of them)"},
	{"txhub_control_records_lost_total", "counter", "topic,partition",
	 "Control-topic offsets the broker deleted before a hub read them, "
	 "skipped by this hub.",
	 "control-topic offsets the broker deleted before a hub read them, "
	 "skipped by this hub (0 for each partition it owned; see [Control records the "
	 "broker deleted](troubleshooting.md#control-records-the-broker-deleted))"},
	{"txhub_checkback_duration_seconds", "histogram", "",
	 "Time from sending a check-back request to its answer or error.",
	 "request to answer or error"},
	{"txhub_forward_duration_seconds", "histogram", "",
	 "Time from producing a forward to its delivery report.",
	 "produce to delivery report"},
	{"txhub_commit_to_forward_seconds", "histogram", "",
	 "Time from a decision applied to its first forward confirmed by the "
	 "broker.",
	 "decision applied (committed in PostgreSQL) to its first forward "
	 "confirmed by the broker"},
	{"txhub_batch_records", "histogram", "",
	 "Control records applied per PostgreSQL transaction.",
	 "records per PostgreSQL transaction"},
	{"txhub_owned_partitions", "gauge", "",
	 "Control-topic partitions this replica owns.",
	 "partitions this replica owns"},
	{"txhub_ready", "gauge", "",
	 "1 when /readyz answers 200.",
	 "1 when `/readyz` is 200"},
	{"txhub_forward_lanes_stuck", "gauge", "",
	 "exactly_once: owned partitions their lane has not taken for "
	 "alert.lane_stuck_ms or more.",
	 "`exactly_once`: owned partitions their lane has not taken for "
	 "`alert.lane_stuck_ms` or more (0 in `at_least_once`)"},
	{"txhub_tenant_rules_age_seconds", "gauge", "",
	 "Seconds since the tenant rules in force were last found current in "
	 "txhub.tenants; grows while the table cannot be read or its rows do not pass.",
	 "seconds since a read of `txhub.tenants` last found the tenant rules "
	 "in force current (a few seconds while it reads, every 2 s; it grows while the "
	 "table cannot be read or its rows do not pass, the last good rules staying in "
	 "force: [Sharing one hub between "
	 "teams](tenants.md#sharing-one-hub-between-teams)); absent before the first good "
	 "load"},
	{"txhub_consumer_lag", "gauge", "topic,partition",
	 "Records of an owned control-topic partition not read yet.",
	 "records of an owned control partition not read yet (librdkafka's "
	 "cached high watermark minus the consumer's position; refreshed every second)"},
	{"txhub_messages", "gauge", "status",
	 "Rows of txhub.messages by status.",
	 "rows by status, read from PostgreSQL at most every 10 s"},
	{"txhub_parked", "gauge", "",
	 "Rows that need an operator: check_failed, send_status failed, "
	 "awaiting_prepare too long.",
	 "rows that need an operator: `check_failed`, `send_status = failed`, "
	 "and `awaiting_prepare` older than `alert.awaiting_prepare_ms`"},
	{"txhub_blocked_messages", "gauge", "",
	 "Messages held for an earlier unsent message of their forward key "
	 "(forward.order = key).",
	 "`forward.order = key`: messages held for an earlier unsent message of "
	 "their forward key, read from PostgreSQL at most every 10 s"},
	{"txhub_oldest_prepared_age_seconds", "gauge", "",
	 "Age of the oldest prepared row (0: none).",
	 "age of the oldest `prepared` row (0: none)"},
	{"txhub_oldest_pending_send_age_seconds", "gauge", "",
	 "Age of the oldest committed row waiting to be forwarded (0: none).",
	 "age of the oldest `pending` send (0: none; a "
	 "[delayed](consumers.md#delayed-delivery) message counts from its due time)"},
	{"txhub_scheduled_messages", "gauge", "",
	 "Committed messages waiting for their due time (forward.not_before, "
	 "forward.delay_ms).",
	 "[scheduled](consumers.md#delayed-delivery) messages: committed, due "
	 "later, not sent"},
	{"txhub_scheduled_overdue_seconds", "gauge", "",
	 "How long the oldest delayed message that is due has waited past its "
	 "due time without being sent (0: none).",
	 "how long the oldest delayed message that is due has waited past its "
	 "due time without being sent (0: none; a second or two while the scan takes it, "
	 "more when forwards fail or the hub is behind)"},
	{"txhub_build_info", "gauge", "version",
	 "The running version.",
	 "the running version, in its label"},
	{"process_cpu_seconds_total", "counter", "",
	 "User and system CPU time.",
	 NULL},
	{"process_resident_memory_bytes", "gauge", "",
	 "Resident memory.",
	 NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

/* Upper bounds of the latency buckets, in ms. */
static const int64_t latency_le_ms[METRICS_LATENCY_BUCKETS] = {
	1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 20000, 30000, 60000};
/* ... and of the batch-size buckets, in records. */
#define BATCH_BUCKETS 10
static const int64_t batch_le[BATCH_BUCKETS] = {1, 5, 10, 50, 100, 250, 500, 1000, 2000, 5000};

typedef struct {
	counter bucket[METRICS_LATENCY_BUCKETS + 1];
	counter count, sum_us;
} latency;

#define MAX_LAG 1024 /* partitions shown in txhub_consumer_lag */
#define MAX_LOST 1024 /* ... and in txhub_control_records_lost_total */

_Static_assert(METRICS_NTYPES * METRICS_NOUTCOMES <= METRICS_TALLY_WIDTH,
               "an envelope tally row holds every type and outcome");
_Static_assert(METRICS_FW_NOUTCOMES <= METRICS_TALLY_WIDTH, "a forward tally row");

#define TENANT_LABEL_MAX 64 /* a tenant's name: at most 63 bytes (tenant_rules.h) */

static struct registry {
	/* by tenant label: slot 0 is tenant="", METRICS_TENANT_OTHER "_other" */
	counter envelopes[METRICS_TENANT_SLOTS][METRICS_NTYPES][METRICS_NOUTCOMES];
	counter batch_bucket[BATCH_BUCKETS + 1], batch_count, batch_sum;
	counter checkbacks[METRICS_TENANT_SLOTS][METRICS_CB_NOUTCOMES];
	latency checkback_latency, forward_latency, commit_latency;
	counter forwards[METRICS_TENANT_SLOTS][METRICS_FW_NOUTCOMES];
	_Atomic int other_used; /* some name counted under "_other" */
	counter database_errors, kafka_errors;
	counter trace_dropped[3], dead_letters[2]; /* (trace_reasons), sent/failed */
	counter rewinds, rewound_offsets, after_rewind[3];
	counter alerts[NALERTS];
	_Atomic int64_t owned, ready, lanes_stuck;
	_Atomic double rules_age_s; /* the tenant rules in force; < 0: none loaded */
	_Atomic int64_t by_status[5], parked, sampled;
	_Atomic int64_t blocked; /* forward.order = key: messages held for their key */
	_Atomic double oldest_prepared_s, oldest_pending_send_s;
	_Atomic int64_t scheduled;
	_Atomic double oldest_overdue_s;
	pthread_mutex_t lag_mu; /* the lag table: set every few seconds */
	tp_key lag_partition[MAX_LAG];
	int64_t lag[MAX_LAG];
	size_t nlag;
	/* txhub_control_records_lost_total, sorted by partition: every
	 * partition ever counted, at 0 too (guarded by lag_mu too) */
	tp_key lost_partition[MAX_LOST];
	uint64_t lost[MAX_LOST];
	size_t nlost;
	/* the tenant labels: names[1..ntenants] are slots 1..ntenants, written
	 * once each under tenant_mu; ntenants grows only, read without it */
	pthread_mutex_t tenant_mu;
	char tenant_names[METRICS_TENANTS_MAX + 1][TENANT_LABEL_MAX];
	_Atomic size_t ntenants;
} m = {.rules_age_s = -1, .lag_mu = PTHREAD_MUTEX_INITIALIZER,
       .tenant_mu = PTHREAD_MUTEX_INITIALIZER};

static void add(counter *c, uint64_t v)
{
	if (v)
		atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static uint64_t get(counter *c) { return atomic_load_explicit(c, memory_order_relaxed); }

metrics_tenant metrics_tenant_of(const char *name)
{
	if (!name || !*name)
		return 0;
	pthread_mutex_lock(&m.tenant_mu);
	size_t n = atomic_load_explicit(&m.ntenants, memory_order_relaxed);
	metrics_tenant t = METRICS_TENANT_OTHER;
	for (size_t i = 1; i <= n; i++)
		if (strcmp(m.tenant_names[i], name) == 0) {
			t = (metrics_tenant)i;
			goto done;
		}
	if (n < METRICS_TENANTS_MAX && strlen(name) < TENANT_LABEL_MAX) {
		snprintf(m.tenant_names[n + 1], TENANT_LABEL_MAX, "%s", name);
		atomic_store_explicit(&m.ntenants, n + 1, memory_order_release);
		t = (metrics_tenant)(n + 1);
	} else {
		atomic_store_explicit(&m.other_used, 1, memory_order_relaxed);
	}
done:
	pthread_mutex_unlock(&m.tenant_mu);
	return t;
}

uint64_t *metrics_tally_row_of(metrics_tally *t, metrics_tenant tenant)
{
	if (tenant >= METRICS_TENANT_SLOTS)
		tenant = METRICS_TENANT_OTHER;
	if (t->row_of[tenant])
		return t->rows[t->row_of[tenant] - 1].n;
	metrics_tally_row *grown = array_grow(t->rows, &t->cap, t->nrows + 1, sizeof *grown);
	if (!grown)
		return NULL;
	t->rows = grown;
	metrics_tally_row *r = &t->rows[t->nrows++];
	memset(r, 0, sizeof *r);
	r->tenant = tenant;
	t->row_of[tenant] = (uint16_t)t->nrows;
	return r->n;
}

void metrics_tally_free(metrics_tally *t)
{
	free(t->rows);
	memset(t, 0, sizeof *t);
}

void metrics_add_envelopes(const metrics_envelopes *e)
{
	for (size_t r = 0; r < e->nrows; r++)
		for (int t = 0; t < METRICS_NTYPES; t++)
			for (int o = 0; o < METRICS_NOUTCOMES; o++)
				add(&m.envelopes[e->rows[r].tenant][t][o],
				    e->rows[r].n[t * METRICS_NOUTCOMES + o]);
}

void metrics_observe_batch(size_t records)
{
	int b = 0;
	while (b < BATCH_BUCKETS && (int64_t)records > batch_le[b])
		b++;
	add(&m.batch_bucket[b], 1);
	add(&m.batch_count, 1);
	add(&m.batch_sum, records);
}

static int latency_bucket(int64_t ms)
{
	int b = 0;
	while (b < METRICS_LATENCY_BUCKETS && ms > latency_le_ms[b])
		b++;
	return b;
}

void metrics_checkback_done(metrics_tenant t, metrics_checkback outcome, int64_t duration_ms)
{
	add(&m.checkbacks[t < METRICS_TENANT_SLOTS ? t : METRICS_TENANT_OTHER][outcome], 1);
	if (outcome == METRICS_CB_NOT_REQUESTED)
		return;
	if (duration_ms < 0)
		duration_ms = 0;
	add(&m.checkback_latency.bucket[latency_bucket(duration_ms)], 1);
	add(&m.checkback_latency.count, 1);
	add(&m.checkback_latency.sum_us, (uint64_t)duration_ms * 1000);
}

void metrics_forwards_observe(uint64_t *bucket, uint64_t *count, uint64_t *sum_us, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	bucket[latency_bucket(ms)]++;
	(*count)++;
	*sum_us += (uint64_t)ms * 1000;
}

static void add_latency(latency *l, const uint64_t *bucket, uint64_t count, uint64_t sum_us)
{
	for (int b = 0; b <= METRICS_LATENCY_BUCKETS; b++)
		add(&l->bucket[b], bucket[b]);
	add(&l->count, count);
	add(&l->sum_us, sum_us);
}

void metrics_forwards_count(metrics_forwards *f, metrics_tenant t, metrics_forward o, int64_t n)
{
	uint64_t *row = metrics_tally_row_of(&f->outcomes, t);
	if (!row)
		return;
	if (n < 0 && row[o] < (uint64_t)-n)
		row[o] = 0;
	else
		row[o] += (uint64_t)n; /* (wraps back for a negative n) */
}

void metrics_add_forwards(const metrics_forwards *f)
{
	for (size_t r = 0; r < f->outcomes.nrows; r++)
		for (int o = 0; o < METRICS_FW_NOUTCOMES; o++)
			add(&m.forwards[f->outcomes.rows[r].tenant][o], f->outcomes.rows[r].n[o]);
	add_latency(&m.forward_latency, f->produce_bucket, f->produce_count, f->produce_sum_us);
	add_latency(&m.commit_latency, f->commit_bucket, f->commit_count, f->commit_sum_us);
}

void metrics_database_error(void) { add(&m.database_errors, 1); }

static const char *trace_reasons[3] = {"trace", "traceparent", "tracestate"};

void metrics_trace_dropped(const char *reason)
{
	size_t i = 0;
	while (i < 2 && strcmp(trace_reasons[i], reason) != 0)
		i++;
	add(&m.trace_dropped[i], 1);
}

void metrics_dead_letters(int ok, uint64_t n) { add(&m.dead_letters[ok ? 0 : 1], n); }
void metrics_kafka_error(void) { add(&m.kafka_errors, 1); }

void metrics_forwards_after_rewind(uint64_t already_sent, uint64_t sent_again)
{
	add(&m.after_rewind[0], already_sent);
	add(&m.after_rewind[1], sent_again);
}

void metrics_forwards_decided_again(uint64_t n) { add(&m.after_rewind[2], n); }

void metrics_database_rewound(uint64_t partitions, uint64_t offsets)
{
	add(&m.rewinds, partitions);
	add(&m.rewound_offsets, offsets);
}

void metrics_alert(const char *kind)
{
	size_t i = 0;
	while (i < NALERTS - 1 && strcmp(alert_kinds[i].kind, kind) != 0)
		i++;
	add(&m.alerts[i], 1);
}

void metrics_set_owned_partitions(size_t n)
{
	atomic_store_explicit(&m.owned, (int64_t)n, memory_order_relaxed);
}

/* The lost counter of partition p, made (at 0) when missing; NULL when
 * the table is full. The caller holds lag_mu. */
static uint64_t *lost_of(tp_key p)
{
	size_t i = 0;
	while (i < m.nlost && m.lost_partition[i] < p)
		i++;
	if (i < m.nlost && m.lost_partition[i] == p)
		return &m.lost[i];
	if (m.nlost == MAX_LOST)
		return NULL;
	memmove(&m.lost_partition[i + 1], &m.lost_partition[i],
	        (m.nlost - i) * sizeof m.lost_partition[0]);
	memmove(&m.lost[i + 1], &m.lost[i], (m.nlost - i) * sizeof m.lost[0]);
	m.nlost++;
	m.lost_partition[i] = p;
	m.lost[i] = 0;
	return &m.lost[i];
}

void metrics_set_lag(const tp_key *partitions, const int64_t *lag, size_t n)
{
	pthread_mutex_lock(&m.lag_mu);
	m.nlag = n < MAX_LAG ? n : MAX_LAG;
	memcpy(m.lag_partition, partitions, m.nlag * sizeof *partitions);
	memcpy(m.lag, lag, m.nlag * sizeof *lag);
	pthread_mutex_unlock(&m.lag_mu);
}

void metrics_control_records_lost(tp_key partition, uint64_t offsets)
{
	pthread_mutex_lock(&m.lag_mu);
	uint64_t *c = lost_of(partition);
	if (c)
		*c += offsets;
	pthread_mutex_unlock(&m.lag_mu);
}

void metrics_set_sample(const metrics_sample *s)
{
	for (int i = 0; i < 5; i++)
		atomic_store(&m.by_status[i], s->by_status[i]);
	atomic_store(&m.parked, s->parked);
	atomic_store(&m.blocked, s->blocked);
	atomic_store(&m.oldest_prepared_s, s->oldest_prepared_s);
	atomic_store(&m.oldest_pending_send_s, s->oldest_pending_send_s);
	atomic_store(&m.scheduled, s->scheduled);
	atomic_store(&m.oldest_overdue_s, s->oldest_overdue_s);
	atomic_store(&m.sampled, 1);
}

void metrics_set_ready(int ready) { atomic_store(&m.ready, ready ? 1 : 0); }
void metrics_set_lanes_stuck(size_t n) { atomic_store(&m.lanes_stuck, (int64_t)n); }
void metrics_set_tenant_rules_age(int64_t ms)
{
	atomic_store(&m.rules_age_s, ms < 0 ? -1.0 : (double)ms / 1000.0);
}

/* ---- exposition ---- */

/* A metric's HELP and TYPE lines, from metrics_table (a name missing
 * there is shown untyped, without help: the unit tests fail on it). */
static void head(sbuf *o, const char *name)
{
	const metrics_metric *r = metrics_table;
	while (r->name && strcmp(r->name, name) != 0)
		r++;
	sbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, r->name ? r->help : "",
	            name, r->name ? r->type : "untyped");
}

/* A gauge of seconds whose negative value means none (written as 0). */
static void write_age(sbuf *o, const char *name, _Atomic double *age)
{
	head(o, name);
	double a = atomic_load(age);
	sbuf_printf(o, "%s %.3f\n", name, a < 0 ? 0.0 : a);
}

static void write_latency(sbuf *o, const char *name, latency *l)
{
	head(o, name);
	uint64_t cum = 0;
	for (int b = 0; b <= METRICS_LATENCY_BUCKETS; b++) {
		cum += get(&l->bucket[b]);
		if (b < METRICS_LATENCY_BUCKETS)
			sbuf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name,
			            (double)latency_le_ms[b] / 1000.0, (unsigned long long)cum);
		else
			sbuf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
	}
	sbuf_printf(o, "%s_sum %.6f\n%s_count %llu\n", name, (double)get(&l->sum_us) / 1e6, name,
	            (unsigned long long)cum);
}

/* The tenant label of slot s, or NULL when s shows no series: "" always,
 * the names taken so far, "_other" once a name went there. */
static const char *tenant_label(size_t s, size_t ntenants)
{
	if (s == 0)
		return "";
	if (s <= ntenants)
		return m.tenant_names[s];
	if (s == METRICS_TENANT_OTHER && atomic_load_explicit(&m.other_used, memory_order_relaxed))
		return "_other";
	return NULL;
}

static void write_counters(sbuf *o)
{
	size_t nt = atomic_load_explicit(&m.ntenants, memory_order_acquire);
	head(o, "txhub_envelopes_total");
	for (size_t s = 0; s < METRICS_TENANT_SLOTS; s++) {
		const char *tn = tenant_label(s, nt);
		for (int t = 0; tn && t < METRICS_NTYPES; t++)
			for (int x = 0; x < METRICS_NOUTCOMES; x++)
				sbuf_printf(o,
				            "txhub_envelopes_total{type=\"%s\",outcome=\"%s\",tenant=\"%s\"} "
				            "%llu\n", type_names[t], outcome_names[x], tn,
				            (unsigned long long)get(&m.envelopes[s][t][x]));
	}
	head(o, "txhub_checkbacks_total");
	for (size_t s = 0; s < METRICS_TENANT_SLOTS; s++) {
		const char *tn = tenant_label(s, nt);
		for (int x = 0; tn && x < METRICS_CB_NOUTCOMES; x++)
			sbuf_printf(o, "txhub_checkbacks_total{outcome=\"%s\",tenant=\"%s\"} %llu\n",
			            cb_names[x], tn, (unsigned long long)get(&m.checkbacks[s][x]));
	}
	head(o, "txhub_forwards_total");
	for (size_t s = 0; s < METRICS_TENANT_SLOTS; s++) {
		const char *tn = tenant_label(s, nt);
		for (int x = 0; tn && x < METRICS_FW_NOUTCOMES; x++)
			sbuf_printf(o, "txhub_forwards_total{outcome=\"%s\",tenant=\"%s\"} %llu\n",
			            fw_names[x], tn, (unsigned long long)get(&m.forwards[s][x]));
	}
	head(o, "txhub_database_errors_total");
	sbuf_printf(o, "txhub_database_errors_total %llu\n",
	            (unsigned long long)get(&m.database_errors));
	head(o, "txhub_database_rewinds_total");
	sbuf_printf(o, "txhub_database_rewinds_total %llu\n", (unsigned long long)get(&m.rewinds));
	head(o, "txhub_database_rewound_offsets_total");
	sbuf_printf(o, "txhub_database_rewound_offsets_total %llu\n",
	            (unsigned long long)get(&m.rewound_offsets));
	head(o, "txhub_forwards_after_rewind_total");
	sbuf_printf(o, "txhub_forwards_after_rewind_total{outcome=\"already_sent\"} %llu\n",
	            (unsigned long long)get(&m.after_rewind[0]));
	sbuf_printf(o, "txhub_forwards_after_rewind_total{outcome=\"sent_again\"} %llu\n",
	            (unsigned long long)get(&m.after_rewind[1]));
	sbuf_printf(o, "txhub_forwards_after_rewind_total{outcome=\"decided_again\"} %llu\n",
	            (unsigned long long)get(&m.after_rewind[2]));
	head(o, "txhub_kafka_errors_total");
	sbuf_printf(o, "txhub_kafka_errors_total %llu\n", (unsigned long long)get(&m.kafka_errors));
	head(o, "txhub_trace_context_dropped_total");
	for (size_t i = 0; i < 3; i++)
		sbuf_printf(o, "txhub_trace_context_dropped_total{reason=\"%s\"} %llu\n",
		            trace_reasons[i], (unsigned long long)get(&m.trace_dropped[i]));
	head(o, "txhub_dead_letters_total");
	sbuf_printf(o, "txhub_dead_letters_total{outcome=\"sent\"} %llu\n",
	            (unsigned long long)get(&m.dead_letters[0]));
	sbuf_printf(o, "txhub_dead_letters_total{outcome=\"failed\"} %llu\n",
	            (unsigned long long)get(&m.dead_letters[1]));
	head(o, "txhub_alerts_total");
	for (size_t i = 0; i < NALERTS; i++)
		sbuf_printf(o, "txhub_alerts_total{kind=\"%s\"} %llu\n", alert_name(i),
		            (unsigned long long)get(&m.alerts[i]));
	head(o, "txhub_control_records_lost_total");
	pthread_mutex_lock(&m.lag_mu);
	for (size_t i = 0; i < m.nlost; i++)
		sbuf_printf(o, "txhub_control_records_lost_total{topic=\"%s\",partition=\"%d\"} %llu\n",
		            tp_topic(m.lost_partition[i]), tp_part(m.lost_partition[i]),
		            (unsigned long long)m.lost[i]);
	pthread_mutex_unlock(&m.lag_mu);
}

static void write_histograms(sbuf *o)
{
	write_latency(o, "txhub_checkback_duration_seconds", &m.checkback_latency);
	write_latency(o, "txhub_forward_duration_seconds", &m.forward_latency);
	write_latency(o, "txhub_commit_to_forward_seconds", &m.commit_latency);
	head(o, "txhub_batch_records");
	uint64_t cum = 0;
	for (int b = 0; b <= BATCH_BUCKETS; b++) {
		cum += get(&m.batch_bucket[b]);
		if (b < BATCH_BUCKETS)
			sbuf_printf(o, "txhub_batch_records_bucket{le=\"%lld\"} %llu\n",
			            (long long)batch_le[b], (unsigned long long)cum);
		else
			sbuf_printf(o, "txhub_batch_records_bucket{le=\"+Inf\"} %llu\n",
			            (unsigned long long)cum);
	}
	sbuf_printf(o, "txhub_batch_records_sum %llu\ntxhub_batch_records_count %llu\n",
	            (unsigned long long)get(&m.batch_sum), (unsigned long long)cum);
}

static void write_gauges(sbuf *o)
{
	static const char *statuses[5] = {"prepared", "committed", "rolled_back", "check_failed",
	                                  "awaiting_prepare"};
	head(o, "txhub_owned_partitions");
	sbuf_printf(o, "txhub_owned_partitions %lld\n", (long long)atomic_load(&m.owned));
	head(o, "txhub_ready");
	sbuf_printf(o, "txhub_ready %lld\n", (long long)atomic_load(&m.ready));
	head(o, "txhub_forward_lanes_stuck");
	sbuf_printf(o, "txhub_forward_lanes_stuck %lld\n", (long long)atomic_load(&m.lanes_stuck));
	double age = atomic_load(&m.rules_age_s);
	if (age >= 0) { /* (none before the first good load: no made-up zero) */
		head(o, "txhub_tenant_rules_age_seconds");
		sbuf_printf(o, "txhub_tenant_rules_age_seconds %.3f\n", age);
	}
	head(o, "txhub_consumer_lag");
	pthread_mutex_lock(&m.lag_mu);
	for (size_t i = 0; i < m.nlag; i++)
		sbuf_printf(o, "txhub_consumer_lag{topic=\"%s\",partition=\"%d\"} %lld\n",
		            tp_topic(m.lag_partition[i]), tp_part(m.lag_partition[i]),
		            (long long)m.lag[i]);
	pthread_mutex_unlock(&m.lag_mu);
	if (!atomic_load(&m.sampled))
		return; /* PostgreSQL not sampled yet: no made-up zeros */
	head(o, "txhub_messages");
	for (int i = 0; i < 5; i++)
		sbuf_printf(o, "txhub_messages{status=\"%s\"} %lld\n", statuses[i],
		            (long long)atomic_load(&m.by_status[i]));
	head(o, "txhub_parked");
	sbuf_printf(o, "txhub_parked %lld\n", (long long)atomic_load(&m.parked));
	head(o, "txhub_blocked_messages");
	sbuf_printf(o, "txhub_blocked_messages %lld\n", (long long)atomic_load(&m.blocked));
	write_age(o, "txhub_oldest_prepared_age_seconds", &m.oldest_prepared_s);
	write_age(o, "txhub_oldest_pending_send_age_seconds", &m.oldest_pending_send_s);
	head(o, "txhub_scheduled_messages");
	sbuf_printf(o, "txhub_scheduled_messages %lld\n", (long long)atomic_load(&m.scheduled));
	write_age(o, "txhub_scheduled_overdue_seconds", &m.oldest_overdue_s);
}

static void write_process(sbuf *o)
{
	head(o, "txhub_build_info");
	sbuf_printf(o, "txhub_build_info{version=\"%s\"} 1\n", TXHUB_VERSION);
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		head(o, "process_cpu_seconds_total");
		sbuf_printf(o, "process_cpu_seconds_total %.3f\n",
		            (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	}
	FILE *f = fopen("/proc/self/statm", "r");
	long pages_total, pages_rss;
	if (f && fscanf(f, "%ld %ld", &pages_total, &pages_rss) == 2) {
		head(o, "process_resident_memory_bytes");
		sbuf_printf(o, "process_resident_memory_bytes %lld\n",
		            (long long)pages_rss * (long long)sysconf(_SC_PAGESIZE));
	}
	if (f)
		fclose(f);
}

void metrics_write(sbuf *out)
{
	write_counters(out);
	write_histograms(out);
	write_gauges(out);
	write_process(out);
}

void metrics_reset(void)
{
	pthread_mutex_lock(&m.lag_mu);
	m.nlag = 0;
	m.nlost = 0;
	pthread_mutex_unlock(&m.lag_mu);
	/* the atomics are plain memory when no other thread runs */
	size_t off = offsetof(struct registry, lag_mu);
	memset((void *)&m, 0, off);
	pthread_mutex_lock(&m.tenant_mu);
	atomic_store(&m.ntenants, 0);
	pthread_mutex_unlock(&m.tenant_mu);
}
