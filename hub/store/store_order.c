/* store_order.c: forward.order = key: the keys' blockers and their release. */
#include "store.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "delay_sql.h"
#include "fold.h"
#include "log.h"
#include "rewind.h"
#include "rows_sql.h"
#include "rules.h"
#include "sbuf.h"
#include "sql.h"
#include "store_int.h"

/* ---- order per key ---- */

void store_set_order_by_key(store *st, int by_key, int exactly_once)
{
	st->order_by_key = by_key;
	st->retries_block = by_key && !exactly_once;
}

void store_take_scheduled(store *st, store_forward_list *out)
{
	*out = st->scheduled;
	memset(&st->scheduled, 0, sizeof st->scheduled);
}

void store_blocker_list_clear(store_blocker_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].topic);
		free(l->items[i].key);
	}
	free(l->items);
	memset(l, 0, sizeof *l);
}

/* The unsent rows of a key no forwarder has in hand, of the partitions $1/$2:
 * those without a sequence (messages_send_retry) and the failed ones
 * (messages_stuck). */
#define SQL_BLOCKERS(held)                                                                   \
	"SELECT src_topic, src_partition, forward_topic, forward_key, src_offset "             \
	"FROM txhub.message_rows WHERE send_status = 'pending' AND fwd_seq IS NULL "          \
	"AND status = 'committed' AND forward_key IS NOT NULL " held " AND "                   \
	OF_PARTS("", "$1", "$2") " UNION ALL "                                                \
	"SELECT src_topic, src_partition, forward_topic, forward_key, src_offset "             \
	"FROM txhub.message_rows WHERE send_status = 'failed' AND forward_key IS NOT NULL AND " \
	OF_PARTS("", "$1", "$2")

/* The pending rows with a sequence above the marks of the partitions $1/$2
 * (in flight, or lost with a hub that died) for which `cond` holds. */
#define SQL_ABOVE_MARK(cond)                                                                 \
	"SELECT r.src_topic, r.src_partition, r.forward_topic, r.forward_key, r.src_offset "   \
	"FROM unnest($1::text[], $2::int[]) AS o(t, p) JOIN txhub.message_rows r "            \
	"ON r.src_partition = o.p AND r.src_topic = o.t WHERE " cond " "                      \
	"AND r.send_status = 'pending' AND r.forward_key IS NOT NULL "                         \
	"AND r.fwd_seq > coalesce(" SQL_MARK_OF("o.t", "o.p") ", 0)"

/* at_least_once (store_set_order_by_key): a retry that a due scan gave a
 * sequence blocks its key too, in flight or lost with a hub that died: what
 * comes after it is not released before it is delivered (exactly_once's
 * lanes read and send in sequence order: not there). $4 */
#define SQL_RETRIES_ABOVE_MARK SQL_ABOVE_MARK("$4::bool AND r.send_attempts > 0")

store_rc store_order_blockers(store *st, const owned_part *own, size_t nown, int taken,
                              store_blocker_list *out, char *err, size_t errsz)
{
	static const char *sql =
		"SELECT src_topic, src_partition, forward_topic, forward_key, min(src_offset) "
		"FROM (" SQL_BLOCKERS("") " UNION ALL " SQL_ABOVE_MARK("$3::bool") " UNION ALL "
		SQL_RETRIES_ABOVE_MARK ") b GROUP BY 1, 2, 3, 4";
	memset(out, 0, sizeof *out);
	if (nown == 0)
		return STORE_OK;
	sbuf w[2] = {{0}};
	store_owned_arrays(&w[0], &w[1], NULL, own, nown);
	const char *p[4] = {sbuf_str(&w[0]), sbuf_str(&w[1]), taken ? "t" : "f",
	                    st->retries_block ? "t" : "f"};
	store_rc rc = store_arrays_ok(w, 2, err, errsz);
	PGresult *r = rc == STORE_OK ? store_exec_params(st, sql, 4, p, 0) : NULL;
	if (rc == STORE_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	int n = rc == STORE_OK ? PQntuples(r) : 0;
	if (n > 0 && !(out->items = calloc((size_t)n, sizeof *out->items))) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
	}
	for (int i = 0; rc == STORE_OK && i < n; i++) {
		store_blocker *b = &out->items[out->n++];
		b->tp = tp_of(PQgetvalue(r, i, 0), (int32_t)atoi(PQgetvalue(r, i, 1)));
		b->topic = strdup(PQgetvalue(r, i, 2));
		b->key = strdup(PQgetvalue(r, i, 3));
		b->offset = atoll(PQgetvalue(r, i, 4));
		if (b->tp == -1 || !b->topic || !b->key) {
			snprintf(err, errsz, "out of memory");
			rc = STORE_RETRY;
		}
	}
	if (rc != STORE_OK)
		store_blocker_list_clear(out);
	PQclear(r);
	sbuf_free(&w[0]);
	sbuf_free(&w[1]);
	return rc;
}

store_rc store_order_release(store *st, const owned_part *own, size_t nown, int all,
                             size_t *released, char *err, size_t errsz)
{
	/* the held rows (due at 'infinity', on messages_send_retry) whose key has
	 * no blocker before them but held ones */
	static const char *sql =
		"WITH b AS (SELECT src_topic, src_partition, forward_topic, forward_key, "
		"min(src_offset) AS o FROM (" SQL_BLOCKERS("AND next_send_at < 'infinity'")
		" UNION ALL " SQL_RETRIES_ABOVE_MARK ") x GROUP BY 1, 2, 3, 4), "
		"h AS (SELECT m.biz_id, m.message_key FROM txhub.message_rows m "
		"WHERE m.send_status = 'pending' AND m.fwd_seq IS NULL "
		"AND m.next_send_at = 'infinity' AND " OF_PARTS("m.", "$1", "$2") " "
		"AND ($3::bool OR NOT EXISTS (SELECT 1 FROM b WHERE b.src_topic = m.src_topic "
		"AND b.src_partition = m.src_partition AND b.forward_topic = m.forward_topic "
		"AND b.forward_key = m.forward_key AND b.o < m.src_offset)) "
		"ORDER BY m.biz_id, m.message_key FOR UPDATE OF m SKIP LOCKED) "
		"UPDATE txhub.message_rows AS m SET next_send_at = now() FROM h "
		"WHERE m.biz_id = h.biz_id AND m.message_key = h.message_key "
		"AND m.next_send_at = 'infinity' RETURNING 1";
	*released = 0;
	if (nown == 0)
		return STORE_OK;
	PGresult *r;
	size_t nkept;
	const char *p[2] = {all ? "t" : "f", st->retries_block ? "t" : "f"};
	store_rc rc = store_run_owned(st, own, nown, sql, p, 2, 0, &r, &nkept, err, errsz);
	if (rc == STORE_OK)
		*released = (size_t)PQntuples(r);
	PQclear(r);
	return rc;
}
