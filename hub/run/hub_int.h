/* hub_int.h: what the run loop's parts share, private to them: the loop's
 * state, and the steps they call of each other. From the top down: hub.c
 * (hub_run), hub_reload.c, hub_rebalance.c, hub_scan.c, hub_batch.c,
 * hub_rewind.c, hub_base.c; each calls only those below it. */
#ifndef TXHUB_HUB_INT_H
#define TXHUB_HUB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "checkback.h"
#include "config.h"
#include "deadletter.h"
#include "fault.h"
#include "forward.h"
#include "gap.h"
#include "hub.h"
#include "intake.h"
#include "janitor.h"
#include "monitor.h"
#include "owned.h"
#include "rewind.h"
#include "store.h"
#include "tenants.h"

typedef struct {
	const txhub_config *cfg; /* in force: the start-up one, or a reload's (held) */
	hub_reload_fn reload;
	void *reload_ctx;
	store *st;
	intake *in;
	forward *fw;
	deadletter *dl;        /* forward.dead_letter_topic, or NULL: off */
	checkback *cb;
	alert *al;
	monitor *mon;
	tenants *tenants;      /* the tenants' rules, intake judges records by them */
	int held;              /* tenants.enforce with no rules loaded: the batch waits */
	int rules_alerted;     /* tenant_rules_stale raised for the rules in force */
	int clock_off;         /* this machine's clock was found off PostgreSQL's (logged) */
	int joined;            /* the consumer has had an assignment */
	owned_set owned;       /* the partitions this replica owns: intake changes it */
	intake_batch batch;
	uint64_t records, batches, rejected, conflicts;
	owned_set released;    /* partitions taken since the last release */
	/* partitions taken whose previous owners' forwards in flight are not
	 * released yet (hub_release_forwards): no batch is applied before */
	owned_set fw_unreleased;
	char owner[128];       /* host/pid, recorded with each partition taken */
	int attempt;           /* failed attempts at the batch in hand */
	int64_t retry_at;      /* ... and when to try it again */
	int single;            /* applying the batch in hand one record at a time ... */
	size_t next_single;    /* ... and the next one to apply */
	size_t refused_in_a_row; /* valid records refused for their data, across batches */
	int store_down;        /* attempts at reconnecting that failed */
	int64_t reconnect_at;
	int64_t next_owners;   /* heartbeat and fenced partitions, next time */
	int64_t next_retention;
	/* forwards due between two scans (scheduled messages, retries): claimed
	 * again at once while a claim comes back full (claim_more), else when
	 * the next one falls due (next_claim, 0: at the next scan) */
	int claim_more;
	int64_t next_claim;
	int64_t claimed_at; /* the last claim began (a release asked for waits 100 ms from it) */
	int scan_step;         /* the scan's next step (hub_scan_step()) ... */
	int scan_failed;       /* ... and whether one of its steps failed */
	/* TXHUB_FAILPOINT (crash tests only, hub_scan.c): scan_late holds the
	 * scan's releasing and claiming until late_until after a take */
	const char *failpoint;
	int64_t late_until;
	janitor_retention sweep;
	fault f_conn, f_apply, f_scan;
	char problem[1024];    /* why this replica is not doing its job, or "" */
	char refusals[1200];   /* partitions refused (intake.h), or "" */
	int mismatch_alerted;  /* database_mismatch raised for the refusals in hand */
	int scram_alerted;     /* librdkafka_too_old raised (once per run) */
	int64_t refused_seen;  /* when partitions were last refused */
} hub;

/* what the parts stand on (hub_base.c) */
int64_t hub_now_ms(void);
void hub_sleep_ms(int64_t ms);
int hub_store_ready(hub *h);
int hub_release_forwards(hub *h, char *err, size_t errsz);
int hub_wait_for_store(hub *h);
void hub_send_forwards(hub *h, const store_forward_list *l);
void hub_unrelease(hub *h, const tp_key *parts, size_t n);
void hub_fence_lost(hub *h, const tp_key *lost, size_t nlost);
void hub_set_problem(hub *h, const char *problem);
void hub_on_assigned(void *opaque, const owned_part *taken, size_t n);
int hub_order_read(hub *h, const owned_part *own, size_t n, int taken, char *err,
                   size_t errsz);
void hub_plan_next_claim(hub *h, size_t n, size_t limit);

/* a database behind, partitions lost (hub_rewind.c) */
void hub_report_rewound(hub *h, const store_rewound *rw, size_t n, const int64_t *from);
int hub_check_history(hub *h, char *err, size_t errsz);
store_rc hub_sort_out(hub *h, const tp_key *lost, size_t nlost, store_rc rc, char *err,
                      size_t errsz);

/* the batch in hand (hub_batch.c) */
int hub_flush_batch(hub *h);

/* the scan of owned partitions (hub_scan.c) */
int hub_claim_retries(hub *h);
void hub_refresh_tenants(hub *h, int64_t now);
/* The age of the tenant rules in force into txhub_tenant_rules_age_seconds,
 * and, while reading them fails, the alert tenant_rules_stale once when it
 * reaches alert.database_failing_ms (again after they were found current). */
void hub_watch_tenant_rules(hub *h, int64_t now);
void hub_publish_lag(hub *h);
int hub_scan_step(hub *h, int64_t now);

/* the rebalance hooks (hub_rebalance.c) */
int hub_on_take(void *opaque, const tp_key *parts, size_t n, owned_part *own,
                int64_t *next_offset);
void hub_on_revoking(void *opaque, const tp_key *parts, size_t n);
int hub_on_gap(void *opaque, const gap *g);

/* signals (hub_reload.c) */
void hub_reload(hub *h);
void hub_take_signals(hub *h);

#endif
