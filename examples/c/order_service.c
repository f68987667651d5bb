/* order_service.c: an order service on txhub, in C: the producer's side to
 * copy. Built with nothing but `pkg-config --cflags --libs txhub`.
 *
 * Placing an order is txhub's three steps around the service's own
 * PostgreSQL transaction: (1) prepare: txhub stores the order.created event
 * and publishes nothing yet; (2) the local transaction: the order row and a
 * txhub_barrier row saying "committed" commit together; (3) commit: txhub
 * publishes. If the service dies between 1 and 3, txhub asks `serve`, which
 * answers from the database and never guesses: it inserts (key,
 * 'rolled_back') unless the 'committed' row is there, so a local
 * transaction that had not committed by then never can.
 *
 *   order_service order ORDER-ID [--crash after-prepare|before-commit]
 *   order_service serve PORT [SECRET]
 * Settings from the environment: TXHUB_PG, TXHUB_BROKERS, and
 * ORDERS_CONTROL_TOPIC, ORDERS_FORWARD_TOPIC, ORDERS_CHECKBACK_URL.
 *
 * The HTTP side is deliberately minimal (one request per connection, one
 * at a time); a real service puts txhub_checkback_handle() behind its own
 * HTTP server. */
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <txhub.h>

#define BIZ_ID "shop"

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

static PGconn *db_connect(void)
{
	PGconn *db = PQconnectdb(env_or("TXHUB_PG", ""));
	if (PQstatus(db) != CONNECTION_OK) {
		fprintf(stderr, "order_service: %s", PQerrorMessage(db));
		exit(1);
	}
	PQclear(PQexec(db, "SET client_min_messages = warning"));
	PQclear(PQexec(db,
		"CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount numeric NOT NULL);"
		"CREATE TABLE IF NOT EXISTS txhub_barrier (message_key text PRIMARY KEY,"
		" outcome text NOT NULL CHECK (outcome IN ('committed', 'rolled_back')))"));
	return db;
}

/* The local transaction: the order and its barrier row, or neither.
 * Returns 0 when committed. */
static int local_transaction(PGconn *db, const char *key)
{
	const char *params[] = {key};
	PQclear(PQexec(db, "BEGIN"));
	PGresult *a = PQexecParams(db, "INSERT INTO orders (id, amount) VALUES ($1, 12.50)", 1, NULL,
	                           params, NULL, NULL, 0);
	PGresult *b = PQexecParams(db, "INSERT INTO txhub_barrier (message_key, outcome) "
	                           "VALUES ($1, 'committed')", 1, NULL, params, NULL, NULL, 0);
	int ok = PQresultStatus(a) == PGRES_COMMAND_OK && PQresultStatus(b) == PGRES_COMMAND_OK;
	PQclear(a);
	PQclear(b);
	PGresult *c = PQexec(db, ok ? "COMMIT" : "ROLLBACK");
	ok = ok && PQresultStatus(c) == PGRES_COMMAND_OK;
	PQclear(c);
	return ok ? 0 : -1;
}

static int place_order(const char *key, const char *crash)
{
	char err[512], payload[512];
	txhub_producer_config cfg = {.brokers = env_or("TXHUB_BROKERS", "localhost:9092"),
	                             .control_topic = env_or("ORDERS_CONTROL_TOPIC", "txhub.control")};
	txhub_producer *p;
	if (txhub_producer_new(&cfg, &p, err, sizeof err) != TXHUB_OK) {
		fprintf(stderr, "order_service: %s\n", err);
		return 1;
	}
	snprintf(payload, sizeof payload, "{\"order_id\":\"%s\",\"amount\":12.50}", key);
	txhub_message m = {.biz_id = BIZ_ID, .message_key = key,
	                   .payload_kind = TXHUB_PAYLOAD_JSON, .payload = payload,
	                   .payload_len = strlen(payload),
	                   .forward_topic = env_or("ORDERS_FORWARD_TOPIC", "orders.created"),
	                   .forward_key = key,
	                   .checkback_url = env_or("ORDERS_CHECKBACK_URL", "http://127.0.0.1:8080/txhub/check")};
	PGconn *db = db_connect();
	int rc = 1;
	if (txhub_producer_prepare(p, &m, err, sizeof err) != TXHUB_OK) { /* 1 */
		fprintf(stderr, "order_service: prepare: %s\n", err);
	} else if (crash && strcmp(crash, "after-prepare") == 0) {
		_exit(3); /* the demo's crash: no local transaction, no decision */
	} else if (local_transaction(db, key) != 0) { /* 2 */
		/* a duplicate order, or a check-back declared it rolled back */
		fprintf(stderr, "order_service: %s: not placed: %s", key, PQerrorMessage(db));
		txhub_producer_rollback(p, BIZ_ID, key, err, sizeof err);
	} else if (crash && strcmp(crash, "before-commit") == 0) {
		_exit(3); /* committed locally, no decision sent: the check-back finds it */
	} else if (txhub_producer_commit(p, BIZ_ID, key, err, sizeof err) != TXHUB_OK) { /* 3 */
		fprintf(stderr, "order_service: commit: %s (the check-back will settle it)\n", err);
	} else {
		printf("%s: placed\n", key);
		rc = 0;
	}
	PQfinish(db);
	txhub_producer_destroy(p, 5000);
	return rc;
}

