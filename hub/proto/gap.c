/* gap.c: see gap.h. */
#include "gap.h"

#include <stdio.h>

void gap_decide(tp_key p, int64_t wanted, int64_t low, int64_t high, gap *g)
{
	g->tp = p;
	g->wanted = wanted;
	g->low = low;
	g->high = high;
	g->from = g->to = g->resume = wanted;
	g->kind = GAP_NONE;
	if (wanted < low) {
		g->kind = GAP_LOST;
		g->to = g->resume = low;
	} else if (wanted > high) {
		g->kind = GAP_TRUNCATED;
		g->from = high;
		g->resume = low;
	}
}

const char *gap_kind_name(gap_kind k)
{
	return k == GAP_LOST ? "lost" : k == GAP_TRUNCATED ? "truncated" : "none";
}

const char *gap_alert_kind(gap_kind k)
{
	return k == GAP_LOST        ? "control_records_lost"
	       : k == GAP_TRUNCATED ? "control_partition_truncated"
	                            : NULL;
}

void gap_describe(const gap *g, const char *topic, char *out, size_t outsz)
{
	long long from = g->from, last = g->to - 1, n = g->to - g->from;
	if (g->kind == GAP_LOST)
		snprintf(out, outsz, "offsets %lld to %lld (%lld) of %s deleted by the broker before a "
		         "hub read them: the envelopes in them are lost for good; reading on from "
		         "offset %lld", from, last, n, topic, (long long)g->resume);
	else if (g->kind == GAP_TRUNCATED)
		snprintf(out, outsz, "%s ends at offset %lld, before offset %lld where the hub stood: "
		         "offsets %lld to %lld (%lld) are not on the broker (the topic deleted and made "
		         "again, or records lost by the broker); reading the partition again from "
		         "offset %lld (envelopes applied before change nothing)", topic, from,
		         (long long)g->wanted, from, last, n, (long long)g->resume);
	else
		snprintf(out, outsz, "offset %lld of %s is on the broker (%lld to %lld): reading it "
		         "again", (long long)g->wanted, topic, (long long)g->low, (long long)g->high);
}
