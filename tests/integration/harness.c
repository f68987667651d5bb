/* harness.c: see harness.h. */
#include "harness.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A client configuration for e's brokers, with e->kafka's properties. */
static rd_kafka_conf_t *client_conf(const h_env *e, char *es, size_t esz)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	cr_assert_eq(rd_kafka_conf_set(c, "bootstrap.servers", e->brokers, es, esz),
	             RD_KAFKA_CONF_OK, "%s", es);
	for (size_t i = 0; e->kafka[i] && e->kafka[i + 1]; i += 2)
		cr_assert_eq(rd_kafka_conf_set(c, e->kafka[i], e->kafka[i + 1], es, esz),
		             RD_KAFKA_CONF_OK, "%s: %s", e->kafka[i], es);
	return c;
}

static rd_kafka_t *producer;
static char producer_brokers[256];
static int hub_count;

/* The test producer, for the brokers e names (re-created when they change). */
static rd_kafka_t *producer_for(h_env *e)
{
	if (producer && strcmp(producer_brokers, e->brokers) == 0)
		return producer;
	if (producer) {
		rd_kafka_flush(producer, 5000);
		rd_kafka_destroy(producer);
	}
	char es[512];
	rd_kafka_conf_t *c = client_conf(e, es, sizeof es);
	rd_kafka_conf_set(c, "linger.ms", "1", es, sizeof es);
	producer = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(producer, "%s", es);
	snprintf(producer_brokers, sizeof producer_brokers, "%s", e->brokers);
	return producer;
}

