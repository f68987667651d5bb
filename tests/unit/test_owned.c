/* Unit tests for owned: the set of owned partitions as intake changes it
 * (assignments, revokes, fences, retakes), step by step from tables: the
 * contents after each scenario, what each step returns, and whether it
 * moved the version (gen); lookups; copies. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "owned.h"

/* Sorted, one entry a partition, and every entry found where it is. */
static void check_invariants(const owned_set *s, const char *name)
{
	cr_assert_leq(s->n, s->cap, "%s: n %zu over cap %zu", name, s->n, s->cap);
	for (size_t i = 0; i < s->n; i++) {
		if (i > 0)
			cr_assert_lt(s->parts[i - 1].tp, s->parts[i].tp,
			             "%s: not sorted at %zu", name, i);
		cr_assert_eq(owned_find(s, s->parts[i].tp), &s->parts[i],
		             "%s: partition %lld not found where it is", name, (long long)s->parts[i].tp);
	}
}

typedef enum { END, TAKE, DROP, CLEAR } op_kind;

typedef struct {
	op_kind op;
	int32_t p;
	int64_t epoch;  /* TAKE */
	int ret;        /* what the call returns (DROP: 1 when it was owned) */
	int changes;    /* whether gen moves */
} step;

typedef struct {
	const char *name;
	step steps[12];          /* up to the first END */
	struct {
		tp_key tp;
		int64_t epoch;
	} want[8];               /* the contents after the last step, sorted */
	size_t nwant;
} scenario;

static const scenario scenarios[] = {
	{"assigned in any order, kept sorted",
	 {{TAKE, 5, 1, 0, 1}, {TAKE, 1, 1, 0, 1}, {TAKE, 3, 1, 0, 1}, {TAKE, 0, 2, 0, 1}},
	 {{0, 2}, {1, 1}, {3, 1}, {5, 1}}, 4},
	{"assigned twice at the same epoch: no change",
	 {{TAKE, 4, 7, 0, 1}, {TAKE, 4, 7, 0, 0}},
	 {{4, 7}}, 1},
	{"retake at a new epoch replaces the epoch, one entry",
	 {{TAKE, 4, 7, 0, 1}, {TAKE, 2, 1, 0, 1}, {TAKE, 4, 9, 0, 1}},
	 {{2, 1}, {4, 9}}, 2},
	{"revoke the first, the last and the middle",
	 {{TAKE, 1, 1, 0, 1}, {TAKE, 2, 1, 0, 1}, {TAKE, 3, 1, 0, 1}, {TAKE, 4, 1, 0, 1},
	  {TAKE, 5, 1, 0, 1}, {DROP, 1, 0, 1, 1}, {DROP, 5, 0, 1, 1}, {DROP, 3, 0, 1, 1}},
	 {{2, 1}, {4, 1}}, 2},
	{"revoke of a partition not owned: no change",
	 {{TAKE, 2, 1, 0, 1}, {DROP, 3, 0, 0, 0}, {DROP, 1, 0, 0, 0}, {DROP, -1, 0, 0, 0}},
	 {{2, 1}}, 1},
	{"revoke from the empty set: no change",
	 {{DROP, 0, 0, 0, 0}},
	 {{0, 0}}, 0},
	{"fenced, then taken back at a new epoch",
	 {{TAKE, 2, 1, 0, 1}, {TAKE, 4, 1, 0, 1}, {DROP, 2, 0, 1, 1}, {TAKE, 2, 3, 0, 1}},
	 {{2, 3}, {4, 1}}, 2},
	{"fenced, then revoked by Kafka: nothing left to drop",
	 {{TAKE, 2, 1, 0, 1}, {DROP, 2, 0, 1, 1}, {DROP, 2, 0, 0, 0}},
	 {{0, 0}}, 0},
	{"fenced twice (a write and the heartbeat both found it)",
	 {{TAKE, 6, 2, 0, 1}, {TAKE, 7, 2, 0, 1}, {DROP, 7, 0, 1, 1}, {DROP, 7, 0, 0, 0}},
	 {{6, 2}}, 1},
	{"retake whose seek failed: taken, then fenced again",
	 {{TAKE, 3, 1, 0, 1}, {DROP, 3, 0, 1, 1}, {TAKE, 3, 2, 0, 1}, {DROP, 3, 0, 1, 1}},
	 {{0, 0}}, 0},
	{"everything revoked, then assigned again",
	 {{TAKE, 0, 1, 0, 1}, {TAKE, 1, 1, 0, 1}, {CLEAR, 0, 0, 0, 1}, {CLEAR, 0, 0, 0, 0},
	  {TAKE, 1, 2, 0, 1}},
	 {{1, 2}}, 1},
	{"partition 0 and the largest partition number",
	 {{TAKE, INT32_MAX, 1, 0, 1}, {TAKE, 0, 1, 0, 1}},
	 {{0, 1}, {INT32_MAX, 1}}, 2},
};

