/* forward.c: see forward.h.
 *
 * Two threads: the run loop produces and serves librdkafka's delivery
 * reports (forward_send, forward_poll), and hands the reports over in
 * batches to the writer, which records them in PostgreSQL on a connection
 * of its own. The writer's transactions run beside the loop's batches (see
 * store_record_deliveries), so the loop never waits for them. */
#include "forward.h"

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

/* What travels with a message as its opaque, until its report is written. */
typedef struct {
	char *biz_id;
	char *message_key;
	tp_key tp;         /* source partition */
	int32_t send_attempts;
	int64_t decided_ms;  /* from store_forward: 0 unless a first send */
	metrics_tenant tenant; /* from store_forward */
	int64_t produced_ms; /* handed to the producer; 0: refused outright */
	int ok;
	int requeue;         /* not attempted after all: the producer died */
	int64_t fwd_seq;     /* its forward sequence (0: none), for the delivery marks */
	int reported;        /* counted in the marks */
	int clear;           /* its row has a last_error: written sent (clearing it) too */
	char *error;         /* why it failed (FORWARD_ERROR_MAX bytes), only when it did */
	char trace_id[33];   /* from store_forward: for its log lines */
	/* forward.order = key (order.h) */
	int64_t src_offset;
	int hold;            /* not produced: an earlier message of its key is unsent */
	order_key *okey;     /* its key's entry, while it is the key's forward in flight */
	store_forward *queued; /* its row, while it waits for the key's forward in flight */
} fw_item;

/* A list of reports. */
typedef struct {
	fw_item **items;
	size_t n, cap;
} fw_list;

/* A partition whose lane ended on its own (failed for good, or fenced by
 * Kafka) gets a new lane no sooner than this. */
#define LANE_RESTART_MS 5000
/* The lanes are looked at this often for partitions they have not taken. */
#define LANE_WATCH_MS 200

typedef struct {
	tp_key tp;
	int64_t not_before;
} lane_cooldown;

struct forward {
	/* exactly_once: a lane per owned partition (the run loop's; the array
	 * under mu, as other threads count what is pending) */
	int eos;
	lane **lanes;
	size_t nlanes;
	lane **retiring; /* asked to stop, not ended yet */
	size_t nretiring;
	lane_cooldown *cooldown;
	size_t ncooldown;
	forward_stats retired; /* counters of the lanes freed */
	uint64_t lanes_gen;    /* the owned set's version the lanes were last tended to ... */
	int lanes_settled;     /* ... leaving a running lane at its epoch for each partition */
	lane_watch watch;      /* partitions not taken by their lane */
	int64_t next_watch;

	/* the run loop's */
	rd_kafka_t *rk;
	alert *al;
	int64_t delivery_timeout_ms;
	int fatal;         /* the producer failed for good: replace it */
	int64_t born_ms;   /* when the producer in use was made ... */
	int delivered;     /* ... and whether it has delivered anything since */
	int dying;         /* producers in a row that failed for good as they started */
	int64_t dying_since;
	int64_t replace_at; /* the next producer is made no sooner */
	char dying_why[512];
	fw_list done;      /* reports served, not handed over yet */
	char **topics;     /* forward topics whose metadata the producer has */
	size_t ntopics;
	order_map *order;  /* forward.order = key: the keys' blockers and queues */
	order_key **ready; /* keys whose forward was delivered, with more queued */
	size_t nready, capready;
	int release;       /* a key's forward was delivered with held ones after it */

	/* shared with the writer, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* the writer: work or stop; the loop: written */
	const txhub_config *cfg;
	fw_list queue;          /* handed over, not written yet */
	marks marks;            /* sequences in flight per partition (marks.h) */
	owned_set own;          /* the partitions owned at the last hand-over (a copy) */
	int64_t in_flight;      /* produced, report not written yet */
	int stopping;
	forward_stats stats;
	int64_t failing_since;  /* a copy of the writer's fault, for readiness */
	int64_t written_ms;     /* when the writer last wrote */
	int64_t handed_ms;      /* when forward_poll last handed reports over */
	int64_t synced_ms;      /* every report handed over before this is written */
	char failing[600];