static const char *env_or_die(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		cr_assert_fail("%s is not set: run the integration suite through tests/with-services.sh", name);
	return v;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

void h_setup(h_env *e, const char *name)
{
	memset(e, 0, sizeof *e);
	snprintf(e->name, sizeof e->name, "t_%s_%d", name, (int)getpid());
	snprintf(e->topic, sizeof e->topic, "ctl.%s", e->name);
	snprintf(e->brokers, sizeof e->brokers, "%s", env_or_die("TXHUB_BROKERS"));
	const char *base = env_or_die("TXHUB_PG");
	PGconn *admin = PQconnectdb(base);
	cr_assert(PQstatus(admin) == CONNECTION_OK, "connect: %s", PQerrorMessage(admin));
	PQclear(PQexec(admin, "SET client_min_messages = warning"));
	char sql[256];
	snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", e->name);
	PQclear(PQexec(admin, sql));
	snprintf(sql, sizeof sql, "CREATE DATABASE %s", e->name);
	PGresult *r = PQexec(admin, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(admin));
	PQclear(r);
	PQfinish(admin);
	snprintf(e->conninfo, sizeof e->conninfo, "%s dbname=%s", base, e->name);
	char err[2048];
	const char *args[] = {"migrate", NULL};
	int rc = h_txhub(e, args, err, sizeof err);
	cr_assert_eq(rc, 0, "txhub migrate failed: %s", err);
	e->db = PQconnectdb(e->conninfo);
	cr_assert(PQstatus(e->db) == CONNECTION_OK);
}

PGconn *h_fresh_database(const char *name, char *conninfo, size_t sz)
{
	const char *base = env_or_die("TXHUB_PG");
	PGconn *admin = PQconnectdb(base);
	cr_assert(PQstatus(admin) == CONNECTION_OK, "connect: %s", PQerrorMessage(admin));
	char q[256];
	PQclear(PQexec(admin, "SET client_min_messages = warning"));
	snprintf(q, sizeof q, "DROP DATABASE IF EXISTS %s", name);
	PQclear(PQexec(admin, q));
	snprintf(q, sizeof q, "CREATE DATABASE %s", name);
	PGresult *r = PQexec(admin, q);
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(admin));
	PQclear(r);
	PQfinish(admin);
	snprintf(conninfo, sz, "%s dbname=%s", base, name);
	PGconn *c = PQconnectdb(conninfo);
	cr_assert(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
	return c;
}

void h_teardown(h_env *e)
{
	if (e->db)
		PQfinish(e->db);
	e->db = NULL;
	if (producer) {
		rd_kafka_flush(producer, 5000);
		rd_kafka_destroy(producer);
		producer = NULL;
	}
}

/* The hubs and commands started, with their logs: h_hub_stop() shows the
 * log of one that does not stop. */
static struct {
	pid_t pid;
	char log[256];
} spawned[64];
static size_t spawned_n;

static pid_t spawn(h_env *e, const char *const *argv_tail, const char *const *settings,
                   const char *logpath)
{
	const char *bin = env_or_die("TXHUB_BIN");
	const char *argv[64];
	char pgset[600], topicset[200], groupset[200], brokerset[300];
	int n = 0;
	argv[n++] = bin;
	/* (-X words among argv_tail count too: h_txhub's) */
	int consumer = h_consumer_protocol(settings) || h_consumer_protocol(argv_tail);
	for (; argv_tail && *argv_tail; argv_tail++)
		argv[n++] = *argv_tail;
	snprintf(pgset, sizeof pgset, "pg=%s", e->conninfo);
	snprintf(topicset, sizeof topicset, "control_topic=%s", e->topic);
	snprintf(groupset, sizeof groupset, "group=%s", e->name);
	snprintf(brokerset, sizeof brokerset, "brokers=%s", e->brokers);
	const char *base[] = {pgset, topicset, groupset, brokerset,
	                      "kafka.max.poll.interval.ms=10000",
	                      /* short group time-outs: the mock cluster waits them out (the
	                       * consumer protocol takes them from the broker: deploy/kafka.sh
	                       * sets them as short) */
	                      consumer ? "kafka.group.protocol=consumer" : "kafka.session.timeout.ms=6000",
	                      consumer ? NULL : "kafka.heartbeat.interval.ms=500", NULL};
	for (const char *const *s = base; *s; s++) {
		argv[n++] = "-X";
		argv[n++] = *s;
	}
	for (; settings && *settings && n < 60; settings++) {
		/* every rebalance of the consumer protocol is incremental, and
		 * librdkafka refuses an assignor with it */
		if (consumer && strncmp(*settings, "kafka.partition.assignment.strategy=", 36) == 0)
			continue;
		argv[n++] = "-X";
		argv[n++] = *settings;
	}
	argv[n] = NULL;
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	spawned[spawned_n % 64].pid = pid;
	snprintf(spawned[spawned_n % 64].log, sizeof spawned[0].log, "%s", logpath);
	spawned_n++;
	return pid;
}

pid_t h_hub_start(h_env *e, const char *const *settings)
{
	char log[256];
	snprintf(log, sizeof log, "/tmp/txhub-%s-%d.log", e->name, ++hub_count);
	const char *run[] = {"run", NULL};
	return spawn(e, run, settings, log);
}

pid_t h_command_start(h_env *e, const char *const *args, const char *const *settings)
{
	char log[256];
	snprintf(log, sizeof log, "/tmp/txhub-%s-%d.log", e->name, ++hub_count);
	return spawn(e, args, settings, log);
}

const char *h_hub_log(char *out, size_t outsz, h_env *e)
{
	snprintf(out, outsz, "/tmp/txhub-%s-%d.log", e->name, hub_count);
	return out;
}

long h_log_lines(const char *path, const char *needle)
{
	return h_log_first(path, needle, NULL, 0);
}

long h_wait_log_lines(const char *path, const char *needle, long n, int timeout_ms)
{
	long got = 0;
	for (int waited = 0; (got = h_log_lines(path, needle)) < n && waited < timeout_ms;
	     waited += 50)
		h_pause_ms(50);
	return got;
}

long h_log_first(const char *path, const char *needle, char *first, size_t firstsz)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot read %s", path);
	char line[8192];
	long n = 0;
	if (first && firstsz)
		first[0] = '\0';
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle) && n++ == 0 && first)
			snprintf(first, firstsz, "%s", line);
	fclose(f);
	return n;
}

