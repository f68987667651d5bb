/* test_checkback.c: check-backs (docs/producers.md: Check-back) against a real HTTP server
 * that plays the producer's endpoint and the alert webhook: every kind of
 * answer, the retry limit, signatures, the allow list, decisions that beat
 * the check-back, 1,000 due at once under the concurrency limit, and
 * checkback.per_host: a storm against a deliberately small endpoint, rows
 * waiting for their host without timing out, the limit changed by SIGHUP. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "httpd.h"

#define WAIT_MS 60000
#define MAX_KEYS 1200
#define MAX_ALERTS 64

/* ---- the producer's endpoint, as the tests see it ---- */

typedef struct {
	char mk[128];
	int hits;
	int last_attempt;  /* X-Txhub-Attempt of the latest request */
	int attempts_ok;   /* every request's attempt was previous + 1 */
	int params_ok;     /* biz_id == bizID, message_key == messageKey */
	int signed_ok;     /* every request carried a valid signature */
	int unsigned_seen; /* a request came without signature headers */
	long long at_ms[4]; /* monotonic time of the first four requests */
} key_log;

typedef struct {
	pthread_mutex_t mu;
	key_log keys[MAX_KEYS];
	int nkeys;
	const char *secret;
	char alerts[MAX_ALERTS][1024];
	int nalerts;
	int alert_posts, alert_fail_first;
	int hold_ms; /* delay of /hold */
} producer;

static key_log *key_of(producer *p, const char *mk)
{
	for (int i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].mk, mk) == 0)
			return &p->keys[i];
	if (p->nkeys == MAX_KEYS)
		return NULL;
	key_log *k = &p->keys[p->nkeys++];
	memset(k, 0, sizeof *k);
	snprintf(k->mk, sizeof k->mk, "%s", mk);
	k->attempts_ok = k->params_ok = k->signed_ok = 1;
	return k;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The header value docs/producers.md: Check-back defines, computed here with OpenSSL rather
 * than with the hub's own txhub_checkback_signature(): "v2=" and the hex
 * HMAC-SHA256(secret, "<ts>\n<biz_id>\n<message_key>") of the timestamp
 * exactly as the header sent it. */
static const char *expected_signature(const char *secret, const char *ts, const char *biz,
                                      const char *mk)
{
	static __thread char out[3 + 64 + 1];
	char msg[1024];
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	int n = snprintf(msg, sizeof msg, "%s\n%s\n%s", ts, biz, mk);
	/* called on the server's threads: no Criterion assertions here */
	if (n <= 0 || (size_t)n >= sizeof msg ||
	    !HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)msg, (size_t)n, mac,
	          &len) || len != 32)
		return "(cannot compute)";
	memcpy(out, "v2=", 3);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 3 + 2 * i, 3, "%02x", mac[i]);
	return out;
}

static void answer(void *opaque, const h_http_request *r, h_http_answer *a)
{
	producer *p = opaque;
	if (strcmp(r->path, "/alert") == 0) {
		pthread_mutex_lock(&p->mu);
		int fail = p->alert_posts++ < p->alert_fail_first;
		if (!fail && p->nalerts < MAX_ALERTS)
			snprintf(p->alerts[p->nalerts++], sizeof p->alerts[0], "%s", r->body ? r->body : "");
		pthread_mutex_unlock(&p->mu);
		a->status = fail ? 500 : 200;
		return;
	}
	char biz[128] = "", mk[300] = "", biz2[128] = "", mk2[300] = "", att[16] = "";
	char ts[32] = "", sig[100] = "";
	h_http_param(r, "biz_id", biz, sizeof biz);
	h_http_param(r, "message_key", mk, sizeof mk);
	int params = h_http_param(r, "bizID", biz2, sizeof biz2) &&
	             h_http_param(r, "messageKey", mk2, sizeof mk2) && strcmp(biz, biz2) == 0 &&
	             strcmp(mk, mk2) == 0 && *biz && *mk && strcmp(r->method, "GET") == 0;
	h_http_header(r, "x-txhub-attempt", att, sizeof att);
	int has_ts = h_http_header(r, "x-txhub-timestamp", ts, sizeof ts);
	int has_sig = h_http_header(r, "x-txhub-signature", sig, sizeof sig);
	pthread_mutex_lock(&p->mu);
	key_log *k = key_of(p, mk);
	if (k) {
		if (k->hits < 4)
			k->at_ms[k->hits] = now_ms();
		k->hits++;
		if (atoi(att) != k->last_attempt + 1)
			k->attempts_ok = 0;
		k->last_attempt = atoi(att);
		if (!params)
			k->params_ok = 0;
		if (!has_ts && !has_sig)
			k->unsigned_seen = 1;
		if (p->secret) {
			long long t = atoll(ts);
			long long now = (long long)time(NULL);
			int ok = has_ts && has_sig && t > now - 60 && t <= now &&
			         strcmp(sig, expected_signature(p->secret, ts, biz, mk)) == 0;
			if (!ok)
				k->signed_ok = 0;
		}
	}
	int hold = p->hold_ms;
	pthread_mutex_unlock(&p->mu);

	const char *path = r->path;
	if (strncmp(path, "/ok/", 4) == 0) /* the allow-listed prefix */
		path += 3;
	static const struct {
		const char *path;
		const char *body;
	} plain[] = {
		{"/committed", "committed"},
		{"/commit", "commit\n"},
		{"/2", " 2 "},
		{"/json-committed", "{\"status\":\"committed\",\"order\":17}"},
		{"/json-2", "{\"status\":2}"},
		{"/rolled_back", "rolled_back"},
		{"/rollback", "rollback"},
		{"/3", "3"},
		{"/json-3", "{\"status\":3}"},
		{"/unknown", "unknown"},
		{"/prepared", "{\"status\":\"prepared\"}"},
		{"/1", "1"},
		{"/garbage", "<html>\x01\xff oops</html>"},
		{"/json-nostatus", "{\"state\":\"committed\"}"},
	};
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		if (strcmp(path, plain[i].path) == 0) {
			snprintf(a->body, sizeof a->body, "%s", plain[i].body);
			return;
		}
	}
	if (strcmp(path, "/500") == 0) {
		a->status = 500;
		snprintf(a->body, sizeof a->body, "committed"); /* the status decides, not the body */
	} else if (strcmp(path, "/slow") == 0) {
		a->delay_ms = 2000; /* the hub gives up after 500 ms */
		snprintf(a->body, sizeof a->body, "committed");
	} else if (strcmp(path, "/64k") == 0) {
		snprintf(a->body, sizeof a->body, "committed"); /* exactly the limit */
		a->pad_to = 65536;
	} else if (strcmp(path, "/big") == 0) {
		snprintf(a->body, sizeof a->body, "committed"); /* then 70,000 spaces */
		a->pad_to = 70000;
	} else if (strcmp(path, "/redirect") == 0) {
		a->status = 302;
		snprintf(a->location, sizeof a->location, "/committed");
	} else if (strcmp(path, "/hold") == 0) {
		a->delay_ms = hold;
		snprintf(a->body, sizeof a->body, "committed");
	} else if (strcmp(path, "/parity") == 0 || strcmp(path, "/parity-now") == 0) {
		a->delay_ms = strcmp(path, "/parity") == 0 ? 5 : 0;
		int n = atoi(strrchr(mk, '-') ? strrchr(mk, '-') + 1 : "0");
		snprintf(a->body, sizeof a->body, "%s", n % 2 == 0 ? "committed" : "rolled_back");
	} else {
		a->status = 404;
	}
}

