/* store_write.c: the rows a batch writes: new rows by COPY or INSERT, known
 * rows by one UPDATE, conflicts and rejected records (store_apply.c). */
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

enum { W_B, W_K, W_S, W_D, W_C, W_P, W_FT, W_FK, W_FH, W_CU, W_FA, W_SP, W_SO, W_TP, W_SQ,
       W_SN, W_ST, W_TN, W_TRP, W_TRS, W_NB, W_DL, W_NCOLS };

/* $1..$13 as in W_*, $14 the forward lease in ms, $15 the forward sequences,
 * $16 whether a committed one was forwarded already (a progress marker
 * says so: assign_seqs), $17 the source topics, $18 the tenants (the row's for
 * good), $19 and $20 the traceparents and tracestates (docs/consumers.md: Trace context), $21 and
 * $22 the not_befores and delays (delayed delivery). New rows go in by COPY
 * (store_copy_rows) unless the batch has a delayed one (its due time is computed
 * here) or the role may not COPY (row-level security). Neither says ON
 * CONFLICT: the batch read its keys under lock first (SQL_LOCK), so a key
 * is stored already only if another replica inserted it since, and then the
 * primary key refuses the statement (not_the_datas: the batch is applied
 * again, and finds the row). ON CONFLICT DO NOTHING made every row a
 * speculative insertion, whose confirmation is one more WAL record per
 * message (48 bytes, issue 22). */
static const char *SQL_INSERT =
	"INSERT INTO txhub.message_rows AS m (biz_id, message_key, status, decision, send_status, "
	"payload, forward_topic, forward_key, forward_headers, checkback_url, next_check_at, "
	"next_send_at, src_partition, src_offset, fwd_seq, src_topic, tenant, traceparent, "
	"tracestate, trace_id, not_before) "
	"SELECT x.b, x.k, x.s, x.d, "
	"CASE WHEN x.c THEN CASE WHEN x.sn AND NOT d.late THEN 'sent' ELSE 'pending' END END, "
	"decode(x.p, 'hex'), x.ft, x.fk, x.fh::jsonb, x.cu, "
	"CASE WHEN x.s = 'prepared' THEN now() + x.fa * interval '1 millisecond' END, "
	"CASE WHEN d.late THEN d.due WHEN x.c THEN now() + $14::bigint * interval '1 millisecond' "
	"ELSE " SQL_AFTER_EPOCH("x.dl") " END, x.sp, x.so, CASE WHEN NOT d.late THEN x.sq END, "
	"x.st, x.tn, x.trp, x.trs, substr(x.trp, 4, 32), CASE WHEN x.c THEN d.due ELSE d.nb END "
	"FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::text[], "
	"$7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::int[], $13::bigint[], "
	"$15::bigint[], $16::bool[], $17::text[], $18::text[], $19::text[], $20::text[], "
	"$21::bigint[], $22::bigint[]) "
	"AS x(b, k, s, d, c, p, ft, fk, fh, cu, fa, sp, so, sq, sn, st, tn, trp, trs, nb, dl) "
	"CROSS JOIN LATERAL (SELECT " SQL_AFTER_EPOCH("x.nb") " AS nb) n "
	"CROSS JOIN LATERAL (SELECT n.nb, coalesce(n.nb, now() + x.dl * interval '1 millisecond') "
	"AS due) e CROSS JOIN LATERAL (SELECT e.nb, e.due, x.c AND coalesce(e.due > now(), false) "
	"AS late) d "
	"RETURNING m.status = 'committed' AND m.send_status = 'pending' AND m.fwd_seq IS NOT NULL, "
	"m.status = 'committed' AND m.fwd_seq IS NULL AND m.not_before > now(), " FORWARD_COLUMNS;

/* The new rows of a batch go in by COPY when they can (store_copy_rows): COPY
 * writes a page's rows as one WAL record, where each INSERTed row is a
 * record of its own, about 45 bytes less per message (issue 22); the
 * forwards are read back by key (SQL_READ_BACK) as SQL_INSERT returns
 * them. The columns of SQL_INSERT, in its order; not_before stays NULL (a
 * batch with a delayed message goes by SQL_INSERT). */
