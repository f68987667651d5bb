/* deadletter_base.c: what both modes of the dead-letter thread stand on
 * (deadletter_int.h): the producers' callbacks, parked rows read, a record
 * produced with its headers, statements over a batch's rows, failures
 * counted, logged and alerted. */
#include "deadletter.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "backoff.h"
#include "clock.h"
#include "forward_record.h"
#include "kafka.h"
#include "lane.h"
#include "log.h"
#include "metrics.h"
#include "sbuf.h"
#include "sql.h"
#include "deadletter_int.h"
#include "store.h"

void dl_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	dl_item *it = m->_private;
	if (it) {
		it->err = m->err;
		it->partition = m->partition;
		it->offset = m->offset;
	}
}

void dl_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)opaque;
	metrics_kafka_error();
	char line[1200];
	kafka_describe_error(rk, err, reason, line, sizeof line);
	log_warn("dead-letter: kafka: %s", line);
}

/* The parked rows of the owned partitions not dead-lettered yet, oldest
 * park first (binary results). */
static const char *SQL_PARKED =
	"SELECT m.biz_id, m.message_key, m.payload, m.forward_topic, m.forward_key, "
	"m.forward_headers::text, coalesce(m.last_error, ''), m.send_attempts::text, "
	"m.traceparent, m.tracestate, coalesce(m.trace_id, ''), m.updated_at::text "
	"FROM txhub.message_rows m "
	"WHERE m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND (m.src_topic, m.src_partition) IN (SELECT * FROM unnest($1::text[], $2::int[])) "
	/* exactly_once ($4): not those whose record may be committed already */
	"AND NOT ($4::bool AND EXISTS (SELECT 1 FROM txhub.dead_letter_pending p "
	"WHERE p.biz_id = m.biz_id AND p.message_key = m.message_key)) "
	"ORDER BY m.updated_at LIMIT $3";


/* A dead letter that failed, in the history of its row (with its tenant;
 * a row of another tenant's does not count), once per park (a
 * row parked again after a redrive gets a new one), while the row still
 * waits: `txhub status` reads the dead_letter_failed state from these rows
 * (ops_deadletter.h), a dead letter produced later ends it for the row.
 * $1, $2: the rows; $3: each one's reason. */
static const char *SQL_FAILED =
	"INSERT INTO txhub.history (biz_id, message_key, event, detail, tenant) "
	"SELECT m.biz_id, m.message_key, 'dead_letter_failed', x.d, m.tenant "
	"FROM unnest($1::text[], $2::text[], $3::text[]) AS x(b, k, d) "
	"JOIN txhub.message_rows m ON m.biz_id = x.b AND m.message_key = x.k "
	"WHERE m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND NOT EXISTS (SELECT 1 FROM txhub.history h WHERE h.biz_id = m.biz_id "
	"AND h.message_key = m.message_key AND h.at >= m.updated_at "
	"AND h.event = 'dead_letter_failed' AND (h.tenant IS NULL OR h.tenant = m.tenant))";

static char *col_text(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	size_t len = (size_t)PQgetlength(r, row, col);
	char *s = malloc(len + 1);
	if (s) {
		memcpy(s, PQgetvalue(r, row, col), len);
		s[len] = '\0';
	}
	return s;
}

void dl_items_free(dl_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		store_forward_free(&items[i].f);
		free(items[i].error);
	}
	free(items);
}

/* The partitions parts[0..n) as two arrays (topics, partitions); returns
 * 0, or -1 when out of memory (err). */
int dl_parts_arrays(const owned_part *parts, size_t n, sbuf *tb, sbuf *pb, char *err,
                        size_t errsz)
{
	sbuf_arr_begin(tb);
	sbuf_arr_begin(pb);
	for (size_t i = 0; i < n; i++) {
		sbuf_arr_text(tb, tp_topic(parts[i].tp));
		sbuf_arr_int(pb, tp_part(parts[i].tp));
	}
	sbuf_arr_end(tb);
	sbuf_arr_end(pb);
	if (tb->oom || pb->oom) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	return 0;
}

/* Read up to DL_BATCH parked rows of parts[0..nparts) into *out (without
 * those with a pending entry: exactly_once). Returns how many, or -1 with
 * err. */
