/* test_gaps.c: control records the broker no longer has (issue 20, "control
 * records the broker deleted before the hub read them").
 *
 * A hub stopped while the broker deleted records it had not read yet says
 * so once, loudly (an error line, the alert control_records_lost naming the
 * partition and the offsets, txhub_control_records_lost_total, a line in
 * `txhub status`) and goes on with the records still there; a hub that
 * stands beyond a partition's end (the topic made again, or a broker that
 * lost records) says so too and reads the partition again from its start;
 * a first start reads from the beginning and reports nothing.
 *
 * Records are deleted as retention does: with DeleteRecords against Apache
 * Kafka; librdkafka 2.0.2's mock cluster (devbroker) has no DeleteRecords,
 * but it drops a partition's oldest record batches once it holds more than
 * 5 MiB, so there the test pushes them out with large filler records (not
 * envelopes: they are rejected when read). */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "httpd.h"

/* ---- an alert webhook: keeps the body of every POST ---- */

typedef struct {
	pthread_mutex_t mu;
	char bodies[16][2048];
	int n;
} webhook;

static void on_alert(void *opaque, const h_http_request *r, h_http_answer *a)
{
	webhook *w = opaque;
	pthread_mutex_lock(&w->mu);
	if (w->n < 16 && r->body)
		snprintf(w->bodies[w->n++], sizeof w->bodies[0], "%s", r->body);
	pthread_mutex_unlock(&w->mu);
	a->status = 200;
}

/* The alerts of this kind the webhook received; the first one parsed into
 * *first (the caller deletes it) when first is not NULL. */
static int alerts_of(webhook *w, const char *kind, cJSON **first)
{
	int n = 0;
	pthread_mutex_lock(&w->mu);
	for (int i = 0; i < w->n; i++) {
		cJSON *o = cJSON_Parse(w->bodies[i]);
		cr_assert_not_null(o, "the webhook got no JSON: %s", w->bodies[i]);
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind");
		if (cJSON_IsString(k) && strcmp(k->valuestring, kind) == 0 && n++ == 0 && first) {
			*first = o;
			continue;
		}
		cJSON_Delete(o);
	}
	pthread_mutex_unlock(&w->mu);
	return n;
}

static int64_t num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	cr_assert(cJSON_IsNumber(v), "no number %s in %s", name, cJSON_PrintUnformatted(o));
	return (int64_t)v->valuedouble;
}

/* ---- the broker ---- */

static rd_kafka_t *client(h_env *e)
{
	char es[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "bootstrap.servers", e->brokers, es, sizeof es);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(rk, "%s", es);
	return rk;
}

static void watermarks(h_env *e, int part, int64_t *lo, int64_t *hi)
{
	rd_kafka_t *rk = client(e);
	rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, e->topic, part, lo, hi, 10000);
	cr_assert_eq(err, 0, "watermarks of %s [%d]: %s", e->topic, part, rd_kafka_err2str(err));
	rd_kafka_destroy(rk);
}

/* Make the broker delete partition part's records before offset `before`,
 * as retention does. Returns its low watermark afterwards (>= before). */
static int64_t delete_before(h_env *e, int part, int64_t before)
{
	int64_t lo, hi;
	if (h_real_kafka()) {
		h_delete_records(e, part, before);
	} else {
		static char filler[900000];
		memset(filler, '#', sizeof filler);
		for (int i = 0;; i++) {
			watermarks(e, part, &lo, &hi);
			if (lo >= before)
				break;
			cr_assert_lt(i, 20, "the mock cluster keeps partition %d from offset %lld", part,
			             (long long)lo);
			h_send(e, part, "filler", filler, sizeof filler);
			h_flush();
		}
	}
	watermarks(e, part, &lo, &hi);
	cr_assert_geq(lo, before);
	return lo;
}

/* n transactions (a prepare and a commit each) on partition part, message
 * keys prefix-0 ... prefix-(n-1), forwarded to fwd. */
static void send_tx(h_env *e, int part, const char *prefix, int n, const char *fwd)
{
	char buf[512], mk[64];
	for (int i = 0; i < n; i++) {
		snprintf(mk, sizeof mk, "%s-%d", prefix, i);
		snprintf(buf, sizeof buf,
		         "{\"type\":\"prepare\",\"biz_id\":\"g\",\"message_key\":\"%s\","
		         "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
		         mk, mk, fwd, mk);
		h_send_str(e, part, mk, buf);
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"g\",\"message_key\":\"%s\"}",
		         mk);
		h_send_str(e, part, mk, buf);
	}
	h_flush();
}