static const char *SQL_COPY =
	"COPY txhub.message_rows (biz_id, message_key, status, decision, send_status, payload, "
	"forward_topic, forward_key, forward_headers, checkback_url, next_check_at, next_send_at, "
	"src_partition, src_offset, fwd_seq, src_topic, tenant, traceparent, tracestate, trace_id) "
	"FROM STDIN";

/* The transaction's now() in microseconds since 1970 (COPY has no
 * expressions: next_check_at and next_send_at are computed from it). */
static const char *SQL_NOW_US = "SELECT (extract(epoch FROM now()) * 1000000)::bigint";

/* $1, $2: the keys of the rows copied that became committed and are not
 * sent yet; the columns SQL_INSERT returns. Each key by the primary key
 * (OFFSET 0: a join would read a young table whole, its statistics
 * behind the rows just written). */
static const char *SQL_READ_BACK =
	"SELECT m.status = 'committed' AND m.send_status = 'pending' AND m.fwd_seq IS NOT NULL, "
	"m.status = 'committed' AND m.fwd_seq IS NULL AND m.not_before > now(), " FORWARD_COLUMNS
	" FROM unnest($1::text[], $2::text[]) AS x(b, k) "
	"CROSS JOIN LATERAL (SELECT * FROM txhub.message_rows r "
	"WHERE r.biz_id = x.b AND r.message_key = x.k OFFSET 0) m";

/* same columns, $14 the lease, $15 whether the row takes the payload (and
 * its trace), $16 the forward sequences, $17 forwarded already, $18 the
 * source topics, $19 and $20 the traceparents and tracestates, $21 and $22
 * the not_befores and delays as in SQL_INSERT */
#define UPD_NB "CASE WHEN x.tp THEN " SQL_AFTER_EPOCH("x.nb") " ELSE m.not_before END"
#define UPD_DUE                                                                     \
	"coalesce(" UPD_NB ", now() + CASE WHEN x.tp THEN x.dl * interval '1 millisecond' " \
	"ELSE m.next_send_at - 'epoch'::timestamptz END)"
#define UPD_LATE "(x.c AND coalesce(" UPD_DUE " > now(), false))"
static const char *SQL_UPDATE =
	"UPDATE txhub.message_rows AS m SET status = x.s, decision = x.d, "
	"send_status = CASE WHEN x.c THEN CASE WHEN x.sn AND NOT " UPD_LATE " THEN 'sent' "
	"ELSE 'pending' END ELSE m.send_status END, "
	"send_attempts = CASE WHEN x.c THEN 0 ELSE m.send_attempts END, "
	"next_send_at = CASE WHEN " UPD_LATE " THEN " UPD_DUE " "
	"WHEN x.c THEN now() + $14::bigint * interval '1 millisecond' "
	"WHEN x.tp THEN " SQL_AFTER_EPOCH("x.dl") " ELSE m.next_send_at END, "
	"not_before = CASE WHEN x.c THEN " UPD_DUE " ELSE " UPD_NB " END, "
	"payload = CASE WHEN x.tp THEN decode(x.p, 'hex') ELSE m.payload END, "
	"forward_topic = CASE WHEN x.tp THEN x.ft ELSE m.forward_topic END, "
	"forward_key = CASE WHEN x.tp THEN x.fk ELSE m.forward_key END, "
	"forward_headers = CASE WHEN x.tp THEN x.fh::jsonb ELSE m.forward_headers END, "
	"checkback_url = CASE WHEN x.tp THEN x.cu ELSE m.checkback_url END, "
	"traceparent = CASE WHEN x.tp THEN x.trp ELSE m.traceparent END, "
	"tracestate = CASE WHEN x.tp THEN x.trs ELSE m.tracestate END, "
	"trace_id = CASE WHEN x.tp THEN substr(x.trp, 4, 32) ELSE m.trace_id END, "
	"src_topic = x.st, src_partition = x.sp, src_offset = x.so, updated_at = now(), "
	"fwd_seq = CASE WHEN " UPD_LATE " THEN NULL WHEN x.c THEN x.sq ELSE m.fwd_seq END "
	"FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::text[], "
	"$7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::int[], $13::bigint[], "
	"$15::bool[], $16::bigint[], $17::bool[], $18::text[], $19::text[], $20::text[], "
	"$21::bigint[], $22::bigint[]) "
	"AS x(b, k, s, d, c, p, ft, fk, fh, cu, fa, sp, so, tp, sq, sn, st, trp, trs, nb, dl) "
	"WHERE m.biz_id = x.b AND m.message_key = x.k "
	"RETURNING x.c AND NOT x.sn AND m.fwd_seq IS NOT NULL, "
	"x.c AND m.fwd_seq IS NULL AND m.not_before > now(), " FORWARD_COLUMNS;
