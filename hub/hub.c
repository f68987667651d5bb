/* hub.c: the run loop.
 *
 *   poll a batch (intake) -> apply it in one transaction (store) -> store the
 *   offsets (intake) -> produce what became committed (forward) -> write
 *   delivery reports (forward -> store) -> claim due retries (store)
 *
 * Check-backs run beside it in their own thread (checkback.c), told which
 * partitions this replica owns on every rebalance; what they commit is
 * forwarded by the retry scan here.
 *
 * The loop holds the set of partitions it owns (owned.h), which intake
 * keeps up to date; everything below is handed the set itself, or reads its
 * array within one call, so nothing works from an outdated copy of it.
 *
 * The loop never acknowledges a record before its transaction committed, and
 * on a PostgreSQL error it keeps the batch and retries it with backoff, so an
 * outage delays the hub but loses nothing. */
#include "hub.h"
#include "hub_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "alert.h"
#include "backoff.h"
#include "checkback.h"
#include "clock.h"
#include "dbid.h"
#include "deadletter.h"
#include "fault.h"
#include "forward.h"
#include "gap_report.h"
#include "intake.h"
#include "janitor.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "monitor.h"
#include "ops.h"
#include "owned.h"
#include "signals.h"
#include "rewind.h"
#include "store.h"
#include "tenants.h"

int64_t hub_now_ms(void) { return clock_ms(); }

void hub_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !signals_stop_requested())
		;
}

/* Whether the store is usable now; while PostgreSQL is away, reconnects
 * at most on a backoff schedule and returns -1 without waiting, so that the
 * loop goes on polling Kafka. */
int hub_store_ready(hub *h)
{
	char err[512];
	int64_t now = hub_now_ms();
	if (h->store_down > 0 && now < h->reconnect_at)
		return -1;
	if (store_ensure(h->st, err, sizeof err) == STORE_OK) {
		h->store_down = 0;
		fault_ok(&h->f_conn);
		/* the database on the other end may have failed over and lost its
		 * last transactions: compare at the next scan, not in 5 s */
		if (store_reconnected(h->st))
			h->next_owners = 0;
		return 0;
	}
	h->store_down++;
	h->reconnect_at = now + backoff_delay(h->store_down, 200, 5000, backoff_random());
	fault_fail(&h->f_conn, err);
	return -1;
}

/* Keep the store usable, waiting with backoff while PostgreSQL is away.
 * Only for the rare place that cannot go on without it (taking
 * partitions). Returns 0 when connected, -1 when a stop was requested
 * first. */
int hub_wait_for_store(hub *h)
{
	for (;;) {
		h->reconnect_at = 0;
		if (hub_store_ready(h) == 0)
			return 0;
		if (signals_stop_requested())
			return -1;
		hub_sleep_ms(h->reconnect_at - hub_now_ms());
	}
}

/* More valid records than this refused one after the other for their data
 * (counted across batches) is taken for a problem of the database, not of
 * the records: a constraint or trigger that refuses every row. They are
 * then retried, not rejected. */
#define REFUSED_IN_A_ROW_MAX 10

/* Forward what became committed, noting per partition which epoch sends
 * it (a debug line the replica tests read to check that no two replicas
 * ever forward for one partition at the same time). */
void hub_send_forwards(hub *h, const store_forward_list *l)
{
	if (l->n == 0 && !l->incomplete)
		return;
	if (log_get_level() <= LOG_DEBUG) {
		for (size_t i = 0; i < l->n;) {
			size_t j = i;
			while (j < l->n && l->items[j].src_tp == l->items[i].src_tp)
				j++;
			const store_owned *o = owned_find(&h->owned, l->items[i].src_tp);
			long long epoch = o ? (long long)o->epoch : 0;
			log_debug("hub: forwarding %zu of " TP_FMT " at epoch %lld", j - i,
			          TP_ARG(l->items[i].src_tp), epoch);
			i = j;
		}
	}
	forward_send(h->fw, l);
}

/* Forget the pending lease releases of these partitions. */
void hub_unrelease(hub *h, const tp_key *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		owned_drop(&h->released, parts[i]);
}

/* Another replica took these partitions (a write or the heartbeat found
 * their epoch moved on): stop reading and checking them back, and drop
 * their records from the batch in hand, unacknowledged. */