static int64_t next_offset(h_env *e, int part)
{
	char sql[160], out[64];
	snprintf(sql, sizeof sql, "SELECT next_offset FROM txhub.partitions WHERE partition = %d",
	         part);
	return atoll(h_query(e, sql, out, sizeof out));
}

static int sent(h_env *e, const char *prefix, int n, int timeout_ms)
{
	char sql[256], want[16];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE '%s-%%' "
	         "AND status = 'committed' AND send_status = 'sent'", prefix);
	snprintf(want, sizeof want, "%d", n);
	return h_wait(e, sql, want, timeout_ms);
}

/* ---- /metrics ---- */

/* txhub_control_records_lost_total of e's partition part. */
static double lost_total(int port, const h_env *e, int part)
{
	char name[300];
	snprintf(name, sizeof name, "txhub_control_records_lost_total{topic=\"%s\",partition=\"%d\"}",
	         e->topic, part);
	return h_metric(port, name);
}

/* ---- txhub status ---- */

/* Partition part's object in `txhub status --json` (the caller deletes
 * *doc). */
static const cJSON *status_partition(h_env *e, int part, cJSON **doc)
{
	static char out[1 << 16];
	char err[2048];
	const char *args[] = {"status", "--json", NULL};
	cr_assert_eq(h_txhub_io(e, args, out, sizeof out, err, sizeof err), 0, "%s", err);
	*doc = cJSON_Parse(out);
	cr_assert_not_null(*doc, "%s", out);
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(*doc, "partitions"))
		if (num(p, "partition") == part)
			return p;
	cr_assert_fail("no partition %d in %s", part, out);
	return NULL;
}

static void status_text(h_env *e, char *out, size_t outsz)
{
	char err[2048];
	const char *args[] = {"status", NULL};
	cr_assert_eq(h_txhub_io(e, args, out, outsz, err, sizeof err), 0, "%s", err);
}

/* ---- the tests ---- */

typedef struct {
	h_env e;
	webhook w;
	h_httpd *srv;
	int port;
	char fwd[128], listen[64], hook[128];
	const char *settings[4];
} fixture;

static void fixture_start(fixture *f, const char *name, const char *assignor)
{
	h_setup(&f->e, name);
	h_control_topic(&f->e);
	memset(&f->w, 0, sizeof f->w);
	pthread_mutex_init(&f->w.mu, NULL);
	f->srv = h_httpd_start(on_alert, &f->w);
	cr_assert_not_null(f->srv);
	f->port = h_free_port();
	snprintf(f->fwd, sizeof f->fwd, "%s.out", f->e.topic);
	snprintf(f->listen, sizeof f->listen, "http.listen=127.0.0.1:%d", f->port);
	snprintf(f->hook, sizeof f->hook, "alert.webhook=http://127.0.0.1:%d/alert",
	         h_httpd_port(f->srv));
	f->settings[0] = f->listen;
	f->settings[1] = f->hook;
	f->settings[2] = assignor;
	f->settings[3] = NULL;
}

static void fixture_stop(fixture *f)
{
	h_httpd_stop(f->srv);
	h_teardown(&f->e);
}

/* Wait up to timeout_ms for n alerts of kind, then a little longer for
 * any more. */
static int wait_alerts(fixture *f, const char *kind, int n, int timeout_ms)
{
	for (int waited = 0; alerts_of(&f->w, kind, NULL) < n && waited < timeout_ms; waited += 100)
		h_pause_ms(100);
	h_pause_ms(1500);
	return alerts_of(&f->w, kind, NULL);
}

/* 100 control records (50 transactions) of partition 0 deleted while no
 * hub ran: on restart one alert, one error line, the counter, the status
 * row; what came after the gap is applied and forwarded, on partition 0
 * and on the others. */
