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

#include "forward.h"
#include "kafka.h"
#include "signals.h"
#include "store.h"

typedef struct {
	int64_t count;        /* transactions */
	double rate;          /* per second; 0: flat out */
	int rollback_pct;     /* 0..100 */
	int delayed_pct;      /* 0..100: share of prepares with forward.delay_ms */
	int64_t delay_ms;     /* their delay */
	int payload_bytes;
	int64_t keys;         /* distinct record keys; 0: one per transaction */
	int partitions;       /* of the topics the bench creates */
	char forward_topic[256];
	char run[40];         /* the run id in every message key */
	int preload;          /* produce everything, then start the hub */
	int start_hub;
	pid_t hub_pid;
	int ceilings;
	int64_t ceiling_tx;
	int drain_s;
	int warmup_s;         /* commits of the first seconds: verified, not timed */
	int exactly_once;     /* a duplicate is a failure */
	int tenants;          /* tenants to define (bench-0 owns the control topic); 0: leave them */
	int enforce;          /* ... and tenants.enforce for the hub it starts */
	char hub_log[256];
	char hub_binary[256]; /* --start-hub runs this txhub; "": this one */
} opts;

static inline int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int rolled_back(const opts *o, int64_t i)
{
	return (int)((uint64_t)(i * 37) % 100) < o->rollback_pct;
}

/* delayed delivery: independent of rolled_back() (another stride) */
static inline int delayed(const opts *o, int64_t i)
{
	return (int)((uint64_t)(i * 53 + 7) % 100) < o->delayed_pct;
}

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
		else if (strcmp(k, "--forward-topic") == 0 && v && envelope_valid_topic(v, strlen(v)))
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

/* ---- Kafka helpers ---- */

rd_kafka_t *bench_client(const txhub_config *cfg, rd_kafka_type_t type,
                         const char *const *defaults, rd_kafka_conf_t *conf)
{
	char err[512];
	if (!conf && !(conf = kafka_conf_new(cfg, defaults, err, sizeof err))) {
		fprintf(stderr, "txhub bench: %s\n", err);
		return NULL;
	}
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "txhub bench: %s\n", err);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

/* Create topic with o->partitions partitions unless it exists. The embedded
 * broker answers no admin requests: its topics are created on first use,
 * which is said and accepted. */
void bench_create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
	char err[256];
	rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, -1, err, sizeof err);
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_request_timeout(ao, 3000, err, sizeof err);
	rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 4000);
	const char *why = ev ? NULL : "no answer";
	if (ev && rd_kafka_event_error(ev))
		why = rd_kafka_event_error_string(ev);
	const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
	size_t n = 0;
	const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
	if (!why && n == 1 && rd_kafka_topic_result_error(tr[0]) &&
	    rd_kafka_topic_result_error(tr[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
		why = rd_kafka_topic_result_error_string(tr[0]);
	if (why)
		fprintf(stderr, "txhub bench: creating %s with %d partitions: %s (using it as the "
		                "broker makes it)\n", topic, partitions, why);
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_queue_destroy(q);
	rd_kafka_NewTopic_destroy(nt);
}

/* The partitions of topic and their high watermarks now (the verifier reads
 * from there). Returns the partition count (0 on failure); *high is
 * malloc'd. */
int bench_topic_ends(rd_kafka_t *rk, const char *topic, int64_t **high)
{
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	int n = 0;
	for (int tries = 0; tries < 50 && n == 0; tries++) {
		if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
			if (md->topic_cnt == 1 && !md->topics[0].err)
				n = md->topics[0].partition_cnt;
			rd_kafka_metadata_destroy(md);
		}
		if (n == 0)
			usleep(100000);
	}
	rd_kafka_topic_destroy(t);
	*high = calloc((size_t)(n ? n : 1), sizeof **high);
	for (int p = 0; p < n && *high; p++) {
		int64_t lo, hi;
		(*high)[p] = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000) ? 0 : hi;
	}
	return *high ? n : 0;
}

/* How many records the broker deleted from topic's n partitions past
 * start[] (their high watermarks when the run began): its retention ran
 * ahead of the hub, and a "lost" verdict may be the broker's. */
int64_t bench_deleted_since(rd_kafka_t *rk, const char *topic, const int64_t *start, int n)
{
	int64_t deleted = 0;
	for (int p = 0; start && p < n; p++) {
		int64_t lo, hi;
		if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000) ==
		        RD_KAFKA_RESP_ERR_NO_ERROR && lo > start[p])
			deleted += lo - start[p];
	}
	return deleted;
}

