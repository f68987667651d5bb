/* test_bench.c: `txhub bench` against the test services. A short clean run
 * reports every JSON field and nothing lost; a run with no hub is reported
 * lossy; records injected into the forward topic are counted as duplicated
 * and wrong. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"

/* Start `txhub bench ARGS` for e; its standard output goes to out, its
 * standard error to err. */
static pid_t bench_start(h_env *e, const char *const *args, const char *out, const char *err)
{
	const char *bin = getenv("TXHUB_BIN");
	cr_assert_not_null(bin);
	char pg[600], topic[200], group[200], brokers[300];
	snprintf(pg, sizeof pg, "pg=%s", e->conninfo);
	snprintf(topic, sizeof topic, "control_topic=%s", e->topic);
	snprintf(group, sizeof group, "group=%s", e->name);
	snprintf(brokers, sizeof brokers, "brokers=%s", e->brokers);
	const char *argv[64] = {bin, "bench", "-X", pg, "-X", topic, "-X", group, "-X", brokers,
	                        "-X", "kafka.session.timeout.ms=6000", "-X",
	                        "kafka.heartbeat.interval.ms=500"};
	int n = 14;
	for (; *args && n < 62; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int x = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(o, 1);
		dup2(x, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static int bench_wait(pid_t pid)
{
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The JSON line the bench printed. */
static cJSON *result(const char *out)
{
	FILE *f = fopen(out, "r");
	cr_assert_not_null(f);
	char line[8192] = "";
	cr_assert_not_null(fgets(line, sizeof line, f), "no output");
	fclose(f);
	cJSON *j = cJSON_Parse(line);
	cr_assert_not_null(j, "not JSON: %s", line);
	return j;
}

static double num(const cJSON *j, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(j, name);
	cr_assert(cJSON_IsNumber(v), "%s is not a number", name);
	return v->valuedouble;
}

/* Transaction i is rolled back when (i * 37) % 100 < pct (bench.c). */
static int committed_of(int count, int pct)
{
	int c = 0;
	for (int i = 0; i < count; i++)
		c += (i * 37) % 100 >= pct;
	return c;
}

Test(bench, a_clean_run_reports_every_field, .timeout = 240)
{
	h_env e;
	h_setup(&e, "bench");
	char out[256], err[256], log[256];
	snprintf(out, sizeof out, "/tmp/txhub-%s.out", e.name);
	snprintf(err, sizeof err, "/tmp/txhub-%s.err", e.name);
	snprintf(log, sizeof log, "/tmp/txhub-%s-hub.log", e.name);
	const char *args[] = {"--start-hub", "--hub-log", log, "--count", "300", "--rate", "300",
	                      "--ceiling-tx", "300", "--warmup", "0", NULL};
	cr_assert_eq(bench_wait(bench_start(&e, args, out, err)), 0, "see %s", err);
	cJSON *j = result(out);
	cr_assert_eq(num(j, "transactions"), 300);
	cr_assert_eq(num(j, "committed"), committed_of(300, 10));
	cr_assert_eq(num(j, "rolled_back"), 300 - committed_of(300, 10));
	cr_assert_eq(num(j, "lost"), 0);
	cr_assert_eq(num(j, "wrong"), 0);
	cr_assert_eq(num(j, "duplicated"), 0);
	cr_assert_eq(num(j, "broker_deleted"), 0);
	cr_assert_eq(num(j, "rate_target"), 300);
	cr_assert_gt(num(j, "tx_per_s"), 0);
	const cJSON *l = cJSON_GetObjectItem(j, "latency_ms");
	double p50 = num(l, "p50"), p95 = num(l, "p95"), p99 = num(l, "p99"), max = num(l, "max");
	cr_assert(p50 > 0 && p50 <= p95 && p95 <= p99 && p99 <= max, "%g %g %g %g", p50, p95, p99,
	          max);
	cr_assert_eq(num(l, "measured"), committed_of(300, 10), "no warm-up: every commit timed");
	cr_assert_geq(num(j, "hub_cpu_s"), 0);
	cr_assert_gt(num(j, "hub_peak_rss_mib"), 1);
	cr_assert_gt(num(j, "ceiling_pg_tx_per_s"), 0);
	cr_assert_gt(num(j, "ceiling_kafka_tx_per_s"), 0);
	/* tx/s over the lower ceiling, to two decimals: a slow broker (the
	 * embedded one forwards in ~0.7 s) makes it round to 0.00, never null */
	double lower = num(j, "ceiling_pg_tx_per_s") < num(j, "ceiling_kafka_tx_per_s")
	                       ? num(j, "ceiling_pg_tx_per_s")
	                       : num(j, "ceiling_kafka_tx_per_s");
	double ratio = num(j, "ratio_to_ceiling");
	cr_assert(ratio >= 0 && ratio - num(j, "tx_per_s") / lower < 0.006 &&
	              num(j, "tx_per_s") / lower - ratio < 0.006,
	          "ratio_to_ceiling %g for %g tx/s and a ceiling of %g", ratio, num(j, "tx_per_s"), lower);
	cr_assert_str_eq(cJSON_GetObjectItem(j, "mode")->valuestring, "rate");
	cJSON_Delete(j);
	/* the ceiling's rows are gone again */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE biz_id LIKE "
	                         "'bench-ceiling-%'"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'bench'"), 300);
	h_teardown(&e);
}

/* With no hub nothing is forwarded: every committed transaction is lost,
 * and the exit status says so. */
Test(bench, a_run_with_no_hub_is_reported_lossy, .timeout = 120)
{
	h_env e;
	h_setup(&e, "benchlost");
	char out[256], err[256];
	snprintf(out, sizeof out, "/tmp/txhub-%s.out", e.name);
	snprintf(err, sizeof err, "/tmp/txhub-%s.err", e.name);
	const char *args[] = {"--count", "50", "--no-ceilings", "--drain", "3", NULL};
	cr_assert_eq(bench_wait(bench_start(&e, args, out, err)), 1);
	cJSON *j = result(out);
	cr_assert_eq(num(j, "lost"), committed_of(50, 10));
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "tx_per_s")));
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "ceiling_pg_tx_per_s")));
	cJSON_Delete(j);
	h_teardown(&e);
}

