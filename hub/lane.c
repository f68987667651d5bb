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

int lane_is_stopping(lane *l, int past_grace)
{
	pthread_mutex_lock(&l->mu);
	int s = l->stopping && (!past_grace || clock_ms() >= l->stop_by);
	pthread_mutex_unlock(&l->mu);
	return s;
}

/* Sleep ms, or until asked to stop. */
void lane_pause_ms(lane *l, int64_t ms)
{
	struct timespec ts = clock_deadline(ms);
	pthread_mutex_lock(&l->mu);
	while (!l->stopping)
		if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&l->mu);
}

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
	(void)rk;
	lane *l = opaque;
	metrics_kafka_error();
	char line[1200];
	kafka_describe_error(err, reason, line, sizeof line);
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

/* The number of partitions of topic as the broker has it: 0 when it has
 * no such topic, -1 with err when it cannot be asked. */
int lane_partitions_of(rd_kafka_t *rk, const char *topic, char *err, size_t errsz)
{
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t e = t ? rd_kafka_metadata(rk, 0, t, &md, 10000)
	                          : rd_kafka_last_error();
	int n = -1;
	if (e) {
		snprintf(err, errsz, "metadata of %s: %s", topic, rd_kafka_err2str(e));
	} else if (md->topic_cnt != 1) {
		snprintf(err, errsz, "metadata of %s: no answer for it", topic);
	} else if (md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
		n = 0;
	} else if (md->topics[0].err && md->topics[0].err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) {
		snprintf(err, errsz, "metadata of %s: %s", topic, rd_kafka_err2str(md->topics[0].err));
	} else {
		n = md->topics[0].partition_cnt;
	}
	if (md)
		rd_kafka_metadata_destroy(md);
	if (t)
		rd_kafka_topic_destroy(t);
	return n;
}

/* Make sure the progress topic exists (compacted, as many partitions as
 * the control topic) and learn which of its partitions holds this lane's
 * marker. Returns 0, or -1 with err. */
static int ensure_progress(lane *l, char *err, size_t errsz)
{
	/* a client of its own that never creates a topic by asking about it:
	 * a progress topic made by a broker's auto-creation would not be
	 * compacted */
	static const char *defaults[] = {"allow.auto.create.topics", "false", NULL};
	rd_kafka_t *rk = kafka_client_new(l->cfg, RD_KAFKA_PRODUCER, defaults,
	                                  "cannot create a Kafka client", err, errsz);
	if (!rk)
		return -1;
	char sub[512];
	int rc = -1, n = lane_partitions_of(rk, l->progress, err, errsz);
	if (n == 0) {
		int nctl = lane_partitions_of(rk, tp_topic(l->own.tp), err, errsz);
		if (nctl < 0)
			goto done;
		rd_kafka_NewTopic_t *nt =
			rd_kafka_NewTopic_new(l->progress, nctl > 0 ? nctl : -1, -1, sub, sizeof sub);
		if (!nt) {
			snprintf(err, errsz, "creating %s: %.200s", l->progress, sub);
			goto done;
		}
		rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
		rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
		rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
		rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
		const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev)
		                                               : NULL;
		size_t cnt = 0;
		const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &cnt)
		                                         : NULL;
		rd_kafka_resp_err_t e = !ev ? RD_KAFKA_RESP_ERR__TIMED_OUT
		                        : rd_kafka_event_error(ev) ? rd_kafka_event_error(ev)
		                        : cnt == 1 ? rd_kafka_topic_result_error(tr[0])
		                                   : RD_KAFKA_RESP_ERR__FAIL;
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			log_info("lane %d of %s: created the progress topic %s (%d partition(s), compacted)",
			         TP_ARG(l->own.tp), l->progress, nctl);
		else if (e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
			snprintf(err, errsz, "creating the progress topic %s: %s", l->progress,
			         cnt == 1 && rd_kafka_topic_result_error_string(tr[0])
			                 ? rd_kafka_topic_result_error_string(tr[0])
			                 : rd_kafka_err2str(e));
		if (ev)
			rd_kafka_event_destroy(ev);
		rd_kafka_queue_destroy(q);
		rd_kafka_NewTopic_destroy(nt);
		if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
			goto done;
		for (int i = 0; i < 20 && n <= 0; i++) { /* its metadata may lag */
			n = lane_partitions_of(rk, l->progress, err, errsz);
			if (n <= 0)
				lane_pause_ms(l, 250);
		}
		if (n <= 0) {
			if (n == 0)
				snprintf(err, errsz, "the progress topic %s was created but is not seen yet",
				         l->progress);
			goto done;
		}
	} else if (n < 0) {
		goto done;
	}
	l->marker_part = tp_part(l->own.tp) % n;
	rc = 0;
