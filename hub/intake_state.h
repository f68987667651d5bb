/* intake_int.h: what intake.c (the consumer: assignments, reading,
 * fencing) and intake_offsets.c (the group's committed offsets: committing
 * them with this hub's database, judging them on assignment, refusing
 * partitions) share. Not for other modules. Main thread only. */
#ifndef TXHUB_INTAKE_INT_H
#define TXHUB_INTAKE_INT_H

#include "enforce.h"
#include "intake.h"
#include "topics.h"

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
	rd_kafka_queue_t *queue;
	const txhub_config *cfg;
	topics_spec topics; /* the control topics (cfg->control_topic, fixed while running) */
	char progress[300]; /* exactly_once: the progress topic; "": none */
	intake_hooks hooks;
	owned_set *owned;   /* the loop's: taken in PostgreSQL, ours to work on */
	tp_key *fenced;    /* assigned by Kafka, but taken by another replica */
	size_t nfenced;
	refusal *refused;   /* assigned by Kafka, but worked against another database */
	size_t nrefused;
	dbid self;          /* the database this hub works against */
	char *metadata;     /* ... as offset metadata; NULL: unknown */
	rd_kafka_topic_partition_list_t *done; /* next offsets to commit, not committed yet */
	int64_t next_commit_ms;
	char commit_err[256]; /* the last commit failure logged, or "" */
	int paused;         /* consumption of owned partitions paused */
	slot *slots;        /* the partitions Kafka assigns here, in no order */
	size_t nslots;
	char fatal[512];    /* librdkafka's fatal error, when the consumer died */
	char trouble[1000]; /* the last Kafka error (intake_trouble()), or "" */
	int64_t trouble_ms; /* ... when it came */
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

/* The consumer's rebalance_cb (opaque: the intake): partitions assigned
 * are taken and started, those revoked or lost let go. */
void intake_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);

/* Start the partitions of l again at their offsets (librdkafka stopped
 * them: see intake.c). */
void intake_restart(intake *in, rd_kafka_topic_partition_list_t *l);

/* The consumer's error_cb: logged, and kept for intake_trouble() (a
 * specific reason is not replaced within a minute by "all brokers are
 * down", which follows it). */
void intake_note_error(intake *in, int err, const char *reason);

/* An error the consumer returned instead of a record: the broker refusing
 * to let a slot's partition be fetched (TOPIC_AUTHORIZATION_FAILED) flags
 * it unreadable, with an error line the first time; anything else is
 * logged and kept for intake_trouble(). */
void intake_note_consume_error(intake *in, const rd_kafka_message_t *m);

/* Partition p was read (a record, its end, or an offset committed): no
 * longer unreadable. Cheap enough for every record while in->unreadable. */
void intake_note_readable(intake *in, tp_key p);

/* Note offset as partition p's next to commit (never backwards). */
void intake_done_set(intake *in, tp_key p, int64_t offset);
/* The same, back too: a partition read again from offset (taken back). */
void intake_done_reset(intake *in, tp_key p, int64_t offset);

/* The consumer's offset_commit_cb (opaque: the intake). */
void intake_offset_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t *offsets, void *opaque);

/* Where a partition stands in the group. */
typedef struct {
	int64_t committed;    /* the group's committed offset; -1: none */
	dbid_verdict verdict; /* what its metadata says (dbid_judge) */
	dbid other;           /* ... the database it names */
} intake_standing;

/* Whether a partition in that standing may be taken. */
int intake_may_take(dbid_verdict v);

/* Read where parts[0..n) stand (out[i] for parts[i]). Without an identity
 * of our own, nothing is read: every verdict is DBID_ABSENT. Returns 0, or
 * -1 with err when the committed offsets could not be read. */
int intake_read_standing(intake *in, const tp_key *parts, size_t n, intake_standing *out,
                         char *err, size_t errsz);

/* Refuse p (other: what its metadata names; NULL or unknown: its
 * committed offset could not be read, why says why). Returns 1 when that
 * is news (newly refused, or for another database than before). */
int intake_refuse(intake *in, tp_key p, const dbid *other, const char *why);

/* p is no longer refused (taken, or revoked). */
void intake_unrefuse(intake *in, tp_key p);

/* Log what is refused (after news). */
void intake_log_refusals(const intake *in);

#endif
