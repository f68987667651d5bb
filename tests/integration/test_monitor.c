/* test_monitor.c: what a running hub shows outside (docs/monitoring.md: Metrics
 * and health, and Logs): /metrics counts what was sent and passes promtool;
 * /healthz and /readyz, the latter 503 while PostgreSQL is stopped; log.format
 * = json; SIGHUP with a good and a bad configuration file; the alert rules and
 * the dashboard in deploy/ name only what /metrics exports; http.listen against
 * idle, slow and malformed clients over raw sockets (rawhttp.h).
 *
 * The suite runs one test at a time: one of them stops PostgreSQL. */
#include <criterion/criterion.h>
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
#include "rawhttp.h"

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
	/* the lag is published once a second, for the partitions whose position
	 * and high watermark the consumer knows: waited for */
	char *m = NULL, lag0[300];
	snprintf(lag0, sizeof lag0, "txhub_consumer_lag{topic=\"%s\",partition=\"0\"} ", e.topic);
	for (int waited = 0;; waited += 200) {
		cr_assert_eq(h_http_get(port, "/metrics", &m), 200);
		if (strstr(m, lag0) || waited >= 30000)
			break;
		free(m);
		h_pause_ms(200);
	}
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
		cr_expect_eq(h_series(m, want[i].name), want[i].want, "%s is %g, not %g", want[i].name,
		             h_series(m, want[i].name), want[i].want);
	cr_assert_gt(h_series(m, "process_resident_memory_bytes"), 1e6);
	cr_assert_geq(h_series(m, "process_cpu_seconds_total"), 0);
	cr_assert_geq(h_series(m, "txhub_batch_records_count"), 1);
	cr_assert(strstr(m, lag0), "no lag for partition 0 within 30 s");
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
	cr_assert_eq(h_http_get(port, "/healthz", &b), 200);
	free(b);
	cr_assert_eq(h_http_get(port, "/nothing", &b), 404);
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
	cr_assert(h_http_wait(port, "/readyz", 200, 60000, &b), "not ready: %s", b);
	PQfinish(e.db); /* our own connection would not survive the stop */
	e.db = NULL;
	snprintf(cmd, sizeof cmd, "%s stop >/dev/null", ctl);
	cr_assert_eq(system(cmd), 0);
	int down = h_http_wait(port, "/readyz", 503, 20000, &b);
	char reason[512];
	snprintf(reason, sizeof reason, "%s", b ? b : "");
	free(b);
	b = NULL;
	long health = h_http_get(port, "/healthz", &b);
	snprintf(cmd, sizeof cmd, "%s start >/dev/null", ctl);
	cr_assert_eq(system(cmd), 0);
	cr_assert(down, "/readyz did not turn 503 with PostgreSQL stopped");
	cr_assert(strstr(reason, "PostgreSQL"), "reason: %s", reason);
	cr_assert_eq(health, 200, "/healthz failed while only PostgreSQL was away");
	cr_assert(h_http_wait(port, "/readyz", 200, 60000, &b), "not ready again: %s", b);
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

/* Wait until the hub at log has answered n SIGHUPs (each loads the
 * configuration or says that the running one stays). */
static void wait_reloads(const char *path, long n)
{
	for (int waited = 0; h_log_lines(path, "configuration reloaded") +
	                         h_log_lines(path, "the running configuration stays") < n &&
	                     waited < 20000;
	     waited += 50)
		h_pause_ms(50);
}

/* A hub reading its configuration from the file path (written with text
 * first), its log's path into log and its forward topic's name into fwd,
 * once it owns the 4 partitions. */
static pid_t file_hub(h_env *e, const char *name, const char *text, char *path, size_t pathsz,
                      char *log, size_t logsz, char *fwd, size_t fwdsz)
{
	h_setup(e, name);
	h_control_topic(e);
	snprintf(path, pathsz, "/tmp/txhub-%s.conf", e->name);
	snprintf(fwd, fwdsz, "%s.out", e->topic);
	write_file(path, text);
	setenv("TXHUB_CONFIG", path, 1);
	pid_t hub = h_hub_start(e, NULL);
	unsetenv("TXHUB_CONFIG");
	h_hub_log(log, logsz, e);
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.partitions", "4", 60000));
	return hub;
}

/* SIGHUP re-reads the file: a good one is applied (here the log format
 * and level), a key that cannot change while running is named and kept,
 * and a bad file leaves the running configuration as it was. */
