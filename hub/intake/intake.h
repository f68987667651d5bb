/* intake.h: the control-topic consumer. Reads records in per-partition
 * order, validates each one into a store_record, and commits offsets to
 * the consumer group only when told the batch is safely in PostgreSQL.
 *
 * One database per group. Every offset it commits carries, as metadata,
 * the identity of the database this hub works against (dbid.h). A
 * partition Kafka assigns here whose committed offset names another
 * database is refused: it is neither taken in PostgreSQL nor read, and
 * stays refused (checked again by intake_recheck()) until pg.adopt_from
 * names that database or Kafka moves the partition away. A partition
 * without such metadata (never committed, or committed by txhub 0.4.0) is
 * taken, and its starting offset committed at once with this hub's
 * identity. When the committed offsets cannot be read, the partitions are
 * refused for now, likewise checked again.
 *
 * Called from the hub's main thread only. */
#ifndef TXHUB_INTAKE_H
#define TXHUB_INTAKE_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dbid.h"
#include "gap.h"
#include "intake_assign.h"
#include "intake_offsets.h"
#include "intake_state.h"
#include "intake_trouble.h"
#include "owned.h"
#include "record.h"
#include "tenant_rules.h"

void intake_batch_reset(intake_batch *b); /* destroys the messages */
void intake_batch_free(intake_batch *b);

/* owned: the run loop's set of owned partitions, empty, which intake keeps
 * up to date from now until intake_close() (owned.h: the points at which
 * it changes); it must outlive the intake. self: the database this hub
 * works against (copied; unknown: offsets carry no identity and no
 * partition is refused). */
intake *intake_new(const txhub_config *cfg, intake_hooks hooks, owned_set *owned,
                   const dbid *self, char *err, size_t errsz);

/* A reload: read pg.adopt_from (and the live keys) from cfg from now on
 * (held: config_hold()). */
void intake_reconfigure(intake *in, const txhub_config *cfg);

/* The tenants' rules to judge records by from now on (NULL: none loaded
 * yet), after every change of the snapshot (tenants.h: a refresh that
 * returned 1); rules must stay valid until the next call or intake_close().
 * With tenants.enforce on and no rules, records read are held unjudged. */
void intake_set_rules(intake *in, const tenant_rules *rules);

/* Whether some valid record of b asks for a forward.not_before not yet held
 * to forward.max_delay (intake_date). */
int intake_needs_date(const intake_batch *b);

/* Hold those records' not_before to forward.max_delay, measured from
 * db_now_ms, PostgreSQL's clock (store_db_now_ms): the clock their due
 * times are computed on (docs/producers.md, Delivery options), whatever the
 * hub's own says. One beyond it is rejected, as an envelope breaking the
 * rules is (valid 0, the reason, logged). */
void intake_date(intake *in, intake_batch *b, int64_t db_now_ms);

/* Judge the records of b not judged yet, when rules allow (enforce.h).
 * Returns 1 when every record of b is judged (b may be stored), 0 while
 * some wait for the first rules to load (b must be kept, unacknowledged). */
int intake_judge(intake *in, intake_batch *b);

/* Add records to b until it holds cfg batch_max records or batch_bytes
 * bytes, or nothing more is ready; waits up to intake.poll_ms for the first. */
void intake_poll(intake *in, intake_batch *b);

/* The consumer (exactly_once: its group metadata fences the forwarder's
 * transactions, txn.h); valid until intake_close. */
rd_kafka_t *intake_consumer(intake *in);

/* Leave the group (triggers the revoke hook) and destroy the consumer. */
void intake_close(intake *in);

/* What may keep a consumer of the consumer group protocol (KIP-848) that
 * has not joined its group after INTAKE_JOIN_HINT_MS from joining (only
 * Apache Kafka 4.0 or later takes its members, and librdkafka says nothing
 * when the broker is older), or NULL: another protocol, or not that long. */
const char *intake_join_hint(const intake *in);
#define INTAKE_JOIN_HINT_MS 10000

/* Why the consumer failed for good (librdkafka's fatal error: with static
 * membership, another process took this group.instance.id), or NULL. */
const char *intake_fatal(const intake *in);

/* The lag of each owned partition: the high watermark last seen by the
 * consumer minus its position (both from librdkafka's cache, no broker
 * round trip). Fills up to max entries, skipping partitions whose position
 * or watermark is not known yet; returns how many. */
size_t intake_lag(intake *in, tp_key *parts, int64_t *lag, size_t max);

/* The group's committed offsets of these partitions (out[i] for parts[i];
 * -1 where none), asked of the broker (at most 5 s). Returns 0, or -1
 * when the broker did not answer. */
int intake_committed(intake *in, const tp_key *parts, size_t n, int64_t *out);

/* Remove the records of these partitions from b (not acknowledged: they
 * are read again by whoever owns them). Returns how many. */
size_t intake_batch_drop(intake_batch *b, const tp_key *parts, size_t n);

#endif
