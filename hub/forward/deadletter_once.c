/* deadletter_once.c: the dead-letter topic under forward.mode =
 * exactly_once (deadletter.h): the replica's transactional producer (its
 * transactional.id + "-dlq"), claimed in each partition's row before the
 * partition's first dead letter, the last owner's fenced; a batch is
 * produced, its offsets kept as pending entries in
 * txhub.dead_letter_pending, the transaction committed, the rows recorded;
 * after a crash the pending entries are resolved by reading the records
 * back (read_committed). */
#include "deadletter.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "backoff.h"
#include "clock.h"
#include "forward_record.h"
#include "kafka.h"
#include "lane.h"
#include "log.h"
#include "metrics.h"
#include "deadletter_int.h"
#include "store.h"
#include "txn.h"

/* ---- exactly_once ---- */

/* The crash tests' failpoints (as lane.c's): with TXHUB_FAILPOINT=<name>
 * the hub dies here as kill -9 would leave it. Never set in production. */
static void crash_at(deadletter *d, rd_kafka_t *rk, const char *name)
{
	if (d->failpoint && strcmp(d->failpoint, name) == 0) {
		rd_kafka_flush(rk, 10000);
		log_error("dead-letter: failpoint %s: exiting at once", name);
		_exit(86);
	}
}

void dl_producer_close(deadletter *d)
{
	if (d->txrk) {
		rd_kafka_flush(d->txrk, 1000);
		rd_kafka_destroy(d->txrk);
	}
	d->txrk = NULL;
	/* the next producer's init_transactions aborts what this one left
	 * open: each partition's pending entries are looked at again (a
	 * partition is recovered only while a producer is up) */
	for (size_t i = 0; i < d->ntxns; i++)
		d->txns[i].recovered = 0;
}

/* Whether a transactional call's error ends the producer (fatal, fenced:
 * another replica took the partition). */
static int txn_dead(const rd_kafka_error_t *e)
{
	rd_kafka_resp_err_t c = rd_kafka_error_code(e);
	return rd_kafka_error_is_fatal(e) || c == RD_KAFKA_RESP_ERR__FENCED ||
	       c == RD_KAFKA_RESP_ERR_PRODUCER_FENCED || c == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/* The replica's transactional producer, made and initialised:
 * init_transactions settles what an earlier one of this transactional.id
 * (this process's, closed after a failure) left open. Returns 0, or -1
 * with err. */
static int txn_open(deadletter *d, char *err, size_t errsz)
{
	const char *id = d->txid;
	char sub[512];
	int64_t tmo;
	rd_kafka_conf_t *conf = forward_producer_conf(d->cfg, &tmo, err, errsz);
	if (!conf)
		return -1;
	if (rd_kafka_conf_set(conf, "transactional.id", id, sub, sizeof sub) != RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "transactional.id: %.400s", sub);
		rd_kafka_conf_destroy(conf);
		return -1;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dl_dr_cb);
	rd_kafka_conf_set_error_cb(conf, dl_error_cb);
	if (!(d->txrk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, sub, sizeof sub))) {
		snprintf(err, errsz, "cannot create a transactional producer: %.400s", sub);
		rd_kafka_conf_destroy(conf);
		return -1;
	}
	rd_kafka_error_t *e = rd_kafka_init_transactions(d->txrk, DL_CALL_MS);
	if (e) {
		snprintf(err, errsz, "init_transactions (transactional.id %.200s): %.250s", id,
		         rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		dl_producer_close(d);
		return -1;
	}
	log_debug("dead-letter: the transactional producer is up (transactional.id %s)", id);
	return 0;
}

/* End the open transaction: committed (commit 1) or aborted. Returns 0, or
 * -1 with err: the producer is then closed, and what the transaction became
 * is settled by the next one's init_transactions and recovery. */
