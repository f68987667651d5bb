/* bench.c: see bench.h.
 *
 * Transaction i has the message key "bench-<run>-<i>"; whether it is rolled
 * back is a function of i alone (rolled_back()), so the verifier needs no
 * list. The generator writes each commit's time into an array the verifier
 * reads when the forward arrives. */
#include "bench.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_int.h"
#include "clock.h"
#include "forward.h"
#include "kafka.h"
#include "signals.h"
#include "store.h"

/* ---- options ---- */

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: txhub bench [--count N] [--rate TX_PER_S] [--rollback PCT] [--payload BYTES]\n"
	        "                   [--keys N] [--partitions N] [--forward-topic NAME]\n"
	        "                   [--delayed PCT [--delay-ms MS]]\n"
	        "                   [--start-hub [--preload] [--hub-log FILE] [--hub-binary FILE]\n"
	        "                    | --hub-pid PID]\n"
	        "                   [--no-ceilings] [--ceiling-tx N] [--drain SECONDS]\n"
	        "                   [--exactly-once] [--tenants N [--no-enforce]] [--run-id ID]\n"
	        "                   [-c FILE] [-X key=value]...\n"
	        "\n"
	        "  --count N          transactions (prepare, then commit or rollback); 10000\n"
	        "  --rate N           transactions per second, open loop; default flat out\n"
	        "  --rollback PCT     share rolled back; 10\n"
	        "  --payload BYTES    payload size; 200\n"
	        "  --keys N           distinct control-record keys; default one per transaction\n"
	        "  --delayed PCT      share of prepares with forward.delay_ms (delayed delivery); 0\n"
	        "  --delay-ms MS      their delay; 1000. Their lateness (forward consumed minus commit\n"
	        "                     produced minus the delay) is reported apart from the latency\n"
	        "  --partitions N     partitions of the topics it creates; 4\n"
	        "  --tenants N        define tenants bench-0..bench-<N-1> in txhub.tenants (replacing\n"
	        "                     earlier bench-* ones): bench-0 owns the control topic, the\n"
	        "                     bench's biz ids and forward topic, each other one a control\n"
	        "                     topic, biz prefix and forward topic of its own; the hub it\n"
	        "                     starts runs with tenants.enforce=true (--no-enforce: false)\n"
	        "  --forward-topic T  where the forwards go; <control_topic>.bench\n"
	        "  --start-hub        start `txhub run` with the same -c/-X, stop it at the end\n"
	        "  --preload          with --start-hub: produce everything first, then start the\n"
	        "                     hub and time it draining (no latency then)\n"
	        "  --hub-log FILE     the started hub's log; /tmp/txhub-bench-hub.log\n"
	        "  --hub-binary FILE  the txhub that --start-hub runs (another version, to\n"
	        "                     compare it with the same bench); default this one\n"
	        "  --hub-pid PID      a running hub to report the CPU and peak memory of\n"
	        "  --no-ceilings      skip measuring PostgreSQL and Kafka alone\n"
	        "  --ceiling-tx N     transactions per ceiling; min(count, 50000)\n"
	        "  --drain SECONDS    how long to wait for forwards after the last commit; 60\n"
	        "  --warmup SECONDS   commits of the first seconds are verified but left out of\n"
	        "                     the latency figures (clients starting up); 2\n"
	        "  --exactly-once     a duplicate forward is a failure too\n"
	        "  --run-id ID        [a-z0-9] in every message key; default from time and pid\n"
	        "\n"
	        "Progress goes to standard error, the result is one JSON line on standard output.\n"
	        "Exit status: 0 nothing lost or wrong, 1 something lost or wrong, 2 bad usage.\n");
}

static int int_arg(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long x = v ? strtoll(v, &end, 10) : 0;
	if (!v || errno || *end || end == v || x < lo || x > hi) {
		fprintf(stderr, "txhub bench: %s: expected an integer %lld..%lld\n", name,
		        (long long)lo, (long long)hi);
		return -1;
	}
	*out = x;
	return 0;
}

