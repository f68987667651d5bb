/* test_storage.c: each message written once (issue 22, migration 0012).
 * Deliveries move a per-partition mark instead of updating rows; the
 * txhub.messages view shows them sent; a message is one row version when its
 * prepare and commit come together and two otherwise; failures still go to
 * their rows; and a 0.4.0 database migrates while producers keep writing,
 * its rows keeping their send_status, nothing lost. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "migrate.h"

#define WAIT_MS 60000

static void send_commit(h_env *e, const char *biz, const char *key, const char *fwd)
{
	char json[512];
	snprintf(json, sizeof json, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"%s\","
	         "\"payload\":\"p-%s\",\"forward\":{\"topic\":\"%s\"}}", biz, key, key, fwd);
	h_send_str(e, -1, key, json);
}

static void send_prepare(h_env *e, const char *biz, const char *key, const char *fwd)
{
	char json[512];
	snprintf(json, sizeof json, "{\"type\":\"prepare\",\"biz_id\":\"%s\",\"message_key\":\"%s\","
	         "\"payload\":\"p-%s\",\"forward\":{\"topic\":\"%s\"}}", biz, key, key, fwd);
	h_send_str(e, -1, key, json);
}

static void send_decision(h_env *e, const char *biz, const char *key)
{
	char json[256];
	snprintf(json, sizeof json, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"%s\"}",
	         biz, key);
	h_send_str(e, -1, key, json);
}

/* How many distinct keys of topic's records start with prefix, and how
 * many records in all (*total). */
static size_t distinct_keys(h_env *e, const char *topic, const char *prefix, size_t *total)
{
	h_record *r = NULL;
	size_t n = h_read_topic(e, topic, 3000, &r), distinct = 0;
	*total = 0;
	for (size_t i = 0; i < n; i++) {
		const char *mk = strstr(r[i].headers, "txhub-message-key=");
		if (!mk || strncmp(mk + 18, prefix, strlen(prefix)) != 0)
			continue;
		(*total)++;
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(r[i].headers, r[j].headers) == 0;
		distinct += !seen;
	}
	h_records_free(r, n);
	return distinct;
}

/* The row versions the hub wrote into txhub.message_rows ("ins/upd"), once
 * the statistics of its sessions reached the server (they are flushed when
 * a session ends). */
static int wait_versions(h_env *e, const char *expect)
{
	return h_wait(e, "SELECT n_tup_ins || '/' || n_tup_upd FROM pg_stat_user_tables "
	                 "WHERE relid = 'txhub.message_rows'::regclass", expect, 10000);
}

