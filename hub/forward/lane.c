/* lane.c: see lane.h.
 *
 * The lane's thread owns its producer and its PostgreSQL connection; the
 * run loop only moves want_seq on and reads the counters, under mu.
 *
 * The invariant recovery rests on: every pending row of the partition with
 * a sequence at or below the last committed marker was forwarded in a
 * committed transaction. It holds because a run is read from PostgreSQL in
 * sequence order with nothing below it left out (store_next_forwards), the
 * marker is the run's highest sequence, and a row that leaves a run
 * without being sent (its forward failed for its own sake) loses its
 * sequence in PostgreSQL before the next run is read. A marker read too
 * low only means forwards sent twice; it is never read too high. */
#include "lane.h"
#include "lane_int.h"

#include <cjson/cJSON.h>
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
#include "kafka.h"
#include "log.h"
#include "marker.h"
#include "metrics.h"
#include "order.h"

void lane_names(const txhub_config *cfg, tp_key tp, lane_name_set *out)
{
	topics_spec s;
	char err[256];
	int single = 1;
	if (topics_parse(cfg->control_topic, &s, err, sizeof err) == 0) {
		topics_progress_name(&s, cfg->forward_progress_topic, out->progress,
		                     sizeof out->progress);
		single = topics_single(&s);
	} else { /* (validated when loaded: not reached) */
		snprintf(out->progress, sizeof out->progress, "%s", TOPICS_PROGRESS_DEFAULT);
	}
	topics_free(&s);
	snprintf(out->txn_id, sizeof out->txn_id, "txhub-%s-%s-%d", cfg->group, tp_topic(tp),
	         tp_part(tp));
	/* one control topic: 0.4.0's key, so that its markers are found */
	if (single)
		snprintf(out->marker_key, sizeof out->marker_key, "%s/%d", cfg->group, tp_part(tp));
	else
		snprintf(out->marker_key, sizeof out->marker_key, "%s/%s/%d", cfg->group, tp_topic(tp),
		         tp_part(tp));
}

tp_key lane_tp(const lane *l) { return l->own.tp; }
int64_t lane_epoch(const lane *l) { return l->own.epoch; }

/* ---- a run: one transaction ---- */

/* Whether a delivery error is the message's own (it would fail again in
 * any transaction), not the transaction's or the producer's. */
static int own_fault(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
	       e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
	       e == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
	       e == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE || e == RD_KAFKA_RESP_ERR_INVALID_RECORD ||
	       e == RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION;
}

/* Before a run: a forward topic the broker does not have (and does not
 * create on being asked) would hold the whole transaction until the
 * delivery time-out; it fails at once instead. Topics found are
 * remembered. Returns the error for topic, or 0. */
static rd_kafka_resp_err_t check_topic(lane *l, const char *topic)
{
	for (size_t i = 0; i < l->ntopics; i++)
		if (strcmp(l->topics[i], topic) == 0)
			return RD_KAFKA_RESP_ERR_NO_ERROR;
	rd_kafka_t *rk = txn_meta(l->txn);
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
	if (t && rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
	    md->topic_cnt == 1) {
		rd_kafka_resp_err_t te = md->topics[0].err;
		if (te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || own_fault(te))
			e = te;
		else if (te == RD_KAFKA_RESP_ERR_NO_ERROR && l->ntopics < TOPICS_MAX) {
			char **n = array_grow(l->topics, &l->captopics, l->ntopics + 1, sizeof *n);
			if (n) {
				l->topics = n;
				if ((n[l->ntopics] = strdup(topic)))
					l->ntopics++;
			}
		}
	} /* (no answer: the transaction finds out) */
	if (md)
		rd_kafka_metadata_destroy(md);
	if (t)
		rd_kafka_topic_destroy(t);
	return e;
}

/* After a produce call returned e: 1 when it is to be made again (the
 * queue was full: the producer polled meanwhile). */
static int again_when_full(rd_kafka_t *rk, rd_kafka_resp_err_t e)
{
	if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
		return 0;
	rd_kafka_poll(rk, 50);
	return 1;
}