/* The embedded broker keeps about 5 MiB a partition: when it deletes
 * records of the run from the control topic, the result says how many, so
 * a "lost" verdict is not taken for the hub's. (Apache Kafka keeps them.) */
Test(bench, records_the_broker_deleted_are_reported, .timeout = 120)
{
	if (h_real_kafka())
		cr_skip_test("Apache Kafka's retention keeps this run's records");
	h_env e;
	h_setup(&e, "benchdel");
	char out[256], err[256];
	snprintf(out, sizeof out, "/tmp/txhub-%s.out", e.name);
	snprintf(err, sizeof err, "/tmp/txhub-%s.err", e.name);
	/* 300 prepares of 100 kB on 4 partitions: about 7.5 MB each */
	const char *args[] = {"--count", "300", "--payload", "100000", "--no-ceilings",
	                      "--drain", "2", NULL};
	cr_assert_eq(bench_wait(bench_start(&e, args, out, err)), 1);
	cJSON *j = result(out);
	cr_assert_eq(num(j, "lost"), committed_of(300, 10));
	double deleted = num(j, "broker_deleted");
	cr_assert(deleted > 0 && deleted < 600, "broker_deleted %g", deleted);
	cJSON_Delete(j);
	FILE *f = fopen(err, "r");
	cr_assert_not_null(f);
	char line[1024];
	int said = 0;
	while (fgets(line, sizeof line, f))
		said |= strstr(line, "the broker deleted") != NULL;
	fclose(f);
	cr_assert(said, "stderr does not say the broker deleted records (see %s)", err);
	h_teardown(&e);
}

static void inject(h_env *e, const char *topic, const char *message_key)
{
	char es[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "bootstrap.servers", e->brokers, es, sizeof es);
	rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(p, "%s", es);
	rd_kafka_headers_t *h = rd_kafka_headers_new(2);
	rd_kafka_header_add(h, "txhub-biz-id", -1, "bench", -1);
	rd_kafka_header_add(h, "txhub-message-key", -1, message_key, -1);
	cr_assert_eq(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE("x", 1),
	                               RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END), 0);
	cr_assert_eq(rd_kafka_flush(p, 10000), 0);
	rd_kafka_destroy(p);
}

/* A second forward of a committed transaction is a duplicate (a failure
 * with --exactly-once); a forward of a rolled-back one is wrong. */
Test(bench, injected_forwards_are_counted_duplicated_and_wrong, .timeout = 240)
{
	h_env e;
	h_setup(&e, "benchdup");
	char out[256], err[256], log[256], fwd[200], run[32];
	snprintf(out, sizeof out, "/tmp/txhub-%s.out", e.name);
	snprintf(err, sizeof err, "/tmp/txhub-%s.err", e.name);
	snprintf(log, sizeof log, "/tmp/txhub-%s-hub.log", e.name);
	snprintf(fwd, sizeof fwd, "%s.bench", e.topic);
	snprintf(run, sizeof run, "dup%d", (int)getpid());
	const char *args[] = {"--start-hub", "--hub-log", log, "--count", "400", "--rate", "50",
	                      "--no-ceilings", "--exactly-once", "--run-id", run, NULL};
	pid_t pid = bench_start(&e, args, out, err);
	/* transaction 1 commits, transaction 0 rolls back (pct 10) */
	char one[64], zero[64];
	snprintf(one, sizeof one, "bench-%s-1", run);
	snprintf(zero, sizeof zero, "bench-%s-0", run);
	cr_assert(h_wait(&e, "SELECT count(*) > 100 FROM txhub.messages WHERE biz_id = 'bench'", "t",
	                 120000), "the bench did not get going");
	inject(&e, fwd, one);
	inject(&e, fwd, zero);
	cr_assert_eq(bench_wait(pid), 1, "a duplicate under --exactly-once must fail the run");
	cJSON *j = result(out);
	cr_assert_eq(num(j, "duplicated"), 1);
	cr_assert_eq(num(j, "wrong"), 1);
	cr_assert_eq(num(j, "lost"), 0);
	cJSON_Delete(j);
	h_teardown(&e);
}
