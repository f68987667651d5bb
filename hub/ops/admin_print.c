/* admin_print.c: the admin commands' output (see admin_print.h): aligned
 * tables and readable ages for people, one JSON document for programs.
 * Everything a producer or the database wrote passes admin_escape() before
 * it reaches a terminal. */
#include "admin_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "duration.h"
#include "utf8.h"

/* ---- text for terminals ---- */

char *admin_escape(const char *s)
{
	size_t len = strlen(s);
	char *out = malloc(len * 4 + 1), *o = out;
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		/* a valid, printable UTF-8 sequence starting here, or 0 */
		uint32_t cp;
		size_t n = txhubi_utf8_decode(p, strnlen((const char *)p, 4), &cp);
		if (n && (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == '\\'))
			n = 0; /* a C0 or C1 control, DEL, or the backslash */
		if (n == 0) {
			o += sprintf(o, "\\x%02X", *p);
			p++;
			continue;
		}
		memcpy(o, p, n);
		o += n;
		p += n;
	}
	*o = '\0';
	return out;
}

size_t admin_width(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p & 0xc0) != 0x80)
			n++;
	return n;
}

/* Print s escaped (or "-" for NULL). */
static void put(FILE *f, const char *s)
{
	char *e = s ? admin_escape(s) : NULL;
	fputs(e ? e : s ? "?" : "-", f);
	free(e);
}

/* ---- tables ---- */

typedef struct {
	char **cells; /* escaped, row after row */
	size_t ncols, n, cap;
	int oom;
} table;

static void table_cell(table *t, const char *text)
{
	char **c = array_grow(t->cells, &t->cap, t->n + 1, sizeof *c);
	if (!c) {
		t->oom = 1;
		return;
	}
	t->cells = c;
	char *e = admin_escape(text ? text : "-");
	if (!e)
		t->oom = 1;
	else
		t->cells[t->n++] = e;
}

static void table_print(const table *t, FILE *out)
{
	size_t w[16] = {0};
	for (size_t i = 0; i < t->n; i++) {
		size_t c = i % t->ncols, len = admin_width(t->cells[i]);
		if (c < 16 && len > w[c])
			w[c] = len;
	}
	for (size_t i = 0; i < t->n; i++) {
		size_t c = i % t->ncols;
		fputs(t->cells[i], out);
		if (c + 1 == t->ncols || i + 1 == t->n)
			fputc('\n', out);
		else
			fprintf(out, "%*s", (int)(w[c] - admin_width(t->cells[i]) + 2), "");
	}
}

static void table_free(table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
}

static const char *str(const cJSON *o, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(o, name));
}

static long long num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(o, name);
	return cJSON_IsNumber(v) ? (long long)cJSON_GetNumberValue(v) : -1;
}

/* "4m 12s ago", or "-" for an unknown age. */
static const char *ago(long long seconds, char *out, size_t outsz)
{
	char d[32];
	if (seconds < 0)
		snprintf(out, outsz, "-");
	else
		snprintf(out, outsz, "%s ago", duration_format(seconds, d, sizeof d));
	return out;
}

int admin_print_json(const cJSON *doc)
{
	char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
	if (!text)
		return -1;
	puts(text);
	free(text);
	return 0;
}

/* ---- status ---- */

