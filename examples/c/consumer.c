/* consumer.c: a downstream consumer of orders.created, in C, that
 * processes each order once although txhub delivers at least once.
 *
 * Each record is claimed by its txhub-biz-id and txhub-message-key headers
 * in the same PostgreSQL transaction as the business write (a shipment
 * row), so the two commit together: a duplicate finds the claim and is
 * skipped, a failed write leaves no claim and the record is processed
 * again. Offsets are committed to Kafka after the database.
 *
 *   consumer TOPIC GROUP [IDLE-SECONDS]
 * IDLE-SECONDS: stop that long after the last record (or 30 s after the
 * start when none came); 0 or none: run forever.
 * Settings from the environment: TXHUB_PG, TXHUB_BROKERS. */
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <txhub.h>

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

static int exec_ok(PGconn *db, const char *sql)
{
	PGresult *r = PQexec(db, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	return ok;
}

/* Claim, write, mark, commit: one transaction. Returns the claim's result,
 * or 0 when the transaction failed (the record is then tried again). */
static int ship(PGconn *db, const void *biz, size_t blen, const void *key, size_t klen,
                const rd_kafka_message_t *m)
{
	txhub_claim claim;
	txhub_dedup_result res = 0;
	char err[512];
	if (!exec_ok(db, "BEGIN"))
		return 0;
	txhub_status st = txhub_dedup_claim(db, NULL, biz, blen, key, klen, &res, &claim, err, sizeof err);
	int ok = st == TXHUB_OK;
	if (ok && res == TXHUB_DEDUP_CLAIMED) {
		char value[1024];
		snprintf(value, sizeof value, "%.*s", (int)m->len, (const char *)m->payload);
		const char *params[] = {claim.message_key, value};
		PGresult *r = PQexecParams(db, "INSERT INTO shipments (order_id, event) VALUES ($1, $2)",
		                           2, NULL, params, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_COMMAND_OK &&
		     txhub_dedup_done(db, &claim, err, sizeof err) == TXHUB_OK;
		PQclear(r);
	}
	if (!ok)
		fprintf(stderr, "consumer: %s%s", st == TXHUB_OK ? "" : err, PQerrorMessage(db));
	ok = exec_ok(db, ok ? "COMMIT" : "ROLLBACK") && ok;
	return ok ? (int)res : 0;
}

static void handle(PGconn *db, rd_kafka_t *rk, rd_kafka_message_t *m)
{
	rd_kafka_headers_t *h = NULL;
	const void *biz = NULL, *key = NULL;
	size_t blen = 0, klen = 0;
	if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
	    rd_kafka_header_get_last(h, "txhub-biz-id", &biz, &blen) != RD_KAFKA_RESP_ERR_NO_ERROR ||
	    rd_kafka_header_get_last(h, "txhub-message-key", &key, &klen) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		printf("%d@%lld: skipped (no txhub headers)\n", m->partition, (long long)m->offset);
	} else {
		int res;
		/* busy elsewhere or a failed transaction: the same record again */
		while ((res = ship(db, biz, blen, key, klen, m)) == 0 || res == TXHUB_DEDUP_BUSY)
			sleep(1);
		printf("%d@%lld: %s\n", m->partition, (long long)m->offset,
		       res == TXHUB_DEDUP_CLAIMED ? "claimed" : "duplicate");
	}
	fflush(stdout);
	rd_kafka_commit_message(rk, m, 0);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: consumer TOPIC GROUP [IDLE-SECONDS]\n");
		return 2;
	}
	int idle_s = argc > 3 ? atoi(argv[3]) : 0;
	char err[512];
	PGconn *db = PQconnectdb(env_or("TXHUB_PG", ""));
	if (PQstatus(db) != CONNECTION_OK || txhub_dedup_create_table(db, NULL, err, sizeof err) != TXHUB_OK ||
	    !exec_ok(db, "SET client_min_messages = warning") ||
	    !exec_ok(db, "CREATE TABLE IF NOT EXISTS shipments (order_id text NOT NULL, event text)")) {
		fprintf(stderr, "consumer: %s%s\n", PQerrorMessage(db), err);
		return 1;
	}
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "bootstrap.servers", env_or("TXHUB_BROKERS", "localhost:9092"), err, sizeof err);
	rd_kafka_conf_set(c, "group.id", argv[2], err, sizeof err);
	rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
	rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err, sizeof err);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "consumer: %s\n", err);
		return 1;
	}
	rd_kafka_poll_set_consumer(rk);
	rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(topics, argv[1], RD_KAFKA_PARTITION_UA);
	rd_kafka_subscribe(rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	time_t start = time(NULL), last = 0;
	while (!idle_s || (last ? time(NULL) - last < idle_s : time(NULL) - start < 30)) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
		if (!m)
			continue;
		if (!m->err) {
			handle(db, rk, m);
			last = time(NULL);
		}
		rd_kafka_message_destroy(m);
	}
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	PQfinish(db);
	return 0;
}
