/* kafka.c: see kafka.h. */
#include "kafka.h"

#include <stdio.h>
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
