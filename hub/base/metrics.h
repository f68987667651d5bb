/* metrics.h: the hub's counters, gauges and histograms (docs/monitoring.md:
 * Metrics and health), and their Prometheus text exposition.
 *
 * One registry per process. Every update is a relaxed atomic add or store:
 * no lock and no allocation, from any thread. The hot paths update once
 * per batch (envelopes, delivery reports), not once per envelope.
 * metrics_write() may run concurrently with updates; each value it prints
 * is one that was current during the call. */
#ifndef TXHUB_METRICS_H
#define TXHUB_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sbuf.h"
#include "topics.h"

/* txhub_envelopes_total{type,outcome} */
typedef enum {
	METRICS_PREPARE,
	METRICS_COMMIT,
	METRICS_ROLLBACK,
	METRICS_INVALID, /* type="invalid": not a valid envelope */
	METRICS_NTYPES
} metrics_type;

typedef enum {
	METRICS_APPLIED,
	METRICS_REJECTED,
	METRICS_CONFLICT,
	METRICS_DUPLICATE, /* a no-op: the step was already applied or does nothing */
	METRICS_NOUTCOMES
} metrics_outcome;

/* The tenant label (docs/tenants.md: Sharing one hub between teams) of txhub_envelopes_total,
 * txhub_checkbacks_total and txhub_forwards_total: a small number standing
 * for a tenant's name. 0 is tenant="" (no tenant). The first
 * METRICS_TENANTS_MAX names get one each, for the life of the process (a
 * removed tenant's series stay, as counters do); later names all count
 * under tenant="_other", so that a churn of names cannot grow the
 * exposition without bound. */
#define METRICS_TENANTS_MAX 1000
#define METRICS_TENANT_OTHER (METRICS_TENANTS_MAX + 1)
#define METRICS_TENANT_SLOTS (METRICS_TENANTS_MAX + 2)
typedef uint16_t metrics_tenant;

/* The label of a tenant's name (NULL or "": 0). Takes a lock and compares
 * names: callers look a name up once and keep the number (the name's
 * number never changes). */
metrics_tenant metrics_tenant_of(const char *name);

/* Per-tenant counts of one batch, added to the totals in one go: a row of
 * up to METRICS_TALLY_WIDTH counters per tenant the batch names. Zero it
 * before use ({0} or memset); free it with metrics_tally_free(). Owned by
 * one thread. */
#define METRICS_TALLY_WIDTH 16
typedef struct {
	metrics_tenant tenant;
	uint64_t n[METRICS_TALLY_WIDTH];
} metrics_tally_row;

typedef struct {
	metrics_tally_row *rows; /* nrows, in order of first use */
	size_t nrows, cap;
	uint16_t row_of[METRICS_TENANT_SLOTS]; /* 1 + index into rows; 0: none yet */
} metrics_tally;

/* The counters of tenant t in this batch (zeroed the first time), or NULL
 * when out of memory (what would have been counted there is not). */
uint64_t *metrics_tally_row_of(metrics_tally *t, metrics_tenant tenant);
/* Free the rows; t is zeroed again. */
void metrics_tally_free(metrics_tally *t);

/* txhub_envelopes_total{type,outcome,tenant}: counters type *
 * METRICS_NOUTCOMES + outcome of each row. */
typedef metrics_tally metrics_envelopes;

static inline void metrics_envelopes_count(metrics_envelopes *e, metrics_tenant t,
                                           metrics_type type, metrics_outcome o)
{
	uint64_t *row = metrics_tally_row_of(e, t);
	if (row)
		row[type * METRICS_NOUTCOMES + o]++;
}

/* Add a batch's counts (e stays the caller's to free). */
void metrics_add_envelopes(const metrics_envelopes *e);

/* txhub_batch_records: records in a batch applied in one transaction. */
void metrics_observe_batch(size_t records);

/* txhub_checkbacks_total{outcome} and txhub_checkback_duration_seconds. */
typedef enum {
	METRICS_CB_COMMITTED,
	METRICS_CB_ROLLED_BACK,
	METRICS_CB_UNDECIDED,
	METRICS_CB_ERROR,
	METRICS_CB_NOT_REQUESTED, /* no URL, or outside checkback.allow */
	METRICS_CB_NOUTCOMES
} metrics_checkback;

void metrics_checkback_done(metrics_tenant t, metrics_checkback outcome, int64_t duration_ms);

/* txhub_forwards_total{outcome}, txhub_forward_duration_seconds (produce
 * to delivery report) and txhub_commit_to_forward_seconds (decision
 * applied to delivery confirmed). A batch of delivery reports at once. */
typedef enum {
	METRICS_FW_SENT,
	METRICS_FW_RETRIED, /* failed, to be tried again */
	METRICS_FW_FAILED,  /* failed for good */
	METRICS_FW_NOUTCOMES
} metrics_forward;

/* Histogram buckets, in milliseconds, shared by the three latency
 * histograms: 1 ms to 60 s. */
#define METRICS_LATENCY_BUCKETS 16