void hub_fence_lost(hub *h, const tp_key *lost, size_t nlost)
{
	janitor_log_fenced(h->st, h->cfg, lost, nlost);
	intake_fence(h->in, lost, nlost);
	checkback_assign(h->cb, &h->owned);
	hub_unrelease(h, lost, nlost);
	size_t d = intake_batch_drop(&h->batch, lost, nlost);
	h->single = 0; /* the batch changed: what is left is applied again whole */
	if (d > 0)
		log_warn("hub: dropped %zu record(s) of partitions another replica owns now", d);
}

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
	store_owned *own = calloc(n, sizeof *own);
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
	store_owned *own = calloc(nlost ? nlost : 1, sizeof *own);
	size_t n = 0;
	if (!own) {
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	for (size_t i = 0; i < nlost; i++) {
		const store_owned *o = owned_find(&h->owned, lost[i]);
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
		const store_owned *o = owned_find(&h->owned, own[i].tp);
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

/* Apply recs[0..n) (the batch in hand, or one record of it) once. On
 * STORE_FENCED or STORE_REWOUND the partitions another replica took are
 * fenced off here, those the database lost a tail of are read again, and
 * their records dropped from the batch: recs is then no longer valid, and
 * the caller applies what is left of the batch again. */
static store_rc apply(hub *h, store_record *recs, size_t n, store_forward_list *out,
                      store_stats *stats, char *err, size_t errsz)
{
	size_t nlost = 0;
	tp_key *lost = NULL;
	store_rc rc = store_apply(h->st, recs, n, h->owned.parts, h->owned.n, out, stats, &lost,
	                          &nlost, err, errsz);
	if (rc == STORE_OK) { /* delayed delivery: before the batch's forwards go */
		store_forward_list scheduled;
		store_take_scheduled(h->st, &scheduled);
		forward_note_scheduled(h->fw, &scheduled);
		store_forward_list_clear(&scheduled);
	}
	if (rc == STORE_FENCED || rc == STORE_REWOUND)
		rc = hub_sort_out(h, lost, nlost, rc, err, errsz);
	free(lost);
	if (rc == STORE_OK && (stats->recognised || stats->maybe_duplicated))
		metrics_forwards_after_rewind(stats->recognised, stats->maybe_duplicated);
	return rc;
}

/* The batch in hand failed for the database's sake: keep it, pause
 * reading, and try again after a backoff; the loop goes on polling Kafka
 * meanwhile, so an outage keeps the replica in its group. */
static int batch_wait(hub *h, const char *err)
{
	h->attempt++;
	fault_fail(&h->f_apply, err);
	h->retry_at = hub_now_ms() + backoff_delay(h->attempt, 100, 5000, backoff_random());
	intake_pause(h->in);
	return -1;
}

/* The batch in hand is stored (or emptied by fencing): acknowledge it and
 * read on. */
static void batch_done(hub *h)
{
	if (h->batch.n > 0) {
		intake_ack(h->in, &h->batch);
		h->records += h->batch.n;
		h->batches++;
		fault_ok(&h->f_apply);
	}
	intake_resume(h->in);
	h->attempt = 0;
	h->retry_at = 0;
	h->single = 0;
	intake_batch_reset(&h->batch);
}

/* Apply record i of the batch alone (the batch was refused for the data of
 * one of its records). A valid record PostgreSQL refuses for its data is
 * kept in txhub.rejected with the database's reason; refused again there,
 * or too many in a row, that is the database's fault. Returns STORE_OK when
 * the record is stored (applied or rejected), else what to do. */
static store_rc apply_one(hub *h, size_t i, char *err, size_t errsz)
{
	store_record *r = &h->batch.recs[i];
	store_forward_list committed = {0};
	store_stats stats;
	store_rc rc = apply(h, r, 1, &committed, &stats, err, errsz);
	if (rc == STORE_OK) {
		if (r->valid)
			h->refused_in_a_row = 0;
		h->rejected += stats.rejected;
		h->conflicts += stats.conflicts;
		metrics_add_envelopes(&stats.by);
		metrics_observe_batch(1);
		hub_send_forwards(h, &committed);
	}
	store_stats_free(&stats);
	store_forward_list_clear(&committed);
	if (rc != STORE_REFUSED)
		return rc;
	if (!r->valid) /* its raw bytes and our reason: nothing of it to blame */
		return STORE_RETRY;
	if (h->refused_in_a_row >= REFUSED_IN_A_ROW_MAX) {
		char last[512];
		snprintf(last, sizeof last, "%s", err);
		snprintf(err, errsz, "PostgreSQL refused %zu valid records in a row for their data "
		         "(%s): taken for a fault of the database, not of the records",
		         h->refused_in_a_row + 1, last);
		return STORE_RETRY;
	}
	store_record rej = *r;
	char esc[200], err2[512];
	memset(&rej.env, 0, sizeof rej.env);
	rej.valid = 0;
	snprintf(rej.reason, sizeof rej.reason, "PostgreSQL refused the envelope: %s",
	         log_escape(err, strlen(err), esc, sizeof esc));
	rc = apply(h, &rej, 1, &committed, &stats, err2, sizeof err2);
	store_stats_free(&stats);
	store_forward_list_clear(&committed);
	if (rc == STORE_OK) {
		log_about about = {r->env.biz_id, r->env.message_key, rej.tp, r->env.trace_id};
		log_msg_about(LOG_ERROR, "hub", &about, "PostgreSQL refuses the record at offset %lld "
		              "for its data: %s; kept in txhub.rejected", (long long)rej.offset, err);
		h->refused_in_a_row++;
		h->rejected++;
		metrics_envelopes m;
		memset(&m, 0, sizeof m);
		metrics_envelopes_count(&m, r->label,
		                        r->env.type == ENVELOPE_PREPARE  ? METRICS_PREPARE
		                        : r->env.type == ENVELOPE_COMMIT ? METRICS_COMMIT
		                                                         : METRICS_ROLLBACK,
		                        METRICS_REJECTED);
		metrics_add_envelopes(&m);
		metrics_tally_free(&m);
		metrics_observe_batch(1);
		return STORE_OK;
	}
	snprintf(err, errsz, "keeping a refused record in txhub.rejected: %s", err2);
	return rc == STORE_REFUSED ? STORE_RETRY : rc;
}

/* Try to store the batch in hand (when its retry is due), then acknowledge
 * and forward it. Whole, in one transaction; when PostgreSQL refuses it
 * for the data of a record, one record at a time from then on, to find
 * that record. Any other failure keeps the batch, unacknowledged, for a
 * later attempt. Returns 0 when the batch is stored (or empty). */
int hub_flush_batch(hub *h)
{
	char err[1024];
	if (!intake_judge(h->in, &h->batch)) {
		/* tenants.enforce with no rules loaded: never let a record through
		 * unjudged; keep it, unacknowledged, until rules load */
		if (!h->held)
			log_error("hub: tenants.enforce is on and no tenant rules are loaded yet (%s): "
			          "intake waits, the records stay in Kafka",
			          tenants_failing(h->tenants) ? tenants_failing(h->tenants)
			                                      : "not read yet");
		h->held = 1;
		intake_pause(h->in);
		return -1;
	}
	if (h->held) {
		log_info("hub: tenant rules loaded: intake goes on");
		h->held = 0;
		if (h->batch.n == 0)
			intake_resume(h->in);
	}
	if (h->batch.n > 0 && (hub_now_ms() < h->retry_at || hub_store_ready(h) != 0)) {
		intake_pause(h->in);
		return -1;
	}
	for (;;) {
		if (h->batch.n == 0 || (h->single && h->next_single == h->batch.n)) {
			batch_done(h);
			return 0;
		}
		if (h->single) {
			store_rc rc = apply_one(h, h->next_single, err, sizeof err);
			if (rc == STORE_OK)
				h->next_single++;
			else if (rc != STORE_FENCED && rc != STORE_REWOUND)
				return batch_wait(h, err); /* (else: what is left, whole, again) */
			continue;
		}
		store_forward_list committed = {0};
		store_stats stats;
		store_rc rc = apply(h, h->batch.recs, h->batch.n, &committed, &stats, err, sizeof err);
		if (rc == STORE_OK) {
			h->rejected += stats.rejected;
			h->conflicts += stats.conflicts;
			metrics_add_envelopes(&stats.by);
			metrics_observe_batch(h->batch.n);
			log_debug("hub: batch of %zu: %zu applied, %zu no-op, %zu committed, %zu rejected, "
			          "%zu conflicts", h->batch.n, stats.applied, stats.noops, stats.committed,
			          stats.rejected, stats.conflicts);
			store_stats_free(&stats);
			batch_done(h);
			hub_send_forwards(h, &committed);
			store_forward_list_clear(&committed);
			return 0;
		}
		store_forward_list_clear(&committed);
		store_stats_free(&stats);
		if (rc == STORE_RETRY)
			return batch_wait(h, err);
		if (rc == STORE_REFUSED) {
			log_warn("hub: PostgreSQL refused a batch of %zu records for the data of one (%s); "
			         "applying them one at a time to find it", h->batch.n, err);
			h->single = 1;
			h->next_single = 0;
		}
	}
}

/* Serve delivery reports and hand them to the writer (forward.c), which
 * records them beside the batches on a connection of its own. */
static void hand_over_deliveries(hub *h)
{
	forward_poll(h->fw, &h->owned);
	deadletter_poll(h->dl, &h->owned);
}

/* The clash over partitions with a replica of another consumer group (or
 * "": none), as the janitor or a take found it: logged when it changes,
 * the alert group_clash raised when one begins. */
void hub_set_problem(hub *h, const char *problem)
{
	if (strcmp(problem, h->problem) == 0)
		return;
	if (*problem && !h->problem[0])
		alert_raise(h->al, "group_clash", NULL, NULL, 0, h->cfg->control_topic, problem);
	else if (*problem)
		log_error("hub: %s", problem);
	else
		log_info("hub: the clash over partitions is over");
	snprintf(h->problem, sizeof h->problem, "%s", problem);
}

/* Note partitions taken: their forwards in flight under the previous
 * owner are released at the next scan, and the checker asks about them. */
void hub_on_assigned(void *opaque, const store_owned *taken, size_t n)
{
	hub *h = opaque;
	h->joined = 1;
	for (size_t i = 0; i < n; i++) /* out of memory: their leases expire on their own */
		owned_take(&h->released, &taken[i]);
	checkback_assign(h->cb, &h->owned);
	/* before the partitions' first batch (else their first scan), with what a
	 * previous owner had in flight */
	char err[512];
	if (hub_order_read(h, taken, n, 1, err, sizeof err) != 0)
		log_warn("hub: reading the blockers of forward keys of the partitions taken: %s; the "
		         "next scan reads them", err);
}

/* Partitions just taken at the database's next offsets: the group's
 * committed offsets are written to Kafka only after the batch's
 * transaction committed, so one beyond the database's next offset means
 * the database lost what this group applied (a failover or restore while
 * no replica ran). Those offsets are read again from the database's (as
 * taking does anyway); say so. */
static void check_taken(hub *h, const tp_key *parts, size_t n, const store_owned *own,
                        const int64_t *next_offset)
{
	int64_t *committed = calloc(n, sizeof *committed), *from = calloc(n, sizeof *from);
	store_rewound *rw = calloc(n, sizeof *rw);
	size_t k = 0;
	if (committed && from && rw && intake_committed(h->in, parts, n, committed) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (next_offset[i] < 0 || committed[i] <= next_offset[i])
				continue;
			rw[k] = (store_rewound){parts[i], REWIND_BEHIND, own[i].epoch, committed[i],
			                        own[i].epoch, next_offset[i]};
			from[k++] = next_offset[i];
		}
	}
	if (k > 0)
		hub_report_rewound(h, rw, k, from);
	free(committed);
	free(from);
	free(rw);
}

/* Take newly assigned partitions in PostgreSQL. This must succeed before
 * they are read, so while PostgreSQL is away it waits here, inside the
 * rebalance (librdkafka's own thread keeps the group's heartbeats going). */
int hub_on_take(void *opaque, const tp_key *parts, size_t n, store_owned *own,
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
		const store_owned *o = owned_find(&h->owned, parts[i]);
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
	const store_owned *o = owned_find(&h->owned, g->tp);
	if (!o || hub_store_ready(h) != 0)
		return -1;
	gap_report_rc rc = gap_report(h->st, h->al, h->owner, o->epoch, g, err, sizeof err);
	if (rc == GAP_FAILED)
		fault_fail(&h->f_scan, err);
	if (rc == GAP_REPORTED) /* (its next_offset is this replica's own doing) */
		store_note_offset(h->st, g->tp, g->resume, g->kind != GAP_LOST);
	return rc == GAP_REPORTED ? 0 : -1;
}

/* Returns 0, or -1 when the store failed (recorded in f_scan). */
static int release_assigned(hub *h)
{
	if (h->released.n == 0)
		return 0;
	char err[512];
	if (store_release_forwards(h->st, h->released.parts, h->released.n,
	                           !config_exactly_once(h->cfg), err, sizeof err) != STORE_OK) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	/* rows a hub with forward.order = key held are not held by this one */
	size_t unheld = 0;
	if (!config_order_by_key(h->cfg) &&
	    store_order_release(h->st, h->released.parts, h->released.n, 1, &unheld, err,
	                        sizeof err) != STORE_OK) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	if (unheld > 0)
		log_info("hub: %zu forward(s) held for their key's order (forward.order = key) are "
		         "due now (forward.order = partition)", unheld);
	owned_clear(&h->released);
	return 0;
}

/* When to claim next, after a claim that took n of at most limit: at once
 * while they come back full, else when the next one falls due within the
 * second (at least 100 ms on: a flow of due times is claimed ten times a
 * second at most), else at the next scan. */
void hub_plan_next_claim(hub *h, size_t n, size_t limit)
{
	h->claim_more = n >= limit;
	h->next_claim = 0;
	int64_t in_ms;
	char err[512];
	if (h->claim_more || store_next_send_due(h->st, h->owned.parts, h->owned.n, &in_ms, err,
	                                         sizeof err) != STORE_OK ||
	    in_ms < 0 || in_ms >= 1000)
		return; /* (a failed probe: the scan claims them) */
	h->next_claim = hub_now_ms() + (in_ms < 100 ? 100 : in_ms);
}

/* forward.order = key, at_least_once: the forwarder's blockers of own[0..n)
 * as PostgreSQL has them now (each lane reads its own). Returns 0, or -1
 * with err. */
int hub_order_read(hub *h, const store_owned *own, size_t n, int taken, char *err,
                   size_t errsz)
{
	if (!config_order_by_key(h->cfg) || config_exactly_once(h->cfg))
		return 0;
	store_blocker_list b = {0};
	int64_t started = hub_now_ms(), synced = forward_reports_synced(h->fw);
	if (store_order_blockers(h->st, own, n, taken, &b, err, errsz) != STORE_OK)
		return -1;
	forward_order_refresh(h->fw, own, n, &b, started, synced);
	store_blocker_list_clear(&b);
	return 0;
}

/* forward.order = key: the held rows whose blockers are gone made due.
 * Returns 0, or -1 with err. */
static int order_release(hub *h, char *err, size_t errsz)
{
	const owned_set *own = &h->owned;
	size_t released = 0;
	if (store_order_release(h->st, own->parts, own->n, 0, &released, err, errsz) != STORE_OK)
		return -1;
	if (released > 0)
		log_debug("hub: %zu forward(s) held for their key's order released", released);
	return 0;
}

/* Rows claimed (or sequenced) by one due scan at most: again at once while
 * a claim comes back full. */
#define DUE_CLAIM_MAX 5000

/* The forwards due again (retries, leases run out, delayed messages due,
 * chains of held ones released) and those decided outside a batch
 * (check-back answers, operators): they get the next forward sequences of
 * their partitions, so that the delivery marks record them (no `sent`
 * write per row); exactly_once wakes the lanes, at_least_once sends them,
 * and claims besides what has a sequence and was lost (a lease run out).
 * forward.order = key: released first, and the blockers read after the
 * claim: what was sequenced is in the forwarder's hands (its keys' queues
 * keep their order), and a released chain goes whole. */
int hub_claim_retries(hub *h)
{
	const owned_set *own = &h->owned;
	if (own->n == 0 || forward_in_flight(h->fw) > 10000) {
		h->claim_more = 0;
		h->next_claim = 0;
		return 0;
	}
	char err[512];
	int eos = config_exactly_once(h->cfg), by_key = config_order_by_key(h->cfg);
	if (by_key && order_release(h, err, sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	store_forward_list l = {0};
	size_t again = 0;
	int64_t t0 = hub_now_ms();
	h->claimed_at = t0;
	store_rc rc = store_sequence_forwards(h->st, own->parts, own->n, DUE_CLAIM_MAX, eos, &l,
	                                      &again, err, sizeof err);
	size_t nseq = l.n; /* (the claim adds to l, all in offset order) */
	int64_t t1 = hub_now_ms();
	/* (rows falling due meanwhile wait for the next sequencing; a full one
	 * comes back at once) */
	if (rc == STORE_OK && !eos)
		rc = store_claim_lost_forwards(h->st, own->parts, own->n, DUE_CLAIM_MAX,
		                               nseq >= DUE_CLAIM_MAX ? -1 : 1000, &l, err, sizeof err);
	if (rc == STORE_OK && by_key && hub_order_read(h, own->parts, own->n, 0, err, sizeof err) != 0)
		rc = STORE_RETRY;
	if (rc != STORE_OK)
		fault_fail(&h->f_scan, err);
	if (l.n > 0)
		log_debug("hub: sending %zu due forward(s), %zu of them without a new sequence "
		          "(sequenced in %lld ms, claimed in %lld ms)", l.n, l.n - nseq,
		          (long long)(t1 - t0), (long long)(hub_now_ms() - t1));
	if (again > 0) {
		log_warn("hub: %zu message(s) decided again by a check-back or an operator after "
		         "PostgreSQL lost their first decision may be forwarded twice (counted in "
		         "txhub_forwards_after_rewind_total{outcome=\"decided_again\"})", again);
		metrics_forwards_decided_again(again);
	}
	/* (what was sequenced is sent even when a later step failed: it is
	 * leased, and would wait for its lease otherwise) */
	hub_send_forwards(h, &l);
	hub_plan_next_claim(h, nseq > l.n - nseq ? nseq : l.n - nseq, DUE_CLAIM_MAX);
	store_forward_list_clear(&l);
	return rc == STORE_OK ? 0 : -1;
}

/* Take back fenced partitions (Kafka still assigns them here) whose holder
 * is gone: at new epochs, read again from PostgreSQL's offsets. */
static int retake(hub *h, const tp_key *parts, size_t n)
{
	char err[512];
	store_owned *own = calloc(n, sizeof *own);
	int64_t *next = calloc(n, sizeof *next);
	int rc = -1;
	if (!own || !next)
		snprintf(err, sizeof err, "out of memory");
	else if (store_take_partitions(h->st, h->owner, h->cfg->group, parts, n, own, next, NULL,
	                               err, sizeof err) == STORE_OK)
		rc = 0;
	if (rc == 0) {
		intake_retake(h->in, own, next, n);
		hub_on_assigned(h, own, n);
	} else {
		fault_fail(&h->f_scan, err);
	}
	free(own);
	free(next);
	return rc;
}

/* Every STORE_HEARTBEAT_MS (janitor.h): heartbeats and fenced partitions,
 * then missing prepares. Returns -1 when a store operation failed. */
static int tend_partitions(hub *h)
{
	char err[512];
	/* first: a partition whose row went back in time would look taken */
	if (hub_check_history(h, err, sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	size_t nfenced;
	const tp_key *fenced = intake_fenced(h->in, &nfenced);
	janitor_findings f;
	int rc = janitor_partitions(h->st, h->cfg, h->owned.parts, h->owned.n, fenced, nfenced, &f,
	                            err, sizeof err);
	if (rc != 0)
		fault_fail(&h->f_scan, err);
	if (f.nlost > 0)
		hub_fence_lost(h, f.lost, f.nlost);
	if (rc == 0 && f.ngone > 0)
		rc = retake(h, f.gone, f.ngone);
	tp_key accept[256];
	size_t naccept = intake_recheck(h->in, accept, 256);
	if (rc == 0 && naccept > 0)
		rc = retake(h, accept, naccept);
	if (rc == 0)
		hub_set_problem(h, f.problem);
	janitor_findings_clear(&f);
	/* (hub_fence_lost and retake changed the set: read it again here) */
	if (janitor_missing_prepares(h->st, h->cfg, h->al, h->owned.parts, h->owned.n, err,
	                             sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		rc = -1;
	}
	return rc;
}

/* Retention, a batch at a time: again at the next scan while there is
 * more, else at the next heartbeat. Returns -1 when the store failed. */
static int retention(hub *h, int64_t now)
{
	if (now < h->next_retention)
		return 0;
	char err[512];
	int more;
	if (janitor_retention_batch(h->st, h->cfg, h->owned.parts, h->owned.n, &h->sweep, &more, err,
	                            sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		h->next_retention = now + STORE_HEARTBEAT_MS;
		return -1;
	}
	h->next_retention = more ? now : now + STORE_HEARTBEAT_MS;
	return 0;
}

/* Partitions Kafka assigns here that intake refuses (intake.h): kept for
 * /readyz; the alert database_mismatch raised once for as long as some
 * are refused for another database (a rebalance in between, which
 * refuses them again, does not count as an end). */
static void watch_refusals(hub *h, int64_t now)
{
	int mismatch;
	if (intake_refusals(h->in, h->refusals, sizeof h->refusals, &mismatch) > 0)
		h->refused_seen = now;
	else if (now - h->refused_seen > 2 * STORE_HEARTBEAT_MS)
		h->mismatch_alerted = 0;
	if (mismatch && !h->mismatch_alerted) {
		alert_raise(h->al, "database_mismatch", NULL, NULL, 0, h->cfg->control_topic,
		            h->refusals);
		h->mismatch_alerted = 1;
	}
}

/* Why this replica is not ready, for /readyz ("" when it is): before the
 * consumer joined its group, Kafka's last error (a refused password or
 * certificate, an ACL); a PostgreSQL write failing for a second or more,
 * partitions the broker refuses to let it read, partitions refused, a
 * clash over partitions, the forward producer failing as it starts, or
 * (exactly_once) a partition its lane has not taken for
 * alert.lane_stuck_ms. */
static const char *readiness(const hub *h, char *buf, size_t bufsz)
{
	const fault *faults[] = {&h->f_conn, &h->f_apply, &h->f_scan};
	int64_t now = hub_now_ms();
	if (!h->joined && intake_trouble(h->in)) {
		snprintf(buf, bufsz, "Kafka: %s", intake_trouble(h->in));
		return buf;
	}
	if (config_tenants_enforce(h->cfg) && !tenants_rules(h->tenants)) {
		snprintf(buf, bufsz, "tenants.enforce is on and no tenant rules are loaded yet: intake "
		         "waits (%s)", tenants_failing(h->tenants) ? tenants_failing(h->tenants)
		                                                   : "not read yet");
		return buf;
	}
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
		const fault *f = faults[i];
		if (f->since_ms && (f->attempts >= 2 || now - f->since_ms >= 1000)) {
			snprintf(buf, bufsz, "PostgreSQL: %s has failed for %lld s: %s", f->what,
			         (long long)((now - f->since_ms) / 1000), f->last);
			return buf;
		}
	}
	char why[600];
	int64_t since = forward_failing(h->fw, why, sizeof why);
	if (since && now - since >= 1000) {
		snprintf(buf, bufsz, "PostgreSQL: recording delivery reports has failed for %lld s: %s",
		         (long long)((now - since) / 1000), why);
		return buf;
	}
	if (intake_unreadable(h->in, buf, bufsz) > 0)
		return buf;
	if (forward_dying(h->fw, buf, bufsz))
		return buf;
	if (h->refusals[0])
		return h->refusals;
	if (!h->problem[0] && forward_stuck(h->fw, buf, bufsz) > 0)
		return buf;
	return h->problem;
}

/* Read the tenants' rules again when due (tenants.h), and hand a new
 * snapshot to intake. */
void hub_refresh_tenants(hub *h, int64_t now)
{
	if (tenants_refresh(h->tenants, store_conn(h->st), now) == 1) /* logs its count */
		intake_set_rules(h->in, tenants_rules(h->tenants));
}

void hub_publish_lag(hub *h)
{
	tp_key parts[256];
	int64_t lag[256];
	size_t n = intake_lag(h->in, parts, lag, 256);
	metrics_set_lag(parts, lag, n);
}

/* SIGHUP: load the configuration again and apply the keys that may change
 * while running; the others keep their values (and the log says which
 * changed). A configuration that does not load leaves everything as it
 * was. */
void hub_reload(hub *h)
{
	char err[1024], fixed[512];
	txhub_config *next = calloc(1, sizeof *next);
	txhub_config **l = realloc(h->loaded, (h->nloaded + 1) * sizeof *l);
	if (l)
		h->loaded = l;
	if (!next || !l) {
		log_error("hub: SIGHUP: out of memory; the running configuration stays");
		free(next);
		return;
	}
	if (!h->reload) {
		snprintf(err, sizeof err, "no configuration source to reload from");
		goto fail;
	}
	if (h->reload(h->reload_ctx, next, err, sizeof err) != 0)
		goto fail;
	if (config_keep_fixed(h->cfg, next, fixed, sizeof fixed) != 0) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	h->loaded[h->nloaded++] = next;
	h->cfg = next;
	config_apply_logging(next);
	if (*fixed)
		log_warn("hub: SIGHUP: %s changed, which a running hub cannot take up: restart it "
		         "for that", fixed);
	store_set_first_after(h->st, next->checkback_first_after_ms);
	forward_reconfigure(h->fw, next);
	intake_reconfigure(h->in, next);
	checkback_reconfigure(h->cb, next);
	alert_reconfigure(h->al, next);
	monitor_reconfigure(h->mon, next);
	fault *faults[] = {&h->f_conn, &h->f_apply, &h->f_scan};
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
		faults[i]->alert_ms = next->alert_database_failing_ms;
	log_info("hub: SIGHUP: configuration reloaded");
	return;
fail:
	log_error("hub: SIGHUP: %s; the running configuration stays", err);
	config_free(next);
	free(next);
}

/* The scan, one step per turn of the loop, so that a batch waits for one
 * step at most (the whole scan took up to 30 ms at 2,000 tx/s, and held
 * every batch behind it): heartbeats and fenced partitions when due
 * first (nothing is sequenced for a database that lost transactions
 * before it is found out; a reconnect makes them due at once), then
 * releasing and claiming forwards, retention, the tenants' rules. Returns
 * whether the scan is over. */
int hub_scan_step(hub *h, int64_t now)
{
	switch (h->scan_step) {
	case 0:
		h->scan_failed = 0;
		h->scan_step = 1;
		/* fall through */
	case 1:
		/* (checked again here: a reconnect between two steps makes them
		 * due before anything is claimed) */
		if (now >= h->next_owners) {
			h->scan_failed |= tend_partitions(h);
			h->next_owners = now + STORE_HEARTBEAT_MS;
			return 0; /* claiming next turn */
		}
		h->scan_failed |= release_assigned(h) | hub_claim_retries(h);
		break;
	case 2:
		h->scan_failed |= retention(h, now);
		break;
	default:
		hub_refresh_tenants(h, now);
		if (!h->scan_failed)
			fault_ok(&h->f_scan);
		h->scan_step = 0;
		return 1;
	}
	h->scan_step++;
	return 0;
}

void hub_take_signals(hub *h)
{
	int sig = signals_take();
	if (sig & SIGNALS_RELOAD)
		hub_reload(h);
	if (sig & SIGNALS_USR1)
		log_info("hub: SIGUSR1 ignored");
	if (sig & SIGNALS_USR2)
		log_info("hub: SIGUSR2 ignored");
}

int hub_run(const txhub_config *cfg, hub_reload_fn reload_fn, void *reload_ctx)
{
	hub h;
	memset(&h, 0, sizeof h);
	h.cfg = cfg;
	h.reload = reload_fn;
	h.reload_ctx = reload_ctx;
	char err[1024];
	int status = 1;

	signals_install();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_error("hub: cannot initialise libcurl");
		return 1;
	}

	/* first, so that /healthz and /readyz answer during a slow start-up */
	if (!(h.mon = monitor_start(cfg, err, sizeof err))) {
		log_error("hub: %s", err);
		curl_global_cleanup();
		return 1;
	}
	for (int attempt = 1; !h.st; attempt++) {
		h.st = store_connect(cfg, err, sizeof err);
		if (h.st)
			break;
		char why[1100];
		snprintf(why, sizeof why, "starting: %s", err);
		monitor_turn(h.mon, 0, why);
		if (signals_stop_requested()) {
			monitor_stop(h.mon);
			curl_global_cleanup();
			return 0;
		}
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("hub: %s; retrying in %lld ms", err, (long long)d);
		hub_sleep_ms(d);
	}
	int version;
	if (store_schema_version(h.st, &version, err, sizeof err) != STORE_OK) {
		log_error("hub: reading the schema version: %s", err);
		goto done;
	}
	if (version != migrate_latest()) {
		log_error("hub: the database schema is at version %d, this txhub needs %d: run "
		          "`txhub migrate` first", version, migrate_latest());
		goto done;
	}
	snprintf(err, sizeof err, "out of memory");
	if (!(h.tenants = tenants_new()) || !(h.al = alert_start(cfg, err, sizeof err)) ||
	    !(h.cb = checkback_start(cfg, h.al, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	fault_init(&h.f_conn, "hub: connecting to PostgreSQL", h.al, cfg->alert_database_failing_ms);
	fault_init(&h.f_apply, "hub: storing envelopes", h.al, cfg->alert_database_failing_ms);
	fault_init(&h.f_scan, "hub: scanning owned partitions", h.al,
	           cfg->alert_database_failing_ms);
	if (!(h.fw = forward_new(cfg, h.al, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	if (!(h.dl = deadletter_start(cfg, h.al, err, sizeof err)) && *err) {
		log_error("hub: %s", err);
		goto done;
	}
	/* a forward in flight is leased for longer than the producer may take */
	store_set_lease(h.st, forward_delivery_timeout_ms(h.fw) + 60000);
	store_set_order_by_key(h.st, config_order_by_key(h.cfg), config_exactly_once(h.cfg));
	char host[64] = "";
	if (gethostname(host, sizeof host - 1) != 0)
		snprintf(host, sizeof host, "unknown-host");
	snprintf(h.owner, sizeof h.owner, "%s/%ld", host, (long)getpid());
	dbid self;
	char about[200];
	if (dbid_read(store_conn(h.st), &self, err, sizeof err) == 0)
		log_info("hub: working against %s", dbid_describe(&self, about, sizeof about));
	else
		log_warn("hub: cannot read the database's identity (%s): offsets are committed "
		         "without it, and a replica of group %s against another database goes "
		         "unnoticed", err, cfg->group);
	intake_hooks hooks = {hub_on_take, hub_on_assigned, hub_on_revoking, hub_on_gap, &h};
	if (!(h.in = intake_new(cfg, hooks, &h.owned, &self, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	/* the rules before the first record (each record's tenant is recorded,
	 * enforcement or not); failing, tenants.enforce holds intake until they
	 * load (hub_flush_batch) */
	hub_refresh_tenants(&h, hub_now_ms());
	log_info("hub: running (control topic %s, group %s, brokers %s)", cfg->control_topic,
	         cfg->group, cfg->brokers);

	int64_t next_scan = 0, next_stats = hub_now_ms() + 60000;
	int64_t next_lag = 0;
	int consumer_died = 0;
	while (!signals_stop_requested()) {
		if (intake_fatal(h.in)) {
			/* a dead consumer cannot be replaced in place: its group
			 * membership went with it. Stop cleanly; the supervisor starts
			 * the hub again, which joins as a new member */
			log_error("hub: the Kafka consumer failed for good (%s); stopping so that a "
			          "restart replaces it", intake_fatal(h.in));
			alert_raise(h.al, "kafka_fatal", NULL, NULL, 0, NULL, intake_fatal(h.in));
			consumer_died = 1;
			break;
		}
		hub_take_signals(&h);
		intake_poll(h.in, &h.batch);
		hub_flush_batch(&h);
		intake_commit_due(h.in);
		int64_t now = hub_now_ms();
		watch_refusals(&h, now);
		char why[sizeof h.problem + 600];
		metrics_set_owned_partitions(h.owned.n);
		monitor_turn(h.mon, h.joined, readiness(&h, why, sizeof why));
		if (now >= next_lag) {
			hub_publish_lag(&h);
			next_lag = now + 1000;
		}
		hand_over_deliveries(&h);
		if (forward_take_release(h.fw)) { /* a blocker delivered: release its key's held ones */
			int64_t at = h.claimed_at + 100 > now ? h.claimed_at + 100 : now;
			if (h.next_claim == 0 || h.next_claim > at)
				h.next_claim = at;
		}
		if (hub_store_ready(&h) == 0 &&
		    (h.scan_step > 0 || h.released.n > 0 || now >= next_scan) && hub_scan_step(&h, now))
			next_scan = now + 1000;
		else if (hub_store_ready(&h) == 0 && h.scan_step == 0 && h.released.n == 0 &&
		         (h.claim_more || (h.next_claim > 0 && now >= h.next_claim)))
			hub_claim_retries(&h); /* between two scans (hub_plan_next_claim) */
		if (now >= next_stats) {
			forward_stats fs = forward_get_stats(h.fw);
			checkback_stats cs = checkback_get_stats(h.cb);
			log_info("hub: %llu records in %llu batches, %llu rejected, %llu conflicts; "
			         "forwards: %llu delivered, %llu failed attempts, %llu given up, %zu in flight; "
			         "check-backs: %llu asked, %llu committed, %llu rolled back, %llu undecided, "
			         "%llu errors, %llu check_failed, %zu in flight, %zu waiting for a "
			         "connection to their host",
			         (unsigned long long)h.records, (unsigned long long)h.batches,
			         (unsigned long long)h.rejected, (unsigned long long)h.conflicts,
			         (unsigned long long)fs.delivered, (unsigned long long)fs.failed_attempts,
			         (unsigned long long)fs.failed_final, forward_in_flight(h.fw),
			         (unsigned long long)cs.requests, (unsigned long long)cs.committed,
			         (unsigned long long)cs.rolled_back, (unsigned long long)cs.undecided,
			         (unsigned long long)cs.errors, (unsigned long long)cs.check_failed,
			         cs.in_flight, cs.waiting);
			next_stats = now + 60000;
		}
	}
	log_info("hub: stopping: finishing the batch in hand");
	h.retry_at = 0;
	h.reconnect_at = 0;
	if (hub_flush_batch(&h) != 0 && h.batch.n > 0)
		log_warn("hub: stopping with %zu records not stored; they will be read again",
		         h.batch.n);
	intake_batch_reset(&h.batch);
	intake_commit(h.in);
	if (hub_store_ready(&h) == 0)
		forward_drain(h.fw, &h.owned, 10000);
	status = consumer_died ? 1 : 0;
done:
	if (h.in)
		intake_close(h.in); /* may call hub_on_revoking: batch is empty by now */
	intake_batch_free(&h.batch);
	checkback_stop(h.cb); /* after intake_close: the revoke hook talks to it */
	forward_destroy(h.fw);
	deadletter_stop(h.dl);
	alert_stop(h.al, 3000);
	monitor_stop(h.mon);
	tenants_free(h.tenants);
	store_close(h.st);
	owned_free(&h.owned); /* after intake_close, its writer */
	owned_free(&h.released);
	for (size_t i = 0; i < h.nloaded; i++) {
		config_free(h.loaded[i]);
		free(h.loaded[i]);
	}
	free(h.loaded);
	curl_global_cleanup();
	if (status == 0)
		log_info("hub: stopped cleanly");
	return status;
}
