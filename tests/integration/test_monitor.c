/* test_monitor.c: what a running hub shows outside (CONTRACT §10, §11):
 * /metrics counts what was sent and passes promtool; /healthz and /readyz,
 * the latter 503 while PostgreSQL is stopped; log.format = json; SIGHUP
 * with a good and a bad configuration file; the alert rules and the
 * dashboard in deploy/ name only what /metrics exports.
 *
 * The suite runs one test at a time: one of them stops PostgreSQL. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "httpd.h"

/* ---- HTTP and the exposition ---- */

typedef struct {
	char *data;
	size_t len;
} body;

static size_t on_data(char *p, size_t size, size_t n, void *opaque)
{
	body *b = opaque;
	b->data = realloc(b->data, b->len + size * n + 1);
	memcpy(b->data + b->len, p, size * n);
	b->len += size * n;
	b->data[b->len] = '\0';
	return size * n;
}

/* GET http://127.0.0.1:port/path; returns the status (0: no answer) and
 * the body in *out (caller frees). */
static long get(int port, const char *path, char **out)
{
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	body b = {calloc(1, 1), 0};
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	long code = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	*out = b.data;
	return code;
}

/* The value of the series written exactly as `series` (name and labels),
 * or -1 when absent. */
static double series(const char *text, const char *name)
{
	size_t l = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, name, l) == 0 && p[l] == ' ')
			return atof(p + l + 1);
	return -1;
}

static int wait_status(int port, const char *path, long want, int timeout_ms, char **last)
{
	for (int waited = 0;; waited += 200) {
		free(*last);
		*last = NULL;
		if (get(port, path, last) == want)
			return 1;
		if (waited >= timeout_ms)
			return 0;
		h_pause_ms(200);
	}
}

/* ---- a producer's check-back endpoint ---- */

static void answer(void *opaque, const h_http_request *r, h_http_answer *a)
{
	(void)opaque;
	char mk[300] = "";
	h_http_param(r, "message_key", mk, sizeof mk);
	a->status = 200;
	snprintf(a->body, sizeof a->body, "%s",
	         strncmp(mk, "cb-c", 4) == 0   ? "committed"
	         : strncmp(mk, "cb-r", 4) == 0 ? "rolled_back"
	                                       : "unknown");
}

static void send_json(h_env *e, const char *key, const char *fmt, const char *a, const char *b)
{
	char buf[1024];
	snprintf(buf, sizeof buf, fmt, a, b);
	h_send_str(e, -1, key, buf);
}

#define PREPARE "{\"type\":\"prepare\",\"biz_id\":\"m\",\"message_key\":\"%s\",\"payload\":\"p\"," \
                "\"forward\":{\"topic\":\"%s\"}}"
#define DECIDE "{\"type\":\"%s\",\"biz_id\":\"m\",\"message_key\":\"%s\"}"

/* The counters match what was sent: envelopes by type and outcome,
 * forwards, check-backs by outcome; the gauges match SQL; promtool accepts
 * the exposition. */