static producer *producer_new(void)
{
	producer *p = calloc(1, sizeof *p);
	cr_assert_not_null(p);
	pthread_mutex_init(&p->mu, NULL);
	return p;
}

static key_log snapshot(producer *p, const char *mk)
{
	key_log k;
	memset(&k, 0, sizeof k);
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].mk, mk) == 0)
			k = p->keys[i];
	pthread_mutex_unlock(&p->mu);
	return k;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- helpers ---- */

static char sqlbuf[1024];

static const char *row(const char *what, const char *mk)
{
	snprintf(sqlbuf, sizeof sqlbuf, "SELECT %s FROM txhub.messages WHERE message_key = '%s'",
	         what, mk);
	return sqlbuf;
}

static void send_prepare(h_env *e, const char *mk, const char *url, const char *fwd)
{
	char buf[1024], cbk[512] = "";
	if (url)
		snprintf(cbk, sizeof cbk, ",\"checkback\":{\"url\":\"%s\"}", url);
	snprintf(buf, sizeof buf,
	         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"%s\","
	         "\"payload\":\"pay-%s\",\"forward\":{\"topic\":\"%s\"}%s}", mk, mk, fwd, cbk);
	h_send_str(e, -1, mk, buf);
}

static void send_decision(h_env *e, const char *type, const char *mk)
{
	char buf[512];
	snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"biz_id\":\"shop\",\"message_key\":\"%s\"}",
	         type, mk);
	h_send_str(e, -1, mk, buf);
}

/* Forwarded records on topic whose txhub-message-key is mk. */
static int forwards_of(h_record *r, size_t n, const char *mk)
{
	char want[300];
	snprintf(want, sizeof want, "txhub-message-key=%s\n", mk);
	int c = 0;
	for (size_t i = 0; i < n; i++)
		if (strstr(r[i].headers, want))
			c++;
	return c;
}

/* ---- the set-up most tests share ---- */

/* A fresh database, the producer's endpoint (and webhook) serving `answer`,
 * and a forward topic name of the test's own. */
typedef struct {
	h_env e;
	producer *p;
	h_httpd *srv;
	char fwd[128];
} fixture;

static void fx_setup(fixture *f, const char *name)
{
	h_setup(&f->e, name);
	f->p = producer_new();
	f->srv = h_httpd_start(answer, f->p);
	cr_assert_not_null(f->srv);
	snprintf(f->fwd, sizeof f->fwd, "fw.%s", f->e.name);
}

/* The endpoint's URL for path. */
static const char *fx_url(fixture *f, const char *path, char *out, size_t outsz)
{
	snprintf(out, outsz, "http://127.0.0.1:%d%s", h_httpd_port(f->srv), path);
	return out;
}

static void fx_teardown(fixture *f)
{
	h_httpd_stop(f->srv);
	h_teardown(&f->e);
	free(f->p);
}

/* ---- tests ---- */

typedef struct {
	const char *mk;
	const char *path; /* NULL: a port where nothing listens */
	const char *status;
	int hits;
	const char *error; /* a piece of last_error, or NULL */
} expect;