/* How long a hub may take to stop on SIGTERM before h_hub_stop() says it
 * did not: far above the few seconds it takes, even under CI's load. */
#define H_STOP_MS 120000

int h_hub_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	for (int waited = 0; waited < H_STOP_MS; waited += 50) {
		int st;
		pid_t got = waitpid(pid, &st, WNOHANG);
		if (got == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (got < 0 && errno != EINTR)
			return -1;
		h_pause_ms(50);
	}
	/* a hub that does not stop: where its threads are (when gdb is
	 * there), its log's end, and the test fails on -1 rather than at its
	 * time-out, which says nothing */
	const char *log = NULL;
	for (size_t i = 0; i < spawned_n && i < 64; i++)
		if (spawned[i].pid == pid)
			log = spawned[i].log;
	fprintf(stderr, "h_hub_stop: pid %d did not stop within %d s of SIGTERM (log %s)\n", (int)pid,
	        H_STOP_MS / 1000, log ? log : "unknown");
	char cmd[512];
	snprintf(cmd, sizeof cmd,
	         "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' 2>&1 "
	         "| grep -E '^(Thread|#)' >&2; [ -n '%s' ] && tail -n 40 '%s' >&2",
	         (int)pid, log ? log : "", log ? log : "/dev/null");
	if (system(cmd) < 0)
		fprintf(stderr, "h_hub_stop: cannot run: %s\n", cmd);
	h_hub_kill(pid);
	return -1;
}

void h_hub_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

int h_wait_exit(pid_t pid, int timeout_ms)
{
	for (int waited = 0; waited < timeout_ms; waited += 50) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		h_pause_ms(50);
	}
	h_hub_kill(pid);
	return -1;
}

