/* kafka.c: see kafka.h. */
#include "kafka.h"

#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
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

/* The last broker certificate refused in this process, and when: every
 * client checks the same brokers, so one slot serves them all (written by
 * librdkafka's broker threads). */
static pthread_mutex_t refused_mu = PTHREAD_MUTEX_INITIALIZER;
static char refused_cert[KAFKA_TLS_VERDICT_MAX];
static int64_t refused_ms;

/* A certificate's subject, issuer and end of validity, into out. */
static void describe_cert(const char *der, size_t size, char *out, size_t outsz)
{
	const unsigned char *p = (const unsigned char *)der;
	X509 *cert = d2i_X509(NULL, &p, (long)size);
	char subject[160] = "?", issuer[160] = "?", until[64] = "?";
	BIO *b = BIO_new(BIO_s_mem());
	if (cert) {
		X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
		X509_NAME_oneline(X509_get_issuer_name(cert), issuer, sizeof issuer);
		if (b && ASN1_TIME_print(b, X509_get0_notAfter(cert)) == 1) {
			int n = BIO_read(b, until, (int)sizeof until - 1);
			until[n > 0 ? n : 0] = '\0';
		}
	}
	snprintf(out, outsz, "subject %s, issuer %s, not after %s", subject, issuer, until);
	BIO_free(b);
	X509_free(cert);
}

/* librdkafka's ssl.certificate.verify_cb: OpenSSL's own verdict, kept
 * (x509_error set: refused, as without a callback), and said: librdkafka's
 * error for a refused certificate reads "could not be verified, verify that
 * ssl.ca.location is correctly configured" whether it expired, names
 * another host or comes from an unknown CA. */
static int verify_cb(rd_kafka_t *rk, const char *broker_name, int32_t broker_id,
                     int *x509_error, int depth, const char *buf, size_t size, char *errstr,
                     size_t errstr_size, void *opaque)
{
	(void)rk;
	(void)broker_id;
	(void)opaque;
	if (*x509_error == X509_V_OK)
		return 1;
	char cert[400];
	describe_cert(buf, size, cert, sizeof cert);
	const char *why = X509_verify_cert_error_string(*x509_error), *hint = "";
	if (*x509_error == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
	    *x509_error == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
	    *x509_error == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
	    *x509_error == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT)
		hint = " (signed by no CA of kafka.ssl.ca.location)";
	else if (*x509_error == X509_V_ERR_HOSTNAME_MISMATCH || *x509_error == X509_V_ERR_IP_ADDRESS_MISMATCH)
		hint = " (it names another host than the one in brokers)";
	snprintf(errstr, errstr_size, "%s%s (%s)", why, hint, cert);
	pthread_mutex_lock(&refused_mu);
	snprintf(refused_cert, sizeof refused_cert, "the certificate of %s (depth %d: %s) is "
	         "refused: %s%s", broker_name, depth, cert, why, hint);
	refused_ms = clock_ms();
	pthread_mutex_unlock(&refused_mu);
	return 0;
}

int kafka_scram_hint(int version, const char *mechanisms, int err, char *out, size_t outsz)
{
	if (outsz)
		out[0] = '\0';
	if (err != RD_KAFKA_RESP_ERR__AUTHENTICATION || !mechanisms ||
	    strncasecmp(mechanisms, "SCRAM-", 6) != 0 || version >= KAFKA_SCRAM_FIXED_VERSION)
		return 0;
	snprintf(out, outsz, "SCRAM against Apache Kafka 4.x needs librdkafka 2.6.1 or later "
	         "(librdkafka #4895) and this hub runs librdkafka %d.%d.%d: a 4.x broker refuses its "
	         "login even with the right user and password (docs/kafka.md: Which librdkafka)",
	         (version >> 24) & 0xff, (version >> 16) & 0xff, (version >> 8) & 0xff);
	return 1;
}

/* The consumer's settings the broker owns under the consumer group
 * protocol, and what the user sets instead. */
static const char *const broker_owned[] = {
	"session.timeout.ms", "the broker's group.consumer.session.timeout.ms sets it",
	"heartbeat.interval.ms", "the broker's group.consumer.heartbeat.interval.ms sets it",
	"partition.assignment.strategy", "the broker assigns (kafka.group.remote.assignor names "
	"its assignor) and every rebalance is incremental",
	"group.protocol.type", "that protocol has none",
	NULL};