static void status_counts_text(const ops_status *st, int64_t awaiting_ms)
{
	char a[32], b[32];
	printf("messages   ");
	for (int i = 0; i < OPS_NSTATUS; i++)
		printf("%s%s %lld", i ? "   " : "", ops_status_names[i], (long long)st->messages[i]);
	printf("\nsend       pending %lld   sent %lld   failed %lld\n", (long long)st->send_pending,
	       (long long)st->send_sent, (long long)st->send_failed);
	printf("parked     %lld (check_failed %lld, failed sends %lld, awaiting_prepare over %s %lld)\n",
	       (long long)st->parked, (long long)st->parked_check_failed,
	       (long long)st->parked_send_failed, duration_format(awaiting_ms / 1000, a, sizeof a),
	       (long long)st->parked_awaiting);
	printf("oldest     prepared %s, pending send %s\n",
	       st->oldest_prepared_s < 0 ? "none" : ago(st->oldest_prepared_s, a, sizeof a),
	       st->oldest_pending_send_s < 0 ? "none" : ago(st->oldest_pending_send_s, b, sizeof b));
	printf("rejected   %lld in the last hour, %lld in all\n", (long long)st->rejected_1h,
	       (long long)st->rejected);
	printf("conflicts  %lld in the last hour, %lld in all\n", (long long)st->conflicts_1h,
	       (long long)st->conflicts);
}

static void status_partitions_text(const ops_status *st)
{
	table t = {.ncols = 8};
	const char *head[] = {"TOPIC", "PARTITION", "OWNER", "GROUP", "EPOCH", "NEXT_OFFSET", "LAG",
	                      "HEARTBEAT"};
	for (int i = 0; i < 8; i++)
		table_cell(&t, head[i]);
	for (size_t i = 0; i < st->npartitions; i++) {
		const ops_partition *p = &st->partitions[i];
		char part[16], epoch[24], next[24], lag[24], hb[48];
		snprintf(part, sizeof part, "%d", p->partition);
		snprintf(epoch, sizeof epoch, "%lld", (long long)p->epoch);
		snprintf(next, sizeof next, "%lld", (long long)p->next_offset);
		snprintf(lag, sizeof lag, "%lld", (long long)p->lag);
		ago(p->heartbeat_age_ms < 0 ? -1 : p->heartbeat_age_ms / 1000, hb, sizeof hb);
		if (p->released)
			snprintf(hb, sizeof hb, "released");
		table_cell(&t, p->topic);
		table_cell(&t, part);
		table_cell(&t, p->has_row ? p->owner : "(none: never taken)");
		table_cell(&t, *p->group ? p->group : "-");
		table_cell(&t, p->has_row ? epoch : "-");
		table_cell(&t, p->next_offset < 0 ? "-" : next);
		table_cell(&t, p->lag < 0 ? "?" : lag);
		table_cell(&t, hb);
	}
	printf("\n");
	if (st->npartitions == 0)
		printf("partitions: none taken yet (no hub has run against this database)\n");
	else
		table_print(&t, stdout);
	table_free(&t);
}

/* The last gap of each partition that had one (txhub.gaps). */
static void status_gaps_text(const ops_status *st)
{
	const char *head = "\ngaps       ";
	for (size_t i = 0; i < st->npartitions; i++) {
		const ops_partition *p = &st->partitions[i];
		char when[48];
		if (!p->gap_kind[0])
			continue;
		ago(p->gap_age_s, when, sizeof when);
		printf("%spartition %d of %s: ", head, p->partition, p->topic);
		if (strcmp(p->gap_kind, "lost") == 0)
			printf("offsets %lld to %lld (%lld) deleted by the broker before a hub read "
			       "them, %s (%lld lost in all)\n", (long long)p->gap_from,
			       (long long)p->gap_to - 1, (long long)(p->gap_to - p->gap_from), when,
			       (long long)p->lost_offsets);
		else
			printf("ended at offset %lld, before offset %lld where the hub stood; read "
			       "again from its start, %s\n", (long long)p->gap_from, (long long)p->gap_to,
			       when);
		head = "           ";
	}
}

/* Partitions held by one consumer group while a replica of another waits
 * for them, and what to do. */
static void status_clashes_text(const ops_status *st)
{
	int any = 0;
	for (size_t i = 0; i < st->npartitions; i++) {
		const ops_partition *p = &st->partitions[i];
		if (!p->contested_by[0])
			continue;
		printf("%s partition %d of %s is held by %s of consumer group \"%s\"; a replica of "
		       "consumer group \"%s\" waits for it\n", any ? "          " : "\nclash     ",
		       p->partition, p->topic, p->owner, p->group, p->contested_by);
		any = 1;
	}
	if (any)
		printf("           %s\n", OPS_GROUP_CLASH_ADVICE);
}