Test(monitor, metrics_count_what_was_sent, .timeout = 180)
{
	h_env e;
	h_setup(&e, "metrics");
	h_httpd *srv = h_httpd_start(answer, NULL);
	int port = h_free_port();
	char fwd[128], listen[64], cbdefault[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	snprintf(cbdefault, sizeof cbdefault, "checkback.default_url=http://127.0.0.1:%d/cb",
	         h_httpd_port(srv));
	const char *settings[] = {listen, cbdefault, "checkback.first_after_ms=500",
	                          "checkback.max_attempts=2", "checkback.backoff_ms=100", NULL};
	pid_t hub = h_hub_start(&e, settings);
	char key[64];
	for (int i = 0; i < 10; i++) { /* 10 committed */
		snprintf(key, sizeof key, "c-%d", i);
		send_json(&e, key, PREPARE, key, fwd);
		send_json(&e, key, DECIDE, "commit", key);
	}
	for (int i = 0; i < 4; i++) { /* 4 rolled back */
		snprintf(key, sizeof key, "r-%d", i);
		send_json(&e, key, PREPARE, key, fwd);
		send_json(&e, key, DECIDE, "rollback", key);
	}
	send_json(&e, "r-0", DECIDE, "commit", "r-0");   /* a conflict */
	send_json(&e, "c-0", DECIDE, "commit", "c-0");   /* a duplicate */
	h_send_str(&e, -1, "bad", "not json");           /* two invalid */
	h_send_str(&e, -1, "bad", "{\"type\":\"nope\"}");
	for (int i = 0; i < 3; i++) { /* check-backs: committed, rolled back, undecided */
		const char *kinds[] = {"cb-c", "cb-r", "cb-u"};
		snprintf(key, sizeof key, "%s-%d", kinds[i], i);
		send_json(&e, key, PREPARE, key, fwd);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "11",
	                 60000));
	cr_assert(h_wait(&e, "SELECT status FROM txhub.messages WHERE message_key = 'cb-u-2'",
	                 "check_failed", 60000));
	char *m = NULL;
	cr_assert_eq(get(port, "/metrics", &m), 200);
	struct {
		const char *name;
		double want;
	} want[] = {
		{"txhub_envelopes_total{type=\"prepare\",outcome=\"applied\"}", 17},
		{"txhub_envelopes_total{type=\"commit\",outcome=\"applied\"}", 10},
		{"txhub_envelopes_total{type=\"commit\",outcome=\"duplicate\"}", 1},
		{"txhub_envelopes_total{type=\"commit\",outcome=\"conflict\"}", 1},
		{"txhub_envelopes_total{type=\"rollback\",outcome=\"applied\"}", 4},
		{"txhub_envelopes_total{type=\"invalid\",outcome=\"rejected\"}", 2},
		{"txhub_forwards_total{outcome=\"sent\"}", 11},
		{"txhub_forwards_total{outcome=\"failed\"}", 0},
		{"txhub_checkbacks_total{outcome=\"committed\"}", 1},
		{"txhub_checkbacks_total{outcome=\"rolled_back\"}", 1},
		{"txhub_checkbacks_total{outcome=\"undecided\"}", 2},
		{"txhub_checkback_duration_seconds_count", 4},
		{"txhub_forward_duration_seconds_count", 11},
		{"txhub_commit_to_forward_seconds_count", 11},
		{"txhub_alerts_total{kind=\"check_failed\"}", 1},
		{"txhub_owned_partitions", 4},
		{"txhub_ready", 1},
		{"txhub_build_info{version=\"" TXHUB_VERSION "\"}", 1},
		{"txhub_messages{status=\"committed\"}", 11},
		{"txhub_messages{status=\"rolled_back\"}", 5},
		{"txhub_messages{status=\"check_failed\"}", 1},
		{"txhub_parked", 1},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		cr_expect_eq(series(m, want[i].name), want[i].want, "%s is %g, not %g", want[i].name,
		             series(m, want[i].name), want[i].want);
	cr_assert_gt(series(m, "process_resident_memory_bytes"), 1e6);
	cr_assert_geq(series(m, "process_cpu_seconds_total"), 0);
	cr_assert_geq(series(m, "txhub_batch_records_count"), 1);
	cr_assert(strstr(m, "txhub_consumer_lag{partition=\"0\"} "), "no lag for partition 0");
	/* promtool (Debian's prometheus, which deploy/dev.sh installs) checks
	 * the exposition */
	cr_assert_eq(system("command -v promtool >/dev/null 2>&1"), 0,
	             "promtool not found: apt-get install prometheus");
	char path[] = "/tmp/txhub-metrics-XXXXXX", cmd[256];
	int fd = mkstemp(path);
	cr_assert_eq(write(fd, m, strlen(m)), (ssize_t)strlen(m));
	close(fd);
	snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
	cr_expect_eq(system(cmd), 0, "promtool check metrics refused the exposition");
	unlink(path);
	free(m);
	/* the history of each check-back attempt and alert */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'cb-c-0' "
	                         "AND event = 'checkback' AND detail = 'attempt 1: committed'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'cb-r-1' "
	                         "AND event = 'checkback' AND detail = 'attempt 1: rolled back'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'cb-u-2' "
	                         "AND event = 'checkback' AND detail LIKE 'attempt _: not decided "
	                         "yet%'"), 2);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'cb-u-2' "
	                         "AND event = 'alert' AND detail LIKE 'check_failed after 2 %'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key LIKE 'c-%'"),
	             0, "ordinary steps got history rows");
	char *b = NULL;
	cr_assert_eq(get(port, "/healthz", &b), 200);
	free(b);
	cr_assert_eq(get(port, "/nothing", &b), 404);
	free(b);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);
	h_teardown(&e);
}

