/* harness.h: helpers for the integration tests. Each test gets its own
 * database, control topic and consumer group, so tests can run in parallel
 * against the PostgreSQL and broker that tests/with-services.sh started
 * (TXHUB_PG, TXHUB_BROKERS, TXHUB_BIN in the environment). */
#ifndef TXHUB_HARNESS_H
#define TXHUB_HARNESS_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct {
	char name[64];      /* unique per test: database, topic and group */
	char conninfo[512]; /* the test's own database */
	char topic[96];     /* its control topic */
	char brokers[256];
	/* more librdkafka properties for the harness's own clients (key,
	 * value, ..., NULL), e.g. the credentials of a broker with SASL; the
	 * hub gets its kafka.* settings from the test */
	const char *kafka[16];
	PGconn *db;
} h_env;

/* An empty database named name (made again when it exists), not
 * migrated, for a test of migrations; its conninfo into conninfo. The
 * caller closes the connection returned. */
PGconn *h_fresh_database(const char *name, char *conninfo, size_t sz);

/* A fresh database (migrated) and names for this test. */
void h_setup(h_env *e, const char *name);
void h_teardown(h_env *e);

/* Start `txhub run` for e with extra "-X" settings (NULL-terminated list of
 * "key=value"); its log goes to /tmp/txhub-<name>-<n>.log. */
pid_t h_hub_start(h_env *e, const char *const *settings);
/* Start another long-running txhub command for e (args: the command and
 * its own arguments, NULL-terminated; settings as for h_hub_start), e.g.
 * {"console", NULL}; its log goes to /tmp/txhub-<name>-<n>.log, which
 * h_hub_log() then names. Stop it with h_hub_stop(). */
pid_t h_command_start(h_env *e, const char *const *args, const char *const *settings);
/* The log file of the hub h_hub_start() (or h_command_start()) started last. */
const char *h_hub_log(char *out, size_t outsz, h_env *e);
/* Lines of the file at path that hold needle. */
long h_log_lines(const char *path, const char *needle);
/* Wait up to timeout_ms for the log at path to hold at least n lines
 * holding needle; returns how many it holds. */
long h_wait_log_lines(const char *path, const char *needle, long n, int timeout_ms);
/* The same, and the first of them into first ("" when none). */
long h_log_first(const char *path, const char *needle, char *first, size_t firstsz);

/* SIGTERM and wait: returns the exit status (or 128+signal); -1 when it
 * had not stopped within 120 s (its threads' stacks and its log's end then
 * go to stderr, and it is killed). */
int h_hub_stop(pid_t pid);
void h_hub_kill(pid_t pid); /* SIGKILL and reap */
/* Wait up to timeout_ms for a hub that is to stop by itself (a failpoint):
 * its exit status (128+signal when killed); -1 when it had not stopped by
 * then (it is killed). */
int h_wait_exit(pid_t pid, int timeout_ms);

/* Run the txhub binary with args (NULL-terminated) and the test's database;
 * returns the exit status, standard error goes to errbuf. */
int h_txhub(h_env *e, const char *const *args, char *errbuf, size_t errsz);

/* The same, keeping standard output and standard error apart (each cut to
 * its buffer): for commands whose stdout is a document (--json). */
int h_txhub_io(h_env *e, const char *const *args, char *out, size_t outsz, char *errbuf,
               size_t errsz);

/* Sleep ms milliseconds. */
void h_pause_ms(long ms);

/* Produce one record to the control topic (partition -1: by key hash). */
void h_send(h_env *e, int partition, const char *key, const void *value, size_t len);
void h_send_str(h_env *e, int partition, const char *key, const char *json);
void h_flush(void);

/* Run sql on db (any connection); the test fails when it does. */
void h_exec(PGconn *db, const char *sql);

/* The first column of the first row of sql, as text ("" for no row, "NULL"
 * for null). */
char *h_query(h_env *e, const char *sql, char *out, size_t outsz);
long h_count(h_env *e, const char *sql);
/* Poll sql until it returns `expect` or timeout_ms pass; returns 1 on match. */
int h_wait(h_env *e, const char *sql, const char *expect, int timeout_ms);

/* A record read back from a forward topic. */
typedef struct {
	char *key;
	size_t key_len;
	int key_null;
	unsigned char *value;
	size_t value_len;
	char *headers; /* "name=value\n" lines */
	int partition;
	long long timestamp_ms; /* the record's timestamp (CreateTime: when the hub produced it) */
} h_record;

/* Everything on topic, reading until idle_ms pass with nothing new.
 * Returns the count; *out is an array the caller frees with h_records_free. */
size_t h_read_topic(h_env *e, const char *topic, int idle_ms, h_record **out);
/* The same with isolation.level=read_committed: what a consumer of
 * forward.mode = exactly_once sees (records of aborted transactions left
 * out). */
size_t h_read_topic_committed(h_env *e, const char *topic, int idle_ms, h_record **out);
/* ... and with read_uncommitted: aborted transactions' records too. */
size_t h_read_topic_uncommitted(h_env *e, const char *topic, int idle_ms, h_record **out);