/* A batch of delivery reports: outcomes per tenant (counters by
 * metrics_forward of each row; zero the struct before use, free the tally
 * with metrics_tally_free()), latencies for all. */
typedef struct {
	metrics_tally outcomes;
	uint64_t produce_bucket[METRICS_LATENCY_BUCKETS + 1]; /* last: +Inf */
	uint64_t produce_count, produce_sum_us;
	uint64_t commit_bucket[METRICS_LATENCY_BUCKETS + 1];
	uint64_t commit_count, commit_sum_us;
} metrics_forwards;

/* Add one observation in ms to a batch's latency buckets. */
void metrics_forwards_observe(uint64_t *bucket, uint64_t *count, uint64_t *sum_us,
                              int64_t ms);
/* Count n outcomes of tenant t; a negative n takes back what was counted
 * (a retry found to be the last attempt). */
void metrics_forwards_count(metrics_forwards *f, metrics_tenant t, metrics_forward o, int64_t n);
void metrics_add_forwards(const metrics_forwards *f);

void metrics_database_error(void);
void metrics_kafka_error(void);
/* txhub_trace_context_dropped_total{reason}: an envelope's trace context
 * dropped as malformed (reason "trace", "traceparent", "tracestate":
 * envelope.h's trace_dropped). */
void metrics_trace_dropped(const char *reason);
/* txhub_dead_letters_total{outcome}: n parked forwards produced to the
 * dead-letter topic (ok) or that failed to be (deadletter.h). */
void metrics_dead_letters(int ok, uint64_t n);
/* txhub_database_rewinds_total (partitions read again because PostgreSQL
 * lost its last transactions) and txhub_database_rewound_offsets_total
 * (the offsets read again). */
void metrics_database_rewound(uint64_t partitions, uint64_t offsets);
/* txhub_forwards_after_rewind_total{outcome}: exactly_once messages
 * applied again after such a loss, found forwarded already by the progress
 * marker, or forwarded again because it cannot rule that out. */
void metrics_forwards_after_rewind(uint64_t already_sent, uint64_t sent_again);

/* txhub_tenant_rules_age_seconds: how long ago the tenant rules in force
 * were last found current (tenants_rules_age_ms(); < 0: none loaded, not
 * shown). */
void metrics_set_tenant_rules_age(int64_t ms);
/* ... {outcome="decided_again"}: messages decided again by a check-back or
 * an operator whose first decision the database lost, possibly forwarded
 * twice (store_sequence_forwards). */
void metrics_forwards_decided_again(uint64_t n);
/* kind: check_failed, send_failed, prepare_missing, database_failing,
 * kafka_fatal, lane_stuck, database_rewound, control_records_lost,
 * control_partition_truncated; anything else counts as "other". */
void metrics_alert(const char *kind);

/* txhub_control_records_lost_total{topic,partition}: offsets of a control-topic
 * partition the broker deleted before they were read, which this hub
 * skipped. Counting 0 makes the series (intake does for each partition it
 * takes, so that an alert rule sees it rise); a series stays. */
void metrics_control_records_lost(tp_key partition, uint64_t offsets);

/* Gauges. */
void metrics_set_owned_partitions(size_t n);
/* txhub_consumer_lag{topic,partition}: the consumer's lag per owned
 * partition (high watermark minus the next offset to read); partitions not
 * listed are dropped from the exposition. Called from one thread (the run
 * loop). */
void metrics_set_lag(const tp_key *partitions, const int64_t *lag, size_t n);
/* Sampled from PostgreSQL: messages by status (prepared, committed,
 * rolled_back, check_failed, awaiting_prepare), parked rows, and the age
 * of the oldest prepared row and pending send (-1: none). */
typedef struct {
	int64_t by_status[5];
	int64_t parked;
	double oldest_prepared_s, oldest_pending_send_s;
	int64_t blocked; /* forward.order = key: held for an earlier message of their key */
	/* delayed delivery (docs/consumers.md: Delayed delivery): committed
	 * messages waiting for their due time, and the age of the oldest due
	 * and not yet sent (-1: none) */
	int64_t scheduled;
	double oldest_overdue_s;
} metrics_sample;
void metrics_set_sample(const metrics_sample *s);
void metrics_set_ready(int ready);
/* exactly_once: partitions stuck untaken (lane_watch.h). */
void metrics_set_lanes_stuck(size_t n);

/* The metrics the exposition shows, in its order: each one's name, type,
 * labels ("" for none), its HELP text and docs/monitoring.md's
 * description (markdown; NULL: the HELP text). metrics_write() takes the
 * type and HELP from here, and `txhub reference metrics` prints it as the
 * table of docs/monitoring.md: Metrics and health. */
typedef struct {
	const char *name, *type, *labels, *help, *md;
} metrics_metric;
extern const metrics_metric metrics_table[]; /* ends with name NULL */

/* The whole exposition, appended to out. */
void metrics_write(sbuf *out);

/* Forget everything (for tests). */
void metrics_reset(void);

#endif
