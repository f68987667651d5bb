/* gap_report.h: a gap in a control-topic partition (gap.h), found by the
 * owner of the partition, recorded and told: the row in txhub.gaps and the
 * partition's new next_offset in one statement (so that it is reported
 * once, and `txhub status` shows it), then an error line, the alert
 * control_records_lost or control_partition_truncated, and for a loss
 * txhub_control_records_lost_total.
 *
 * Run loop thread only (it uses the store's connection). */
#ifndef TXHUB_GAP_REPORT_H
#define TXHUB_GAP_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "gap.h"
#include "store.h"

typedef enum {
	GAP_REPORTED = 0, /* recorded and told */
	GAP_NOT_OURS = 1, /* the partition is at another epoch now: nothing written */
	GAP_FAILED = 2,   /* PostgreSQL failed: err says why, nothing written */
} gap_report_rc;

/* Record g (kind GAP_LOST or GAP_TRUNCATED) for its partition (g->tp),
 * held at epoch by owner (host/pid), and tell. */
gap_report_rc gap_report(store *st, alert *al, const char *owner,
                         int64_t epoch, const gap *g, char *err, size_t errsz);

#endif
