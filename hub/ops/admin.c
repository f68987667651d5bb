/* admin.c: the admin commands' arguments and their run (see admin.h); the
 * text and JSON output is in admin_print.c. */
#include "admin.h"

#include <libpq-fe.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin_print.h"
#include "duration.h"
#include "envelope.h"
#include "log.h"
#include "migrate.h"
#include "store.h"
#include "tenant_rules.h"

/* ---- arguments ---- */

static const struct {
	const char *name;
	admin_command cmd;
} commands[] = {
	{"status", ADMIN_STATUS},   {"list", ADMIN_LIST},       {"show", ADMIN_SHOW},
	{"resolve", ADMIN_RESOLVE}, {"redrive", ADMIN_REDRIVE}, {"purge", ADMIN_PURGE},
	{"skip", ADMIN_SKIP},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

#define B(c) (1u << (c))
#define ALL 0xffu

enum { O_JSON, O_STATUS, O_SEND, O_BIZ, O_SINCE, O_LIMIT, O_COMMIT, O_ROLLBACK, O_REASON,
       O_ALL_FAILED, O_OLDER, O_DRY, O_TENANT, O_TRACE, O_SCHEDULED, O_NOW, O_COUNT };

static const admin_option options[O_COUNT] = {
	[O_JSON] = {"--json", 0, ALL},
	[O_STATUS] = {"--status", 1, B(ADMIN_LIST)},
	[O_SEND] = {"--send-status", 1, B(ADMIN_LIST)},
	[O_BIZ] = {"--biz", 1, B(ADMIN_LIST) | B(ADMIN_REDRIVE)},
	[O_SINCE] = {"--since", 1, B(ADMIN_LIST)},
	[O_LIMIT] = {"--limit", 1, B(ADMIN_LIST)},
	[O_COMMIT] = {"--commit", 0, B(ADMIN_RESOLVE)},
	[O_ROLLBACK] = {"--rollback", 0, B(ADMIN_RESOLVE)},
	[O_REASON] = {"--reason", 1, B(ADMIN_RESOLVE) | B(ADMIN_SKIP)},
	[O_ALL_FAILED] = {"--all-failed", 0, B(ADMIN_REDRIVE)},
	[O_OLDER] = {"--older-than", 1, B(ADMIN_PURGE)},
	[O_DRY] = {"--dry-run", 0, B(ADMIN_PURGE)},
	[O_TENANT] = {"--tenant", 1, B(ADMIN_LIST) | B(ADMIN_STATUS)},
	[O_TRACE] = {"--trace", 1, B(ADMIN_LIST)},
	[O_SCHEDULED] = {"--scheduled", 0, B(ADMIN_LIST)},
	[O_NOW] = {"--now", 0, B(ADMIN_REDRIVE)},
};

int admin_usage_error(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

int admin_is_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return 1;
	return 0;
}

/* An id under the envelope's rules; the message names the argument. */
static int check_id(const char *arg, const char *field, const char *v, size_t max, char *err,
                    size_t errsz)
{
	char why[256], shown[96];
	if (envelope_check_id(field, v, max, why, sizeof why) == 0)
		return 0;
	return admin_usage_error(err, errsz, "%s \"%s\": %s", arg, log_escape(v, strlen(v), shown,
	                         sizeof shown), why);
}

static int parse_limit(const char *v, int *out, char *err, size_t errsz)
{
	long n = 0;
	const char *p = v;
	for (; *p >= '0' && *p <= '9' && n <= OPS_LIST_MAX; p++)
		n = n * 10 + (*p - '0');
	if (p == v || *p || n < 1 || n > OPS_LIST_MAX)
		return admin_usage_error(err, errsz, "--limit: \"%s\" is not a number from 1 to %d", v,
		                         OPS_LIST_MAX);
	*out = (int)n;
	return 0;
}

/* Take one option's value (checked) into a. */
static int apply_option(int o, const char *v, admin_args *a, char *err, size_t errsz)
{
	char why[512];
	switch (o) {
	case O_JSON: a->json = 1; return 0;
	case O_COMMIT: a->decision = OPS_COMMIT; return 0;
	case O_ROLLBACK: a->decision = OPS_ROLLBACK; return 0;
	case O_ALL_FAILED: a->all_failed = 1; return 0;
	case O_DRY: a->dry_run = 1; return 0;
	case O_SCHEDULED: a->scheduled = 1; return 0;
	case O_NOW: a->now = 1; return 0;
	case O_STATUS:
		if (!ops_valid_status(v))
			return admin_usage_error(err, errsz, "--status: unknown status \"%s\" (one of "
			                         "prepared, awaiting_prepare, committed, rolled_back, "
			                         "check_failed)", v);
		if (a->nstatuses == ADMIN_MAX_STATUSES)
			return admin_usage_error(err, errsz, "--status: given more than %d times",
			                         ADMIN_MAX_STATUSES);
		a->statuses[a->nstatuses++] = v;
		return 0;
	case O_SEND:
		if (!ops_valid_send_status(v))
			return admin_usage_error(err, errsz, "--send-status: unknown send status \"%s\" "
			                         "(one of pending, sent, failed)", v);
		a->send_status = v;
		return 0;
	case O_BIZ:
		a->biz_id = v;
		return check_id("--biz", "biz_id", v, ENVELOPE_BIZ_ID_MAX, err, errsz);
	case O_LIMIT:
		return parse_limit(v, &a->limit, err, errsz);
	case O_TENANT:
		a->tenant = v;
		if (tenant_name_check(v, why, sizeof why) != 0)
			return admin_usage_error(err, errsz, "--tenant: %s", why);
		return 0;
	case O_TRACE:
		a->trace_id = v;
		if (!ops_valid_trace_id(v))
			return admin_usage_error(err, errsz, "--trace: \"%s\" is not a trace id (32 "
			                         "lowercase hex digits, not all zeros)",
			                         log_escape(v, strlen(v), why, 96));
		return 0;
	case O_REASON:
		a->reason = v;
		return check_id("--reason", "reason", v, OPS_REASON_MAX, err, errsz);
	case O_SINCE:
	case O_OLDER:
		if (duration_parse(v, o == O_SINCE ? &a->since_ms : &a->older_than_ms, why,
		                   sizeof why) != 0)
			return admin_usage_error(err, errsz, "%s: %s", options[o].name, why);
		a->since_set |= o == O_SINCE;
		return 0;
	}
	return admin_usage_error(err, errsz, "internal error: option %d", o);
}

int admin_option_take(const admin_option *table, int n, int argc, char *const *argv, int *i,
                      unsigned command_bit, const char *what, const char **value, char *err,
                      size_t errsz)
{
	const char *arg = argv[*i], *eq = strchr(arg, '=');
	size_t len = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
	int o;
	*value = NULL;
	for (o = 0; o < n; o++)
		if (strlen(table[o].name) == len && strncmp(table[o].name, arg, len) == 0)
			break;
	if (o == n)
		return admin_usage_error(err, errsz, "unknown option \"%.*s\" (try txhub help)",
		                         (int)len, arg);
	if (!(table[o].applies & command_bit))
		return admin_usage_error(err, errsz, "option %s does not apply to txhub %s",
		                         table[o].name, what);
	if (table[o].value) {
		if (eq && arg[1] == '-')
			*value = eq + 1;
		else if (*i + 1 < argc)
			*value = argv[++*i];
		else
			return admin_usage_error(err, errsz, "%s needs a value", table[o].name);
	} else if (eq && arg[1] == '-') {
		return admin_usage_error(err, errsz, "%s takes no value", table[o].name);
	}
	return o;
}

/* One argument that starts with "-": find it, take its value, apply it.
 * *i moves past what was used. */
static int parse_option(int argc, char *const *argv, int *i, unsigned *seen, admin_args *a,
                        char *err, size_t errsz)
{
	const char *v;
	int o = admin_option_take(options, O_COUNT, argc, argv, i, B(a->cmd), a->name, &v, err,
	                          errsz);
	if (o < 0)
		return -1;
	if (o != O_STATUS && (*seen & (1u << o)))
		return admin_usage_error(err, errsz, "%s: given twice", options[o].name);
	*seen |= 1u << o;
	return apply_option(o, v, a, err, errsz);
}

/* BIZ and KEY from the positional arguments. */
static int take_ids(const admin_args *a, int npos, char *const *pos, admin_args *out,
                    char *err, size_t errsz)
{
	if (npos < 2)
		return admin_usage_error(err, errsz, "txhub %s needs BIZ and KEY (the message's biz_id "
		                         "and message_key)", a->name);
	if (npos > 2)
		return admin_usage_error(err, errsz, "unexpected argument \"%s\"", pos[2]);
	out->biz_id = pos[0];
	out->message_key = pos[1];
	if (check_id("BIZ", "biz_id", pos[0], ENVELOPE_BIZ_ID_MAX, err, errsz) != 0)
		return -1;
	return check_id("KEY", "message_key", pos[1], ENVELOPE_MESSAGE_KEY_MAX, err, errsz);
}

/* What each command needs beyond its options. */
static int check_command(admin_args *a, unsigned seen, int npos, char *const *pos, char *err,
                         size_t errsz)
{
	switch (a->cmd) {
	case ADMIN_STATUS:
	case ADMIN_LIST:
		break;
	case ADMIN_SHOW:
		return take_ids(a, npos, pos, a, err, errsz);
	case ADMIN_RESOLVE:
		if ((seen & (1u << O_COMMIT)) && (seen & (1u << O_ROLLBACK)))
			return admin_usage_error(err, errsz, "--commit and --rollback: give one of them, "
			                         "not both");
		if (!(seen & ((1u << O_COMMIT) | (1u << O_ROLLBACK))))
			return admin_usage_error(err, errsz, "txhub resolve needs --commit or --rollback");
		return take_ids(a, npos, pos, a, err, errsz);
	case ADMIN_REDRIVE:
		if (a->all_failed && a->now)
			return admin_usage_error(err, errsz, "--now goes with BIZ KEY (one scheduled "
			                         "message), not with --all-failed");
		if (!a->all_failed) {
			if (seen & (1u << O_BIZ))
				return admin_usage_error(err, errsz, "--biz goes with --all-failed (or give BIZ "
				                         "KEY)");
			return take_ids(a, npos, pos, a, err, errsz);
		}
		break;
	case ADMIN_SKIP:
		if (!(seen & (1u << O_REASON)))
			return admin_usage_error(err, errsz, "txhub skip needs --reason TEXT (kept in "
			                         "the message's history)");
		return take_ids(a, npos, pos, a, err, errsz);
	case ADMIN_PURGE:
		if (!(seen & (1u << O_OLDER)))
			return admin_usage_error(err, errsz, "txhub purge needs --older-than DURATION "
			                         "(e.g. 7d)");
		break;
	}
	if (npos > 0)
		return admin_usage_error(err, errsz, "unexpected argument \"%s\"", pos[0]);
	return 0;
}

int admin_parse(const char *command, int argc, char *const *argv, admin_args *out, char *err,
                size_t errsz)
{
	memset(out, 0, sizeof *out);
	size_t c;
	for (c = 0; c < NCOMMANDS && strcmp(commands[c].name, command) != 0; c++)
		;
	if (c == NCOMMANDS)
		return admin_usage_error(err, errsz, "unknown command \"%s\"", command);
	out->cmd = commands[c].cmd;
	out->name = commands[c].name;
	out->limit = 100;
	char **buf = calloc((size_t)argc + 1, sizeof *buf);
	if (!buf)
		return admin_usage_error(err, errsz, "out of memory");
	int npos = 0, ended = 0, rc = 0;
	unsigned seen = 0;
	for (int i = 0; i < argc && rc == 0; i++) {
		if (!ended && strcmp(argv[i], "--") == 0)
			ended = 1;
		else if (!ended && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0))
			out->help = 1;
		else if (!ended && argv[i][0] == '-' && argv[i][1])
			rc = parse_option(argc, argv, &i, &seen, out, err, errsz);
		else
			buf[npos++] = argv[i];
	}
	if (rc == 0 && !out->help)
		rc = check_command(out, seen, npos, buf, err, errsz);
	free(buf);
	return rc;
}

