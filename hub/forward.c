/* forward.c: see forward.h. */
#include "forward.h"

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "clock.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"

/* What travels with a message as its opaque, until its report is written. */
typedef struct {
	char *biz_id;
	char *message_key;
	int32_t partition; /* source partition */
	int32_t send_attempts;
	int64_t decided_ms;  /* from store_forward: 0 unless a first send */
	int64_t produced_ms; /* handed to the producer; 0: refused outright */
	int ok;
	char error[FORWARD_ERROR_MAX];
} fw_item;

struct forward {
	rd_kafka_t *rk;
	const txhub_config *cfg;
	alert *al;
	int64_t delivery_timeout_ms;
	fw_item **done; /* reports received, not yet written */
	size_t ndone, capdone;
	size_t in_flight;
	forward_stats stats;
};

static void item_free(fw_item *it)
{
	if (!it)
		return;
	free(it->biz_id);
	free(it->message_key);
	free(it);
}

static void push_done(forward *fw, fw_item *it)
{
	if (fw->ndone == fw->capdone) {
		size_t cap = fw->capdone ? fw->capdone * 2 : 1024;
		fw_item **n = realloc(fw->done, cap * sizeof *n);
		if (!n) {
			/* the row stays pending and leased: retried after the lease */
			log_error("forward: out of memory recording a delivery report");
			item_free(it);
			fw->in_flight--;
			return;
		}
		fw->done = n;
		fw->capdone = cap;
	}
	fw->done[fw->ndone++] = it;
}

void forward_describe_failure(char *buf, size_t size, const char *topic, int refused,
                              rd_kafka_resp_err_t e)
{
	/* topic names are checked at intake (a-z A-Z 0-9 . _ -); escaping
	 * keeps what is stored printable should one ever not be */
	char tb[FORWARD_TOPIC_MAX * 4 + 1];
	log_escape(topic, strlen(topic), tb, sizeof tb);
	const char *what = refused ? "produce to %s refused: %s%s%s" : "delivery to %s failed: %s%s%s";
	const char *pre = "", *post = "";
	if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) {
		/* librdkafka's "Unknown topic or partition" reads like a
		 * partition problem */
		pre = "the broker has no such topic (";
		post = ")";
	} else if (e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE && !refused) {
		pre = "the record is larger than the topic or broker allows (";
		post = "; see max.message.bytes)";
	}
	snprintf(buf, size, what, tb, pre, rd_kafka_err2str(e), post);
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
	} else {
		it->ok = 0;
		forward_describe_failure(it->error, sizeof it->error, rd_kafka_topic_name(m->rkt), 0,
		                         m->err);
	}
	push_done(fw, it);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)rk;
	(void)opaque;
	metrics_kafka_error();
	log_warn("forward: kafka: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/* librdkafka holds records for a topic the broker says it does not have
 * for topic.metadata.propagation.max.ms (30 s) after first using it, in
 * case the topic was just created, and only then fails them as unknown.
 * With the same 30 s as message.timeout.ms they time out first, and the
 * reason becomes "Message timed out". A third of the delivery time-out
 * leaves room for the metadata round trips, unless the user set it. */
static int set_propagation(const txhub_config *cfg, rd_kafka_conf_t *conf, int64_t timeout_ms,
                           char *err, size_t errsz)
{
	if (timeout_ms <= 0 || kafka_setting(cfg, "topic.metadata.propagation.max.ms"))
		return 0; /* 0: no delivery time-out, nothing to come first */
	char v[24], sub[512];
	snprintf(v, sizeof v, "%lld", (long long)(timeout_ms / 3 < 30000 ? timeout_ms / 3 : 30000));
	if (rd_kafka_conf_set(conf, "topic.metadata.propagation.max.ms", v, sub, sizeof sub) !=
	    RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "topic.metadata.propagation.max.ms: %s", sub);
		return -1;
	}
	return 0;
}