Test(storage, a_delivery_writes_no_row_and_the_view_says_sent, .timeout = 180)
{
	h_env e;
	h_setup(&e, "st_once");
	char fwd[128], key[32];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);
	/* 300 one-shot commits: one record, one row version each */
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof key, "one-%d", i);
		send_commit(&e, "shop", key, fwd);
	}
	/* 50 prepared now, committed once they are stored: two versions each */
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof key, "two-%d", i);
		send_prepare(&e, "shop", key, fwd);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared'", "50",
	                 WAIT_MS));
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof key, "two-%d", i);
		send_decision(&e, "shop", key);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "350",
	                 WAIT_MS), "not every message shows sent");
	cr_assert_eq(h_hub_stop(hub), 0);

	/* no row was written for a delivery: the marks say it */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE send_status = 'sent'"),
	             0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows "
	                         "WHERE send_status = 'pending' AND fwd_seq IS NOT NULL"), 350);
	cr_assert_gt(h_count(&e, "SELECT count(*) FROM txhub.forward_marks"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows r WHERE r.fwd_seq > "
	                         "(SELECT max(upto) FROM txhub.forward_marks f "
	                         "WHERE f.partition = r.src_partition)"), 0, "a row above its mark");
	cr_assert(wait_versions(&e, "350/50"), "row versions (inserts/updates) other than 350/50: %s",
	          h_query(&e, "SELECT n_tup_ins || '/' || n_tup_upd FROM pg_stat_user_tables WHERE "
	                      "relid = 'txhub.message_rows'::regclass", (char[64]){0}, 64));
	/* and each one reached its topic */
	size_t total;
	cr_assert_eq(distinct_keys(&e, fwd, "one-", &total), 300);
	cr_assert_eq(distinct_keys(&e, fwd, "two-", &total), 50);
	/* status and list count them as sent */
	static char out[65536], err[4096];
	const char *status[] = {"status", "--json", NULL};
	cr_assert_eq(h_txhub_io(&e, status, out, sizeof out, err, sizeof err), 0, "%s", err);
	cr_assert(strstr(out, "\"sent\":350"), "%s", out);
	cr_assert(strstr(out, "\"pending\":0"), "%s", out);
	const char *list[] = {"list", "--send-status", "sent", "--limit", "100", "--json", NULL};
	cr_assert_eq(h_txhub_io(&e, list, out, sizeof out, err, sizeof err), 0, "%s", err);
	long n = 0;
	for (const char *p = out; (p = strstr(p, "\"message_key\"")); p++)
		n++;
	cr_assert_eq(n, 100, "%ld listed: %.300s", n, out);
	const char *pending[] = {"list", "--send-status", "pending", "--json", NULL};
	cr_assert_eq(h_txhub_io(&e, pending, out, sizeof out, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(out, "[]\n");
	h_teardown(&e);
}

/* A forward that fails goes to its row (attempts, error, no sequence), is
 * pending in the view whatever the mark, and is written sent on its own once
 * it goes; the view's writes (psql by hand) reach the table. */
Test(storage, failures_are_written_per_row, .timeout = 180)
{
	h_env e;
	h_setup(&e, "st_fail");
	/* a broker of our own whose topic "denied" refuses access until allowed */
	FILE *cmd = NULL;
	pid_t broker = h_devbroker_start(&e, (const char *[]){NULL}, &cmd);
	fprintf(cmd, "deny denied\n");
	fflush(cmd);
	const char *s[] = {"kafka.message.timeout.ms=1000", "forward.backoff_ms=100",
	                   "forward.backoff_max_ms=200", "forward.max_attempts=2", NULL};
	pid_t hub = h_hub_start(&e, s);
	send_commit(&e, "shop", "fine", "allowed");
	send_commit(&e, "shop", "bad", "denied");
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'bad'",
	                 "failed", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'fine'",
	                 "sent", WAIT_MS));
	cr_assert_eq(h_count(&e, "SELECT send_attempts FROM txhub.message_rows "
	                         "WHERE message_key = 'bad' AND fwd_seq IS NULL "
	                         "AND last_error IS NOT NULL"), 2);
	/* redriven through the view, as the psql examples of docs/database.md do */
	fprintf(cmd, "allow denied\n");
	fflush(cmd);
	h_exec(e.db, "UPDATE txhub.messages SET send_status = 'pending', send_attempts = 0, "
	             "next_send_at = now() WHERE message_key = 'bad'");
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.message_rows WHERE message_key = 'bad'",
	                 "sent", WAIT_MS), "sent on its own: written on its row");
	/* a replay of one sent by the mark: pending again, forwarded again with
	 * a new sequence, and sent by the mark again (no error to clear: its
	 * row is not written) */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = 'fine' "
	                         "AND send_status = 'pending'"), 1, "sent by the mark");
	h_exec(e.db, "UPDATE txhub.messages SET send_status = 'pending', next_send_at = now() "
	             "WHERE message_key = 'fine'");
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'fine'",
	                 "sent", WAIT_MS));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = 'fine' "
	                         "AND send_status = 'pending' AND fwd_seq IS NOT NULL"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_record *r = NULL;
	size_t n = h_read_topic(&e, "allowed", 2000, &r);
	h_records_free(r, n);
	cr_assert_eq(n, 2, "fine: once, then its replay");
	/* an INSERT and a DELETE through the view */
	h_exec(e.db, "INSERT INTO txhub.messages (biz_id, message_key, status, src_partition, "
	             "src_offset) VALUES ('shop', 'by-hand', 'rolled_back', 0, 0)");
	cr_assert_eq(h_count(&e, "SELECT check_attempts + send_attempts FROM txhub.message_rows "
	                         "WHERE message_key = 'by-hand' AND created_at IS NOT NULL"), 0);
	h_exec(e.db, "DELETE FROM txhub.messages WHERE message_key = 'by-hand'");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = "
	                         "'by-hand'"), 0);
	h_teardown(&e);
	h_devbroker_stop(broker, cmd);
}