#undef UPD_LATE
#undef UPD_DUE
#undef UPD_NB

static const char *SQL_CONFLICTS =
	"INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status, detail, "
	"src_topic, src_partition, src_offset, tenant) "
	"SELECT x.b, x.k, x.a, x.m, x.d, x.t, x.p, x.o, x.tn "
	"FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], "
	"$7::int[], $8::bigint[], $9::text[]) AS x(b, k, a, m, d, t, p, o, tn) "
	"ON CONFLICT (src_topic, src_partition, src_offset) WHERE src_offset IS NOT NULL "
	"DO NOTHING";

static const char *SQL_REJECTED =
	"INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, record_key, "
	"record_value, reason, tenant) "
	"SELECT x.t, x.p, x.o, decode(x.k, 'hex'), decode(x.v, 'hex'), x.r, x.tn "
	"FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::text[], $6::text[], "
	"$7::text[]) AS x(t, p, o, k, v, r, tn) "
	"ON CONFLICT (src_topic, src_partition, src_offset) DO NOTHING";

/* SQL_INSERT or SQL_UPDATE over the row arrays w, with the forward lease;
 * the UPDATE also takes W_TP. *res keeps the rows it returned. */
static store_rc exec_rows(store *st, const char *sql, sbuf *w, int update, PGresult **res,
                          char *err, size_t errsz)
{
	char lease[32];
	const char *p[22];
	snprintf(lease, sizeof lease, "%lld", (long long)st->lease_ms);
	for (int c = 0; c < 13; c++)
		p[c] = sbuf_str(&w[c]);
	p[13] = lease;
	int n = 14;
	if (update)
		p[n++] = sbuf_str(&w[W_TP]);
	p[n++] = sbuf_str(&w[W_SQ]);
	p[n++] = sbuf_str(&w[W_SN]);
	p[n++] = sbuf_str(&w[W_ST]);
	if (!update) /* a stored message's tenant never changes */
		p[n++] = sbuf_str(&w[W_TN]);
	p[n++] = sbuf_str(&w[W_TRP]);
	p[n++] = sbuf_str(&w[W_TRS]);
	p[n++] = sbuf_str(&w[W_NB]);
	p[n++] = sbuf_str(&w[W_DL]);
	*res = store_exec_params(st, sql, n, p, 1);
	if (PQresultStatus(*res) == PGRES_TUPLES_OK)
		return STORE_OK;
	store_rc rc = store_classify(st->conn, *res, err, errsz);
	return update ? rc : store_not_the_datas(*res, rc, err, errsz);
}

/* One row of the INSERT or UPDATE arrays: key k's final state, and the
 * prepare it takes (NULL columns and tp false when it keeps the stored one). */