/* /readyz answers 503 with a reason while PostgreSQL is stopped and 200
 * again after; /healthz stays 200 (the loop goes on turning). */
Test(monitor, readyz_follows_postgresql, .timeout = 180)
{
	const char *ctl = getenv("TXHUB_TEST_PGCTL");
	cr_assert_not_null(ctl, "TXHUB_TEST_PGCTL is not set (tests/with-services.sh sets it)");
	h_env e;
	h_setup(&e, "ready");
	h_control_topic(&e);
	int port = h_free_port();
	char listen[64], cmd[600], *b = NULL;
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	const char *settings[] = {listen, NULL};
	pid_t hub = h_hub_start(&e, settings);
	cr_assert(wait_status(port, "/readyz", 200, 60000, &b), "not ready: %s", b);
	PQfinish(e.db); /* our own connection would not survive the stop */
	e.db = NULL;
	snprintf(cmd, sizeof cmd, "%s stop >/dev/null", ctl);
	cr_assert_eq(system(cmd), 0);
	int down = wait_status(port, "/readyz", 503, 20000, &b);
	char reason[512];
	snprintf(reason, sizeof reason, "%s", b ? b : "");
	free(b);
	b = NULL;
	long health = get(port, "/healthz", &b);
	snprintf(cmd, sizeof cmd, "%s start >/dev/null", ctl);
	cr_assert_eq(system(cmd), 0);
	cr_assert(down, "/readyz did not turn 503 with PostgreSQL stopped");
	cr_assert(strstr(reason, "PostgreSQL"), "reason: %s", reason);
	cr_assert_eq(health, 200, "/healthz failed while only PostgreSQL was away");
	cr_assert(wait_status(port, "/readyz", 200, 60000, &b), "not ready again: %s", b);
	free(b);
	e.db = PQconnectdb(e.conninfo);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* Every line of a hub with log.format = json is one JSON object with ts,
 * level and msg; lines about a record carry its partition, lines about a
 * message its ids. */
Test(monitor, json_log_lines, .timeout = 120)
{
	h_env e;
	h_setup(&e, "jsonlog");
	h_httpd *srv = h_httpd_start(answer, NULL);
	char fwd[128], cb[160], log[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(cb, sizeof cb, "checkback.default_url=http://127.0.0.1:%d/cb", h_httpd_port(srv));
	const char *settings[] = {"log.format=json", cb, "checkback.first_after_ms=100",
	                          "checkback.max_attempts=1", NULL};
	pid_t hub = h_hub_start(&e, settings);
	h_hub_log(log, sizeof log, &e);
	h_send_str(&e, 2, "bad", "not json");
	send_json(&e, "cb-u-\"q\"", PREPARE, "cb-u-\\\"q\\\"", fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT status FROM txhub.messages", "check_failed", 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	FILE *f = fopen(log, "r");
	cr_assert_not_null(f);
	char line[8192];
	int lines = 0, with_partition = 0, with_ids = 0;
	while (fgets(line, sizeof line, f)) {
		cJSON *o = cJSON_Parse(line);
		cr_assert_not_null(o, "not JSON: %s", line);
		cr_assert(cJSON_IsString(cJSON_GetObjectItem(o, "ts")) &&
		          cJSON_IsString(cJSON_GetObjectItem(o, "level")) &&
		          cJSON_IsString(cJSON_GetObjectItem(o, "msg")), "%s", line);
		const cJSON *p = cJSON_GetObjectItem(o, "partition");
		if (strstr(cJSON_GetObjectItem(o, "msg")->valuestring, "intake: rejected") &&
		    cJSON_IsNumber(p) && p->valueint == 2)
			with_partition++;
		const cJSON *k = cJSON_GetObjectItem(o, "message_key");
		if (cJSON_IsString(k) && strcmp(k->valuestring, "cb-u-\"q\"") == 0 &&
		    cJSON_IsString(cJSON_GetObjectItem(o, "biz_id")))
			with_ids++;
		cJSON_Delete(o);
		lines++;
	}
	fclose(f);
	cr_assert_gt(lines, 5);
	cr_assert_eq(with_partition, 1, "the rejected record's line has no partition field");
	cr_assert_geq(with_ids, 1, "no line carries the message's ids");
	h_httpd_stop(srv);
	h_teardown(&e);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* SIGHUP re-reads the file: a good one is applied (here the log format
 * and level), a key that cannot change while running is named and kept,
 * and a bad file leaves the running configuration as it was. */
Test(monitor, sighup_reloads_a_good_file_and_keeps_on_a_bad_one, .timeout = 120)
{
	h_env e;
	h_setup(&e, "hup");
	h_control_topic(&e);
	char path[256], log[256], fwd[128], text[512];
	snprintf(path, sizeof path, "/tmp/txhub-%s.conf", e.name);
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	write_file(path, "log.level = info\n");
	setenv("TXHUB_CONFIG", path, 1);
	pid_t hub = h_hub_start(&e, NULL);
	unsetenv("TXHUB_CONFIG");
	h_hub_log(log, sizeof log, &e);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions", "4", 60000));

	snprintf(text, sizeof text, "log.level = debug\nlog.format = json\nintake.batch_max = 7\n");
	write_file(path, text);
	kill(hub, SIGHUP);
	h_pause_ms(1500);
	cr_assert_eq(h_log_lines(log, "configuration reloaded"), 1);
	cr_assert_eq(h_log_lines(log, "\"level\":\"warn\",\"msg\":\"hub: SIGHUP: intake.batch_max changed"), 1,
	             "the fixed key was not named, or the format not applied");

	write_file(path, "log.level = loud\n");
	kill(hub, SIGHUP);
	h_pause_ms(1500);
	cr_assert_eq(h_log_lines(log, "the running configuration stays"), 1);
	cr_assert_geq(h_log_lines(log, "log.level: \\\"loud\\\""), 1, "the error does not name the key");
	write_file(path, "this is not a config file\n");
	kill(hub, SIGHUP);
	h_pause_ms(1500);
	cr_assert_eq(h_log_lines(log, "the running configuration stays"), 2);
	/* a directory in place of the file read as an empty file: every key
	 * went back to its default (text logs at info) */
	unlink(path);
	cr_assert_eq(mkdir(path, 0700), 0);
	kill(hub, SIGHUP);
	h_pause_ms(1500);
	cr_assert_eq(h_log_lines(log, "the running configuration stays"), 3,
	             "a directory was loaded as a configuration file");
	cr_assert_geq(h_log_lines(log, "is a directory"), 1);
	rmdir(path);
	/* a NUL cut the value: "log.level = debug\0garbage" read as debug */
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fwrite("log.level = warn\0x\n", 1, 20, f);
	fclose(f);
	kill(hub, SIGHUP);
	h_pause_ms(1500);
	cr_assert_eq(h_log_lines(log, "the running configuration stays"), 4,
	             "a value with a NUL byte was loaded");

	/* still working, still JSON at debug level */
	send_json(&e, "k", "{\"type\":\"commit\",\"biz_id\":\"m\",\"message_key\":\"%s\",\"payload\":1,"
	                   "\"forward\":{\"topic\":\"%s\"}}", "k", fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages", "sent", 30000));
	cr_assert_geq(h_log_lines(log, "\"level\":\"debug\""), 1);
	cr_assert_eq(waitpid(hub, NULL, WNOHANG), 0);
	cr_assert_eq(h_hub_stop(hub), 0);
	unlink(path);
	h_teardown(&e);
}

/* ---- the deployment files against a live /metrics ---- */

/* Copy the file src to dst with the first `from` replaced by `to` (which
 * must be there: a mutation that does not apply proves nothing). */
static void copy_with(const char *src, const char *dst, const char *from, const char *to)
{
	FILE *f = fopen(src, "r");
	cr_assert_not_null(f, "%s", src);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = '\0';
	char *at = strstr(text, from);
	cr_assert_not_null(at, "%s does not contain %s", src, from);
	f = fopen(dst, "w");
	cr_assert_not_null(f);
	fwrite(text, 1, (size_t)(at - text), f);
	fputs(to, f);
	fputs(at + strlen(from), f);
	fclose(f);
}

/* Run tests/deploy/check_names.py on the scrape in metrics and the files;
 * returns its exit status, its output in out. */
static int check_names(const char *metrics, const char *files, char *out, size_t outsz)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/deploy/check_names.py %s %s 2>&1",
	         TXHUB_SOURCE_ROOT, metrics, files);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, outsz - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Every metric, label and label value the alert rules and the Grafana
 * dashboard name is exported by a running hub (tests/deploy/check_names.py
 * against this hub's /metrics, after a commit and a check-back, with the
 * PostgreSQL gauges and the lag in it). A copy of each file with one name
 * wrong fails the same check: a metric, a label value, a label, a bare
 * histogram name. */
Test(monitor, deploy_files_name_only_exported_series, .timeout = 120)
{
	h_env e;
	h_setup(&e, "names");
	h_httpd *srv = h_httpd_start(answer, NULL);
	int port = h_free_port();
	char fwd[128], listen[64], cb[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	snprintf(cb, sizeof cb, "checkback.default_url=http://127.0.0.1:%d/cb", h_httpd_port(srv));
	const char *settings[] = {listen, cb, "checkback.first_after_ms=100", NULL};
	pid_t hub = h_hub_start(&e, settings);
	send_json(&e, "k-1", PREPARE, "k-1", fwd);
	send_json(&e, "k-1", DECIDE, "commit", "k-1");
	send_json(&e, "cb-c-1", PREPARE, "cb-c-1", fwd); /* checked back: committed */
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "2",
	                 60000));
	/* the gauges from PostgreSQL come with a scrape, the lag once a
	 * partition has been read */
	char *m = NULL;
	int complete = 0;
	for (int waited = 0; !complete && waited < 30000; waited += 500) {
		free(m);
		m = NULL;
		cr_assert_eq(get(port, "/metrics", &m), 200);
		complete = strstr(m, "\ntxhub_parked ") && strstr(m, "\ntxhub_consumer_lag{") &&
		           series(m, "txhub_checkbacks_total{outcome=\"committed\"}") == 1;
		if (!complete)
			h_pause_ms(500);
	}
	cr_assert(complete, "the scrape lacks the PostgreSQL gauges, the lag or the check-back:\n%s",
	          m);
	char metrics[] = "/tmp/txhub-names-XXXXXX";
	int fd = mkstemp(metrics);
	cr_assert_eq(write(fd, m, strlen(m)), (ssize_t)strlen(m));
	close(fd);
	free(m);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);

	char rules[256], dashboard[256], files[600], out[8192];
	snprintf(rules, sizeof rules, "%s/deploy/prometheus/txhub-alerts.yml", TXHUB_SOURCE_ROOT);
	snprintf(dashboard, sizeof dashboard, "%s/deploy/grafana/txhub-dashboard.json",
	         TXHUB_SOURCE_ROOT);
	snprintf(files, sizeof files, "%s %s", rules, dashboard);
	cr_assert_eq(check_names(metrics, files, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "txhub-alerts.yml: 11 expressions checked"), "%s", out);

	/* one name wrong at a time */
	struct {
		const char *file, *from, *to, *said;
	} wrong[] = {
		{rules, "(txhub_parked) > 0", "(txhub_parkd) > 0", "unknown metric txhub_parkd"},
		{rules, "outcome=\"error\"", "outcome=\"errors\"", "has no value \"errors\""},
		{dashboard, "by (type, outcome)", "by (type, outcom)", "label outcom is not"},
		{dashboard, "txhub_commit_to_forward_seconds_bucket", "txhub_commit_to_forward_seconds",
		 "unknown metric txhub_commit_to_forward_seconds\n"},
	};
	for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
		char copy[64];
		snprintf(copy, sizeof copy, "/tmp/txhub-names-%d-%zu%s", (int)getpid(), i,
		         strstr(wrong[i].file, ".json") ? ".json" : ".yml");
		copy_with(wrong[i].file, copy, wrong[i].from, wrong[i].to);
		cr_expect_eq(check_names(metrics, copy, out, sizeof out), 1, "%s -> %s passed:\n%s",
		             wrong[i].from, wrong[i].to, out);
		cr_expect(strstr(out, wrong[i].said), "%s -> %s: %s", wrong[i].from, wrong[i].to, out);
		unlink(copy);
	}
	unlink(metrics);
	h_teardown(&e);
}