int h_txhub(h_env *e, const char *const *args, char *errbuf, size_t errsz)
{
	char log[256];
	snprintf(log, sizeof log, "/tmp/txhub-%s-cmd.log", e->name);
	pid_t pid = spawn(e, args, NULL, log);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	FILE *f = fopen(log, "r");
	size_t got = f ? fread(errbuf, 1, errsz - 1, f) : 0;
	errbuf[got] = '\0';
	if (f)
		fclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Read what the file at path holds (up to sz - 1 bytes) and remove it. */
static void slurp(const char *path, char *buf, size_t sz)
{
	FILE *f = fopen(path, "r");
	size_t got = f ? fread(buf, 1, sz - 1, f) : 0;
	buf[got] = '\0';
	if (f)
		fclose(f);
	unlink(path);
}

int h_txhub_io(h_env *e, const char *const *args, char *out, size_t outsz, char *errbuf,
               size_t errsz)
{
	const char *bin = env_or_die("TXHUB_BIN");
	char opath[256], epath[256];
	snprintf(opath, sizeof opath, "/tmp/txhub-%s-io.out", e->name);
	snprintf(epath, sizeof epath, "/tmp/txhub-%s-io.err", e->name);
	char pgset[600], topicset[200], groupset[200], brokerset[300];
	snprintf(pgset, sizeof pgset, "pg=%s", e->conninfo);
	snprintf(topicset, sizeof topicset, "control_topic=%s", e->topic);
	snprintf(groupset, sizeof groupset, "group=%s", e->name);
	snprintf(brokerset, sizeof brokerset, "brokers=%s", e->brokers);
	const char *argv[64];
	int n = 0;
	argv[n++] = bin;
	/* the settings first: a "--" among args ends the options */
	const char *base[] = {pgset, topicset, groupset, brokerset, NULL};
	for (const char *const *s = base; *s; s++) {
		argv[n++] = "-X";
		argv[n++] = *s;
	}
	for (; *args && n < 62; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fo = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fo >= 0)
			dup2(fo, 1);
		if (fe >= 0)
			dup2(fe, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	slurp(opath, out, outsz);
	slurp(epath, errbuf, errsz);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void h_pause_ms(long ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

void h_send(h_env *e, int partition, const char *key, const void *value, size_t len)
{
	for (;;) {
		rd_kafka_resp_err_t err = rd_kafka_producev(
			producer_for(e), RD_KAFKA_V_TOPIC(e->topic),
			RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
			RD_KAFKA_V_KEY(key, key ? strlen(key) : 0), RD_KAFKA_V_VALUE((void *)value, len),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
		if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(producer_for(e), 50);
			continue;
		}
		cr_assert_eq(err, 0, "produce: %s", rd_kafka_err2str(err));
		return;
	}
}

void h_send_str(h_env *e, int partition, const char *key, const char *json)
{
	h_send(e, partition, key, json, strlen(json));
}

void h_flush(void)
{
	if (producer)
		/* a broker restarted on a loaded machine may take its time */
		cr_assert_eq(rd_kafka_flush(producer, 120000), 0, "flush timed out after 120 s");
}

void h_exec(PGconn *db, const char *sql)
{
	PGresult *r = PQexec(db, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", sql, PQerrorMessage(db));
	PQclear(r);
}

char *h_query(h_env *e, const char *sql, char *out, size_t outsz)
{
	PGresult *r = PQexec(e->db, sql);
	cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(e->db));
	if (PQntuples(r) == 0)
		snprintf(out, outsz, "%s", "");
	else if (PQgetisnull(r, 0, 0))
		snprintf(out, outsz, "%s", "NULL");
	else
		snprintf(out, outsz, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return out;
}

long h_count(h_env *e, const char *sql)
{
	char buf[64];
	return atol(h_query(e, sql, buf, sizeof buf));
}

/* The last lines of the hub's log, into the test's output: what a failed
 * wait needs to be understood where only that output is kept (CI). */
static void log_tail(h_env *e, int lines)
{
	char path[256], line[1024];
	if (hub_count == 0)
		return;
	FILE *f = fopen(h_hub_log(path, sizeof path, e), "r");
	if (!f)
		return;
	long total = 0;
	while (fgets(line, sizeof line, f))
		total += strchr(line, '\n') != NULL;
	rewind(f);
	cr_log_warn("the last %d lines of %s:", lines, path);
	for (long n = 0; fgets(line, sizeof line, f);) {
		int whole = strchr(line, '\n') != NULL;
		if (n >= total - lines)
			cr_log_warn("| %.*s", (int)strcspn(line, "\n"), line);
		n += whole;
	}
	fclose(f);
}

int h_wait(h_env *e, const char *sql, const char *expect, int timeout_ms)
{
	char buf[4096];
	for (int waited = 0;; waited += 100) {
		if (strcmp(h_query(e, sql, buf, sizeof buf), expect) == 0)
			return 1;
		if (waited >= timeout_ms) {
			cr_log_warn("h_wait: %s gave \"%s\", wanted \"%s\"", sql, buf, expect);
			log_tail(e, 40);
			return 0;
		}
		sleep_ms(100);
	}
}

static size_t read_topic(h_env *e, const char *topic, int idle_ms, const char *isolation,
                         h_record **out)
{
	char es[512];
	rd_kafka_conf_t *c = client_conf(e, es, sizeof es);
	rd_kafka_conf_set(c, "group.id", "harness-reader", es, sizeof es);
	rd_kafka_conf_set(c, "enable.auto.commit", "false", es, sizeof es);
	rd_kafka_conf_set(c, "enable.partition.eof", "true", es, sizeof es);
	if (isolation)
		cr_assert_eq(rd_kafka_conf_set(c, "isolation.level", isolation, es, sizeof es),
		             RD_KAFKA_CONF_OK, "%s", es);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, es, sizeof es);
	cr_assert_not_null(rk, "%s", es);
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	int nparts = 0;
	for (int i = 0; i < 50 && nparts == 0; i++) {
		if (rd_kafka_metadata(rk, 0, t, &md, 5000) == 0) {
			if (md->topic_cnt == 1 && md->topics[0].err == 0)
				nparts = md->topics[0].partition_cnt;
			rd_kafka_metadata_destroy(md);
		}
		if (nparts == 0)
			sleep_ms(100);
	}
	rd_kafka_topic_destroy(t);
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(nparts);
	for (int p = 0; p < nparts; p++)
		rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
	rd_kafka_assign(rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	size_t n = 0, cap = 0;
	h_record *recs = NULL;
	/* The quiet time counts once every partition has been read to its end
	 * (its first end-of-partition event), so that a slow start (a loaded
	 * machine: connecting, looking up offsets) is not taken for an empty
	 * topic; 120 s at most for that. */
	char *at_end = calloc((size_t)nparts + 1, 1);
	int ends = 0, idle = 0, waited = 0;
	while (idle < idle_ms) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
		if (!m) {
			waited += 100;
			if (ends == nparts || waited >= 120000)
				idle += 100;
			continue;
		}
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			if (m->partition >= 0 && m->partition < nparts && !at_end[m->partition]) {
				at_end[m->partition] = 1;
				ends++;
			}
			rd_kafka_message_destroy(m);
			continue;
		}
		if (m->err) {
			rd_kafka_message_destroy(m);
			continue;
		}
		idle = 0;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			recs = realloc(recs, cap * sizeof *recs);
			cr_assert_not_null(recs);
		}
		h_record *r = &recs[n++];
		memset(r, 0, sizeof *r);
		r->partition = m->partition;
		r->timestamp_ms = rd_kafka_message_timestamp(m, NULL);
		r->key_null = m->key == NULL;
		r->key_len = m->key_len;
		r->key = calloc(1, m->key_len + 1);
		if (m->key)
			memcpy(r->key, m->key, m->key_len);
		r->value_len = m->len;
		r->value = calloc(1, m->len + 1);
		if (m->len)
			memcpy(r->value, m->payload, m->len);
		rd_kafka_headers_t *hdrs = NULL;
		size_t hl = 0;
		r->headers = calloc(1, 1);
		if (rd_kafka_message_headers(m, &hdrs) == 0) {
			const char *name;
			const void *val;
			size_t vs;
			for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &vs) == 0; i++) {
				size_t add = strlen(name) + vs + 3;
				r->headers = realloc(r->headers, hl + add);
				hl += (size_t)snprintf(r->headers + hl, add, "%s=%.*s\n", name, (int)vs,
				                       (const char *)val);
			}
		}
		rd_kafka_message_destroy(m);
	}
	free(at_end);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	*out = recs;
	return n;
}