	/* the writer's */
	pthread_t writer;
	int writer_started;
	const txhub_config *start_cfg; /* to connect with */
	store *st;
	fault f_write;
	owned_set written_own;  /* own, as the writer last took it */
};

/* Most forward topics whose metadata is fetched ahead (see known_topic). */
#define FORWARD_TOPICS_MAX 10000

static void item_free(fw_item *it)
{
	if (!it)
		return;
	if (it->queued) {
		store_forward_free(it->queued);
		free(it->queued);
	}
	free(it->biz_id);
	free(it->message_key);
	free(it->error);
	free(it);
}

static void free_queued(void *it) { item_free(it); }

static int list_add(fw_list *l, fw_item *it)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		fw_item **n = realloc(l->items, cap * sizeof *n);
		if (!n)
			return -1;
		l->items = n;
		l->cap = cap;
	}
	l->items[l->n++] = it;
	return 0;
}

static void list_free(fw_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		item_free(l->items[i]);
	free(l->items);
	memset(l, 0, sizeof *l);
}

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
	if (list_add(&fw->done, it) != 0) {
		/* the row stays pending and leased: retried after the lease */
		log_error("forward: out of memory recording a delivery report");
		item_free(it);
		in_flight_add(fw, -1);
	}
}

/* Mark it failed, with why. */
static void failed(fw_item *it, const char *topic, int refused, rd_kafka_resp_err_t e)
{
	it->ok = 0;
	if ((it->error = malloc(FORWARD_ERROR_MAX)))
		forward_describe_failure(it->error, FORWARD_ERROR_MAX, topic, refused, e);
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
		failed(it, rd_kafka_topic_name(m->rkt), 0, m->err);
	}
	push_done(fw, it);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)rk;
	forward *fw = opaque;
	metrics_kafka_error();
	if (err == RD_KAFKA_RESP_ERR__FATAL)
		fw->fatal = 1; /* (served by rd_kafka_poll, on the run loop's thread) */
	char line[1200];
	kafka_describe_error(err, reason, line, sizeof line);
	log_warn("forward: kafka: %s", line);
}