/* ---- the operator ---- */

void admin_actor(char *out, size_t outsz)
{
	const struct passwd *pw = getpwuid(geteuid());
	const char *name = pw ? pw->pw_name : NULL;
	if (!name || !*name)
		name = getenv("USER");
	if (!name || !*name)
		name = getenv("LOGNAME");
	if (!name || !*name) {
		snprintf(out, outsz, "uid %u", (unsigned)geteuid());
		return;
	}
	const char *sudo = getenv("SUDO_USER");
	if (geteuid() == 0 && sudo && *sudo && strcmp(sudo, name) != 0)
		snprintf(out, outsz, "%s (sudo: %s)", name, sudo);
	else
		snprintf(out, outsz, "%s", name);
	/* the history takes an id-like actor: no control characters */
	char why[128];
	if (envelope_check_id("actor", out, OPS_ACTOR_MAX, why, sizeof why) != 0)
		snprintf(out, outsz, "uid %u", (unsigned)geteuid());
}

void admin_write_help(FILE *out)
{
	fprintf(out,
	        "  status [--tenant NAME] [--json]\n"
	        "             counts by status and send status, parked rows, oldest ages,\n"
	        "             rejected and conflicts (of one tenant's rows: --tenant),\n"
	        "             partitions with owner, epoch and lag\n"
	        "  list [--status S]... [--send-status S] [--biz ID] [--since DURATION]\n"
	        "       [--tenant NAME] [--trace TRACE_ID] [--scheduled] [--limit N] [--json]\n"
	        "             messages, newest updated_at first (default limit 100);\n"
	        "             --trace: the message(s) of a W3C trace id;\n"
	        "             --scheduled: committed, delayed and not yet due, next due first\n"
	        "  show BIZ KEY [--json]\n"
	        "             one message with its payload and history\n"
	        "  resolve BIZ KEY --commit|--rollback [--reason TEXT] [--json]\n"
	        "             decide a prepared or check_failed message as its producer would\n"
	        "  redrive BIZ KEY [--now] | --all-failed [--biz ID] [--json]\n"
	        "             a failed send back to pending, check_failed back to prepared;\n"
	        "             --now: a scheduled (delayed) message sent at once\n"
	        "  skip BIZ KEY --reason TEXT [--json]\n"
	        "             forward.order = key: give up on a failed send (or one held for\n"
	        "             an earlier message of its key) so that its key's later\n"
	        "             messages flow\n"
	        "  purge --older-than DURATION [--dry-run] [--json]\n"
	        "             delete finished messages (and their history), rejected and\n"
	        "             conflict rows older than DURATION\n"
	        "             durations: 90s, 15m, 12h, 7d, or combined from the largest\n"
	        "             unit down, e.g. 1h30m; \"--\" ends the options (for ids that\n"
	        "             start with '-')\n");
}

