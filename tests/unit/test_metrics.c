/* test_metrics.c: the exposition text (docs/monitoring.md: Metrics and health)
 * and the listen-address parser of the HTTP server. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "http.h"
#include "metrics.h"

static double value(const char *text, const char *series)
{
	size_t l = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, l) == 0 && p[l] == ' ')
			return atof(p + l + 1);
	return -1;
}

static char *exposition(void)
{
	sbuf b = {0};
	metrics_write(&b);
	char *s = strdup(sbuf_str(&b));
	sbuf_free(&b);
	return s;
}

Test(metrics, counters_add_up_per_batch)
{
	metrics_reset();
	metrics_envelopes e;
	memset(&e, 0, sizeof e);
	for (int i = 0; i < 5; i++)
		metrics_envelopes_count(&e, 0, METRICS_PREPARE, METRICS_APPLIED);
	metrics_envelopes_count(&e, 0, METRICS_COMMIT, METRICS_CONFLICT);
	metrics_envelopes_count(&e, 0, METRICS_INVALID, METRICS_REJECTED);
	metrics_envelopes_count(&e, 0, METRICS_INVALID, METRICS_REJECTED);
	metrics_add_envelopes(&e);
	metrics_add_envelopes(&e);
	metrics_tally_free(&e);
	metrics_checkback_done(0, METRICS_CB_COMMITTED, 30);
	metrics_checkback_done(0, METRICS_CB_NOT_REQUESTED, 0);
	metrics_alert("prepare_missing");
	metrics_alert("something new");
	char *t = exposition();
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"prepare\",outcome=\"applied\",tenant=\"\"}"), 10);
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"commit\",outcome=\"conflict\",tenant=\"\"}"), 2);
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"invalid\",outcome=\"rejected\",tenant=\"\"}"), 4);
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"rollback\",outcome=\"applied\",tenant=\"\"}"), 0);
	cr_assert_eq(value(t, "txhub_checkbacks_total{outcome=\"committed\",tenant=\"\"}"), 1);
	cr_assert_eq(value(t, "txhub_checkbacks_total{outcome=\"not_requested\",tenant=\"\"}"), 1);
	/* a check-back not requested takes no time: not in the histogram */
	cr_assert_eq(value(t, "txhub_checkback_duration_seconds_count"), 1);
	cr_assert_eq(value(t, "txhub_checkback_duration_seconds_bucket{le=\"0.025\"}"), 0);
	cr_assert_eq(value(t, "txhub_checkback_duration_seconds_bucket{le=\"0.05\"}"), 1);
	cr_assert_eq(value(t, "txhub_checkback_duration_seconds_bucket{le=\"+Inf\"}"), 1);
	cr_assert_eq(value(t, "txhub_alerts_total{kind=\"prepare_missing\"}"), 1);
	cr_assert_eq(value(t, "txhub_alerts_total{kind=\"other\"}"), 1);
	free(t);
}

Test(metrics, forwards_histograms_are_cumulative)
{
	metrics_reset();
	metrics_forwards f;
	memset(&f, 0, sizeof f);
	metrics_forwards_count(&f, 0, METRICS_FW_SENT, 3);
	metrics_forwards_count(&f, 0, METRICS_FW_FAILED, 1);
	int64_t ms[] = {0, 7, 70000};
	for (int i = 0; i < 3; i++)
		metrics_forwards_observe(f.commit_bucket, &f.commit_count, &f.commit_sum_us, ms[i]);
	metrics_add_forwards(&f);
	metrics_tally_free(&f.outcomes);
	char *t = exposition();
	cr_assert_eq(value(t, "txhub_forwards_total{outcome=\"sent\",tenant=\"\"}"), 3);
	cr_assert_eq(value(t, "txhub_forwards_total{outcome=\"failed\",tenant=\"\"}"), 1);
	cr_assert_eq(value(t, "txhub_commit_to_forward_seconds_bucket{le=\"0.001\"}"), 1);
	cr_assert_eq(value(t, "txhub_commit_to_forward_seconds_bucket{le=\"0.01\"}"), 2);
	cr_assert_eq(value(t, "txhub_commit_to_forward_seconds_bucket{le=\"60\"}"), 2);
	cr_assert_eq(value(t, "txhub_commit_to_forward_seconds_bucket{le=\"+Inf\"}"), 3);
	cr_assert_eq(value(t, "txhub_commit_to_forward_seconds_count"), 3);
	cr_assert_float_eq(value(t, "txhub_commit_to_forward_seconds_sum"), 70.007, 1e-9);
	cr_assert_eq(value(t, "txhub_forward_duration_seconds_count"), 0);
	free(t);
}