size_t h_read_topic(h_env *e, const char *topic, int idle_ms, h_record **out)
{
	return read_topic(e, topic, idle_ms, NULL, out); /* librdkafka's default */
}

size_t h_read_topic_committed(h_env *e, const char *topic, int idle_ms, h_record **out)
{
	return read_topic(e, topic, idle_ms, "read_committed", out);
}

size_t h_read_topic_uncommitted(h_env *e, const char *topic, int idle_ms, h_record **out)
{
	return read_topic(e, topic, idle_ms, "read_uncommitted", out);
}

pid_t h_devbroker_start(h_env *e, const char *const *args, FILE **commands)
{
	const char *bin = env_or_die("TXHUB_BIN");
	const char *argv[40] = {bin, "devbroker"};
	int n = 2, out[2], in[2] = {-1, -1};
	for (; args && *args && n < 37; args++)
		argv[n++] = *args;
	if (commands)
		argv[n++] = "--commands";
	argv[n] = NULL;
	cr_assert_eq(pipe(out), 0);
	cr_assert(!commands || pipe(in) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		if (commands) {
			dup2(in[0], 0);
			close(in[0]);
			close(in[1]);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	if (commands) {
		close(in[0]);
		*commands = fdopen(in[1], "w");
		cr_assert_not_null(*commands);
	}
	char line[256] = "";
	FILE *f = fdopen(out[0], "r");
	cr_assert_not_null(fgets(line, sizeof line, f), "devbroker printed nothing");
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	snprintf(e->brokers, sizeof e->brokers, "%s", line);
	return pid;
}

void h_devbroker_stop(pid_t pid, FILE *commands)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	if (commands)
		fclose(commands);
}

typedef struct {
	char *data;
	size_t len;
} http_body;

static size_t on_http_data(char *p, size_t size, size_t n, void *opaque)
{
	http_body *b = opaque;
	b->data = realloc(b->data, b->len + size * n + 1);
	cr_assert_not_null(b->data);
	memcpy(b->data + b->len, p, size * n);
	b->len += size * n;
	b->data[b->len] = '\0';
	return size * n;
}

long h_http_get(int port, const char *path, char **out)
{
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	http_body b = {calloc(1, 1), 0};
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_http_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	long code = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	*out = b.data;
	return code;
}

int h_http_wait(int port, const char *path, long want, int timeout_ms, char **last)
{
	for (int waited = 0;; waited += 200) {
		free(*last);
		*last = NULL;
		if (h_http_get(port, path, last) == want)
			return 1;
		if (waited >= timeout_ms)
			return 0;
		sleep_ms(200);
	}
}

/* Whether the series line p (up to its value) has the label pair want
 * ("k=\"v\"", len wl) among its labels. */
static int has_label(const char *p, size_t len, const char *want, size_t wl)
{
	for (size_t i = 0; i + wl <= len; i++)
		if ((p[i] == '{' || p[i] == ',') && strncmp(p + i + 1, want, wl) == 0 &&
		    (p[i + 1 + wl] == ',' || p[i + 1 + wl] == '}'))
			return 1;
	return 0;
}

double h_metric(int port, const char *name)
{
	char *text = NULL;
	cr_assert_eq(h_http_get(port, "/metrics", &text), 200, "/metrics: %s", text ? text : "");
	double v = h_series(text, name);
	free(text);
	return v;
}

double h_series(const char *text, const char *name)
{
	size_t nl = strcspn(name, "{");
	const char *labels = name[nl] == '{' ? name + nl + 1 : "";
	double sum = 0;
	int found = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (*p == '#' || strncmp(p, name, nl) != 0 || (p[nl] != ' ' && p[nl] != '{'))
			continue;
		size_t len = strcspn(p, " \n"); /* label values hold no space here */
		int all = 1;
		/* each pair k="v" of the query, up to its closing quote */
		for (const char *q = labels; all && *q && *q != '}';) {
			const char *end = strchr(q, '"');
			end = end ? strchr(end + 1, '"') : NULL;
			if (!end)
				break;
			all = has_label(p, len, q, (size_t)(end + 1 - q));
			q = end + 1;
			if (*q == ',')
				q++;
		}
		if (!all)
			continue;
		sum += atof(p + len + 1);
		found = 1;
	}
	return found ? sum : -1;
}

