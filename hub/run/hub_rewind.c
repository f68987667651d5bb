/* hub_rewind.c: the run loop's answer to a database that lost its last
 * transactions (rewind.h) or to partitions another replica took: reading
 * the lost tail again, fencing off the others, the history check. */
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "alert.h"
#include "fault.h"
#include "forward.h"
#include "intake.h"
#include "log.h"
#include "metrics.h"
#include "owned.h"
#include "rewind.h"
#include "store.h"

/* Say that the database lost its last transactions for rw[0..n), read
 * again from from[i]: one error line, one database_rewound alert naming
 * every partition, the counters. */
void hub_report_rewound(hub *h, const store_rewound *rw, size_t n, const int64_t *from)
{
	char list[1024] = "", why[1900];
	size_t len = 0;
	uint64_t again = 0;
	const char *topic = n > 0 ? tp_topic(rw[0].tp) : NULL; /* the alert's, when only one */
	for (size_t i = 0; i < n; i++) {
		if (topic && tp_tid(rw[i].tp) != tp_tid(rw[0].tp))
			topic = NULL;
		int64_t count = rw[i].known_next > from[i] ? rw[i].known_next - from[i] : 0;
		again += (uint64_t)count;
		if (len < sizeof list)
			len += (size_t)snprintf(list + len, sizeof list - len,
			                        "%s" TP_FMT ": %s, read again from offset %lld (%lld "
			                        "offset(s); written up to %lld at epoch %lld, the database "
			                        "holds %lld at epoch %lld)",
			                        i ? "; " : "", TP_ARG(rw[i].tp),
			                        rewind_verdict_text((rewind_verdict)rw[i].verdict),
			                        (long long)from[i], (long long)count,
			                        (long long)rw[i].known_next, (long long)rw[i].epoch,
			                        (long long)rw[i].db_next, (long long)rw[i].db_epoch);
	}
	snprintf(why, sizeof why, "PostgreSQL lost its last transactions (a failover to an "
	         "asynchronous standby, or a restore to an earlier point?): %s. %s", list,
	         config_exactly_once(h->cfg)
	             ? "Messages forwarded before the loss are recognised by the progress markers "
	               "and not forwarded again; those the markers cannot vouch for are, and count "
	               "in txhub_forwards_after_rewind_total{outcome=\"sent_again\"}; decisions "
	               "of check-backs and operators in the lost time are made again, and their "
	               "messages may be forwarded twice: counted in "
	               "txhub_forwards_after_rewind_total{outcome=\"decided_again\"}"
	             : "Messages forwarded before the loss are forwarded again (at least once)");
	log_error("hub: %s", why);
	alert_raise(h->al, "database_rewound", NULL, NULL, 0, topic, why);
	metrics_database_rewound(n, again);
}

/* The database lost its last transactions for these partitions (rw[0..n),
 * store_check_history): read each again from where the database stands,
 * as a new owner would. A new epoch, the consumer back at the database's
 * next offset (the beginning when it has no row left: applying an envelope
 * twice changes nothing), what was in flight released, and, in
 * exactly_once, the lanes taken again at the new epoch, so that the
 * progress markers decide again what was forwarded. Returns 0, or -1 when
 * PostgreSQL failed (the next check tries again). */
static int rewind_partitions(hub *h, const store_rewound *rw, size_t n)
{
	char err[512];
	tp_key *parts = calloc(n, sizeof *parts);
	owned_part *own = calloc(n, sizeof *own);
	int64_t *next = calloc(n, sizeof *next), *from = calloc(n, sizeof *from);
	int rc = -1;
	if (!parts || !own || !next || !from) {
		snprintf(err, sizeof err, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		parts[i] = rw[i].tp;
	if (store_take_partitions(h->st, h->owner, h->cfg->group, parts, n, own, next, NULL, err,
	                          sizeof err) != STORE_OK)
		goto done;
	/* what was read past the database's offsets is read again from them */
	intake_batch_drop(&h->batch, parts, n);
	h->single = 0;
	hub_unrelease(h, parts, n);
	for (size_t i = 0; i < n; i++) {
		from[i] = next[i] >= 0 ? next[i] : 0;
		if (next[i] < 0)
			next[i] = INTAKE_FROM_BEGINNING;
	}
	hub_report_rewound(h, rw, n, from);
	forward_note_rewound(h->fw, own, n);
	intake_retake(h->in, own, next, n);
	hub_on_assigned(h, own, n);
	rc = 0;
done:
	if (rc != 0)
		fault_fail(&h->f_scan, err);
	free(parts);
	free(own);
	free(next);
	free(from);
	return rc;
}

/* Compare what the database holds for every owned partition with what
 * this replica wrote, and read again what it lost. Returns 0, or -1 when
 * PostgreSQL failed (in err). */
int hub_check_history(hub *h, char *err, size_t errsz)
{
	store_rewound *rw = NULL;
	size_t nrw = 0;
	if (store_check_history(h->st, h->owned.parts, h->owned.n, &rw, &nrw, err, errsz) !=
	    STORE_OK)
		return -1;
	int rc = nrw > 0 ? rewind_partitions(h, rw, nrw) : 0;
	if (rc != 0)
		snprintf(err, errsz, "reading partitions again after PostgreSQL lost transactions");
	free(rw);
	return rc;
}

/* store_apply found the database behind this replica, or a partition no
 * longer at its epoch: those it lost a tail of are read again, the others
 * were taken by another replica and are fenced off. Either way their
 * records are gone from the batch. Returns rc, or STORE_RETRY (err) when
 * PostgreSQL failed sorting them out (the batch is kept). */
store_rc hub_sort_out(hub *h, const tp_key *lost, size_t nlost, store_rc rc, char *err,
                      size_t errsz)
{
	owned_part *own = calloc(nlost ? nlost : 1, sizeof *own);
	size_t n = 0;
	if (!own) {
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	for (size_t i = 0; i < nlost; i++) {
		const owned_part *o = owned_find(&h->owned, lost[i]);
		if (o)
			own[n++] = *o;
	}
	/* every owned partition, not only the batch's: one loss, one report */
	if (hub_check_history(h, err, errsz) != 0) {
		free(own);
		return STORE_RETRY;
	}
	/* those not read again (still at the old epoch here) were taken */
	size_t nf = 0;
	for (size_t i = 0; i < n; i++) {
		const owned_part *o = owned_find(&h->owned, own[i].tp);
		if (o && o->epoch == own[i].epoch)
			own[nf++].tp = own[i].tp;
	}
	tp_key *fenced = calloc(nf ? nf : 1, sizeof *fenced);
	for (size_t i = 0; fenced && i < nf; i++)
		fenced[i] = own[i].tp;
	if (fenced && nf > 0 && rc == STORE_FENCED)
		hub_fence_lost(h, fenced, nf);
	free(fenced);
	free(own);
	return rc;
}
