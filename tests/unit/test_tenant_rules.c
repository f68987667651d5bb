/* Unit tests for tenant_rules (docs/tenants.md: Sharing one hub between teams):
 * every entry checked with the field at fault named, the overlap rules between
 * tenants, the questions intake will ask (topic, biz_id, forward topic,
 * check-back URL, size) and snapshots of many tenants, including rows edited
 * into nonsense. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenant_rules.h"

#define L(...) ((const char *const[]){__VA_ARGS__})
#define N(...) (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* A tenant that passes: each test changes one part. */
static tenant_def good(void)
{
	static const char *const ctl[] = {"team-a.control"};
	static const char *const biz[] = {"shop", "pay*"};
	static const char *const fwd[] = {"orders", "team-a.out.*"};
	static const char *const allow[] = {"https://a.example/cb/"};
	tenant_def d = {"team-a", ctl, 1, biz, 2, fwd, 2, allow, 1, 0, 1};
	return d;
}

static void compile_ok(const tenant_def *d, tenant_rule *t)
{
	tenant_field f;
	char err[512] = "";
	int rc = tenant_rule_compile(d, t, &f, err, sizeof err);
	cr_assert_eq(rc, 0, "%s: refused: %s: %s", d->name, tenant_field_column(f), err);
}

/* ---- names and entries ---- */