rd_kafka_conf_t *forward_producer_conf(const txhub_config *cfg, int64_t *delivery_timeout_ms,
                                       char *err, size_t errsz)
{
	char max_bytes[24];
	snprintf(max_bytes, sizeof max_bytes, "%lld", (long long)kafka_forward_max_bytes(cfg));
	const char *defaults[] = {
		"enable.idempotence", "true", /* implies acks=all, ordered retries */
		"acks", "all",
		"linger.ms", "5",
		"message.timeout.ms", "30000",
		"compression.type", "lz4",
		/* librdkafka's 1000000 would refuse the largest envelopes' payloads */
		"message.max.bytes", max_bytes,
		NULL};
	rd_kafka_conf_t *conf = kafka_conf_new(cfg, defaults, err, errsz);
	if (!conf)
		return NULL;
	char v[64];
	size_t vs = sizeof v;
	*delivery_timeout_ms = 30000;
	if (rd_kafka_conf_get(conf, "message.timeout.ms", v, &vs) == RD_KAFKA_CONF_OK)
		*delivery_timeout_ms = atoll(v);
	if (set_propagation(cfg, conf, *delivery_timeout_ms, err, errsz) != 0) {
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	return conf;
}

forward *forward_new(const txhub_config *cfg, alert *al, char *err, size_t errsz)
{
	forward *fw = calloc(1, sizeof *fw);
	if (!fw) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	fw->cfg = cfg;
	fw->al = al;
	rd_kafka_conf_t *conf = forward_producer_conf(cfg, &fw->delivery_timeout_ms, err, errsz);
	if (!conf)
		goto fail;
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_opaque(conf, fw);
	char sub[512];
	fw->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, sub, sizeof sub);
	if (!fw->rk) {
		snprintf(err, errsz, "cannot create producer: %s", sub);
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	return fw;
fail:
	free(fw);
	return NULL;
}

int64_t forward_delivery_timeout_ms(const forward *fw) { return fw->delivery_timeout_ms; }

void forward_reconfigure(forward *fw, const txhub_config *cfg) { fw->cfg = cfg; }

static rd_kafka_headers_t *make_headers(const store_forward *f)
{
	rd_kafka_headers_t *h = rd_kafka_headers_new(8);
	if (f->headers) {
		cJSON *o = cJSON_Parse(f->headers);
		for (cJSON *c = o ? o->child : NULL; c; c = c->next)
			if (cJSON_IsString(c))
				rd_kafka_header_add(h, c->string, -1, c->valuestring, -1);
		cJSON_Delete(o);
	}
	rd_kafka_header_add(h, "txhub-biz-id", -1, f->biz_id, -1);
	rd_kafka_header_add(h, "txhub-message-key", -1, f->message_key, -1);
	return h;
}

void forward_send(forward *fw, const store_forward_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		const store_forward *f = &l->items[i];
		fw_item *it = calloc(1, sizeof *it);
		if (!it || !(it->biz_id = strdup(f->biz_id)) || !(it->message_key = strdup(f->message_key))) {
			log_error("forward: out of memory; the message is retried after its lease");
			item_free(it);
			continue;
		}
		it->send_attempts = f->send_attempts;
		it->partition = f->src_partition;
		it->decided_ms = f->decided_ms;
		it->produced_ms = clock_ms();
		fw->in_flight++;
		for (;;) {
			rd_kafka_headers_t *h = make_headers(f);
			rd_kafka_resp_err_t e = rd_kafka_producev(
				fw->rk, RD_KAFKA_V_TOPIC(f->topic),
				RD_KAFKA_V_KEY(f->key, f->key ? strlen(f->key) : 0),
				RD_KAFKA_V_VALUE(f->payload, f->payload_len),
				RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
				RD_KAFKA_V_OPAQUE(it), RD_KAFKA_V_END);
			if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
				fw->stats.produced++;
				break;
			}
			rd_kafka_headers_destroy(h);
			if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
				rd_kafka_poll(fw->rk, 100); /* make room, then try again */
				continue;
			}
			/* refused outright (too large, bad topic): a failed attempt */
			it->ok = 0;
			it->produced_ms = 0;
			forward_describe_failure(it->error, sizeof it->error, f->topic, 1, e);
			push_done(fw, it);
			break;
		}
	}
}

/* The metrics of the reports in fw->done, nfailed of which ended the
 * forward for good: one update of the shared counters for all of them. */