static int txn_end(deadletter *d, int commit, char *err, size_t errsz)
{
	rd_kafka_error_t *e;
	for (int tries = 0;; tries++) {
		e = commit ? rd_kafka_commit_transaction(d->txrk, DL_CALL_MS)
		           : rd_kafka_abort_transaction(d->txrk, DL_CALL_MS);
		/* a commit that timed out may have reached the coordinator: tried
		 * again, never aborted */
		if (!e || !rd_kafka_error_is_retriable(e) || txn_dead(e) || tries == 2 ||
		    (commit && rd_kafka_error_txn_requires_abort(e)))
			break;
		rd_kafka_error_destroy(e);
	}
	if (!e)
		return 0;
	snprintf(err, errsz, "%s the transaction: %.400s", commit ? "committing" : "aborting",
	         rd_kafka_error_string(e));
	int abortable = commit && rd_kafka_error_txn_requires_abort(e) && !txn_dead(e);
	rd_kafka_error_destroy(e);
	if (abortable) {
		char aerr[512];
		if (txn_end(d, 0, aerr, sizeof aerr) == 0)
			return -1; /* aborted: the producer stays open */
	}
	dl_producer_close(d);
	return -1;
}

/* Step 3: where the acknowledged items[0..n) are, in PostgreSQL. Returns
 * 0, or -1 with err (the transaction must be aborted). */
static int record_pending(deadletter *d, const dl_txn *t, const dl_item *items, size_t n,
                          size_t nok, char *err, size_t errsz)
{
	store_dl_placed *recs = calloc(n ? n : 1, sizeof *recs);
	if (!recs) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
			recs[k++] = (store_dl_placed){items[i].f.biz_id, items[i].f.message_key,
			                              items[i].parked_at, items[i].partition,
			                              items[i].offset};
	owned_part own = {.tp = t->tp, .epoch = t->epoch};
	size_t got = 0;
	int rc = -1;
	if (store_dl_pending_add(d->st, recs, k, d->cfg->forward_dead_letter_topic, &own, &got, err,
	                         errsz) == STORE_OK) {
		if (got == nok)
			rc = 0;
		else
			snprintf(err, errsz, "recording the batch as pending: %zu of %zu row(s) still "
			         "parked and the partition still owned at epoch %lld; aborted, tried again",
			         got, nok, (long long)t->epoch);
	}
	free(recs);
	return rc;
}

/* One transaction: items[0..n) produced (steps 1-4). Returns how many went
 * out, or -1 after a failure (noted; *item_fault: because of some items
 * of their own, which then have their err set). */
static int txn_run(deadletter *d, dl_txn *t, dl_item *items, size_t n, int *item_fault)
{
	char err[600], at[80];
	*item_fault = 0;
	rd_kafka_error_t *e = rd_kafka_begin_transaction(d->txrk);
	if (e) {
		snprintf(err, sizeof err, "begin_transaction: %.400s", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		dl_producer_close(d);
		dl_batch_failed(d, NULL, n, err);
		return -1;
	}
	log_timestamp(at, sizeof at);
	dl_item *first_bad;
	size_t nok = dl_produce_all(d, d->txrk, items, n, at, &first_bad);
	crash_at(d, d->txrk, "dead_letter_produced");
	if (nok < n) {
		char aerr[512];
		txn_end(d, 0, aerr, sizeof aerr);
		dl_items_failed(d, items, n, first_bad, n - nok);
		*item_fault = 1;
		return -1;
	}
	if (record_pending(d, t, items, n, nok, err, sizeof err) != 0) {
		char aerr[512];
		txn_end(d, 0, aerr, sizeof aerr);
		t->recovered = 0; /* (the entries may be there all the same) */
		dl_batch_failed(d, NULL, n, err);
		return -1;
	}
	crash_at(d, d->txrk, "dead_letter_pending");
	if (txn_end(d, 1, err, sizeof err) != 0) {
		char cerr[512];
		if (d->txrk && dl_keys_command(d, DL_CLEAR, items, n, NULL, NULL, cerr, sizeof cerr) != 0)
			t->recovered = 0;
		dl_batch_failed(d, NULL, n, err);
		return -1;
	}
	crash_at(d, d->txrk, "dead_letter_committed");
	const char **ats = calloc(n ? n : 1, sizeof *ats);
	if (ats)
		for (size_t i = 0; i < n; i++)
			ats[i] = at;
	if (!ats || dl_keys_command(d, DL_DONE_EOS, items, n, ats, NULL, err, sizeof err) != 0) {
		/* committed, not recorded: the recovery finds them committed */
		t->recovered = 0;
		dl_batch_failed(d, NULL, n, ats ? err : "out of memory");
		free(ats);
		return -1;
	}
	free(ats);
	dl_count_sent(d, items, n, n);
	return (int)n;
}

/* ISO 8601 UTC of ms since the epoch into out. */
static void iso_of_ms(int64_t ms, char *out, size_t outsz)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	char b[40];
	strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, outsz, "%s.%03dZ", b, (int)(ms % 1000));
}

