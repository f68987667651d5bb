/* deadletter_base.c: what both modes of the dead-letter thread stand on
 * (deadletter_int.h): the producers' callbacks, parked rows read, a record
 * produced with its headers, statements over a batch's rows, failures
 * counted, logged and alerted. */
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

void dl_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	dl_item *it = m->_private;
	if (it) {
		it->err = m->err;
		it->partition = m->partition;
		it->offset = m->offset;
	}
}

void dl_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)opaque;
	metrics_kafka_error();
	char line[1200];
	kafka_describe_error(rk, err, reason, line, sizeof line);
	log_warn("dead-letter: kafka: %s", line);
}

void dl_items_free(dl_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		store_forward_free(&items[i].f);
		free(items[i].error);
	}
	free(items);
}

/* Read up to DL_BATCH parked rows of parts[0..nparts) into *out (without
 * those with a pending entry: exactly_once). Returns how many, or -1 with
 * err. */
int dl_read_parked(deadletter *d, const owned_part *parts, size_t nparts, dl_item **out,
                   char *err, size_t errsz)
{
	*out = NULL;
	store_parked *p;
	size_t n;
	if (store_dl_parked(d->st, parts, nparts, DL_BATCH, d->eos, &p, &n, err, errsz) != STORE_OK)
		return -1;
	dl_item *items = calloc(n ? n : 1, sizeof *items);
	if (!items) {
		store_parked_free(p, n);
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) { /* (the strings move) */
		items[i].f = p[i].f;
		items[i].error = p[i].error;
		items[i].err = (rd_kafka_resp_err_t)-1;
		snprintf(items[i].attempts, sizeof items[i].attempts, "%s", p[i].attempts);
		snprintf(items[i].parked_at, sizeof items[i].parked_at, "%s", p[i].parked_at);
	}
	free(p);
	*out = items;
	return (int)n;
}

/* Produce item it to the dead-letter topic; at is txhub-dlq-at. */
static rd_kafka_resp_err_t produce(deadletter *d, rd_kafka_t *rk, dl_item *it, const char *at)
{
	for (;;) {
		rd_kafka_headers_t *h = forward_make_headers(&it->f);
		rd_kafka_header_add(h, "txhub-dlq-topic", -1, it->f.topic, -1);
		rd_kafka_header_add(h, "txhub-dlq-error", -1, it->error, -1);
		rd_kafka_header_add(h, "txhub-dlq-attempts", -1, it->attempts, -1);
		rd_kafka_header_add(h, "txhub-dlq-at", -1, at, -1);
		const char *key = it->f.key;
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(d->cfg->forward_dead_letter_topic),
			RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
			RD_KAFKA_V_VALUE(it->f.payload, it->f.payload_len),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
			RD_KAFKA_V_OPAQUE(it), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			return e;
		rd_kafka_headers_destroy(h);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			return e;
		rd_kafka_poll(rk, 100);
	}
}

int dl_keys_command(deadletter *d, dl_keys_do what, const dl_item *items, size_t n,
                    const char *const *vals, const char *at, char *err, size_t errsz)
{
	store_dl_key *k = calloc(n ? n : 1, sizeof *k);
	if (!k) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	size_t nk = 0;
	for (size_t i = 0; i < n; i++)
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
			k[nk++] = (store_dl_key){items[i].f.biz_id, items[i].f.message_key,
			                         vals ? vals[i] : NULL};
	store_rc rc = what == DL_DONE ? store_dl_done(d->st, k, nk, at,
	                                              d->cfg->forward_dead_letter_topic, err, errsz)
	              : what == DL_DONE_EOS ? store_dl_pending_done(d->st, k, nk, err, errsz)
	                                    : store_dl_pending_clear(d->st, k, nk, err, errsz);
	free(k);
	return rc == STORE_OK ? 0 : -1;
}

/* Why item it was not dead-lettered, into why. */
static void item_failure(const deadletter *d, const dl_item *it, char *why, size_t whysz)
{
	if (it->err == (rd_kafka_resp_err_t)-1)
		snprintf(why, whysz, "no delivery report within %lld ms",
		         (long long)(d->delivery_timeout_ms + 5000));
	else
		forward_describe_failure(why, whysz, d->cfg->forward_dead_letter_topic, !it->produced,
		                         it->err);
}

/* Write the dead_letter_failed history rows of the items that failed. A
 * failure to write them is logged only: the next attempt writes them. */