static void write_row(sbuf *w, const fold_key *k, int64_t seq, int sent,
                      const store_record *recs, int64_t default_first_after)
{
	sbuf_arr_bool(&w[W_SN], sent);
	const envelope *pe = k->payload_rec >= 0 ? &recs[k->payload_rec].env : NULL;
	sbuf_arr_text(&w[W_B], k->biz_id);
	sbuf_arr_text(&w[W_K], k->message_key);
	sbuf_arr_text(&w[W_S], rules_status_name(k->state.status));
	sbuf_arr_text(&w[W_D], k->state.status == STATUS_AWAITING_PREPARE
	                           ? rules_decision_name(k->state.decision) : NULL);
	sbuf_arr_bool(&w[W_C], k->committed);
	sbuf_arr_hex(&w[W_P], pe ? (pe->payload ? (const void *)pe->payload : "") : NULL,
	             pe ? pe->payload_len : 0);
	sbuf_arr_text(&w[W_FT], pe ? pe->forward_topic : NULL);
	sbuf_arr_text(&w[W_FK], pe ? pe->forward_key : NULL);
	sbuf_arr_text(&w[W_FH], pe ? pe->forward_headers : NULL);
	sbuf_arr_text(&w[W_CU], pe ? pe->checkback_url : NULL);
	sbuf_arr_int(&w[W_FA], pe && pe->first_after_ms >= 0 ? pe->first_after_ms
	                                                     : default_first_after);
	sbuf_arr_text(&w[W_ST], k->src_topic);
	sbuf_arr_int(&w[W_SP], k->src_partition);
	sbuf_arr_int(&w[W_SO], k->src_offset);
	sbuf_arr_bool(&w[W_TP], pe != NULL);
	sbuf_arr_text(&w[W_TN], k->tenant[0] ? k->tenant : NULL);
	sbuf_arr_text(&w[W_TRP], pe ? pe->traceparent : NULL);
	sbuf_arr_text(&w[W_TRS], pe ? pe->tracestate : NULL);
	/* delayed delivery: NULL where the prepare asked for none */
	if (pe && pe->not_before_ms >= 0)
		sbuf_arr_int(&w[W_NB], pe->not_before_ms);
	else
		sbuf_arr_text(&w[W_NB], NULL);
	if (pe && pe->delay_ms >= 0)
		sbuf_arr_int(&w[W_DL], pe->delay_ms);
	else
		sbuf_arr_text(&w[W_DL], NULL);
	if (seq > 0)
		sbuf_arr_int(&w[W_SQ], seq);
	else
		sbuf_arr_text(&w[W_SQ], NULL);
}

/* A timestamp of COPY's text format, us microseconds since 1970, in UTC. */
static void copy_time(sbuf *b, int64_t us)
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	sbuf_printf(b, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00\t", tm.tm_year + 1900, tm.tm_mon + 1,
	            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000));
}

/* One row of the COPY, as write_row() for SQL_INSERT; now_us the
 * transaction's now(). */
static void copy_row(sbuf *c, const fold_key *k, int64_t seq, int sent, const store_record *recs,
                     int64_t default_first_after, int64_t lease_ms, int64_t now_us)
{
	const envelope *pe = k->payload_rec >= 0 ? &recs[k->payload_rec].env : NULL;
	sbuf_copy_text(c, k->biz_id);
	sbuf_copy_text(c, k->message_key);
	sbuf_copy_text(c, rules_status_name(k->state.status));
	sbuf_copy_text(c, k->state.status == STATUS_AWAITING_PREPARE
	                      ? rules_decision_name(k->state.decision) : NULL);
	sbuf_copy_text(c, k->committed ? (sent ? "sent" : "pending") : NULL);
	sbuf_copy_hex(c, pe ? (pe->payload ? (const void *)pe->payload : "") : NULL,
	              pe ? pe->payload_len : 0);
	sbuf_copy_text(c, pe ? pe->forward_topic : NULL);
	sbuf_copy_text(c, pe ? pe->forward_key : NULL);
	sbuf_copy_text(c, pe ? pe->forward_headers : NULL);
	sbuf_copy_text(c, pe ? pe->checkback_url : NULL);
	if (k->state.status == STATUS_PREPARED)
		copy_time(c, now_us + 1000 * (pe && pe->first_after_ms >= 0 ? pe->first_after_ms
		                                                           : default_first_after));
	else
		sbuf_copy_text(c, NULL);
	if (k->committed)
		copy_time(c, now_us + 1000 * lease_ms);
	else
		sbuf_copy_text(c, NULL);
	sbuf_copy_int(c, k->src_partition);
	sbuf_copy_int(c, k->src_offset);
	if (seq > 0)
		sbuf_copy_int(c, seq);
	else
		sbuf_copy_text(c, NULL);
	sbuf_copy_text(c, k->src_topic);
	sbuf_copy_text(c, k->tenant[0] ? k->tenant : NULL);
	const char *tp = pe ? pe->traceparent : NULL;
	sbuf_copy_text(c, tp);
	sbuf_copy_text(c, pe ? pe->tracestate : NULL);
	char trace_id[33] = ""; /* as SQL_INSERT's substr(traceparent, 4, 32) */
	if (tp && strlen(tp) >= 35)
		memcpy(trace_id, tp + 3, 32);
	sbuf_copy_text(c, trace_id[0] ? trace_id : NULL);
	sbuf_copy_end(c);
}