static void records_deleted_while_stopped(const char *name, const char *assignor)
{
	fixture f;
	fixture_start(&f, name, assignor);
	h_env *e = &f.e;
	char log[256];
	pid_t hub = h_hub_start(e, f.settings);
	send_tx(e, 0, "before", 5, f.fwd);
	for (int p = 1; p < 4; p++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "other%d-a", p);
		send_tx(e, p, prefix, 2, f.fwd);
	}
	cr_assert(sent(e, "before", 5, 60000));
	cr_assert(sent(e, "other%", 6, 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	int64_t want = next_offset(e, 0);
	cr_assert_eq(want, 10, "partition 0 stands at %lld", (long long)want);

	/* while no hub runs: 50 transactions, then the broker deletes them */
	send_tx(e, 0, "lost", 50, f.fwd);
	int64_t low = delete_before(e, 0, want + 100);
	send_tx(e, 0, "after", 20, f.fwd);
	for (int p = 1; p < 4; p++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "other%d-b", p);
		send_tx(e, p, prefix, 2, f.fwd);
	}

	hub = h_hub_start(e, f.settings);
	h_hub_log(log, sizeof log, e);
	cr_assert(sent(e, "after", 20, 60000), "what came after the gap was not forwarded");
	cr_assert(sent(e, "other%", 12, 60000), "the other partitions did not go on");
	cr_assert_eq(h_count(e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'lost-%'"),
	             0);
	cr_assert_eq(wait_alerts(&f, "control_records_lost", 1, 10000), 1);
	cJSON *a = NULL;
	alerts_of(&f.w, "control_records_lost", &a);
	cr_assert_eq(num(a, "partition"), 0, "%s", cJSON_PrintUnformatted(a));
	cr_assert_eq(num(a, "from_offset"), want, "%s", cJSON_PrintUnformatted(a));
	cr_assert_eq(num(a, "to_offset"), low, "%s", cJSON_PrintUnformatted(a));
	cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(a, "topic")->valuestring, e->topic);
	cJSON_Delete(a);
	cr_assert_eq(alerts_of(&f.w, "control_partition_truncated", NULL), 0);
	cr_assert_eq(h_log_lines(log, "error ALERT control_records_lost"), 1);
	char line[512];
	snprintf(line, sizeof line, "error hub: control records lost: topic=%s partition=0 offsets "
	         "%lld to %lld (%lld) of %s deleted by the broker before a hub read them", e->topic,
	         (long long)want, (long long)low - 1, (long long)(low - want), e->topic);
	cr_assert_eq(h_log_lines(log, line), 1, "no error line \"%s\" in %s", line, log);
	cr_assert_eq(h_log_lines(log, "offset reset"), 0, "librdkafka reset on its own");
	cr_assert_eq(lost_total(f.port, e, 0),
	             (double)(low - want));
	cr_assert_eq(lost_total(f.port, e, 1), 0);
	cr_assert_eq(h_metric(f.port, "txhub_alerts_total{kind=\"control_records_lost\"}"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);

	/* txhub status, which reads PostgreSQL only, shows it */
	cJSON *doc;
	const cJSON *p0 = status_partition(e, 0, &doc);
	const cJSON *gap = cJSON_GetObjectItemCaseSensitive(p0, "last_gap");
	cr_assert(cJSON_IsObject(gap), "%s", cJSON_PrintUnformatted(p0));
	cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(gap, "kind")->valuestring, "lost");
	cr_assert_eq(num(gap, "from_offset"), want);
	cr_assert_eq(num(gap, "to_offset"), low);
	cr_assert(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(gap, "at")));
	cr_assert_eq(num(p0, "lost_offsets"), low - want);
	cJSON_Delete(doc);
	const cJSON *p1 = status_partition(e, 1, &doc);
	cr_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p1, "last_gap")));
	cr_assert_eq(num(p1, "lost_offsets"), 0);
	cJSON_Delete(doc);
	static char text[1 << 16];
	status_text(e, text, sizeof text);
	snprintf(line, sizeof line, "partition 0 of %s: offsets %lld to %lld (%lld) deleted by the "
	         "broker before a hub read them", e->topic, (long long)want, (long long)low - 1,
	         (long long)(low - want));
	cr_assert(strstr(text, line), "no \"%s\" in:\n%s", line, text);

	/* once: a hub started again reports nothing more */
	hub = h_hub_start(e, f.settings);
	h_hub_log(log, sizeof log, e);
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.partitions WHERE epoch = 3", "4", 60000));
	h_pause_ms(2000);
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_log_lines(log, "ALERT"), 0);
	cr_assert_eq(alerts_of(&f.w, "control_records_lost", NULL), 1);

	/* downstream: everything after the gap once or more, nothing lost */
	h_record *r;
	size_t n = h_read_topic(e, f.fwd, 2000, &r);
	int after = 0;
	for (size_t i = 0; i < n; i++) {
		cr_assert(strncmp(r[i].key, "lost-", 5) != 0, "%s was forwarded", r[i].key);
		after += strncmp(r[i].key, "after-", 6) == 0;
	}
	cr_assert_geq(after, 20);
	h_records_free(r, n);
	fixture_stop(&f);
}