Test(metrics, tenants_label_their_series_and_are_bounded)
{
	metrics_reset();
	metrics_tenant a = metrics_tenant_of("team-a"), b = metrics_tenant_of("team-b");
	cr_assert_neq(a, 0);
	cr_assert_neq(a, b);
	cr_assert_eq(metrics_tenant_of("team-a"), a, "a name keeps its label");
	cr_assert_eq(metrics_tenant_of(""), 0);
	cr_assert_eq(metrics_tenant_of(NULL), 0);
	metrics_envelopes e;
	memset(&e, 0, sizeof e);
	metrics_envelopes_count(&e, a, METRICS_PREPARE, METRICS_APPLIED);
	metrics_envelopes_count(&e, b, METRICS_PREPARE, METRICS_APPLIED);
	metrics_envelopes_count(&e, a, METRICS_PREPARE, METRICS_APPLIED);
	metrics_envelopes_count(&e, 0, METRICS_COMMIT, METRICS_REJECTED);
	metrics_add_envelopes(&e);
	metrics_tally_free(&e);
	metrics_forwards f;
	memset(&f, 0, sizeof f);
	metrics_forwards_count(&f, b, METRICS_FW_RETRIED, 2);
	metrics_forwards_count(&f, b, METRICS_FW_RETRIED, -1); /* the last attempt: failed */
	metrics_forwards_count(&f, b, METRICS_FW_FAILED, 1);
	metrics_add_forwards(&f);
	metrics_tally_free(&f.outcomes);
	metrics_checkback_done(a, METRICS_CB_ERROR, 5);
	char *t = exposition();
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"prepare\",outcome=\"applied\","
	                      "tenant=\"team-a\"}"), 2);
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"prepare\",outcome=\"applied\","
	                      "tenant=\"team-b\"}"), 1);
	cr_assert_eq(value(t, "txhub_envelopes_total{type=\"commit\",outcome=\"rejected\","
	                      "tenant=\"\"}"), 1);
	cr_assert_eq(value(t, "txhub_forwards_total{outcome=\"retried\",tenant=\"team-b\"}"), 1);
	cr_assert_eq(value(t, "txhub_forwards_total{outcome=\"failed\",tenant=\"team-b\"}"), 1);
	cr_assert_eq(value(t, "txhub_forwards_total{outcome=\"sent\",tenant=\"team-a\"}"), 0);
	cr_assert_eq(value(t, "txhub_checkbacks_total{outcome=\"error\",tenant=\"team-a\"}"), 1);
	cr_assert_null(strstr(t, "_other"), "no overflow yet");
	free(t);
	/* past METRICS_TENANTS_MAX names, the rest share one label */
	char name[32];
	for (int i = 2; i < METRICS_TENANTS_MAX; i++) {
		snprintf(name, sizeof name, "t%d", i);
		cr_assert_lt(metrics_tenant_of(name), METRICS_TENANT_OTHER);
	}
	cr_assert_eq(metrics_tenant_of("one-more"), METRICS_TENANT_OTHER);
	cr_assert_eq(metrics_tenant_of("and-another"), METRICS_TENANT_OTHER);
	metrics_checkback_done(metrics_tenant_of("one-more"), METRICS_CB_ERROR, 5);
	metrics_checkback_done(metrics_tenant_of("and-another"), METRICS_CB_ERROR, 5);
	t = exposition();
	cr_assert_eq(value(t, "txhub_checkbacks_total{outcome=\"error\",tenant=\"_other\"}"), 2);
	cr_assert_eq(value(t, "txhub_checkbacks_total{outcome=\"error\",tenant=\"t999\"}"), 0);
	free(t);
	metrics_reset();
}