/* The new rows of f by COPY, then the forwards of those that became
 * committed read back into *res (NULL when none). */
store_rc store_copy_rows(store *st, const fold *f, const int64_t *seq,
                          const unsigned char *sent, const store_record *recs, PGresult **res,
                          char *err, size_t errsz)
{
	sbuf c = {0}, kb = {0}, kk = {0};
	store_rc rc = STORE_OK;
	PGresult *r = PQexec(st->conn, SQL_NOW_US);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = store_classify(st->conn, r, err, errsz);
		PQclear(r);
		return rc == STORE_REFUSED ? STORE_RETRY : rc;
	}
	int64_t now_us = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	size_t nback = 0;
	sbuf_arr_begin(&kb);
	sbuf_arr_begin(&kk);
	for (size_t i = 0; i < f->nkeys; i++) {
		const fold_key *k = &f->keys[i];
		if (!k->changed || k->existed)
			continue;
		copy_row(&c, k, seq[i], sent[i], recs, st->first_after_ms, st->lease_ms, now_us);
		if (k->committed && !sent[i]) {
			sbuf_arr_text(&kb, k->biz_id);
			sbuf_arr_text(&kk, k->message_key);
			nback++;
		}
	}
	sbuf_arr_end(&kb);
	sbuf_arr_end(&kk);
	if (c.oom || kb.oom || kk.oom) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	r = PQexec(st->conn, SQL_COPY);
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		rc = store_classify(st->conn, r, err, errsz);
		if (state && strcmp(state, "0A000") == 0) {
			/* "COPY FROM not supported with row-level security" */
			log_warn("store: PostgreSQL refuses COPY into txhub.message_rows to this role (%s); "
			         "new messages go in by INSERT from now on", err);
			st->copy_refused = 1;
			rc = STORE_RETRY;
		}
		PQclear(r);
		goto done;
	}
	PQclear(r);
	int ok = PQputCopyData(st->conn, c.data ? c.data : "", (int)c.len) == 1;
	ok = PQputCopyEnd(st->conn, ok ? NULL : "txhub: sending the rows failed") == 1 && ok;
	r = PQgetResult(st->conn);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = store_not_the_datas(r, store_classify(st->conn, r, err, errsz), err, errsz);
	else if (!ok)
		rc = store_classify(st->conn, NULL, err, errsz);
	PQclear(r);
	while ((r = PQgetResult(st->conn)))
		PQclear(r);
	if (rc != STORE_OK || nback == 0)
		goto done;
	const char *p[2] = {sbuf_str(&kb), sbuf_str(&kk)};
	*res = store_exec_params(st, SQL_READ_BACK, 2, p, 1);
	if (PQresultStatus(*res) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, *res, err, errsz);
	else if ((size_t)PQntuples(*res) != nback) {
		snprintf(err, errsz, "read back %d of the %zu rows copied", PQntuples(*res), nback);
		rc = STORE_RETRY;
	}
done:
	sbuf_free(&c);
	sbuf_free(&kb);
	sbuf_free(&kk);
	return rc;
}

/* Write the final state of every key the batch changed: one INSERT for the
 * new ones, one UPDATE for the stored ones. *ins and *upd keep what they
 * returned (the messages that became committed). */
