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

/* ---- Kafka ---- */

typedef struct {
	rd_kafka_resp_err_t err;
	int reported;
} dr_status;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	dr_status *s = m->_private;
	if (s) {
		s->err = m->err;
		s->reported = 1;
	}
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	lane *l = opaque;
	metrics_kafka_error();
	char line[1200];
	kafka_describe_error(rk, err, reason, line, sizeof line);
	log_warn("lane %d of %s: kafka: %s", TP_ARG(l->own.tp), line);
}

static rd_kafka_t *new_producer(lane *l, char *err, size_t errsz)
{
	int64_t tmo;
	rd_kafka_conf_t *conf = forward_producer_conf(l->cfg, &tmo, err, errsz);
	char sub[512];
	if (!conf)
		return NULL;
	if (rd_kafka_conf_set(conf, "transactional.id", l->txn_id, sub, sizeof sub) !=
	    RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "transactional.id: %s", sub);
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_opaque(conf, l);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, sub, sizeof sub);
	if (!rk) {
		snprintf(err, errsz, "cannot create a transactional producer: %s", sub);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

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
	rd_kafka_topic_t *t = rd_kafka_topic_new(l->rk, topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
	if (t && rd_kafka_metadata(l->rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
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

/* Produce f (with its status as opaque) into the open transaction. */
static rd_kafka_resp_err_t produce_one(lane *l, const store_forward *f, dr_status *st)
{
	for (;;) {
		rd_kafka_headers_t *h = forward_make_headers(f);
		rd_kafka_resp_err_t e = rd_kafka_producev(
			l->rk, RD_KAFKA_V_TOPIC(f->topic), RD_KAFKA_V_KEY(f->key, f->key ? strlen(f->key) : 0),
			RD_KAFKA_V_VALUE(f->payload, f->payload_len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE(st), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			return e;
		rd_kafka_headers_destroy(h);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			return e;
		rd_kafka_poll(l->rk, 50);
	}
}

/* The run's marker (marker.h), keyed by group and partition: its highest
 * sequence and that row's ids, the partition's fwd_origin, and the dead
 * sequences as they are once the run is committed. */
static rd_kafka_resp_err_t produce_marker(lane *l, const store_forward_list *list)
{
	marker_dead d = l->dead;
	marker_dead_sent(&d, list->items, list->n);
	char *value = marker_encode(&list->items[list->n - 1], l->origin, l->own.epoch,
	                            tp_part(l->own.tp), &d);
	if (!value)
		return RD_KAFKA_RESP_ERR__FAIL; /* out of memory: the run is aborted and retried */
	rd_kafka_resp_err_t e = rd_kafka_producev(
		l->rk, RD_KAFKA_V_TOPIC(l->progress), RD_KAFKA_V_PARTITION(l->marker_part),
		RD_KAFKA_V_KEY(l->marker_key, strlen(l->marker_key)),
		RD_KAFKA_V_VALUE(value, strlen(value)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		RD_KAFKA_V_END);
	cJSON_free(l->marker_out);
	l->marker_out = value; /* (the last committed one, once committed) */
	return e;
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
static void crash_at(lane *l, const char *name)
{
	if (l->failpoint && strcmp(l->failpoint, name) == 0) {
		rd_kafka_flush(l->rk, 10000); /* what the transaction holds reaches the broker */
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

/* Send list in one transaction with its marker. The previous run, committed
 * and not yet recorded (unrec), is recorded in PostgreSQL while this one's
 * records travel, before its commit; when this one commits, its forwards
 * move from list to unrec. Returns 1 when committed, 0 when what is left is
 * to be read and tried again (after a backoff when *backoff), -1 when the
 * lane must stop (fenced, fatal, or stopping). */
static int send_run(lane *l, store_forward_list *list, store_forward_list *unrec, int *backoff)
{
	char err[512] = "";
	size_t n = list->n;
	dr_status *st = calloc(n, sizeof *st);
	rd_kafka_resp_err_t *failed = calloc(n, sizeof *failed);
	int result = 0, stop_after_abort = 0, refused = 0;
	rd_kafka_error_t *e = NULL;
	int64_t started = clock_ms();
	*backoff = 1;
	if (!st || !failed)
		goto done;
	if ((e = rd_kafka_begin_transaction(l->rk)))
		goto error;
	rd_kafka_resp_err_t pe = RD_KAFKA_RESP_ERR_NO_ERROR;
	size_t nrefused = 0;
	for (size_t i = 0; i < n && !pe; i++)
		if ((pe = produce_one(l, &list->items[i], &st[i])) && own_fault(pe))
			failed[i] = pe, pe = RD_KAFKA_RESP_ERR_NO_ERROR, nrefused++;
	if (!pe && !nrefused)
		pe = produce_marker(l, list);
	/* refused while the records went in: the transaction failed meanwhile
	 * (Kafka refused a topic of it); committing it says how, and cannot
	 * commit it */
	if (pe == RD_KAFKA_RESP_ERR__STATE && (e = rd_kafka_commit_transaction(l->rk, CALL_MS)))
		goto error;
	if (pe) {
		snprintf(err, sizeof err, "produce: %s", rd_kafka_err2str(pe));
		if (lane_fenced_error(pe) || pe == RD_KAFKA_RESP_ERR__FATAL) {
			rd_kafka_fatal_error(l->rk, err, sizeof err);
			lane_end_with(l, lane_fenced_error(pe), err);
			result = -1;
			goto done;
		}
		goto abort;
	}
	if (nrefused) { /* refused before they were sent: out of the run */
		snprintf(err, sizeof err, "%zu forward(s) refused at once", nrefused);
		goto abort;
	}
	if (record_committed(l, unrec) != 0) {
		snprintf(err, sizeof err, "stopping");
		stop_after_abort = 1;
		goto abort;
	}
	crash_at(l, "lane_before_commit");
	/* a commit that timed out may have reached the coordinator: it is
	 * retried, never aborted, until it says how it ended */
	while ((e = rd_kafka_commit_transaction(l->rk, CALL_MS)) && rd_kafka_error_is_retriable(e) &&
	       !rd_kafka_error_is_fatal(e) && !rd_kafka_error_txn_requires_abort(e)) {
		log_warn("lane %d of %s: committing a transaction: %s; trying again", TP_ARG(l->own.tp),
		         rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		e = NULL;
		if (lane_is_stopping(l, 1)) {
			/* the next owner's init_transactions settles it, and its
			 * marker says which way */
			result = -1;
			goto done;
		}
	}
	if (!e) {
		crash_at(l, "lane_after_commit");
		rd_kafka_poll(l->rk, 0);
		l->done_seq = list->items[n - 1].fwd_seq;
		l->commits++;
		cJSON_free(l->last_marker);
		l->last_marker = l->marker_out;
		l->marker_out = NULL;
		marker_dead_sent(&l->dead, list->items, n);
		count_sent(l, list, started);
		store_forward_list t = *unrec; /* (empty: recorded above) */
		*unrec = *list;
		*list = t;
		result = 1;
		goto done;
	}
error:
	snprintf(err, sizeof err, "%s", rd_kafka_error_string(e));
	refused = rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
	if (refused && rd_kafka_error_is_fatal(e)) {
		l->renew = 1; /* nothing to abort: a new producer */
		rd_kafka_error_destroy(e);
		e = NULL;
		goto failures;
	}
	if (rd_kafka_error_is_fatal(e) || lane_fenced_error(rd_kafka_error_code(e))) {
		lane_end_with(l, lane_fenced_error(rd_kafka_error_code(e)), err);
		log_error("lane %d of %s: %s; the lane stops", TP_ARG(l->own.tp), err);
		result = -1;
		goto done;
	}
abort:
	if (e)
		rd_kafka_error_destroy(e);
	while ((e = rd_kafka_abort_transaction(l->rk, CALL_MS)) && rd_kafka_error_is_retriable(e) &&
	       !rd_kafka_error_is_fatal(e)) {
		log_warn("lane %d of %s: aborting a transaction: %s; trying again", TP_ARG(l->own.tp),
		         rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		e = NULL;
		if (lane_is_stopping(l, 1)) {
			result = -1;
			goto done;
		}
	}
	if (e && refused && rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_TXN_STATE) {
		/* librdkafka 2.0 aborts a transaction Kafka refused every
		 * partition of (the others are "not attempted") although the
		 * coordinator has none of it, and fails for good on the answer:
		 * the transaction is gone all the same, a new producer goes on */
		log_info("lane %d of %s: aborting the refused transaction: %s; the lane makes a new "
		         "producer", TP_ARG(l->own.tp), rd_kafka_error_string(e));
		l->renew = 1;
		rd_kafka_error_destroy(e);
		e = NULL;
	}
	if (e && (rd_kafka_error_is_fatal(e) || lane_fenced_error(rd_kafka_error_code(e)))) {
		snprintf(err, sizeof err, "abort: %s", rd_kafka_error_string(e));
		lane_end_with(l, lane_fenced_error(rd_kafka_error_code(e)), err);
		log_error("lane %d of %s: %s; the lane stops", TP_ARG(l->own.tp), err);
		result = -1;
		goto done;
	}
	rd_kafka_poll(l->rk, 0);
	if (stop_after_abort) {
		result = -1;
		goto done;
	}
failures:; /* the forwards that failed for their own sake leave the run */
	size_t nfailed = 0;
	for (size_t i = 0; i < n; i++) {
		if (!failed[i] && st[i].reported && own_fault(st[i].err))
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
	log_warn("lane %d of %s: a transaction of %zu forward(s) aborted (%s)%s", TP_ARG(l->own.tp), n,
	         err, nfailed ? "; the forward that failed for its own sake is recorded" : "");
	if (nfailed > 0) {
		if (lane_take_out_failed(l, list, failed) != 0)
			result = -1;
		*backoff = 0; /* the others go again at once */
	}
done:
	if (e)
		rd_kafka_error_destroy(e);
	free(st);
	free(failed);
	return result;
}

/* ---- the thread ---- */

/* A refused topic left the producer failed for good (send_run): a new one
 * with the same transactional.id, whose init_transactions ends what the
 * old one left open. Returns 0, or -1 when the lane must stop. */
static int renew_producer(lane *l)
{
	char err[512];
	l->renew = 0;
	rd_kafka_destroy(l->rk);
	l->rk = NULL;
	for (int attempt = 1;; attempt++) {
		rd_kafka_error_t *e = NULL;
		if (lane_is_stopping(l, 0))
			return -1;
		if (!l->rk && !(l->rk = new_producer(l, err, sizeof err))) {
			/* (err says why) */
		} else if ((e = rd_kafka_init_transactions(l->rk, CALL_MS))) {
			if (lane_init_failed(l, e, err, sizeof err))
				return -1;
		} else {
			log_info("lane %d of %s: a new producer took the transactional.id", TP_ARG(l->own.tp));
			return 0;
		}
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("lane %d of %s: a new producer: %s; retrying in %lld ms", TP_ARG(l->own.tp), err,
		         (long long)d);
		lane_pause_ms(l, d);
	}
}

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
	int64_t next_run = 0; /* the next run begins no sooner (forward.transaction_interval_ms) */
	for (;;) {
		store_forward_list_clear(&list);
		int64_t want = wait_for_work(l, unrec.n == 0);
		if (want < 0)
			break;
		if (want > l->done_seq && !l->singles_left && !l->search_cap && clock_ms() < next_run &&
		    !lane_is_stopping(l, 0)) {
			lane_pause_ms(l, next_run - clock_ms()); /* (returns at once when stopping) */
			continue;
		}
		if (l->renew && renew_producer(l) != 0)
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
		store_rc rc = store_ensure(l->st, err, sizeof err);
		if (rc == STORE_OK)
			rc = store_next_forwards(l->st, l->own.tp, l->done_seq, lane_run_max(l), &list, err,
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
		next_run = n < LANE_RUN_MAX ? t0 + l->cfg->forward_transaction_interval_ms : 0;
		int backoff, r = send_run(l, &list, &unrec, &backoff);
		log_debug("lane %d of %s: a run of %zu: read in %lld ms, sent and committed in %lld ms",
		          TP_ARG(l->own.tp), n, (long long)(t1 - t0), (long long)(clock_ms() - t1));
		if (r < 0)
			break;
		if (singles > 0 && l->singles_left == singles)
			l->singles_left--; /* (a run of one, sent or recorded) */
		if (r == 1) {
			attempt = 0;
			pthread_mutex_lock(&l->mu);
			if (n == LANE_RUN_MAX && l->want_seq <= l->done_seq)
				l->want_seq = l->done_seq + 1; /* there may be more */
			pthread_mutex_unlock(&l->mu);
			/* paced (the next run waits for its tick): the lane has time
			 * to record this one now, rather than in the next
			 * transaction, whose commit would wait for PostgreSQL */
			if (next_run > clock_ms() && record_committed(l, &unrec) != 0)
				break;
		} else if (backoff) {
			lane_pause_ms(l, backoff_delay(++attempt, 200, 5000, backoff_random()));
		}
	}
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

lane *lane_start(const txhub_config *cfg, alert *al, const store_owned *own, int after_rewind,
                 char *err, size_t errsz)
{
	lane *l = calloc(1, sizeof *l);
	if (!l) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	l->cfg = cfg;
	l->al = al;
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
	if (!(l->rk = new_producer(l, err, errsz)))
		goto fail;
	int e = pthread_create(&l->thread, NULL, run, l);
	if (e != 0) {
		snprintf(err, errsz, "cannot start a forwarding thread: %s", strerror(e));
		goto fail;
	}
	return l;
fail:
	if (l->rk)
		rd_kafka_destroy(l->rk);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
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
	/* no transaction is open when the thread ends: a fenced or failed
	 * producer's is the broker's to abort */
	if (l->rk)
		rd_kafka_destroy(l->rk);
	lane_refused_free(l);
	cJSON_free(l->marker_out);
	cJSON_free(l->last_marker);
	for (size_t i = 0; i < l->ntopics; i++)
		free(l->topics[i]);
	free(l->topics);
	order_free(l->order, NULL);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