static int parse(const txhub_config *cfg, int argc, char **a, opts *o)
{
	memset(o, 0, sizeof *o);
	o->count = 10000;
	o->rollback_pct = 10;
	o->delay_ms = 1000;
	o->payload_bytes = 200;
	o->partitions = 4;
	o->ceilings = 1;
	o->drain_s = 60;
	o->warmup_s = 2;
	snprintf(o->forward_topic, sizeof o->forward_topic, "%s.bench", cfg->control_topic);
	snprintf(o->run, sizeof o->run, "%lx%04x", (long)time(NULL), (unsigned)getpid() & 0xffff);
	snprintf(o->hub_log, sizeof o->hub_log, "/tmp/txhub-bench-hub.log");
	for (int i = 0; i < argc; i++) {
		const char *k = a[i], *v = i + 1 < argc ? a[i + 1] : NULL;
		int64_t x;
		int takes = 1;
		if (strcmp(k, "--count") == 0 && int_arg(k, v, 1, 50000000, &x) == 0)
			o->count = x;
		else if (strcmp(k, "--rate") == 0 && int_arg(k, v, 1, 10000000, &x) == 0)
			o->rate = (double)x;
		else if (strcmp(k, "--rollback") == 0 && int_arg(k, v, 0, 100, &x) == 0)
			o->rollback_pct = (int)x;
		else if (strcmp(k, "--payload") == 0 && int_arg(k, v, 0, 900000, &x) == 0)
			o->payload_bytes = (int)x;
		else if (strcmp(k, "--delayed") == 0 && int_arg(k, v, 0, 100, &x) == 0)
			o->delayed_pct = (int)x;
		else if (strcmp(k, "--delay-ms") == 0 && int_arg(k, v, 0, 30LL * 86400000, &x) == 0)
			o->delay_ms = x;
		else if (strcmp(k, "--keys") == 0 && int_arg(k, v, 1, 50000000, &x) == 0)
			o->keys = x;
		else if (strcmp(k, "--partitions") == 0 && int_arg(k, v, 1, 1000, &x) == 0)
			o->partitions = (int)x;
		else if (strcmp(k, "--tenants") == 0 && int_arg(k, v, 1, 1000, &x) == 0)
			o->tenants = (int)x, o->enforce = 1;
		else if (strcmp(k, "--hub-pid") == 0 && int_arg(k, v, 1, 1 << 30, &x) == 0)
			o->hub_pid = (pid_t)x;
		else if (strcmp(k, "--ceiling-tx") == 0 && int_arg(k, v, 100, 10000000, &x) == 0)
			o->ceiling_tx = x;
		else if (strcmp(k, "--drain") == 0 && int_arg(k, v, 1, 3600, &x) == 0)
			o->drain_s = (int)x;
		else if (strcmp(k, "--warmup") == 0 && int_arg(k, v, 0, 3600, &x) == 0)
			o->warmup_s = (int)x;
		else if (strcmp(k, "--forward-topic") == 0 && v && txhubi_topic_valid(v, strlen(v)))
			snprintf(o->forward_topic, sizeof o->forward_topic, "%s", v);
		else if (strcmp(k, "--run-id") == 0 && v && strlen(v) < sizeof o->run &&
		         strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789") == strlen(v) && *v)
			snprintf(o->run, sizeof o->run, "%s", v);
		else if (strcmp(k, "--hub-log") == 0 && v && strlen(v) < sizeof o->hub_log)
			snprintf(o->hub_log, sizeof o->hub_log, "%s", v);
		else if (strcmp(k, "--hub-binary") == 0 && v && *v && strlen(v) < sizeof o->hub_binary &&
		         access(v, X_OK) == 0)
			snprintf(o->hub_binary, sizeof o->hub_binary, "%s", v);
		else if ((takes = 0), strcmp(k, "--start-hub") == 0)
			o->start_hub = 1;
		else if (strcmp(k, "--preload") == 0)
			o->preload = 1;
		else if (strcmp(k, "--no-ceilings") == 0)
			o->ceilings = 0;
		else if (strcmp(k, "--exactly-once") == 0)
			o->exactly_once = 1;
		else if (strcmp(k, "--no-enforce") == 0)
			o->enforce = -1;
		else if (strcmp(k, "--help") == 0 || strcmp(k, "-h") == 0) {
			usage(stdout);
			return 1;
		}
		else {
			if (takes && v)
				fprintf(stderr, "txhub bench: %s: bad value \"%s\"\n", k, v);
			else
				fprintf(stderr, "txhub bench: unknown or incomplete option \"%s\"\n", k);
			usage(stderr);
			return -1;
		}
		i += takes;
	}
	if (o->enforce < 0 && !o->tenants) {
		fprintf(stderr, "txhub bench: --no-enforce goes with --tenants\n");
		return -1;
	}
	if (o->preload && !o->start_hub) {
		fprintf(stderr, "txhub bench: --preload needs --start-hub (the hub starts after the "
		                "envelopes are in)\n");
		return -1;
	}
	if (*o->hub_binary && !o->start_hub) {
		fprintf(stderr, "txhub bench: --hub-binary goes with --start-hub\n");
		return -1;
	}
	if (o->start_hub && o->hub_pid) {
		fprintf(stderr, "txhub bench: --start-hub and --hub-pid exclude each other\n");
		return -1;
	}
	if (!o->ceiling_tx)
		o->ceiling_tx = o->count < 50000 ? o->count : 50000;
	if (o->ceiling_tx < 100)
		o->ceiling_tx = 100;
	return 0;
}

/* ---- the verifier: consumes the forward topic ---- */

/* i of "bench-<run>-<i>", or -1 for another run's key or none. */
static int64_t tx_of(const verifier *v, const rd_kafka_message_t *m)
{
	rd_kafka_headers_t *h = NULL;
	const void *val;
	size_t len;
	if (rd_kafka_message_headers(m, &h) || !h ||
	    rd_kafka_header_get_last(h, "txhub-message-key", &val, &len))
		return -1;
	char key[128];
	if (len >= sizeof key)
		return -1;
	memcpy(key, val, len);
	key[len] = '\0';
	char prefix[64];
	int pl = snprintf(prefix, sizeof prefix, "bench-%s-", v->o->run);
	if (strncmp(key, prefix, (size_t)pl) != 0)
		return -1;
	char *end;
	long long i = strtoll(key + pl, &end, 10);
	return *end || i < 0 || i >= v->o->count ? -1 : i;
}

static void arrived(verifier *v, const rd_kafka_message_t *m)
{
	int64_t t = clock_us(), i = tx_of(v, m);
	if (i < 0) {
		atomic_fetch_add(&v->foreign, 1);
		return;
	}
	int64_t expected = 0;
	atomic_compare_exchange_strong(&v->first_arrival_us, &expected, t);
	atomic_store(&v->last_arrival_us, t);
	if (rolled_back(v->o, i) || !atomic_load(&v->commit_us[i])) {
		atomic_fetch_add(&v->wrong, 1); /* rolled back, or never committed */
		return;
	}
	if (v->arrivals[i] < UINT16_MAX)
		v->arrivals[i]++;
	if (v->arrivals[i] > 1) {
		atomic_fetch_add(&v->duplicates, 1);
		return;
	}
	v->first_us[i] = t;
	atomic_fetch_add(&v->arrived, 1);
}

static void *verify(void *arg)
{
	verifier *v = arg;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(v->nparts);
	for (int p = 0; p < v->nparts; p++)
		rd_kafka_topic_partition_list_add(l, v->o->forward_topic, p)->offset = v->start[p];
	rd_kafka_assign(v->rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	for (;;) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(v->rk, 100);
		if (m) {
			if (!m->err)
				arrived(v, m);
			rd_kafka_message_destroy(m);
		}
		int64_t done = atomic_load(&v->gen_done_us);
		if (atomic_load(&v->generating) || !done)
			continue;
		if (atomic_load(&v->arrived) >= v->committed &&
		    clock_us() - done > 1000000) /* a second more, for late duplicates */
			break;
		if (clock_us() - done > (int64_t)v->o->drain_s * 1000000 || signals_stop_requested())
			break;
	}
	return NULL;
}

/* ---- the hub ---- */

/* Define o->tenants tenants (--tenants): bench-0 owns the control topic,
 * the bench's biz ids and forward topic; bench-i (i > 0) owns
 * <control_topic>.t<i>, biz ids bench-t<i>-* and <control_topic>.t<i>.out,
 * so that the hub judges every record among N tenants' rules. Earlier
 * bench-* tenants are replaced. Returns 0, or -1 (said on stderr). */
static int define_tenants(const txhub_config *cfg, const opts *o)
{
	static const char *sql =
		"INSERT INTO txhub.tenants (name, control_topics, biz_ids, forward_topics) "
		"SELECT 'bench-' || i, "
		"CASE WHEN i = 0 THEN ARRAY[$1] ELSE ARRAY[$1 || '.t' || i] END, "
		"CASE WHEN i = 0 THEN ARRAY['bench', 'bench-ceiling-*'] "
		"ELSE ARRAY['bench-t' || i || '-*'] END, "
		"CASE WHEN i = 0 THEN ARRAY[$2] ELSE ARRAY[$1 || '.t' || i || '.out'] END "
		"FROM generate_series(0, $3::int - 1) i";
	char n[16];
	snprintf(n, sizeof n, "%d", o->tenants);
	const char *p[3] = {cfg->control_topic, o->forward_topic, n};
	PGconn *c = PQconnectdb(cfg->pg);
	/* (one statement could not delete and insert the same names) */
	PGresult *r = PQstatus(c) == CONNECTION_OK
	                  ? PQexec(c, "BEGIN; DELETE FROM txhub.tenants WHERE name LIKE 'bench-%'")
	                  : NULL;
	int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	r = ok ? PQexecParams(c, sql, 3, NULL, p, NULL, NULL, 0) : NULL;
	ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	r = ok ? PQexec(c, "COMMIT") : NULL;
	ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "txhub bench: defining %d tenants: %s", o->tenants, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	return ok ? 0 : -1;
}

static pid_t start_hub(const opts *o, char **hub_args)
{
	char *argv[200];
	int n = 0;
	argv[n++] = "txhub";
	argv[n++] = "run";
	for (; hub_args && *hub_args && n < 196; hub_args++)
		argv[n++] = *hub_args;
	if (o->tenants) {
		argv[n++] = "-X";
		argv[n++] = o->enforce > 0 ? "tenants.enforce=true" : "tenants.enforce=false";
	}
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		FILE *f = fopen(o->hub_log, "w");
		if (f) {
			dup2(fileno(f), 1);
			dup2(fileno(f), 2);
		}
		execv(*o->hub_binary ? o->hub_binary : "/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

/* CPU seconds (user + system) and peak resident MiB of pid; -1 unknown. */
static void hub_usage(pid_t pid, double *cpu_s, double *rss_mib)
{
	char path[64], line[512];
	*cpu_s = *rss_mib = -1;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (f && fgets(line, sizeof line, f)) {
		const char *p = strrchr(line, ')'); /* the command name may hold spaces */
		unsigned long ut, st;
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
			*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
	if (f)
		fclose(f);
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f)) {
		long kb;
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			*rss_mib = (double)kb / 1024.0;
	}
	if (f)
		fclose(f);
}

/* Wait until the hub holds every partition of the control topic in
 * txhub.partitions (it has joined and taken them). */
static int wait_hub_ready(const txhub_config *cfg, pid_t pid, int partitions)
{
	PGconn *c = PQconnectdb(cfg->pg);
	char owner[32], n[16];
	snprintf(owner, sizeof owner, "%%/%d", (int)pid);
	snprintf(n, sizeof n, "%d", partitions);
	int ok = 0;
	for (int i = 0; i < 600 && !ok && PQstatus(c) == CONNECTION_OK; i++) {
		const char *p[3] = {cfg->control_topic, owner, n};
		PGresult *r = PQexecParams(c, "SELECT count(*) >= $3::int FROM txhub.partitions "
		                              "WHERE topic = $1 AND owner LIKE $2 AND released_at IS NULL",
		                           3, NULL, p, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
		PQclear(r);
		if (!ok) {
			if (waitpid(pid, NULL, WNOHANG) == pid)
				break;
			usleep(100000);
		}
	}
	PQfinish(c);
	return ok ? 0 : -1;
}

/* ---- the generator ---- */

static void progress(const verifier *v, int64_t i, int64_t t0, const char *what)
{
	double s = (double)(clock_us() - t0) / 1e6;
	fprintf(stderr, "bench: %6.1f s  %s %lld of %lld tx (%.0f/s)  forwarded %lld of %lld\n", s,
	        what, (long long)i, (long long)v->o->count, s > 0 ? (double)i / s : 0.0,
	        (long long)atomic_load(&v->arrived), (long long)v->committed);
}

/* Produce every transaction: prepare, then commit or rollback, paced at
 * o->rate (open loop: a late transaction does not delay the next ones'
 * schedule) or flat out. */
static void generate(verifier *v, rd_kafka_t *rk, const char *payload)
{
	const opts *o = v->o;
	char *val = malloc(strlen(payload) + 512);
	if (!val)
		return;
	int64_t t0 = clock_us(), next_report = t0 + 1000000;
	for (int64_t i = 0; i < o->count && !signals_stop_requested(); i++) {
		if (o->rate > 0) {
			int64_t due = t0 + (int64_t)((double)i * 1e6 / o->rate), wait = due - clock_us();
			if (wait > 0) {
				rd_kafka_poll(rk, 0);
				usleep((useconds_t)wait);
			}
		}
		char mk[96], key[96];
		snprintf(mk, sizeof mk, "bench-%s-%lld", o->run, (long long)i);
		if (o->keys)
			snprintf(key, sizeof key, "k-%lld", (long long)(i % o->keys));
		else
			snprintf(key, sizeof key, "%s", mk);
		char delay[48] = "";
		if (delayed(o, i))
			snprintf(delay, sizeof delay, ",\"delay_ms\":%lld", (long long)o->delay_ms);
		sprintf(val, "{\"type\":\"prepare\",\"biz_id\":\"bench\",\"message_key\":\"%s\","
		             "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"%s}}",
		        mk, payload, o->forward_topic, mk, delay);
		bench_produce(rk, v->cfg->control_topic, key, val);
		sprintf(val, "{\"type\":\"%s\",\"biz_id\":\"bench\",\"message_key\":\"%s\"}",
		        rolled_back(o, i) ? "rollback" : "commit", mk);
		atomic_store(&v->commit_us[i], clock_us());
		bench_produce(rk, v->cfg->control_topic, key, val);
		if ((i & 255) == 0)
			rd_kafka_poll(rk, 0);
		if (clock_us() >= next_report) {
			progress(v, i + 1, t0, "produced");
			next_report += 1000000;
		}
	}
	rd_kafka_flush(rk, 60000);
	free(val);
}

/* ---- main ---- */

static void stop_hub(pid_t pid)
{
	kill(pid, SIGTERM);
	for (int i = 0; i < 300 && waitpid(pid, NULL, WNOHANG) == 0; i++)
		usleep(100000);
	if (waitpid(pid, NULL, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static char *make_payload(int bytes)
{
	char *p = malloc((size_t)bytes + 1);
	if (p) {
		memset(p, 'x', (size_t)bytes);
		p[bytes] = '\0';
	}
	return p;
}

/* Set up the verifier: its consumer, from the forward topic's ends now. */
static int verifier_init(verifier *v, const txhub_config *cfg, const opts *o, rd_kafka_t *admin)
{
	memset(v, 0, sizeof *v);
	v->o = o;
	v->cfg = cfg;
	for (int64_t i = 0; i < o->count; i++)
		v->committed += !rolled_back(o, i);
	v->commit_us = calloc((size_t)o->count, sizeof *v->commit_us);
	v->first_us = calloc((size_t)o->count, sizeof *v->first_us);
	v->arrivals = calloc((size_t)o->count, sizeof *v->arrivals);
	char group[96];
	snprintf(group, sizeof group, "txhub-bench-%s", o->run);
	const char *cdef[] = {"group.id", group, "enable.auto.commit", "false",
	                      "isolation.level", "read_committed", "enable.partition.eof", "false",
	                      NULL};
	v->nparts = bench_topic_ends(admin, o->forward_topic, &v->start);
	if (!v->commit_us || !v->first_us || !v->arrivals || !v->nparts)
		return -1;
	v->rk = bench_client(cfg, RD_KAFKA_CONSUMER, cdef, NULL);
	atomic_store(&v->generating, 1);
	return v->rk ? 0 : -1;
}

static void verifier_free(verifier *v)
{
	if (v->rk) {
		rd_kafka_consumer_close(v->rk);
		rd_kafka_destroy(v->rk);
	}
	free(v->commit_us);
	free(v->first_us);
	free(v->arrivals);
	free(v->start);
}

/* The bench produces to one control topic: the first of a list. */
static int bench_topic(const txhub_config *given, txhub_config *cfg, char *topic, size_t topicsz)
{
	topics_spec s;
	char err[256];
	*cfg = *given;
	if (topics_parse(given->control_topic, &s, err, sizeof err) != 0 || s.pattern) {
		fprintf(stderr, "txhub bench: control_topic: %s\n",
		        s.pattern ? "a pattern names no topic to produce to; give the bench one topic "
		                    "or a list (it uses the first)" : err);
		topics_free(&s);
		return -1;
	}
	snprintf(topic, topicsz, "%s", s.names[0]);
	cfg->control_topic = topic;
	topics_free(&s);
	return 0;
}

int bench_main(const txhub_config *given, int argc, char **args, char **hub_args)
{
	opts o;
	txhub_config one;
	const txhub_config *cfg = &one;
	char topic[300];
	if (bench_topic(given, &one, topic, sizeof topic) != 0)
		return 2;
	int p = parse(cfg, argc, args, &o);
	if (p != 0)
		return p > 0 ? 0 : 2;
	signals_install();
	/* (one request in flight, no linger: see forward.c, the same
	 * librdkafka stall would be counted against the hub) */
	static const char *pdef[] = {"enable.idempotence", "true", "linger.ms", "0",
	                             "max.in.flight.requests.per.connection", "1", NULL};
	rd_kafka_conf_t *pc = kafka_conf_new(cfg, pdef, NULL, 0);
	if (pc)
		rd_kafka_conf_set_dr_msg_cb(pc, bench_gen_dr);
	rd_kafka_t *gen = pc ? bench_client(cfg, RD_KAFKA_PRODUCER, NULL, pc) : NULL;
	char *payload = make_payload(o.payload_bytes);
	verifier v;
	memset(&v, 0, sizeof v);
	results r;
	memset(&r, 0, sizeof r);
	r.hub_cpu_s = r.hub_rss_mib = r.ceiling_pg = r.ceiling_kafka = -1;
	pid_t hub = 0;
	int status = 1;
	int64_t *cstart = NULL; /* the control topic's ends before this run: where its records start */
	if (!gen || !payload) {
		fprintf(stderr, "txhub bench: cannot create the producer\n");
		goto out;
	}
	bench_create_topic(gen, cfg->control_topic, o.partitions);
	bench_create_topic(gen, o.forward_topic, o.partitions);
	if (o.tenants && define_tenants(cfg, &o) != 0)
		goto out;
	if (verifier_init(&v, cfg, &o, gen) != 0) {
		fprintf(stderr, "txhub bench: cannot read the forward topic %s\n", o.forward_topic);
		goto out;
	}
	int cparts = bench_topic_ends(gen, cfg->control_topic, &cstart);
	if (o.start_hub && !o.preload) {
		hub = start_hub(&o, hub_args);
		if (wait_hub_ready(cfg, hub, cparts) != 0) {
			fprintf(stderr, "txhub bench: the hub did not take the control topic's %d "
			                "partitions; see %s\n", cparts, o.hub_log);
			goto out;
		}
	}
	if (o.hub_pid) { /* best effort: the peak from here on */
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)o.hub_pid);
		FILE *f = fopen(path, "w");
		if (f) {
			fputs("5", f);
			fclose(f);
		}
	}
	double cpu0 = 0, rss;
	if (o.hub_pid)
		hub_usage(o.hub_pid, &cpu0, &rss);
	bench_pg_read(cfg, &r.pg_before);
	pthread_t th;
	pthread_create(&th, NULL, verify, &v);
	r.start_us = clock_us();
	generate(&v, gen, payload);
	int64_t drain_from = 0;
	if (o.preload) {
		fprintf(stderr, "bench: %lld transactions in; starting the hub\n", (long long)o.count);
		hub = start_hub(&o, hub_args);
		/* timed from when it holds the partitions: the group join is not
		 * the hub's speed */
		if (wait_hub_ready(cfg, hub, cparts) != 0)
			fprintf(stderr, "txhub bench: the hub did not take the control topic's %d "
			                "partitions; see %s\n", cparts, o.hub_log);
		drain_from = clock_us();
	}
	atomic_store(&v.gen_done_us, clock_us());
	atomic_store(&v.generating, 0);
	int64_t report_at = clock_us() + 1000000;
	while (atomic_load(&v.gen_done_us) && pthread_tryjoin_np(th, NULL) == EBUSY) {
		usleep(50000);
		if (clock_us() >= report_at) {
			progress(&v, o.count, r.start_us, "produced");
			report_at += 1000000;
		}
	}
	if (o.preload)
		r.start_us = drain_from;
	r.end_us = atomic_load(&v.last_arrival_us);
	if (!r.end_us || r.end_us < atomic_load(&v.gen_done_us))
		r.end_us = r.end_us ? atomic_load(&v.gen_done_us) : r.start_us;
	pid_t watched = hub ? hub : o.hub_pid;
	if (watched) {
		hub_usage(watched, &r.hub_cpu_s, &r.hub_rss_mib);
		if (r.hub_cpu_s >= 0)
			r.hub_cpu_s -= cpu0;
	}
	if (hub) {
		stop_hub(hub);
		hub = 0;
	}
	bench_pg_read(cfg, &r.pg_after); /* before the ceilings write their own rows */
	if (o.ceilings && !signals_stop_requested()) {
		fprintf(stderr, "bench: measuring the PostgreSQL ceiling (%lld tx)\n",
		        (long long)o.ceiling_tx);
		r.ceiling_pg = bench_ceiling_pg(cfg, &o);
		fprintf(stderr, "bench: measuring the Kafka ceiling (%lld tx)\n", (long long)o.ceiling_tx);
		r.ceiling_kafka = bench_ceiling_kafka(cfg, &o, gen, payload);
	}
	r.broker_deleted = bench_deleted_since(gen, cfg->control_topic, cstart, cparts);
	status = bench_report(&v, &r);
out:
	free(cstart);
	if (hub)
		stop_hub(hub);
	verifier_free(&v);
	if (gen)
		rd_kafka_destroy(gen);
	free(payload);
	return status;
}
