/* janitor.c: see janitor.h. */
#include "janitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ops.h"

void janitor_findings_clear(janitor_findings *f)
{
	free(f->lost);
	free(f->gone);
	memset(f, 0, sizeof *f);
}

static int holder_alive(const store_partition_row *r)
{
	return r->epoch > 0 && !r->released && r->heartbeat_age_ms >= 0 &&
	       r->heartbeat_age_ms < STORE_HEARTBEAT_STALE_MS;
}

static int other_group(const txhub_config *cfg, const char *group)
{
	return *group && strcmp(group, cfg->group) != 0;
}

int janitor_foreign_holder(const txhub_config *cfg, const store_partition_row *row)
{
	return holder_alive(row) && other_group(cfg, row->group);
}

/* A replica of another group says it waits for some of our partitions. */
static void note_contested(const txhub_config *cfg, const store_partition_row *rows, size_t n,
                           janitor_findings *f)
{
	tp_key parts[32] = {0};
	size_t np = 0;
	const char *waiting = NULL;
	for (size_t i = 0; i < n && np < 32; i++)
		if (other_group(cfg, rows[i].contested_by) && rows[i].contested_age_ms >= 0 &&
		    rows[i].contested_age_ms < STORE_HEARTBEAT_STALE_MS &&
		    (!waiting || strcmp(waiting, rows[i].contested_by) == 0)) {
			waiting = rows[i].contested_by;
			parts[np++] = rows[i].tp;
		}
	if (!waiting)
		return;
	char named[256];
	log_partitions(parts, np, named, sizeof named);
	snprintf(f->problem, sizeof f->problem, "a replica of consumer group \"%s\" waits for %s, "
	         "which this replica of group \"%s\" holds: %s", waiting, named, cfg->group,
	         OPS_GROUP_CLASH_ADVICE);
}

/* held[0..n): fenced partitions whose live holders are of other groups.
 * Names them, with the first one's holder, in f->problem. */
static void describe_held(const txhub_config *cfg, const store_partition_row *held, size_t n,
                          janitor_findings *f)
{
	tp_key parts[32] = {0};
	size_t np = 0;
	for (size_t i = 0; i < n && np < 32; i++)
		if (strcmp(held[i].owner, held[0].owner) == 0 && strcmp(held[i].group, held[0].group) == 0)
			parts[np++] = held[i].tp;
	char named[256];
	log_partitions(parts, np, named, sizeof named);
	snprintf(f->problem, sizeof f->problem, "%s %s held by %s of consumer group \"%s\", "
	         "not by this replica's group \"%s\"%s: %s; this replica takes %s back when %s "
	         "gone", named, np == 1 ? "is" : "are", held[0].owner,
	         held[0].group, cfg->group, np < n ? " (and more by other replicas)" : "",
	         OPS_GROUP_CLASH_ADVICE, np == 1 ? "it" : "them", np < n ? "their holders are" :
	         "that holder is");
}

/* Sort the fenced partitions into gone (take back) and held by another
 * group (contest, and describe the clash). */
static int look_at_fenced(store *st, const txhub_config *cfg, const tp_key *fenced, size_t n,
                          janitor_findings *f, char *err, size_t errsz)
{
	store_partition_row *rows = calloc(n, sizeof *rows);
	store_partition_row *foreign = calloc(n, sizeof *foreign);
	owned_part *held = calloc(n, sizeof *held);
	f->gone = calloc(n, sizeof *f->gone);
	int rc = -1;
	size_t nheld = 0;
	if (!rows || !foreign || !held || !f->gone) {
		snprintf(err, errsz, "out of memory");
		goto done;
	}
	if (store_partition_rows(st, fenced, n, rows, err, errsz) != STORE_OK)
		goto done;
	for (size_t i = 0; i < n; i++) {
		if (!holder_alive(&rows[i])) {
			f->gone[f->ngone++] = fenced[i];
		} else if (other_group(cfg, rows[i].group)) {
			held[nheld].tp = rows[i].tp;
			held[nheld].epoch = rows[i].epoch;
			foreign[nheld++] = rows[i];
		}
	}
	if (nheld > 0)
		describe_held(cfg, foreign, nheld, f);
	if (store_contest_partitions(st, held, nheld, cfg->group, err, errsz) == STORE_OK)
		rc = 0;
done:
	free(rows);
	free(foreign);
	free(held);
	return rc;
}

