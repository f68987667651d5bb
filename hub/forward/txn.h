/* txn.h: the replica's Kafka transactions (forward.mode = exactly_once,
 * docs/architecture.md, Forwarding exactly once).
 *
 * One transactional producer per replica, whose transactional.id is
 * txhub-<group>-r-<host>-<pid>-<random>, carries the runs of every lane (lane.h):
 * a transaction begins when a lane wants one, takes the runs of the lanes
 * that join it, and closes no sooner than forward.transaction_interval_ms
 * after the last one closed, so that a replica commits at most one Kafka
 * transaction per interval however many partitions it owns. Before its
 * commit a transaction is fenced three ways:
 *   - its records are flushed, then PostgreSQL is asked whether every lane
 *     in it still holds its partition at its epoch (a lane that lost it
 *     makes the transaction abort);
 *   - the offsets of the progress partitions it wrote markers to are sent
 *     in it with the consumer group metadata of the hub's consumer as it
 *     was when the transaction began (KIP-447): the group coordinator
 *     refuses them once the group has moved to a later generation or
 *     dropped the member, and the transaction aborts;
 *   - a new owner that finds a marker of an open transaction in its
 *     partition's progress partition (their records carry the
 *     transactional.id) fences that producer with init_transactions
 *     (lane_takeover.c).
 * The lanes block in txn_join and txn_finish; a thread of the txn begins,
 * closes, commits or aborts. */
#ifndef TXHUB_TXN_H
#define TXHUB_TXN_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "owned.h"

typedef struct txn txn;

/* A record's delivery report, as its opaque when produced with the txn's
 * producer. reported is set (after err) by whichever thread polls the
 * producer: read it with txn_reported while the transaction is open. */
typedef struct {
	rd_kafka_resp_err_t err;
	int reported;
} txn_report;

/* Whether r's report came (err is then its outcome). */
int txn_reported(const txn_report *r);

/* How a transaction ended, for one of its parts. */
typedef struct {
	int committed;
	int lost;     /* the part's partition is not this replica's at its epoch any more */
	int solo;     /* the part was alone in it */
	int record_fault; /* a record failed for its own sake (txn_batch_error):
	                   * the transactions that follow take one part each, the
	                   * parts without it go again at once */
	rd_kafka_resp_err_t code; /* why it aborted */
	char why[512];
} txn_outcome;

/* A lane's part in a transaction (the lane's memory, from txn_join to the
 * end of txn_finish). */
typedef struct {
	owned_part own;
	const char *progress; /* the progress topic and partition of its marker */
	int32_t marker_part;
	int64_t marker_seq;   /* 0: no marker */
	int ready, abort, done;
	char abort_why[256];
	txn_outcome out;
} txn_part;

/* Start the txn of this replica (its transactional.id named after the
 * host and the process). cfg must outlive it. NULL with err when out of
 * resources. */
txn *txn_new(const txhub_config *cfg, char *err, size_t errsz);

/* The hub's consumer, whose group metadata fences the transactions. Set
 * once, before the lanes start (NULL: not fenced by the group). */
void txn_set_consumer(txn *t, rd_kafka_t *consumer);

/* A reload: forward.transaction_interval_ms from cfg from the next
 * transaction on. */
void txn_reconfigure(txn *t, const txhub_config *cfg);

/* The transactional.id. */
const char *txn_id(const txn *t);

/* A plain (not transactional) producer handle of the txn for metadata
 * requests: lives as long as t. */
rd_kafka_t *txn_meta(txn *t);

/* A lane is reading a run it will join with: the open transaction waits
 * for it (at most an interval after it began) rather than close without
 * it. txn_join(intended = 1) or txn_unintend ends the intent. */
void txn_intend(txn *t);
void txn_unintend(txn *t);

/* Join the open transaction, waiting for one to open: returns the producer
 * to produce p's records with until txn_finish, or NULL when stop(arg)
 * said so (or t stops). intended: ends a txn_intend. */
rd_kafka_t *txn_join(txn *t, txn_part *p, int intended, int (*stop)(void *), void *arg);

/* p's records are produced: commit them with the others (abort: p wants
 * the whole transaction aborted, why in why), and wait for the outcome in
 * p->out. */
void txn_finish(txn *t, txn_part *p, int abort, const char *why);

/* Whether e says a transactional producer was fenced. */
int txn_fenced_error(rd_kafka_resp_err_t e);

/* Whether a delivery report's e may be one record's fault that the broker
 * failed its whole batch for (too large, invalid): with one producer for
 * every lane, a batch to a forward partition holds other lanes' records
 * too, so the error is a lane's own only when its part was alone in the
 * transaction (txn_outcome.solo). */
int txn_batch_error(rd_kafka_resp_err_t e);

/* A producer on forward_producer_conf(cfg), with transactional.id id
 * (NULL: none) and, given an opaque, the txn's delivery report and error
 * callbacks. NULL with err. */
rd_kafka_t *txn_producer_new(const txhub_config *cfg, const char *id, void *opaque, char *err,
                             size_t errsz);

/* Fence transactional.id id (another replica's, or a hub's before it):
 * init_transactions with a producer of its own aborts what the id left
 * open and bumps its epoch, so that the producer holding it commits
 * nothing more. Returns 0, or -1 with err (*refused: the hub has no right
 * to the id, docs/kafka.md, Kafka ACLs). */
int txn_fence(const txhub_config *cfg, const char *id, int *refused, char *err, size_t errsz);

/* Whether no transaction could begin at the last try (the producer cannot
 * be made or initialised: typically no right to the transactional.id),
 * with why. Any thread. */
int txn_failing(txn *t, char *why, size_t whysz);

/* Transactions committed since started. */
uint64_t txn_commits(txn *t);

/* Stopping: the open transaction closes at once and is committed without
 * retrying for long, lanes waiting to join are let go, no other begins.
 * NULL is fine. */
void txn_stop(txn *t);

/* Stop (txn_stop), wait for the thread, free. NULL is fine. */
void txn_free(txn *t);

#endif