Test(owned, scenarios)
{
	for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++) {
		const scenario *sc = &scenarios[k];
		owned_set s = {0};
		for (size_t i = 0; i < sizeof sc->steps / sizeof sc->steps[0] && sc->steps[i].op != END;
		     i++) {
			const step *st = &sc->steps[i];
			uint64_t before = s.gen;
			int ret = 0;
			if (st->op == TAKE)
				ret = owned_take(&s, &(owned_part){.tp = st->p, .epoch = st->epoch});
			else if (st->op == DROP)
				ret = owned_drop(&s, st->p);
			else
				owned_clear(&s);
			cr_expect_eq(ret, st->ret, "%s, step %zu: returned %d", sc->name, i + 1, ret);
			cr_expect_eq(s.gen != before, st->changes, "%s, step %zu: gen %s", sc->name,
			             i + 1, st->changes ? "did not move" : "moved");
			check_invariants(&s, sc->name);
		}
		cr_expect_eq(s.n, sc->nwant, "%s: %zu owned, want %zu", sc->name, s.n, sc->nwant);
		for (size_t i = 0; i < s.n && i < sc->nwant; i++) {
			cr_expect_eq(s.parts[i].tp, sc->want[i].tp, "%s: entry %zu",
			             sc->name, i);
			cr_expect_eq(s.parts[i].epoch, sc->want[i].epoch, "%s: epoch of %lld", sc->name,
			             (long long)s.parts[i].tp);
		}
		owned_free(&s);
		cr_expect_eq(s.n, 0);
		cr_expect_eq(s.gen, 0);
		cr_expect_null(s.parts);
	}
}

Test(owned, lookups)
{
	owned_set s = {0};
	static const owned_part own[] = {{7, 3, 0}, {0, 1, 0}, {2, 5, 0}};
	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(owned_take(&s, &own[i]), 0);
	static const struct {
		int32_t p;
		int64_t epoch; /* 0: not owned */
	} cases[] = {{-1, 0}, {0, 1}, {1, 0}, {2, 5}, {3, 0}, {6, 0}, {7, 3}, {8, 0}, {INT32_MAX, 0}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const owned_part *o = owned_find(&s, cases[i].p);
		int owned = cases[i].epoch != 0;
		cr_expect_eq(o != NULL, owned, "partition %d", cases[i].p);
		cr_expect_eq(owned_has(&s, cases[i].p), owned, "partition %d", cases[i].p);
		if (o)
			cr_expect_eq(o->epoch, cases[i].epoch, "partition %d", cases[i].p);
		cr_expect_eq(owned_has_at(&s, cases[i].p, cases[i].epoch), owned,
		             "partition %d at its epoch", cases[i].p);
		cr_expect_not(owned_has_at(&s, cases[i].p, cases[i].epoch + 1),
		              "partition %d at another epoch", cases[i].p);
		cr_expect_not(owned_has_at(&s, cases[i].p, 0), "partition %d at epoch 0", cases[i].p);
	}
	owned_free(&s);
	/* the empty set, never allocated */
	cr_expect_null(owned_find(&s, 0));
	cr_expect_not(owned_has(&s, 0));
}

/* Partitions of two topics with the same numbers are distinct entries,
 * each topic's sorted by partition; dropping one leaves the other. */
Test(owned, two_topics)
{
	owned_set s = {0};
	int32_t a = topic_id("owned.test.a"), b = topic_id("owned.test.b");
	for (int32_t p = 3; p >= 0; p--) {
		cr_assert_eq(owned_take(&s, &(owned_part){.tp = tp_make(b, p), .epoch = 10 + p}), 0);
		cr_assert_eq(owned_take(&s, &(owned_part){.tp = tp_make(a, p), .epoch = 20 + p}), 0);
	}
	cr_assert_eq(s.n, 8);
	check_invariants(&s, "two topics");
	cr_expect_eq(owned_find(&s, tp_make(a, 2))->epoch, 22);
	cr_expect_eq(owned_find(&s, tp_make(b, 2))->epoch, 12);
	cr_assert_eq(owned_drop(&s, tp_make(a, 2)), 1);
	cr_expect_not(owned_has(&s, tp_make(a, 2)));
	cr_expect(owned_has_at(&s, tp_make(b, 2), 12), "the other topic's partition 2 stays");
	cr_expect_not(owned_has(&s, tp_make(topic_id("owned.test.c"), 2)));
	owned_free(&s);
}

