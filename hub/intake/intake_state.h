/* intake_state.h: the consumer's state, which the intake's parts share:
 * intake.c (the consumer: reading, validating, stalled partitions) on top,
 * intake_assign.c (assignments, fencing, taking back), intake_offsets.c
 * (the group's committed offsets, with this hub's database; refusing
 * partitions) and intake_trouble.c (what keeps it from reading) below it,
 * and this at the bottom. The types are public (intake.h includes this);
 * struct intake's fields are the intake's own, for no other module. Main
 * thread only. */
#ifndef TXHUB_INTAKE_STATE_H
#define TXHUB_INTAKE_STATE_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dbid.h"
#include "enforce.h"
#include "gap.h"
#include "intake_waker.h"
#include "owned.h"
#include "record.h"
#include "topics.h"

typedef struct intake intake;

/* A batch of records read but not yet acknowledged. */
typedef struct {
	store_record *recs;
	rd_kafka_message_t **msgs; /* kept alive: recs point into them */
	size_t n, cap;
	size_t bytes;
	size_t judged; /* recs[0..judged) have their tenant, and were held to its rules
	                * (enforce.h); the rest wait for rules (intake_judge) */
} intake_batch;

/* Called from inside intake_poll() on a rebalance.
 *
 * take: before new partitions are read, take them in PostgreSQL: fill
 * own[i] (the new epoch) and next_offset[i] (where to start; -1: the
 * group's committed offset, or the beginning without one) for parts[i]. Returns 0, or -1 when a stop came first
 * (the partitions are then not read at all).
 * assigned: after they were assigned, with their epochs (the owned set
 * holds them by then).
 * revoking: before partitions move away (they are still in the owned set);
 * the callee must finish (store and acknowledge, or drop unacknowledged)
 * the batch in hand for them.
 * gap: called from inside intake_poll(), for an owned partition, when the
 * offset it was to read is not on the broker (gap.h: deleted before it
 * was read, or beyond the partition's end). The callee records and reports
 * it, and returns 0: the partition is then read from g->resume; or -1 to
 * be asked again later (PostgreSQL away): it waits until then. May be
 * NULL (read on from g->resume). */
typedef struct {
	int (*take)(void *opaque, const tp_key *parts, size_t n, owned_part *own,
	            int64_t *next_offset);
	void (*assigned)(void *opaque, const owned_part *own, size_t n);
	void (*revoking)(void *opaque, const tp_key *partitions, size_t n);
	int (*gap)(void *opaque, const gap *g);
	void *opaque;
} intake_hooks;

/* Offsets done are committed at most this often ... */
#define COMMIT_EVERY_MS 1000
/* ... and reading the committed ones waits this long for the coordinator. */
#define COMMITTED_TIMEOUT_MS 5000

/* A partition Kafka assigns here that is not read (intake.h). */
typedef struct {
	tp_key tp;
	dbid other;    /* the database it was last worked against; unknown: ... */
	char why[256]; /* ... why its committed offset could not be read */
} refusal;

/* An assigned partition: where it was last started, and whether the
 * broker stopped it with an offset out of range (gap.h). */
typedef struct {
	tp_key tp;
	int64_t start;    /* the offset it was (re)started at; RD_KAFKA_OFFSET_INVALID: the group's */
	int stalled;      /* stopped: librdkafka fetches it no more until it is assigned again */
	int64_t wanted;   /* ... the offset it could not read */
	int64_t due_ms;   /* ... when to decide (again) where to read it from */
	int attempts;     /* ... decisions put off so far */
	int decided;      /* ... resume is where to start it at due_ms */
	int64_t resume;
	int unreadable;   /* the broker refuses fetching it (an ACL): until a record or its end */
} slot;

struct intake {
	rd_kafka_t *rk;
	rd_kafka_queue_t *queue; /* the consumer's queue (its length) */
	intake_waker *waker;     /* librdkafka 2.0.x: wakes the fetcher (intake_waker.h); or NULL */
	int consumer_protocol;   /* kafka.group.protocol = consumer (KIP-848) */
	int64_t started_ms;      /* when intake_new() made the consumer */
	const txhub_config *cfg;
	topics_spec topics; /* the control topics (cfg->control_topic, fixed while running) */
	char progress[300]; /* exactly_once: the progress topic; "": none */
	intake_hooks hooks;
	owned_set *owned;   /* the loop's: taken in PostgreSQL, ours to work on */
	tp_key *fenced;    /* assigned by Kafka, but taken by another replica */
	size_t nfenced, capfenced;
	refusal *refused;   /* assigned by Kafka, but worked against another database */
	size_t nrefused, caprefused;
	dbid self;          /* the database this hub works against */
	char *metadata;     /* ... as offset metadata; NULL: unknown */
	rd_kafka_topic_partition_list_t *done; /* next offsets to commit, not committed yet */
	int64_t next_commit_ms;
	char commit_err[256]; /* the last commit failure logged, or "" */
	int paused;         /* consumption of owned partitions paused */
	slot *slots;        /* the partitions Kafka assigns here, in no order */
	size_t nslots, capslots;
	char fatal[512];    /* librdkafka's fatal error, when the consumer died */
	char trouble[1000]; /* the last Kafka error (intake_trouble()), or "" */
	int64_t trouble_ms; /* ... when it came */
	char scram_hint[400]; /* why a refused SCRAM login may be the librdkafka's
	                       * (kafka_scram_hint()), once one was, or "" */
	int unreadable;     /* some slot is unreadable ... */
	char unreadable_why[128]; /* ... the broker's last word on it */
	enforce tenants;    /* each record's tenant, and tenants.enforce (enforce.h) */
};

/* Add (topic, partition) k to l; returns the element. */
rd_kafka_topic_partition_t *intake_list_add(rd_kafka_topic_partition_list_t *l, tp_key k);

/* The key of an element of a list (-1 when its topic cannot be interned). */
tp_key intake_elem_tp(const rd_kafka_topic_partition_t *e);

/* The key of a message (-1 without a topic). */
tp_key intake_msg_tp(const rd_kafka_message_t *m);

/* The slot of assigned partition p, or NULL. */
slot *intake_slot_find(intake *in, tp_key p);

/* Whether p is one of parts[0..n). */
int intake_tp_in(const tp_key *parts, size_t n, tp_key p);

#endif
