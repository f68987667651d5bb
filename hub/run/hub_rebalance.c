/* hub_rebalance.c: the run loop's rebalance hooks (intake_hooks): taking
 * partitions in PostgreSQL, their revocation, gaps in what was read. */
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "backoff.h"
#include "checkback.h"
#include "fault.h"
#include "forward.h"
#include "gap_report.h"
#include "intake.h"
#include "janitor.h"
#include "log.h"
#include "ops.h"
#include "owned.h"
#include "signals.h"
#include "rewind.h"
#include "store.h"

/* Partitions just taken at the database's next offsets: the group's
 * committed offsets are written to Kafka only after the batch's
 * transaction committed, so one beyond the database's next offset means
 * the database lost what this group applied (a failover or restore while
 * no replica ran). Those offsets are read again from the database's (as
 * taking does anyway); say so. */
static void check_taken(hub *h, const tp_key *parts, size_t n, const owned_part *own,
                        const int64_t *next_offset)
{
	int64_t *committed = calloc(n, sizeof *committed), *from = calloc(n, sizeof *from);
	store_rewound *rw = calloc(n, sizeof *rw);
	owned_part *again = calloc(n, sizeof *again);
	size_t k = 0;
	if (committed && from && rw && again && intake_committed(h->in, parts, n, committed) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (next_offset[i] < 0 || committed[i] <= next_offset[i])
				continue;
			rw[k] = (store_rewound){parts[i], REWIND_BEHIND, own[i].epoch, committed[i],
			                        own[i].epoch, next_offset[i]};
			again[k] = own[i];
			from[k++] = next_offset[i];
		}
	}
	if (k > 0) {
		hub_report_rewound(h, rw, k, from);
		forward_note_rewound(h->fw, again, k);
	}
	free(committed);
	free(from);
	free(rw);
	free(again);
}

/* Take newly assigned partitions in PostgreSQL. This must succeed before
 * they are read, so while PostgreSQL is away it waits here, inside the
 * rebalance (librdkafka's own thread keeps the group's heartbeats going). */
int hub_on_take(void *opaque, const tp_key *parts, size_t n, owned_part *own,
                int64_t *next_offset)
{
	hub *h = opaque;
	char err[512];
	if (n == 0) /* cooperative rebalances assign nothing now and then */
		return 0;
	store_partition_row *prev = calloc(n, sizeof *prev);
	if (!prev)
		return -1;
	int64_t t0 = hub_now_ms();
	int rc = -1;
	for (int attempt = 1; !signals_stop_requested(); attempt++) {
		if (hub_wait_for_store(h) != 0)
			break;
		if (store_take_partitions(h->st, h->owner, h->cfg->group, parts, n, own, next_offset,
		                          prev, err, sizeof err) == STORE_OK) {
			int64_t waited = hub_now_ms() - t0;
			if (waited > 1000)
				log_info("hub: taking %zu partition(s) waited %lld ms (PostgreSQL away, or "
				         "the previous owner's transaction still open)", n, (long long)waited);
			rc = 0;
			break;
		}
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("hub: taking %zu partition(s): %s; retrying in %lld ms", n, err,
		         (long long)d);
		hub_sleep_ms(d);
	}
	if (rc == 0)
		check_taken(h, parts, n, own, next_offset);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!janitor_foreign_holder(h->cfg, &prev[i]))
			continue;
		char problem[sizeof h->problem];
		snprintf(problem, sizeof problem, TP_FMT " was held by %s of consumer group "
		         "\"%s\" and this replica of group \"%s\" took it: %s", TP_ARG(parts[i]),
		         prev[i].owner, prev[i].group, h->cfg->group,
		         OPS_GROUP_CLASH_ADVICE);
		hub_set_problem(h, problem);
	}
	free(prev);
	return rc;
}

void hub_on_revoking(void *opaque, const tp_key *parts, size_t n)
{
	hub *h = opaque;
	char err[512];
	/* finish the batch in hand, commit its offsets and deliver what is in
	 * flight while these partitions are still ours; what cannot be stored
	 * now (PostgreSQL away) is dropped unacknowledged and read again by
	 * the new owner */
	h->retry_at = 0;
	h->reconnect_at = 0;
	if (hub_flush_batch(h) != 0 && h->batch.n > 0) {
		size_t d = intake_batch_drop(&h->batch, parts, n);
		h->single = 0;
		if (d > 0)
			log_warn("hub: %zu record(s) of revoked partitions not stored; their new owner "
			         "reads them again", d);
	}
	intake_commit(h->in);
	/* (with PostgreSQL away the reports could not be written: the leases
	 * cover those messages, the new owner sends them again) */
	int up = hub_store_ready(h) == 0;
	if (up)
		forward_drain(h->fw, &h->owned, (int)forward_delivery_timeout_ms(h->fw));
	else
		forward_poll(h->fw, &h->owned);
	/* stop checking them back, and let go of them in PostgreSQL: a
	 * replica fenced off them may take them at once (the set itself loses
	 * them when this returns) */
	owned_set keep = {0}, gone = {0};
	int copied = owned_copy(&keep, &h->owned);
	for (size_t i = 0; copied == 0 && i < n; i++) {
		const owned_part *o = owned_find(&h->owned, parts[i]);
		if (o && owned_take(&gone, o) != 0)
			copied = -1;
		owned_drop(&keep, parts[i]);
	}
	if (copied != 0)
		owned_clear(&keep); /* stop everything rather than too little */
	checkback_assign(h->cb, &keep);
	if (copied == 0 && up &&
	    store_release_partitions(h->st, gone.parts, gone.n, err, sizeof err) != STORE_OK)
		log_warn("hub: marking revoked partitions released: %s", err);
	owned_free(&keep);
	owned_free(&gone);
	hub_unrelease(h, parts, n); /* no longer ours: no lease release for them either */
}

/* Offsets of an owned partition are not on the broker (gap.h): record
 * and tell (gap_report.h) before intake reads on; -1 while PostgreSQL is
 * away or the partition's epoch moved on (then it is fenced soon). */
int hub_on_gap(void *opaque, const gap *g)
{
	hub *h = opaque;
	char err[512];
	const owned_part *o = owned_find(&h->owned, g->tp);
	if (!o || hub_store_ready(h) != 0)
		return -1;
	gap_report_rc rc = gap_report(h->st, h->al, h->owner, o->epoch, g, err, sizeof err);
	if (rc == GAP_FAILED)
		fault_fail(&h->f_scan, err);
	if (rc == GAP_REPORTED) /* (its next_offset is this replica's own doing) */
		store_note_offset(h->st, g->tp, g->resume, g->kind != GAP_LOST);
	return rc == GAP_REPORTED ? 0 : -1;
}