done:
	rd_kafka_destroy(rk);
	return rc;
}

/* Read the marker partition from offset from to its end into *found (the
 * last marker of this lane's key; seq 0: none). Returns 0, or -1 with err. */
static int scan_markers(lane *l, rd_kafka_topic_t *t, int64_t from, store_marker *found,
                        char *err, size_t errsz)
{
	memset(found, 0, sizeof *found);
	if (rd_kafka_consume_start(t, l->marker_part, from) != 0) {
		snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
		         rd_kafka_err2str(rd_kafka_last_error()));
		return -1;
	}
	int rc = -1;
	int64_t until = clock_ms() + 30000;
	for (;;) {
		rd_kafka_message_t *m = rd_kafka_consume(t, l->marker_part, 200);
		if (!m) {
			if (clock_ms() > until) {
				snprintf(err, errsz, "reading %s [%d]: timed out", l->progress, l->marker_part);
				break;
			}
			continue;
		}
		int eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
		if (m->err && !eof) {
			snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
			         rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			break;
		}
		if (!m->err && m->key && m->key_len == strlen(l->marker_key) &&
		    memcmp(m->key, l->marker_key, m->key_len) == 0) {
			store_marker mk = {0};
			if (m->payload && marker_parse(m->payload, m->len, &mk) == 0)
				*found = mk; /* the later one wins */
			else
				log_warn("lane %d of %s: the record in %s [%d] at offset %lld is not a progress "
				         "marker txhub can read; ignored", TP_ARG(l->own.tp), l->progress,
				         l->marker_part, (long long)m->offset);
		}
		rd_kafka_message_destroy(m);
		if (eof) {
			rc = 0;
			break;
		}
	}
	rd_kafka_consume_stop(t, l->marker_part);
	return rc;
}

/* The last committed marker of the partition, from its progress partition
 * read with read_committed (seq 0: none). Returns 0, or -1 with err. The
 * reader has no consumer group (librdkafka's partition consumer): the
 * hub's principal needs no ACL for one. */
static int read_marker(lane *l, store_marker *out, char *err, size_t errsz)
{
	static const char *defaults[] = {"enable.auto.commit", "false",
	                                 "isolation.level", "read_committed",
	                                 "enable.partition.eof", "true", NULL};
	memset(out, 0, sizeof *out);
	rd_kafka_t *c = kafka_client_new(l->cfg, RD_KAFKA_CONSUMER, defaults,
	                                 "cannot create the progress reader", err, errsz);
	if (!c)
		return -1;
	int64_t lo = 0, hi = 0;
	int rc = -1;
	rd_kafka_topic_t *t = NULL;
	rd_kafka_resp_err_t e =
		rd_kafka_query_watermark_offsets(c, l->progress, l->marker_part, &lo, &hi, 10000);
	if (!e && !(t = rd_kafka_topic_new(c, l->progress, NULL)))
		e = rd_kafka_last_error();
	if (e) {
		snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
		         rd_kafka_err2str(e));
		goto done;
	}
	/* each transaction adds a marker and a commit or abort record, and
	 * compaction keeps the last marker: it is near the end, further back
	 * only when other lanes share the partition or after many aborts */
	for (int64_t back = 64; rc != 0; back *= 8) {
		int64_t from = hi - back > lo ? hi - back : lo;
		store_marker found;
		if (scan_markers(l, t, from, &found, err, errsz) != 0)
			goto done;
		if (found.seq > 0 || from == lo) {
			*out = found;
			rc = 0;
		}
	}
done:
	if (t)
		rd_kafka_topic_destroy(t);
	rd_kafka_destroy(c);
	return rc;
}