Test(checkback, every_answer_decides_its_message, .timeout = 240)
{
	fixture f;
	fx_setup(&f, "cbans");
	f.p->alert_fail_first = 2; /* the webhook fails twice: alerts are retried */
	int port = h_httpd_port(f.srv), dead = h_free_port();
	char webhook[128];
	snprintf(webhook, sizeof webhook, "alert.webhook=http://127.0.0.1:%d/alert", port);
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.backoff_ms=50",
	                          "checkback.backoff_max_ms=100", "checkback.max_attempts=3",
	                          "checkback.timeout_ms=500", webhook, NULL};

	static const expect cases[] = {
		{"c-plain", "/committed", "committed", 1, NULL},
		{"c-word", "/commit", "committed", 1, NULL},
		{"c-legacy", "/2", "committed", 1, NULL},
		{"c-json", "/json-committed", "committed", 1, NULL},
		{"c-json-num", "/json-2", "committed", 1, NULL},
		{"c-64k", "/64k", "committed", 1, NULL},
		{"odd key&=?/%+\xc3\xa9#x", "/committed", "committed", 1, NULL},
		{"r-plain", "/rolled_back", "rolled_back", 1, NULL},
		{"r-word", "/rollback", "rolled_back", 1, NULL},
		{"r-legacy", "/3", "rolled_back", 1, NULL},
		{"r-json-num", "/json-3", "rolled_back", 1, NULL},
		{"u-unknown", "/unknown", "check_failed", 3, "not decided yet"},
		{"u-prepared", "/prepared", "check_failed", 3, "not decided yet"},
		{"u-legacy", "/1", "check_failed", 3, "not decided yet"},
		{"e-500", "/500", "check_failed", 3, "HTTP 500"},
		{"e-garbage", "/garbage", "check_failed", 3, "unreadable answer: <html>\\x01\\xff"},
		{"e-nostatus", "/json-nostatus", "check_failed", 3, "no \"status\""},
		{"e-slow", "/slow", "check_failed", 3, "no answer within"},
		{"e-big", "/big", "check_failed", 3, "longer than 65536"},
		{"e-redirect", "/redirect", "check_failed", 3, "HTTP 302"},
		{"e-refused", NULL, "check_failed", 0, "onnect"},
	};
	size_t ncases = sizeof cases / sizeof cases[0];
	pid_t hub = h_hub_start(&f.e, settings);
	for (size_t i = 0; i < ncases; i++) {
		char url[256];
		if (cases[i].path)
			snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, cases[i].path);
		else
			snprintf(url, sizeof url, "http://127.0.0.1:%d/nobody", dead);
		send_prepare(&f.e, cases[i].mk, url, f.fwd);
	}
	h_flush();

	char buf[1024];
	for (size_t i = 0; i < ncases; i++) {
		const expect *c = &cases[i];
		cr_assert(h_wait(&f.e, row("status", c->mk), c->status, WAIT_MS), "%s: status %s, want %s",
		          c->mk, h_query(&f.e, row("status", c->mk), buf, sizeof buf), c->status);
		int want_attempts = strcmp(c->status, "check_failed") == 0 ? 3 : 1;
		cr_assert_eq(h_count(&f.e, row("check_attempts", c->mk)), want_attempts,
		             "%s: check_attempts", c->mk);
		key_log k = snapshot(f.p, c->mk);
		cr_assert_eq(k.hits, c->hits, "%s: asked %d times, want %d", c->mk, k.hits, c->hits);
		if (c->hits > 0) {
			cr_assert(k.params_ok, "%s: biz_id/message_key/bizID/messageKey wrong", c->mk);
			cr_assert(k.attempts_ok, "%s: X-Txhub-Attempt did not count 1, 2, 3", c->mk);
			cr_assert(k.unsigned_seen, "%s: no secret set, yet a signature was sent", c->mk);
		}
		if (c->error) {
			h_query(&f.e, row("last_error", c->mk), buf, sizeof buf);
			cr_assert(strstr(buf, c->error), "%s: last_error \"%s\" lacks \"%s\"", c->mk, buf,
			          c->error);
		}
		if (strcmp(c->status, "committed") == 0)
			cr_assert(h_wait(&f.e, row("send_status", c->mk), "sent", WAIT_MS), "%s: not sent",
			          c->mk);
		else
			cr_assert_str_eq(h_query(&f.e, row("send_status", c->mk), buf, sizeof buf), "NULL");
	}

	/* a check_failed message still takes a late decision */
	send_decision(&f.e, "commit", "u-unknown");
	h_flush();
	cr_assert(h_wait(&f.e, row("status || '/' || coalesce(send_status, '-')", "u-unknown"),
	                 "committed/sent", WAIT_MS));

	/* forwarded: each committed one, never a rolled-back or failed one */
	h_record *r;
	size_t n = h_read_topic(&f.e, f.fwd, 1500, &r);
	for (size_t i = 0; i < ncases; i++) {
		int f = forwards_of(r, n, cases[i].mk);
		if (strcmp(cases[i].status, "committed") == 0)
			cr_assert_geq(f, 1, "%s was not forwarded", cases[i].mk);
		else if (strcmp(cases[i].mk, "u-unknown") != 0)
			cr_assert_eq(f, 0, "%s was forwarded", cases[i].mk);
	}
	h_records_free(r, n);

	/* the webhook got one check_failed alert per failed message, despite
	 * failing its first two POSTs */
	size_t nfailed = 0;
	for (size_t i = 0; i < ncases; i++)
		nfailed += strcmp(cases[i].status, "check_failed") == 0;
	for (int waited = 0; waited < 30000; waited += 100) {
		pthread_mutex_lock(&f.p->mu);
		int got = f.p->nalerts;
		pthread_mutex_unlock(&f.p->mu);
		if ((size_t)got >= nfailed)
			break;
		sleep_ms(100);
	}
	pthread_mutex_lock(&f.p->mu);
	cr_assert_eq((size_t)f.p->nalerts, nfailed, "%d alerts, want %zu", f.p->nalerts, nfailed);
	for (size_t i = 0; i < ncases; i++) {
		if (strcmp(cases[i].status, "check_failed") != 0)
			continue;
		int found = 0;
		for (int j = 0; j < f.p->nalerts; j++) {
			cJSON *a = cJSON_Parse(f.p->alerts[j]);
			cr_assert_not_null(a, "alert is not JSON: %s", f.p->alerts[j]);
			const cJSON *kind = cJSON_GetObjectItem(a, "kind");
			const cJSON *mk = cJSON_GetObjectItem(a, "message_key");
			const cJSON *biz = cJSON_GetObjectItem(a, "biz_id");
			const cJSON *att = cJSON_GetObjectItem(a, "attempts");
			const cJSON *le = cJSON_GetObjectItem(a, "last_error");
			if (cJSON_IsString(mk) && strcmp(mk->valuestring, cases[i].mk) == 0) {
				found++;
				cr_assert_str_eq(kind->valuestring, "check_failed");
				cr_assert_str_eq(biz->valuestring, "shop");
				cr_assert_eq((int)att->valuedouble, 3);
				cr_assert(cJSON_IsString(le) && strstr(le->valuestring, cases[i].error),
				          "alert last_error: %s", f.p->alerts[j]);
			}
			cJSON_Delete(a);
		}
		cr_assert_eq(found, 1, "%s: %d alerts", cases[i].mk, found);
	}
	pthread_mutex_unlock(&f.p->mu);

	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, signature_verifies_with_the_secret, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbsig");
	f.p->secret = "correct horse battery staple";
	int port = h_httpd_port(f.srv);
	char url[128];
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.backoff_ms=50",
	                          "checkback.max_attempts=2",
	                          "checkback.secret=correct horse battery staple", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/committed", port);
	send_prepare(&f.e, "s-1", url, f.fwd);
	send_prepare(&f.e, "s 2/\xc3\xa9", url, f.fwd);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/unknown?tenant=7", port);
	send_prepare(&f.e, "s-3", url, f.fwd);
	h_flush();
	cr_assert(h_wait(&f.e, row("status", "s-1"), "committed", WAIT_MS));
	cr_assert(h_wait(&f.e, row("status", "s 2/\xc3\xa9"), "committed", WAIT_MS));
	cr_assert(h_wait(&f.e, row("status", "s-3"), "check_failed", WAIT_MS));
	const char *keys[] = {"s-1", "s 2/\xc3\xa9", "s-3"};
	for (int i = 0; i < 3; i++) {
		key_log k = snapshot(f.p, keys[i]);
		cr_assert_geq(k.hits, 1);
		cr_assert(k.signed_ok, "%s: a request's signature did not verify", keys[i]);
		cr_assert(!k.unsigned_seen, "%s: a request came unsigned", keys[i]);
		cr_assert(k.params_ok, "%s: parameters wrong (URL with its own query)", keys[i]);
	}
	cr_assert_eq(snapshot(f.p, "s-3").hits, 2);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, allow_list_and_missing_urls_are_never_requested, .timeout = 180)
{
	fixture f;
	fx_setup(&f, "cballow");
	int port = h_httpd_port(f.srv);
	char url[128], allow[128], def[128];
	snprintf(allow, sizeof allow, "checkback.allow=http://127.0.0.1:%d/ok", port);
	const char *settings[] = {"checkback.first_after_ms=0", allow, NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/committed", port);
	send_prepare(&f.e, "a-in", url, f.fwd);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/okay/committed", port);
	send_prepare(&f.e, "a-out", url, f.fwd);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/committed", port);
	send_prepare(&f.e, "a-out2", url, f.fwd);
	send_prepare(&f.e, "a-none", NULL, f.fwd);
	h_flush();
	cr_assert(h_wait(&f.e, row("status", "a-in"), "committed", WAIT_MS));
	cr_assert(h_wait(&f.e, row("status", "a-out"), "check_failed", WAIT_MS));
	cr_assert(h_wait(&f.e, row("status", "a-out2"), "check_failed", WAIT_MS));
	cr_assert(h_wait(&f.e, row("status", "a-none"), "check_failed", WAIT_MS));
	char buf[512];
	cr_assert(strstr(h_query(&f.e, row("last_error", "a-out"), buf, sizeof buf),
	                 "outside checkback.allow"), "%s", buf);
	cr_assert(strstr(h_query(&f.e, row("last_error", "a-none"), buf, sizeof buf),
	                 "no check-back URL"), "%s", buf);
	cr_assert_eq(h_count(&f.e, row("check_attempts", "a-out")), 0);
	cr_assert_eq(h_count(&f.e, row("check_attempts", "a-none")), 0);
	cr_assert_eq(snapshot(f.p, "a-in").hits, 1);
	cr_assert_eq(snapshot(f.p, "a-out").hits, 0, "a URL outside the allow list was requested");
	cr_assert_eq(snapshot(f.p, "a-out2").hits, 0, "a URL outside the allow list was requested");
	cr_assert_eq(h_hub_stop(hub), 0);

	/* with checkback.default_url, a prepare without a URL is asked there */
	snprintf(def, sizeof def, "checkback.default_url=http://127.0.0.1:%d/ok/rolled_back", port);
	const char *settings2[] = {"checkback.first_after_ms=0", allow, def, NULL};
	hub = h_hub_start(&f.e, settings2);
	send_prepare(&f.e, "a-default", NULL, f.fwd);
	h_flush();
	cr_assert(h_wait(&f.e, row("status", "a-default"), "rolled_back", WAIT_MS));
	cr_assert_eq(snapshot(f.p, "a-default").hits, 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

/* ---- crafted URLs against the allow list (docs/producers.md: Check-back) ---- */

#define MAX_TRICKS 64

/* An endpoint that records the path of every request, per message key, and
 * answers "committed" to anything: a request that got through where it must
 * not would show as a hit and as a committed message. */
typedef struct {
	pthread_mutex_t mu;
	char mk[MAX_TRICKS][32];
	char path[MAX_TRICKS][512]; /* the last path asked for that key */
	int hits[MAX_TRICKS];
	int nkeys;
	int outside_ok; /* requests for any path not /ok or under /ok/ */
} tracker;

static int under_ok(const char *path)
{
	return strcmp(path, "/ok") == 0 || strncmp(path, "/ok/", 4) == 0;
}

static void track(void *opaque, const h_http_request *r, h_http_answer *a)
{
	tracker *t = opaque;
	char mk[64] = "";
	h_http_param(r, "message_key", mk, sizeof mk);
	pthread_mutex_lock(&t->mu);
	int i = 0;
	while (i < t->nkeys && strcmp(t->mk[i], mk) != 0)
		i++;
	if (i == t->nkeys && t->nkeys < MAX_TRICKS)
		snprintf(t->mk[t->nkeys++], sizeof t->mk[0], "%s", mk);
	if (i < MAX_TRICKS) {
		t->hits[i]++;
		snprintf(t->path[i], sizeof t->path[0], "%s", r->path);
	}
	if (!under_ok(r->path))
		t->outside_ok++;
	pthread_mutex_unlock(&t->mu);
	if (strcmp(r->path, "/ok/redirect") == 0) {
		a->status = 302; /* to a path the list does not hold */
		snprintf(a->location, sizeof a->location, "/admin");
		return;
	}
	snprintf(a->body, sizeof a->body, "committed");
}

static int tracked_hits(tracker *t, const char *mk, char *path, size_t pathsz)
{
	int hits = 0;
	pthread_mutex_lock(&t->mu);
	for (int i = 0; i < t->nkeys; i++) {
		if (strcmp(t->mk[i], mk) == 0) {
			hits = t->hits[i];
			snprintf(path, pathsz, "%s", t->path[i]);
		}
	}
	pthread_mutex_unlock(&t->mu);
	return hits;
}

/* A prepare whose check-back URL is url, escaped for JSON (backslashes). */
static void send_prepare_raw_url(h_env *e, const char *mk, const char *url, const char *fwd)
{
	char esc[600], buf[1024];
	size_t o = 0;
	for (const char *p = url; *p && o + 2 < sizeof esc; p++) {
		if (*p == '\\' || *p == '"')
			esc[o++] = '\\';
		esc[o++] = *p;
	}
	esc[o] = '\0';
	snprintf(buf, sizeof buf,
	         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"%s\",\"payload\":\"p\","
	         "\"forward\":{\"topic\":\"%s\"},\"checkback\":{\"url\":\"%s\"}}", mk, fwd, esc);
	h_send_str(e, -1, mk, buf);
}

typedef struct {
	const char *url; /* %d is the endpoint's port */
	const char *path; /* the path the endpoint must see; NULL: never asked */
} trick;

Test(checkback, crafted_urls_never_leave_the_allow_list, .timeout = 180)
{
	static const trick tricks[] = {
		{"http://127.0.0.1:%d/ok/../admin", NULL},
		{"http://127.0.0.1:%d/ok/sub/../../admin", NULL},
		{"http://127.0.0.1:%d/ok/..", NULL},
		{"HTTP://127.0.0.1:%d/ok/../admin", NULL},
		{"http://127.0.0.1:%d/ok/%%2e%%2e/admin", NULL},
		{"http://127.0.0.1:%d/ok/%%2E%%2E/admin", NULL},
		{"http://127.0.0.1:%d/ok/%%2E./admin", NULL},
		{"http://127.0.0.1:%d/ok/.%%2e/admin", NULL},
		{"http://127.0.0.1:%d/ok/..;/admin", NULL},
		{"http://127.0.0.1:%d/ok%%2f..%%2fadmin", NULL},
		{"http://127.0.0.1:%d/ok/x%%2F..%%2F..%%2Fadmin", NULL},
		{"http://127.0.0.1:%d/ok/..%%5cadmin", NULL},
		{"http://127.0.0.1:%d/ok\\..\\admin", NULL},
		{"http://x@127.0.0.1:%d/ok/sub", NULL},
		{"http://127.0.0.1:%d/okay", NULL},
		{"http://2130706433:%d/ok/sub", NULL},
		{"http://0x7f000001:%d/ok/sub", NULL},
		{"http://0177.0.0.1:%d/ok/sub", NULL},
		{"http://127.1:%d/ok/sub", NULL},
		{"http://127.0.0.1.:%d/ok/sub", NULL},
		{"http://%%31%%32%%37.0.0.1:%d/ok/sub", NULL},
		{"http://[::ffff:127.0.0.1]:%d/ok/sub", NULL},
		/* inside: asked, at exactly the normalized path */
		{"http://127.0.0.1:%d/ok", "/ok"},
		{"http://127.0.0.1:%d/ok/sub", "/ok/sub"},
		{"http://127.0.0.1:%d/ok/x/../sub", "/ok/sub"},
		{"http://127.0.0.1:%d/ok/./sub/.", "/ok/sub/"},
		{"HTTP://127.0.0.1:%d/ok/sub", "/ok/sub"},
		{"http://127.0.0.1:%d/ok?@127.0.0.1/admin", "/ok"},
		{"http://127.0.0.1:%d/ok#@127.0.0.1/admin", "/ok"},
	};
	size_t n = sizeof tricks / sizeof tricks[0];
	fixture f;
	fx_setup(&f, "cbtrick");
	tracker *t = calloc(1, sizeof *t);
	cr_assert_not_null(t);
	pthread_mutex_init(&t->mu, NULL);
	h_httpd *srv = h_httpd_start(track, t);
	cr_assert_not_null(srv);
	int port = h_httpd_port(srv);
	char allow[128];
	snprintf(allow, sizeof allow, "checkback.allow=http://127.0.0.1:%d/ok", port);
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.backoff_ms=50",
	                          "checkback.max_attempts=2", allow, NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	for (size_t i = 0; i < n; i++) {
		char mk[32], url[256];
		snprintf(mk, sizeof mk, "t-%zu", i);
		snprintf(url, sizeof url, tricks[i].url, port);
		send_prepare_raw_url(&f.e, mk, url, f.fwd);
	}
	char rurl[256];
	snprintf(rurl, sizeof rurl, "http://127.0.0.1:%d/ok/redirect", port);
	send_prepare_raw_url(&f.e, "t-redirect", rurl, f.fwd);
	h_flush();

	char buf[512], path[512];
	for (size_t i = 0; i < n; i++) {
		char mk[32], url[256];
		snprintf(mk, sizeof mk, "t-%zu", i);
		snprintf(url, sizeof url, tricks[i].url, port);
		const char *want = tricks[i].path ? "committed" : "check_failed";
		cr_assert(h_wait(&f.e, row("status", mk), want, WAIT_MS), "%s: status %s, want %s",
		          url, h_query(&f.e, row("status", mk), buf, sizeof buf), want);
		int hits = tracked_hits(t, mk, path, sizeof path);
		if (!tricks[i].path) {
			cr_assert_eq(hits, 0, "%s was requested (path %s)", url, path);
			cr_assert_eq(h_count(&f.e, row("check_attempts", mk)), 0, "%s", url);
			h_query(&f.e, row("last_error", mk), buf, sizeof buf);
			cr_assert(strstr(buf, "outside checkback.allow"), "%s: last_error %s", url, buf);
		} else {
			cr_assert_eq(hits, 1, "%s: asked %d times", url, hits);
			cr_assert_str_eq(path, tricks[i].path, "%s: the endpoint saw %s", url, path);
		}
	}
	/* a redirect to a path outside the list is not followed */
	cr_assert(h_wait(&f.e, row("status", "t-redirect"), "check_failed", WAIT_MS));
	h_query(&f.e, row("last_error", "t-redirect"), buf, sizeof buf);
	cr_assert(strstr(buf, "HTTP 302"), "last_error %s", buf);
	cr_assert_eq(tracked_hits(t, "t-redirect", path, sizeof path), 2);
	pthread_mutex_lock(&t->mu);
	int escaped = t->outside_ok;
	pthread_mutex_unlock(&t->mu);
	cr_assert_eq(escaped, 0, "%d requests reached a path outside /ok", escaped);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);
	pthread_mutex_destroy(&t->mu);
	free(t);
	fx_teardown(&f);
}

Test(checkback, a_decision_before_the_due_time_means_no_check_back, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbearly");
	char url[128];
	fx_url(&f, "/rolled_back", url, sizeof url);
	const char *settings[] = {"checkback.first_after_ms=1500", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	send_prepare(&f.e, "d-commit", url, f.fwd);
	send_prepare(&f.e, "d-rollback", url, f.fwd);
	send_prepare(&f.e, "d-late", url, f.fwd); /* nobody decides this one */
	send_decision(&f.e, "commit", "d-commit");
	send_decision(&f.e, "rollback", "d-rollback");
	h_flush();
	cr_assert(h_wait(&f.e, row("status", "d-late"), "rolled_back", WAIT_MS));
	sleep_ms(2000); /* well past the due time of all three */
	cr_assert_str_eq(h_query(&f.e, row("status", "d-commit"), url, sizeof url), "committed");
	cr_assert_str_eq(h_query(&f.e, row("status", "d-rollback"), url, sizeof url), "rolled_back");
	cr_assert_eq(snapshot(f.p, "d-commit").hits, 0, "a committed prepare was checked back");
	cr_assert_eq(snapshot(f.p, "d-rollback").hits, 0, "a rolled-back prepare was checked back");
	cr_assert_eq(snapshot(f.p, "d-late").hits, 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, a_decision_during_the_check_back_wins, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbrace");
	f.p->hold_ms = 2500; /* answers "committed", late */
	char url[128];
	fx_url(&f, "/hold", url, sizeof url);
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.timeout_ms=10000", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	send_prepare(&f.e, "race-1", url, f.fwd);
	h_flush();
	for (int waited = 0; snapshot(f.p, "race-1").hits == 0 && waited < WAIT_MS; waited += 20)
		sleep_ms(20);
	cr_assert_eq(snapshot(f.p, "race-1").hits, 1, "the check-back never came");
	send_decision(&f.e, "rollback", "race-1"); /* while the producer thinks */
	h_flush();
	cr_assert(h_wait(&f.e, row("status", "race-1"), "rolled_back", WAIT_MS));
	sleep_ms(3500); /* the "committed" answer has arrived by now */
	char buf[256];
	cr_assert_str_eq(h_query(&f.e, row("status || '/' || coalesce(send_status, '-')", "race-1"),
	                         buf, sizeof buf), "rolled_back/-");
	cr_assert_eq(h_count(&f.e, row("check_attempts", "race-1")), 0,
	             "the late answer was written over the decision");
	h_record *r;
	size_t n = h_read_topic(&f.e, f.fwd, 1000, &r);
	cr_assert_eq(n, 0, "a rolled-back message was forwarded");
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, a_thousand_due_at_once_stay_within_the_concurrency, .timeout = 300)
{
	fixture f;
	fx_setup(&f, "cbmany");
	char url[128];
	fx_url(&f, "/parity", url, sizeof url);
	/* all stored before the first falls due */
	const char *settings[] = {"checkback.first_after_ms=3000", "checkback.concurrency=8", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	for (int i = 0; i < 1000; i++) {
		char mk[32];
		snprintf(mk, sizeof mk, "m-%d", i);
		send_prepare(&f.e, mk, url, f.fwd);
	}
	h_flush();
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages WHERE status <> 'prepared'",
	                 "1000", 120000), "not every message was decided");
	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed'"), 500);
	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back'"), 500);
	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.messages WHERE check_attempts <> 1"), 0);
	long max = h_httpd_max_in_flight(f.srv);
	cr_assert_leq(max, 8, "%ld requests in flight at once, over checkback.concurrency", max);
	cr_assert_geq(max, 2, "requests were not made in parallel");
	cr_assert_eq(h_httpd_requests(f.srv), 1000, "each prepare asked once");
	/* connections are kept and reused, not one per request */
	long conns = h_httpd_connections(f.srv);
	cr_assert_leq(conns, 16, "%ld connections for 1000 requests", conns);
	pthread_mutex_lock(&f.p->mu);
	cr_assert_eq(f.p->nkeys, 1000);
	for (int i = 0; i < f.p->nkeys; i++)
		cr_assert_eq(f.p->keys[i].hits, 1, "%s asked %d times", f.p->keys[i].mk, f.p->keys[i].hits);
	pthread_mutex_unlock(&f.p->mu);
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "500",
	                 WAIT_MS));
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

/* Issue 11: a storm of check-backs due at once against the smallest
 * endpoint a producer may run (one thread, listen backlog 5, HTTP/1.0 and
 * Connection: close, answering at once). Every message is decided as the
 * endpoint answered, at the first attempt: the hub never has more than
 * checkback.per_host connections open to it, so its accept queue (6 on
 * Linux) never overflows and no SYN waits a second to be resent, which a
 * time-out of 1 s would count as the producer's failure. */
Test(checkback, a_storm_of_check_backs_does_not_overwhelm_a_small_endpoint, .timeout = 300)
{
	h_env e;
	h_setup(&e, "cbstorm");
	producer *p = producer_new();
	h_httpd *srv = h_httpd_start_small(answer, p, 5);
	cr_assert_not_null(srv);
	char url[128], fwd[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/parity-now", h_httpd_port(srv));
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	/* not due on their own: the test makes all 1,000 due at one moment.
	 * per_host 5 fits the accept queue (6) even when the server thread is
	 * not scheduled; the default 8 can overflow it once, at the first burst */
	const char *settings[] = {"checkback.first_after_ms=3600000", "checkback.timeout_ms=1000",
	                          "checkback.max_attempts=3", "checkback.backoff_ms=200",
	                          "checkback.backoff_max_ms=1000", "checkback.per_host=5", NULL};
	pid_t hub = h_hub_start(&e, settings);
	for (int i = 0; i < 1000; i++) {
		char mk[32];
		snprintf(mk, sizeof mk, "st-%d", i);
		send_prepare(&e, mk, url, fwd);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared'", "1000",
	                 WAIT_MS), "not every prepare was stored");
	char buf[64];
	h_query(&e, "UPDATE txhub.messages SET next_check_at = now() RETURNING 1", buf, sizeof buf);
	long long due = now_ms();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status <> 'prepared'", "1000",
	                 120000), "not every message was decided");
	long long took = now_ms() - due;
	long failed = h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'check_failed'");
	long retried = h_count(&e, "SELECT count(*) FROM txhub.messages WHERE check_attempts <> 1");
	long conns = h_httpd_max_connections(srv), requests = h_httpd_requests(srv);
	cr_log_info("storm: decided in %lld ms: %ld requests, %ld messages check_failed, %ld asked "
	            "more than once, at most %ld connections at once", took, requests, failed,
	            retried, conns);
	cr_assert_eq(failed, 0, "%ld messages check_failed whose producer answered at once", failed);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status <> CASE WHEN "
	                         "split_part(message_key, '-', 2)::int % 2 = 0 THEN 'committed' "
	                         "ELSE 'rolled_back' END"), 0, "a message decided against its answer");
	cr_assert_eq(retried, 0, "%ld messages needed another attempt", retried);
	cr_assert_eq(requests, 1000, "each prepare asked once");
	cr_assert_leq(conns, 5, "%ld connections at once, over checkback.per_host", conns);
	cr_assert_geq(conns, 2, "requests were not made in parallel");
	cr_assert_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);
	free(p);
	h_teardown(&e);
}