/* Whether header name of m holds exactly want. */
static int header_is(const rd_kafka_message_t *m, const char *name, const char *want)
{
	rd_kafka_headers_t *h = NULL;
	const void *v = NULL;
	size_t len = 0;
	return rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
	       rd_kafka_header_get_last(h, name, &v, &len) == RD_KAFKA_RESP_ERR_NO_ERROR && v &&
	       len == strlen(want) && memcmp(v, want, len) == 0;
}

/* A pending entry being resolved. */
typedef struct {
	dl_item it;      /* f.biz_id, f.message_key; err NO_ERROR: committed */
	char *topic;
	int32_t partition;
	int64_t offset;
	int state;       /* 0: unknown, 1: committed, 2: not (produced again) */
	char at[48];     /* committed: the record's time */
} dl_pending;

/* Decide the entries pe[0..n) (one topic and partition, by offset) from a
 * read_committed reader c. Returns 0, or -1 with err (some stay unknown). */
static int resolve_partition(rd_kafka_t *c, dl_pending *pe, size_t n, char *err,
                             size_t errsz)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, pe[0].topic, NULL);
	int32_t part = pe[0].partition;
	if (!rkt || rd_kafka_consume_start(rkt, part, pe[0].offset) != 0) {
		snprintf(err, errsz, "reading %.200s [%d]: %s", pe[0].topic, part,
		         rd_kafka_err2str(rd_kafka_last_error()));
		if (rkt)
			rd_kafka_topic_destroy(rkt);
		return -1;
	}
	size_t left = n;
	int rc = 0;
	int64_t until = clock_ms() + DL_RECOVER_MS;
	while (left > 0) {
		rd_kafka_message_t *m = rd_kafka_consume(rkt, part, 200);
		if (!m) {
			if (clock_ms() <= until)
				continue;
			snprintf(err, errsz, "reading %.200s [%d] from offset %lld with read_committed: "
			         "nothing within %d ms (an open transaction before it?)", pe[0].topic,
			         part, (long long)pe[0].offset, DL_RECOVER_MS);
			rc = -1;
			break;
		}
		int eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
		if (m->err && !eof) {
			int gone = m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE ||
			           m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET;
			if (gone) { /* removed by retention: produced again, never lost */
				for (size_t i = 0; i < n; i++)
					if (!pe[i].state) {
						pe[i].state = 2;
						log_about about = {pe[i].it.f.biz_id, pe[i].it.f.message_key, -1,
						                   pe[i].it.f.trace_id};
						log_msg_about(LOG_WARN, "dead-letter", &about, "its pending dead letter "
						              "at %s [%d] offset %lld is no longer in the topic; produced "
						              "again", pe[i].topic, part, (long long)pe[i].offset);
					}
				left = 0;
			} else {
				snprintf(err, errsz, "reading %.200s [%d]: %.200s", pe[0].topic, part,
				         rd_kafka_message_errstr(m));
				rc = -1;
			}
			rd_kafka_message_destroy(m);
			break;
		}
		/* read_committed skips what was aborted: an entry below the
		 * offset read (or the end reached) was not committed */
		for (size_t i = 0; i < n; i++) {
			dl_pending *p = &pe[i];
			if (p->state || p->offset > m->offset || (eof && p->offset == m->offset))
				continue;
			if (p->offset < m->offset) {
				p->state = 2;
			} else if (header_is(m, "txhub-biz-id", p->it.f.biz_id) &&
			           header_is(m, "txhub-message-key", p->it.f.message_key)) {
				p->state = 1;
				rd_kafka_timestamp_type_t tt;
				int64_t ts = rd_kafka_message_timestamp(m, &tt);
				if (ts > 0)
					iso_of_ms(ts, p->at, sizeof p->at);
				else
					log_timestamp(p->at, sizeof p->at);
			} else {
				p->state = 2;
				log_about about = {p->it.f.biz_id, p->it.f.message_key, -1, p->it.f.trace_id};
				log_msg_about(LOG_WARN, "dead-letter", &about, "the record at %s [%d] offset "
				              "%lld is not the dead letter that was pending there (its "
				              "txhub-biz-id/txhub-message-key headers name another message); "
				              "produced again", p->topic, part, (long long)p->offset);
			}
			left--;
		}
		rd_kafka_message_destroy(m);
	}
	rd_kafka_consume_stop(rkt, part);
	rd_kafka_topic_destroy(rkt);
	return rc;
}