int kafka_check_group_protocol(const txhub_config *cfg, int version, char *err, size_t errsz)
{
	const char *p = kafka_setting(cfg, "group.protocol");
	if (!p || strcasecmp(p, "consumer") != 0)
		return 0;
	if (version < KAFKA_CONSUMER_PROTOCOL_VERSION) {
		snprintf(err, errsz, "kafka.group.protocol: consumer (KIP-848) needs librdkafka 2.12 or "
		         "later, and this hub runs librdkafka %d.%d.%d: leave kafka.group.protocol unset "
		         "(classic), or run txhub with a newer librdkafka (docs/kafka.md: Which "
		         "librdkafka)",
		         (version >> 24) & 0xff, (version >> 16) & 0xff, (version >> 8) & 0xff);
		return -1;
	}
	for (size_t i = 0; broker_owned[i]; i += 2) {
		if (!kafka_setting(cfg, broker_owned[i]))
			continue;
		snprintf(err, errsz, "kafka.%s: not with kafka.group.protocol = consumer (KIP-848): %s; "
		         "leave kafka.%s unset", broker_owned[i], broker_owned[i + 1], broker_owned[i]);
		return -1;
	}
	return 0;
}

int kafka_client_scram_hint(rd_kafka_t *rk, int err, char *out, size_t outsz)
{
	char mech[64] = "";
	size_t n = sizeof mech;
	if (outsz)
		out[0] = '\0';
	if (err != RD_KAFKA_RESP_ERR__AUTHENTICATION || !rk ||
	    rd_kafka_conf_get(rd_kafka_conf(rk), "sasl.mechanisms", mech, &n) != RD_KAFKA_CONF_OK)
		return 0;
	return kafka_scram_hint(rd_kafka_version(), mech, err, out, outsz);
}

int kafka_describe_error(rd_kafka_t *rk, int err, const char *reason, char *out, size_t outsz)
{
	char verdict[KAFKA_TLS_VERDICT_MAX] = "";
	int hinted = 0;
	if (err == RD_KAFKA_RESP_ERR__SSL) {
		pthread_mutex_lock(&refused_mu);
		if (refused_ms && clock_ms() - refused_ms < 60000)
			snprintf(verdict, sizeof verdict, "%s", refused_cert);
		pthread_mutex_unlock(&refused_mu);
	} else {
		hinted = kafka_client_scram_hint(rk, err, verdict, sizeof verdict);
	}
	/* the verdict or hint first: it is what a cut line must keep */
	snprintf(out, outsz, "%s: %s%s%s", rd_kafka_err2name((rd_kafka_resp_err_t)err), verdict,
	         *verdict ? "; " : "", reason);
	return hinted;
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
	/* (refused by a librdkafka without TLS: nothing to verify there) */
	rd_kafka_conf_set_ssl_cert_verify_cb(conf, verify_cb);
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

int64_t kafka_consumer_fetch_bytes(const txhub_config *cfg)
{
	if (kafka_setting(cfg, "fetch.max.bytes"))
		return 0;
	int64_t v = kafka_receive_min_bytes(cfg) - 512;
	if (v < KAFKA_FETCH_DEFAULT)
		v = KAFKA_FETCH_DEFAULT;
	const char *recv = kafka_setting(cfg, "receive.message.max.bytes");
	if (recv && atoll(recv) - 512 < v)
		v = atoll(recv) - 512;
	const char *max = kafka_setting(cfg, "message.max.bytes");
	if (max && atoll(max) > v)
		v = atoll(max);
	return v;
}

int64_t kafka_producer_queue_kbytes(const txhub_config *cfg)
{
	if (kafka_setting(cfg, "queue.buffering.max.kbytes"))
		return 0;
	int64_t kb = (2 * kafka_forward_max_bytes(cfg) + 1023) / 1024;
	return kb > KAFKA_PRODUCER_QUEUE_KB ? kb : KAFKA_PRODUCER_QUEUE_KB;
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
		         "says so (docs/troubleshooting.md: \"Control records the broker deleted\"): leave it "
		         "unset",
		         reset);
		return -1;
	}
	if (at_least(cfg, conf, "message.max.bytes", kafka_forward_max_bytes(cfg),
	             "forwarding the largest envelope's payload", err, errsz) != 0)
		return -1;
	if (at_least(cfg, conf, "queue.buffering.max.kbytes",
	             (kafka_forward_max_bytes(cfg) + 1023) / 1024,
	             "the forward producers' queue holding the largest forward (in KiB)", err,
	             errsz) != 0)
		return -1;
	return at_least(cfg, conf, "receive.message.max.bytes", kafka_receive_min_bytes(cfg),
	                "reading the largest envelope from the control topic", err, errsz);
}