/* ---- the verifier: consumes the forward topic ---- */

typedef struct {
	const opts *o;
	const txhub_config *cfg;
	_Atomic int64_t *commit_us;  /* per transaction, 0: not produced yet */
	int64_t *first_us;           /* first arrival, 0: none */
	uint16_t *arrivals;
	_Atomic int64_t arrived;     /* distinct committed transactions arrived */
	_Atomic int64_t duplicates, wrong, foreign;
	_Atomic int generating;      /* the generator has not finished */
	_Atomic int64_t gen_done_us, first_arrival_us, last_arrival_us;
	int64_t committed;           /* transactions to be forwarded */
	rd_kafka_t *rk;
	int nparts;
	int64_t *start;
} verifier;

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
	int64_t t = now_us(), i = tx_of(v, m);
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
		    now_us() - done > 1000000) /* a second more, for late duplicates */
			break;
		if (now_us() - done > (int64_t)v->o->drain_s * 1000000 || signals_stop_requested())
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

/* What PostgreSQL wrote, read before and after a run (issue 22's figures):
 * the cluster's WAL position, and the message table's row versions (inserts,
 * updates, HOT updates), dead tuples and sizes from the statistics views.
 * The views are updated by each session when its transaction ends (at
 * most once a second) and when it exits: read after the hub stopped, they
 * hold everything it did; against a hub that keeps running (--hub-pid)
 * its last second may be missing. */
typedef struct {
	int ok;
	double wal;                  /* bytes since 0/0 */
	int64_t ins, upd, hot, dead; /* pg_stat_user_tables of txhub.message_rows (0.4:
	                              * txhub.messages) */
	int64_t heap, index;         /* bytes: the table, its indexes */
} pg_counters;

void bench_pg_read(const txhub_config *cfg, pg_counters *c)
{
	memset(c, 0, sizeof *c);
	PGconn *conn = PQconnectdb(cfg->pg);
	PGresult *r = PQstatus(conn) != CONNECTION_OK ? NULL
	    : PQexec(conn, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, "
	                   "s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_dead_tup, "
	                   "pg_relation_size(s.relid), pg_indexes_size(s.relid) "
	                   "FROM pg_stat_user_tables s WHERE s.relid = "
	                   "coalesce(to_regclass('txhub.message_rows'), 'txhub.messages'::regclass)");
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
		c->wal = strtod(PQgetvalue(r, 0, 0), NULL);
		c->ins = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
		c->upd = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
		c->hot = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
		c->dead = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
		c->heap = strtoll(PQgetvalue(r, 0, 5), NULL, 10);
		c->index = strtoll(PQgetvalue(r, 0, 6), NULL, 10);
		c->ok = 1;
	} else {
		fprintf(stderr, "txhub bench: cannot read PostgreSQL's statistics: %s",
		        r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
	}
	PQclear(r);
	PQfinish(conn);
}

/* The "pg" object of the report: per transaction of the run, what
 * PostgreSQL wrote between a and b; NULL when either read failed. */
static cJSON *pg_written(const pg_counters *a, const pg_counters *b, int64_t count)
{
	if (!a->ok || !b->ok || count <= 0)
		return NULL;
	double n = (double)count;
	int64_t upd = b->upd - a->upd, hot = b->hot - a->hot;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "wal_bytes_per_tx", (b->wal - a->wal) / n);
	cJSON_AddNumberToObject(j, "row_versions_per_tx", (double)(b->ins - a->ins + upd) / n);
	cJSON_AddNumberToObject(j, "inserts", (double)(b->ins - a->ins));
	cJSON_AddNumberToObject(j, "updates", (double)upd);
	cJSON_AddNumberToObject(j, "hot_updates", (double)hot);
	cJSON_AddNumberToObject(j, "hot_share", upd > 0 ? (double)hot / (double)upd : 0);
	cJSON_AddNumberToObject(j, "dead_tuples_at_end", (double)b->dead);
	cJSON_AddNumberToObject(j, "heap_bytes_per_tx", (double)(b->heap - a->heap) / n);
	cJSON_AddNumberToObject(j, "index_bytes_per_tx", (double)(b->index - a->index) / n);
	fprintf(stderr, "bench: PostgreSQL wrote per transaction %.0f WAL bytes, %.2f row versions "
	                "of txhub.messages (%.0f%% of %lld updates HOT), %.0f heap and %.0f index "
	                "bytes; %lld dead tuples at the end\n",
	        (b->wal - a->wal) / n, (double)(b->ins - a->ins + upd) / n,
	        upd > 0 ? 100.0 * (double)hot / (double)upd : 0.0, (long long)upd,
	        (double)(b->heap - a->heap) / n, (double)(b->index - a->index) / n,
	        (long long)b->dead);
	return j;
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

