/* bench_int.h: what the parts of `txhub bench` share: its options, the
 * run's plan (which transactions roll back or are delayed), the verifier's
 * counters and the figures of the result; and the parts'
 * functions: bench_kafka.c (clients, topics, produce), bench_ceiling.c (the
 * two ceilings), bench_report.c (PostgreSQL's counters, the JSON line). */
#ifndef TXHUB_BENCH_INT_H
#define TXHUB_BENCH_INT_H

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"

typedef struct {
	int64_t count;        /* transactions */
	double rate;          /* per second; 0: flat out */
	int rollback_pct;     /* 0..100 */
	int delayed_pct;      /* 0..100: share of prepares with forward.delay_ms */
	int64_t delay_ms;     /* their delay */
	int payload_bytes;
	int64_t keys;         /* distinct record keys; 0: one per transaction */
	int partitions;       /* of the topics the bench creates */
	char forward_topic[256];
	char run[40];         /* the run id in every message key */
	int preload;          /* produce everything, then start the hub */
	int start_hub;
	pid_t hub_pid;
	int ceilings;
	int64_t ceiling_tx;
	int drain_s;
	int warmup_s;         /* commits of the first seconds: verified, not timed */
	int exactly_once;     /* a duplicate is a failure */
	int tenants;          /* tenants to define (bench-0 owns the control topic); 0: leave them */
	int enforce;          /* ... and tenants.enforce for the hub it starts */
	char hub_log[256];
	char hub_binary[256]; /* --start-hub runs this txhub; "": this one */
} opts;

static inline int rolled_back(const opts *o, int64_t i)
{
	return (int)((uint64_t)(i * 37) % 100) < o->rollback_pct;
}

/* delayed delivery: independent of rolled_back() (another stride) */
static inline int delayed(const opts *o, int64_t i)
{
	return (int)((uint64_t)(i * 53 + 7) % 100) < o->delayed_pct;
}

/* ---- the verifier: consumes the forward topic ---- */

typedef struct {
	const opts *o;
	const txhub_config *cfg;
	_Atomic int64_t *commit_us;  /* per transaction, 0: not produced yet */
	int64_t *first_us;           /* first arrival, 0: none */
	uint16_t *arrivals;
	_Atomic int64_t arrived;     /* distinct committed transactions arrived */
	_Atomic int64_t duplicates, wrong, foreign;
	_Atomic int generating;      /* the generator has not finished */
	_Atomic int64_t gen_done_us, first_arrival_us, last_arrival_us;
	int64_t committed;           /* transactions to be forwarded */
	rd_kafka_t *rk;
	int nparts;
	int64_t *start;
} verifier;

/* What PostgreSQL wrote, read before and after a run (issue 22's figures):
 * the cluster's WAL position, and the message table's row versions (inserts,
 * updates, HOT updates), dead tuples and sizes from the statistics views.
 * The views are updated by each session when its transaction ends (at
 * most once a second) and when it exits: read after the hub stopped, they
 * hold everything it did; against a hub that keeps running (--hub-pid)
 * its last second may be missing. */
typedef struct {
	int ok;
	double wal;                  /* bytes since 0/0 */
	int64_t ins, upd, hot, dead; /* pg_stat_user_tables of txhub.message_rows (0.4:
	                              * txhub.messages) */
	int64_t heap, index;         /* bytes: the table, its indexes */
} pg_counters;

typedef struct {
	int64_t start_us, end_us;
	double hub_cpu_s, hub_rss_mib, ceiling_pg, ceiling_kafka;
	int64_t broker_deleted; /* records of this run the broker deleted from the control topic */
	pg_counters pg_before, pg_after;
} results;

/* ---- bench_kafka.c ---- */

/* A client of type with the hub's settings and defaults (or conf, taken
 * over); NULL, said on stderr, when librdkafka refuses. */
rd_kafka_t *bench_client(const txhub_config *cfg, rd_kafka_type_t type,
                         const char *const *defaults, rd_kafka_conf_t *conf);

/* Create topic with partitions partitions unless it exists. */
void bench_create_topic(rd_kafka_t *rk, const char *topic, int partitions);

/* The partitions of topic and their high watermarks now (*high,
 * malloc'd); the partition count, 0 on failure. */
int bench_topic_ends(rd_kafka_t *rk, const char *topic, int64_t **high);

/* Records the broker deleted from topic's n partitions past start[]. */
int64_t bench_deleted_since(rd_kafka_t *rk, const char *topic, const int64_t *start, int n);

/* Records the generator could not produce (delivery reports included). */
extern _Atomic int64_t bench_produce_errors;

/* The generator's delivery report callback: failures counted. */
void bench_gen_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);

/* Produce one record (a copy), waiting while the queue is full. */
void bench_produce(rd_kafka_t *rk, const char *topic, const char *key, const char *value);

/* ---- bench_ceiling.c ---- */

/* PostgreSQL alone, and Kafka alone: transactions per second, or -1. */
double bench_ceiling_pg(const txhub_config *cfg, const opts *o);
double bench_ceiling_kafka(const txhub_config *cfg, const opts *o, rd_kafka_t *admin,
                           const char *payload);

/* ---- bench_report.c ---- */

/* Read PostgreSQL's counters into c (c->ok 0 when they could not be read). */
void bench_pg_read(const txhub_config *cfg, pg_counters *c);

/* The result: one JSON line on standard output, a verdict on standard
 * error. Returns the exit status (0 ok, 1 something lost or wrong). */
int bench_report(const verifier *v, const results *r);

#endif