int dl_read_parked(deadletter *d, const owned_part *parts, size_t nparts, dl_item **out,
                       char *err, size_t errsz)
{
	*out = NULL;
	sbuf tb = {0}, pb = {0};
	char lim[16];
	snprintf(lim, sizeof lim, "%d", DL_BATCH);
	const char *p[4] = {NULL, NULL, lim, d->eos ? "true" : "false"};
	int n = -1;
	PGresult *r = NULL;
	if (dl_parts_arrays(parts, nparts, &tb, &pb, err, errsz) != 0)
		goto done;
	p[0] = sbuf_str(&tb);
	p[1] = sbuf_str(&pb);
	r = sql_query(store_conn(d->st), SQL_PARKED, 4, p, 1, err, errsz);
	if (!r)
		goto done;
	int rows = PQntuples(r);
	dl_item *items = calloc(rows ? (size_t)rows : 1, sizeof *items);
	if (!items) {
		snprintf(err, errsz, "out of memory");
		goto done;
	}
	for (int i = 0; i < rows; i++) {
		dl_item *it = &items[i];
		it->err = (rd_kafka_resp_err_t)-1;
		it->f.biz_id = col_text(r, i, 0);
		it->f.message_key = col_text(r, i, 1);
		it->f.payload = (unsigned char *)col_text(r, i, 2);
		it->f.payload_len = PQgetisnull(r, i, 2) ? 0 : (size_t)PQgetlength(r, i, 2);
		it->f.topic = col_text(r, i, 3);
		it->f.key = col_text(r, i, 4);
		it->f.headers = col_text(r, i, 5);
		it->error = col_text(r, i, 6);
		snprintf(it->attempts, sizeof it->attempts, "%s", PQgetvalue(r, i, 7));
		it->f.traceparent = col_text(r, i, 8);
		it->f.tracestate = col_text(r, i, 9);
		snprintf(it->f.trace_id, sizeof it->f.trace_id, "%s", PQgetvalue(r, i, 10));
		snprintf(it->parked_at, sizeof it->parked_at, "%s", PQgetvalue(r, i, 11));
		if (!it->f.biz_id || !it->f.message_key || !it->f.topic || !it->error ||
		    (!it->f.payload && !PQgetisnull(r, i, 2))) {
			dl_items_free(items, (size_t)rows);
			snprintf(err, errsz, "out of memory");
			goto done;
		}
	}
	*out = items;
	n = rows;
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return n;
}

/* Produce item it to the dead-letter topic; at is txhub-dlq-at. */
static rd_kafka_resp_err_t produce(deadletter *d, rd_kafka_t *rk, dl_item *it, const char *at)
{
	for (;;) {
		rd_kafka_headers_t *h = forward_make_headers(&it->f);
		rd_kafka_header_add(h, "txhub-dlq-topic", -1, it->f.topic, -1);
		rd_kafka_header_add(h, "txhub-dlq-error", -1, it->error, -1);
		rd_kafka_header_add(h, "txhub-dlq-attempts", -1, it->attempts, -1);
		rd_kafka_header_add(h, "txhub-dlq-at", -1, at, -1);
		const char *key = it->f.key;
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(d->cfg->forward_dead_letter_topic),
			RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
			RD_KAFKA_V_VALUE(it->f.payload, it->f.payload_len),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
			RD_KAFKA_V_OPAQUE(it), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			return e;
		rd_kafka_headers_destroy(h);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			return e;
		rd_kafka_poll(rk, 100);
	}
}

/* Run sql on the keys of items[0..n) whose err is NO_ERROR ($1, $2),
 * with ats each one's time ($3), then the nmore values more. Returns 0, or
 * -1 with err. */