static void note_failed(deadletter *d, const dl_item *items, size_t n)
{
	store_dl_key *k = calloc(n ? n : 1, sizeof *k);
	char (*details)[FORWARD_ERROR_MAX + 300] = calloc(n ? n : 1, sizeof *details);
	char err[512] = "out of memory";
	size_t nk = 0;
	for (size_t i = 0; k && details && i < n; i++) {
		char why[FORWARD_ERROR_MAX];
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
			continue;
		item_failure(d, &items[i], why, sizeof why);
		snprintf(details[nk], sizeof details[nk], "producing to the dead-letter topic %s failed: %s",
		         d->cfg->forward_dead_letter_topic, why);
		k[nk] = (store_dl_key){items[i].f.biz_id, items[i].f.message_key, details[nk]};
		nk++;
	}
	if (!k || !details || store_dl_note_failed(d->st, k, nk, err, sizeof err) != STORE_OK)
		log_warn("dead-letter: noting the failure in the history: %s", err);
	free(k);
	free(details);
}

/* A batch failed (why): counted, logged, and alerted when a run of failures
 * begins. */
void dl_batch_failed(deadletter *d, const dl_item *bad, size_t nbad, const char *why)
{
	d->fails++;
	metrics_dead_letters(0, nbad);
	char msg[900];
	if (nbad > 0)
		snprintf(msg, sizeof msg, "producing %zu parked forward(s) to the dead-letter topic %s "
		         "failed: %s", nbad, d->cfg->forward_dead_letter_topic, why);
	else /* before any was produced: reading, recovering, connecting */
		snprintf(msg, sizeof msg, "dead-lettering to %s: %s", d->cfg->forward_dead_letter_topic,
		         why);
	if (bad) {
		log_about about = {bad->f.biz_id, bad->f.message_key, -1, bad->f.trace_id};
		log_msg_about(LOG_WARN, "dead-letter", &about, "%s; trying again", msg);
	} else {
		log_warn("dead-letter: %s; trying again", msg);
	}
	if (d->fails == 1)
		alert_raise_traced(d->al, "dead_letter_failed", bad ? bad->f.biz_id : NULL,
		                   bad ? bad->f.message_key : NULL, 0, d->cfg->forward_dead_letter_topic,
		                   msg, bad ? bad->f.trace_id : NULL);
	snprintf(d->last_why, sizeof d->last_why, "%s", why);
}

/* The connection to PostgreSQL, made or checked. Returns 0, or -1 with the
 * failure noted. */
int dl_db_ready(deadletter *d)
{
	char err[512];
	if (!d->st && !(d->st = store_connect(d->cfg, err, sizeof err))) {
		dl_batch_failed(d, NULL, 0, err);
		return -1;
	}
	if (store_ensure(d->st, err, sizeof err) != STORE_OK) {
		dl_batch_failed(d, NULL, 0, err);
		return -1;
	}
	return 0;
}

/* The nok items of items[0..n) that went out: counted and logged. */
void dl_count_sent(deadletter *d, const dl_item *items, size_t n, size_t nok)
{
	metrics_dead_letters(1, nok);
	for (size_t i = 0; i < n; i++)
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
			log_about about = {items[i].f.biz_id, items[i].f.message_key, -1,
			                   items[i].f.trace_id};
			log_msg_about(LOG_INFO, "dead-letter", &about, "parked forward to %s "
			              "produced to %s", items[i].f.topic, d->cfg->forward_dead_letter_topic);
		}
}

/* Produce items[0..n) (at: txhub-dlq-at) and wait for their delivery
 * reports. Returns how many were acknowledged; *first_bad: the first that
 * was not (NULL: none). */
size_t dl_produce_all(deadletter *d, rd_kafka_t *rk, dl_item *items, size_t n,
                          const char *at, dl_item **first_bad)
{
	for (size_t i = 0; i < n; i++) {
		items[i].err = (rd_kafka_resp_err_t)-1;
		items[i].produced = 0;
		rd_kafka_resp_err_t e = produce(d, rk, &items[i], at);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
			items[i].err = e; /* refused outright */
		else
			items[i].produced = 1;
	}
	rd_kafka_flush(rk, (int)(d->delivery_timeout_ms + 5000));
	size_t nok = 0;
	*first_bad = NULL;
	for (size_t i = 0; i < n; i++)
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
			nok++;
		else if (!*first_bad)
			*first_bad = &items[i];
	return nok;
}

/* Some of items[0..n) failed (first_bad the first): counted, logged,
 * alerted, in the history. */
void dl_items_failed(deadletter *d, dl_item *items, size_t n, const dl_item *first_bad,
                         size_t nbad)
{
	char why[FORWARD_ERROR_MAX];
	item_failure(d, first_bad, why, sizeof why);
	dl_batch_failed(d, first_bad, nbad, why);
	note_failed(d, items, n);
}
