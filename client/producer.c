/* producer.c: envelopes to the control topic, confirmed by the broker.
 *
 * One librdkafka idempotent producer per txhub_producer, and one delivery
 * thread that serves its delivery reports: synchronous calls wait on a
 * condition variable for their own report, asynchronous ones get their
 * callback there. librdkafka's log lines are dropped (the library never
 * logs); its last error is kept to explain a failed delivery instead. */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../hub/lib/clock.h" /* header-only: the hub's deadlines */
#include "internal.h"

struct txhub_producer {
	rd_kafka_t *rk;
	char *control_topic;
	size_t max_bytes;
	int timeout_ms;
	pthread_t thread;
	atomic_int stop;
	pthread_mutex_t mu; /* guards inflight and last_error */
	pthread_cond_t idle;
	long inflight;      /* queued, callback not yet finished */
	char last_error[256];
};

/* A synchronous call's wait, on its stack until the report came. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	txhub_status st;
	char err[320];
} waiter;

/* Each produced envelope's opaque: either a waiter or a callback. */
typedef struct {
	waiter *w;
	txhub_done_cb *cb;
	void *opaque;
} pending;

#define INVALID(...) txhubi_fail(TXHUB_ERR_INVALID, errstr, errsz, __VA_ARGS__)

static void drop_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk, (void)level, (void)fac, (void)buf;
}

static void keep_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)rk, (void)err;
	txhub_producer *p = opaque;
	pthread_mutex_lock(&p->mu);
	snprintf(p->last_error, sizeof p->last_error, "%s", reason);
	pthread_mutex_unlock(&p->mu);
}

/* The outcome of one delivery report. */
static txhub_status outcome(txhub_producer *p, rd_kafka_resp_err_t err, char *why, size_t whysz)
{
	char fatal[256];
	if (!err)
		return TXHUB_OK;
	if (err == RD_KAFKA_RESP_ERR__FATAL || rd_kafka_fatal_error(p->rk, fatal, sizeof fatal)) {
		if (err == RD_KAFKA_RESP_ERR__FATAL)
			rd_kafka_fatal_error(p->rk, fatal, sizeof fatal);
		snprintf(why, whysz, "fatal producer error, create a new producer: %s", fatal);
		return TXHUB_ERR_FATAL;
	}
	pthread_mutex_lock(&p->mu);
	snprintf(why, whysz, "not confirmed by Kafka: %s%s%s%s", rd_kafka_err2str(err),
	         p->last_error[0] ? " (last broker error: " : "", p->last_error,
	         p->last_error[0] ? ")" : "");
	pthread_mutex_unlock(&p->mu);
	return TXHUB_ERR_KAFKA;
}

static void finished(txhub_producer *p)
{
	pthread_mutex_lock(&p->mu);
	if (--p->inflight == 0)
		pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->mu);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	txhub_producer *p = opaque;
	pending *pd = m->_private;
	char why[320] = "";
	txhub_status st = outcome(p, m->err, why, sizeof why);
	if (pd->w) {
		pthread_mutex_lock(&pd->w->mu);
		pd->w->st = st;
		memcpy(pd->w->err, why, sizeof why);
		pd->w->done = 1;
		pthread_cond_signal(&pd->w->cv);
		pthread_mutex_unlock(&pd->w->mu);
	} else if (pd->cb) {
		pd->cb(st, why, pd->opaque);
	}
	free(pd);
	finished(p);
}

static void *delivery_thread(void *arg)
{
	txhub_producer *p = arg;
	while (!atomic_load(&p->stop))
		rd_kafka_poll(p->rk, 100);
	return NULL;
}

/* enable.idempotence and acks may be set, but only to what we set. */
static txhub_status check_passthrough(const char *name, const char *value, char *errstr,
                                      size_t errsz)
{
	if (strcmp(name, "enable.idempotence") == 0 && strcmp(value, "true") != 0)
		return INVALID("kafka %s=%s: the producer must stay idempotent", name, value);
	if (strcmp(name, "acks") == 0 && strcmp(value, "all") != 0 && strcmp(value, "-1") != 0)
		return INVALID("kafka %s=%s: envelopes need acks=all", name, value);
	if (strcmp(name, "bootstrap.servers") == 0 || strcmp(name, "message.timeout.ms") == 0)
		return INVALID("kafka %s: set it with brokers / timeout_ms", name);
	return TXHUB_OK;
}

static txhub_status set(rd_kafka_conf_t *c, const char *name, const char *value, char *errstr,
                        size_t errsz)
{
	char es[256];
	if (rd_kafka_conf_set(c, name, value, es, sizeof es) != RD_KAFKA_CONF_OK)
		return INVALID("kafka %s: %s", name, es);
	return TXHUB_OK;
}

