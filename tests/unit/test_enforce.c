/* Unit tests for enforce (docs/tenants.md: Sharing one hub between teams): each
 * record's tenant by its topic, and with tenants.enforce each rule's allowed
 * and refused case with its exact reason, in every envelope type that carries
 * the field; without enforcement nothing is refused; without rules nothing is
 * judged. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "enforce.h"

static tenant_rules *two_tenants(void)
{
	static const char *const ctl_a[] = {"ctl.a"}, *const ctl_b[] = {"^ctl\\.b\\..*"};
	static const char *const biz_a[] = {"shop", "pay*"}, *const biz_b[] = {"bank"};
	static const char *const fwd_a[] = {"orders", "a.out.*"}, *const fwd_b[] = {"b.out"};
	static const char *const allow_a[] = {"https://a.example/cb/"};
	tenant_def d[2] = {{"team-a", ctl_a, 1, biz_a, 2, fwd_a, 2, allow_a, 1, 300, 1},
	                   {"team-b", ctl_b, 1, biz_b, 1, fwd_b, 1, NULL, 0, 0, 1}};
	char err[512] = "";
	tenant_rules *r = tenant_rules_build(d, 2, err, sizeof err);
	cr_assert_not_null(r, "%s", err);
	return r;
}

/* Judge json as a record of topic; returns the reason ("" when accepted). */
static const char *judge(enforce *e, const char *topic, const char *json, store_record *r)
{
	memset(r, 0, sizeof *r);
	r->value = json;
	r->value_len = strlen(json);
	r->valid = envelope_parse(json, strlen(json), 1 << 20, &r->env, r->reason,
	                          sizeof r->reason) == 0;
	cr_assert(r->valid, "%s: %s", json, r->reason);
	enforce_record(e, topic, r);
	const char *why = r->valid ? "" : r->reason;
	envelope_free(&r->env);
	return why;
}

#define PREP(biz, fwd, extra)                                                             \
	"{\"type\":\"prepare\",\"biz_id\":\"" biz "\",\"message_key\":\"k\",\"payload\":\"x\"," \
	"\"forward\":{\"topic\":\"" fwd "\"}" extra "}"
#define ONESHOT(biz, fwd)                                                                 \
	"{\"type\":\"commit\",\"biz_id\":\"" biz "\",\"message_key\":\"k\",\"payload\":\"x\","  \
	"\"forward\":{\"topic\":\"" fwd "\"}}"
#define DECIDE(t, biz) "{\"type\":\"" t "\",\"biz_id\":\"" biz "\",\"message_key\":\"k\"}"

Test(enforce, each_rule_allowed_and_refused_with_its_reason)
{
	tenant_rules *rules = two_tenants();
	enforce e;
	enforce_init(&e, 1);
	cr_assert_not(enforce_ready(&e), "enforcement without rules must wait");
	enforce_set_rules(&e, rules);
	cr_assert(enforce_ready(&e));
	store_record r;
	static const struct {
		const char *topic, *json, *why;
	} cases[] = {
		{"ctl.a", PREP("shop", "orders", ""), ""},
		{"ctl.a", PREP("pay-eu", "a.out.x", ",\"checkback\":{\"url\":\"https://a.example/cb/x\"}"), ""},
		{"ctl.a", DECIDE("commit", "shop"), ""},
		{"ctl.a", DECIDE("rollback", "pay-1"), ""},
		{"ctl.b.1", PREP("bank", "b.out", ""), ""},
		{"ctl.c", PREP("shop", "orders", ""), "tenant: topic ctl.c belongs to no enabled tenant"},
		{"ctl.a", PREP("bank", "orders", ""),
		 "tenant team-a: biz_id bank is not one of tenant team-a's biz ids"},
		{"ctl.a", DECIDE("commit", "bank"),
		 "tenant team-a: biz_id bank is not one of tenant team-a's biz ids"},
		{"ctl.a", DECIDE("rollback", "payroll"), ""}, /* pay* owns it */
		{"ctl.b.x", DECIDE("rollback", "shop"),
		 "tenant team-b: biz_id shop is not one of tenant team-b's biz ids"},
		{"ctl.a", PREP("shop", "b.out", ""),
		 "tenant team-a: forward topic b.out is not one of tenant team-a's forward topics"},
		{"ctl.a", ONESHOT("shop", "ctl.a"),
		 "tenant team-a: forward topic ctl.a is not one of tenant team-a's forward topics"},
		{"ctl.b.1", PREP("bank", "b.out", ",\"checkback\":{\"url\":\"https://a.example/cb/\"}"),
		 "tenant team-b: check-back URL https://a.example/cb/ is outside tenant team-b's "
		 "check-back allow-list"},
		{"ctl.a", PREP("shop", "orders", ",\"pad\":\"" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\""),
		 "tenant team-a: envelope of 398 bytes exceeds tenant team-a's cap of 300 bytes"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *why = judge(&e, cases[i].topic, cases[i].json, &r);
		if (!*cases[i].why)
			cr_expect_str_eq(why, "", "case %zu refused: %s", i, why);
		else
			cr_expect(strncmp(why, cases[i].why, strlen(cases[i].why)) == 0,
			          "case %zu: \"%s\", want \"%s\"", i, why, cases[i].why);
		const char *tn = strncmp(cases[i].topic, "ctl.a", 6) == 0   ? "team-a"
		                 : strncmp(cases[i].topic, "ctl.b.", 6) == 0 ? "team-b"
		                                                             : "";
		cr_expect_str_eq(r.tenant, tn, "case %zu", i);
		cr_expect_eq(r.label != 0, *tn != 0, "case %zu: label %d", i, r.label);
	}
	/* a reason never names the other tenant */
	judge(&e, "ctl.b.1", PREP("shop", "orders", ""), &r);
	cr_assert_null(strstr(r.reason, "team-a"), "%s", r.reason);
	enforce_clear(&e);
	tenant_rules_free(rules);
}

Test(enforce, off_records_the_tenant_and_refuses_nothing)
{
	tenant_rules *rules = two_tenants();
	enforce e;
	enforce_init(&e, 0);
	cr_assert(enforce_ready(&e), "without enforcement there is nothing to wait for");
	store_record r;
	cr_assert_str_eq(judge(&e, "ctl.a", PREP("bank", "b.out", ""), &r), "");
	cr_assert_str_eq(r.tenant, "", "no rules loaded: no tenant");
	enforce_set_rules(&e, rules);
	cr_assert_str_eq(judge(&e, "ctl.a", PREP("bank", "b.out", ""), &r), "");
	cr_assert_str_eq(r.tenant, "team-a");
	cr_assert_str_eq(judge(&e, "ctl.c", PREP("bank", "b.out", ""), &r), "");
	cr_assert_str_eq(r.tenant, "");
	/* a new snapshot: what was kept for the last one is forgotten */
	tenant_rules *none = tenant_rules_build(NULL, 0, r.reason, sizeof r.reason);
	cr_assert_not_null(none);
	enforce_set_rules(&e, none);
	tenant_rules_free(rules);
	cr_assert_str_eq(judge(&e, "ctl.a", PREP("bank", "b.out", ""), &r), "");
	cr_assert_str_eq(r.tenant, "");
	enforce_clear(&e);
	tenant_rules_free(none);
}
