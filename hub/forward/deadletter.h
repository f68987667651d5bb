/* deadletter.h: the dead-letter topic (CONTRACT §15, forward.dead_letter_topic).
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
 * Both forwarding modes: the record is produced by an idempotent producer
 * and recorded after the broker acknowledged it. Not within the lane's
 * transaction (exactly_once): a parked row has left its partition's forward
 * sequence, which is what a lane's transaction and progress marker vouch
 * for (lane.c), so the marker could not say whether its dead letter was
 * committed. A hub that dies between the acknowledgement and the write of
 * dead_lettered_at (one statement) sends that batch's dead letters again
 * when the partition's next owner looks: at least once, never zero times,
 * like at_least_once forwards; consumers deduplicate on txhub-biz-id and
 * txhub-message-key as for forwards. */
#ifndef TXHUB_DEADLETTER_H
#define TXHUB_DEADLETTER_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "config.h"
#include "owned.h"

typedef struct deadletter deadletter;

/* Start the thread when cfg->forward_dead_letter_topic is set. Returns NULL
 * when it is not (err "") or with a reason in err. */
deadletter *deadletter_start(const txhub_config *cfg, alert *al, char *err, size_t errsz);

/* The run loop's: the partitions owned now (copied when they changed).
 * NULL d: nothing. */
void deadletter_poll(deadletter *d, const owned_set *own);

typedef struct {
	uint64_t sent, failed; /* records produced; attempts that failed */
} deadletter_stats;
deadletter_stats deadletter_get_stats(deadletter *d);

/* Stop the thread (a batch in flight is given its delivery time-out) and
 * free. NULL: nothing. */
void deadletter_stop(deadletter *d);

#endif
