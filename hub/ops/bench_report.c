/* bench_report.c: the bench's result (see bench_int.h): what PostgreSQL
 * wrote, the latencies, and the JSON line. */
#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_int.h"

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
	/* may be negative: forwarded early (never: docs/consumers.md: Delayed delivery) */
	if (o->delayed_pct > 0) {
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