/* Produce f (with its status as opaque) into the open transaction. */
static rd_kafka_resp_err_t produce_one(rd_kafka_t *rk, const store_forward *f, txn_report *st)
{
	for (;;) {
		rd_kafka_headers_t *h = forward_make_headers(f);
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(f->topic), RD_KAFKA_V_KEY(f->key, f->key ? strlen(f->key) : 0),
			RD_KAFKA_V_VALUE(f->payload, f->payload_len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE(st), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			return e;
		rd_kafka_headers_destroy(h);
		if (!again_when_full(rk, e))
			return e;
	}
}

/* The run's marker (marker.h), keyed by group and partition: its highest
 * sequence and that row's ids, the partition's fwd_origin, and the dead
 * sequences as they are once the run is committed.
 *
 * It goes first, and the forwards only once the broker has it: a replica
 * killed with forwards of an open transaction on the broker and no marker
 * beside them would leave that transaction to no one (the next owner finds
 * the transactional.id to fence in the markers), and every read_committed
 * consumer of those forward partitions stalled until Kafka's
 * transaction.timeout.ms ended it. */
static rd_kafka_resp_err_t produce_marker(lane *l, rd_kafka_t *rk, const store_forward_list *list,
                                          txn_report *r)
{
	marker_dead d = l->dead;
	marker_dead_sent(&d, list->items, list->n);
	char *value = marker_encode(&list->items[list->n - 1], l->origin, l->own.epoch,
	                            tp_part(l->own.tp), &d, txn_id(l->txn));
	if (!value)
		return RD_KAFKA_RESP_ERR__FAIL; /* out of memory: the run is aborted and retried */
	rd_kafka_resp_err_t e;
	do
		e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(l->progress), RD_KAFKA_V_PARTITION(l->marker_part),
			RD_KAFKA_V_KEY(l->marker_key, strlen(l->marker_key)),
			RD_KAFKA_V_VALUE(value, strlen(value)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_OPAQUE(r), RD_KAFKA_V_END);
	while (again_when_full(rk, e));
	cJSON_free(l->marker_out);
	l->marker_out = value; /* (the last committed one, once committed) */
	return e;
}

/* Wait for the marker's report r: its outcome, or __INTR when the lane
 * stops first (the transaction is then aborted, which serves the report:
 * r lives until txn_finish returns). It comes within message.timeout.ms,
 * at once failed when the transaction fails meanwhile. */
static rd_kafka_resp_err_t await_marker(lane *l, rd_kafka_t *rk, const txn_report *r)
{
	while (!txn_reported(r)) {
		if (lane_is_stopping(l, 1))
			return RD_KAFKA_RESP_ERR__INTR;
		rd_kafka_poll(rk, 100);
	}
	return r->err;
}

/* The metrics and counters of a committed run. */
static void count_sent(lane *l, const store_forward_list *list, int64_t started)
{
	metrics_forwards m;
	memset(&m, 0, sizeof m);
	int64_t now = clock_ms();
	for (size_t i = 0; i < list->n; i++) {
		metrics_forwards_observe(m.produce_bucket, &m.produce_count, &m.produce_sum_us,
		                         now - started);
		if (list->items[i].decided_ms)
			metrics_forwards_observe(m.commit_bucket, &m.commit_count, &m.commit_sum_us,
			                         now - list->items[i].decided_ms);
	}
	for (size_t i = 0; i < list->n; i++)
		metrics_forwards_count(&m, list->items[i].tenant, METRICS_FW_SENT, 1);
	metrics_add_forwards(&m);
	metrics_tally_free(&m.outcomes);
	pthread_mutex_lock(&l->mu);
	l->stats.produced += list->n;
	l->stats.delivered += list->n;
	pthread_mutex_unlock(&l->mu);
}

/* The crash tests' failpoints: with TXHUB_FAILPOINT=<name> in its
 * environment the hub dies at that point as kill -9 would leave it (a
 * transaction open, or committed and not recorded). Never set in
 * production. */
static void crash_at(lane *l, rd_kafka_t *rk, const char *name)
{
	if (l->failpoint && strcmp(l->failpoint, name) == 0) {
		if (rk)
			rd_kafka_flush(rk, 10000); /* what the transaction holds reaches the broker */
		log_error("lane %d of %s: failpoint %s: exiting at once", TP_ARG(l->own.tp), name);
		_exit(86);
	}
}

/* Record the committed run in unrec as sent, and count it covered.
 * Returns 0, or -1 when stopping before it could be (the next owner marks
 * it from the marker). */
static int record_committed(lane *l, store_forward_list *unrec)
{
	if (unrec->n == 0)
		return 0;
	if (lane_record(l, unrec->items, unrec->n, NULL, 0) != 0)
		return -1;
	pthread_mutex_lock(&l->mu);
	if (l->covered < unrec->items[unrec->n - 1].fwd_seq)
		l->covered = unrec->items[unrec->n - 1].fwd_seq;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	store_forward_list_clear(unrec);
	return 0;
}

static int join_stop(void *arg) { return lane_is_stopping(arg, 1); }

/* Send list in the replica's next transaction (txn.h) with its marker.
 * Returns 1 when committed (its forwards moved from list to unrec, to be
 * recorded), 0 when what is left is to be read and tried again (after a
 * backoff when *backoff), -1 when the lane must stop (fenced, or
 * stopping). */
static int send_run(lane *l, store_forward_list *list, store_forward_list *unrec, int *backoff,
                    int *intent)
{
	char err[512] = "";
	size_t n = list->n;
	txn_report *st = calloc(n + 1, sizeof *st); /* (st[n]: the marker's) */
	rd_kafka_resp_err_t *failed = calloc(n, sizeof *failed);
	int result = 0, refused = 0;
	int64_t started = clock_ms();
	txn_part p;
	memset(&p, 0, sizeof p);
	p.own = l->own;
	p.progress = l->progress;
	p.marker_part = l->marker_part;
	p.marker_seq = n ? list->items[n - 1].fwd_seq : 0;
	*backoff = 1;
	if (!st || !failed)
		goto done;
	rd_kafka_t *rk = txn_join(l->txn, &p, *intent, join_stop, l);
	int64_t at[3] = {clock_ms(), 0, 0}; /* joined, marker on the broker, produced (debug) */
	*intent = 0;
	if (!rk) {
		result = -1;
		goto done;
	}
	/* the marker first (produce_marker); in the lane's first run since it
	 * took the partition, the forwards only once the broker has it, later
	 * at once: a marker of this replica's is committed in the partition
	 * then, whose transactional.id the next owner fences
	 * (lane_takeover.c). A marker not taken is a produce error as a
	 * forward's, one the broker failed is the transaction's (its commit
	 * fails and says how, as for __STATE below) */
	/* (failpoint lane_forwards_out_no_marker, in a later run: the
	 * forwards reach the broker and the marker never does) */
	int no_marker = l->marker_ours && l->failpoint &&
	                strcmp(l->failpoint, "lane_forwards_out_no_marker") == 0;
	rd_kafka_resp_err_t pe = no_marker ? RD_KAFKA_RESP_ERR_NO_ERROR
	                                   : produce_marker(l, rk, list, &st[n]);
	int awaited = !pe && !no_marker && !l->marker_ours;
	rd_kafka_resp_err_t me = awaited ? await_marker(l, rk, &st[n]) : RD_KAFKA_RESP_ERR_NO_ERROR;
	at[1] = clock_ms();
	size_t nrefused = 0;
	for (size_t i = 0; i < n && !me && !pe; i++)
		if ((pe = produce_one(rk, &list->items[i], &st[i])) && own_fault(pe))
			failed[i] = pe, pe = RD_KAFKA_RESP_ERR_NO_ERROR, nrefused++;
	at[2] = clock_ms();
	if (!me && !pe && !nrefused) {
		crash_at(l, rk, "lane_forwards_out");
		if (no_marker)
			crash_at(l, rk, "lane_forwards_out_no_marker");
	}
	if (me == RD_KAFKA_RESP_ERR__INTR)
		snprintf(err, sizeof err, "stopping before the progress marker was on the broker");
	else if (pe && pe != RD_KAFKA_RESP_ERR__STATE)
		snprintf(err, sizeof err, "produce: %s", rd_kafka_err2str(pe));
	else if (nrefused) /* refused before they were sent: out of the run */
		snprintf(err, sizeof err, "%zu forward(s) refused at once", nrefused);
	/* (__STATE: the transaction failed meanwhile, its commit says how) */
	if (!*err)
		crash_at(l, rk, "lane_before_commit");
	txn_finish(l->txn, &p, *err != 0, err);
	if (!pe && !awaited && !no_marker && txn_reported(&st[n]))
		me = st[n].err; /* (the commit flushed it) */
	if (p.out.committed && me) {
		/* (a transaction whose record failed never commits; were it ever
		 * to, its marker would name rows never sent: they go in the next
		 * one, whose marker covers them) */
		log_warn("lane %d of %s: a transaction committed although its progress marker "
		         "failed (%s): the run goes again", TP_ARG(l->own.tp), rd_kafka_err2str(me));
		goto done; /* (after a backoff: a marker refused at once may be again) */
	}
	if (p.out.committed) {
		crash_at(l, NULL, "lane_after_commit");
		log_debug("lane %d of %s: a run of %zu: joined a transaction in %lld ms, its marker on "
		          "the broker %lld ms later, produced in %lld, committed %lld ms later",
		          TP_ARG(l->own.tp), n, (long long)(at[0] - started),
		          (long long)(at[1] - at[0]), (long long)(at[2] - at[1]),
		          (long long)(clock_ms() - at[2]));
		l->done_seq = list->items[n - 1].fwd_seq;
		l->commits++;
		l->marker_ours = 1;
		cJSON_free(l->last_marker);
		l->last_marker = l->marker_out;
		l->marker_out = NULL;
		marker_dead_sent(&l->dead, list->items, n);
		count_sent(l, list, started);
		store_forward_list t = *unrec; /* (empty: recorded before this run) */
		*unrec = *list;
		*list = t;
		result = 1;
		goto done;
	}
	if (p.out.lost) {
		lane_end_with(l, 1, p.out.why);
		log_error("lane %d of %s: %s; the lane stops", TP_ARG(l->own.tp), p.out.why);
		result = -1;
		goto done;
	}
	if (!*err)
		snprintf(err, sizeof err, "%s", p.out.why);
	/* Kafka refused a topic of the transaction and said of no record which:
	 * this lane's when it was alone in it (txn.c takes one lane at a time
	 * after such a refusal) */
	refused = p.out.code == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED && p.out.solo;
	/* (a batch error in a transaction with other lanes may be theirs: the
	 * next go one lane at a time, txn.h) */
	size_t nfailed = 0;
	for (size_t i = 0; i < n; i++) {
		if (!failed[i] && st[i].reported && own_fault(st[i].err) &&
		    (p.out.solo || !txn_batch_error(st[i].err)))
			failed[i] = st[i].err;
		nfailed += failed[i] != 0;
	}
	if (refused && nfailed == 0) { /* which forward's topic: lane_refused.c */
		lane_refused_run(l, list, failed);
		nfailed = failed[0] != 0;
		*backoff = 0;
	}
	if (nfailed > 1 && n > 1) {
		/* the broker fails a whole batch for one record in it (too
		 * large): which of them is at fault shows when each goes alone */
		size_t last = 0;
		for (size_t i = 0; i < n; i++)
			if (failed[i])
				last = i;
		l->singles_left = last + 1;
		log_warn("lane %d of %s: a transaction of %zu forward(s) aborted (%s); %zu of them failed: "
		         "the next %zu go one per transaction to find the one(s) at fault",
		         TP_ARG(l->own.tp), n, err, nfailed, l->singles_left);
		*backoff = 0;
		goto done;
	}
	if (nfailed == 0 && !refused &&
	    (p.out.code == RD_KAFKA_RESP_ERR__FAIL || p.out.code == RD_KAFKA_RESP_ERR__FENCED ||
	     p.out.record_fault)) {
		/* aborted for another lane's forward (or one of a shared batch),
		 * or another lane's partition gone: again at once */
		log_debug("lane %d of %s: a transaction of %zu forward(s) aborted (%s); they go again",
		          TP_ARG(l->own.tp), n, err);
		*backoff = 0;
		goto done;
	}
	log_warn("lane %d of %s: a transaction of %zu forward(s) aborted (%s)%s", TP_ARG(l->own.tp), n,
	         err, nfailed ? "; the forward that failed for its own sake is recorded" : "");
	if (nfailed > 0) {
		if (lane_take_out_failed(l, list, failed) != 0)
			result = -1;
		*backoff = 0; /* the others go again at once */
	}
	if (p.out.code == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED && !p.out.solo)
		*backoff = 0; /* the next transactions take one lane at a time */
done:
	free(st);
	free(failed);
	return result;
}

/* ---- the thread ---- */

/* Wait until rows may be due; returns the want_seq seen, or -1 to stop. */
static int64_t wait_for_work(lane *l, int block)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += IDLE_LOOK_MS / 1000;
	pthread_mutex_lock(&l->mu);
	while (block && !l->stopping && l->want_seq <= l->covered)
		if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
			break;
	int64_t want = l->want_seq;
	int stop = l->stopping && (want <= l->covered || clock_ms() >= l->stop_by);
	pthread_mutex_unlock(&l->mu);
	return stop ? -1 : want;
}

