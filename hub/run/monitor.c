/* monitor.c: see monitor.h. */
#include "monitor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "store.h"

/* The gauges from PostgreSQL are read at most this often ... */
#define SAMPLE_EVERY_MS 10000
/* ... and a loop that has not turned for this long is not healthy. */
#define HEALTHY_TURN_MS 30000

struct monitor {
	http_server *http;
	_Atomic int64_t last_turn_ms;
	_Atomic int joined;

	pthread_mutex_t mu; /* guards what follows */
	const txhub_config *cfg;
	char problem[1200];
	store *st;          /* the sampler's connection, opened on first scrape */
	int64_t sampled_ms; /* when the gauges were last read */
};

static void set_text(http_reply *r, int status, const char *text)
{
	r->status = status;
	sbuf_puts(&r->body, text);
	sbuf_puts(&r->body, "\n");
}

static void on_healthz(void *opaque, const http_request *req, http_reply *reply)
{
	(void)req;
	monitor *m = opaque;
	int64_t age = clock_ms() - atomic_load(&m->last_turn_ms);
	if (age < HEALTHY_TURN_MS) {
		set_text(reply, 200, "ok");
		return;
	}
	reply->status = 503;
	sbuf_printf(&reply->body, "the run loop has not turned for %lld s\n", (long long)(age / 1000));
}

static void on_readyz(void *opaque, const http_request *req, http_reply *reply)
{
	(void)req;
	monitor *m = opaque;
	pthread_mutex_lock(&m->mu);
	if (!atomic_load(&m->joined) && m->problem[0]) {
		reply->status = 503;
		sbuf_printf(&reply->body, "the consumer has not joined its group yet; %s\n", m->problem);
	} else if (!atomic_load(&m->joined))
		set_text(reply, 503, "the consumer has not joined its group yet");
	else if (m->problem[0])
		set_text(reply, 503, m->problem);
	else
		set_text(reply, 200, "ready");
	pthread_mutex_unlock(&m->mu);
}

/* Read the gauges from PostgreSQL when the last reading is too old; on
 * failure the last values stay (and the failure is counted). Under m->mu. */
static void sample(monitor *m)
{
	int64_t now = clock_ms();
	if (m->sampled_ms && now - m->sampled_ms < SAMPLE_EVERY_MS)
		return;
	m->sampled_ms = now;
	char err[512];
	metrics_sample s;
	if (!m->st)
		m->st = store_connect(m->cfg, err, sizeof err);
	if (!m->st || store_ensure(m->st, err, sizeof err) != STORE_OK ||
	    store_sample(m->st, m->cfg->alert_awaiting_prepare_ms, &s, err, sizeof err) != STORE_OK) {
		metrics_database_error();
		log_debug("monitor: sampling PostgreSQL for /metrics: %s", err);
		return;
	}
	metrics_set_sample(&s);
}

static void on_metrics(void *opaque, const http_request *req, http_reply *reply)
{
	(void)req;
	monitor *m = opaque;
	pthread_mutex_lock(&m->mu);
	sample(m);
	pthread_mutex_unlock(&m->mu);
	reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
	metrics_write(&reply->body);
}

monitor *monitor_start(const txhub_config *cfg, char *err, size_t errsz)
{
	monitor *m = calloc(1, sizeof *m);
	if (!m) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&m->mu, NULL);
	m->cfg = config_hold(cfg);
	atomic_store(&m->last_turn_ms, clock_ms());
	if (!*cfg->http_listen)
		return m;
	http_route routes[] = {
		{"GET", "/metrics", on_metrics, m},
		{"GET", "/healthz", on_healthz, m},
		{"GET", "/readyz", on_readyz, m},
	};
	http_options o = {.max_connections = (unsigned)cfg->http_max_connections,
	                  .max_per_address = (unsigned)cfg->http_max_per_address,
	                  .request_timeout_ms = (unsigned)cfg->http_request_timeout_ms,
	                  .keys = "http"};
	char sub[512];
	if (!(m->http = http_start(cfg->http_listen, routes, 3, &o, sub, sizeof sub))) {
		snprintf(err, errsz, "http.listen: %s", sub);
		monitor_stop(m);
		return NULL;
	}
	log_info("monitor: serving /metrics, /healthz and /readyz on %s", cfg->http_listen);
	return m;
}

void monitor_stop(monitor *m)
{
	if (!m)
		return;
	http_stop(m->http);
	store_close(m->st);
	config_drop(m->cfg);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void monitor_reconfigure(monitor *m, const txhub_config *cfg)
{
	pthread_mutex_lock(&m->mu);
	const txhub_config *was = m->cfg; /* (read under mu only) */
	m->cfg = config_hold(cfg);
	pthread_mutex_unlock(&m->mu);
	config_drop(was);
}

void monitor_turn(monitor *m, int joined, const char *problem)
{
	atomic_store(&m->last_turn_ms, clock_ms());
	atomic_store(&m->joined, joined);
	int ready = joined && !*problem;
	metrics_set_ready(ready);
	if (strcmp(problem, m->problem) == 0) /* (only this thread writes it) */
		return;
	pthread_mutex_lock(&m->mu);
	snprintf(m->problem, sizeof m->problem, "%s", problem);
	pthread_mutex_unlock(&m->mu);
}