/* forward.dead_letter_topic: parked forwards produced there and not (yet),
 * and whether producing there fails (the dead_letter_failed alert). */
static void status_dead_letters_text(const ops_dead_letters *d)
{
	if (d->topic[0])
		printf("dead letter topic %s: %lld parked forward(s) dead-lettered, %lld parked not yet\n",
		       d->topic, (long long)d->dead_lettered, (long long)d->waiting);
	else
		printf("dead letter off (forward.dead_letter_topic is empty): %lld parked forward(s) "
		       "dead-lettered before\n", (long long)d->dead_lettered);
	if (d->failing > 0)
		printf("            FAILING since %s: %lld of those parked could not be produced there "
		       "(alert dead_letter_failed); the latest: %s\n", d->failing_since,
		       (long long)d->failing, d->last_error);
}

/* forward.order = key: the keys whose messages wait for an earlier unsent one. */
static void status_blocked_text(const ops_status *st)
{
	if (st->blocked_messages == 0)
		return;
	printf("\nblocked    %lld message(s) held for an earlier unsent message of their forward "
	       "key (forward.order = key)\n", (long long)st->blocked_messages);
	table t = {.ncols = 5};
	const char *head[] = {"FORWARD_TOPIC", "FORWARD_KEY", "PARTITION", "HELD", "BLOCKED_BY"};
	for (int i = 0; i < 5; i++)
		table_cell(&t, head[i]);
	for (size_t i = 0; i < st->nblocked; i++) {
		const ops_blocked_key *b = &st->blocked[i];
		char part[300], held[24], by[700];
		snprintf(part, sizeof part, "%d of %s", b->partition, b->control_topic);
		snprintf(held, sizeof held, "%lld", (long long)b->held);
		if (b->by_biz_id[0])
			snprintf(by, sizeof by, "%s/%s (%s)", b->by_biz_id, b->by_message_key,
			         strcmp(b->by_send_status, "failed") == 0 ? "failed: redrive or skip it"
			                                                   : b->by_send_status);
		else
			snprintf(by, sizeof by, "(sent: released within about a second)");
		table_cell(&t, b->topic);
		table_cell(&t, b->key);
		table_cell(&t, part);
		table_cell(&t, held);
		table_cell(&t, by);
	}
	table_print(&t, stdout);
	table_free(&t);
}

ops_rc admin_do_status(const txhub_config *cfg, PGconn *conn, const admin_args *a, char *err,
                       size_t errsz)
{
	ops_status st;
	ops_rc rc = ops_status_read_tenant(conn, cfg->alert_awaiting_prepare_ms, a->tenant, &st, err,
	                                   errsz);
	if (rc != OPS_OK) {
		ops_status_free(&st);
		return rc;
	}
	ops_status_lag(cfg, &st, OPS_LAG_BUDGET_MS);
	snprintf(st.dead_letters.topic, sizeof st.dead_letters.topic, "%s",
	         cfg->forward_dead_letter_topic);
	if (st.lag_note[0])
		fprintf(stderr, "txhub status: lag unknown: %s\n", st.lag_note);
	if (a->json) {
		cJSON *doc = ops_status_json(&st);
		if (admin_print_json(doc) != 0) {
			snprintf(err, errsz, "out of memory");
			rc = OPS_DB_ERROR;
		}
		cJSON_Delete(doc);
	} else {
		if (a->tenant)
			printf("tenant %s: its messages, rejected and conflict rows; every partition\n",
			       a->tenant);
		status_counts_text(&st, cfg->alert_awaiting_prepare_ms);
		status_dead_letters_text(&st.dead_letters);
		status_partitions_text(&st);
		status_gaps_text(&st);
		status_clashes_text(&st);
		status_blocked_text(&st);
	}
	ops_status_free(&st);
	return rc;
}

