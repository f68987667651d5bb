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

/* A replica of another group says it waits for one of our partitions. */
static void note_contested(const txhub_config *cfg, const store_partition_row *rows, size_t n,
                           janitor_findings *f)
{
	for (size_t i = 0; i < n; i++)
		if (other_group(cfg, rows[i].contested_by) && rows[i].contested_age_ms >= 0 &&
		    rows[i].contested_age_ms < STORE_HEARTBEAT_STALE_MS)
			snprintf(f->problem, sizeof f->problem, "a replica of consumer group \"%s\" waits "
			         "for partition %d of %s, which this replica of group \"%s\" holds: two "
			         "consumer groups read one control topic into one database; give them "
			         "the same group", rows[i].contested_by, rows[i].partition,
			         cfg->control_topic, cfg->group);
}

/* Sort the fenced partitions into gone (take back) and held by another
 * group (contest, and describe the clash). */
static int look_at_fenced(store *st, const txhub_config *cfg, const int32_t *fenced, size_t n,
                          janitor_findings *f, char *err, size_t errsz)
{
	store_partition_row *rows = calloc(n, sizeof *rows);
	store_owned *held = calloc(n, sizeof *held);
	f->gone = calloc(n, sizeof *f->gone);
	int rc = -1;
	size_t nheld = 0;
	if (!rows || !held || !f->gone) {
		snprintf(err, errsz, "out of memory");
		goto done;
	}
	if (store_partition_rows(st, fenced, n, rows, err, errsz) != STORE_OK)
		goto done;
	for (size_t i = 0; i < n; i++) {
		if (!holder_alive(&rows[i])) {
			f->gone[f->ngone++] = fenced[i];
		} else if (other_group(cfg, rows[i].group)) {
			held[nheld].partition = rows[i].partition;
			held[nheld++].epoch = rows[i].epoch;
			snprintf(f->problem, sizeof f->problem, "partition %d of %s is held by %s of "
			         "consumer group \"%s\", not by this replica's group \"%s\": two consumer "
			         "groups read one control topic into one database; this replica takes the "
			         "partition back when that holder is gone", fenced[i], cfg->control_topic,
			         rows[i].owner, rows[i].group, cfg->group);
		}
	}
	if (store_contest_partitions(st, held, nheld, cfg->group, err, errsz) == STORE_OK)
		rc = 0;
done:
	free(rows);
	free(held);
	return rc;
}

int janitor_partitions(store *st, const txhub_config *cfg, const store_owned *own, size_t nown,
                       const int32_t *fenced, size_t nfenced, janitor_findings *f, char *err,
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
                             const store_owned *own, size_t nown, char *err, size_t errsz)
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

int janitor_retention_batch(store *st, const txhub_config *cfg, const store_owned *own,
                            size_t nown, janitor_retention *sweep, int *more, char *err,
                            size_t errsz)
{
	*more = 0;
	if (cfg->retention_finished_hours == 0 || nown == 0)
		return 0;
	int32_t *parts = malloc(nown * sizeof *parts);
	if (!parts) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < nown; i++)
		parts[i] = own[i].partition;
	/* retention.rejected_hours = 0 keeps rejected and conflict rows */
	int64_t rejected_ms =
		cfg->retention_rejected_hours > 0 ? cfg->retention_rejected_hours * 3600000 : -1;
	ops_purge_opts o = {cfg->retention_finished_hours * 3600000, rejected_ms, parts, nown,
	                    cfg->control_topic, OPS_PURGE_BATCH_MAX, 0};
	ops_purge_counts c;
	ops_rc rc = ops_purge_batch(store_conn(st), &o, &c, err, errsz);
	free(parts);
	if (rc != OPS_OK)
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