int lane_fenced_error(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR__FENCED || e == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
	       e == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/* The lane ends: fenced, or failed for good. */
void lane_end_with(lane *l, int fenced, const char *why)
{
	pthread_mutex_lock(&l->mu);
	l->fenced = fenced;
	snprintf(l->why, sizeof l->why, "%s", why);
	pthread_mutex_unlock(&l->mu);
}

/* A failed attempt at taking the partition: err, about topic (NULL:
 * none), for lane_taken(). Returns whether err differs from the last one. */
static int take_failed(lane *l, const char *err, const char *topic)
{
	pthread_mutex_lock(&l->mu);
	int changed = strcmp(l->take_err, err) != 0;
	snprintf(l->take_err, sizeof l->take_err, "%s", err);
	snprintf(l->take_topic, sizeof l->take_topic, "%s", topic ? topic : "");
	pthread_mutex_unlock(&l->mu);
	return changed;
}

/* Take the partition: fence the previous owner, read its marker, and mark
 * what it sent. Retries (with backoff) while Kafka or PostgreSQL are away
 * or refuse (each distinct error logged as a warning once, repeats at
 * debug: forward.c alerts when it goes on); returns 0, or -1 when
 * stopping, fenced or failed for good. */
int lane_take_partition(lane *l)
{
	char err[512];
	int inited = 0, ensured = 0;
	for (int attempt = 1;; attempt++) {
		store_marker marker = {0};
		int64_t marked = 0;
		int mismatch = 0;
		store_rc rc = STORE_RETRY;
		rd_kafka_error_t *e = NULL;
		const char *about = NULL; /* the topic a failure was about */
		if (!ensured && ensure_progress(l, err, sizeof err) == 0)
			ensured = 1;
		if (!ensured) {
			about = l->progress; /* (err says why) */
		} else if (!inited && (e = rd_kafka_init_transactions(l->rk, CALL_MS))) {
			snprintf(err, sizeof err, "init_transactions (transactional.id %.200s): %.250s", l->txn_id,
			         rd_kafka_error_string(e));
			int fatal = rd_kafka_error_is_fatal(e), fenced = lane_fenced_error(rd_kafka_error_code(e));
			rd_kafka_error_destroy(e);
			if (fatal || fenced) {
				lane_end_with(l, fenced, err);
				log_error("lane %d of %s: %s", TP_ARG(l->own.tp), err);
				return -1;
			}
		} else if ((inited = 1) && !l->st && !(l->st = store_connect(l->cfg, err, sizeof err))) {
			/* (err says why) */
		} else if (store_ensure(l->st, err, sizeof err) != STORE_OK) {
			/* (err says why) */
		} else if (read_marker(l, &marker, err, sizeof err) != 0) {
			about = l->progress;
		} else {
			rc = store_recover_forwards(l->st, &l->own, &marker, &marked, &mismatch, l->origin,
			                            err, sizeof err);
		}
		if (rc == STORE_OK) {
			pthread_mutex_lock(&l->mu);
			l->taken = 1;
			pthread_mutex_unlock(&l->mu);
			/* from the first pending row on: after the marking, none is
			 * left at or below a marker this database wrote */
			l->done_seq = 0;
			marker_dead_init(&l->dead, mismatch ? NULL : &marker);
			if (config_order_by_key(l->cfg) && !l->order && !(l->order = order_new())) {
				snprintf(err, sizeof err, "out of memory");
				lane_end_with(l, 0, err);
				return -1;
			}
			/* and the failures PostgreSQL recorded that no marker listed
			 * (a lane ended between the two) */
			int64_t failed[STORE_MARKER_DEAD_MAX];
			size_t nfailed = 0;
			if (store_failed_seqs(l->st, l->own.tp, failed, STORE_MARKER_DEAD_MAX,
			                      &nfailed, err, sizeof err) != STORE_OK)
				log_warn("lane %d of %s: reading the failed forwards: %s (the markers list "
				         "only those this lane sees fail)", TP_ARG(l->own.tp), err);
			for (size_t i = 0; i < nfailed; i++)
				marker_dead_add(&l->dead, failed[i]);
			pthread_mutex_lock(&l->mu);
			l->covered = 0;
			if (l->want_seq < 1)
				l->want_seq = 1; /* look for what is due */
			pthread_mutex_unlock(&l->mu);
			if (mismatch)
				log_error("lane %d of %s: the progress marker in %s (sequence %lld, row %s/%s, "
				          "origin %s) was not written for this database (origin %s), or for "
				          "an earlier history of it (restored from a backup?): nothing is "
				          "taken as forwarded, every pending row of the partition is "
				          "forwarded again (some may be duplicates)", TP_ARG(l->own.tp),
				          l->progress, (long long)marker.seq, marker.biz_id,
				          marker.message_key, marker.origin, l->origin);
			log_info("lane %d of %s: taken at epoch %lld (transactional.id %s); progress marker at "
			         "sequence %lld, %lld forward(s) of the previous owner found sent",
			         TP_ARG(l->own.tp), (long long)l->own.epoch, l->txn_id,
			         (long long)marker.seq, (long long)marked);
			return 0;
		}
		if (rc == STORE_FENCED) {
			lane_end_with(l, 1, err);
			return -1;
		}
		if (lane_is_stopping(l, 0))
			return -1;
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		int changed = take_failed(l, err, about);
		log_msg(changed ? LOG_WARN : LOG_DEBUG,
		        "lane %d of %s: taking the partition: %s; retrying in %lld ms%s", TP_ARG(l->own.tp), err,
		        (long long)d, changed ? " (the same error again is logged at debug)" : "");
		lane_pause_ms(l, d);
	}
}

/* ---- recording results in PostgreSQL ---- */

/* Record the results of items[0..n): sent, or (failed[i] set) a failed
 * attempt that loses its sequence. Retries while PostgreSQL is away: what
 * Kafka committed stays committed, and a new owner marks it sent from the
 * marker anyway. Returns 0, or -1 when stopping. */
int lane_record(lane *l, const store_forward *items, size_t n, const rd_kafka_resp_err_t *failed,
                int held)
{
	char err[512];
	store_delivery *d = calloc(n ? n : 1, sizeof *d);
	char (*why)[FORWARD_ERROR_MAX] = calloc(n ? n : 1, sizeof *why);
	size_t nfailed = 0;
	int rc = -1;
	if (!d || !why)
		goto done; /* committed ones are marked by the next owner's recovery */
	for (size_t i = 0; i < n; i++) {
		const store_forward *f = &items[i];
		d[i].biz_id = f->biz_id;
		d[i].message_key = f->message_key;
		d[i].tp = f->src_tp;
		if (held) { /* forward.order = key: not sent, held for its key */
			d[i].hold = 1;
			continue;
		}
		d[i].ok = !failed || !failed[i];
		/* a committed run: its rows are covered by the mark, not written */
		d[i].fwd_seq = !failed ? f->fwd_seq : 0;
		if (!d[i].ok) {
			forward_describe_failure(why[i], sizeof why[i], f->topic, 0, failed[i]);
			d[i].error = why[i];
			d[i].retry_in_ms = backoff_delay(f->send_attempts + 1, l->cfg->forward_backoff_ms,
			                                 l->cfg->forward_backoff_max_ms, backoff_random());
			nfailed++;
		}
	}
	/* a committed run (items in sequence order, none failed): every pending
	 * row of the partition up to its last sequence is sent (the lane reads
	 * them in sequence order, and failed ones were recorded first) */
	store_mark mark = {l->own.tp, n > 0 ? items[n - 1].fwd_seq : 0};
	size_t nmarks = !failed && !held && mark.upto > 0 ? 1 : 0;
	for (int attempt = 1;; attempt++) {
		store_forward_list gave_up = {0};
		if (store_ensure(l->st, err, sizeof err) == STORE_OK &&
		    store_record_deliveries(l->st, &l->own, 1, d, n, (int)l->cfg->forward_max_attempts,
		                            &mark, nmarks, &gave_up, err, sizeof err) == STORE_OK) {
			for (size_t i = 0; i < gave_up.n; i++) {
				const store_forward *g = &gave_up.items[i];
				log_about about = {g->biz_id, g->message_key, l->own.tp, g->trace_id};
				log_msg_about(LOG_ERROR, "lane", &about, "forwarding to %s failed %d times: "
				              "send_status failed", g->topic, g->send_attempts);
				alert_raise_traced(l->al, "send_failed", g->biz_id, g->message_key,
				                   g->send_attempts, g->topic, NULL, g->trace_id);
			}
			metrics_forwards m;
			memset(&m, 0, sizeof m);
			for (size_t i = 0; i < n; i++)
				if (!d[i].ok && !d[i].hold)
					metrics_forwards_count(&m, items[i].tenant, METRICS_FW_RETRIED, 1);
			for (size_t i = 0; i < gave_up.n; i++) {
				metrics_forwards_count(&m, gave_up.items[i].tenant, METRICS_FW_RETRIED, -1);
				metrics_forwards_count(&m, gave_up.items[i].tenant, METRICS_FW_FAILED, 1);
			}
			pthread_mutex_lock(&l->mu);
			l->stats.failed_attempts += nfailed;
			l->stats.failed_final += gave_up.n;
			pthread_mutex_unlock(&l->mu);
			if (nfailed)
				metrics_add_forwards(&m);
			metrics_tally_free(&m.outcomes);
			store_forward_list_clear(&gave_up);
			rc = 0;
			break;
		}
		store_forward_list_clear(&gave_up);
		if (lane_is_stopping(l, 1))
			break;
		int64_t wait = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("lane %d of %s: recording forwards: %s; retrying in %lld ms", TP_ARG(l->own.tp), err,
		         (long long)wait);
		lane_pause_ms(l, wait);
	}
done:
	free(d);
	free(why);
	return rc;
}

/* ---- forward.order = key (order.h) ---- */

/* The row of f is a blocker of its key now (it failed, or was held). */
static void order_noted(lane *l, const store_forward *f)
{
	if (l->order && f->key && order_note(l->order, f->src_tp, f->topic, f->key, f->src_offset) != 0)
		log_warn("lane %d of %s: out of memory noting a blocker; the next read finds it",
		         TP_ARG(l->own.tp));
}

/* Read the partition's blockers from PostgreSQL. The lane records what it
 * notes before it reads again, so nothing it noted is kept over what
 * PostgreSQL says (the read starts past every note's ORDER_STICKY_MS). */
static int order_read(lane *l, char *err, size_t errsz)
{
	store_blocker_list b = {0};
	if (store_order_blockers(l->st, &l->own, 1, 0, &b, err, errsz) != STORE_OK)
		return -1;
	tp_key tp = l->own.tp;
	order_refresh(l->order, &tp, 1, &b, clock_ms() + ORDER_STICKY_MS + 1);
	store_blocker_list_clear(&b);
	l->order_read_ms = clock_ms();
	return 0;
}

/* Whether a forward of list must wait for an earlier one of its key. */
static int order_any_blocked(lane *l, const store_forward_list *list)
{
	for (size_t i = 0; i < list->n; i++) {
		const store_forward *f = &list->items[i];
		if (f->key && order_blocked(l->order, f->src_tp, f->topic, f->key, f->src_offset))
			return 1;
	}
	return 0;
}

/* Take out of list (recording them held) the forwards an earlier unsent
 * message of their key comes before; the blockers are read again first
 * when one seems to, and every second anyway (rows delayed or decided
 * elsewhere). Returns 0; 1 when PostgreSQL did not answer (list is read
 * again after a pause); -1 when the held ones could not be recorded (the
 * lane is stopping: the next owner reads them again). */
int lane_order_gate(lane *l, store_forward_list *list)
{
	char err[512];
	pthread_mutex_lock(&l->mu);
	int reread = l->reread_blockers;
	l->reread_blockers = 0;
	pthread_mutex_unlock(&l->mu);
	if (reread || clock_ms() - l->order_read_ms >= 1000 || order_any_blocked(l, list)) {
		if (order_read(l, err, sizeof err) != 0) {
			log_warn("lane %d of %s: reading the blockers of forward keys: %s; trying again",
			         TP_ARG(l->own.tp), err);
			return 1;
		}
	}
	unsigned char *held = calloc(list->n ? list->n : 1, 1);
	if (!held)
		return -1;
	size_t nheld = 0;
	for (size_t i = 0; i < list->n; i++) {
		const store_forward *f = &list->items[i];
		if (f->key && order_blocked(l->order, f->src_tp, f->topic, f->key, f->src_offset)) {
			held[i] = 1;
			nheld++;
			order_noted(l, f); /* the later ones of its key wait too */
		}
	}
	int rc = 0;
	if (nheld > 0) {
		/* the held ones to the front, recorded, then freed */
		store_forward *sorted = malloc(list->n * sizeof *sorted);
		if (!sorted) {
			free(held);
			return -1;
		}
		size_t k = 0;
		for (size_t i = 0; i < list->n; i++)
			if (held[i])
				sorted[k++] = list->items[i];
		for (size_t i = 0; i < list->n; i++)
			if (!held[i])
				sorted[k++] = list->items[i];
		memcpy(list->items, sorted, list->n * sizeof *sorted);
		free(sorted);
		if ((rc = lane_record(l, list->items, nheld, NULL, 1)) == 0) {
			for (size_t i = 0; i < nheld; i++) {
				marker_dead_fail(&l->dead, &list->items[i]);
				store_forward_free(&list->items[i]);
			}
			memmove(list->items, list->items + nheld, (list->n - nheld) * sizeof *list->items);
			list->n -= nheld;
			log_debug("lane %d of %s: %zu forward(s) held for an earlier message of their key",
			          TP_ARG(l->own.tp), nheld);
		}
	}
	free(held);
	return rc;
}

/* Take the forwards failed[i] marks out of list, recording them first.
 * Returns 0, or -1 when they could not be recorded (the lane stops: the
 * next owner sends them again). */
int lane_take_out_failed(lane *l, store_forward_list *list, rd_kafka_resp_err_t *failed)
{
	size_t k = 0, nfailed = 0;
	for (size_t i = 0; i < list->n; i++)
		nfailed += failed[i] != 0;
	if (nfailed == 0)
		return 0;
	/* the failed ones to the front, the others after them in order */
	store_forward *sorted = malloc(list->n * sizeof *sorted);
	rd_kafka_resp_err_t *errs = malloc(list->n * sizeof *errs);
	if (!sorted || !errs) {
		free(sorted);
		free(errs);
		return -1;
	}
	for (size_t i = 0; i < list->n; i++)
		if (failed[i])
			errs[k] = failed[i], sorted[k++] = list->items[i];
	for (size_t i = 0; i < list->n; i++)
		if (!failed[i])
			errs[k] = 0, sorted[k++] = list->items[i];
	memcpy(list->items, sorted, list->n * sizeof *sorted);
	free(sorted);
	int rc = lane_record(l, list->items, nfailed, errs, 0);
	free(errs);
	for (size_t i = 0; rc == 0 && i < nfailed; i++) {
		marker_dead_fail(&l->dead, &list->items[i]);
		order_noted(l, &list->items[i]);
	}
	if (rc != 0)
		return -1;
	for (size_t i = 0; i < nfailed; i++)
		store_forward_free(&list->items[i]);
	memmove(list->items, list->items + nfailed, (list->n - nfailed) * sizeof *list->items);
	list->n -= nfailed;
	memset(failed, 0, list->n * sizeof *failed);
	return 0;
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
			char **n = realloc(l->topics, (l->ntopics + 1) * sizeof *n);
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
	cJSON_free(value);
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
	int result = 0, stop_after_abort = 0;
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
	/* the forwards that failed for their own sake leave the run */
	size_t nfailed = 0;
	for (size_t i = 0; i < n; i++) {
		if (!failed[i] && st[i].reported && own_fault(st[i].err))
			failed[i] = st[i].err;
		nfailed += failed[i] != 0;
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
		if (want > l->done_seq && !l->singles_left && clock_ms() < next_run &&
		    !lane_is_stopping(l, 0)) {
			lane_pause_ms(l, next_run - clock_ms()); /* (returns at once when stopping) */
			continue;
		}
		int64_t t0 = clock_ms();
		store_rc rc = store_ensure(l->st, err, sizeof err);
		if (rc == STORE_OK)
			rc = store_next_forwards(l->st, l->own.tp, l->done_seq,
			                         l->singles_left ? 1 : LANE_RUN_MAX, &list, err, sizeof err);
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

lane *lane_start(const txhub_config *cfg, alert *al, const store_owned *own, char *err,
                 size_t errsz)
{
	lane *l = calloc(1, sizeof *l);
	if (!l) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	l->cfg = cfg;
	l->al = al;
	l->own = *own;
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

int lane_taken(lane *l, char *why, size_t whysz, char *topic, size_t topicsz)
{
	pthread_mutex_lock(&l->mu);
	int taken = l->taken;
	snprintf(why, whysz, "%s", l->ended && !taken && l->why[0] ? l->why : l->take_err);
	snprintf(topic, topicsz, "%s", l->take_topic);
	pthread_mutex_unlock(&l->mu);
	return taken;
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
	rd_kafka_destroy(l->rk);
	for (size_t i = 0; i < l->ntopics; i++)
		free(l->topics[i]);
	free(l->topics);
	order_free(l->order, NULL);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
