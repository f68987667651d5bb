/* kafka.c: see kafka.h. */
#include "kafka.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk;
	/* syslog levels: 0..3 error, 4 warning, 5..6 info, 7 debug */
	log_level l = level <= 3 ? LOG_ERROR : level == 4 ? LOG_WARN : level <= 6 ? LOG_INFO : LOG_DEBUG;
	/* the same kafka.* settings go to the consumer and the producer on
	 * purpose: that one of them ignores a property is no news */
	if (strcmp(fac, "CONFWARN") == 0 && strstr(buf, " property and will be ignored by this "))
		l = LOG_DEBUG;
	log_msg(l, "kafka: %s: %s", fac, buf);
}

rd_kafka_conf_t *kafka_conf_new(const txhub_config *cfg, const char *const *defaults,
                                char *err, size_t errsz)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char sub[512];
	if (!conf) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	rd_kafka_conf_set_log_cb(conf, log_cb);
	if (rd_kafka_conf_set(conf, "bootstrap.servers", cfg->brokers, sub, sizeof sub) !=
	    RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "brokers: %s", sub);
		goto fail;
	}
	for (size_t i = 0; defaults && defaults[i]; i += 2) {
		if (rd_kafka_conf_set(conf, defaults[i], defaults[i + 1], sub, sizeof sub) !=
		    RD_KAFKA_CONF_OK) {
			snprintf(err, errsz, "%s: %s", defaults[i], sub);
			goto fail;
		}
	}
	for (size_t i = 0; i < cfg->kafka_cnt; i++) {
		if (rd_kafka_conf_set(conf, cfg->kafka[i].key, cfg->kafka[i].value, sub, sizeof sub) !=
		    RD_KAFKA_CONF_OK) {
			snprintf(err, errsz, "kafka.%s: %s", cfg->kafka[i].key, sub);
			goto fail;
		}
	}
	return conf;
fail:
	rd_kafka_conf_destroy(conf);
	return NULL;
}

rd_kafka_t *kafka_client_new(const txhub_config *cfg, rd_kafka_type_t type,
                             const char *const *defaults, const char *what, char *err,
                             size_t errsz)
{
	rd_kafka_conf_t *conf = kafka_conf_new(cfg, defaults, err, errsz);
	if (!conf)
		return NULL;
	char why[512];
	rd_kafka_t *rk = rd_kafka_new(type, conf, why, sizeof why);
	if (!rk) {
		if (what)
			snprintf(err, errsz, "%s: %.300s", what, why);
		else
			snprintf(err, errsz, "%s", why);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

const char *kafka_setting(const txhub_config *cfg, const char *key)
{
	for (size_t i = 0; i < cfg->kafka_cnt; i++)
		if (strcmp(cfg->kafka[i].key, key) == 0)
			return cfg->kafka[i].value;
	return NULL;
}

int64_t kafka_forward_max_bytes(const txhub_config *cfg)
{
	return cfg->envelope_max_bytes + KAFKA_RECORD_ROOM;
}

int64_t kafka_receive_min_bytes(const txhub_config *cfg)
{
	return cfg->envelope_max_bytes + KAFKA_FETCH_ROOM;
}

int64_t kafka_consumer_receive_bytes(const txhub_config *cfg)
{
	int64_t need = kafka_receive_min_bytes(cfg);
	if (need <= KAFKA_RECEIVE_DEFAULT || kafka_setting(cfg, "receive.message.max.bytes"))
		return 0;
	const char *fetch = kafka_setting(cfg, "fetch.max.bytes");
	if (fetch && atoll(fetch) + 512 > need)
		need = atoll(fetch) + 512;
	return need;
}

/* An explicit kafka.<key> of at least need; the value is read back from
 * conf, where librdkafka has checked it is an integer. */
static int at_least(const txhub_config *cfg, const rd_kafka_conf_t *conf, const char *key,
                    int64_t need, const char *what, char *err, size_t errsz)
{
	char v[32];
	size_t vs = sizeof v;
	if (!kafka_setting(cfg, key) || rd_kafka_conf_get(conf, key, v, &vs) != RD_KAFKA_CONF_OK ||
	    atoll(v) >= need)
		return 0;
	snprintf(err, errsz, "kafka.%s: %s is too small for envelope.max_bytes (%lld): %s needs at "
	         "least %lld; raise it, or leave kafka.%s unset and txhub derives it",
	         key, v, (long long)cfg->envelope_max_bytes, what, (long long)need, key);
	return -1;
}

int kafka_check_limits(const txhub_config *cfg, const rd_kafka_conf_t *conf, char *err,
                       size_t errsz)
{
	const char *reset = kafka_setting(cfg, "auto.offset.reset");
	if (reset && strcmp(reset, "error") != 0) {
		snprintf(err, errsz, "kafka.auto.offset.reset: %s would let the consumer jump to another "
		         "offset on its own, past records never read; txhub decides where to read and "
		         "says so (README: \"Control records the broker deleted\"): leave it unset", reset);
		return -1;
	}
	if (at_least(cfg, conf, "message.max.bytes", kafka_forward_max_bytes(cfg),
	             "forwarding the largest envelope's payload", err, errsz) != 0)
		return -1;
	return at_least(cfg, conf, "receive.message.max.bytes", kafka_receive_min_bytes(cfg),
	                "reading the largest envelope from the control topic", err, errsz);
}