void janitor_log_fenced(store *st, const txhub_config *cfg, const tp_key *lost, size_t n)
{
	char err[512] = "out of memory";
	store_partition_row *rows = calloc(n ? n : 1, sizeof *rows);
	if (rows && store_partition_rows(st, lost, n, rows, err, sizeof err) != STORE_OK) {
		free(rows);
		rows = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const store_partition_row *r = rows ? &rows[i] : NULL;
		if (!r)
			log_error("hub: " TP_FMT " was taken by another replica (which one is not "
			          "known: %s); it is left alone until Kafka assigns it here again or its "
			          "holder is gone", TP_ARG(lost[i]), err);
		else if (other_group(cfg, r->group))
			log_error("hub: " TP_FMT " was taken by %s of consumer group \"%s\", not "
			          "of this replica's group \"%s\": %s; this replica takes it back when "
			          "that holder is gone", TP_ARG(lost[i]), r->owner, r->group,
			          cfg->group, OPS_GROUP_CLASH_ADVICE);
		else
			log_error("hub: " TP_FMT " was taken by another replica of this group "
			          "(%s); it is left alone until Kafka assigns it here again or its holder "
			          "is gone", TP_ARG(lost[i]), *r->owner ? r->owner : "unknown");
	}
	free(rows);
}

int janitor_partitions(store *st, const txhub_config *cfg, const owned_part *own, size_t nown,
                       const tp_key *fenced, size_t nfenced, janitor_findings *f, char *err,
                       size_t errsz)
{
	memset(f, 0, sizeof *f);
	store_partition_row *rows = NULL;
	size_t nrows = 0;
	if (store_heartbeat(st, own, nown, &rows, &nrows, &f->lost, &f->nlost, err, errsz) !=
	    STORE_OK) {
		free(rows);
		return -1;
	}
	note_contested(cfg, rows, nrows, f);
	free(rows);
	if (nfenced == 0)
		return 0;
	return look_at_fenced(st, cfg, fenced, nfenced, f, err, errsz);
}

int janitor_missing_prepares(store *st, const txhub_config *cfg, alert *al,
                             const owned_part *own, size_t nown, char *err, size_t errsz)
{
	char why[160];
	store_missing_list l = {0};
	if (store_flag_missing_prepares(st, own, nown, cfg->alert_awaiting_prepare_ms, 1000, &l, err,
	                                errsz) != STORE_OK) {
		store_missing_list_clear(&l);
		return -1;
	}
	for (size_t i = 0; i < l.n; i++) {
		const store_missing *m = &l.items[i];
		if (!m->biz_id || !m->message_key || !m->decision)
			continue; /* out of memory copying it: flagged, only not alerted */
		snprintf(why, sizeof why, "a %s arrived %lld s ago and its prepare never did",
		         m->decision, (long long)(m->age_ms / 1000));
		alert_raise(al, "prepare_missing", m->biz_id, m->message_key, 0, NULL, why);
	}
	store_missing_list_clear(&l);
	return 0;
}

int janitor_retention_batch(store *st, const txhub_config *cfg, const owned_part *own,
                            size_t nown, janitor_retention *sweep, int *more, char *err,
                            size_t errsz)
{
	*more = 0;
	if (cfg->retention_finished_hours == 0 || nown == 0)
		return 0;
	int32_t *parts = malloc(nown * sizeof *parts);
	const char **topics = malloc(nown * sizeof *topics);
	if (!parts || !topics) {
		free(parts);
		free(topics);
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < nown; i++) {
		parts[i] = tp_part(own[i].tp);
		topics[i] = tp_topic(own[i].tp);
	}
	/* retention.rejected_hours = 0 keeps rejected and conflict rows */
	int64_t rejected_ms =
		cfg->retention_rejected_hours > 0 ? cfg->retention_rejected_hours * 3600000 : -1;
	store_purge_opts o = {cfg->retention_finished_hours * 3600000, rejected_ms, topics, parts,
	                      nown, STORE_PURGE_BATCH_MAX, 0};
	store_purge_counts c;
	int rc = store_purge(st, &o, &c, err, errsz);
	free(parts);
	free(topics);
	if (rc != 0)
		return -1;
	sweep->messages += c.committed + c.rolled_back;
	sweep->history += c.history;
	sweep->rejected += c.rejected;
	sweep->conflicts += c.conflicts;
	*more = c.more;
	if (!c.more && sweep->messages + sweep->rejected + sweep->conflicts > 0) {
		log_info("janitor: retention deleted %lld finished message(s) with %lld history "
		         "row(s), %lld rejected and %lld conflict row(s) of the owned partitions",
		         (long long)sweep->messages, (long long)sweep->history,
		         (long long)sweep->rejected, (long long)sweep->conflicts);
		memset(sweep, 0, sizeof *sweep);
	}
	return 0;
}