/* ---- list ---- */

static void list_text(const cJSON *rows, const admin_args *a)
{
	table t = {.ncols = 10};
	const char *head[] = {"BIZ_ID", "MESSAGE_KEY", "STATUS", "SEND", "CHECKS", "SENDS",
	                      "UPDATED", "PAYLOAD", "FORWARD_TOPIC", "LAST_ERROR"};
	for (int i = 0; i < 10; i++)
		table_cell(&t, head[i]);
	const cJSON *r;
	cJSON_ArrayForEach(r, rows)
	{
		char checks[16], sends[16], upd[48], bytes[32], lerr[64];
		snprintf(checks, sizeof checks, "%lld", num(r, "check_attempts"));
		snprintf(sends, sizeof sends, "%lld", num(r, "send_attempts"));
		snprintf(bytes, sizeof bytes, "%lld B", num(r, "payload_bytes"));
		/* one line per row, cut on a character boundary: the whole error
		 * is in `show` */
		const char *e = str(r, "last_error");
		size_t cut = e ? strlen(e) : 0;
		if (cut > 60)
			for (cut = 60; cut > 0 && ((unsigned char)e[cut] & 0xc0) == 0x80; cut--)
				;
		snprintf(lerr, sizeof lerr, "%.*s%s", (int)cut, e ? e : "-",
		         e && strlen(e) > cut ? "..." : "");
		table_cell(&t, str(r, "biz_id"));
		table_cell(&t, str(r, "message_key"));
		table_cell(&t, str(r, "status"));
		table_cell(&t, str(r, "send_status"));
		table_cell(&t, checks);
		table_cell(&t, sends);
		table_cell(&t, ago(num(r, "updated_age_s"), upd, sizeof upd));
		table_cell(&t, bytes);
		table_cell(&t, str(r, "forward_topic"));
		table_cell(&t, lerr);
	}
	int n = cJSON_GetArraySize(rows);
	if (n > 0)
		table_print(&t, stdout);
	printf("%d message(s)%s\n", n, n == a->limit ? " (the limit: --limit shows more)" : "");
	table_free(&t);
}

ops_rc admin_do_list(PGconn *conn, const admin_args *a, char *err, size_t errsz)
{
	ops_list_filter f = {.statuses = a->statuses, .nstatuses = a->nstatuses,
	                     .send_status = a->send_status, .biz_id = a->biz_id,
	                     .since_ms = a->since_ms, .since_set = a->since_set, .limit = a->limit,
	                     .tenant = a->tenant, .trace_id = a->trace_id,
	                     .scheduled = a->scheduled};
	cJSON *rows = NULL;
	ops_rc rc = ops_list(conn, &f, &rows, err, errsz);
	if (rc == OPS_OK && a->json && admin_print_json(rows) != 0) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
	} else if (rc == OPS_OK && !a->json) {
		list_text(rows, a);
	}
	cJSON_Delete(rows);
	return rc;
}

/* ---- show ---- */

/* In text, a payload is shown up to this many bytes; --json has it all. */
#define SHOW_PAYLOAD_MAX 4096

static void field_line(const char *name, const char *value)
{
	printf("  %-15s ", name);
	put(stdout, value);
	putchar('\n');
}

static void show_payload(const cJSON *m)
{
	const char *p = str(m, "payload");
	long long bytes = num(m, "payload_bytes");
	printf("  %-15s %lld bytes, %s%s\n", "payload", bytes, str(m, "payload_encoding"),
	       p ? ":" : " (none)");
	if (!p)
		return;
	size_t len = strlen(p);
	char *cut = strndup(p, len > SHOW_PAYLOAD_MAX ? SHOW_PAYLOAD_MAX : len);
	printf("    ");
	put(stdout, cut ? cut : "?");
	free(cut);
	if (len > SHOW_PAYLOAD_MAX)
		printf(" ... (%zu more characters: --json shows all)", len - SHOW_PAYLOAD_MAX);
	putchar('\n');
}

