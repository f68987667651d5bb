/* deadletter.c: see deadletter.h. */
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

/* at_least_once, one look: dead-letter what is parked in own with the
 * idempotent producer. Returns the number of rows read (0: nothing
 * parked), or -1 after a failure. */
static int dead_letter_batch(deadletter *d, const owned_set *own)
{
	char err[512];
	if (dl_db_ready(d) != 0)
		return -1;
	dl_item *items = NULL;
	int n = dl_read_parked(d, own->parts, own->n, &items, err, sizeof err);
	if (n < 0) {
		dl_batch_failed(d, NULL, 0, err);
		return -1;
	}
	if (n == 0) {
		free(items);
		return 0;
	}
	char at[80];
	log_timestamp(at, sizeof at);
	dl_item *first_bad;
	size_t nok = dl_produce_all(d, d->rk, items, (size_t)n, at, &first_bad);
	size_t nbad = (size_t)n - nok;
	int rc = n;
	if (nok > 0 && dl_keys_command(d, DL_DONE, items, (size_t)n, NULL, at, err, sizeof err) != 0) {
		/* acknowledged, not recorded: sent again at the next look */
		dl_batch_failed(d, NULL, nok, err);
		rc = -1;
	} else if (nok > 0) {
		dl_count_sent(d, items, (size_t)n, nok);
	}
	if (nbad > 0) {
		dl_items_failed(d, items, (size_t)n, first_bad, nbad);
		rc = -1;
	}
	dl_items_free(items, (size_t)n);
	return rc;
}

static void *run(void *arg)
{
	deadletter *d = arg;
	pthread_setname_np(pthread_self(), "txhub:deadltr");
	owned_set own = {0};
	int64_t wait = DL_LOOK_MS;
	pthread_mutex_lock(&d->mu);
	for (;;) {
		struct timespec ts = clock_deadline(wait);
		while (!d->stopping)
			if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT)
				break;
		if (d->stopping)
			break;
		int copied = owned_copy(&own, &d->own);
		pthread_mutex_unlock(&d->mu);
		int rc = copied != 0 ? 0
		         : d->eos   ? dl_dead_letter_eos(d, &own)
		         : own.n > 0 ? dead_letter_batch(d, &own) : 0;
		if (rc >= 0 && d->fails > 0) {
			log_info("dead-letter: producing to %s works again (after %d failed attempt(s): %s)",
			         d->cfg->forward_dead_letter_topic, d->fails, d->last_why);
			d->fails = 0;
		}
		/* a full batch: more may be waiting */
		wait = rc < 0 ? backoff_delay(d->fails, 1000, DL_BACKOFF_MAX_MS, backoff_random())
		       : rc == DL_BATCH ? 0 : DL_LOOK_MS;
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	owned_free(&own);
	return NULL;
}

deadletter *deadletter_start(const txhub_config *cfg, alert *al, const char *replica_id,
                             char *err, size_t errsz)
{
	*err = '\0';
	if (!*cfg->forward_dead_letter_topic)
		return NULL;
	deadletter *d = calloc(1, sizeof *d);
	if (!d) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	d->cfg = cfg;
	d->al = al;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->eos = config_exactly_once(cfg);
	if (d->eos && (!replica_id || snprintf(d->txid, sizeof d->txid, "%s-dlq", replica_id) >=
	                                          (int)sizeof d->txid)) {
		snprintf(err, errsz, "dead-letter: no transactional.id for its producer");
		goto fail;
	}
	d->failpoint = getenv("TXHUB_FAILPOINT");
	rd_kafka_conf_t *conf = forward_producer_conf(cfg, &d->delivery_timeout_ms, err, errsz);
	if (!conf)
		goto fail;
	if (d->eos) { /* the replica's transactional producer instead, when needed */
		rd_kafka_conf_destroy(conf);
		conf = NULL;
	} else {
		rd_kafka_conf_set_dr_msg_cb(conf, dl_dr_cb);
		rd_kafka_conf_set_error_cb(conf, dl_error_cb);
	}
	char sub[512];
	if (conf && !(d->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, sub, sizeof sub))) {
		snprintf(err, errsz, "dead-letter: cannot create producer: %.300s", sub);
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	if (pthread_create(&d->thread, NULL, run, d) != 0) {
		snprintf(err, errsz, "dead-letter: cannot start its thread: %s", strerror(errno));
		goto fail;
	}
	d->started = 1;
	log_info("dead-letter: parked forwards go to %s too (%s)", cfg->forward_dead_letter_topic,
	         d->eos ? "exactly once: in Kafka transactions" : "at least once");
	return d;
fail:
	deadletter_stop(d);
	if (!*err)
		snprintf(err, errsz, "dead-letter: cannot start");
	return NULL;
}

void deadletter_poll(deadletter *d, const owned_set *own)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	if (d->own.gen != own->gen && owned_copy(&d->own, own) != 0)
		log_warn("dead-letter: out of memory noting the partitions owned; trying again");
	pthread_mutex_unlock(&d->mu);
}

void deadletter_stop(deadletter *d)
{
	if (!d)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->mu);
		d->stopping = 1;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
	}
	if (d->rk) {
		rd_kafka_flush(d->rk, 1000);
		rd_kafka_destroy(d->rk);
	}
	dl_producer_close(d);
	free(d->txns);
	store_close(d->st);
	owned_free(&d->own);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}
