/* test_apply.c: store_apply() against PostgreSQL, batch by batch, for what the unit
 * tests of the fold (tests/unit/test_fold.c) cannot see: the stored first prepare read
 * back from the database (binary payload, null forward key) when a later batch repeats
 * a prepare, the conflicts and rows as written, and the forwards returned. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "store.h"

#define MAXB 8

typedef struct {
	txhub_config cfg;
	store *st;
	owned_part own[1];
	h_env e;
} fixture;

static void open_store(fixture *f, const char *name)
{
	char err[512];
	int64_t next;
	h_setup(&f->e, name);
	tp_key part = tp_of(f->e.topic, 0);
	cr_assert_eq(config_init(&f->cfg), 0);
	cr_assert_eq(config_set(&f->cfg, "pg", f->e.conninfo, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&f->cfg, "control_topic", f->e.topic, err, sizeof err), 0, "%s", err);
	f->st = store_connect(&f->cfg, err, sizeof err);
	cr_assert(f->st, "%s", err);
	cr_assert_eq(store_take_partitions(f->st, "replica", "g", &part, 1, f->own, &next, NULL, err,
	                                   sizeof err), STORE_OK, "%s", err);
}

static void close_store(fixture *f)
{
	store_close(f->st);
	config_free(&f->cfg);
	h_teardown(&f->e);
}

/* Apply the envelopes json[0..n) as one batch of partition 0 from offset *off on;
 * returns its stats, and its forwards in *out (caller clears). */
static store_stats apply(fixture *f, int64_t *off, const char *const *json, size_t n,
                         store_forward_list *out)
{
	store_record r[MAXB];
	store_stats stats;
	char err[512];
	cr_assert(n <= MAXB);
	for (size_t i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].src_topic = topic_intern(f->e.topic);
		r[i].tp = tp_of(f->e.topic, 0);
		r[i].offset = (*off)++;
		r[i].value = json[i];
		r[i].value_len = strlen(json[i]);
		r[i].valid = envelope_parse(json[i], strlen(json[i]), 1 << 20, &r[i].env, r[i].reason,
		                            sizeof r[i].reason) == 0;
		cr_assert(r[i].valid, "%s: %s", json[i], r[i].reason);
	}
	cr_assert_eq(store_apply(f->st, r, n, f->own, 1, out, &stats, NULL, NULL, err,
	                         sizeof err), STORE_OK, "%s", err);
	for (size_t i = 0; i < n; i++)
		envelope_free(&r[i].env);
	return stats;
}

/* The count of one type and outcome in a batch's stats (no tenants here), and
 * the stats freed. */
static uint64_t by_count(store_stats *s, metrics_type t, metrics_outcome o)
{
	uint64_t *row = metrics_tally_row_of(&s->by, 0);
	uint64_t n = row ? row[t * METRICS_NOUTCOMES + o] : 0;
	return n;
}

#define ENV(type, k, x) "{\"type\":\"" type "\",\"biz_id\":\"s\",\"message_key\":\"" k "\"" x "}"
/* a: text payload, null forward key; b: forward key k1; c: binary payload 00 01 00 */
#define PREP_A(pl) ENV("prepare", "a", ",\"payload\":\"" pl "\",\"forward\":{\"topic\":\"out\"}")
#define PREP_B(fwd) ENV("prepare", "b", ",\"payload\":\"x\",\"forward\":" fwd)
#define PREP_C(b64, topic) \
	ENV("prepare", "c", ",\"payload_base64\":\"" b64 "\",\"forward\":{\"topic\":\"" topic "\"}")

Test(apply, a_prepare_repeated_in_a_later_batch_is_compared_with_the_stored_one, .timeout = 60)
{
	fixture f;
	open_store(&f, "apply");
	int64_t off = 0;
	store_forward_list out = {0};

	const char *first[] = {PREP_A("x"), PREP_B("{\"topic\":\"out\",\"key\":\"k1\"}"),
	                       PREP_C("AAEA", "out")};
	store_stats s = apply(&f, &off, first, 3, &out);
	cr_assert_eq(s.applied, 3);
	store_stats_free(&s);

	/* the same three again: retries, read back from the database and found equal (a null
	 * forward key stays null, a payload with NUL bytes compares whole) */
	const char *again[] = {PREP_A("x"), PREP_B("{\"topic\":\"out\",\"key\":\"k1\"}"),
	                       PREP_C("AAEA", "out")};
	s = apply(&f, &off, again, 3, &out);
	cr_assert_eq(s.noops, 3, "noops %zu", s.noops);
	cr_assert_eq(s.conflicts, 0, "conflicts %zu", s.conflicts);
	cr_assert_eq(by_count(&s, METRICS_PREPARE, METRICS_DUPLICATE), 3);
	store_stats_free(&s);

	/* different ones: conflicts, the first stays; a commit in the same batch still
	 * applies, with the stored payload */
	const char *other[] = {PREP_A("y"), PREP_B("{\"topic\":\"out\"}"), PREP_C("AAEB", "out"),
	                       PREP_C("AAEA", "out2"), ENV("commit", "a", "")};
	s = apply(&f, &off, other, 5, &out);
	cr_assert_eq(s.conflicts, 4, "conflicts %zu", s.conflicts);
	cr_assert_eq(s.applied, 1);
	cr_assert_eq(s.committed, 1);
	cr_assert_eq(by_count(&s, METRICS_PREPARE, METRICS_CONFLICT), 4);
	store_stats_free(&s);

	cr_assert_eq(out.n, 1);
	cr_assert_str_eq(out.items[0].message_key, "a");
	cr_assert_eq(out.items[0].payload_len, 1);
	cr_assert_eq(out.items[0].payload[0], 'x');
	cr_assert_null(out.items[0].key);
	cr_assert_eq(out.items[0].src_offset, 10);
	store_forward_list_clear(&out);

	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.conflicts WHERE arrived = 'prepare' "
	                           "AND met_status = 'prepared' AND src_offset BETWEEN 6 AND 9"), 4);
	cr_assert_eq(h_count(&f.e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared' "
	                           "AND ((message_key = 'b' AND forward_key = 'k1') OR "
	                           "(message_key = 'c' AND payload = '\\x000100' "
	                           "AND forward_topic = 'out'))"), 2);
	char v[64];
	cr_assert_str_eq(h_query(&f.e, "SELECT encode(payload, 'escape') || '/' || "
	                               "coalesce(forward_key, 'null') FROM txhub.messages "
	                               "WHERE message_key = 'a'", v, sizeof v), "x/null");
	close_store(&f);
}