int dl_keys_command(deadletter *d, const char *sql, const dl_item *items, size_t n,
                        const char *const *ats, const char *const *more, int nmore, char *err,
                        size_t errsz)
{
	sbuf bb = {0}, kb = {0}, ab = {0};
	sbuf_arr_begin(&bb);
	sbuf_arr_begin(&kb);
	sbuf_arr_begin(&ab);
	for (size_t i = 0; i < n; i++) {
		if (items[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
			continue;
		sbuf_arr_text(&bb, items[i].f.biz_id);
		sbuf_arr_text(&kb, items[i].f.message_key);
		if (ats)
			sbuf_arr_text(&ab, ats[i]);
	}
	sbuf_arr_end(&bb);
	sbuf_arr_end(&kb);
	sbuf_arr_end(&ab);
	int rc = -1, np = ats ? 3 : 2;
	const char *p[8] = {sbuf_str(&bb), sbuf_str(&kb), sbuf_str(&ab)};
	for (int j = 0; j < nmore && np < 8; j++)
		p[np++] = more[j];
	if (bb.oom || kb.oom || ab.oom)
		snprintf(err, errsz, "out of memory");
	else
		rc = sql_command(store_conn(d->st), sql, np, p, err, errsz);
	sbuf_free(&bb);
	sbuf_free(&kb);
	sbuf_free(&ab);
	return rc;
}

/* Why item it was not dead-lettered, into why. */
static void item_failure(const deadletter *d, const dl_item *it, char *why, size_t whysz)
{
	if (it->err == (rd_kafka_resp_err_t)-1)
		snprintf(why, whysz, "no delivery report within %lld ms",
		         (long long)(d->delivery_timeout_ms + 5000));
	else
		forward_describe_failure(why, whysz, d->cfg->forward_dead_letter_topic, !it->produced,
		                         it->err);
}

/* Write the dead_letter_failed history rows of the items that failed
 * (SQL_FAILED). A failure to write them is logged only: the next attempt
 * writes them. */
static void note_failed(deadletter *d, const dl_item *items, size_t n)
{
	sbuf bb = {0}, kb = {0}, db = {0};
	sbuf_arr_begin(&bb);
	sbuf_arr_begin(&kb);
	sbuf_arr_begin(&db);
	for (size_t i = 0; i < n; i++) {
		char why[FORWARD_ERROR_MAX], detail[FORWARD_ERROR_MAX + 300];
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
			continue;
		item_failure(d, &items[i], why, sizeof why);
		snprintf(detail, sizeof detail, "producing to the dead-letter topic %s failed: %s",
		         d->cfg->forward_dead_letter_topic, why);
		sbuf_arr_text(&bb, items[i].f.biz_id);
		sbuf_arr_text(&kb, items[i].f.message_key);
		sbuf_arr_text(&db, detail);
	}
	sbuf_arr_end(&bb);
	sbuf_arr_end(&kb);
	sbuf_arr_end(&db);
	char err[512] = "out of memory";
	const char *p[3] = {sbuf_str(&bb), sbuf_str(&kb), sbuf_str(&db)};
	if (bb.oom || kb.oom || db.oom ||
	    sql_command(store_conn(d->st), SQL_FAILED, 3, p, err, sizeof err) != 0)
		log_warn("dead-letter: noting the failure in the history: %s", err);
	sbuf_free(&bb);
	sbuf_free(&kb);
	sbuf_free(&db);
}

/* A batch failed (why): counted, logged, and alerted when a run of failures
 * begins. */
void dl_batch_failed(deadletter *d, const dl_item *bad, size_t nbad, const char *why)
{
	d->fails++;
	metrics_dead_letters(0, nbad);
	char msg[900];
	if (nbad > 0)
		snprintf(msg, sizeof msg, "producing %zu parked forward(s) to the dead-letter topic %s "
		         "failed: %s", nbad, d->cfg->forward_dead_letter_topic, why);
	else /* before any was produced: reading, recovering, connecting */
		snprintf(msg, sizeof msg, "dead-lettering to %s: %s", d->cfg->forward_dead_letter_topic,
		         why);
	if (bad) {
		log_about about = {bad->f.biz_id, bad->f.message_key, -1, bad->f.trace_id};
		log_msg_about(LOG_WARN, "dead-letter", &about, "%s; trying again", msg);
	} else {
		log_warn("dead-letter: %s; trying again", msg);
	}
	if (d->fails == 1)
		alert_raise_traced(d->al, "dead_letter_failed", bad ? bad->f.biz_id : NULL,
		                   bad ? bad->f.message_key : NULL, 0, d->cfg->forward_dead_letter_topic,
		                   msg, bad ? bad->f.trace_id : NULL);
	snprintf(d->last_why, sizeof d->last_why, "%s", why);
}

/* The connection to PostgreSQL, made or checked. Returns 0, or -1 with the
 * failure noted. */
int dl_db_ready(deadletter *d)
{
	char err[512];
	if (!d->st && !(d->st = store_connect(d->cfg, err, sizeof err))) {
		dl_batch_failed(d, NULL, 0, err);
		return -1;
	}
	if (store_ensure(d->st, err, sizeof err) != STORE_OK) {
		dl_batch_failed(d, NULL, 0, err);
		return -1;
	}
	return 0;
}

/* The nok items of items[0..n) that went out: counted and logged. */
void dl_count_sent(deadletter *d, const dl_item *items, size_t n, size_t nok)
{
	metrics_dead_letters(1, nok);
	for (size_t i = 0; i < n; i++)
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
			log_about about = {items[i].f.biz_id, items[i].f.message_key, -1,
			                   items[i].f.trace_id};
			log_msg_about(LOG_INFO, "dead-letter", &about, "parked forward to %s "
			              "produced to %s", items[i].f.topic, d->cfg->forward_dead_letter_topic);
		}
}

/* Produce items[0..n) (at: txhub-dlq-at) and wait for their delivery
 * reports. Returns how many were acknowledged; *first_bad: the first that
 * was not (NULL: none). */
size_t dl_produce_all(deadletter *d, rd_kafka_t *rk, dl_item *items, size_t n,
                          const char *at, dl_item **first_bad)
{
	for (size_t i = 0; i < n; i++) {
		items[i].err = (rd_kafka_resp_err_t)-1;
		items[i].produced = 0;
		rd_kafka_resp_err_t e = produce(d, rk, &items[i], at);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
			items[i].err = e; /* refused outright */
		else
			items[i].produced = 1;
	}
	rd_kafka_flush(rk, (int)(d->delivery_timeout_ms + 5000));
	size_t nok = 0;
	*first_bad = NULL;
	for (size_t i = 0; i < n; i++)
		if (items[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
			nok++;
		else if (!*first_bad)
			*first_bad = &items[i];
	return nok;
}

/* Some of items[0..n) failed (first_bad the first): counted, logged,
 * alerted, in the history. */
void dl_items_failed(deadletter *d, dl_item *items, size_t n, const dl_item *first_bad,
                         size_t nbad)
{
	char why[FORWARD_ERROR_MAX];
	item_failure(d, first_bad, why, sizeof why);
	dl_batch_failed(d, first_bad, nbad, why);
	note_failed(d, items, n);
}