static txhub_status build_conf(txhub_producer *p, const txhub_producer_config *cfg,
                               rd_kafka_conf_t *c, char *errstr, size_t errsz)
{
	char num[32], max[32];
	snprintf(num, sizeof num, "%d", p->timeout_ms);
	/* room for the key, the record and batch headers on top of the value */
	snprintf(max, sizeof max, "%zu", p->max_bytes + 4096 > 1000000 ? p->max_bytes + 4096 : 1000000);
	const char *defaults[] = {"bootstrap.servers", cfg->brokers, "enable.idempotence", "true",
	                          "acks", "all", "linger.ms", "0", "message.timeout.ms", num,
	                          "message.max.bytes", max, "client.id", "txhub-producer", NULL};
	txhub_status st = TXHUB_OK;
	for (const char *const *kv = defaults; *kv && st == TXHUB_OK; kv += 2)
		st = set(c, kv[0], kv[1], errstr, errsz);
	for (const char *const *kv = cfg->kafka; kv && *kv && st == TXHUB_OK; kv += 2) {
		if (!kv[1])
			return INVALID("kafka %s has no value (the list is name, value, ..., NULL)", kv[0]);
		if ((st = check_passthrough(kv[0], kv[1], errstr, errsz)) == TXHUB_OK)
			st = set(c, kv[0], kv[1], errstr, errsz);
	}
	if (st != TXHUB_OK)
		return st;
	rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
	rd_kafka_conf_set_log_cb(c, drop_log);
	rd_kafka_conf_set_error_cb(c, keep_error);
	rd_kafka_conf_set_opaque(c, p);
	return TXHUB_OK;
}

static txhub_status check_config(const txhub_producer_config *cfg, char *errstr, size_t errsz)
{
	if (!cfg || !cfg->brokers || !*cfg->brokers)
		return INVALID("brokers is required");
	if (cfg->control_topic && !txhub_valid_topic(cfg->control_topic))
		return INVALID("control_topic is not a valid Kafka topic name");
	if (cfg->max_bytes && (cfg->max_bytes < 64 || cfg->max_bytes > 104857600))
		return INVALID("max_bytes must be from 64 to 104857600, as the hub's envelope.max_bytes");
	if (cfg->timeout_ms < 0 || cfg->timeout_ms > 3600000)
		return INVALID("timeout_ms must be from 1 to 3600000 (0: 30000)");
	return TXHUB_OK;
}

static void producer_free(txhub_producer *p)
{
	if (!p)
		return;
	if (p->rk)
		rd_kafka_destroy(p->rk);
	free(p->control_topic);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->idle);
	free(p);
}

txhub_status txhub_producer_new(const txhub_producer_config *cfg, txhub_producer **out,
                                char *errstr, size_t errsz)
{
	txhub_status st;
	if (!out)
		return INVALID("out is required");
	*out = NULL;
	if ((st = check_config(cfg, errstr, errsz)) != TXHUB_OK)
		return st;
	txhub_producer *p = calloc(1, sizeof *p);
	if (!p)
		return txhubi_fail(TXHUB_ERR_NOMEM, errstr, errsz, "out of memory");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->max_bytes = cfg->max_bytes ? cfg->max_bytes : TXHUB_MAX_BYTES_DEFAULT;
	p->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
	p->control_topic = strdup(cfg->control_topic ? cfg->control_topic : "txhub.control");
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	if (!p->control_topic || !c) {
		st = txhubi_fail(TXHUB_ERR_NOMEM, errstr, errsz, "out of memory");
		goto fail;
	}
	if ((st = build_conf(p, cfg, c, errstr, errsz)) != TXHUB_OK)
		goto fail;
	char es[512];
	if (!(p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es))) {
		st = INVALID("cannot create the Kafka producer: %s", es);
		goto fail;
	}
	c = NULL; /* rd_kafka_new took it */
	if (pthread_create(&p->thread, NULL, delivery_thread, p) != 0) {
		st = txhubi_fail(TXHUB_ERR_NOMEM, errstr, errsz, "cannot start the delivery thread");
		goto fail;
	}
	*out = p;
	return TXHUB_OK;
fail:
	if (c)
		rd_kafka_conf_destroy(c);
	producer_free(p);
	return st;
}

txhub_status txhub_producer_flush(txhub_producer *p, int timeout_ms)
{
	if (!p)
		return TXHUB_ERR_INVALID;
	struct timespec until = clock_deadline(timeout_ms);
	int rc = 0;
	pthread_mutex_lock(&p->mu);
	while (p->inflight > 0 && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&p->idle, &p->mu, &until);
	long left = p->inflight;
	pthread_mutex_unlock(&p->mu);
	return left ? TXHUB_ERR_KAFKA : TXHUB_OK;
}

void txhub_producer_destroy(txhub_producer *p, int timeout_ms)
{
	if (!p)
		return;
	txhub_producer_flush(p, timeout_ms);
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	/* what is left fails now, with its callback */
	rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&p->mu);
		long left = p->inflight;
		pthread_mutex_unlock(&p->mu);
		if (!left)
			break;
		rd_kafka_poll(p->rk, 10);
	}
	producer_free(p);
}