Test(metrics, gauges_wait_for_the_first_sample_and_lag_follows_the_partitions)
{
	metrics_reset();
	char *t = exposition();
	cr_assert_null(strstr(t, "txhub_messages{"), "a gauge before PostgreSQL was sampled");
	cr_assert_null(strstr(t, "txhub_parked "));
	free(t);
	metrics_sample s = {{1, 2, 3, 4, 5}, 9, 12.5, -1, 7, 8, 2.25};
	metrics_set_sample(&s);
	tp_key parts[] = {tp_of("ctl", 0), tp_of("ctl", 7)};
	int64_t lag[] = {5, 0};
	metrics_set_lag(parts, lag, 2);
	metrics_set_lag(parts + 1, lag + 1, 1); /* partition 0 went away */
	t = exposition();
	cr_assert_eq(value(t, "txhub_messages{status=\"awaiting_prepare\"}"), 5);
	cr_assert_eq(value(t, "txhub_parked"), 9);
	cr_assert_eq(value(t, "txhub_blocked_messages"), 7);
	cr_assert_eq(value(t, "txhub_oldest_prepared_age_seconds"), 12.5);
	cr_assert_eq(value(t, "txhub_oldest_pending_send_age_seconds"), 0);
	cr_assert_eq(value(t, "txhub_scheduled_messages"), 8);
	cr_assert_eq(value(t, "txhub_scheduled_overdue_seconds"), 2.25);
	cr_assert_eq(value(t, "txhub_consumer_lag{topic=\"ctl\",partition=\"7\"}"), 0);
	cr_assert_eq(value(t, "txhub_consumer_lag{topic=\"ctl\",partition=\"0\"}"), -1);
	free(t);
}

/* txhub_control_records_lost_total: a series per partition counted, at 0
 * too (intake counts 0 for each partition it takes, so that an alert rule
 * sees it rise), in partition order; losses add up per partition. */
Test(metrics, control_records_lost_per_partition)
{
	metrics_reset();
	metrics_control_records_lost(tp_of("ctl", 3), 0);
	metrics_control_records_lost(tp_of("ctl", 1), 0);
	metrics_control_records_lost(tp_of("ctl", 3), 100);
	metrics_control_records_lost(tp_of("ctl", 3), 50);
	metrics_control_records_lost(tp_of("ctl", 9), 7);
	metrics_alert("control_records_lost");
	metrics_alert("control_partition_truncated");
	char *t = exposition();
	cr_assert_eq(value(t, "txhub_control_records_lost_total{topic=\"ctl\",partition=\"1\"}"), 0);
	cr_assert_eq(value(t, "txhub_control_records_lost_total{topic=\"ctl\",partition=\"3\"}"), 150);
	cr_assert_eq(value(t, "txhub_control_records_lost_total{topic=\"ctl\",partition=\"9\"}"), 7);
	cr_assert_eq(value(t, "txhub_alerts_total{kind=\"control_records_lost\"}"), 1);
	cr_assert_eq(value(t, "txhub_alerts_total{kind=\"control_partition_truncated\"}"), 1);
	cr_assert_eq(value(t, "txhub_alerts_total{kind=\"other\"}"), 0);
	/* in partition order */
	char *p1 = strstr(t, "txhub_control_records_lost_total{topic=\"ctl\",partition=\"1\"}");
	char *p3 = strstr(t, "txhub_control_records_lost_total{topic=\"ctl\",partition=\"3\"}");
	char *p9 = strstr(t, "txhub_control_records_lost_total{topic=\"ctl\",partition=\"9\"}");
	cr_assert(p1 && p1 < p3 && p3 < p9);
	free(t);
	metrics_reset();
	t = exposition();
	cr_assert_null(strstr(t, "txhub_control_records_lost_total{"));
	free(t);
}