/* Past the first allocation, in the worst order (each one at the front). */
Test(owned, many_partitions)
{
	owned_set s = {0};
	for (int32_t p = 999; p >= 0; p--)
		cr_assert_eq(owned_take(&s, &(owned_part){.tp = p, .epoch = p + 1}), 0);
	cr_assert_eq(s.n, 1000);
	check_invariants(&s, "1000 taken");
	for (int32_t p = 0; p < 1000; p += 2)
		cr_assert_eq(owned_drop(&s, p), 1);
	cr_assert_eq(s.n, 500);
	check_invariants(&s, "the even ones dropped");
	for (int32_t p = 0; p < 1000; p++) {
		cr_expect_eq(owned_has(&s, p), p % 2, "partition %d", p);
		cr_expect_eq(owned_has_at(&s, p, p + 1), p % 2, "partition %d at its epoch", p);
	}
	owned_free(&s);
}

/* A retake at a new epoch brings the offset the partition was taken at
 * with it (store_recover_forwards reads it); the same epoch again changes
 * nothing. */
Test(owned, retake_replaces_the_take_offset)
{
	owned_set s = {0};
	cr_assert_eq(owned_take(&s, &(owned_part){.tp = 4, .epoch = 1, .from = 20}), 0);
	uint64_t gen = s.gen;
	cr_assert_eq(owned_take(&s, &(owned_part){.tp = 4, .epoch = 1, .from = 30}), 0);
	cr_expect_eq(s.gen, gen, "the same epoch again moved the version");
	cr_expect_eq(owned_find(&s, 4)->from, 20, "the same epoch again replaced the offset");
	cr_assert_eq(owned_take(&s, &(owned_part){.tp = 4, .epoch = 2, .from = 0}), 0);
	cr_expect_neq(s.gen, gen);
	cr_expect_eq(owned_find(&s, 4)->epoch, 2);
	cr_expect_eq(owned_find(&s, 4)->from, 0, "a retake kept the old take's offset");
	owned_free(&s);
}

Test(owned, copies)
{
	owned_set src = {0}, dst = {0};
	/* an empty copy of an empty set */
	cr_assert_eq(owned_copy(&dst, &src), 0);
	cr_expect_eq(dst.n, 0);
	cr_expect_eq(dst.gen, src.gen);

	cr_assert_eq(owned_take(&src, &(owned_part){.tp = 3, .epoch = 1}), 0);
	cr_assert_eq(owned_take(&src, &(owned_part){.tp = 1, .epoch = 4}), 0);
	cr_assert_eq(owned_copy(&dst, &src), 0);
	cr_expect_eq(dst.gen, src.gen, "a copy keeps the version");
	cr_assert_eq(dst.n, 2);
	cr_expect_neq(dst.parts, src.parts, "a copy has entries of its own");
	cr_expect_eq(memcmp(dst.parts, src.parts, 2 * sizeof *dst.parts), 0);
	check_invariants(&dst, "copy");

	/* the same version again: nothing to do */
	const owned_part *kept = dst.parts;
	cr_assert_eq(owned_copy(&dst, &src), 0);
	cr_expect_eq(dst.parts, kept);

	/* the source moves on (a fence); the copy does not, until copied again */
	cr_assert_eq(owned_drop(&src, 3), 1);
	cr_expect_neq(dst.gen, src.gen);
	cr_expect(owned_has(&dst, 3));
	cr_assert_eq(owned_copy(&dst, &src), 0);
	cr_expect_eq(dst.gen, src.gen);
	cr_expect_not(owned_has(&dst, 3));
	cr_expect_eq(owned_find(&dst, 1)->epoch, 4);

	/* a copy changed on its own gets a version of its own */
	cr_assert_eq(owned_take(&dst, &(owned_part){.tp = 9, .epoch = 1}), 0);
	cr_expect_neq(dst.gen, src.gen);
	cr_expect_eq(src.n, 1);

	/* everything revoked: the copy empties too */
	owned_clear(&src);
	cr_assert_eq(owned_copy(&dst, &src), 0);
	cr_expect_eq(dst.n, 0);
	cr_expect_eq(dst.gen, src.gen);
	cr_assert_eq(owned_copy(&dst, &dst), 0);
	owned_free(&src);
	owned_free(&dst);
}

/* Versions are drawn from one counter: two sets changed the same way do
 * not share one, so an equal gen always means a copy. */
Test(owned, versions_differ_between_sets)
{
	owned_set a = {0}, b = {0};
	cr_assert_eq(owned_take(&a, &(owned_part){.tp = 1, .epoch = 1}), 0);
	cr_assert_eq(owned_take(&b, &(owned_part){.tp = 1, .epoch = 1}), 0);
	cr_expect_neq(a.gen, 0);
	cr_expect_neq(b.gen, 0);
	cr_expect_neq(a.gen, b.gen);
	/* and dst of another version is copied, even at the same size */
	cr_assert_eq(owned_take(&b, &(owned_part){.tp = 1, .epoch = 2}), 0);
	cr_assert_eq(owned_copy(&a, &b), 0);
	cr_expect_eq(owned_find(&a, 1)->epoch, 2);
	owned_free(&a);
	owned_free(&b);
}