/* The check-back's decision, from the barrier (see the top of the file). */
static int decide(const txhub_checkback_request *req, txhub_outcome *outcome, void *opaque)
{
	PGconn *db = opaque;
	const char *params[] = {req->message_key};
	if (strcmp(req->biz_id, BIZ_ID) != 0)
		return -1;
	PGresult *r = PQexecParams(db,
		"WITH ins AS (INSERT INTO txhub_barrier (message_key, outcome) VALUES ($1, 'rolled_back') "
		"ON CONFLICT (message_key) DO NOTHING RETURNING outcome) "
		"SELECT outcome FROM ins UNION ALL "
		"SELECT outcome FROM txhub_barrier WHERE message_key = $1", 1, NULL, params, NULL, NULL, 0);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) >= 1;
	if (ok)
		*outcome = strcmp(PQgetvalue(r, 0, 0), "committed") == 0 ? TXHUB_COMMITTED
		                                                         : TXHUB_ROLLED_BACK;
	PQclear(r);
	return ok ? 0 : -1; /* no row: the database failed us; never guess */
}

/* The value of header `name` in the request head, or NULL; cut at CR. */
static const char *header(char *head, const char *name, char *out, size_t outsz)
{
	size_t n = strlen(name);
	for (char *line = strstr(head, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
		if (strncasecmp(line + 2, name, n) == 0 && line[2 + n] == ':') {
			const char *v = line + 3 + n;
			while (*v == ' ')
				v++;
			size_t len = strcspn(v, "\r");
			snprintf(out, outsz, "%.*s", (int)len, v);
			return out;
		}
	}
	return NULL;
}

static void answer(int fd, char *head, PGconn *db, const char *secret)
{
	char target[4096], attempt[32], ts[32], sig[128];
	txhub_checkback_response resp = {404, "{\"error\":\"not a check-back path\"}"};
	/* the request line: GET <path>?<query> HTTP/1.1 */
	if (sscanf(head, "GET %4095s HTTP/1.", target) == 1) {
		char *query = strchr(target, '?');
		if (query)
			*query++ = '\0';
		if (strcmp(target, "/txhub/check") == 0) {
			txhub_checkback_config cfg = {.secret = secret};
			txhub_checkback_handle(&cfg, query, header(head, "X-Txhub-Attempt", attempt, sizeof attempt),
			                       header(head, "X-Txhub-Timestamp", ts, sizeof ts),
			                       header(head, "X-Txhub-Signature", sig, sizeof sig),
			                       decide, db, &resp);
		}
	}
	char out[512];
	int n = snprintf(out, sizeof out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
	                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", resp.http_status,
	                 resp.http_status == 200 ? "OK" : "Error", strlen(resp.body), resp.body);
	if (write(fd, out, (size_t)n) != n) /* one write: no Nagle delay */
		perror("order_service: write");
}

static int serve(int port, const char *secret)
{
	PGconn *db = db_connect();
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 64) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &alen) != 0) {
		perror("order_service: listen");
		return 1;
	}
	printf("listening on %d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int fd = accept(s, NULL, NULL);
		if (fd < 0)
			continue;
		char head[8192];
		size_t got = 0;
		ssize_t r;
		while (got < sizeof head - 1 && (r = read(fd, head + got, sizeof head - 1 - got)) > 0) {
			got += (size_t)r;
			head[got] = '\0';
			if (strstr(head, "\r\n\r\n"))
				break;
		}
		head[got] = '\0';
		if (strstr(head, "\r\n\r\n"))
			answer(fd, head, db, secret);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "order") == 0)
		return place_order(argv[2], argc >= 5 && strcmp(argv[3], "--crash") == 0 ? argv[4] : NULL);
	if (argc >= 3 && strcmp(argv[1], "serve") == 0)
		return serve(atoi(argv[2]), argc >= 4 ? argv[3] : getenv("TXHUB_CHECKBACK_SECRET"));
	fprintf(stderr, "usage: order_service order ORDER-ID [--crash after-prepare|before-commit]\n"
	                "       order_service serve PORT [SECRET]\n");
	return 2;
}