_Atomic int64_t bench_produce_errors;

void bench_gen_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (m->err)
		atomic_fetch_add(&bench_produce_errors, 1);
}

void bench_produce(rd_kafka_t *rk, const char *topic, const char *key, const char *value)
{
	for (;;) {
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
			RD_KAFKA_V_VALUE((void *)value, strlen(value)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			if (e)
				atomic_fetch_add(&bench_produce_errors, 1);
			return;
		}
		rd_kafka_poll(rk, 10);
	}
}

static void progress(const verifier *v, int64_t i, int64_t t0, const char *what)
{
	double s = (double)(now_us() - t0) / 1e6;
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
	int64_t t0 = now_us(), next_report = t0 + 1000000;
	for (int64_t i = 0; i < o->count && !signals_stop_requested(); i++) {
		if (o->rate > 0) {
			int64_t due = t0 + (int64_t)((double)i * 1e6 / o->rate), wait = due - now_us();
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
		atomic_store(&v->commit_us[i], now_us());
		bench_produce(rk, v->cfg->control_topic, key, val);
		if ((i & 255) == 0)
			rd_kafka_poll(rk, 0);
		if (now_us() >= next_report) {
			progress(v, i + 1, t0, "produced");
			next_report += 1000000;
		}
	}
	rd_kafka_flush(rk, 60000);
	free(val);
}

/* ---- ceilings ---- */

/* Delivery reports written on a connection of their own, as batches of
 * committed messages come out of store_apply. */
typedef struct batch_node {
	struct batch_node *next;
	store_forward_list l;
} batch_node;

typedef struct {
	store *st;
	const store_owned *own;
	size_t nown;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	batch_node *head, *tail;
	int closed, failed;
} deliverer;

static void *deliver(void *arg)
{
	deliverer *d = arg;
	char err[512];
	for (;;) {
		pthread_mutex_lock(&d->mu);
		while (!d->head && !d->closed)
			pthread_cond_wait(&d->cv, &d->mu);
		batch_node *b = d->head;
		if (b && !(d->head = b->next))
			d->tail = NULL;
		pthread_mutex_unlock(&d->mu);
		if (!b)
			return NULL;
		/* as the hub records them: every one delivered, so each partition's
		 * mark moves to its highest sequence, and no row is written */
		store_delivery *r = calloc(b->l.n ? b->l.n : 1, sizeof *r);
		store_mark *mk = calloc(b->l.n ? b->l.n : 1, sizeof *mk);
		size_t nmk = 0;
		for (size_t i = 0; r && mk && i < b->l.n; i++) {
			const store_forward *f = &b->l.items[i];
			r[i].biz_id = f->biz_id;
			r[i].message_key = f->message_key;
			r[i].tp = f->src_tp;
			r[i].ok = 1;
			r[i].fwd_seq = f->fwd_seq;
			size_t j = 0;
			while (j < nmk && mk[j].tp != f->src_tp)
				j++;
			if (j == nmk)
				mk[nmk++] = (store_mark){f->src_tp, 0};
			if (f->fwd_seq > mk[j].upto)
				mk[j].upto = f->fwd_seq;
		}
		if (!r || !mk ||
		    store_record_deliveries(d->st, d->own, d->nown, r, b->l.n, 15, mk, nmk, NULL, err,
		                            sizeof err) != STORE_OK) {
			fprintf(stderr, "txhub bench: PostgreSQL ceiling: deliveries: %s\n",
			        r && mk ? err : "out of memory");
			d->failed = 1;
		}
		free(r);
		free(mk);
		store_forward_list_clear(&b->l);
		free(b);
	}
}

/* The envelopes of the ceiling's n transactions (prepare and commit each),
 * parsed, in the order a hub would read them: the pairs of a partition
 * next to each other. */
static store_record *ceiling_records(const opts *o, const char *topic, int64_t n, int parts,
                                     char ***texts)
{
	store_record *recs = calloc((size_t)(2 * n), sizeof *recs);
	*texts = calloc((size_t)(2 * n), sizeof **texts);
	char *payload = malloc((size_t)o->payload_bytes + 1);
	if (!recs || !*texts || !payload) {
		free(payload);
		return recs;
	}
	memset(payload, 'x', (size_t)o->payload_bytes);
	payload[o->payload_bytes] = '\0';
	int64_t *offset = calloc((size_t)parts, sizeof *offset);
	for (int64_t i = 0; offset && i < n; i++) {
		for (int s = 0; s < 2; s++) {
			size_t len = strlen(payload) + 300;
			char *t = (*texts)[2 * i + s] = malloc(len);
			if (!t)
				continue;
			if (s == 0)
				snprintf(t, len, "{\"type\":\"prepare\",\"biz_id\":\"bench-ceiling-%s\","
				                 "\"message_key\":\"%lld\",\"payload\":\"%s\",\"forward\":"
				                 "{\"topic\":\"%s\"}}", o->run, (long long)i, payload,
				         o->forward_topic);
			else
				snprintf(t, len, "{\"type\":\"commit\",\"biz_id\":\"bench-ceiling-%s\","
				                 "\"message_key\":\"%lld\"}", o->run, (long long)i);
			store_record *r = &recs[2 * i + s];
			r->src_topic = topic_intern(topic);
			r->partition = (int32_t)(i % parts);
			r->tp = tp_of(topic, r->partition);
			r->offset = offset[r->partition]++;
			r->value = t;
			r->value_len = strlen(t);
			r->valid = envelope_parse(t, r->value_len, 1 << 24, &r->env, r->reason,
			                          sizeof r->reason) == 0;
		}
	}
	free(offset);
	free(payload);
	return recs;
}

static void ceiling_cleanup(const txhub_config *cfg, const opts *o, const char *topic)
{
	PGconn *c = PQconnectdb(cfg->pg);
	char biz[96];
	snprintf(biz, sizeof biz, "bench-ceiling-%s", o->run);
	const char *p1[1] = {biz}, *p2[1] = {topic};
	PQclear(PQexecParams(c, "DELETE FROM txhub.message_rows WHERE biz_id = $1", 1, NULL, p1, NULL,
	                     NULL, 0));
	PQclear(PQexecParams(c, "DELETE FROM txhub.partitions WHERE topic = $1", 1, NULL, p2, NULL,
	                     NULL, 0));
	PQfinish(c);
}

/* PostgreSQL alone: transactions per second through the hub's own apply
 * and delivery statements, batches of intake.batch_max records, on two
 * connections. Rows of a control topic of its own, deleted afterwards. */
double bench_ceiling_pg(const txhub_config *cfg, const opts *o)
{
	txhub_config c = *cfg; /* (the store copies the strings it keeps) */
	char topic[300], err[512];
	snprintf(topic, sizeof topic, "%s.bench-ceiling", cfg->control_topic);
	c.control_topic = topic;
	int64_t n = o->ceiling_tx;
	int parts = o->partitions;
	char **texts = NULL;
	store_record *recs = ceiling_records(o, topic, n, parts, &texts);
	store *a = store_connect(&c, err, sizeof err), *b = a ? store_connect(&c, err, sizeof err) : NULL;
	tp_key *ps = calloc((size_t)parts, sizeof *ps);
	store_owned *own = calloc((size_t)parts, sizeof *own);
	int64_t *next = calloc((size_t)parts, sizeof *next);
	double rate = -1;
	for (int p = 0; ps && p < parts; p++)
		ps[p] = tp_of(topic, p);
	if (!recs || !texts || !a || !b || !ps || !own || !next ||
	    store_take_partitions(a, "bench", "bench", ps, (size_t)parts, own, next, NULL, err,
	                          sizeof err) != STORE_OK) {
		fprintf(stderr, "txhub bench: PostgreSQL ceiling: %s\n", err);
		goto done;
	}
	deliverer d = {b, own, (size_t)parts, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	               NULL, NULL, 0, 0};
	pthread_t th;
	pthread_create(&th, NULL, deliver, &d);
	int64_t t0 = now_us();
	size_t per = (size_t)cfg->intake_batch_max, total = (size_t)(2 * n);
	for (size_t i = 0; i < total && !d.failed; i += per) {
		size_t k = total - i < per ? total - i : per;
		batch_node *node = calloc(1, sizeof *node);
		store_stats stats = {0};
		store_rc rc = node ? store_apply(a, recs + i, k, own, (size_t)parts, &node->l,
		                                 &stats, NULL, NULL, err, sizeof err)
		                   : STORE_RETRY;
		store_stats_free(&stats);
		if (rc != STORE_OK) {
			fprintf(stderr, "txhub bench: PostgreSQL ceiling: %s\n", err);
			d.failed = 1;
			free(node);
			break;
		}
		pthread_mutex_lock(&d.mu);
		if (d.tail)
			d.tail->next = node;
		else
			d.head = node;
		d.tail = node;
		pthread_cond_signal(&d.cv);
		pthread_mutex_unlock(&d.mu);
	}
	pthread_mutex_lock(&d.mu);
	d.closed = 1;
	pthread_cond_signal(&d.cv);
	pthread_mutex_unlock(&d.mu);
	pthread_join(th, NULL);
	if (!d.failed)
		rate = (double)n / ((double)(now_us() - t0) / 1e6);
done:
	for (int64_t i = 0; recs && texts && i < 2 * n; i++) {
		envelope_free(&recs[i].env);
		free(texts[i]);
	}
	free(recs);
	free(texts);
	free(ps);
	free(own);
	free(next);
	store_close(a);
	store_close(b);
	ceiling_cleanup(cfg, o, topic);
	return rate;
}

static _Atomic int64_t ceiling_delivered;

static void ceiling_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (!m->err)
		atomic_fetch_add(&ceiling_delivered, 1);
}

