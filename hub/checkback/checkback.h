/* checkback.h: ask producers about prepares that never got a decision
 * (docs/producers.md: Check-back).
 *
 * The checker runs in a thread of its own with its own PostgreSQL
 * connection and one libcurl multi handle: it claims due `prepared` rows of
 * the partitions this replica owns, keeps up to checkback.concurrency
 * requests in flight on reused connections, at most checkback.per_host of
 * them to one host (the other rows claimed for it wait, their time-out not
 * yet running), and writes the answers back in batches. A committed answer makes the row `committed` with a pending
 * forward, which the main loop's forward scan sends. Every write is
 * conditional on the row still being `prepared` at the attempt count it was
 * claimed with, so a decision envelope that arrives meanwhile always wins.
 *
 * The pure wire helpers (answers, URLs, the allow list) are in
 * checkback_proto.h. */
#ifndef TXHUB_CHECKBACK_H
#define TXHUB_CHECKBACK_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "checkback_proto.h"
#include "config.h"
#include "owned.h"
#include "store.h"

typedef struct checkback checkback;

/* Start the checker thread. It owns no partition until checkback_assign(). */
checkback *checkback_start(const txhub_config *cfg, alert *al, char *err, size_t errsz);

/* Tell the checker which partitions this replica owns now (copied: the
 * checker works from its copy until the next call). When some were taken
 * away, waits (up to a few seconds) until the checker has written the
 * answers it has for them and dropped their requests in flight. Called from
 * the main thread. */
void checkback_assign(checkback *cb, const owned_set *owned);

/* A reload: the thread takes up cfg (held: config_hold()) at
 * its next turn; requests in flight finish as they started. Keys that
 * cannot change while running are the same in cfg. */
void checkback_reconfigure(checkback *cb, const txhub_config *cfg);

/* Stop the thread (requests in flight are dropped and their rows made due
 * again) and free everything. */
void checkback_stop(checkback *cb);

typedef struct {
	uint64_t requests, committed, rolled_back, undecided, errors, check_failed;
	size_t in_flight; /* requests under way */
	size_t waiting;   /* claimed rows waiting for a connection to their host */
} checkback_stats;
checkback_stats checkback_get_stats(checkback *cb);

#endif