static void forward_due(lane *l)
{
	char err[512];
	int attempt = 0;
	store_forward_list list = {0}, unrec = {0}; /* unrec: committed, not recorded */
	int intent = 0; /* txn_intend: the run being read joins the open transaction */
	for (;;) {
		if (intent) {
			txn_unintend(l->txn);
			intent = 0;
		}
		store_forward_list_clear(&list);
		int64_t want = wait_for_work(l, unrec.n == 0);
		if (want < 0)
			break;
		if (l->probe_due) {
			l->probe_due = 0;
			int p = lane_probe_progress(l);
			if (p == -2)
				break;
			if (p <= 0) { /* the progress topic refused (or no answer): no forward is blamed */
				lane_pause_ms(l, backoff_delay(++attempt, 200, 5000, backoff_random()));
				continue;
			}
		}
		int64_t t0 = clock_ms();
		if (want > l->done_seq) {
			txn_intend(l->txn);
			intent = 1;
		}
		store_rc rc = store_ensure(l->st, err, sizeof err);
		size_t run_max = lane_run_max(l);
		if (rc == STORE_OK)
			rc = store_next_forwards(l->st, l->own.tp, l->done_seq, run_max, &list, err,
			                         sizeof err);
		if (rc != STORE_OK) {
			int64_t d = backoff_delay(++attempt, 200, 5000, backoff_random());
			log_warn("lane %d of %s: reading forwards: %s; retrying in %lld ms", TP_ARG(l->own.tp), err,
			         (long long)d);
			lane_pause_ms(l, d);
			continue;
		}
		if (list.n == 0) { /* nothing more: record what is committed */
			if (record_committed(l, &unrec) != 0)
				break;
			pthread_mutex_lock(&l->mu);
			if (l->covered < want)
				l->covered = want;
			pthread_mutex_unlock(&l->mu);
			continue;
		}
		/* forwards to topics the broker does not have fail at once */
		rd_kafka_resp_err_t *bad = calloc(list.n, sizeof *bad);
		if (!bad) {
			lane_pause_ms(l, 1000);
			continue;
		}
		for (size_t i = 0; i < list.n; i++)
			if (!(bad[i] = lane_refused_check(l, &list.items[i])))
				bad[i] = check_topic(l, list.items[i].topic);
		int taken = lane_take_out_failed(l, &list, bad);
		free(bad);
		int gated = taken == 0 && l->order ? lane_order_gate(l, &list) : 0;
		if (taken != 0 || gated < 0)
			break;
		if (gated > 0) {
			lane_pause_ms(l, 1000);
			continue;
		}
		if (list.n == 0)
			continue;
		size_t singles = l->singles_left, n = list.n;
		int64_t t1 = clock_ms();
		int backoff, r = send_run(l, &list, &unrec, &backoff, &intent);
		log_debug("lane %d of %s: a run of %zu: read in %lld ms, sent and committed in %lld ms",
		          TP_ARG(l->own.tp), n, (long long)(t1 - t0), (long long)(clock_ms() - t1));
		if (r < 0)
			break;
		if (singles > 0 && l->singles_left == singles)
			l->singles_left--; /* (a run of one, sent or recorded) */
		if (r == 1) {
			attempt = 0;
			pthread_mutex_lock(&l->mu);
			/* a full run (or one cut short to find a forward at fault:
			 * lane_refused.c, singles): there may be more */
			if (n == run_max && l->want_seq <= l->done_seq)
				l->want_seq = l->done_seq + 1;
			pthread_mutex_unlock(&l->mu);
			/* recorded before the next run is read (the replica's
			 * transactions are paced by txn.c, not the lane) */
			if (record_committed(l, &unrec) != 0)
				break;
		} else if (backoff) {
			lane_pause_ms(l, backoff_delay(++attempt, 200, 5000, backoff_random()));
		}
	}
	if (intent)
		txn_unintend(l->txn);
	/* ending: record the last committed run if PostgreSQL lets us at
	 * once (else the next owner marks it from the marker) */
	record_committed(l, &unrec);
	store_forward_list_clear(&list);
	store_forward_list_clear(&unrec);
}