/* Start `txhub devbroker` with args (NULL-terminated, e.g. "--deny-topic",
 * "t") and point e->brokers at it. With commands non-NULL, --commands is
 * added and *commands is its standard input ("deny TOPIC\n", "allow
 * TOPIC\n"; fflush after writing). Stop it with h_devbroker_stop(). */
pid_t h_devbroker_start(h_env *e, const char *const *args, FILE **commands);
void h_devbroker_stop(pid_t pid, FILE *commands);

/* GET http://127.0.0.1:port/path (5 s time-out); returns the HTTP status
 * (0: no answer) and the body in *out (the caller frees it). */
long h_http_get(int port, const char *path, char **out);
/* GET until the status is want or timeout_ms pass; returns 1 on want. The
 * last body is in *last (freed first when set; the caller frees it). */
int h_http_wait(int port, const char *path, long want, int timeout_ms, char **last);
/* In a Prometheus exposition, the sum of the series named like `name` whose
 * labels include every label `name` gives (`txhub_forwards_total{outcome="sent"}`
 * sums over the tenants), or -1 when there is none. */
double h_series(const char *text, const char *name);
/* The same in the /metrics of a hub listening on port (asserting a 200). */
double h_metric(int port, const char *name);

/* Whether the tests run against Apache Kafka (TXHUB_TEST_KAFKA_DIR, from
 * deploy/kafka.sh) rather than devbroker, which has no transactions. */
int h_real_kafka(void);

/* The major version of the Apache Kafka in TXHUB_TEST_KAFKA_DIR
 * (DIR/kafka-version, from deploy/kafka.sh); 0 for devbroker. */
int h_kafka_major(void);
/* The Apache Kafka version of TXHUB_TEST_KAFKA_DIR's broker
 * (DIR/kafka-version, e.g. "4.4.0") in out; "" when there is none. */
const char *h_kafka_version(char *out, size_t outsz);

/* Whether hubs started with settings run the consumer group protocol
 * (KIP-848): settings hold kafka.group.protocol=consumer, or
 * TXHUB_TEST_GROUP_PROTOCOL=consumer asks it of every hub the harness
 * starts. Those hubs get no session.timeout.ms or heartbeat.interval.ms (the
 * broker's then) and no partition.assignment.strategy from the harness or
 * the test. */
int h_consumer_protocol(const char *const *settings);

/* Why the consumer group protocol cannot run here (Apache Kafka 4.0 or
 * later and librdkafka 2.12 or later are needed), for cr_skip_test; NULL
 * when it can. */
const char *h_consumer_protocol_missing(void);

/* Run deploy/kafka.sh with args (NULL-terminated); the first line of its
 * standard output into out (when not NULL). Returns its exit status. */
int h_kafka_sh(const char *const *args, char *out, size_t outsz);

/* Wait up to timeout_ms for GET /readyz on port to answer 503 with one
 * line holding each of needles (NULL-terminated); fails the test
 * otherwise, showing the last answer. */
void h_wait_not_ready(int port, const char *const *needles, int timeout_ms);

/* Create topic with partitions (replication 1) and, unless key is NULL, one
 * topic setting; waits up to 30 s for the broker. Returns the broker's
 * answer for the topic (an rd_kafka_resp_err_t, 0: created), its text in es. */
int h_create_topic(const h_env *e, const char *topic, int partitions,
                   const char *key, const char *value, char *es, size_t esz);

/* Allow principal (e.g. "User:txhub") each of ops (comma-separated ACL
 * operation names: "Read,Describe") on one resource: kind is "topic" or
 * "group", name its literal name. Through the Admin API as e's client (an
 * administrator's credentials in e->kafka): the broker's own ACLs, as
 * kafka-acls.sh --add makes them, without that tool's JVM start.
 * (Transactional ids need kafka-acls.sh: librdkafka 2.0.2 has no such
 * resource type.) Fails the test unless the broker accepts every one
 * within 30 s. */
void h_kafka_allow(const h_env *e, const char *principal, const char *ops, const char *kind,
                   const char *name);

/* The partitions h_control_topic gives a control topic on Apache Kafka:
 * TXHUB_TEST_PARTITIONS, else 4 (the embedded broker's 4 always). */
int h_control_partitions(void);
/* Make e's control topic (h_control_partitions()) now, for a test that waits for a
 * hub to take its partitions before producing anything: Apache Kafka
 * creates a topic on a produce, not on a consumer's subscription. (The
 * embedded broker creates it on the subscription: nothing to do there.) */
void h_control_topic(h_env *e);
/* e with another control topic, <e's topic>.<suffix>, for sending to it
 * (e's database and brokers; nothing is made). */
h_env h_on_topic(const h_env *e, const char *suffix);
void h_records_free(h_record *r, size_t n);

/* Apache Kafka only: make the broker delete partition part of e's control
 * topic before offset `before` (DeleteRecords), as retention does. */
void h_delete_records(h_env *e, int part, int64_t before);

#endif
