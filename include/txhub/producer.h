/* txhub/producer.h: send envelopes to the control topic (docs/producers.md:
 * Envelope fields).
 *
 * Each envelope's record key is its message_key, so a message's prepare and
 * decision land in one partition, in order. The producer is idempotent with
 * acks=all, and every synchronous call returns only once the broker has
 * confirmed the envelope (or it failed): after TXHUB_OK from
 * txhub_producer_prepare() the prepare is stored by Kafka, and the local
 * transaction may commit. Input is validated before anything is sent; bad
 * input returns TXHUB_ERR_INVALID or TXHUB_ERR_TOO_LARGE and sends nothing.
 *
 * Threads: a producer may be shared; every function except
 * txhub_producer_destroy() may be called from any thread at once.
 * Completion callbacks run on the producer's own delivery thread. */
#ifndef TXHUB_PUBLIC_PRODUCER_H
#define TXHUB_PUBLIC_PRODUCER_H

#include <stddef.h>

#include "common.h"
#include "envelope.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txhub_producer txhub_producer;

/* Configuration; every pointer is borrowed for the txhub_producer_new()
 * call only. A zeroed struct plus brokers is a working configuration. */
typedef struct {
	const char *brokers;       /* Kafka bootstrap servers (required) */
	const char *control_topic; /* NULL: "txhub.control" */
	size_t max_bytes;          /* largest envelope; 0: 1048576, as the hub's envelope.max_bytes */
	int timeout_ms;            /* delivery time-out (message.timeout.ms); 0: 30000 */
	/* librdkafka properties passed through unchanged, as a NULL-terminated
	 * list of name, value, name, value, ... (NULL: none). They override
	 * the defaults (enable.idempotence=true, acks=all, linger.ms=0), except
	 * that enable.idempotence and acks cannot be weakened. */
	const char *const *kafka;
} txhub_producer_config;

/* Create a producer. On TXHUB_OK, *out is the new producer, freed with
 * txhub_producer_destroy(). On failure (TXHUB_ERR_INVALID for a bad
 * configuration, naming the key), *out is NULL. Does not wait for the
 * broker: an unreachable broker shows in the first send. */
txhub_status txhub_producer_new(const txhub_producer_config *cfg, txhub_producer **out,
                                char *errstr, size_t errstr_size);

/* Wait up to timeout_ms for envelopes still in flight (their callbacks run),
 * then free everything. Envelopes not confirmed by then are dropped with
 * their callbacks called with TXHUB_ERR_KAFKA. NULL is fine. Call once, from
 * one thread, when no other call on p is running; never from a callback. */
void txhub_producer_destroy(txhub_producer *p, int timeout_ms);

/* Synchronous sends: validate, send, wait for the broker's confirmation.
 * prepare needs m->payload and m->forward_topic; one_shot is a commit that
 * carries them (stored and forwarded as if prepare and commit had both
 * arrived); commit and rollback need only the two ids. The forward topic
 * may not be the control topic. Returns TXHUB_OK when Kafka has the
 * envelope; otherwise see txhub/common.h. */
txhub_status txhub_producer_prepare(txhub_producer *p, const txhub_message *m,
                                    char *errstr, size_t errstr_size);
txhub_status txhub_producer_commit(txhub_producer *p, const char *biz_id,
                                   const char *message_key, char *errstr, size_t errstr_size);
txhub_status txhub_producer_rollback(txhub_producer *p, const char *biz_id,
                                     const char *message_key, char *errstr,
                                     size_t errstr_size);
txhub_status txhub_producer_one_shot(txhub_producer *p, const txhub_message *m,
                                     char *errstr, size_t errstr_size);

/* Called once per txhub_producer_send() that returned TXHUB_OK, on the
 * producer's delivery thread, when the broker confirmed the envelope
 * (TXHUB_OK) or it failed. errstr is valid during the call only. The
 * callback must not block for long and must not destroy the producer. */
typedef void txhub_done_cb(txhub_status st, const char *errstr, void *opaque);

/* Asynchronous send of an envelope of type t (TXHUB_PREPARE, TXHUB_COMMIT
 * (one-shot when m has a payload), TXHUB_ROLLBACK): validates and queues,
 * then returns. TXHUB_OK means queued and done will be called exactly once;
 * any other status means nothing was queued and done will not be called. */
txhub_status txhub_producer_send(txhub_producer *p, txhub_type t, const txhub_message *m,
                                 txhub_done_cb *done, void *opaque, char *errstr,
                                 size_t errstr_size);

/* Wait until every envelope queued so far is confirmed or failed (their
 * callbacks have run), at most timeout_ms. TXHUB_OK, or TXHUB_ERR_KAFKA on
 * time-out. Not from a callback. */
txhub_status txhub_producer_flush(txhub_producer *p, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
