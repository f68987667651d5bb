/* forward_record.c: see forward_record.h. */
#include "forward_record.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kafka.h"
#include "log.h"
#include "trace.h"

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
	char max_bytes[24], queue_kb[24];
	snprintf(max_bytes, sizeof max_bytes, "%lld", (long long)kafka_forward_max_bytes(cfg));
	int64_t qkb = kafka_producer_queue_kbytes(cfg);
	snprintf(queue_kb, sizeof queue_kb, "%lld", (long long)qkb);
	const char *defaults[] = {
		"enable.idempotence", "true", /* implies acks=all, ordered retries */
		"acks", "all",
		/* librdkafka 2.0.2's idempotent producer with several requests in
		 * flight now and then holds records up to a second (one run in four
		 * or six at 1,000/s, then for the whole run: p95 600-800 ms); with
		 * one request in flight and no linger it did not in 20 runs, and
		 * records still batch while that request is out: 200,000 records
		 * went through in 0.32 s against 0.55 s with five in flight */
		"max.in.flight.requests.per.connection", "1",
		"linger.ms", "0",
		/* the forwards a hub holds in memory at most (librdkafka's 100,000
		 * let a fast PostgreSQL run ahead of the broker by ~100 MiB); a
		 * full queue makes the run loop wait for deliveries */
		"queue.buffering.max.messages", "20000",
		"message.timeout.ms", "30000",
		"compression.type", "lz4",
		/* librdkafka's 1000000 would refuse the largest envelopes' payloads */
		"message.max.bytes", max_bytes,
		/* the bytes held too (librdkafka's 1 GiB would be 20,000 large
		 * forwards); last: NULL ends the list when the user set it */
		qkb > 0 ? "queue.buffering.max.kbytes" : NULL, queue_kb,
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

/* A forward header the trace context replaces (any case). */
static int trace_header(const char *name)
{
	return strcasecmp(name, "traceparent") == 0 || strcasecmp(name, "tracestate") == 0;
}

rd_kafka_headers_t *forward_make_headers(const store_forward *f)
{
	/* checked at intake, and again here: a row of an older hub, or one
	 * written by hand, may hold what no valid value does (a consumer may
	 * copy these headers into HTTP requests as they are) */
	const char *tp = f->traceparent && !txhubi_trace_check_parent(f->traceparent) ? f->traceparent
	                                                                        : NULL;
	const char *ts = tp && f->tracestate && !txhubi_trace_check_state(f->tracestate) ? f->tracestate
	                                                                           : NULL;
	if ((f->traceparent && !tp) || (tp && f->tracestate && !ts)) {
		log_about about = {f->biz_id, f->message_key, -1, NULL};
		log_msg_about(LOG_WARN, "forward", &about, "the stored %s is not valid: the record "
		              "goes without it", tp ? "tracestate" : "traceparent");
	}
	rd_kafka_headers_t *h = rd_kafka_headers_new(8);
	if (f->headers) {
		cJSON *o = cJSON_Parse(f->headers);
		for (cJSON *c = o ? o->child : NULL; c; c = c->next)
			if (cJSON_IsString(c) && !(tp && trace_header(c->string)))
				rd_kafka_header_add(h, c->string, -1, c->valuestring, -1);
		cJSON_Delete(o);
	}
	rd_kafka_header_add(h, "txhub-biz-id", -1, f->biz_id, -1);
	rd_kafka_header_add(h, "txhub-message-key", -1, f->message_key, -1);
	if (tp)
		rd_kafka_header_add(h, "traceparent", -1, tp, -1);
	if (ts)
		rd_kafka_header_add(h, "tracestate", -1, ts, -1);
	return h;
}
