/* deadletter.h: the dead-letter topic (docs/troubleshooting.md: Dead-letter
 * topic, forward.dead_letter_topic).
 *
 * A forward that gets send_status = failed (parked) is also produced, once,
 * to the dead-letter topic: its payload and key, its forwarded headers
 * (the envelope's, txhub-biz-id, txhub-message-key, traceparent,
 * tracestate), and txhub-dlq-topic (the forward topic), txhub-dlq-error
 * (its last_error), txhub-dlq-attempts and txhub-dlq-at (RFC 3339 UTC, when
 * it was produced). txhub.message_rows.dead_lettered_at records it, so that a
 * restart does not send it again; the row stays parked for `txhub redrive`,
 * and a later park after a redrive is dead-lettered again (a new park clears
 * dead_lettered_at, store.c).
 *
 * A thread of its own with its own producer and PostgreSQL connection: it
 * looks for parked rows of the partitions this replica owns (index
 * messages_dead_letter, migration 0014) once a second, so nothing the hub
 * does waits for it, and a dead-letter topic that fails (refused, missing,
 * a record too large for it) is logged, counted
 * (txhub_dead_letters_total{outcome="failed"}), alerted once per episode
 * (dead_letter_failed) and tried again with backoff, never holding up
 * forwarding.
 *
 * Once in the forwarding mode in force. at_least_once: the record is
 * produced by an idempotent producer and recorded after the broker
 * acknowledged it; a hub that dies between the acknowledgement and the
 * write of dead_lettered_at (one statement) sends that batch's dead letters
 * again when the partition's next owner looks (consumers deduplicate on
 * txhub-biz-id and txhub-message-key, as for forwards).
 *
 * exactly_once: each read_committed consumer reads each park's dead letter
 * once, across kill -9 at any point. One transactional producer per
 * replica (transactional.id: the replica's, txn.h, + "-dlq"), made when
 * needed and closed when idle, takes the owned partitions with work one
 * after the other, a transaction each:
 *   0. once per partition and epoch, before its first dead letter: the
 *      transactional.id written in the partition's row
 *      (txhub.partitions.dl_txn_id, migration 0017) is fenced unless it is
 *      this process's (init_transactions with it: what the partition's last
 *      owner left open is aborted, and that producer commits nothing more);
 *      so is the per-partition id of the hubs before
 *      (txhub-<group>-<control topic>-<partition>-dlq) when none is written
 *      or another owner came between (dl_txn_epoch is not the epoch
 *      before: a rolling upgrade); only then is the producer's own id
 *      written there, while the partition is still owned at its epoch;
 *   1. begin; produce the batch; flush (the delivery reports give each
 *      record's partition and offset);
 *   2. record them in txhub.dead_letter_pending (migration 0015), only
 *      while the rows are at the park read and the partition is still
 *      owned at its epoch, else abort;
 *   3. commit; then one statement sets dead_lettered_at and deletes the
 *      entries.
 * After step 0 of a partition taken (and after a failure that may have
 * left entries), its entries are resolved before it produces: a
 * read_committed reader at each entry's offset finds the record (with the
 * row's txhub-biz-id and txhub-message-key): committed, recorded; or
 * anything else (skipped as aborted, the end, another message's record,
 * gone with retention): the entry is deleted and the row produced again.
 * Not within the lane's transaction: a parked row has left its partition's
 * forward sequence, which is what a lane's transaction and progress marker
 * vouch for (lane.c).
 *
 * TXHUB_FAILPOINT (crash tests only, as lane.c's): dead_letter_produced,
 * dead_letter_pending, dead_letter_committed exit the hub after step 1, 2,
 * and the commit of step 3. */
#ifndef TXHUB_DEADLETTER_H
#define TXHUB_DEADLETTER_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "config.h"
#include "owned.h"

typedef struct deadletter deadletter;

/* Start the thread when cfg->forward_dead_letter_topic is set; replica_id:
 * under exactly_once the replica's transactional.id (forward_txn_id), which
 * the dead letters' producer is named after. Returns NULL when it is not
 * set (err "") or with a reason in err. */
deadletter *deadletter_start(const txhub_config *cfg, alert *al, const char *replica_id,
                             char *err, size_t errsz);

/* The run loop's: the partitions owned now (copied when they changed).
 * NULL d: nothing. */
void deadletter_poll(deadletter *d, const owned_set *own);

/* Stop the thread (a batch in flight is given its delivery time-out) and
 * free. NULL: nothing. */
void deadletter_stop(deadletter *d);

#endif
