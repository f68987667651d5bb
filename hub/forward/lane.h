/* lane.h: forwarding one control-topic partition exactly once
 * (forward.mode = exactly_once, docs/consumers.md: Forwarding exactly once).
 *
 * A lane is a thread with a PostgreSQL connection of its own; its runs go
 * in the replica's transactions (txn.h: one transactional producer for
 * every partition the replica owns). Starting, it fences the partition's
 * previous owner (lane_takeover.c: the transaction an earlier hub's
 * per-partition transactional.id left open, and a producer whose open
 * transaction holds a marker of the partition), waits for the open
 * transactions of its progress partition to end, reads the partition's
 * progress marker with read_committed and marks every pending row up to
 * the marker sent: their transaction committed. Then it forwards in
 * forward-sequence order (store_sequence_forwards, store_apply): each
 * run of forwards read from PostgreSQL goes with one marker, the highest
 * sequence of the run, in the progress topic, in the same Kafka
 * transaction; after the commit the rows are marked sent. A forward that fails for its own
 * sake (an unknown topic, a record too large, a topic Kafka refuses in a
 * transaction: lane_refused.c) leaves its run, is recorded
 * as a failed attempt and loses its sequence (it gets a new one when due
 * again); the others go again.
 *
 * Made and stopped by forward.c from the run loop's thread; the functions
 * below but lane_start and lane_free may be called from any thread. */
#ifndef TXHUB_LANE_H
#define TXHUB_LANE_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "config.h"
#include "forward_record.h"
#include "store.h"
#include "txn.h"

typedef struct lane lane;

/* Most forwards in one Kafka transaction: with 8 lanes, 2000 held 8 x 2
 * runs (the one in hand and the one committed, not yet recorded) in
 * memory while draining a backlog, 17 MiB of the hub's peak at 200-byte
 * payloads; 500 drain as fast. */
#define LANE_RUN_MAX 500

/* A replica begins a transaction at most every
 * forward.transaction_interval_ms (default 40, txn.c), whatever the number
 * of its lanes: forwards due meanwhile wait for it, and go together. Each
 * Kafka transaction costs a fixed amount of CPU, most of it in librdkafka's
 * main thread before 2.4.0, which turns on the CPU for up to a millisecond
 * twice a transaction (a partition joins it, the coordinator answers: its
 * timer of 1 ms is rounded down to a wait of 0 ms; fixed upstream in 2.4.0,
 * Debian 12 ships 2.0.2): at 2,000 forwards a second over 8 lanes of their
 * own transactions, back-to-back runs of 4 or 5 forwards made 330
 * transactions a second and half the hub's CPU. See docs/benchmark.md. */

/* What a partition's lane is called in Kafka. */
typedef struct {
	/* the progress topic: forward.progress_topic, or "<control_topic>.progress"
	 * for one control topic and "txhub.progress" for a list or a pattern */
	char progress[300];
	/* the transactional.id hubs of one producer per partition used:
	 * txhub-<group>-<control topic>-<partition>, the record's own topic;
	 * fenced once when the partition is taken (an upgrade) */
	char txn_id[600];
	/* the key of its markers in the progress topic: "<group>/<partition>"
	 * for one control topic (0.4.0's), "<group>/<topic>/<partition>" for a
	 * list or a pattern (several topics share the progress topic) */
	char marker_key[600];
} lane_name_set;

void lane_names(const txhub_config *cfg, tp_key tp, lane_name_set *out);

/* Start the lane of own->partition at own->epoch (its thread takes the
 * partition, waiting out Kafka and PostgreSQL being away). after_rewind:
 * the partition was taken again because PostgreSQL lost its tail
 * (forward_note_rewound): the rows its recovery finds sent are counted as
 * such. The lane holds a reference to cfg (config_hold()). Returns NULL with err when out of resources. */
lane *lane_start(const txhub_config *cfg, alert *al, txn *t, const owned_part *own,
                 int after_rewind, char *err, size_t errsz);

tp_key lane_tp(const lane *l);
int64_t lane_epoch(const lane *l);

/* Rows of the partition up to forward sequence seq are due: wake the lane. */
void lane_notify(lane *l, int64_t seq);

/* forward.order = key: a message of the partition became a blocker outside
 * the lane (a scheduled one: delayed delivery); the lane reads the
 * partition's blockers again before its next run. Any thread. */
void lane_blockers_changed(lane *l);

/* Forwards notified and not yet committed or given up (an estimate from
 * the sequences: exact unless some failed). */
size_t lane_pending(lane *l);

/* Ask the lane to stop: it finishes its transaction in hand, then goes on
 * forwarding what is due until `grace_ms` from now at most. */
void lane_stop(lane *l, int grace_ms);

/* Whether the lane has taken its partition (fenced the previous owner,
 * read its marker, marked what it sent). While it has not: why its last
 * attempt failed into why ("" before the first failure; why it ended once
 * it has), and the Kafka topic that failure was about into topic (the
 * progress topic; "" when it was about none, e.g. the transactional id or
 * PostgreSQL). */
int lane_taken(lane *l, char *why, size_t whysz, char *topic, size_t topicsz);

/* Whether the lane's thread has ended (stopped, fenced, or failed for
 * good); why it ended into why. */
int lane_ended(lane *l, int *fenced, char *why, size_t whysz);

/* Counters since the lane started. */
forward_stats lane_stats(lane *l);

/* Stop (as lane_stop(l, 0)), wait for the thread, free. NULL is fine. */
void lane_free(lane *l);

#endif
