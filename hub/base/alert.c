/* alert.c: see alert.h. One thread, one queue, one reused curl handle. */
#include "alert.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"

#define ALERT_QUEUE_MAX 10000
#define ALERT_ATTEMPTS 5
#define ALERT_TIMEOUT_MS 5000
#define ALERT_BACKOFF_MS 1000
#define ALERT_BACKOFF_MAX_MS 30000

typedef struct item {
	struct item *next;
	char *json;
	int attempts;   /* POSTs tried so far */
	int64_t due_ms; /* monotonic time of the next try */
} item;

struct alert {
	char *url;
	pthread_t thread;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	item *head, *tail; /* queued, in order of arrival */
	size_t queued;
	int stopping;
	int64_t give_up_at; /* when stopping: drop what is left after this */
};

/* Append it to the queue; the caller holds al->mu. */
static void append(alert *al, item *it)
{
	it->next = NULL;
	if (al->tail)
		al->tail->next = it;
	else
		al->head = it;
	al->tail = it;
	al->queued++;
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
	(void)p;
	(void)u;
	return size * n;
}

/* POST one body; returns 0 on a 2xx answer, else -1 with a reason. */
static int post(CURL *c, const char *url, const char *json, char *why, size_t whysz)
{
	char cerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ALERT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "txhub/" TXHUB_VERSION);
	CURLcode rc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		snprintf(why, whysz, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
		return -1;
	}
	if (code < 200 || code > 299) {
		snprintf(why, whysz, "HTTP %ld", code);
		return -1;
	}
	return 0;
}

static void *run(void *arg)
{
	alert *al = arg;
	pthread_setname_np(pthread_self(), "txhub:alert");
	CURL *c = curl_easy_init();
	pthread_mutex_lock(&al->mu);
	for (;;) {
		int64_t now = clock_ms();
		if (al->stopping && (!al->head || now >= al->give_up_at))
			break;
		/* the earliest due item (the queue is short; a scan is fine) */
		item *best = NULL, *prev_best = NULL, *prev = NULL;
		for (item *it = al->head; it; prev = it, it = it->next)
			if (!best || it->due_ms < best->due_ms) {
				best = it;
				prev_best = prev;
			}
		if (!best || best->due_ms > now) {
			int64_t until = best ? best->due_ms : now + 60000;
			if (al->stopping && until > al->give_up_at)
				until = al->give_up_at;
			struct timespec ts = clock_deadline(until - now);
			pthread_cond_timedwait(&al->cv, &al->mu, &ts);
			continue;
		}
		/* unlink it while we POST without the lock */
		if (prev_best)
			prev_best->next = best->next;
		else
			al->head = best->next;
		if (al->tail == best)
			al->tail = prev_best;
		best->next = NULL;
		al->queued--;
		char *url = al->url ? strdup(al->url) : NULL; /* a reload may change it */
		pthread_mutex_unlock(&al->mu);

		char why[CURL_ERROR_SIZE + 32];
		int ok = c && url && post(c, url, best->json, why, sizeof why) == 0;
		if (!c)
			snprintf(why, sizeof why, "cannot create a curl handle");
		else if (!url)
			snprintf(why, sizeof why, "alert.webhook is empty now");
		free(url);
		best->attempts++;
		pthread_mutex_lock(&al->mu);
		if (ok) {
			free(best->json);
			free(best);
		} else if (best->attempts >= ALERT_ATTEMPTS) {
			char ej[1024];
			log_error("alert: webhook failed %d times (%s); dropping the alert %s",
			          best->attempts, why,
			          log_escape(best->json, strlen(best->json), ej, sizeof ej));
			free(best->json);
			free(best);
		} else {
			int64_t d = backoff_delay(best->attempts, ALERT_BACKOFF_MS, ALERT_BACKOFF_MAX_MS,
			                          backoff_random());
			log_warn("alert: webhook: %s; retrying in %lld ms", why, (long long)d);
			best->due_ms = clock_ms() + d;
			append(al, best);
		}
	}
	/* what is left was not delivered in time */
	for (item *it = al->head, *n; it; it = n) {
		n = it->next;
		char ej[1024];
		log_error("alert: stopping; not delivered to the webhook: %s",
		          log_escape(it->json, strlen(it->json), ej, sizeof ej));
		free(it->json);
		free(it);
	}
	al->head = al->tail = NULL;
	al->queued = 0;
	pthread_mutex_unlock(&al->mu);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

/* Take up cfg->alert_webhook: the URL, and the thread the first time one
 * is set. Returns 0, or -1 with err. */
static int set_webhook(alert *al, const txhub_config *cfg, char *err, size_t errsz)
{
	char *url = *cfg->alert_webhook ? strdup(cfg->alert_webhook) : NULL;
	if (*cfg->alert_webhook && !url) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	pthread_mutex_lock(&al->mu);
	free(al->url);
	al->url = url;
	int start = url && !al->running;
	pthread_mutex_unlock(&al->mu);
	if (!start)
		return 0;
	if (pthread_create(&al->thread, NULL, run, al) != 0) {
		snprintf(err, errsz, "cannot start the alert thread: %s", strerror(errno));
		return -1;
	}
	pthread_mutex_lock(&al->mu);
	al->running = 1;
	pthread_mutex_unlock(&al->mu);
	return 0;
}

alert *alert_start(const txhub_config *cfg, char *err, size_t errsz)
{
	alert *al = calloc(1, sizeof *al);
	if (!al) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&al->mu, NULL);
	pthread_cond_init(&al->cv, NULL);
	if (set_webhook(al, cfg, err, errsz) != 0) {
		alert_stop(al, 0);
		return NULL;
	}
	return al;
}