Test(gaps, records_deleted_while_stopped_eager, .timeout = 300)
{
	records_deleted_while_stopped("gapeager", NULL);
}

Test(gaps, records_deleted_while_stopped_cooperative, .timeout = 300)
{
	records_deleted_while_stopped("gapcoop",
	                              "kafka.partition.assignment.strategy=cooperative-sticky");
}

static void exec_sql(h_env *e, const char *sql)
{
	PGresult *r = PQexec(e->db, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", sql, PQerrorMessage(e->db));
	PQclear(r);
}

/* While the hub runs: PostgreSQL refuses its writes of messages (a fault
 * of the database, injected with a trigger), so it holds its batch and
 * stops reading; meanwhile the broker deletes the records it had not read.
 * When PostgreSQL takes writes again, the batch in hand is applied, the
 * records after it are reported lost, and the hub reads on after them. */
Test(gaps, records_deleted_while_reading_paused, .timeout = 300)
{
	fixture f;
	fixture_start(&f, "gappause", NULL);
	h_env *e = &f.e;
	char log[256];
	const char *settings[] = {f.listen, f.hook, "intake.batch_max=10", NULL};
	exec_sql(e, "CREATE TABLE public.fault (on_ boolean NOT NULL); "
	            "INSERT INTO public.fault VALUES (false); "
	            "CREATE FUNCTION public.fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
	            "IF (SELECT on_ FROM public.fault) THEN RAISE EXCEPTION 'injected fault' "
	            "USING ERRCODE = '58000'; END IF; RETURN NEW; END $$; "
	            "CREATE TRIGGER fault BEFORE INSERT OR UPDATE ON txhub.message_rows "
	            "FOR EACH ROW EXECUTE FUNCTION public.fault()");
	pid_t hub = h_hub_start(e, settings);
	h_hub_log(log, sizeof log, e);
	send_tx(e, 0, "before", 5, f.fwd);
	cr_assert(sent(e, "before", 5, 60000));
	int64_t want = next_offset(e, 0);
	cr_assert_eq(want, 10);

	exec_sql(e, "UPDATE public.fault SET on_ = true");
	send_tx(e, 0, "lost", 50, f.fwd);
	for (int waited = 0; h_log_lines(log, "reading paused") == 0 && waited < 30000; waited += 100)
		h_pause_ms(100);
	cr_assert_geq(h_log_lines(log, "reading paused"), 1, "the hub did not stop reading");
	int64_t low = delete_before(e, 0, want + 100);
	exec_sql(e, "UPDATE public.fault SET on_ = false");
	send_tx(e, 0, "after", 20, f.fwd);
	for (int p = 1; p < 4; p++)
		send_tx(e, p, p == 1 ? "other1" : p == 2 ? "other2" : "other3", 2, f.fwd);

	cr_assert(sent(e, "after", 20, 60000), "what came after the gap was not forwarded");
	cr_assert(sent(e, "other%", 6, 60000), "the other partitions did not go on");
	cr_assert_eq(wait_alerts(&f, "control_records_lost", 1, 10000), 1);
	/* the gap starts after the records the hub held in hand: a prepare
	 * and a commit of each committed message, a prepare alone of a
	 * prepared one */
	int64_t held = h_count(e, "SELECT coalesce(sum(CASE WHEN status = 'committed' THEN 2 ELSE 1 "
	                          "END), 0) FROM txhub.messages WHERE message_key LIKE 'lost-%'");
	cr_assert_gt(held, 0);
	cJSON *a = NULL;
	alerts_of(&f.w, "control_records_lost", &a);
	cr_assert_eq(num(a, "partition"), 0);
	cr_assert_eq(num(a, "from_offset"), want + held, "%s", cJSON_PrintUnformatted(a));
	cr_assert_eq(num(a, "to_offset"), low, "%s", cJSON_PrintUnformatted(a));
	cJSON_Delete(a);
	cr_assert_eq(lost_total(f.port, e, 0),
	             (double)(low - want - held));
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_log_lines(log, "error ALERT control_records_lost"), 1);
	cJSON *doc;
	const cJSON *p0 = status_partition(e, 0, &doc);
	cr_assert_eq(num(p0, "lost_offsets"), low - want - held);
	cJSON_Delete(doc);
	fixture_stop(&f);
}

/* A hub whose partition stands beyond the broker's end of it (the topic
 * deleted and made again, or records lost by the broker: here PostgreSQL's
 * next_offset moved past the end while no hub ran) says so and reads the
 * partition again from its start: records written since are applied. */