int h_real_kafka(void)
{
	return getenv("TXHUB_TEST_KAFKA_DIR") != NULL;
}

const char *h_kafka_version(char *out, size_t outsz)
{
	const char *dir = getenv("TXHUB_TEST_KAFKA_DIR");
	char path[512];
	out[0] = '\0';
	if (!dir)
		return out;
	snprintf(path, sizeof path, "%s/kafka-version", dir);
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(out, (int)outsz, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\r\n")] = '\0';
	return out;
}

int h_kafka_major(void)
{
	char version[32];
	return atoi(h_kafka_version(version, sizeof version));
}

int h_consumer_protocol(const char *const *settings)
{
	const char *env = getenv("TXHUB_TEST_GROUP_PROTOCOL");
	if (env && strcmp(env, "consumer") == 0)
		return 1;
	for (; settings && *settings; settings++)
		if (strcmp(*settings, "kafka.group.protocol=consumer") == 0)
			return 1;
	return 0;
}

const char *h_consumer_protocol_missing(void)
{
	static char why[256];
	if (h_kafka_major() < 4)
		snprintf(why, sizeof why, "needs Apache Kafka 4.0 or later (TXHUB_TEST_KAFKA_DIR from "
		         "TXHUB_KAFKA_VERSION=4.4.0 deploy/kafka.sh start DIR)");
	else if (rd_kafka_version() < 0x020c0000)
		snprintf(why, sizeof why, "needs librdkafka 2.12 or later, and this build runs %s "
		         "(deploy/librdkafka.sh)", rd_kafka_version_str());
	else
		return NULL;
	return why;
}

int h_kafka_sh(const char *const *args, char *out, size_t outsz)
{
	char script[512];
	snprintf(script, sizeof script, "%s/deploy/kafka.sh", TXHUB_SOURCE_ROOT);
	const char *argv[48] = {script};
	int n = 1, fd[2];
	for (; *args && n < 47; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	cr_assert_eq(pipe(fd), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]); /* (the broker it starts must not hold the pipe open) */
		execv(script, (char *const *)argv);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	char line[512];
	if (out && outsz)
		out[0] = '\0';
	for (int first = 1; fgets(line, sizeof line, f); first = 0)
		if (first && out)
			snprintf(out, outsz, "%.*s", (int)strcspn(line, "\n"), line);
	fclose(f);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void h_wait_not_ready(int port, const char *const *needles, int timeout_ms)
{
	char *b = NULL;
	int found = 0;
	for (int waited = 0; !found && waited < timeout_ms; waited += 200) {
		free(b);
		b = NULL;
		found = h_http_get(port, "/readyz", &b) == 503;
		for (const char *const *n = needles; found && *n; n++)
			found = strstr(b, *n) != NULL;
		if (!found)
			sleep_ms(200);
	}
	cr_assert(found, "/readyz: %s", b);
	cr_assert(strchr(b, '\n') == b + strlen(b) - 1, "more than one line: %s", b);
	free(b);
}

int h_create_topic(const h_env *e, const char *topic, int partitions,
                   const char *key, const char *value, char *es, size_t esz)
{
	rd_kafka_conf_t *c = client_conf(e, es, esz);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, esz);
	cr_assert_not_null(rk, "%s", es);
	rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, es, esz);
	cr_assert_not_null(nt, "%s", es);
	if (key)
		rd_kafka_NewTopic_set_config(nt, key, value);
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
	rd_kafka_NewTopic_destroy(nt);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
	cr_assert_not_null(ev, "no answer to creating %s within 30 s", topic);
	rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
	snprintf(es, esz, "%s", rd_kafka_event_error_string(ev) ? rd_kafka_event_error_string(ev) : "");
	size_t n = 0;
	const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
	const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
	if (!err && n == 1 && rd_kafka_topic_result_error(tr[0])) {
		err = rd_kafka_topic_result_error(tr[0]);
		snprintf(es, esz, "%s", rd_kafka_topic_result_error_string(tr[0]));
	}
	rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return (int)err;
}