store_rc store_write_messages(store *st, const fold *f, const int64_t *seq,
                               const unsigned char *sent, const store_record *recs,
                               PGresult **ins, PGresult **upd, char *err, size_t errsz)
{
	sbuf iw[W_NCOLS] = {{0}}, uw[W_NCOLS] = {{0}};
	size_t nins = 0, nupd = 0;
	int delayed = 0; /* a new row with a due time: SQL_INSERT computes it */
	for (int c = 0; c < W_NCOLS; c++) {
		sbuf_arr_begin(&iw[c]);
		sbuf_arr_begin(&uw[c]);
	}
	for (size_t i = 0; i < f->nkeys; i++) {
		const fold_key *k = &f->keys[i];
		if (k->changed)
			write_row(k->existed ? uw : iw, k, seq[i], sent[i], recs, st->first_after_ms);
		nupd += k->changed && k->existed;
		nins += k->changed && !k->existed;
		const envelope *pe = k->payload_rec >= 0 ? &recs[k->payload_rec].env : NULL;
		delayed |= k->changed && !k->existed && pe && (pe->not_before_ms >= 0 || pe->delay_ms >= 0);
	}
	for (int c = 0; c < W_NCOLS; c++) {
		sbuf_arr_end(&iw[c]);
		sbuf_arr_end(&uw[c]);
	}
	store_rc rc = store_arrays_ok(iw, W_NCOLS, err, errsz);
	if (rc == STORE_OK)
		rc = store_arrays_ok(uw, W_NCOLS, err, errsz);
	if (rc == STORE_OK && nins > 0 && !st->copy_refused && !delayed)
		rc = store_copy_rows(st, f, seq, sent, recs, ins, err, errsz);
	else if (rc == STORE_OK && nins > 0)
		rc = exec_rows(st, SQL_INSERT, iw, 0, ins, err, errsz);
	if (rc == STORE_OK && nupd > 0)
		rc = exec_rows(st, SQL_UPDATE, uw, 1, upd, err, errsz);
	for (int c = 0; c < W_NCOLS; c++) {
		sbuf_free(&iw[c]);
		sbuf_free(&uw[c]);
	}
	return rc;
}

/* "committed", or "awaiting_prepare:commit" for a held decision. */
static void met_text(rules_state met, char *buf, size_t sz)
{
	int held = met.status == STATUS_AWAITING_PREPARE;
	snprintf(buf, sz, "%s%s%s", rules_status_name(met.status), held ? ":" : "",
	         held ? rules_decision_name(met.decision) : "");
}

/* Log the fold's conflicts and keep them in txhub.conflicts. */
store_rc store_write_conflicts(store *st, const fold *f,
                                const store_record *recs, char *err, size_t errsz)
{
	enum { C_B, C_K, C_A, C_M, C_D, C_T, C_P, C_O, C_TN, C_NCOLS };
	sbuf cw[C_NCOLS] = {{0}};
	if (f->nconflicts == 0)
		return STORE_OK;
	for (int c = 0; c < C_NCOLS; c++)
		sbuf_arr_begin(&cw[c]);
	for (size_t i = 0; i < f->nconflicts; i++) {
		const fold_conflict *fc = &f->conflicts[i];
		const store_record *rec = &recs[fc->rec];
		char met[64];
		met_text(fc->met, met, sizeof met);
		sbuf_arr_text(&cw[C_B], rec->env.biz_id);
		sbuf_arr_text(&cw[C_K], rec->env.message_key);
		sbuf_arr_text(&cw[C_A], rules_step_name(fc->step));
		sbuf_arr_text(&cw[C_M], met);
		char detail[160];
		/* a message of another tenant: named by the record's own tenant only */
		snprintf(detail, sizeof detail, "%s%s%s%s", fc->foreign ? "tenant " : "",
		         fc->foreign ? rec->tenant : "", fc->foreign ? ": " : "", fc->detail);
		sbuf_arr_text(&cw[C_D], detail);
		sbuf_arr_text(&cw[C_T], rec->src_topic);
		sbuf_arr_int(&cw[C_P], rec->partition);
		sbuf_arr_int(&cw[C_O], rec->offset);
		sbuf_arr_text(&cw[C_TN], rec->tenant[0] ? rec->tenant : NULL);
		log_about about = {rec->env.biz_id, rec->env.message_key, rec->tp, rec->env.trace_id};
		log_msg_about(LOG_WARN, "store: conflict", &about, "%s met %s (offset %lld)%s%s",
		              rules_step_name(fc->step), met, (long long)rec->offset,
		              fc->foreign ? ": " : "", fc->foreign ? detail : "");
	}
	for (int c = 0; c < C_NCOLS; c++)
		sbuf_arr_end(&cw[c]);
	store_rc rc = store_arrays_ok(cw, C_NCOLS, err, errsz);
	if (rc == STORE_OK) {
		const char *p[9] = {sbuf_str(&cw[C_B]), sbuf_str(&cw[C_K]), sbuf_str(&cw[C_A]),
		                    sbuf_str(&cw[C_M]), sbuf_str(&cw[C_D]), sbuf_str(&cw[C_T]),
		                    sbuf_str(&cw[C_P]), sbuf_str(&cw[C_O]), sbuf_str(&cw[C_TN])};
		rc = store_exec_command(st, SQL_CONFLICTS, 9, p, err, errsz);
	}
	for (int c = 0; c < C_NCOLS; c++)
		sbuf_free(&cw[c]);
	return rc;
}