static void *write_reports(void *arg);

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
	         "also lets it start (or IdempotentWrite on the cluster): README, Kafka ACLs"
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
	fw->cfg = fw->start_cfg = cfg;
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
		/* (lane.h: the main loop's rounding, librdkafka #4671) */
		if (rd_kafka_version() < 0x02040000)
			log_info("forward: librdkafka %s spends up to 2 ms of CPU on each Kafka "
			         "transaction (fixed in 2.4.0): forward.transaction_interval_ms (%lld) "
			         "bounds how many a partition begins (README, Forwarding exactly once)",
			         rd_kafka_version_str(), (long long)cfg->forward_transaction_interval_ms);
		return fw;
	}
	fw->born_ms = clock_ms();
	if (!(fw->rk = new_producer(fw, cfg, err, errsz)))
		goto fail;
	if (pthread_create(&fw->writer, NULL, write_reports, fw) != 0) {
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
	fw->cfg = cfg;
	fw->f_write.alert_ms = cfg->alert_database_failing_ms; /* (read by the writer under mu) */
	pthread_mutex_unlock(&fw->mu);
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
	char **n = realloc(fw->topics, (fw->ntopics + 1) * sizeof *n);
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

static lane *lane_of(forward *fw, tp_key partition)
{
	for (size_t i = 0; i < fw->nlanes; i++)
		if (lane_tp(fw->lanes[i]) == partition)
			return fw->lanes[i];
	return NULL;
}

/* exactly_once: wake the lanes of the partitions with rows due (the rows
 * themselves they read from PostgreSQL, in sequence order). A row without
 * a sequence gets one at the loop's next scan (store_sequence_forwards). */
static void notify_lanes(forward *fw, const store_forward_list *l)
{
	for (size_t i = 0; i < l->n;) {
		tp_key p = l->items[i].src_tp;
		int64_t max = 0;
		for (; i < l->n && l->items[i].src_tp == p; i++)
			if (l->items[i].fwd_seq > max)
				max = l->items[i].fwd_seq;
		lane *ln = max > 0 ? lane_of(fw, p) : NULL;
		if (ln)
			lane_notify(ln, max);
	}
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
			failed(it, f->topic, 1, e); /* refused outright (too large, bad topic) */
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

void forward_order_refresh(forward *fw, const store_owned *own, size_t nown,
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
		lane *ln = fw->eos ? lane_of(fw, f->src_tp) : NULL;
		if (ln)
			lane_blockers_changed(ln);
		else if (!fw->eos && order_note(fw->order, f->src_tp, f->topic, f->key, f->src_offset))
			log_warn("forward: out of memory noting a scheduled message; its key waits from "
			         "the next due scan");
	}
}

size_t forward_order_blocked_keys(forward *fw)
{
	return fw->order ? order_blocked_keys(fw->order) : 0;
}

void forward_send(forward *fw, const store_forward_list *l)
{
	if (fw->eos) {
		notify_lanes(fw, l);
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
			item_free(it);
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

/* The metrics of the reports in l, nfailed of which ended the forward for
 * good: one update of the shared counters for all of them. */
static void count_reports(const fw_list *l, const store_forward_list *failed)
{
	metrics_forwards m;
	memset(&m, 0, sizeof m);
	int64_t now = clock_ms();
	for (size_t i = 0; i < l->n; i++) {
		const fw_item *it = l->items[i];
		if (it->requeue || it->hold)
			continue;
		if (!it->ok) {
			metrics_forwards_count(&m, it->tenant, METRICS_FW_RETRIED, 1);
			continue;
		}
		metrics_forwards_count(&m, it->tenant, METRICS_FW_SENT, 1);
		if (it->produced_ms)
			metrics_forwards_observe(m.produce_bucket, &m.produce_count, &m.produce_sum_us,
			                         now - it->produced_ms);
		if (it->decided_ms)
			metrics_forwards_observe(m.commit_bucket, &m.commit_count, &m.commit_sum_us,
			                         now - it->decided_ms);
	}
	/* those that failed for good were counted as retried above */
	for (size_t i = 0; i < failed->n; i++) {
		metrics_forwards_count(&m, failed->items[i].tenant, METRICS_FW_RETRIED, -1);
		metrics_forwards_count(&m, failed->items[i].tenant, METRICS_FW_FAILED, 1);
	}
	metrics_add_forwards(&m);
	metrics_tally_free(&m.outcomes);
}

/* Whether partition's lane is cooling down (any partition's, when
 * partition < 0); forgets the cooldowns that are over. */
static int cooling_down(forward *fw, tp_key partition, int64_t now)
{
	size_t k = 0;
	int found = 0;
	for (size_t i = 0; i < fw->ncooldown; i++) {
		if (fw->cooldown[i].not_before <= now)
			continue; /* over: forget it */
		found |= partition < 0 || fw->cooldown[i].tp == partition;
		fw->cooldown[k++] = fw->cooldown[i];
	}
	fw->ncooldown = k;
	return found;
}

static void add_stats(forward_stats *to, forward_stats s)
{
	to->produced += s.produced;
	to->delivered += s.delivered;
	to->failed_attempts += s.failed_attempts;
	to->failed_final += s.failed_final;
	to->requeued += s.requeued;
	to->replaced += s.replaced;
}

/* Move lane i of fw->lanes to the retiring ones (under mu). */
static void retire(forward *fw, size_t i)
{
	lane **r = realloc(fw->retiring, (fw->nretiring + 1) * sizeof *r);
	if (!r) { /* stop it here and now */
		add_stats(&fw->retired, lane_stats(fw->lanes[i]));
		lane_free(fw->lanes[i]);
	} else {
		fw->retiring = r;
		fw->retiring[fw->nretiring++] = fw->lanes[i];
	}
	fw->lanes[i] = fw->lanes[--fw->nlanes];
}

/* Look at whether each owned partition's lane has taken it (under mu). */
static void watch_lanes(forward *fw, const owned_set *own, int64_t now)
{
	fw->next_watch = now + LANE_WATCH_MS;
	for (size_t i = 0; i < own->n; i++) {
		char why[512] = "", topic[300] = "";
		lane *l = lane_of(fw, own->parts[i].tp);
		int taken = l && lane_taken(l, why, sizeof why, topic, sizeof topic);
		lane_watch_see(&fw->watch, own->parts[i].tp, taken, l ? why : NULL, topic, now);
	}
	lane_watch_end(&fw->watch, fw->al, fw->cfg->alert_lane_stuck_ms, now);
}

/* exactly_once: a lane for each partition owned now, at its epoch; the
 * lanes of partitions no longer owned (or owned at a newer epoch) are
 * stopped, and freed once their thread ended. This runs at every turn of
 * the loop: while the set is the version last tended (own->gen) and that
 * left each owned partition a lane, nothing is compared or started, only
 * the lanes' ends are looked at. */
static void tend_lanes(forward *fw, const owned_set *own)
{
	int64_t now = clock_ms();
	char why[512], err[512];
	int settled = fw->lanes_settled && fw->lanes_gen == own->gen;
	pthread_mutex_lock(&fw->mu);
	for (size_t i = 0; i < fw->nlanes;) {
		lane *l = fw->lanes[i];
		int fenced = 0;
		if (lane_ended(l, &fenced, why, sizeof why)) {
			char twhy[512], topic[300];
			int taken = lane_taken(l, twhy, sizeof twhy, topic, sizeof topic);
			if (fenced) {
				log_warn("forward: the lane of " TP_FMT " was fenced (%s): another "
				         "replica forwards it now", TP_ARG(lane_tp(l)), why);
			} else if (!taken) {
				/* the partition's lane_stuck episode goes on (and alerts
				 * once), not an alert per lane */
				log_error("forward: the lane of " TP_FMT " failed before taking it (%s); a "
				          "new one starts in %d ms", TP_ARG(lane_tp(l)), why, LANE_RESTART_MS);
				lane_watch_see(&fw->watch, lane_tp(l), 0, twhy, topic, now);
				fw->stats.replaced++;
			} else {
				log_error("forward: the lane of " TP_FMT " failed for good (%s); a new "
				          "one starts in %d ms", TP_ARG(lane_tp(l)), why, LANE_RESTART_MS);
				alert_raise(fw->al, "kafka_fatal", NULL, NULL, 0, NULL, why);
				fw->stats.replaced++;
			}
			lane_cooldown *c = realloc(fw->cooldown, (fw->ncooldown + 1) * sizeof *c);
			if (c) {
				fw->cooldown = c;
				c[fw->ncooldown++] = (lane_cooldown){lane_tp(l), now + LANE_RESTART_MS};
			}
			retire(fw, i);
			settled = 0; /* its partition waits for a new lane */
		} else if (!settled && !owned_has_at(own, lane_tp(l), lane_epoch(l))) {
			lane_stop(l, 0);
			retire(fw, i);
		} else {
			i++;
		}
	}
	int short_of = 0; /* a lane could not be started: tried again next time */
	for (size_t i = 0; !settled && i < own->n; i++) {
		const store_owned *o = &own->parts[i];
		if (lane_of(fw, o->tp) || cooling_down(fw, o->tp, now))
			continue;
		short_of = 1;
		lane **n = realloc(fw->lanes, (fw->nlanes + 1) * sizeof *n);
		if (!n)
			break;
		fw->lanes = n;
		lane *l = lane_start(fw->cfg, fw->al, o, err, sizeof err);
		if (!l) {
			log_error("forward: starting the lane of " TP_FMT ": %s; trying again",
			          TP_ARG(o->tp), err);
			break;
		}
		fw->lanes[fw->nlanes++] = l;
		short_of = 0;
	}
	if (!settled) {
		fw->lanes_gen = own->gen;
		fw->lanes_settled = !short_of && !cooling_down(fw, -1, now);
	}
	if (now >= fw->next_watch)
		watch_lanes(fw, own, now);
	for (size_t i = 0; i < fw->nretiring;) {
		if (lane_ended(fw->retiring[i], NULL, NULL, 0)) {
			add_stats(&fw->retired, lane_stats(fw->retiring[i]));
			lane_free(fw->retiring[i]);
			fw->retiring[i] = fw->retiring[--fw->nretiring];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&fw->mu);
}

void forward_poll(forward *fw, const owned_set *own)
{
	if (fw->eos) {
		tend_lanes(fw, own);
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
		if (list_add(&fw->queue, fw->done.items[i]) != 0) {
			log_error("forward: out of memory handing over a delivery report; the message "
			          "is sent again after its lease");
			item_free(fw->done.items[i]);
			fw->in_flight--;
		}
	}
	fw->done.n = 0;
	fw->handed_ms = clock_ms();
	pthread_cond_broadcast(&fw->cv);
	pthread_mutex_unlock(&fw->mu);
}

/* ---- the writer ---- */

/* After the reports in l were written: alerts for the forwards that failed
 * for good, a log line per failed attempt, the counters. */
static void reports_written(forward *fw, const fw_list *l, const store_forward_list *failed)
{
	for (size_t i = 0; i < failed->n; i++) {
		const store_forward *f = &failed->items[i];
		const char *why = NULL; /* the final attempt's error, from its report */
		for (size_t j = 0; j < l->n && !why; j++)
			if (!l->items[j]->ok && strcmp(l->items[j]->biz_id, f->biz_id) == 0 &&
			    strcmp(l->items[j]->message_key, f->message_key) == 0)
				why = l->items[j]->error;
		alert_raise_traced(fw->al, "send_failed", f->biz_id, f->message_key, f->send_attempts,
		                   f->topic, why, f->trace_id);
	}
	count_reports(l, failed);
	uint64_t ok = 0, bad = 0, requeued = 0;
	for (size_t i = 0; i < l->n; i++) {
		const fw_item *it = l->items[i];
		if (it->ok || it->requeue || it->hold) {
			ok += it->ok;
			requeued += it->requeue;
			continue;
		}
		bad++;
		log_about about = {it->biz_id, it->message_key, it->tp, it->trace_id};
		log_msg_about(LOG_WARN, "forward", &about, "attempt %d: %s", it->send_attempts + 1,
		              it->error ? it->error : "(reason unknown: out of memory)");
	}
	pthread_mutex_lock(&fw->mu);
	fw->stats.delivered += ok;
	fw->stats.failed_attempts += bad;
	fw->stats.failed_final += failed->n;
	fw->stats.requeued += requeued;
	fw->in_flight -= (int64_t)l->n;
	pthread_cond_broadcast(&fw->cv);
	pthread_mutex_unlock(&fw->mu);
}

/* Write the reports of l with the ownership snapshot own and the tuning of
 * cfg. Returns 0, or -1 with err (l is then kept for the next try). */
static int write_list(forward *fw, const fw_list *l, const owned_set *own,
                      const store_mark *marks, size_t nmarks, int64_t backoff_ms,
                      int64_t backoff_max_ms, int max_attempts, char *err, size_t errsz)
{
	char sub[512];
	if (!fw->st && !(fw->st = store_connect(fw->start_cfg, sub, sizeof sub))) {
		snprintf(err, errsz, "%s", sub);
		return -1;
	}
	if (store_ensure(fw->st, err, errsz) != STORE_OK)
		return -1;
	store_delivery *d = calloc(l->n, sizeof *d);
	if (!d) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < l->n; i++) {
		const fw_item *it = l->items[i];
		d[i].biz_id = it->biz_id;
		d[i].message_key = it->message_key;
		d[i].tp = it->tp;
		d[i].ok = it->ok;
		d[i].fwd_seq = it->ok && !it->clear ? it->fwd_seq : 0; /* 0: written sent */
		d[i].requeue = it->requeue;
		d[i].hold = it->hold;
		d[i].error = it->error ? it->error : "delivery failed (out of memory describing why)";
		d[i].retry_in_ms = backoff_delay(it->send_attempts + 1, backoff_ms, backoff_max_ms,
		                                 backoff_random());
	}
	store_forward_list failed = {0};
	int64_t t0 = clock_ms();
	store_rc rc = store_record_deliveries(fw->st, own->parts, own->n, d, l->n, max_attempts,
	                                      marks, nmarks, &failed, err, errsz);
	free(d);
	log_debug("forward: %zu delivery report(s) and %zu mark(s) written in %lld ms", l->n, nmarks,
	          (long long)(clock_ms() - t0));
	if (rc == STORE_OK)
		reports_written(fw, l, &failed);
	store_forward_list_clear(&failed);
	return rc == STORE_OK ? 0 : -1;
}

/* The writer's fault, copied for readiness (forward_failing). */
static void copy_fault(forward *fw)
{
	pthread_mutex_lock(&fw->mu);
	fw->failing_since = fault_failing_since(&fw->f_write);
	snprintf(fw->failing, sizeof fw->failing, "%s", fw->f_write.last);
	pthread_mutex_unlock(&fw->mu);
}

/* Delivery marks are written this often at most, unless a report needs a
 * row written (a failure, a retry, a row without a sequence). */
#define MARKS_EVERY_MS 100

/* Whether every report of l is a delivery a mark records (under mu). */
static int marks_only(const fw_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (!l->items[i]->ok || l->items[i]->fwd_seq <= 0)
			return 0;
	return 1;
}

/* Wait on the writer's condition at most ms (under mu). */
static void timed_wait(forward *fw, int64_t ms)
{
	struct timespec ts = clock_deadline(ms);
	pthread_cond_timedwait(&fw->cv, &fw->mu, &ts);
}

/* Count the reports of l in the marks (once each), and have those of a
 * frozen partition's deliveries written per row. Returns how many marks
 * may move (under mu). */
static size_t count_reported(forward *fw, fw_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		fw_item *it = l->items[i];
		if (it->reported || it->fwd_seq <= 0)
			continue;
		it->reported = 1;
		marks_done(&fw->marks, it->tp, it->fwd_seq);
		if (marks_frozen(&fw->marks, it->tp))
			it->fwd_seq = 0;
	}
	return fw->marks.n;
}

/* Wait for the queue, take it whole with the ownership snapshot and the
 * tuning, write it, and on failure put it back and wait a backoff. When
 * stopping, what cannot be written after one more try is dropped: those
 * rows stay pending and leased and are sent again. */
static void *write_reports(void *arg)
{
	forward *fw = arg;
	pthread_setname_np(pthread_self(), "txhub:reports");
	char err[512];
	int failures = 0;
	pthread_mutex_lock(&fw->mu);
	for (;;) {
		while (fw->queue.n == 0 && !fw->stopping)
			pthread_cond_wait(&fw->cv, &fw->mu);
		if (fw->queue.n == 0)
			break; /* stopping, nothing left */
		/* reports that only move marks wait for the next ~100 ms: one
		 * statement per partition then, whatever the rate */
		int64_t now = clock_ms();
		if (!fw->stopping && now - fw->written_ms < MARKS_EVERY_MS && marks_only(&fw->queue)) {
			timed_wait(fw, MARKS_EVERY_MS - (now - fw->written_ms));
			continue;
		}
		fw_list l = fw->queue;
		int64_t handed = fw->handed_ms; /* l holds all handed over before it */
		memset(&fw->queue, 0, sizeof fw->queue);
		size_t nmarks = count_reported(fw, &l);
		store_mark *mk = calloc(nmarks ? nmarks : 1, sizeof *mk);
		nmarks = mk ? marks_take(&fw->marks, mk, nmarks) : 0;
		fw->written_ms = now;
		int copied = owned_copy(&fw->written_own, &fw->own);
		const txhub_config *cfg = fw->cfg;
		int64_t bo = cfg->forward_backoff_ms, bmax = cfg->forward_backoff_max_ms;
		int max = (int)cfg->forward_max_attempts, stopping = fw->stopping;
		pthread_mutex_unlock(&fw->mu);
		int rc = copied != 0 ? (snprintf(err, sizeof err, "out of memory"), -1)
		                     : write_list(fw, &l, &fw->written_own, mk, nmarks, bo, bmax, max,
		                                  err, sizeof err);
		if (rc == 0) {
			fault_ok(&fw->f_write);
			failures = 0;
		} else {
			fault_fail(&fw->f_write, err);
		}
		copy_fault(fw);
		pthread_mutex_lock(&fw->mu);
		if (rc != 0)
			marks_unsent(&fw->marks, mk, nmarks);
		free(mk);
		if (rc == 0) {
			fw->synced_ms = handed;
			list_free(&l);
			continue;
		}
		if (stopping) {
			log_warn("forward: stopping with %zu delivery report(s) not recorded (%s); those "
			         "messages are sent again after their lease", l.n, err);
			fw->in_flight -= (int64_t)l.n;
			list_free(&l);
			pthread_cond_broadcast(&fw->cv);
			continue;
		}
		for (size_t i = 0; i < fw->queue.n; i++) /* newer ones after the kept */
			if (list_add(&l, fw->queue.items[i]) != 0) {
				item_free(fw->queue.items[i]);
				fw->in_flight--;
			}
		free(fw->queue.items);
		fw->queue = l;
		timed_wait(fw, backoff_delay(++failures, 200, 5000, backoff_random()));
	}
	pthread_mutex_unlock(&fw->mu);
	return NULL;
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

int64_t forward_failing(forward *fw, char *why, size_t whysz)
{
	pthread_mutex_lock(&fw->mu);
	int64_t since = fw->failing_since;
	snprintf(why, whysz, "%s", fw->failing);
	pthread_mutex_unlock(&fw->mu);
	return since;
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
		tend_lanes(fw, own);
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
	add_stats(&s, fw->retired);
	for (size_t i = 0; i < fw->nlanes; i++)
		add_stats(&s, lane_stats(fw->lanes[i]));
	for (size_t i = 0; i < fw->nretiring; i++)
		add_stats(&s, lane_stats(fw->retiring[i]));
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
	for (size_t i = 0; i < fw->nlanes; i++) /* ask them all first, then wait */
		lane_stop(fw->lanes[i], 0);
	for (size_t i = 0; i < fw->nlanes; i++)
		lane_free(fw->lanes[i]);
	for (size_t i = 0; i < fw->nretiring; i++)
		lane_free(fw->retiring[i]);
	free(fw->lanes);
	free(fw->retiring);
	free(fw->cooldown);
	lane_watch_free(&fw->watch);
	list_free(&fw->done);
	list_free(&fw->queue);
	marks_free(&fw->marks);
	owned_free(&fw->own);
	owned_free(&fw->written_own);
	for (size_t i = 0; i < fw->ntopics; i++)
		free(fw->topics[i]);
	free(fw->topics);
	if (fw->rk)
		rd_kafka_destroy(fw->rk);
	order_free(fw->order, free_queued);
	free(fw->ready);
	list_free(&fw->done); /* (reports the producer served as it went) */
	store_close(fw->st);
	pthread_mutex_destroy(&fw->mu);
	pthread_cond_destroy(&fw->cv);
	free(fw);
}