/* Step 5: the pending entries of t's partition, left by a run that ended
 * between producing and recording: committed ones recorded, the others
 * cleared (produced again). Returns 0 when all are resolved, or -1 with
 * err. */
static int recover(deadletter *d, dl_txn *t, char *err, size_t errsz)
{
	store_dl_entry *entries;
	size_t n;
	if (store_dl_pending_of(d->st, t->tp, &entries, &n, err, errsz) != STORE_OK)
		return -1;
	if (n == 0) {
		store_dl_entries_free(entries, n);
		t->recovered = 1;
		return 0;
	}
	dl_pending *pe = calloc(n, sizeof *pe);
	const char **ats = calloc(n, sizeof *ats);
	dl_item *its = calloc(n, sizeof *its);
	rd_kafka_t *c = NULL;
	int rc = -1;
	if (!pe || !ats || !its) {
		snprintf(err, errsz, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		pe[i].it.f.biz_id = entries[i].biz_id; /* (entries outlive pe) */
		pe[i].it.f.message_key = entries[i].message_key;
		pe[i].topic = entries[i].topic;
		pe[i].partition = entries[i].partition;
		pe[i].offset = entries[i].offset;
		snprintf(pe[i].it.f.trace_id, sizeof pe[i].it.f.trace_id, "%s", entries[i].trace_id);
	}
	static const char *defaults[] = {"enable.auto.commit", "false", "isolation.level",
	                                 "read_committed", "enable.partition.eof", "true",
	                                 "auto.offset.reset", "error", NULL};
	if (!(c = kafka_client_new(d->cfg, RD_KAFKA_CONSUMER, defaults,
	                           "cannot create the dead-letter reader", err, errsz)))
		goto done;
	rc = 0;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && pe[j].partition == pe[i].partition &&
		                strcmp(pe[j].topic, pe[i].topic) == 0; j++)
			;
		if (resolve_partition(c, pe + i, j - i, err, errsz) != 0)
			rc = -1;
	}
	size_t ndone = 0, nagain = 0;
	for (size_t i = 0; i < n; i++) {
		its[i] = pe[i].it;
		its[i].err = pe[i].state == 1 ? RD_KAFKA_RESP_ERR_NO_ERROR : (rd_kafka_resp_err_t)-1;
		ats[i] = pe[i].at;
		ndone += pe[i].state == 1;
	}
	char serr[512];
	if (ndone > 0 && dl_keys_command(d, DL_DONE_EOS, its, n, ats, NULL, serr, sizeof serr) != 0) {
		snprintf(err, errsz, "%s", serr);
		rc = -1;
	}
	for (size_t i = 0; i < n; i++) {
		its[i].err = pe[i].state == 2 ? RD_KAFKA_RESP_ERR_NO_ERROR : (rd_kafka_resp_err_t)-1;
		nagain += pe[i].state == 2;
	}
	if (nagain > 0 && dl_keys_command(d, DL_CLEAR, its, n, NULL, NULL, serr, sizeof serr) != 0) {
		snprintf(err, errsz, "%s", serr);
		rc = -1;
	}
	log_info("dead-letter: partition %d of %s: %zu pending dead letter(s) of an earlier run: "
	         "%zu found committed (recorded), %zu not (produced again), %zu undecided",
	         TP_ARG(t->tp), n, ndone, nagain, n - ndone - nagain);
	if (rc == 0)
		t->recovered = 1;
