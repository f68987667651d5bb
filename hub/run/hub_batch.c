/* hub_batch.c: the batch in hand: applied in one transaction, one record
 * at a time when one of them is refused, kept and retried with backoff on
 * a PostgreSQL error; its offsets stored and its forwards sent once it
 * committed. */
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "clock.h"
#include "fault.h"
#include "forward.h"
#include "intake.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "tenants.h"

/* More valid records than this refused one after the other for their data
 * (counted across batches) is taken for a problem of the database, not of
 * the records: a constraint or trigger that refuses every row. They are
 * then retried, not rejected. */
#define REFUSED_IN_A_ROW_MAX 10

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

/* Say once (again after it was right) that this machine's clock is off
 * PostgreSQL's by more than CLOCK_OFF_MS: nothing of the hub's depends on
 * it (due times and forward.max_delay use PostgreSQL's), but the dates in
 * its log lines and headers do. */
#define CLOCK_OFF_MS 60000
static void note_clock(hub *h, int64_t db_now)
{
	int64_t off = clock_wall_ms() - db_now;
	int is_off = off > CLOCK_OFF_MS || off < -CLOCK_OFF_MS;
	if (is_off && !h->clock_off)
		log_warn("hub: this machine's clock is %lld s %s PostgreSQL's; due times and "
		         "forward.max_delay follow PostgreSQL's, the dates of this log and of "
		         "dead letters this machine's", (long long)(off < 0 ? -off : off) / 1000,
		         off < 0 ? "behind" : "ahead of");
	else if (!is_off && h->clock_off)
		log_info("hub: this machine's clock agrees with PostgreSQL's again");
	h->clock_off = is_off;
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
	if (h->batch.n > 0 && hub_release_forwards(h, err, sizeof err) != 0) {
		/* (the scan reports it: the partitions are still to release) */
		h->retry_at = hub_now_ms() + 500;
		intake_pause(h->in);
		return -1;
	}
	if (h->batch.n > 0 && intake_needs_date(&h->batch)) {
		/* forward.not_before against the clock its due time is computed on:
		 * PostgreSQL's, not this machine's (which may be off) */
		int64_t db_now;
		if (store_db_now_ms(h->st, &db_now, err, sizeof err) != STORE_OK)
			return batch_wait(h, err);
		note_clock(h, db_now);
		intake_date(h->in, &h->batch, db_now);
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