void alert_reconfigure(alert *al, const txhub_config *cfg)
{
	char err[256];
	if (set_webhook(al, cfg, err, sizeof err) != 0)
		log_error("alert: taking up the new alert.webhook: %s", err);
}

static void utc_now(char *out, size_t outsz)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const alert_kind alert_kinds[ALERT_NKINDS] = {
	{"check_failed", "a message",
	 "the message became `check_failed`: `checkback.max_attempts` check-backs went "
	 "unanswered or undecided"},
	{"send_failed", "a message (`topic`: its forward topic)",
	 "a forward ended with `send_status` `failed` after `forward.max_attempts`"},
	{"prepare_missing", "a message",
	 "a decision has waited longer than `alert.awaiting_prepare_ms` (10 minutes) for its "
	 "prepare; once per message: such a row also counts as parked"},
	{"database_failing", "the hub",
	 "PostgreSQL has refused the hub's writes for `alert.database_failing_ms` (1 minute); "
	 "once per episode and kind of write"},
	{"kafka_fatal", "the hub",
	 "librdkafka failed for good: the consumer's (the hub stops, exit status 1, for its "
	 "supervisor to start it again), the forward producer's (replaced, what it held sent "
	 "again) or an `exactly_once` lane's (a new one starts)"},
	{"lane_stuck", "a control partition (`topic` when the broker refused a topic)",
	 "`forward.mode = exactly_once`: a lane has not taken its partition for "
	 "`alert.lane_stuck_ms` (1 minute); once per partition and episode; a refused topic is "
	 "typically an ACL: see [Kafka ACLs](kafka.md#kafka-acls)"},
	{"database_rewound", "the hub",
	 "PostgreSQL came back without its last transactions; once per loss, naming the "
	 "partitions and offsets read again ([When PostgreSQL fails "
	 "over](database.md#when-postgresql-fails-over))"},
	{"control_records_lost", "control-topic offsets (`topic`, `partition`, `from_offset`, "
	 "`to_offset`)",
	 "control records were gone from the broker before a hub read them; once per event "
	 "(see [Control records the broker "
	 "deleted](troubleshooting.md#control-records-the-broker-deleted))"},
	{"control_partition_truncated", "control-topic offsets (`topic`, `partition`, "
	 "`from_offset`, `to_offset`)",
	 "a control partition ends before where the hub stood (the topic deleted and made "
	 "again, or records lost in an unclean leader election); once per event "
	 "(see [Control records the broker "
	 "deleted](troubleshooting.md#control-records-the-broker-deleted))"},
	{"group_clash", "the control topic's partitions (`topic`: the control topic)",
	 "a hub of another consumer group works the same partitions and database; once per "
	 "episode (see [Running several replicas](running.md#running-several-replicas))"},
	{"database_mismatch", "the control topic's partitions (`topic`: the control topic)",
	 "a replica of this group works them against another database; once per episode (see "
	 "[Running several replicas](running.md#running-several-replicas))"},
	{"dead_letter_failed", "a message (the first row; `topic`: the dead-letter topic)",
	 "parked forwards cannot be produced to `forward.dead_letter_topic`; once per run of "
	 "failures (see [Dead-letter topic](troubleshooting.md#dead-letter-topic))"},
	{"tenant_rules_stale", "the hub",
	 "the tenant rules in force were last found current `alert.database_failing_ms` ago or "
	 "more, `txhub.tenants` unreadable or its rows not passing; the last good rules stay in "
	 "force; once until the table reads again (see "
	 "[Tenants](tenants.md#sharing-one-hub-between-teams))"},
	{"librdkafka_too_old", "the hub",
	 "the broker refused the hub's SASL/SCRAM login and its librdkafka is older than 2.6.1, "
	 "which Apache Kafka 4.x needs; once per run (see [Which "
	 "librdkafka](kafka.md#which-librdkafka))"},
};

/* What one alert says (alert_raise's arguments; offsets: NULL, or the
 * partition and offsets of alert_raise_offsets). */
typedef struct {
	const char *kind, *biz_id, *message_key, *topic, *last_error;
	int attempts;
	const alert_offsets *offsets;
	const char *trace_id; /* the message's trace id, or NULL */
} alert_what;