/* Rows claimed beyond checkback.per_host wait for a connection to their
 * host, and their time-out starts only with their request: 20 due at once,
 * two at a time, each answered after 300 ms, all answered at the first
 * attempt although the last starts 2.7 s after the claim, beyond the 1 s
 * time-out (libcurl's own per-host queue counts the wait in the time-out).
 * Two kept-alive connections carry all 20. */
Test(checkback, a_row_waiting_for_its_host_does_not_time_out, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbqueue");
	f.p->hold_ms = 300;
	char url[128];
	fx_url(&f, "/hold", url, sizeof url);
	const char *settings[] = {"checkback.first_after_ms=3600000", "checkback.timeout_ms=1000",
	                          "checkback.max_attempts=1", "checkback.per_host=2",
	                          "checkback.concurrency=20", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	for (int i = 0; i < 20; i++) {
		char mk[32];
		snprintf(mk, sizeof mk, "q-%d", i);
		send_prepare(&f.e, mk, url, f.fwd);
	}
	h_flush();
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages", "20", WAIT_MS));
	char buf[64];
	h_query(&f.e, "UPDATE txhub.messages SET next_check_at = now() RETURNING 1", buf, sizeof buf);
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages WHERE status <> 'prepared'", "20",
	                 WAIT_MS));
	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                           "AND check_attempts = 1"), 20, "a waiting row timed out");
	cr_assert_eq(h_httpd_max_in_flight(f.srv), 2);
	cr_assert_eq(h_httpd_requests(f.srv), 20);
	long conns = h_httpd_connections(f.srv);
	cr_log_info("queue: 20 requests on %ld connections", conns);
	cr_assert_leq(conns, 2, "%ld connections for 20 requests, 2 at a time", conns);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* checkback.per_host is live: SIGHUP raises it for rows already waiting. */