Test(gaps, offset_beyond_the_end_reads_again_from_the_start, .timeout = 300)
{
	fixture f;
	fixture_start(&f, "gapend", NULL);
	h_env *e = &f.e;
	char log[256];
	pid_t hub = h_hub_start(e, f.settings);
	send_tx(e, 0, "old", 5, f.fwd);
	cr_assert(sent(e, "old", 5, 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(next_offset(e, 0), 10);
	PQclear(PQexec(e->db, "UPDATE txhub.partitions SET next_offset = 1000 WHERE partition = 0"));
	send_tx(e, 0, "new", 10, f.fwd);
	int64_t lo, hi;
	watermarks(e, 0, &lo, &hi);
	cr_assert_eq(hi, 30);

	hub = h_hub_start(e, f.settings);
	h_hub_log(log, sizeof log, e);
	cr_assert(sent(e, "new", 10, 60000), "the records under offset 1000 were skipped");
	cr_assert_eq(wait_alerts(&f, "control_partition_truncated", 1, 10000), 1);
	cJSON *a = NULL;
	alerts_of(&f.w, "control_partition_truncated", &a);
	cr_assert_eq(num(a, "partition"), 0);
	cr_assert_eq(num(a, "from_offset"), 30, "%s", cJSON_PrintUnformatted(a));
	cr_assert_eq(num(a, "to_offset"), 1000, "%s", cJSON_PrintUnformatted(a));
	cJSON_Delete(a);
	cr_assert_eq(alerts_of(&f.w, "control_records_lost", NULL), 0);
	cr_assert_eq(h_log_lines(log, "error ALERT control_partition_truncated"), 1);
	cr_assert_eq(lost_total(f.port, e, 0), 0);
	cr_assert(h_wait(e, "SELECT next_offset FROM txhub.partitions WHERE partition = 0", "30",
	                 30000), "partition 0 was not read again up to its end");
	cr_assert_eq(h_hub_stop(hub), 0);

	cJSON *doc;
	const cJSON *p0 = status_partition(e, 0, &doc);
	const cJSON *gap = cJSON_GetObjectItemCaseSensitive(p0, "last_gap");
	cr_assert(cJSON_IsObject(gap), "%s", cJSON_PrintUnformatted(p0));
	cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(gap, "kind")->valuestring, "truncated");
	cr_assert_eq(num(gap, "from_offset"), 30);
	cr_assert_eq(num(gap, "to_offset"), 1000);
	cr_assert_eq(num(p0, "lost_offsets"), 0);
	cJSON_Delete(doc);

	/* once */
	hub = h_hub_start(e, f.settings);
	h_hub_log(log, sizeof log, e);
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.partitions WHERE epoch = 3", "4", 60000));
	h_pause_ms(2000);
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_log_lines(log, "ALERT"), 0);
	fixture_stop(&f);
}

/* A new group on a new database reads from the beginning, even when the
 * broker deleted the partition's first records already: that is no loss,
 * and nothing is reported. */
Test(gaps, first_start_reads_from_the_beginning_and_reports_nothing, .timeout = 300)
{
	fixture f;
	fixture_start(&f, "gapfirst", NULL);
	h_env *e = &f.e;
	char log[256];
	send_tx(e, 0, "gone", 5, f.fwd);
	int64_t low = delete_before(e, 0, 10);
	send_tx(e, 0, "first", 10, f.fwd);
	send_tx(e, 1, "first1", 3, f.fwd);

	pid_t hub = h_hub_start(e, f.settings);
	h_hub_log(log, sizeof log, e);
	cr_assert(sent(e, "first", 10, 60000));
	cr_assert(sent(e, "first1", 3, 60000));
	h_pause_ms(1500);
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(f.w.n, 0, "an alert on a first start: %s", f.w.bodies[0]);
	cr_assert_eq(h_log_lines(log, "ALERT"), 0);
	cr_assert_eq(h_log_lines(log, " error "), 0);
	char taken[300];
	snprintf(taken, sizeof taken, "partition 0 of %s taken at epoch 1, reading from the beginning",
	         e->topic);
	cr_assert_geq(h_log_lines(log, taken), 1);
	cr_assert_gt(low, 0);
	cJSON *doc;
	const cJSON *p0 = status_partition(e, 0, &doc);
	cr_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p0, "last_gap")));
	cr_assert_eq(num(p0, "lost_offsets"), 0);
	cJSON_Delete(doc);
	cr_assert_eq(h_count(e, "SELECT count(*) FROM txhub.gaps"), 0);
	fixture_stop(&f);
}