/* Keep the batch's invalid records in txhub.rejected (docs/producers.md: Envelope fields). */
store_rc store_write_rejected(store *st, const store_record *recs, size_t n, char *err,
                               size_t errsz)
{
	enum { R_T, R_P, R_O, R_K, R_V, R_R, R_TN, R_NCOLS };
	sbuf rw[R_NCOLS] = {{0}};
	size_t nrej = 0;
	for (int c = 0; c < R_NCOLS; c++)
		sbuf_arr_begin(&rw[c]);
	for (size_t i = 0; i < n; i++) {
		if (recs[i].valid)
			continue;
		sbuf_arr_text(&rw[R_T], recs[i].src_topic);
		sbuf_arr_int(&rw[R_P], recs[i].partition);
		sbuf_arr_int(&rw[R_O], recs[i].offset);
		sbuf_arr_hex(&rw[R_K], recs[i].key, recs[i].key_len);
		sbuf_arr_hex(&rw[R_V], recs[i].value, recs[i].value_len);
		sbuf_arr_text(&rw[R_R], recs[i].reason);
		sbuf_arr_text(&rw[R_TN], recs[i].tenant[0] ? recs[i].tenant : NULL);
		nrej++;
	}
	for (int c = 0; c < R_NCOLS; c++)
		sbuf_arr_end(&rw[c]);
	store_rc rc = store_arrays_ok(rw, R_NCOLS, err, errsz);
	if (rc == STORE_OK && nrej > 0) {
		const char *p[7] = {sbuf_str(&rw[R_T]), sbuf_str(&rw[R_P]), sbuf_str(&rw[R_O]),
		                    sbuf_str(&rw[R_K]), sbuf_str(&rw[R_V]), sbuf_str(&rw[R_R]),
		                    sbuf_str(&rw[R_TN])};
		rc = store_exec_command(st, SQL_REJECTED, 7, p, err, errsz);
	}
	for (int c = 0; c < R_NCOLS; c++)
		sbuf_free(&rw[c]);
	return rc;
}

/* A primary key violation of the new rows: another replica inserted one of
 * them since the batch read its keys (SQL_LOCK), which is not the data's
 * fault: the batch is applied again, and finds the row. */
store_rc store_not_the_datas(const PGresult *r, store_rc rc, char *err, size_t errsz)
{
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	if (rc == STORE_REFUSED && state && strcmp(state, "23505") == 0) {
		snprintf(err, errsz, "another replica inserted some of this batch's messages "
		                     "first; applying the batch again");
		rc = STORE_RETRY;
	}
	return rc;
}