/* New rows go in by COPY (issue 22): what COPY's text format would take for
 * the end of a field, a row or the data (tab, newline, backslash, "\.")
 * arrives as sent, in the row and in the forward, and the due times computed
 * from the transaction's now() are those the INSERT computed. */
Test(storage, copied_rows_keep_every_character_and_their_due_times, .timeout = 180)
{
	h_env e;
	h_setup(&e, "st_copy");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	const char *s[] = {"kafka.message.timeout.ms=15678", "checkback.first_after_ms=12345", NULL};
	pid_t hub = h_hub_start(&e, s);
	snprintf(buf, sizeof buf,
	         "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"odd\","
	         "\"payload\":\"\\\\.\\n\\\\N\\t\\u00e9\","
	         "\"forward\":{\"topic\":\"%s\",\"key\":\"k\\t1\\n\\\\2\","
	         "\"headers\":{\"h\":\"a\\tb\\\\c\\nd\"}}}", fwd);
	h_send_str(&e, -1, "odd", buf);
	send_prepare(&e, "shop", "later", fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'odd'",
	                 "sent", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT status FROM txhub.messages WHERE message_key = 'later'",
	                 "prepared", WAIT_MS));
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = 'odd' "
	                         "AND forward_key = E'k\\t1\\n\\\\2' "
	                         "AND forward_headers->>'h' = E'a\\tb\\\\c\\nd' "
	                         "AND payload = convert_to(E'\\\\.\\n\\\\N\\t\\u00e9', 'UTF8') "
	                         "AND next_send_at - updated_at = interval '75.678 s' "
	                         "AND next_check_at IS NULL AND decision IS NULL"), 1,
	             "the copied row differs: %s",
	             h_query(&e, "SELECT row(forward_key, forward_headers, payload, "
	                         "next_send_at - updated_at) FROM txhub.message_rows "
	                         "WHERE message_key = 'odd'", buf, sizeof buf));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = "
	                         "'later' AND next_check_at - created_at = interval '12.345 s' "
	                         "AND send_status IS NULL AND next_send_at IS NULL "
	                         "AND fwd_seq IS NULL AND tenant IS NULL"), 1);
	h_record *r = NULL;
	size_t n = h_read_topic(&e, fwd, 2000, &r);
	cr_assert_eq(n, 1);
	cr_assert_eq(r[0].key_len, strlen("k\t1\n\\2"));
	cr_assert_eq(memcmp(r[0].key, "k\t1\n\\2", r[0].key_len), 0);
	cr_assert_eq(r[0].value_len, strlen("\\.\n\\N\t\xc3\xa9"));
	cr_assert_eq(memcmp(r[0].value, "\\.\n\\N\t\xc3\xa9", r[0].value_len), 0);
	cr_assert(strstr(r[0].headers, "h=a\tb\\c\nd\n"), "%s", r[0].headers);
	h_records_free(r, n);
	h_teardown(&e);
}

/* A role under row-level security may not COPY into a table: the hub's new
 * rows then go in by INSERT, after the batch that found out is applied
 * again. The hub runs as a role of its own here, granted what it needs, with
 * row-level security on and a policy that lets it do everything. */
Test(storage, copy_refused_under_row_level_security_falls_back_to_insert, .timeout = 180)
{
	h_env e;
	h_setup(&e, "st_rls");
	char fwd[128], key[32], role[96], q[1024], pg[700];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	snprintf(role, sizeof role, "hub_%s", e.name);
	snprintf(q, sizeof q, "DROP ROLE IF EXISTS %s", role);
	h_exec(e.db, q);
	snprintf(q, sizeof q, "CREATE ROLE %s LOGIN NOSUPERUSER NOBYPASSRLS; "
	                      "GRANT USAGE ON SCHEMA txhub TO %s; "
	                      "GRANT ALL ON ALL TABLES IN SCHEMA txhub TO %s; "
	                      "GRANT ALL ON ALL SEQUENCES IN SCHEMA txhub TO %s", role, role, role, role);
	h_exec(e.db, q);
	h_exec(e.db, "CREATE POLICY everything ON txhub.message_rows USING (true) WITH CHECK (true)");
	h_exec(e.db, "ALTER TABLE txhub.message_rows ENABLE ROW LEVEL SECURITY");
	snprintf(pg, sizeof pg, "pg=%s user=%s", e.conninfo, role);
	const char *s[] = {pg, NULL};
	pid_t hub = h_hub_start(&e, s);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof key, "rls-%d", i);
		send_commit(&e, "shop", key, fwd);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "20",
	                 WAIT_MS));
	cr_assert_eq(h_hub_stop(hub), 0);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_eq(h_log_lines(log, "refuses COPY into txhub.message_rows"), 1, "%s", log);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	size_t total;
	cr_assert_eq(distinct_keys(&e, fwd, "rls-", &total), 20);
	cr_assert_eq(total, 20);
	snprintf(q, sizeof q, "DROP OWNED BY %s; DROP ROLE %s", role, role);
	h_exec(e.db, q);
	h_teardown(&e);
}