/* Kafka alone: transactions per second consumed from one topic and
 * produced to another with the hub's forward-producer settings. */
double bench_ceiling_kafka(const txhub_config *cfg, const opts *o, rd_kafka_t *admin,
                           const char *payload)
{
	char in[300], out[300], err[512];
	snprintf(in, sizeof in, "%s.bench-ceiling-in", cfg->control_topic);
	snprintf(out, sizeof out, "%s.bench-ceiling-out", cfg->control_topic);
	bench_create_topic(admin, in, o->partitions);
	bench_create_topic(admin, out, o->partitions);
	int64_t *start = NULL, n = o->ceiling_tx;
	int parts = bench_topic_ends(admin, in, &start);
	double rate = -1;
	static const char *pdef[] = {"linger.ms", "5", NULL};
	static const char *cdef[] = {"group.id", "txhub-bench-ceiling", "enable.auto.commit", "false",
	                             "enable.partition.eof", "false", NULL};
	int64_t tmo;
	rd_kafka_conf_t *fconf = forward_producer_conf(cfg, &tmo, err, sizeof err);
	if (fconf)
		rd_kafka_conf_set_dr_msg_cb(fconf, ceiling_dr);
	rd_kafka_t *src = bench_client(cfg, RD_KAFKA_PRODUCER, pdef, NULL);
	rd_kafka_t *con = bench_client(cfg, RD_KAFKA_CONSUMER, cdef, NULL);
	rd_kafka_t *fwd = fconf ? bench_client(cfg, RD_KAFKA_PRODUCER, NULL, fconf) : NULL;
	if (!parts || !src || !con || !fwd)
		goto done;
	/* warm up: the out topic's metadata and leaders, outside the timing */
	bench_produce(fwd, out, "warm-up", payload);
	rd_kafka_flush(fwd, 30000);
	for (int64_t i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof key, "%lld", (long long)i);
		bench_produce(src, in, key, payload);
	}
	rd_kafka_flush(src, 60000);
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
	for (int p = 0; p < parts; p++)
		rd_kafka_topic_partition_list_add(l, in, p)->offset = start[p];
	rd_kafka_assign(con, l);
	rd_kafka_topic_partition_list_destroy(l);
	atomic_store(&ceiling_delivered, 0);
	int64_t t0 = 0, got = 0, deadline = now_us() + 120000000;
	/* (the warm-up's report was served by the flush above) */
	while (atomic_load(&ceiling_delivered) < n && now_us() < deadline) {
		rd_kafka_message_t *m = got < n ? rd_kafka_consumer_poll(con, 100) : NULL;
		if (m && !m->err) {
			if (!t0)
				t0 = now_us();
			got++;
			for (;;) {
				rd_kafka_resp_err_t e = rd_kafka_producev(
					fwd, RD_KAFKA_V_TOPIC(out), RD_KAFKA_V_KEY(m->key, m->key_len),
					RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_END);
				if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
					break;
				rd_kafka_poll(fwd, 10);
			}
		}
		if (m)
			rd_kafka_message_destroy(m);
		rd_kafka_poll(fwd, got < n ? 0 : 50);
	}
	if (t0 && atomic_load(&ceiling_delivered) >= n)
		rate = (double)n / ((double)(now_us() - t0) / 1e6);
	else
		fprintf(stderr, "txhub bench: Kafka ceiling: %lld of %lld delivered\n",
		        (long long)atomic_load(&ceiling_delivered), (long long)n);