done:
	if (c)
		rd_kafka_destroy(c);
	free(its);
	free(ats);
	free(pe);
	store_dl_entries_free(entries, n);
	return rc;
}

/* A look at t's partition failed at step what, before anything was
 * produced. */
static void look_failed(deadletter *d, const dl_txn *t, const char *what, const char *err)
{
	char why[700];
	snprintf(why, sizeof why, "partition %d of %s: %s: %s", TP_ARG(t->tp), what, err);
	dl_batch_failed(d, NULL, 0, why);
}

/* Fence id for t's partition (whose: what the log says of it). A fence the
 * hub has no right to is waited out instead (the transaction ends with
 * Kafka's transaction.timeout.ms). Returns 0, or -1 with err. */
static int fence_for(deadletter *d, const dl_txn *t, const char *id, const char *whose,
                     char *err, size_t errsz)
{
	int refused;
	if (txn_fence(d->cfg, id, &refused, err, errsz) == 0) {
		log_info("dead-letter: partition %d of %s: fenced transactional.id %s, %s (what it "
		         "left open is aborted)", TP_ARG(t->tp), id, whose);
		return 0;
	}
	if (!refused)
		return -1;
	log_warn("dead-letter: partition %d of %s: %s: a transaction it left open is waited out "
	         "instead (docs/kafka.md, Kafka ACLs)", TP_ARG(t->tp), err);
	return 0;
}

/* Step 0 (deadletter.h): the dead-letter transactional.id written in t's
 * partition's row read and fenced (unless it is this process's); the
 * per-partition one of the hubs before fenced too when none is written or
 * another owner came between (the id's epoch is not the one before); then
 * the producer's own id written at t's epoch. Nothing is written before
 * the fences, so a failure (tried again at the next look) or a loss of the
 * partition leaves the unfenced ids to the next owner. Returns 0, 1 when
 * the partition is not this replica's any more, or -1 with err. */
static int claim(deadletter *d, dl_txn *t, char *err, size_t errsz)
{
	owned_part own = {.tp = t->tp, .epoch = t->epoch};
	char prev[480];
	int64_t prev_epoch;
	store_rc rc = store_dl_claim_read(d->st, &own, prev, sizeof prev, &prev_epoch, err, errsz);
	if (rc != STORE_OK)
		goto refused;
	if (*prev && strcmp(prev, d->txid) != 0 &&
	    fence_for(d, t, prev, "which dead-lettered for it last", err, errsz) != 0)
		return -1;
	if (!*prev || prev_epoch != t->epoch - 1) {
		lane_name_set names;
		char old[sizeof names.txn_id + 8];
		lane_names(d->cfg, t->tp, &names);
		snprintf(old, sizeof old, "%s-dlq", names.txn_id);
		if (fence_for(d, t, old, "a hub of one producer per partition's", err, errsz) != 0)
			return -1;
	}
	if ((rc = store_dl_claim(d->st, &own, d->txid, err, errsz)) == STORE_OK) {
		t->claimed = 1;
		return 0;
	}
refused:
	if (rc != STORE_FENCED)
		return -1;
	log_debug("dead-letter: %s: not claimed", err);
	return 1;
}

/* One look at t's partition: claimed (step 0), the producer made, its
 * pending entries resolved, then a batch of its parked rows dead-lettered
 * in a transaction (those that fail for their own sake left out, the rest
 * again). Returns the rows read, or -1 after a failure. */