Test(checkback, sighup_applies_per_host, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbhup");
	f.p->hold_ms = 200;
	char url[128], path[256], log[256];
	fx_url(&f, "/hold", url, sizeof url);
	snprintf(path, sizeof path, "/tmp/txhub-%s.conf", f.e.name);
	write_file(path, "checkback.per_host = 1\n");
	setenv("TXHUB_CONFIG", path, 1);
	const char *settings[] = {"checkback.first_after_ms=3600000", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	unsetenv("TXHUB_CONFIG");
	h_hub_log(log, sizeof log, &f.e);
	for (int i = 0; i < 30; i++) {
		char mk[32];
		snprintf(mk, sizeof mk, "hup-%d", i);
		send_prepare(&f.e, mk, url, f.fwd);
	}
	h_flush();
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages", "30", WAIT_MS));
	char buf[64];
	h_query(&f.e, "UPDATE txhub.messages SET next_check_at = now() RETURNING 1", buf, sizeof buf);
	for (int waited = 0; h_httpd_requests(f.srv) < 3 && waited < WAIT_MS; waited += 20)
		h_pause_ms(20);
	cr_assert_eq(h_httpd_max_in_flight(f.srv), 1, "over checkback.per_host = 1");
	write_file(path, "checkback.per_host = 4\n");
	kill(hub, SIGHUP);
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed'", "30",
	                 WAIT_MS));
	cr_assert_eq(h_log_lines(log, "configuration reloaded"), 1);
	cr_assert_eq(h_httpd_max_in_flight(f.srv), 4, "checkback.per_host = 4 not taken up");
	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.messages WHERE check_attempts <> 1"), 0);
	cr_assert_eq(h_hub_stop(hub), 0);
	unlink(path);
	fx_teardown(&f);
}