done:
	if (!fwd && fconf)
		fprintf(stderr, "txhub bench: Kafka ceiling: cannot create the producer\n");
	else if (!fconf)
		fprintf(stderr, "txhub bench: Kafka ceiling: %s\n", err);
	if (con) {
		rd_kafka_consumer_close(con);
		rd_kafka_destroy(con);
	}
	if (src)
		rd_kafka_destroy(src);
	if (fwd) {
		rd_kafka_flush(fwd, 10000);
		rd_kafka_destroy(fwd);
	}
	free(start);
	return rate;
}

/* ---- the result ---- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double pct(const int64_t *sorted, size_t n, double p)
{
	if (n == 0)
		return -1;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return (double)sorted[i] / 1000.0;
}

static void add_num(cJSON *o, const char *name, double v)
{
	if (v < 0)
		cJSON_AddNullToObject(o, name);
	else
		cJSON_AddNumberToObject(o, name, (double)(int64_t)(v * 100 + 0.5) / 100);
}

/* The latencies (µs) of the committed transactions that arrived, but for
 * those committed in the warm-up (the first o->warmup_s seconds). */
/* Commit produced to first forward consumed of the committed transactions
 * (after the warm-up): of the undelayed ones (of_delayed 0), or, less
 * their delay, of the delayed ones (their lateness). */