/* Encode and queue one envelope with pd as its opaque. The encoded buffer
 * goes to librdkafka (RD_KAFKA_MSG_F_FREE), or is freed here on failure. */
static txhub_status enqueue(txhub_producer *p, txhub_type t, const txhub_message *m,
                            pending *pd, int wait_when_full, char *errstr, size_t errsz)
{
	char *buf = NULL, fatal[256];
	size_t len = 0;
	txhub_status st = txhub_envelope_encode(t, m, p->max_bytes, &buf, &len, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	if (m->forward_topic && t != TXHUB_ROLLBACK && strcmp(m->forward_topic, p->control_topic) == 0) {
		free(buf);
		return INVALID("forward_topic is the control topic: the hub would read its own output");
	}
	if (rd_kafka_fatal_error(p->rk, fatal, sizeof fatal)) {
		free(buf);
		return txhubi_fail(TXHUB_ERR_FATAL, errstr, errsz, "fatal producer error, create a new "
		               "producer: %s", fatal);
	}
	pthread_mutex_lock(&p->mu);
	p->inflight++;
	pthread_mutex_unlock(&p->mu);
	for (int waited = 0;; waited += 10) {
		rd_kafka_resp_err_t err = rd_kafka_producev(
			p->rk, RD_KAFKA_V_TOPIC(p->control_topic),
			RD_KAFKA_V_KEY(m->message_key, strlen(m->message_key)),
			RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
			RD_KAFKA_V_OPAQUE(pd), RD_KAFKA_V_END);
		if (!err)
			return TXHUB_OK;
		if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && wait_when_full && waited < p->timeout_ms) {
			struct timespec ts = {0, 10000000L};
			nanosleep(&ts, NULL); /* the delivery thread makes room */
			continue;
		}
		free(buf);
		finished(p);
		return txhubi_fail(TXHUB_ERR_KAFKA, errstr, errsz, "cannot queue the envelope: %s",
		               rd_kafka_err2str(err));
	}
}

static txhub_status send_sync(txhub_producer *p, txhub_type t, const txhub_message *m,
                              char *errstr, size_t errsz)
{
	if (!p)
		return INVALID("no producer");
	waiter w = {.done = 0};
	pending *pd = calloc(1, sizeof *pd);
	if (!pd)
		return txhubi_fail(TXHUB_ERR_NOMEM, errstr, errsz, "out of memory");
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	pd->w = &w;
	txhub_status st = enqueue(p, t, m, pd, 1, errstr, errsz);
	if (st != TXHUB_OK) {
		free(pd);
	} else {
		/* librdkafka reports every message within message.timeout.ms */
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		pthread_mutex_unlock(&w.mu);
		st = w.st;
		if (st != TXHUB_OK)
			txhubi_fail(st, errstr, errsz, "%s", w.err);
	}
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
	return st;
}

txhub_status txhub_producer_prepare(txhub_producer *p, const txhub_message *m, char *errstr,
                                    size_t errsz)
{
	return send_sync(p, TXHUB_PREPARE, m, errstr, errsz);
}

txhub_status txhub_producer_one_shot(txhub_producer *p, const txhub_message *m, char *errstr,
                                     size_t errsz)
{
	if (m && m->payload_kind == TXHUB_PAYLOAD_NONE)
		return INVALID("a one-shot commit needs a payload and forward_topic");
	return send_sync(p, TXHUB_COMMIT, m, errstr, errsz);
}

txhub_status txhub_producer_commit(txhub_producer *p, const char *biz_id,
                                   const char *message_key, char *errstr, size_t errsz)
{
	txhub_message m = {.biz_id = biz_id, .message_key = message_key};
	return send_sync(p, TXHUB_COMMIT, &m, errstr, errsz);
}

txhub_status txhub_producer_rollback(txhub_producer *p, const char *biz_id,
                                     const char *message_key, char *errstr, size_t errsz)
{
	txhub_message m = {.biz_id = biz_id, .message_key = message_key};
	return send_sync(p, TXHUB_ROLLBACK, &m, errstr, errsz);
}

txhub_status txhub_producer_send(txhub_producer *p, txhub_type t, const txhub_message *m,
                                 txhub_done_cb *done, void *opaque, char *errstr, size_t errsz)
{
	if (!p || !done)
		return INVALID("a producer and a callback are required");
	pending *pd = calloc(1, sizeof *pd);
	if (!pd)
		return txhubi_fail(TXHUB_ERR_NOMEM, errstr, errsz, "out of memory");
	pd->cb = done;
	pd->opaque = opaque;
	txhub_status st = enqueue(p, t, m, pd, 0, errstr, errsz);
	if (st != TXHUB_OK)
		free(pd);
	return st;
}