static rd_kafka_AclOperation_t acl_operation(const char *name)
{
	static const struct {
		const char *name;
		rd_kafka_AclOperation_t op;
	} ops[] = {{"Read", RD_KAFKA_ACL_OPERATION_READ},
	           {"Write", RD_KAFKA_ACL_OPERATION_WRITE},
	           {"Create", RD_KAFKA_ACL_OPERATION_CREATE},
	           {"Describe", RD_KAFKA_ACL_OPERATION_DESCRIBE},
	           {"DescribeConfigs", RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS}};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (!strcmp(ops[i].name, name))
			return ops[i].op;
	cr_assert_fail("h_kafka_allow: no ACL operation %s", name);
	return RD_KAFKA_ACL_OPERATION_UNKNOWN;
}

void h_kafka_allow(const h_env *e, const char *principal, const char *ops, const char *kind,
                   const char *name)
{
	rd_kafka_ResourceType_t type = !strcmp(kind, "topic")   ? RD_KAFKA_RESOURCE_TOPIC
	                               : !strcmp(kind, "group") ? RD_KAFKA_RESOURCE_GROUP
	                                                        : RD_KAFKA_RESOURCE_UNKNOWN;
	cr_assert_neq(type, RD_KAFKA_RESOURCE_UNKNOWN, "h_kafka_allow: no resource kind %s", kind);
	char es[512], buf[200];
	rd_kafka_AclBinding_t *acls[8];
	size_t n = 0;
	snprintf(buf, sizeof buf, "%s", ops);
	for (char *op = strtok(buf, ","); op; op = strtok(NULL, ",")) {
		cr_assert_lt(n, sizeof acls / sizeof acls[0]);
		acls[n] = rd_kafka_AclBinding_new(type, name, RD_KAFKA_RESOURCE_PATTERN_LITERAL,
		                                  principal, "*", acl_operation(op),
		                                  RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW, es, sizeof es);
		cr_assert_not_null(acls[n], "%s", es);
		n++;
	}
	rd_kafka_conf_t *c = client_conf(e, es, sizeof es);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(rk, "%s", es);
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_CreateAcls(rk, acls, n, NULL, q);
	rd_kafka_AclBinding_destroy_array(acls, n);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
	cr_assert_not_null(ev, "no answer to the ACLs on %s %s within 30 s", kind, name);
	cr_assert_eq(rd_kafka_event_error(ev), 0, "ACLs on %s %s: %s", kind, name,
	             rd_kafka_event_error_string(ev));
	size_t nres = 0;
	const rd_kafka_acl_result_t **res =
		rd_kafka_CreateAcls_result_acls(rd_kafka_event_CreateAcls_result(ev), &nres);
	cr_assert_eq(nres, n, "ACLs on %s %s: %zu answers to %zu", kind, name, nres, n);
	for (size_t i = 0; i < nres; i++) {
		const rd_kafka_error_t *err = rd_kafka_acl_result_error(res[i]);
		cr_assert_null(err, "ACL %zu on %s %s: %s", i, kind, name,
		               err ? rd_kafka_error_string(err) : "");
	}
	rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
}