static void count_reports(forward *fw, size_t nfailed)
{
	metrics_forwards m;
	memset(&m, 0, sizeof m);
	int64_t now = clock_ms();
	for (size_t i = 0; i < fw->ndone; i++) {
		const fw_item *it = fw->done[i];
		if (!it->ok) {
			m.outcomes[METRICS_FW_RETRIED]++;
			continue;
		}
		m.outcomes[METRICS_FW_SENT]++;
		if (it->produced_ms)
			metrics_forwards_observe(m.produce_bucket, &m.produce_count, &m.produce_sum_us,
			                         now - it->produced_ms);
		if (it->decided_ms)
			metrics_forwards_observe(m.commit_bucket, &m.commit_count, &m.commit_sum_us,
			                         now - it->decided_ms);
	}
	if (nfailed > m.outcomes[METRICS_FW_RETRIED])
		nfailed = m.outcomes[METRICS_FW_RETRIED];
	m.outcomes[METRICS_FW_RETRIED] -= nfailed;
	m.outcomes[METRICS_FW_FAILED] = nfailed;
	metrics_add_forwards(&m);
}

store_rc forward_poll(forward *fw, store *st, const store_owned *own, size_t nown, char *err,
                      size_t errsz)
{
	rd_kafka_poll(fw->rk, 0);
	if (fw->ndone == 0)
		return STORE_OK;
	store_delivery *d = calloc(fw->ndone, sizeof *d);
	if (!d) {
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	for (size_t i = 0; i < fw->ndone; i++) {
		fw_item *it = fw->done[i];
		d[i].biz_id = it->biz_id;
		d[i].message_key = it->message_key;
		d[i].partition = it->partition;
		d[i].ok = it->ok;
		d[i].error = it->error;
		d[i].retry_in_ms = backoff_delay(it->send_attempts + 1, fw->cfg->forward_backoff_ms,
		                                 fw->cfg->forward_backoff_max_ms, backoff_random());
	}
	store_forward_list failed = {0};
	store_rc rc = store_record_deliveries(st, own, nown, d, fw->ndone,
	                                      (int)fw->cfg->forward_max_attempts, &failed, err, errsz);
	free(d);
	if (rc != STORE_OK)
		return rc;
	for (size_t i = 0; i < failed.n; i++) {
		const store_forward *f = &failed.items[i];
		const char *why = NULL; /* the final attempt's error, from its report */
		for (size_t j = 0; j < fw->ndone && !why; j++)
			if (!fw->done[j]->ok && strcmp(fw->done[j]->biz_id, f->biz_id) == 0 &&
			    strcmp(fw->done[j]->message_key, f->message_key) == 0)
				why = fw->done[j]->error;
		fw->stats.failed_final++;
		alert_raise(fw->al, "send_failed", f->biz_id, f->message_key, f->send_attempts,
		            f->topic, why);
	}
	count_reports(fw, failed.n);
	for (size_t i = 0; i < fw->ndone; i++) {
		fw_item *it = fw->done[i];
		if (it->ok) {
			fw->stats.delivered++;
		} else {
			fw->stats.failed_attempts++;
			log_about about = {it->biz_id, it->message_key, it->partition};
			log_msg_about(LOG_WARN, "forward", &about, "attempt %d: %s",
			              it->send_attempts + 1, it->error);
		}
		item_free(it);
	}
	fw->in_flight -= fw->ndone;
	fw->ndone = 0;
	store_forward_list_clear(&failed);
	return STORE_OK;
}

size_t forward_in_flight(const forward *fw) { return fw->in_flight; }

void forward_drain(forward *fw, store *st, const store_owned *own, size_t nown, int timeout_ms)
{
	char err[512];
	int waited = 0;
	while (fw->in_flight > 0 && waited < timeout_ms) {
		rd_kafka_poll(fw->rk, 50);
		waited += 50;
		if (forward_poll(fw, st, own, nown, err, sizeof err) != STORE_OK)
			log_warn("forward: recording deliveries: %s", err);
	}
	if (fw->in_flight > 0)
		log_warn("forward: %zu message(s) still in flight; they stay pending and are sent "
		         "again after their lease", fw->in_flight);
}

forward_stats forward_get_stats(const forward *fw) { return fw->stats; }

void forward_destroy(forward *fw)
{
	if (!fw)
		return;
	rd_kafka_flush(fw->rk, 1000);
	/* what is still queued is purged: its rows stay pending and leased, and
	 * are sent again when the lease ends or the partition is next assigned */
	rd_kafka_purge(fw->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_poll(fw->rk, 0);
	for (size_t i = 0; i < fw->ndone; i++)
		item_free(fw->done[i]);
	free(fw->done);
	rd_kafka_destroy(fw->rk);
	free(fw);
}