static int txn_look(deadletter *d, dl_txn *t)
{
	char err[512];
	d->tx_used_ms = clock_ms();
	int c = t->claimed ? 0 : claim(d, t, err, sizeof err);
	if (c < 0) {
		look_failed(d, t, "claiming it for the replica's transactional producer", err);
		return -1;
	}
	if (c > 0)
		return 0; /* lost: forgotten at the next look */
	if (!d->txrk && txn_open(d, err, sizeof err) != 0) {
		look_failed(d, t, "the transactional producer", err);
		return -1;
	}
	if (!t->recovered && recover(d, t, err, sizeof err) != 0) {
		look_failed(d, t, "settling its pending dead letters", err);
		return -1;
	}
	owned_part one = {.tp = t->tp, .epoch = t->epoch};
	dl_item *items = NULL;
	int n = dl_read_parked(d, &one, 1, &items, err, sizeof err);
	if (n < 0) {
		look_failed(d, t, "reading its parked rows", err);
		return -1;
	}
	int item_fault = 0, rc = n > 0 ? txn_run(d, t, items, (size_t)n, &item_fault) : 0;
	if (rc < 0 && item_fault && d->txrk) {
		/* the others again, without those that failed */
		size_t k = 0;
		for (int i = 0; i < n; i++) {
			if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
				dl_item tmp = items[k];
				items[k++] = items[i];
				items[i] = tmp;
			}
		}
		if (k > 0)
			txn_run(d, t, items, k, &item_fault);
	}
	dl_items_free(items, n > 0 ? (size_t)n : 0);
	return rc < 0 ? -1 : n;
}

/* The entry of partition o, added when new (NULL: out of memory). */
static dl_txn *txn_of(deadletter *d, const owned_part *o)
{
	for (size_t i = 0; i < d->ntxns; i++)
		if (d->txns[i].tp == o->tp) {
			if (d->txns[i].epoch != o->epoch) { /* taken again */
				tp_key tp = d->txns[i].tp;
				memset(&d->txns[i], 0, sizeof d->txns[i]);
				d->txns[i].tp = tp;
				d->txns[i].epoch = o->epoch;
			}
			return &d->txns[i];
		}
	dl_txn *nt = array_grow(d->txns, &d->captxns, d->ntxns + 1, sizeof *nt);
	if (!nt)
		return NULL;
	d->txns = nt;
	dl_txn *t = &d->txns[d->ntxns++];
	memset(t, 0, sizeof *t);
	t->tp = o->tp;
	t->epoch = o->epoch;
	return t;
}

static int is_stopping(deadletter *d)
{
	pthread_mutex_lock(&d->mu);
	int s = d->stopping;
	pthread_mutex_unlock(&d->mu);
	return s;
}

/* exactly_once, one look: each owned partition with parked rows or pending
 * entries in turn, on the replica's transactional producer; the partitions
 * no longer owned forgotten, the producer closed when idle. Returns
 * DL_BATCH when a batch was full, the rows read, or -1 after a failure. */
int dl_dead_letter_eos(deadletter *d, const owned_set *own)
{
	char err[512];
	int rc = 0;
	for (size_t i = 0; i < d->ntxns;) { /* lost */
		dl_txn *t = &d->txns[i];
		if (!owned_has_at(own, t->tp, t->epoch)) {
			d->txns[i] = d->txns[--d->ntxns];
			continue;
		}
		i++;
	}
	if (d->txrk && clock_ms() - d->tx_used_ms >= DL_IDLE_MS)
		dl_producer_close(d);
	if (own->n == 0)
		return 0;
	if (dl_db_ready(d) != 0)
		return -1;
	tp_key *work;
	size_t nwork;
	if (store_dl_work(d->st, own->parts, own->n, &work, &nwork, err, sizeof err) != STORE_OK) {
		dl_batch_failed(d, NULL, 0, err);
		return -1;
	}
	for (size_t i = 0; i < nwork && !is_stopping(d); i++) {
		const owned_part *o = owned_find(own, work[i]);
		dl_txn *t = o ? txn_of(d, o) : NULL;
		if (o && !t) {
			dl_batch_failed(d, NULL, 0, "out of memory");
			rc = -1;
			continue;
		}
		int n = t ? txn_look(d, t) : 0;
		if (n < 0)
			rc = -1;
		else if (rc >= 0)
			rc = n == DL_BATCH || rc == DL_BATCH ? DL_BATCH : rc + n;
	}
	free(work);
	return rc;
}