static void log_alert(const alert_what *w)
{
	char what[64], ee[1200], range[96] = "";
	snprintf(what, sizeof what, "ALERT %s", w->kind);
	log_about about = {w->biz_id, w->message_key,
	                   w->offsets && w->topic ? tp_of(w->topic, w->offsets->partition) : -1,
	                   w->trace_id};
	if (w->offsets)
		snprintf(range, sizeof range, " from_offset=%lld to_offset=%lld",
		         (long long)w->offsets->from, (long long)w->offsets->to);
	log_msg_about(LOG_ERROR, what, &about, "attempts=%d%s%s%s last_error=%s", w->attempts,
	              w->topic ? " topic=" : "", w->topic ? w->topic : "", range,
	              w->last_error ? log_printable(w->last_error, ee, sizeof ee) : "-");
}

/* The webhook's JSON body, or NULL when out of memory. The strings are
 * valid UTF-8: envelope fields were checked at intake, topics are Kafka
 * names, and last_error is our own text with outside bytes escaped. */
static char *alert_json(const alert_what *w)
{
	char at[32];
	utc_now(at, sizeof at);
	cJSON *o = cJSON_CreateObject();
	char *json = NULL;
	const alert_offsets *r = w->offsets;
	if (o && cJSON_AddStringToObject(o, "kind", w->kind) &&
	    (w->biz_id ? cJSON_AddStringToObject(o, "biz_id", w->biz_id)
	               : cJSON_AddNullToObject(o, "biz_id")) &&
	    (w->message_key ? cJSON_AddStringToObject(o, "message_key", w->message_key)
	                    : cJSON_AddNullToObject(o, "message_key")) &&
	    cJSON_AddNumberToObject(o, "attempts", w->attempts) &&
	    (!w->topic || cJSON_AddStringToObject(o, "topic", w->topic)) &&
	    (!r || (cJSON_AddNumberToObject(o, "partition", r->partition) &&
	            cJSON_AddNumberToObject(o, "from_offset", (double)r->from) &&
	            cJSON_AddNumberToObject(o, "to_offset", (double)r->to))) &&
	    (!w->trace_id || !*w->trace_id ||
	     cJSON_AddStringToObject(o, "trace_id", w->trace_id)) &&
	    (w->last_error ? cJSON_AddStringToObject(o, "last_error", w->last_error)
	                   : cJSON_AddNullToObject(o, "last_error")) &&
	    cJSON_AddStringToObject(o, "at", at))
		json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return json;
}

static void raise_alert(alert *al, const alert_what *w)
{
	metrics_alert(w->kind);
	log_alert(w);
	if (!al)
		return;
	pthread_mutex_lock(&al->mu);
	int webhook = al->running && al->url;
	pthread_mutex_unlock(&al->mu);
	if (!webhook)
		return;
	char *json = alert_json(w);
	item *it = json ? calloc(1, sizeof *it) : NULL;
	if (!it) {
		free(json);
		log_error("alert: out of memory; this alert is only in the log");
		return;
	}
	it->json = json;
	it->due_ms = clock_ms();
	pthread_mutex_lock(&al->mu);
	if (al->queued >= ALERT_QUEUE_MAX || al->stopping) {
		int stopping = al->stopping;
		pthread_mutex_unlock(&al->mu);
		char ej[1024];
		log_error("alert: %s; not sent to the webhook: %s",
		          stopping ? "stopping" : "queue full",
		          log_escape(json, strlen(json), ej, sizeof ej));
		free(json);
		free(it);
		return;
	}
	append(al, it);
	pthread_cond_signal(&al->cv);
	pthread_mutex_unlock(&al->mu);
}

void alert_raise(alert *al, const char *kind, const char *biz_id, const char *message_key,
                 int attempts, const char *topic, const char *last_error)
{
	alert_what w = {kind, biz_id, message_key, topic, last_error, attempts, NULL, NULL};
	raise_alert(al, &w);
}

void alert_raise_traced(alert *al, const char *kind, const char *biz_id,
                        const char *message_key, int attempts, const char *topic,
                        const char *last_error, const char *trace_id)
{
	alert_what w = {kind, biz_id, message_key, topic, last_error, attempts, NULL, trace_id};
	raise_alert(al, &w);
}

void alert_raise_offsets(alert *al, const char *kind, const char *topic,
                         const alert_offsets *offsets, const char *text)
{
	alert_what w = {kind, NULL, NULL, topic, text, 0, offsets, NULL};
	raise_alert(al, &w);
}

void alert_stop(alert *al, int wait_ms)
{
	if (!al)
		return;
	if (al->running) {
		pthread_mutex_lock(&al->mu);
		al->stopping = 1;
		al->give_up_at = clock_ms() + wait_ms;
		pthread_cond_signal(&al->cv);
		pthread_mutex_unlock(&al->mu);
		pthread_join(al->thread, NULL);
	}
	pthread_mutex_destroy(&al->mu);
	pthread_cond_destroy(&al->cv);
	free(al->url);
	free(al);
}