/* A message another replica inserted between this batch's read of its keys
 * and its INSERT (the store inserts without ON CONFLICT since issue 22's
 * WAL work): the primary key refuses the batch, which is applied again and
 * then finds the row. Not the record's fault: nothing rejected, the message
 * stored once and forwarded. A trigger plays the other replica, once (a
 * sequence: it survives the rollback). */
Test(storage, a_key_inserted_meanwhile_is_applied_again_not_rejected, .timeout = 180)
{
	h_env e;
	h_setup(&e, "st_race");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_exec(e.db, "CREATE SEQUENCE public.race_once");
	h_exec(e.db, "CREATE FUNCTION public.race() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
	             "IF NEW.message_key = 'raced' AND pg_trigger_depth() = 1 "
	             "AND nextval('public.race_once') = 1 THEN "
	             "INSERT INTO txhub.message_rows (biz_id, message_key, status, src_partition, "
	             "src_offset) VALUES (NEW.biz_id, NEW.message_key, 'prepared', 0, 0); "
	             "END IF; RETURN NEW; END $$");
	h_exec(e.db, "CREATE TRIGGER race BEFORE INSERT ON txhub.message_rows "
	             "FOR EACH ROW EXECUTE FUNCTION public.race()");
	pid_t hub = h_hub_start(&e, NULL);
	send_commit(&e, "shop", "raced", fwd);
	send_commit(&e, "shop", "calm", fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "2",
	                 WAIT_MS), "not both sent");
	cr_assert_eq(h_hub_stop(hub), 0);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_gt(h_log_lines(log, "another replica inserted"), 0, "the retry is not in %s", log);
	/* 1: the first attempt (refused), 2: the batch again (stored) */
	cr_assert_eq(h_count(&e, "SELECT nextval('public.race_once')"), 3, "not one retry");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows "
	                         "WHERE status = 'committed'"), 2);
	size_t total;
	cr_assert_eq(distinct_keys(&e, fwd, "raced", &total), 1);
	cr_assert_eq(distinct_keys(&e, fwd, "calm", &total), 1);
	h_exec(e.db, "DROP TRIGGER race ON txhub.message_rows");
	h_teardown(&e);
}

/* ---- migration 0012 on a 0.4.0 database ---- */

static PGconn *fresh_database(const char *name, char *conninfo, size_t sz)
{
	const char *base = getenv("TXHUB_PG");
	cr_assert_not_null(base);
	PGconn *admin = PQconnectdb(base);
	cr_assert(PQstatus(admin) == CONNECTION_OK);
	char q[256];
	PQclear(PQexec(admin, "SET client_min_messages = warning"));
	snprintf(q, sizeof q, "DROP DATABASE IF EXISTS %s", name);
	PQclear(PQexec(admin, q));
	snprintf(q, sizeof q, "CREATE DATABASE %s", name);
	h_exec(admin, q);
	PQfinish(admin);
	snprintf(conninfo, sz, "%s dbname=%s", base, name);
	PGconn *c = PQconnectdb(conninfo);
	cr_assert(PQstatus(c) == CONNECTION_OK);
	return c;
}

typedef struct {
	h_env *e;
	const char *fwd;
	volatile int stop;
	int sent;
} producer;

/* Producers keep writing one-shot commits to the control topic. */
static void *produce(void *arg)
{
	producer *p = arg;
	char key[32];
	while (!p->stop) {
		snprintf(key, sizeof key, "live-%d", p->sent);
		send_commit(p->e, "live", key, p->fwd);
		p->sent++;
		if (p->sent % 50 == 0)
			h_pause_ms(10);
	}
	h_flush();
	return NULL;
}

