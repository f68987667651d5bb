/* intake_waker.h: the consumer's fetcher woken when the hub has room again.
 *
 * librdkafka stops fetching a partition while the consumer's queue holds
 * queued.max.messages.kbytes (txhub: 8 MiB) and looks again only when its
 * broker thread next wakes: within a second when nothing else happens
 * (2.0.x; 2.1.0 and later wait fetch.queue.backoff.ms instead, which
 * intake.c sets). Draining a backlog, the hub empties 8 MiB in about a
 * fifth of a second and then waited the rest of that second for records:
 * the drain rate was the queue's size per second (docs/benchmark.md).
 *
 * A waker is a thread that, when poked, asks the leader of one partition
 * for its offsets (rd_kafka_query_watermark_offsets): the request goes to
 * that broker's thread, which wakes, finds room in the queue and fetches.
 * The run loop pokes it after a full batch while the queue is short
 * (intake_waker_due); at most one question is in flight, at most one is
 * asked every INTAKE_WAKER_GAP_MS. Thread-safe; memory stays bounded by
 * the queue's size as before. */
#ifndef TXHUB_INTAKE_WAKER_H
#define TXHUB_INTAKE_WAKER_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#define INTAKE_WAKER_GAP_MS 10

typedef struct intake_waker intake_waker;

/* A waker for rk's partitions; NULL when out of memory (the hub runs
 * without one, at the fetcher's own pace). */
intake_waker *intake_waker_new(rd_kafka_t *rk);

/* Ask the leader of (topic, partition) about its offsets, unless a
 * question is in flight. Never blocks on Kafka. */
void intake_waker_poke(intake_waker *w, const char *topic, int32_t partition);

/* Stop the thread (waiting for a question in flight) and free w; NULL is a
 * no-op. Before the consumer is destroyed. */
void intake_waker_free(intake_waker *w);

/* Whether to poke, pure: the batch just polled was full (a backlog is being
 * read) and the consumer's queue holds fewer than two batches' records. */
int intake_waker_due(int batch_full, size_t queued, size_t batch_max);

#endif
