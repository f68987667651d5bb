/* janitor.h: the run loop's periodic work on PostgreSQL, off the hot path
 * (STORE_HEARTBEAT_MS apart, retention in between):
 *
 *   - refresh the heartbeat of the owned partitions, which also finds one
 *     another replica took while no records flowed;
 *   - look at the fenced partitions: their holder gone (take them back),
 *     or of another consumer group (say in PostgreSQL that we wait);
 *   - raise prepare_missing for decisions waiting too long for a prepare;
 *   - delete finished rows of the owned partitions in small batches
 *     (retention.*, docs/database.md: Purge and retention).
 *
 * It decides nothing about Kafka: the loop gets its findings and fences or
 * takes partitions. Main thread only, on the main store connection. */
#ifndef TXHUB_JANITOR_H
#define TXHUB_JANITOR_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "config.h"
#include "store.h"

typedef struct {
	tp_key *lost;      /* owned partitions another replica took: fence them */
	size_t nlost;
	tp_key *gone;      /* fenced partitions whose holder is gone: take them back */
	size_t ngone;
	char problem[1024]; /* a clash with a replica of another consumer group, or "" */
} janitor_findings;

void janitor_findings_clear(janitor_findings *f);

/* Whether row is held by a live replica of a consumer group other than
 * cfg->group (one that refreshed its heartbeat lately and did not let go). */
int janitor_foreign_holder(const txhub_config *cfg, const store_partition_row *row);

/* Heartbeat the owned partitions and look at the fenced ones. f is filled
 * as far as it got (clear it either way). Returns 0, or -1 with err. */
int janitor_partitions(store *st, const txhub_config *cfg, const owned_part *own, size_t nown,
                       const tp_key *fenced, size_t nfenced, janitor_findings *f, char *err,
                       size_t errsz);

/* Log, for each owned partition another replica took (lost[0..n)), who
 * took it: its holder and, when that is of another consumer group, the
 * group and what to do (OPS_GROUP_CLASH_ADVICE). Reads their rows; when
 * that fails the lines say the holder is not known. */
void janitor_log_fenced(store *st, const txhub_config *cfg, const tp_key *lost, size_t n);

/* Raise prepare_missing (through al, may be NULL) for the decisions of the
 * owned partitions that have waited alert.awaiting_prepare_ms, each once.
 * Returns 0, or -1 with err. */
int janitor_missing_prepares(store *st, const txhub_config *cfg, alert *al,
                             const owned_part *own, size_t nown, char *err, size_t errsz);

/* Retention totals of the current sweep, for its log line. */
typedef struct {
	int64_t messages, history, rejected, conflicts;
} janitor_retention;

/* One retention batch for the owned partitions (at most 5,000 rows per
 * table, each in a short statement that skips locked rows); nothing when
 * retention.finished_hours is 0. *more: a table filled its batch, call
 * again soon. Adds to *sweep, and logs and resets it when a sweep that
 * deleted something ends. Returns 0, or -1 with err. */
int janitor_retention_batch(store *st, const txhub_config *cfg, const owned_part *own,
                            size_t nown, janitor_retention *sweep, int *more, char *err,
                            size_t errsz);

#endif