/* The Python example order service (examples/python/order_service.py, on
 * the txhub package) answers truthfully: a service that died after its
 * local transaction committed is "committed"; one that died before it is
 * fenced off and "rolled_back", and can no longer commit afterwards. */
static char example_args[8][160]; /* --pg ... --checkback-url for every run */

static int run_example(const char *const *tail, int want_pipe, pid_t *child)
{
	char script[512], pypath[512];
	snprintf(script, sizeof script, "%s/examples/python/order_service.py", TXHUB_SOURCE_ROOT);
	snprintf(pypath, sizeof pypath, "%s/clients/python/src", TXHUB_SOURCE_ROOT);
	const char *argv[24] = {"python3", script};
	int n = 2;
	for (int i = 0; i < 8 && example_args[i][0]; i++)
		argv[n++] = example_args[i];
	for (; *tail && n < 23; tail++)
		argv[n++] = *tail;
	argv[n] = NULL;
	int out[2];
	cr_assert_eq(pipe(out), 0);
	/* set here, not in the child: nothing that may allocate between fork
	 * and exec (another thread may hold the allocator's lock) */
	setenv("PYTHONPATH", pypath, 1);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out[1], 1);
		close(out[0]);
		execv("/usr/bin/python3", (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	if (want_pipe) {
		*child = pid;
		return out[0];
	}
	close(out[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(checkback, the_example_endpoint_answers_truthfully, .timeout = 120)
{
	h_env e;
	h_setup(&e, "cbexample");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	const char *base[] = {"--pg", e.conninfo, "--brokers", e.brokers, "--control-topic", e.topic,
	                      "--forward-topic", fwd};
	for (int i = 0; i < 8; i++)
		snprintf(example_args[i], sizeof example_args[i], "%s", base[i]);
	const char *serve[] = {"serve", "--port", "0", "--secret", "s3cret", NULL};
	pid_t ep;
	FILE *f = fdopen(run_example(serve, 1, &ep), "r");
	char line[128] = "", url[160];
	int port = 0;
	cr_assert(fgets(line, sizeof line, f) && sscanf(line, "listening on %d", &port) == 1,
	          "the example endpoint did not start: %s", line);
	snprintf(url, sizeof url, "--checkback-url=http://127.0.0.1:%d/txhub/check", port);
	const char *ex1[] = {url, "order", "ex-1", "--crash", "before-commit", NULL};
	const char *ex2[] = {url, "order", "ex-2", "--crash", "after-prepare", NULL};
	cr_assert_eq(run_example(ex1, 0, NULL), 3, "the example did not prepare and commit locally");
	cr_assert_eq(run_example(ex2, 0, NULL), 3, "the example did not prepare");
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.secret=s3cret",
	                          "checkback.max_attempts=2", "checkback.backoff_ms=100", NULL};
	pid_t hub = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, row("status || '/' || coalesce(send_status, '-')", "ex-1"),
	                 "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, row("status", "ex-2"), "rolled_back", WAIT_MS));
	/* the producer's late business transaction is refused */
	const char *late[] = {url, "order", "ex-2", NULL};
	cr_assert_eq(run_example(late, 0, NULL), 1, "a fenced transaction committed after all");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM orders"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	kill(ep, SIGTERM);
	waitpid(ep, NULL, 0);
	fclose(f);
	h_teardown(&e);
}

/* A hub stopped with a check-back in flight gives the message back: the
 * next hub asks again at once, and the dropped request is not counted. */
Test(checkback, a_request_in_flight_at_shutdown_is_asked_again, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbstop");
	f.p->hold_ms = 4000;
	char url[128];
	fx_url(&f, "/hold", url, sizeof url);
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.timeout_ms=60000", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	send_prepare(&f.e, "stop-1", url, f.fwd);
	h_flush();
	for (int waited = 0; snapshot(f.p, "stop-1").hits == 0 && waited < WAIT_MS; waited += 20)
		sleep_ms(20);
	cr_assert_eq(snapshot(f.p, "stop-1").hits, 1, "the check-back never came");
	cr_assert_eq(h_hub_stop(hub), 0);
	/* given back: due now (not leased for 90 s), attempt not counted */
	cr_assert_str_eq(h_query(&f.e, row("status || '/' || check_attempts || '/' || "
	                                 "(next_check_at <= now())", "stop-1"), url, sizeof url),
	                 "prepared/0/true");
	pthread_mutex_lock(&f.p->mu);
	f.p->hold_ms = 0;
	pthread_mutex_unlock(&f.p->mu);
	hub = h_hub_start(&f.e, settings);
	cr_assert(h_wait(&f.e, row("status || '/' || check_attempts", "stop-1"), "committed/1", WAIT_MS));
	cr_assert_eq(snapshot(f.p, "stop-1").hits, 2);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, an_answer_to_an_older_attempt_is_dropped, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbstale");
	f.p->hold_ms = 2500; /* answers "committed", late */
	char url[128];
	fx_url(&f, "/hold", url, sizeof url);
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.timeout_ms=10000", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	send_prepare(&f.e, "stale-1", url, f.fwd);
	h_flush();
	for (int waited = 0; snapshot(f.p, "stale-1").hits == 0 && waited < WAIT_MS; waited += 20)
		sleep_ms(20);
	cr_assert_eq(snapshot(f.p, "stale-1").hits, 1, "the check-back never came");
	/* meanwhile another replica (its lease having run out) asked again and
	 * recorded "not decided" as attempt 1 */
	char buf[256];
	h_query(&f.e, "UPDATE txhub.messages SET check_attempts = 1, last_error = 'other replica', "
	            "next_check_at = now() + interval '1 hour' WHERE message_key = 'stale-1' "
	            "RETURNING 1", buf, sizeof buf);
	sleep_ms(3500); /* the late "committed" to the first attempt has arrived by now */
	cr_assert_str_eq(h_query(&f.e, row("status || '/' || check_attempts || '/' || "
	                                 "coalesce(send_status, '-')", "stale-1"), buf, sizeof buf),
	                 "prepared/1/-", "an answer to an older attempt was written");
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, retries_wait_for_the_backoff, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbbackoff");
	char url[128];
	fx_url(&f, "/unknown", url, sizeof url);
	/* delays of 800..1000 ms, then 1600..2000 ms (20 % jitter below nominal) */
	const char *settings[] = {"checkback.first_after_ms=0", "checkback.backoff_ms=1000",
	                          "checkback.backoff_max_ms=10000", "checkback.max_attempts=3",
	                          NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	send_prepare(&f.e, "slowly", url, f.fwd);
	h_flush();
	cr_assert(h_wait(&f.e, row("status", "slowly"), "check_failed", WAIT_MS));
	key_log k = snapshot(f.p, "slowly");
	cr_assert_eq(k.hits, 3);
	long long gap1 = k.at_ms[1] - k.at_ms[0], gap2 = k.at_ms[2] - k.at_ms[1];
	cr_assert_geq(gap1, 750, "second attempt %lld ms after the first, want >= 800", gap1);
	cr_assert_geq(gap2, 1550, "third attempt %lld ms after the second, want >= 1600", gap2);
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}

Test(checkback, only_rows_of_owned_partitions_are_asked, .timeout = 120)
{
	fixture f;
	fx_setup(&f, "cbowned");
	char url[128], buf[256];
	fx_url(&f, "/committed", url, sizeof url);
	const char *settings[] = {"checkback.first_after_ms=3000", NULL};
	pid_t hub = h_hub_start(&f.e, settings);
	send_prepare(&f.e, "own-mine", url, f.fwd);
	send_prepare(&f.e, "own-theirs", url, f.fwd);
	h_flush();
	cr_assert(h_wait(&f.e, "SELECT count(*) FROM txhub.messages", "2", WAIT_MS));
	/* before it falls due, make one row belong to a partition this replica
	 * does not own (as if another replica's intake had stored it) */
	h_query(&f.e, "UPDATE txhub.messages SET src_partition = 999 "
	            "WHERE message_key = 'own-theirs' AND status = 'prepared' "
	            "AND next_check_at > now() + interval '1 second' RETURNING 1", buf, sizeof buf);
	cr_assert_str_eq(buf, "1", "the prepare fell due before the test could move it");
	cr_assert(h_wait(&f.e, row("status", "own-mine"), "committed", WAIT_MS));
	sleep_ms(2000); /* several more scans */
	cr_assert_eq(snapshot(f.p, "own-theirs").hits, 0, "a row of a partition owned elsewhere was asked");
	cr_assert_str_eq(h_query(&f.e, row("status || '/' || check_attempts", "own-theirs"), buf,
	                         sizeof buf), "prepared/0");
	cr_assert_eq(h_hub_stop(hub), 0);
	fx_teardown(&f);
}