int h_control_partitions(void)
{
	/* TXHUB_TEST_PARTITIONS: the crash suites with more partitions than
	 * the broker's default 4 (docs/contributing.md) */
	const char *np = getenv("TXHUB_TEST_PARTITIONS");
	return h_real_kafka() && np && atoi(np) > 0 ? atoi(np) : 4;
}

void h_control_topic(h_env *e)
{
	if (!h_real_kafka())
		return;
	char es[512];
	rd_kafka_resp_err_t err = (rd_kafka_resp_err_t)h_create_topic(
		e, e->topic, h_control_partitions(), NULL, NULL, es, sizeof es);
	cr_assert(!err || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS, "creating %s: %s: %s",
	          e->topic, rd_kafka_err2name(err), es);
}

h_env h_on_topic(const h_env *e, const char *suffix)
{
	h_env t = *e;
	int n = snprintf(t.topic, sizeof t.topic, "%.80s.%.10s", e->topic, suffix);
	cr_assert(n > 0 && (size_t)n < sizeof t.topic);
	return t;
}

void h_records_free(h_record *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].key);
		free(r[i].value);
		free(r[i].headers);
	}
	free(r);
}

void h_delete_records(h_env *e, int part, int64_t before)
{
	char es[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "bootstrap.servers", e->brokers, es, sizeof es);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(rk, "%s", es);
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, e->topic, part)->offset = before;
	rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(l);
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_DeleteRecords(rk, &del, 1, NULL, q);
	rd_kafka_DeleteRecords_destroy(del);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
	cr_assert_not_null(ev, "no answer to DeleteRecords within 30 s");
	cr_assert_eq(rd_kafka_event_error(ev), 0, "DeleteRecords: %s", rd_kafka_event_error_string(ev));
	const rd_kafka_topic_partition_list_t *res =
		rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
	cr_assert(res && res->cnt == 1 && res->elems[0].err == 0, "DeleteRecords: %s",
	          res && res->cnt == 1 ? rd_kafka_err2str(res->elems[0].err) : "no result");
	rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
}