Test(monitor, sighup_reloads_a_good_file_and_keeps_on_a_bad_one, .timeout = 120)
{
	h_env e;
	char path[256], log[256], fwd[128], text[512];
	pid_t hub = file_hub(&e, "hup", "log.level = info\n", path, sizeof path, log, sizeof log, fwd,
	                     sizeof fwd);

	snprintf(text, sizeof text, "log.level = debug\nlog.format = json\nintake.batch_max = 7\n");
	write_file(path, text);
	kill(hub, SIGHUP);
	wait_reloads(log, 1);
	cr_assert_eq(h_log_lines(log, "configuration reloaded"), 1);
	cr_assert_eq(h_log_lines(log, "\"level\":\"warn\",\"msg\":\"hub: SIGHUP: intake.batch_max changed"), 1,
	             "the fixed key was not named, or the format not applied");

	write_file(path, "log.level = loud\n");
	kill(hub, SIGHUP);
	wait_reloads(log, 2);
	cr_assert_eq(h_log_lines(log, "the running configuration stays"), 1);
	cr_assert_geq(h_log_lines(log, "log.level: \\\"loud\\\""), 1, "the error does not name the key");
	write_file(path, "this is not a config file\n");
	kill(hub, SIGHUP);
	wait_reloads(log, 3);
	cr_assert_eq(h_log_lines(log, "the running configuration stays"), 2);
	/* a directory in place of the file read as an empty file: every key
	 * went back to its default (text logs at info) */
	unlink(path);
	cr_assert_eq(mkdir(path, 0700), 0);
	kill(hub, SIGHUP);
	wait_reloads(log, 4);
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
	wait_reloads(log, 5);
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

/* A configuration a reload replaced is freed once no part holds it any
 * more (the loop, the forwarder, the intake, the check-back thread, the
 * HTTP server's threads, each with a reference of its own), not kept
 * until the hub exits; the one in force is freed at the exit, and the
 * hub keeps working through them all. */
Test(monitor, a_replaced_configuration_is_freed, .timeout = 120)
{
	h_env e;
	char path[256], log[256], fwd[128], text[256];
	pid_t hub = file_hub(&e, "hupfree", "log.level = debug\n", path, sizeof path, log, sizeof log,
	                     fwd, sizeof fwd);
	const char *freed = "a configuration a reload replaced is freed";
	for (long i = 1; i <= 3; i++) {
		snprintf(text, sizeof text, "log.level = debug\ncheckback.timeout_ms = %ld\n",
		         4000 + i);
		write_file(path, text);
		kill(hub, SIGHUP);
		cr_assert_eq(h_wait_log_lines(log, "configuration reloaded", i, 20000), i);
	}
	/* the start-up one is main()'s; those of reloads 1 and 2 are replaced */
	cr_assert_eq(h_wait_log_lines(log, freed, 2, 20000), 2, "a replaced configuration is kept");
	send_json(&e, "k", "{\"type\":\"commit\",\"biz_id\":\"m\",\"message_key\":\"%s\",\"payload\":1,"
	                   "\"forward\":{\"topic\":\"%s\"}}", "k", fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages", "sent", 30000));
	cr_assert_eq(h_log_lines(log, freed), 2, "the configuration in force was freed");
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_log_lines(log, freed), 3, "the configuration in force was not freed at exit");
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
		cr_assert_eq(h_http_get(port, "/metrics", &m), 200);
		complete = strstr(m, "\ntxhub_parked ") && strstr(m, "\ntxhub_consumer_lag{") &&
		           h_series(m, "txhub_checkbacks_total{outcome=\"committed\"}") == 1;
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
	cr_assert(strstr(out, "txhub-alerts.yml: 15 expressions checked"), "%s", out);

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

/* ---- idle, slow and ambiguous clients (http.listen) ---- */

/* GET path from 127.0.0.2, another client address than the flood's. */
static void probe(int port, const char *path, h_raw_reply *r)
{
	char req[256];
	int n = snprintf(req, sizeof req,
	                 "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", path,
	                 port);
	cr_assert_eq(h_raw_request("127.0.0.2", port, req, (size_t)n, 3000, r), 0);
}

/* A hub with http.listen on a port of its own, ready (/readyz 200); its
 * log's path into log. */
static pid_t ready_hub(h_env *e, const char *name, int *port, char *log, size_t logsz)
{
	static char listen[64];
	char *b = NULL;
	h_setup(e, name);
	h_control_topic(e);
	*port = h_free_port();
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", *port);
	const char *settings[] = {listen, NULL};
	pid_t hub = h_hub_start(e, settings);
	h_hub_log(log, logsz, e);
	cr_assert(h_http_wait(*port, "/readyz", 200, 60000, &b), "not ready: %s", b);
	free(b);
	return hub;
}

/* One address holds 300 idle and 200 trickling connections (opening again
 * every one the hub closes); /healthz and /readyz still answer another
 * address within 1 s, for 5 s. What was refused is logged as one line
 * with a count, not a line per connection. At the defaults. */
Test(monitor, probes_answer_while_one_address_floods, .timeout = 120)
{
	h_env e;
	int port;
	char log[256], line[1024];
	pid_t hub = ready_hub(&e, "flood", &port, log, sizeof log);
	h_flood *f = h_flood_start("127.0.0.1", port, 300, 200, 500, 20000);
	cr_assert_not_null(f, "the open-file limit cannot hold 500 connections");
	for (int round = 0; round < 5; round++) {
		const char *paths[] = {"/healthz", "/readyz"};
		for (int i = 0; i < 2; i++) {
			h_raw_reply r;
			probe(port, paths[i], &r);
			cr_expect_eq(h_raw_status(&r), 200, "round %d: %s answered %.100s", round, paths[i],
			             r.len ? r.data : "nothing");
			cr_expect(r.first_ms >= 0 && r.first_ms <= 1000, "round %d: %s took %ld ms", round,
			          paths[i], r.first_ms);
		}
		h_pause_ms(1000);
	}
	h_flood_stats st;
	h_flood_stop(f, &st);
	cr_expect_gt(st.opened, 1000, "the flood opened only %ld connections", st.opened);
	long lines = h_log_first(log, "connections refused at http.max_connections_per_address (16)",
	                         line, sizeof line);
	long refused = 0;
	cr_expect_eq(lines, 1, "%ld lines on refused connections in %s", lines, log);
	cr_expect(sscanf(strstr(line, "http.listen: ") ? strstr(line, "http.listen: ") : "",
	                 "http.listen: %ld connections", &refused) == 1 && refused > 0,
	          "no count: %s", line);
	cr_expect_eq(h_log_lines(log, "connection limit"), 0, "libmicrohttpd's line per connection");
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* A request must be in within http.request_timeout_ms (5 s by default),
 * however steadily its bytes come: a head sent a byte every 200 ms is cut,
 * and so is a connection that sends nothing. */
Test(monitor, a_request_has_a_deadline, .timeout = 120)
{
	h_env e;
	int port;
	char log[256], head[128];
	pid_t hub = ready_hub(&e, "deadline", &port, log, sizeof log);
	snprintf(head, sizeof head, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: ", port);
	long cut = h_raw_trickle("127.0.0.2", port, head, 200, 9000);
	cr_expect(cut >= 4000 && cut <= 6500, "a trickled head was cut after %ld ms (-1: never)", cut);
	h_raw_reply r;
	cr_assert_eq(h_raw_request("127.0.0.2", port, "", 0, 9000, &r), 0);
	cr_expect(r.closed && r.closed_ms >= 4000 && r.closed_ms <= 6500,
	          "an idle connection was closed after %ld ms (-1: never)", r.closed_ms);
	probe(port, "/healthz", &r);
	cr_expect_eq(h_raw_status(&r), 200, "%s", r.data);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* A request whose body's length could be read two ways is answered 400
 * and its connection closed, GET and POST alike. */
Test(monitor, ambiguous_lengths_are_refused, .timeout = 120)
{
	h_env e;
	int port;
	char log[256];
	pid_t hub = ready_hub(&e, "lengths", &port, log, sizeof log);
	h_raw_expect_length_refusals(port, "GET", "/healthz", "");
	h_raw_expect_length_refusals(port, "POST", "/metrics", "");
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* An HTTP/1.1 request without Host is answered 400 and closed
 * (libmicrohttpd's strict mode); the library's own lines about such
 * requests are 10 a minute at most, the rest counted in the listener's
 * once-a-minute line. */
Test(monitor, library_lines_are_bounded, .timeout = 120)
{
	h_env e;
	int port;
	char log[256], line[1024];
	pid_t hub = ready_hub(&e, "liblines", &port, log, sizeof log);
	static const char no_host[] = "GET /healthz HTTP/1.1\r\n\r\n";
	for (int i = 0; i < 30; i++) {
		h_raw_reply r;
		cr_assert_eq(h_raw_request("127.0.0.2", port, no_host, sizeof no_host - 1, 2000, &r), 0);
		cr_expect(h_raw_status(&r) == 400 && r.closed, "request %d: %.100s", i, r.data);
	}
	h_pause_ms(500);
	long library = h_log_lines(log, "warn  http: ");
	cr_expect(library >= 1 && library <= 10, "%ld lines of libmicrohttpd's", library);
	long left = 0;
	cr_expect_eq(h_log_first(log, "messages of libmicrohttpd not logged", line, sizeof line), 1);
	const char *at = strstr(line, "open at once, ");
	cr_expect(at && sscanf(at, "open at once, %ld messages", &left) == 1 && left > 0,
	          "no count: %s", line);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}