Test(metrics, every_series_has_help_and_type)
{
	metrics_reset();
	metrics_sample s = {{0}, 0, -1, -1, 0, 0, -1};
	metrics_set_sample(&s);
	char *t = exposition();
	int families = 0;
	for (char *p = t; (p = strstr(p, "# TYPE ")); p++) {
		char name[128];
		cr_assert_eq(sscanf(p, "# TYPE %127s", name), 1);
		char help[160];
		snprintf(help, sizeof help, "# HELP %s ", name);
		cr_assert(strstr(t, help), "%s has no HELP line", name);
		families++;
	}
	cr_assert_geq(families, 18);
	free(t);
}

/* metrics_table (what `txhub reference metrics` prints into
 * docs/monitoring.md) is the exposition's: with every conditional family
 * shown, each family is a row, in the table's order, with its type and
 * HELP text, and each row is a family. */
Test(metrics, the_table_is_the_exposition)
{
	metrics_reset();
	metrics_sample s = {{0}, 0, -1, -1, 0, 0, -1};
	metrics_set_sample(&s);
	metrics_set_tenant_rules_age(0);
	char *t = exposition();
	size_t row = 0;
	for (char *p = t; (p = strstr(p, "# TYPE ")); p++) {
		char name[128], type[32];
		cr_assert_eq(sscanf(p, "# TYPE %127s %31s", name, type), 2);
		cr_assert_not_null(metrics_table[row].name, "%s is not in metrics_table", name);
		cr_assert_str_eq(name, metrics_table[row].name, "metrics_table's row %zu", row);
		cr_assert_str_eq(type, metrics_table[row].type, "%s", name);
		char help[600];
		snprintf(help, sizeof help, "# HELP %s %s\n", name, metrics_table[row].help);
		cr_assert(strstr(t, help), "%s: the HELP line is not the table's", name);
		row++;
	}
	cr_assert_null(metrics_table[row].name, "%s is in metrics_table, not in the exposition",
	               metrics_table[row].name);
	free(t);
	metrics_reset();
}

/* alert.h's kinds are txhub_alerts_total's, each counted under its own
 * name; a kind not there counts as other. */
Test(metrics, every_alert_kind_has_its_series)
{
	metrics_reset();
	for (size_t i = 0; i < ALERT_NKINDS; i++)
		for (size_t n = 0; n <= i; n++)
			metrics_alert(alert_kinds[i].kind);
	metrics_alert("no_such_kind");
	char *t = exposition();
	for (size_t i = 0; i < ALERT_NKINDS; i++) {
		char series[128];
		snprintf(series, sizeof series, "txhub_alerts_total{kind=\"%s\"}", alert_kinds[i].kind);
		cr_assert_eq(value(t, series), (double)(i + 1), "%s", series);
	}
	cr_assert_eq(value(t, "txhub_alerts_total{kind=\"other\"}"), 1);
	free(t);
	metrics_reset();
}

Test(http, listen_addresses)
{
	char err[256];
	const char *good[] = {"127.0.0.1:9464", "0.0.0.0:1", "[::1]:65535", "localhost:80"};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		cr_assert_eq(http_listen_valid(good[i], err, sizeof err), 0, "%s: %s", good[i], err);
	const char *bad[] = {"", "9464", ":9464", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
	                     "127.0.0.1:x", "::1:9464", "[::1]9464", "[::1]", "h:1:2", "h: 1"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(http_listen_valid(bad[i], err, sizeof err), -1, "\"%s\" accepted", bad[i]);
		cr_assert(strstr(err, "port") || strstr(err, "expected"), "%s: %s", bad[i], err);
	}
}