static int is(const cJSON *m, const char *name, const char *value)
{
	const char *v = str(m, name);
	return v && strcmp(v, value) == 0;
}

static void show_message(const cJSON *m)
{
	static const char *const fields[] = {"status", "send_status", "decision", "forward_topic",
	                                     "forward_key", "checkback_url", "last_error",
	                                     "alerted_at", "trace_id", "traceparent", "tracestate",
	                                     "dead_lettered_at"};
	char buf[128], a[48];
	printf("message ");
	put(stdout, str(m, "biz_id"));
	printf(" / ");
	put(stdout, str(m, "message_key"));
	putchar('\n');
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		field_line(fields[i], str(m, fields[i]));
	/* the due times mean something only in the state that uses them (a
	 * sent row keeps its last lease): --json has them as stored */
	field_line("next_check_at", is(m, "status", "prepared") ? str(m, "next_check_at") : NULL);
	field_line("next_send_at", is(m, "send_status", "pending") ? str(m, "next_send_at") : NULL);
	/* delayed delivery: the due time, once a commit fixed it */
	field_line("not_before", is(m, "status", "committed") ? str(m, "not_before") : NULL);
	const cJSON *h = cJSON_GetObjectItem(m, "forward_headers");
	char *headers = cJSON_IsObject(h) ? cJSON_PrintUnformatted(h) : NULL;
	field_line("forward_headers", headers);
	free(headers);
	snprintf(buf, sizeof buf, "%lld check-back(s), %lld failed send(s)", num(m, "check_attempts"),
	         num(m, "send_attempts"));
	field_line("attempts", buf);
	snprintf(buf, sizeof buf, "partition %lld offset %lld", num(m, "src_partition"),
	         num(m, "src_offset"));
	field_line("source", buf);
	snprintf(buf, sizeof buf, "%s (%s)", str(m, "created_at"),
	         ago(num(m, "created_age_s"), a, sizeof a));
	field_line("created_at", buf);
	snprintf(buf, sizeof buf, "%s (%s)", str(m, "updated_at"),
	         ago(num(m, "updated_age_s"), a, sizeof a));
	field_line("updated_at", buf);
	show_payload(m);
}

static void show_history(const cJSON *h)
{
	table t = {.ncols = 4};
	const char *head[] = {"AT", "EVENT", "ACTOR", "DETAIL"};
	for (int i = 0; i < 4; i++)
		table_cell(&t, head[i]);
	const cJSON *e;
	cJSON_ArrayForEach(e, h)
	{
		int derived = cJSON_IsTrue(cJSON_GetObjectItem(e, "derived"));
		table_cell(&t, str(e, "at"));
		table_cell(&t, str(e, "event"));
		table_cell(&t, derived ? "(from the row)" : str(e, "actor"));
		table_cell(&t, str(e, "detail"));
	}
	printf("history, oldest first:\n");
	table_print(&t, stdout);
	table_free(&t);
}

ops_rc admin_do_show(PGconn *conn, const admin_args *a, char *err, size_t errsz)
{
	cJSON *doc = NULL;
	ops_rc rc = ops_show(conn, a->biz_id, a->message_key, &doc, err, errsz);
	if (rc == OPS_OK && a->json && admin_print_json(doc) != 0) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
	} else if (rc == OPS_OK && !a->json) {
		show_message(cJSON_GetObjectItem(doc, "message"));
		putchar('\n');
		show_history(cJSON_GetObjectItem(doc, "history"));
	}
	cJSON_Delete(doc);
	return rc;
}

/* ---- resolve and redrive ---- */