static size_t latencies(const verifier *v, int64_t start_us, int of_delayed, int64_t **out)
{
	int64_t *l = malloc((size_t)(v->o->count ? v->o->count : 1) * sizeof *l);
	int64_t from = start_us + (int64_t)v->o->warmup_s * 1000000;
	int64_t less = of_delayed ? v->o->delay_ms * 1000 : 0;
	size_t n = 0;
	for (int64_t i = 0; l && i < v->o->count; i++)
		if (v->first_us[i] && !rolled_back(v->o, i) && delayed(v->o, i) == of_delayed &&
		    atomic_load(&v->commit_us[i]) >= from)
			l[n++] = v->first_us[i] - atomic_load(&v->commit_us[i]) - less;
	if (n > 1)
		qsort(l, n, sizeof *l, cmp_i64);
	*out = l;
	return n;
}

typedef struct {
	int64_t start_us, end_us;
	double hub_cpu_s, hub_rss_mib, ceiling_pg, ceiling_kafka;
	int64_t broker_deleted; /* records of this run the broker deleted from the control topic */
	pg_counters pg_before, pg_after;
} results;

int bench_report(const verifier *v, const results *r)
{
	const opts *o = v->o;
	int64_t lost = v->committed - atomic_load(&v->arrived);
	int64_t dup = atomic_load(&v->duplicates), wrong = atomic_load(&v->wrong);
	double secs = (double)(r->end_us - r->start_us) / 1e6;
	double tps = secs > 0 && lost < v->committed ? (double)o->count / secs : -1;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "run", o->run);
	cJSON_AddStringToObject(j, "mode", o->preload ? "preload" : o->rate > 0 ? "rate" : "flat_out");
	cJSON_AddNumberToObject(j, "transactions", (double)o->count);
	cJSON_AddNumberToObject(j, "committed", (double)v->committed);
	cJSON_AddNumberToObject(j, "rolled_back", (double)(o->count - v->committed));
	add_num(j, "rate_target", o->rate > 0 ? o->rate : -1);
	add_num(j, "seconds", secs);
	add_num(j, "tx_per_s", tps);
	int64_t *lat = NULL;
	size_t nl = o->preload ? 0 : latencies(v, r->start_us, 0, &lat);
	cJSON *l = cJSON_AddObjectToObject(j, "latency_ms");
	add_num(l, "p50", pct(lat, nl, 0.50));
	add_num(l, "p95", pct(lat, nl, 0.95));
	add_num(l, "p99", pct(lat, nl, 0.99));
	add_num(l, "max", nl ? (double)lat[nl - 1] / 1000.0 : -1);
	free(lat);
	if (o->delayed_pct > 0) { /* may be negative: forwarded early (never, CONTRACT §15) */
		int64_t *late = NULL;
		size_t nd = o->preload ? 0 : latencies(v, r->start_us, 1, &late);
		cJSON *d = cJSON_AddObjectToObject(j, "delayed_lateness_ms");
		add_num(d, "min", nd ? (double)late[0] / 1000.0 : -1);
		add_num(d, "p50", pct(late, nd, 0.50));
		add_num(d, "p99", pct(late, nd, 0.99));
		add_num(d, "max", nd ? (double)late[nd - 1] / 1000.0 : -1);
		cJSON_AddNumberToObject(d, "measured", (double)nd);
		free(late);
	}
	cJSON_AddNumberToObject(j, "lost", (double)lost);
	cJSON_AddNumberToObject(j, "duplicated", (double)dup);
	cJSON_AddNumberToObject(j, "wrong", (double)wrong);
	cJSON_AddNumberToObject(j, "produce_errors", (double)atomic_load(&bench_produce_errors));
	cJSON_AddNumberToObject(j, "broker_deleted", (double)r->broker_deleted);
	add_num(j, "hub_cpu_s", r->hub_cpu_s);
	add_num(j, "hub_peak_rss_mib", r->hub_rss_mib);
	add_num(j, "ceiling_pg_tx_per_s", r->ceiling_pg);
	add_num(j, "ceiling_kafka_tx_per_s", r->ceiling_kafka);
	double lower = r->ceiling_pg < 0 ? r->ceiling_kafka
	               : r->ceiling_kafka < 0 || r->ceiling_pg < r->ceiling_kafka ? r->ceiling_pg
	                                                                        : r->ceiling_kafka;
	add_num(j, "ratio_to_ceiling", tps > 0 && lower > 0 ? tps / lower : -1);
	cJSON *pg = pg_written(&r->pg_before, &r->pg_after, o->count);
	if (pg)
		cJSON_AddItemToObject(j, "pg", pg);
	cJSON *s = cJSON_AddObjectToObject(j, "settings");
	cJSON_AddNumberToObject(s, "payload_bytes", o->payload_bytes);
	cJSON_AddNumberToObject(s, "rollback_pct", o->rollback_pct);
	cJSON_AddNumberToObject(s, "delayed_pct", o->delayed_pct);
	cJSON_AddNumberToObject(s, "delay_ms", (double)o->delay_ms);
	cJSON_AddNumberToObject(s, "keys", (double)o->keys);
	cJSON_AddNumberToObject(s, "partitions", o->partitions);
	cJSON_AddNumberToObject(s, "warmup_s", o->warmup_s);
	cJSON_AddNumberToObject(l, "measured", (double)nl);
	cJSON_AddStringToObject(s, "forward_topic", o->forward_topic);
	char *text = cJSON_PrintUnformatted(j);
	printf("%s\n", text ? text : "{}");
	fflush(stdout);
	free(text);
	cJSON_Delete(j);
	int bad = lost > 0 || wrong > 0 || (o->exactly_once && dup > 0);
	fprintf(stderr, "bench: %s: %lld committed, %lld lost, %lld duplicated, %lld wrong\n",
	        bad ? "FAILED" : "ok", (long long)v->committed, (long long)lost, (long long)dup,
	        (long long)wrong);
	if (r->broker_deleted > 0)
		fprintf(stderr, "bench: the broker deleted %lld records of this run from the control "
		                "topic (its retention; the embedded broker keeps about 5 MiB a "
		                "partition): what is lost may be those, never read by the hub\n",
		        (long long)r->broker_deleted);
	return bad ? 1 : 0;
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
	r.start_us = now_us();
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
		drain_from = now_us();
	}
	atomic_store(&v.gen_done_us, now_us());
	atomic_store(&v.generating, 0);
	int64_t report_at = now_us() + 1000000;
	while (atomic_load(&v.gen_done_us) && pthread_tryjoin_np(th, NULL) == EBUSY) {
		usleep(50000);
		if (now_us() >= report_at) {
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