/* ---- running ---- */

static int exit_of(ops_rc rc)
{
	return rc == OPS_OK ? 0 : rc == OPS_BAD_ARG ? 2 : 1;
}

/* The admin commands need the history table: a database behind the binary
 * is refused, as `txhub run` does, with the remedy. */
static int check_schema(store *st, char *err, size_t errsz)
{
	int version = 0;
	if (store_schema_version(st, &version, err, errsz) != STORE_OK)
		return -1;
	if (version < migrate_latest()) {
		snprintf(err, errsz, "the database schema is at version %d, this txhub needs %d: run "
		         "`txhub migrate` first", version, migrate_latest());
		return -1;
	}
	return 0;
}

static ops_rc run_purge(PGconn *conn, const admin_args *a, store_purge_counts *total,
                        char *err, size_t errsz)
{
	store_purge_opts o = {.finished_older_ms = a->older_than_ms,
	                    .rejected_older_ms = a->older_than_ms,
	                    .batch = STORE_PURGE_BATCH_MAX,
	                    .dry_run = a->dry_run};
	store_purge_counts c;
	ops_rc rc;
	memset(total, 0, sizeof *total);
	/* batch after batch, each its own short transaction, until one comes
	 * back short: a large purge never holds many locks for long */
	do {
		if ((rc = ops_purge_batch(conn, &o, &c, err, errsz)) != OPS_OK)
			return rc;
		total->committed += c.committed;
		total->rolled_back += c.rolled_back;
		total->history += c.history;
		total->rejected += c.rejected;
		total->conflicts += c.conflicts;
	} while (c.more);
	return OPS_OK;
}