Test(storage, migration_of_a_040_database_while_producers_write, .timeout = 300)
{
	h_env e;
	h_setup(&e, "st_mig");
	char name[96], conninfo[700], pg[720], fwd[128];
	snprintf(name, sizeof name, "%s_old", e.name);
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	PGconn *old = fresh_database(name, conninfo, sizeof conninfo);
	/* schema 8, as 0.4.0 and issue 20 left it: 100,000 rows sent, and a few
	 * of every other kind */
	h_exec(old, "CREATE SCHEMA txhub");
	h_exec(old, "CREATE TABLE txhub.schema_migrations (version integer PRIMARY KEY, name text "
	            "NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
	for (const migration *m = migrations; m->name && m->version <= 8; m++) {
		h_exec(old, m->sql);
		char q[256];
		snprintf(q, sizeof q, "INSERT INTO txhub.schema_migrations (version, name) VALUES (%d, "
		         "'%s')", m->version, m->name);
		h_exec(old, q);
	}
	char q[1200];
	snprintf(q, sizeof q,
	         "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	         "forward_topic, src_partition, src_offset, fwd_seq, send_attempts, next_send_at) "
	         "SELECT 'old', 'k' || i, CASE WHEN i <= 100 THEN 'prepared' ELSE 'committed' END, "
	         "CASE WHEN i <= 100 THEN NULL WHEN i <= 150 THEN 'failed' WHEN i <= 250 THEN 'pending' "
	         "ELSE 'sent' END, 'old-payload', '%s', i %% 4, i, "
	         "CASE WHEN i > 150 THEN (i + 1) << 20 END, CASE WHEN i <= 150 THEN 3 ELSE 0 END, "
	         "now() + interval '1 hour' FROM generate_series(1, 100000) i", fwd);
	h_exec(old, q);
	snprintf(q, sizeof q, "INSERT INTO txhub.partitions (topic, partition, epoch, owner, "
	         "next_offset) SELECT '%s', p, 1, 'old-hub', 0 FROM generate_series(0, 3) p", e.topic);
	h_exec(old, q);

	h_env n = e;
	cr_assert_lt(strlen(conninfo), sizeof n.conninfo);
	memcpy(n.conninfo, conninfo, strlen(conninfo) + 1);
	n.db = old;
	producer p = {&n, fwd, 0, 0};
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, produce, &p), 0);
	h_pause_ms(300);
	int before = p.sent;
	snprintf(pg, sizeof pg, "pg=%s", conninfo);
	const char *migrate[] = {"-X", pg, "migrate", NULL};
	static char out[65536], err[65536];
	cr_assert_eq(h_txhub_io(&e, migrate, out, sizeof out, err, sizeof err), 0, "%s", err);
	pid_t hub = h_hub_start(&n, NULL);
	h_pause_ms(1000);
	p.stop = 1;
	pthread_join(th, NULL);
	cr_assert_gt(p.sent, before, "the producers stopped while migrating");

	/* the old rows keep their send_status (the pending ones go now) */
	cr_assert_eq(h_count(&n, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'old' "
	                         "AND status = 'prepared' AND send_status IS NULL"), 100);
	cr_assert_eq(h_count(&n, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'old' "
	                         "AND send_status = 'failed'"), 50);
	/* everything produced is stored and forwarded, and so are the old pending */
	char want[32];
	snprintf(want, sizeof want, "%d", p.sent);
	cr_assert(h_wait(&n, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'live' "
	                     "AND send_status = 'sent'", want, 120000), "live: %d produced", p.sent);
	cr_assert(h_wait(&n, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'old' "
	                     "AND send_status = 'sent'", "99850", 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	size_t total;
	cr_assert_eq(distinct_keys(&n, fwd, "live-", &total), (size_t)p.sent, "lost forwards");
	cr_assert_eq(distinct_keys(&n, fwd, "k", &total), 100, "the old pending ones");
	cr_assert_eq(h_count(&n, "SELECT max(version) FROM txhub.schema_migrations"), migrate_latest());
	/* migrating again: nothing to do */
	cr_assert_eq(h_txhub_io(&e, migrate, out, sizeof out, err, sizeof err), 0, "%s", err);
	PQfinish(old);
	h_teardown(&e);
}
