/* forward.c: see forward.h.
 *
 * Two threads: the run loop produces and serves librdkafka's delivery
 * reports (forward_send, forward_poll), and hands the reports over in
 * batches to the writer, which records them in PostgreSQL on a connection
 * of its own. The writer's transactions run beside the loop's batches (see
 * store_record_deliveries), so the loop never waits for them. */
#include "forward.h"
#include "forward_int.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "backoff.h"
#include "clock.h"
#include "fault.h"
#include "kafka.h"
#include "lane.h"
#include "lane_watch.h"
#include "log.h"
#include "marks.h"
#include "metrics.h"
#include "order.h"

/* Most forward topics whose metadata is fetched ahead (see known_topic). */
#define FORWARD_TOPICS_MAX 10000

static void in_flight_add(forward *fw, int64_t delta)
{
	pthread_mutex_lock(&fw->mu);
	fw->in_flight += delta;
	pthread_cond_broadcast(&fw->cv);
	pthread_mutex_unlock(&fw->mu);
}

static void order_done(forward *fw, fw_item *it);

/* A report served (the run loop's thread). */
static void push_done(forward *fw, fw_item *it)
{
	if (it->okey)
		order_done(fw, it);
	if (forward_list_add(&fw->done, it) != 0) {
		/* the row stays pending and leased: retried after the lease */
		log_error("forward: out of memory recording a delivery report");
		forward_item_free(it);
		in_flight_add(fw, -1);
	}
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	forward *fw = opaque;
	fw_item *it = m->_private;
	if (!it)
		return;
	if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
		it->ok = 1;
		fw->delivered = 1;
	} else if (m->err == RD_KAFKA_RESP_ERR__FATAL || m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
	           m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
		it->requeue = 1; /* the producer's fault, not the message's */
	} else {
		forward_failed(it, rd_kafka_topic_name(m->rkt), 0, m->err);
	}
	push_done(fw, it);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	forward *fw = opaque;
	metrics_kafka_error();
	if (err == RD_KAFKA_RESP_ERR__FATAL)
		fw->fatal = 1; /* (served by rd_kafka_poll, on the run loop's thread) */
	char line[1200];
	kafka_describe_error(rk, err, reason, line, sizeof line);
	log_warn("forward: kafka: %s", line);
}