static void change_text(const admin_args *a, const ops_change *c)
{
	printf("%s ", a->cmd == ADMIN_RESOLVE ? "resolved" : a->cmd == ADMIN_SKIP ? "skipped:"
	                                                                        : "redriven:");
	put(stdout, a->biz_id);
	printf(" / ");
	put(stdout, a->message_key);
	printf(": %s -> %s%s%s%s\n", c->previous, c->status, *c->send_status ? " (send_status " : "",
	       c->send_status, *c->send_status ? ")" : "");
	if (strcmp(c->send_status, "pending") == 0)
		printf("the replica that owns its control partition forwards it within about a "
		       "second\n");
	else if (strcmp(c->status, "prepared") == 0)
		printf("the replica that owns its control partition checks it back within about a "
		       "second\n");
	else if (strcmp(c->send_status, "skipped") == 0)
		printf("the later messages of its forward key flow within about a second\n");
}

ops_rc admin_do_change(PGconn *conn, const admin_args *a, const char *actor, char *err,
                       size_t errsz)
{
	ops_change c;
	ops_rc rc = a->cmd == ADMIN_RESOLVE
	                ? ops_resolve(conn, a->biz_id, a->message_key, a->decision, a->reason, actor,
	                              &c, err, errsz)
	                : a->cmd == ADMIN_SKIP
	                ? ops_skip(conn, a->biz_id, a->message_key, a->reason, actor, &c, err, errsz)
	                : a->now
	                ? ops_redrive_now(conn, a->biz_id, a->message_key, actor, &c, err, errsz)
	                : ops_redrive(conn, a->biz_id, a->message_key, actor, &c, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (a->json) {
		cJSON *doc = ops_change_json(a->biz_id, a->message_key, a->name, actor, &c);
		int bad = admin_print_json(doc);
		cJSON_Delete(doc);
		if (bad) /* done all the same: say so, but succeed */
			fprintf(stderr, "txhub %s: done, but out of memory printing it\n", a->name);
	} else {
		change_text(a, &c);
	}
	return OPS_OK;
}

ops_rc admin_do_redrive_all(PGconn *conn, const admin_args *a, const char *actor, char *err,
                            size_t errsz)
{
	ops_redrive_counts c;
	ops_rc rc = ops_redrive_all(conn, a->biz_id, actor, &c, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (a->json) {
		cJSON *doc = cJSON_CreateObject();
		if (doc) {
			cJSON_AddNumberToObject(doc, "check_failed", (double)c.checks);
			cJSON_AddNumberToObject(doc, "send_failed", (double)c.sends);
			cJSON_AddItemToObject(doc, "biz_id", a->biz_id ? cJSON_CreateString(a->biz_id)
			                                               : cJSON_CreateNull());
			cJSON_AddStringToObject(doc, "actor", actor);
		}
		if (admin_print_json(doc) != 0)
			fprintf(stderr, "txhub redrive: done, but out of memory printing it\n");
		cJSON_Delete(doc);
	} else {
		printf("redriven: %lld check_failed message(s) back to prepared, %lld failed send(s) "
		       "back to pending\n", (long long)c.checks, (long long)c.sends);
	}
	return OPS_OK;
}

/* ---- purge ---- */

void admin_print_purge(const admin_args *a, const store_purge_counts *c)
{
	if (a->json) {
		cJSON *doc = ops_purge_json(c, a->dry_run);
		if (doc)
			cJSON_AddNumberToObject(doc, "older_than_s", (double)(a->older_than_ms / 1000));
		if (admin_print_json(doc) != 0)
			fprintf(stderr, "txhub purge: done, but out of memory printing it\n");
		cJSON_Delete(doc);
		return;
	}
	printf("%s:\n", a->dry_run ? "would delete (dry run: nothing deleted)" : "deleted");
	printf("  messages   %lld committed and sent, %lld rolled_back\n", (long long)c->committed,
	       (long long)c->rolled_back);
	printf("  history    %lld row(s) of those messages\n", (long long)c->history);
	printf("  rejected   %lld\n", (long long)c->rejected);
	printf("  conflicts  %lld\n", (long long)c->conflicts);
}