static ops_rc dispatch(const txhub_config *cfg, PGconn *conn, const admin_args *a,
                       const char *actor, char *err, size_t errsz)
{
	switch (a->cmd) {
	case ADMIN_STATUS:
		return admin_do_status(cfg, conn, a, err, errsz);
	case ADMIN_LIST:
		return admin_do_list(conn, a, err, errsz);
	case ADMIN_SHOW:
		return admin_do_show(conn, a, err, errsz);
	case ADMIN_RESOLVE:
	case ADMIN_SKIP:
		return admin_do_change(conn, a, actor, err, errsz);
	case ADMIN_REDRIVE:
		return a->all_failed ? admin_do_redrive_all(conn, a, actor, err, errsz)
		                     : admin_do_change(conn, a, actor, err, errsz);
	case ADMIN_PURGE: {
		store_purge_counts total;
		ops_rc rc = run_purge(conn, a, &total, err, errsz);
		if (rc == OPS_OK)
			admin_print_purge(a, &total);
		return rc;
	}
	}
	return OPS_BAD_ARG;
}

store *admin_connect(const txhub_config *cfg, char *err, size_t errsz)
{
	store *st = store_connect(cfg, err, errsz);
	if (st && check_schema(st, err, errsz) != 0) {
		store_close(st);
		st = NULL;
	}
	return st;
}

store *admin_open(const txhub_config *cfg, const char *what, char *actor, size_t actorsz)
{
	char err[2048];
	admin_actor(actor, actorsz);
	store *st = admin_connect(cfg, err, sizeof err);
	if (!st)
		fprintf(stderr, "txhub %s: %s\n", what, err);
	return st;
}

int admin_run(const txhub_config *cfg, const admin_args *a)
{
	char err[2048], actor[OPS_ACTOR_MAX + 1];
	store *st = admin_open(cfg, a->name, actor, sizeof actor);
	if (!st)
		return 1;
	int status = exit_of(dispatch(cfg, store_conn(st), a, actor, err, sizeof err));
	if (status != 0)
		fprintf(stderr, "txhub %s: %s\n", a->name, err);
	store_close(st);
	return status;
}