Test(tenant_rules, names)
{
	static const char *const ok[] = {"a", "team-a", "t.1_x", "0", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk"};
	static const char *const bad[] = {"", "-a", ".a", "_a", "Team", "a b", "a/b", "é",
	                                  "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl"};
	char err[256];
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
		cr_assert_eq(tenant_name_check(ok[i], err, sizeof err), 0, "%s: %s", ok[i], err);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(tenant_name_check(bad[i], err, sizeof err), -1, "%s accepted", bad[i]);
}

typedef struct {
	tenant_field field;
	const char *const *list;
	size_t n;
	const char *why; /* a part of the reason */
} bad_case;

Test(tenant_rules, each_bad_entry_names_its_field)
{
	const bad_case cases[] = {
		{TENANT_F_CONTROL_TOPICS, L("bad topic"), 1, "not a valid Kafka topic"},
		{TENANT_F_CONTROL_TOPICS, L("__consumer_offsets"), 1, "Kafka's own"},
		{TENANT_F_CONTROL_TOPICS, L("a", "^b"), 2, "stands alone"},
		{TENANT_F_CONTROL_TOPICS, L("^team-a(", ""), 1, "^team-a("},
		{TENANT_F_CONTROL_TOPICS, L("team-a.*"), 1, "not a valid Kafka topic"},
		{TENANT_F_CONTROL_TOPICS, L("a", "a"), 2, "twice"},
		{TENANT_F_CONTROL_TOPICS, L(""), 0, "at least one"},
		{TENANT_F_BIZ_IDS, L("a*b"), 1, "one '*' at its end"},
		{TENANT_F_BIZ_IDS, L("**"), 1, "one '*' at its end"},
		{TENANT_F_BIZ_IDS, L(""), 1, "biz_id"},
		{TENANT_F_BIZ_IDS, L("a\x01"), 1, "control"},
		{TENANT_F_BIZ_IDS, L("0123456789012345678901234567890123456789012345678901234567890123x"), 1,
		 "64"},
		{TENANT_F_BIZ_IDS, L("shop", "shop"), 2, "twice"},
		{TENANT_F_FORWARD_TOPICS, L("*"), 1, "Kafka's own"},
		{TENANT_F_FORWARD_TOPICS, L("_*"), 1, "Kafka's own"},
		{TENANT_F_FORWARD_TOPICS, L("__x*"), 1, "Kafka's own"},
		{TENANT_F_FORWARD_TOPICS, L("__transaction_state"), 1, "Kafka's own"},
		{TENANT_F_FORWARD_TOPICS, L("a b"), 1, "not a valid Kafka topic"},
		{TENANT_F_FORWARD_TOPICS, L("a*b*"), 1, "one '*' at its end"},
		{TENANT_F_FORWARD_TOPICS, L("team-a.*"), 1, "control topic \"team-a.control\""},
		{TENANT_F_FORWARD_TOPICS, L("team-a.control"), 1, "control topic"},
		{TENANT_F_CHECKBACK_ALLOW, L("ftp://a.example/"), 1, "http"},
		{TENANT_F_CHECKBACK_ALLOW, L("http://u@a.example/"), 1, "userinfo"},
		{TENANT_F_CHECKBACK_ALLOW, L("http://a.example/?q=1"), 1, "query"},
		{TENANT_F_CHECKBACK_ALLOW, L("http://a.example/%2e%2e/x"), 1, "dot segment"},
		{TENANT_F_CHECKBACK_ALLOW, L("http://a.example/,http://b.example/"), 1, "commas"},
		{TENANT_F_CHECKBACK_ALLOW, L("http://2130706433/"), 1, "normal form"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tenant_def d = good();
		const bad_case *c = &cases[i];
		if (c->field == TENANT_F_CONTROL_TOPICS) {
			d.control_topics = c->list;
			d.ncontrol = c->n;
		} else if (c->field == TENANT_F_BIZ_IDS) {
			d.biz_ids = c->list;
			d.nbiz = c->n;
		} else if (c->field == TENANT_F_FORWARD_TOPICS) {
			d.forward_topics = c->list;
			d.nforward = c->n;
		} else {
			d.checkback_allow = c->list;
			d.nallow = c->n;
		}
		tenant_rule t;
		tenant_field f = TENANT_F_NAME;
		char err[512] = "";
		int rc = tenant_rule_compile(&d, &t, &f, err, sizeof err);
		cr_expect_eq(rc, -1, "case %zu (%s) accepted", i, c->list[0]);
		cr_expect_eq(f, c->field, "case %zu (%s): field %s, want %s", i, c->list[0],
		             tenant_field_column(f), tenant_field_column(c->field));
		cr_expect(strstr(err, c->why) != NULL, "case %zu: \"%s\" does not say \"%s\"", i, err,
		          c->why);
		tenant_rule_clear(&t);
	}
}

Test(tenant_rules, sizes_and_names_refused)
{
	tenant_def d = good();
	tenant_rule t;
	tenant_field f;
	char err[256];
	d.max_envelope_bytes = -1;
	cr_assert_eq(tenant_rule_compile(&d, &t, &f, err, sizeof err), -1);
	cr_assert_eq(f, TENANT_F_MAX_ENVELOPE_BYTES);
	tenant_rule_clear(&t);
	d.max_envelope_bytes = TENANT_ENVELOPE_MAX + 1;
	cr_assert_eq(tenant_rule_compile(&d, &t, &f, err, sizeof err), -1);
	cr_assert_eq(f, TENANT_F_MAX_ENVELOPE_BYTES);
	tenant_rule_clear(&t);
	d = good();
	d.name = "Team A";
	cr_assert_eq(tenant_rule_compile(&d, &t, &f, err, sizeof err), -1);
	cr_assert_eq(f, TENANT_F_NAME);
	tenant_rule_clear(&t);
}

/* ---- overlap ---- */

typedef struct {
	const char *const *a_ctl, *const *a_biz, *const *a_fwd;
	size_t na_ctl, na_biz, na_fwd;
	const char *const *b_ctl, *const *b_biz, *const *b_fwd;
	size_t nb_ctl, nb_biz, nb_fwd;
	int overlap;
	tenant_field field; /* of a, when they overlap */
} overlap_case;

#define SIDE(ctl, biz, fwd) L ctl, L biz, L fwd, N ctl, N biz, N fwd

static int overlap(const overlap_case *c, tenant_field *f, char *what, size_t whatsz)
{
	tenant_def a = {"a", c->a_ctl, c->na_ctl, c->a_biz, c->na_biz, c->a_fwd, c->na_fwd, NULL, 0,
	                0, 1};
	tenant_def b = {"b", c->b_ctl, c->nb_ctl, c->b_biz, c->nb_biz, c->b_fwd, c->nb_fwd, NULL, 0,
	                0, 1};
	tenant_rule ra, rb;
	compile_ok(&a, &ra);
	compile_ok(&b, &rb);
	int o = tenant_rule_overlap(&ra, &rb, f, what, whatsz);
	tenant_rule_clear(&ra);
	tenant_rule_clear(&rb);
	return o;
}

Test(tenant_rules, overlap_between_tenants)
{
	const overlap_case cases[] = {
		/* biz ids: exact vs exact, prefix vs exact (both ways), prefix vs prefix */
		{SIDE(("ca"), ("shop"), ("fa")), SIDE(("cb"), ("shop"), ("fb")), 1, TENANT_F_BIZ_IDS},
		{SIDE(("ca"), ("shop"), ("fa")), SIDE(("cb"), ("shops"), ("fb")), 0, 0},
		{SIDE(("ca"), ("shop*"), ("fa")), SIDE(("cb"), ("shop-eu"), ("fb")), 1, TENANT_F_BIZ_IDS},
		{SIDE(("ca"), ("shop-eu"), ("fa")), SIDE(("cb"), ("shop*"), ("fb")), 1, TENANT_F_BIZ_IDS},
		{SIDE(("ca"), ("shop*"), ("fa")), SIDE(("cb"), ("sho"), ("fb")), 0, 0},
		{SIDE(("ca"), ("shop*"), ("fa")), SIDE(("cb"), ("sh*"), ("fb")), 1, TENANT_F_BIZ_IDS},
		{SIDE(("ca"), ("shop-a*"), ("fa")), SIDE(("cb"), ("shop-b*"), ("fb")), 0, 0},
		{SIDE(("ca"), ("*"), ("fa")), SIDE(("cb"), ("x"), ("fb")), 1, TENANT_F_BIZ_IDS},
		/* control topics: name vs name, name vs pattern, pattern vs pattern */
		{SIDE(("t1", "t2"), ("x"), ("fa")), SIDE(("t2"), ("y"), ("fb")), 1, TENANT_F_CONTROL_TOPICS},
		{SIDE(("t1"), ("x"), ("fa")), SIDE(("t2"), ("y"), ("fb")), 0, 0},
		{SIDE(("team-b.ctl"), ("x"), ("fa")), SIDE(("^team-b\\."), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-b\\."), ("x"), ("fa")), SIDE(("team-b.ctl"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("team-a.ctl"), ("x"), ("fa")), SIDE(("^team-b\\."), ("y"), ("fb")), 0, 0},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-b\\."), ("y"), ("fb")), 0, 0},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-a\\.eu\\."), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		/* no literal prefix, or one a quantifier makes optional */
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^.*b$"), ("y"), ("fc")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-b|^team-a"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-b\\.(x|y)"), ("y"), ("fb")), 0, 0},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-b[|]|^team-a"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-b[]|]x"), ("y"), ("fb")), 0, 0},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^team-b[[:alpha:]|]x"), ("y"), ("fb")), 0,
		 0},
		{SIDE(("^team-a\\."), ("x"), ("fa")), SIDE(("^(team-b)|(team-a)"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-b"), ("x"), ("fa")), SIDE(("^team-ac?d"), ("y"), ("fb")), 0, 0},
		{SIDE(("^team-ab"), ("x"), ("fa")), SIDE(("^team-ac?d"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS}, /* apart, but no prefix shows it: refused */
		{SIDE(("^team-ad"), ("x"), ("fa")), SIDE(("^team-ac?d"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-aa"), ("x"), ("fa")), SIDE(("^team-a+b"), ("y"), ("fb")), 1,
		 TENANT_F_CONTROL_TOPICS},
		{SIDE(("^team-x"), ("x"), ("fa")), SIDE(("^team-a+b"), ("y"), ("fb")), 0, 0},
		/* forwarding into the other's control topics, either way */
		{SIDE(("ca"), ("x"), ("cb")), SIDE(("cb"), ("y"), ("fb")), 1, TENANT_F_FORWARD_TOPICS},
		{SIDE(("xa"), ("x"), ("c*")), SIDE(("cb"), ("y"), ("fb")), 1, TENANT_F_FORWARD_TOPICS},
		{SIDE(("ca"), ("x"), ("team-b.x")), SIDE(("^team-b\\."), ("y"), ("fb")), 1,
		 TENANT_F_FORWARD_TOPICS},
		{SIDE(("ca"), ("x"), ("team-*")), SIDE(("^team-b\\."), ("y"), ("fb")), 1,
		 TENANT_F_FORWARD_TOPICS},
		{SIDE(("ca"), ("x"), ("orders.*")), SIDE(("^team-b\\."), ("y"), ("fb")), 0, 0},
		{SIDE(("ca"), ("x"), ("fa")), SIDE(("cb"), ("y"), ("ca")), 1, TENANT_F_CONTROL_TOPICS},
		/* forward topics may be shared */
		{SIDE(("ca"), ("x"), ("orders", "o.*")), SIDE(("cb"), ("y"), ("orders", "o.x")), 0, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tenant_field f = TENANT_F_NAME;
		char what[600] = "";
		int o = overlap(&cases[i], &f, what, sizeof what);
		cr_expect_eq(o, cases[i].overlap, "case %zu: overlap %d, want %d (%s)", i, o,
		             cases[i].overlap, what);
		if (o && cases[i].overlap)
			cr_expect_eq(f, cases[i].field, "case %zu: field %s, want %s (%s)", i,
			             tenant_field_column(f), tenant_field_column(cases[i].field), what);
		if (o)
			cr_expect(what[0] != '\0', "case %zu: no description", i);
	}
}

/* ---- one tenant's questions ---- */

Test(tenant_rules, topics_biz_ids_forwards_and_sizes)
{
	tenant_def d = good();
	d.max_envelope_bytes = 1000;
	tenant_rule t;
	compile_ok(&d, &t);
	cr_assert(tenant_owns_topic(&t, "team-a.control"));
	cr_assert(!tenant_owns_topic(&t, "team-a.control2"));
	cr_assert(!tenant_owns_topic(&t, "team-a"));
	cr_assert(tenant_owns_biz(&t, "shop"));
	cr_assert(!tenant_owns_biz(&t, "shop2"));
	cr_assert(!tenant_owns_biz(&t, "sho"));
	cr_assert(tenant_owns_biz(&t, "pay"));
	cr_assert(tenant_owns_biz(&t, "pay-eu"));
	cr_assert(!tenant_owns_biz(&t, "pa"));
	cr_assert(tenant_may_forward(&t, "orders"));
	cr_assert(!tenant_may_forward(&t, "orders2"));
	cr_assert(tenant_may_forward(&t, "team-a.out.x"));
	cr_assert(tenant_may_forward(&t, "team-a.out."));
	cr_assert(!tenant_may_forward(&t, "team-a.ou"));
	cr_assert(tenant_envelope_fits(&t, 1000));
	cr_assert(!tenant_envelope_fits(&t, 1001));
	tenant_rule_clear(&t);
	d.max_envelope_bytes = 0;
	compile_ok(&d, &t);
	cr_assert(tenant_envelope_fits(&t, (size_t)1 << 40));
	tenant_rule_clear(&t);

	static const char *const pat[] = {"^team-a\\.(eu|us)\\.ctl$"}, *const fw[] = {"orders"};
	d.control_topics = pat;
	d.forward_topics = fw;
	d.nforward = 1;
	compile_ok(&d, &t);
	cr_assert(tenant_owns_topic(&t, "team-a.eu.ctl"));
	cr_assert(tenant_owns_topic(&t, "team-a.us.ctl"));
	cr_assert(!tenant_owns_topic(&t, "team-a.de.ctl"));
	cr_assert(!tenant_owns_topic(&t, "xteam-a.eu.ctl"));
	cr_assert_str_eq(t.pattern_prefix, "team-a.");
	tenant_rule_clear(&t);
}

/* The same answers as checkback.allow's (docs/producers.md: Check-back) for the same
 * entries; an empty list holds nothing. */
Test(tenant_rules, checkback_urls_as_checkback_allow)
{
	static const char *const allow[] = {"https://a.example/cb/", "http://b.example:8080/hook"};
	static const char *const urls[] = {
		"https://a.example/cb/x", "https://A.EXAMPLE/cb/x?o=1", "https://a.example/cb",
		"https://a.example/cbx", "http://a.example/cb/x", "https://a.example:444/cb/x",
		"http://b.example:8080/hook", "http://b.example:8080/hook/1", "http://b.example:8080/hooks",
		"http://b.example/hook", "http://u@b.example:8080/hook", "http://b.example:8080/hook/../x",
		"http://b.example:8080/hook/%2e%2e/x", "http://b.example:8080\\hook", "not a url",
		"https://a.example/cb/%2fetc",
	};
	tenant_def d = good();
	d.checkback_allow = allow;
	d.nallow = 2;
	tenant_rule t;
	compile_ok(&d, &t);
	int inside = 0;
	for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
		char why[256] = "";
		int got = tenant_may_call_url(&t, urls[i], why, sizeof why);
		int want = checkback_url_allowed("https://a.example/cb/,http://b.example:8080/hook", urls[i]);
		cr_expect_eq(got, want, "%s: %d, checkback.allow says %d (%s)", urls[i], got, want, why);
		cr_expect(got || why[0], "%s: refused without a reason", urls[i]);
		inside += got;
	}
	cr_assert_geq(inside, 4);
	tenant_rule_clear(&t);
	d.nallow = 0;
	compile_ok(&d, &t);
	char why[256];
	cr_assert(!tenant_may_call_url(&t, "https://a.example/cb/x", why, sizeof why));
	cr_assert(strstr(why, "no check-back allow-list"), "%s", why);
	tenant_rule_clear(&t);
}

/* ---- snapshots ---- */

#define MANY 100

typedef struct {
	char name[16], ctl[32], biz[16], bizp[16], fwd[32], url[64];
	const char *ctls[1], *bizs[2], *fwds[1], *urls[1];
} many_def;

static void fill_many(many_def *m, tenant_def *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		snprintf(m[i].name, sizeof m[i].name, "t%03zu", i);
		snprintf(m[i].ctl, sizeof m[i].ctl, "ctl.t%03zu", i);
		snprintf(m[i].biz, sizeof m[i].biz, "biz%03zu", i);
		snprintf(m[i].bizp, sizeof m[i].bizp, "p%03zu-*", i);
		snprintf(m[i].fwd, sizeof m[i].fwd, "out.t%03zu.*", i);
		snprintf(m[i].url, sizeof m[i].url, "https://t%03zu.example/cb", i);
		m[i].ctls[0] = m[i].ctl;
		m[i].bizs[0] = m[i].biz;
		m[i].bizs[1] = m[i].bizp;
		m[i].fwds[0] = m[i].fwd;
		m[i].urls[0] = m[i].url;
		d[i] = (tenant_def){m[i].name, m[i].ctls, 1, m[i].bizs, 2, m[i].fwds, 1, m[i].urls, 1,
		                    (int64_t)(1000 + i), 1};
	}
}

Test(tenant_rules, a_hundred_tenants)
{
	static many_def m[MANY + 1];
	tenant_def d[MANY + 1];
	fill_many(m, d, MANY);
	/* and one with a pattern, one disabled */
	static const char *const pat[] = {"^team-p\\."}, *const pb[] = {"pat"}, *const pf[] = {"pf"};
	d[MANY] = (tenant_def){"zp", pat, 1, pb, 1, pf, 1, NULL, 0, 0, 1};
	d[7].enabled = 0;
	char err[512] = "";
	tenant_rules *r = tenant_rules_build(d, MANY + 1, err, sizeof err);
	cr_assert_not_null(r, "%s", err);
	cr_assert_eq(tenant_rules_count(r), MANY);
	for (size_t i = 0; i < MANY; i++) {
		const tenant_rule *want = i == 7 ? NULL : tenant_rules_by_name(r, m[i].name);
		char s[64];
		cr_assert_eq(tenant_rules_by_topic(r, m[i].ctl), want, "%s", m[i].ctl);
		cr_assert_eq(tenant_rules_by_biz(r, m[i].biz), want, "%s", m[i].biz);
		snprintf(s, sizeof s, "p%03zu-order", i);
		cr_assert_eq(tenant_rules_by_biz(r, s), want, "%s", s);
		if (!want)
			continue;
		cr_assert_str_eq(want->name, m[i].name);
		cr_assert_eq(want->max_envelope_bytes, (int64_t)(1000 + i));
		snprintf(s, sizeof s, "out.t%03zu.orders", i);
		cr_assert(tenant_rules_may_forward(r, want, s));
		snprintf(s, sizeof s, "out.t%03zu.orders", (i + 1) % MANY);
		cr_assert(!tenant_rules_may_forward(r, want, s));
	}
	const tenant_rule *zp = tenant_rules_by_name(r, "zp");
	cr_assert_not_null(zp);
	cr_assert_eq(tenant_rules_by_topic(r, "team-p.ctl"), zp);
	cr_assert_null(tenant_rules_by_topic(r, "team-q.ctl"));
	cr_assert_null(tenant_rules_by_topic(r, "ctl.t999"));
	cr_assert_null(tenant_rules_by_biz(r, "nobody"));
	cr_assert_null(tenant_rules_by_name(r, "t007"));
	tenant_rules_free(r);
}

/* A row edited by hand into nonsense: no snapshot, and the reason names
 * the tenant and the column. */
Test(tenant_rules, a_bad_row_names_tenant_and_column)
{
	static many_def m[5];
	tenant_def d[5];
	fill_many(m, d, 5);
	static const char *const bad_biz[] = {"a*b"}, *const bad_ctl[] = {"^("},
	                         *const bad_url[] = {"http://u@h.example/"}, *const dup[] = {"biz001"};
	struct {
		size_t row;
		tenant_field f;
		const char *const *list;
		const char *want;
	} cases[] = {
		{2, TENANT_F_BIZ_IDS, bad_biz, "tenant \"t002\": biz_ids: "},
		{3, TENANT_F_CONTROL_TOPICS, bad_ctl, "tenant \"t003\": control_topics: "},
		{4, TENANT_F_CHECKBACK_ALLOW, bad_url, "tenant \"t004\": checkback_allow: "},
		{0, TENANT_F_BIZ_IDS, dup, "tenant \"t000\": biz_ids: overlaps tenant \"t001\""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tenant_def e[5];
		memcpy(e, d, sizeof e);
		if (cases[i].f == TENANT_F_BIZ_IDS)
			e[cases[i].row].biz_ids = cases[i].list, e[cases[i].row].nbiz = 1;
		else if (cases[i].f == TENANT_F_CONTROL_TOPICS)
			e[cases[i].row].control_topics = cases[i].list;
		else
			e[cases[i].row].checkback_allow = cases[i].list;
		char err[512] = "";
		tenant_rules *r = tenant_rules_build(e, 5, err, sizeof err);
		cr_expect_null(r, "case %zu built", i);
		tenant_rules_free(r);
		cr_expect(strstr(err, cases[i].want) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err,
		          cases[i].want);
		/* the same row disabled: left out, the rest builds */
		e[cases[i].row].enabled = 0;
		r = tenant_rules_build(e, 5, err, sizeof err);
		cr_expect_not_null(r, "case %zu with the row disabled: %s", i, err);
		cr_expect_eq(tenant_rules_count(r), 4);
		tenant_rules_free(r);
	}
	/* an empty snapshot is a snapshot */
	char err[64];
	tenant_rules *r = tenant_rules_build(NULL, 0, err, sizeof err);
	cr_assert_not_null(r);
	cr_assert_eq(tenant_rules_count(r), 0);
	cr_assert_null(tenant_rules_by_topic(r, "x"));
	tenant_rules_free(r);
}