static rd_kafka_t *new_producer(forward *fw, const txhub_config *cfg, char *err, size_t errsz)
{
	rd_kafka_conf_t *conf = forward_producer_conf(cfg, &fw->delivery_timeout_ms, err, errsz);
	if (!conf)
		return NULL;
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_opaque(conf, fw);
	char sub[512];
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, sub, sizeof sub);
	if (!rk) {
		snprintf(err, errsz, "cannot create producer: %.300s", sub);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

/* A producer that fails for good this soon after it was made, having
 * delivered nothing, failed as it started: the next one waits a backoff
 * (up to a minute) and raises no alert of its own. One that lives this
 * long ends such a run. */
#define FATAL_AT_START_MS 10000
#define REPLACE_MAX_MS 60000

/* What a fatal error of the producer as it starts most likely needs. */
static const char *fatal_hint(const char *why)
{
	return strstr(why, "uthorization failed")
	       ? "; the hub's principal needs Write (and Describe) on the forward topics, which "
	         "also lets it start (or IdempotentWrite on the cluster): docs/kafka.md, Kafka ACLs"
	       : "";
}

/* The idempotent producer failed for good (librdkafka's fatal error: a
 * broken sequence, a fenced producer id, or no right to write at all):
 * every later produce would fail. What it still held comes back as reports
 * to requeue (due again now, no attempt counted); a new producer takes
 * over, at once the first time, after a growing backoff while each new
 * one fails as it starts (the alert kafka_fatal raised once for those). */
static void replace_producer(forward *fw)
{
	char why[512], err[512];
	int64_t now = clock_ms();
	if (now < fw->replace_at)
		return; /* fatal stays set: the next poll after replace_at */
	if (!fw->replace_at) {
		rd_kafka_fatal_error(fw->rk, why, sizeof why);
		int at_start = !fw->delivered && now - fw->born_ms < FATAL_AT_START_MS;
		fw->dying = at_start && fw->dying > 0 ? fw->dying + 1 : 1;
		if (fw->dying == 1) {
			fw->dying_since = now;
			log_error("forward: the Kafka producer failed for good (%s); replacing it, and "
			          "sending again what it held", why);
			alert_raise(fw->al, "kafka_fatal", NULL, NULL, 0, NULL, why);
		} else {
			fw->replace_at = now + backoff_delay(fw->dying - 1, 1000, REPLACE_MAX_MS,
			                                     backoff_random());
			log_error("forward: the Kafka producer failed for good as it started, %d times "
			          "in a row (%s%s); the next one in %lld ms", fw->dying, why,
			          fatal_hint(why), (long long)(fw->replace_at - now));
		}
		snprintf(fw->dying_why, sizeof fw->dying_why, "%s", why);
		if (fw->replace_at)
			return;
	}
	rd_kafka_t *next = new_producer(fw, fw->start_cfg, err, sizeof err);
	if (!next) {
		log_error("forward: %s; trying again", err);
		return; /* fatal stays set: the next poll tries again */
	}
	rd_kafka_purge(fw->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_flush(fw->rk, 2000); /* serves the purged messages' reports: requeued */
	rd_kafka_destroy(fw->rk);
	fw->rk = next;
	fw->fatal = 0;
	fw->born_ms = clock_ms();
	fw->delivered = 0;
	fw->replace_at = 0;
	for (size_t i = 0; i < fw->ntopics; i++) /* the new producer knows none */
		free(fw->topics[i]);
	fw->ntopics = 0;
	pthread_mutex_lock(&fw->mu);
	fw->stats.replaced++;
	pthread_mutex_unlock(&fw->mu);
}

/* The producer in use has delivered, or lived past FATAL_AT_START_MS: a
 * run of producers failing as they started is over. */
static void watch_dying(forward *fw)
{
	if (fw->dying < 2 || fw->fatal ||
	    (!fw->delivered && clock_ms() - fw->born_ms < FATAL_AT_START_MS))
		return;
	log_info("forward: the Kafka producer works again (after %d that failed as they started)",
	         fw->dying);
	fw->dying = 0;
}

int64_t forward_dying(const forward *fw, char *why, size_t whysz)
{
	if (fw->eos || fw->dying < 2)
		return 0;
	snprintf(why, whysz, "forward: the Kafka producer has failed for good as it started %d "
	         "times in a row: %s%s", fw->dying, fw->dying_why, fatal_hint(fw->dying_why));
	return fw->dying_since;
}

const char *forward_txn_id(const forward *fw) { return fw->txn ? txn_id(fw->txn) : NULL; }

void forward_set_consumer(forward *fw, rd_kafka_t *consumer)
{
	if (fw->txn)
		txn_set_consumer(fw->txn, consumer);
}

void forward_test_fatal(forward *fw)
{
	if (!fw->rk)
		return;
	rd_kafka_test_fatal_error(fw->rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
	                          "raised by a test");
}

forward *forward_new(const txhub_config *cfg, alert *al, char *err, size_t errsz)
{
	forward *fw = calloc(1, sizeof *fw);
	if (!fw) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	fw->cfg = config_hold(cfg); /* (each a reference of its own) */
	fw->start_cfg = config_hold(cfg);
	fw->al = al;
	pthread_mutex_init(&fw->mu, NULL);
	pthread_cond_init(&fw->cv, NULL);
	fault_init(&fw->f_write, "forward: recording delivery reports", al,
	           cfg->alert_database_failing_ms);
	if (config_order_by_key(cfg) && !config_exactly_once(cfg) && !(fw->order = order_new())) {
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	if (config_exactly_once(cfg)) {
		/* lanes come with the partitions (forward_poll) */
		fw->eos = 1;
		rd_kafka_conf_t *conf = forward_producer_conf(cfg, &fw->delivery_timeout_ms, err, errsz);
		if (!conf)
			goto fail;
		rd_kafka_conf_destroy(conf);
		if (!(fw->txn = txn_new(cfg, err, errsz)))
			goto fail;
		/* (lane.h: the main loop's rounding, librdkafka #4671) */
		if (rd_kafka_version() < 0x02040000)
			log_info("forward: librdkafka %s spends up to 2 ms of CPU on each Kafka "
			         "transaction (fixed in 2.4.0): forward.transaction_interval_ms (%lld) "
			         "bounds how many this replica begins (docs/consumers.md, Forwarding exactly "
			         "once)",
			         rd_kafka_version_str(), (long long)cfg->forward_transaction_interval_ms);
		return fw;
	}
	fw->born_ms = clock_ms();
	if (!(fw->rk = new_producer(fw, cfg, err, errsz)))
		goto fail;
	if (pthread_create(&fw->writer, NULL, forward_write_reports, fw) != 0) {
		snprintf(err, errsz, "cannot start the delivery report writer: %s", strerror(errno));
		goto fail;
	}
	fw->writer_started = 1;
	return fw;
fail:
	forward_destroy(fw);
	return NULL;
}

int64_t forward_delivery_timeout_ms(const forward *fw) { return fw->delivery_timeout_ms; }

void forward_reconfigure(forward *fw, const txhub_config *cfg)
{
	pthread_mutex_lock(&fw->mu);
	const txhub_config *was = fw->cfg; /* (the writer reads it under mu, the loop here) */
	fw->cfg = config_hold(cfg);
	fw->f_write.alert_ms = cfg->alert_database_failing_ms; /* (read by the writer under mu) */
	pthread_mutex_unlock(&fw->mu);
	config_drop(was);
	if (fw->txn)
		txn_reconfigure(fw->txn, cfg);
}

/* The first record to a topic this producer has not used waits for its
 * metadata, which librdkafka asks for at its next once-a-second topic scan:
 * measured, the first ~0.9 s of forwards after a start or to a new topic
 * waited that long (p95 of a 10 s run at 1,000/s). One synchronous metadata
 * request the first time a topic is seen (about a millisecond) ends that. */
static void known_topic(forward *fw, const char *topic)
{
	for (size_t i = 0; i < fw->ntopics; i++)
		if (strcmp(fw->topics[i], topic) == 0)
			return;
	if (fw->ntopics >= FORWARD_TOPICS_MAX)
		return;
	char **n = array_grow(fw->topics, &fw->captopics, fw->ntopics + 1, sizeof *n);
	char *copy = strdup(topic);
	if (n)
		fw->topics = n;
	if (!n || !copy) {
		free(copy);
		return; /* it is asked for at the next scan, as without this */
	}
	fw->topics[fw->ntopics++] = copy;
	rd_kafka_topic_t *t = rd_kafka_topic_new(fw->rk, topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	if (t && rd_kafka_metadata(fw->rk, 0, t, &md, 1000) == RD_KAFKA_RESP_ERR_NO_ERROR)
		rd_kafka_metadata_destroy(md);
	if (t)
		rd_kafka_topic_destroy(t);
}

/* Hand f (its report item it) to the producer; what it refuses outright is
 * reported at once. */
static void produce_item(forward *fw, const store_forward *f, fw_item *it)
{
	known_topic(fw, f->topic);
	it->produced_ms = clock_ms();
	for (;;) {
		rd_kafka_headers_t *h = forward_make_headers(f);
		rd_kafka_resp_err_t e = rd_kafka_producev(
			fw->rk, RD_KAFKA_V_TOPIC(f->topic),
			RD_KAFKA_V_KEY(f->key, f->key ? strlen(f->key) : 0),
			RD_KAFKA_V_VALUE(f->payload, f->payload_len),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
			RD_KAFKA_V_OPAQUE(it), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			return;
		rd_kafka_headers_destroy(h);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(fw->rk, 100); /* make room, then try again */
			continue;
		}
		it->produced_ms = 0;
		if (e == RD_KAFKA_RESP_ERR__FATAL) {
			it->requeue = 1; /* the producer died: the next poll replaces it */
			fw->fatal = 1;
		} else {
			forward_failed(it, f->topic, 1, e); /* refused outright (too large, bad topic) */
		}
		push_done(fw, it);
		return;
	}
}

/* ---- forward.order = key (order.h) ----
 *
 * One forward in flight per key: the key's next ones wait in its queue for
 * the delivery report, and go when it is a delivery. When it is a failure
 * (or the producer died), the failed row becomes the key's blocker and
 * what waited is held back (recorded as held, released by the due scan
 * once the blocker is sent or skipped). */

/* Not produced: recorded as held, the key's blocker from its offset. */
static void order_hold(forward *fw, fw_item *it, const char *topic, const char *key)
{
	it->hold = 1;
	it->ok = 0;
	if (order_note(fw->order, it->tp, topic, key, it->src_offset) != 0)
		log_warn("forward: out of memory noting a held forward; the next scan finds it");
	push_done(fw, it);
}

/* Send f now, queue it behind its key's forward in flight, or hold it.
 * Returns 1 when it was produced. */
static int order_send(forward *fw, const store_forward *f, fw_item *it)
{
	if (order_blocked(fw->order, f->src_tp, f->topic, f->key, f->src_offset)) {
		order_hold(fw, it, f->topic, f->key);
		return 0;
	}
	order_key *k = order_find(fw->order, f->src_tp, f->topic, f->key, 1);
	if (k && k->busy) {
		store_forward *copy = calloc(1, sizeof *copy);
		if (copy && store_forward_copy(copy, f) == 0 && order_push(k, it) == 0) {
			it->queued = copy;
			return 0;
		}
		if (copy) {
			store_forward_free(copy);
			free(copy);
		}
	}
	if (!k || k->busy) { /* out of memory: held, which is never out of order */
		order_hold(fw, it, f->topic, f->key);
		return 0;
	}
	k->busy = 1;
	it->okey = k;
	produce_item(fw, f, it);
	return 1;
}

/* The report of a key's forward in flight was served. */
static void order_done(forward *fw, fw_item *it)
{
	order_key *k = it->okey;
	it->okey = NULL;
	if (it->ok && k->blocker != INT64_MAX && k->blocker >= it->src_offset)
		fw->release = 1; /* it or one after it blocked: held ones may go now */
	if (it->ok && k->nqueue > 0) { /* the next one goes (forward_poll) */
		order_key **r = array_grow(fw->ready, &fw->capready, fw->nready + 1, sizeof *r);
		if (r) {
			fw->ready = r;
			fw->ready[fw->nready++] = k;
			return;
		}
		/* out of memory: what waits is held */
	}
	k->busy = 0;
	if (!it->ok && order_note(fw->order, k->tp, k->topic, k->key, it->src_offset) != 0)
		log_warn("forward: out of memory noting a failed forward; the next scan finds it");
	for (fw_item *q; (q = order_pop(k));) {
		store_forward *f = q->queued;
		q->queued = NULL;
		order_hold(fw, q, k->topic, k->key);
		store_forward_free(f);
		free(f);
	}
	order_forget(fw->order, k);
}

/* Produce the next forward of each key whose forward in flight was
 * delivered. */
static void order_next(forward *fw)
{
	/* taken whole: producing serves reports (a full queue), which may make
	 * keys ready again, for the next time */
	order_key **ready = fw->ready;
	size_t nready = fw->nready, produced = 0;
	fw->ready = NULL;
	fw->nready = fw->capready = 0;
	for (size_t i = 0; i < nready; i++) {
		order_key *k = ready[i];
		fw_item *it = order_pop(k);
		store_forward *f = it->queued;
		it->queued = NULL;
		k->busy = 0;
		if (order_blocked(fw->order, k->tp, k->topic, k->key, it->src_offset)) {
			/* a scan found an earlier one unsent meanwhile: this and the rest wait */
			it->okey = k;
			it->ok = 0;
			it->hold = 1;
			push_done(fw, it); /* holds what is queued behind it too */
		} else {
			k->busy = 1;
			it->okey = k;
			produce_item(fw, f, it);
			produced++;
		}
		store_forward_free(f);
		free(f);
	}
	free(ready);
	if (produced) {
		pthread_mutex_lock(&fw->mu);
		fw->stats.produced += produced;
		pthread_mutex_unlock(&fw->mu);
	}
}

int64_t forward_reports_synced(forward *fw)
{
	pthread_mutex_lock(&fw->mu);
	int64_t t = fw->synced_ms;
	pthread_mutex_unlock(&fw->mu);
	return t;
}

int forward_take_release(forward *fw)
{
	int r = fw->release;
	fw->release = 0;
	return r;
}

void forward_order_refresh(forward *fw, const owned_part *own, size_t nown,
                           const store_blocker_list *b, int64_t started_ms, int64_t synced_ms)
{
	if (!fw->order)
		return;
	/* a note older than the last report written before the read began is
	 * in what was read: only the later ones are kept */
	if (synced_ms + ORDER_STICKY_MS > started_ms)
		started_ms = synced_ms + ORDER_STICKY_MS;
	tp_key *parts = calloc(nown ? nown : 1, sizeof *parts);
	if (!parts)
		return;
	for (size_t i = 0; i < nown; i++)
		parts[i] = own[i].tp;
	order_refresh(fw->order, parts, nown, b, started_ms);
	free(parts);
}

void forward_note_scheduled(forward *fw, const store_forward_list *l)
{
	if (!fw->eos && !fw->order)
		return; /* forward.order = partition */
	for (size_t i = 0; i < l->n; i++) {
		const store_forward *f = &l->items[i];
		if (!f->key)
			continue; /* a null key has no order to keep */
		lane *ln = fw->eos ? forward_lane_of(fw, f->src_tp) : NULL;
		if (ln)
			lane_blockers_changed(ln);
		else if (!fw->eos && order_note(fw->order, f->src_tp, f->topic, f->key, f->src_offset))
			log_warn("forward: out of memory noting a scheduled message; its key waits from "
			         "the next due scan");
	}
}

void forward_send(forward *fw, const store_forward_list *l)
{
	if (fw->eos) {
		forward_notify_lanes(fw, l);
		return;
	}
	size_t handed = 0, produced = 0;
	/* the sequences handed over, noted in the marks before any of their
	 * reports can reach the writer (they come through forward_poll);
	 * what is lost before the producer freezes its partition's mark */
	store_mark *issued = calloc(l->n ? l->n : 1, sizeof *issued);
	tp_key *lost = calloc(l->n ? l->n : 1, sizeof *lost);
	size_t nissued = 0, nlost = 0;
	for (size_t i = 0; i < l->n; i++) {
		const store_forward *f = &l->items[i];
		fw_item *it = calloc(1, sizeof *it);
		if (!it || !(it->biz_id = strdup(f->biz_id)) || !(it->message_key = strdup(f->message_key))) {
			log_error("forward: out of memory; the message is retried after its lease");
			forward_item_free(it);
			if (lost)
				lost[nlost++] = f->src_tp;
			continue;
		}
		it->fwd_seq = f->fwd_seq;
		it->clear = f->had_error;
		if (f->fwd_seq > 0 && issued)
			issued[nissued++] = (store_mark){f->src_tp, f->fwd_seq};
		else if (f->fwd_seq > 0)
			it->fwd_seq = 0; /* recorded by itself */
		it->send_attempts = f->send_attempts;
		it->tp = f->src_tp;
		it->src_offset = f->src_offset;
		it->decided_ms = f->decided_ms;
		it->tenant = f->tenant;
		memcpy(it->trace_id, f->trace_id, sizeof it->trace_id);
		handed++;
		if (fw->order && f->key) {
			produced += (size_t)order_send(fw, f, it);
			continue;
		}
		produced++;
		produce_item(fw, f, it);
	}
	pthread_mutex_lock(&fw->mu); /* once per call, not per message */
	for (size_t i = 0; i < nissued; i++)
		if (marks_issue(&fw->marks, issued[i].tp, issued[i].upto) != 0)
			log_warn("forward: out of memory tracking " TP_FMT "'s forwards: its delivery "
			         "mark stays where it is until the hub restarts", TP_ARG(issued[i].tp));
	for (size_t i = 0; i < nlost; i++)
		marks_freeze(&fw->marks, lost[i]);
	/* out of memory noting what was handed over, or the store could not copy
	 * all of a batch's forwards: which partitions lost some is not known */
	if (!issued || !lost || l->incomplete)
		marks_freeze_all(&fw->marks);
	fw->in_flight += (int64_t)handed;
	fw->stats.produced += produced;
	pthread_mutex_unlock(&fw->mu);
	free(issued);
	free(lost);
}

void forward_poll(forward *fw, const owned_set *own)
{
	if (fw->eos) {
		forward_tend_lanes(fw, own);
		return;
	}
	rd_kafka_poll(fw->rk, 0);
	if (fw->nready)
		order_next(fw);
	if (fw->fatal)
		replace_producer(fw);
	watch_dying(fw);
	if (fw->done.n == 0)
		return;
	pthread_mutex_lock(&fw->mu);
	/* out of memory, the last snapshot serves: a partition just taken is
	 * checked again when the reports are written */
	owned_copy(&fw->own, own);
	for (size_t i = 0; i < fw->done.n; i++) {
		if (forward_list_add(&fw->queue, fw->done.items[i]) != 0) {
			log_error("forward: out of memory handing over a delivery report; the message "
			          "is sent again after its lease");
			forward_item_free(fw->done.items[i]);
			fw->in_flight--;
		}
	}
	fw->done.n = 0;
	fw->handed_ms = clock_ms();
	pthread_cond_broadcast(&fw->cv);
	pthread_mutex_unlock(&fw->mu);
}

size_t forward_in_flight(forward *fw)
{
	pthread_mutex_lock(&fw->mu);
	int64_t n = fw->in_flight;
	for (size_t i = 0; i < fw->nlanes; i++)
		n += (int64_t)lane_pending(fw->lanes[i]);
	pthread_mutex_unlock(&fw->mu);
	return n > 0 ? (size_t)n : 0;
}

size_t forward_stuck(forward *fw, char *why, size_t whysz)
{
	pthread_mutex_lock(&fw->mu);
	size_t n = lane_watch_stuck(&fw->watch, why, whysz);
	pthread_mutex_unlock(&fw->mu);
	return n;
}

void forward_drain(forward *fw, const owned_set *own, int timeout_ms)
{
	int64_t until = clock_ms() + timeout_ms;
	while (fw->eos && forward_in_flight(fw) > 0 && clock_ms() < until) {
		forward_tend_lanes(fw, own);
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
	while (!fw->eos && forward_in_flight(fw) > 0 && clock_ms() < until) {
		rd_kafka_poll(fw->rk, 20);
		forward_poll(fw, own);
		pthread_mutex_lock(&fw->mu);
		if (fw->in_flight > 0 && fw->queue.n > 0) { /* the writer is at it */
			struct timespec ts = clock_deadline(20);
			pthread_cond_timedwait(&fw->cv, &fw->mu, &ts);
		}
		pthread_mutex_unlock(&fw->mu);
	}
	size_t left = forward_in_flight(fw);
	if (left > 0)
		log_warn("forward: %zu message(s) still in flight; they stay pending and are sent "
		         "again after their lease", left);
}

forward_stats forward_get_stats(forward *fw)
{
	pthread_mutex_lock(&fw->mu);
	forward_stats s = fw->stats;
	forward_add_stats(&s, fw->retired);
	for (size_t i = 0; i < fw->nlanes; i++)
		forward_add_stats(&s, lane_stats(fw->lanes[i]));
	for (size_t i = 0; i < fw->nretiring; i++)
		forward_add_stats(&s, lane_stats(fw->retiring[i]));
	pthread_mutex_unlock(&fw->mu);
	return s;
}

void forward_destroy(forward *fw)
{
	if (!fw)
		return;
	if (fw->rk) {
		rd_kafka_flush(fw->rk, 1000);
		/* what is still queued is purged: its rows stay pending and leased,
		 * and are sent again when the lease ends or the partition is next
		 * assigned */
		rd_kafka_purge(fw->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(fw->rk, 0);
	}
	if (fw->writer_started) {
		pthread_mutex_lock(&fw->mu);
		fw->stopping = 1;
		pthread_cond_broadcast(&fw->cv);
		pthread_mutex_unlock(&fw->mu);
		pthread_join(fw->writer, NULL);
	}
	txn_stop(fw->txn); /* (what it holds open is committed, or settled by the next owner) */
	for (size_t i = 0; i < fw->nlanes; i++) /* ask them all first, then wait */
		lane_stop(fw->lanes[i], 0);
	for (size_t i = 0; i < fw->nlanes; i++)
		lane_free(fw->lanes[i]);
	for (size_t i = 0; i < fw->nretiring; i++)
		lane_free(fw->retiring[i]);
	txn_free(fw->txn); /* (after its lanes) */
	free(fw->lanes);
	free(fw->retiring);
	free(fw->cooldown);
	lane_watch_free(&fw->watch);
	forward_list_free(&fw->done);
	forward_list_free(&fw->queue);
	marks_free(&fw->marks);
	owned_free(&fw->own);
	owned_free(&fw->rewound);
	owned_free(&fw->written_own);
	for (size_t i = 0; i < fw->ntopics; i++)
		free(fw->topics[i]);
	free(fw->topics);
	if (fw->rk)
		rd_kafka_destroy(fw->rk);
	order_free(fw->order, forward_free_queued);
	free(fw->ready);
	forward_list_free(&fw->done); /* (reports the producer served as it went) */
	store_close(fw->st);
	config_drop(fw->cfg);
	config_drop(fw->start_cfg);
	pthread_mutex_destroy(&fw->mu);
	pthread_cond_destroy(&fw->cv);
	free(fw);
}