static void *run(void *arg)
{
	lane *l = arg;
	if (lane_take_partition(l) == 0)
		forward_due(l);
	store_close(l->st);
	l->st = NULL;
	pthread_mutex_lock(&l->mu);
	l->ended = 1;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

lane *lane_start(const txhub_config *cfg, alert *al, txn *t, const owned_part *own,
                 int after_rewind, char *err, size_t errsz)
{
	lane *l = calloc(1, sizeof *l);
	if (!l) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	l->cfg = config_hold(cfg); /* a reload's stays while the lane runs */
	l->al = al;
	l->txn = t;
	l->own = *own;
	l->after_rewind = after_rewind;
	l->failpoint = getenv("TXHUB_FAILPOINT");
	lane_name_set names;
	lane_names(cfg, own->tp, &names);
	snprintf(l->progress, sizeof l->progress, "%s", names.progress);
	snprintf(l->txn_id, sizeof l->txn_id, "%s", names.txn_id);
	snprintf(l->marker_key, sizeof l->marker_key, "%s", names.marker_key);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	int e = pthread_create(&l->thread, NULL, run, l);
	if (e != 0) {
		snprintf(err, errsz, "cannot start a forwarding thread: %s", strerror(e));
		goto fail;
	}
	return l;
fail:
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	config_drop(l->cfg);
	free(l);
	return NULL;
}

void lane_notify(lane *l, int64_t seq)
{
	pthread_mutex_lock(&l->mu);
	if (seq > l->want_seq) {
		l->want_seq = seq;
		pthread_cond_broadcast(&l->cv);
	}
	pthread_mutex_unlock(&l->mu);
}

void lane_blockers_changed(lane *l)
{
	pthread_mutex_lock(&l->mu);
	l->reread_blockers = 1;
	pthread_mutex_unlock(&l->mu);
}

size_t lane_pending(lane *l)
{
	pthread_mutex_lock(&l->mu);
	int64_t n = l->ended ? 0 : l->want_seq - l->covered;
	pthread_mutex_unlock(&l->mu);
	return n > 0 ? (size_t)n : 0;
}

void lane_stop(lane *l, int grace_ms)
{
	pthread_mutex_lock(&l->mu);
	if (!l->stopping || clock_ms() + grace_ms < l->stop_by)
		l->stop_by = clock_ms() + grace_ms;
	l->stopping = 1;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

int lane_ended(lane *l, int *fenced, char *why, size_t whysz)
{
	pthread_mutex_lock(&l->mu);
	int ended = l->ended;
	if (fenced)
		*fenced = l->fenced;
	if (why)
		snprintf(why, whysz, "%s", l->why);
	pthread_mutex_unlock(&l->mu);
	return ended;
}

forward_stats lane_stats(lane *l)
{
	pthread_mutex_lock(&l->mu);
	forward_stats s = l->stats;
	pthread_mutex_unlock(&l->mu);
	return s;
}

void lane_free(lane *l)
{
	if (!l)
		return;
	lane_stop(l, 0);
	pthread_join(l->thread, NULL);
	lane_refused_free(l);
	cJSON_free(l->marker_out);
	cJSON_free(l->last_marker);
	for (size_t i = 0; i < l->ntopics; i++)
		free(l->topics[i]);
	free(l->topics);
	order_free(l->order, NULL);
	config_drop(l->cfg);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
