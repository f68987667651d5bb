/* intake_offsets.h: the consumer group's committed offsets and the
 * partitions refused for them (intake_offsets.c). */
#ifndef TXHUB_INTAKE_OFFSETS_H
#define TXHUB_INTAKE_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "intake_state.h"

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

/* Note the offsets of every record of b as done (after its transaction
 * committed), to be committed to the group. */
void intake_ack(intake *in, const intake_batch *b);

/* Commit what was noted, in the background, when the last commit is a
 * second old (one request for every partition, never one per batch). */
void intake_commit_due(intake *in);

/* Commit what was noted now, synchronously. */
void intake_commit(intake *in);

/* The partitions Kafka assigns here that are refused (see the top): how
 * many. When some are, why (one line: the partitions, both databases and
 * what to do) into why: those last worked against another database first
 * (*mismatch set to 1), else those whose committed offsets could not be
 * read (*mismatch 0). */
size_t intake_refusals(const intake *in, char *why, size_t whysz, int *mismatch);

/* Read the committed offsets of the refused partitions again: into
 * accept (up to max) those that may be taken now (their metadata names
 * this database or pg.adopt_from, or none); returns how many. The caller
 * takes them in PostgreSQL, then calls intake_retake(). */
size_t intake_recheck(intake *in, tp_key *accept, size_t max);

#endif
