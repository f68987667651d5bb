/* admin_print.h: a parsed admin command (admin.c's admin_parse() makes
 * it), each command's operation and its output, text or JSON, and the text
 * helpers the tenant commands share (admin_print.c). Same thread. Every
 * admin_do_* function prints only when the operation succeeded; on any
 * other result it prints nothing on standard output and leaves the reason
 * in err. */
#ifndef TXHUB_ADMIN_PRINT_H
#define TXHUB_ADMIN_PRINT_H

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ops.h"

typedef enum {
	ADMIN_STATUS,
	ADMIN_LIST,
	ADMIN_SHOW,
	ADMIN_RESOLVE,
	ADMIN_REDRIVE,
	ADMIN_PURGE,
	ADMIN_SKIP,
} admin_command;

/* Most --status options one list takes. */
#define ADMIN_MAX_STATUSES 16

/* A parsed command. Strings point into the argv given to admin_parse()
 * and live as long as it does. */
typedef struct {
	admin_command cmd;
	const char *name;                /* the command word */
	int help;                        /* -h or --help: print the usage, do nothing */
	int json;                        /* --json */
	const char *biz_id;              /* BIZ, or list's / redrive's --biz */
	const char *message_key;         /* KEY */
	/* list */
	const char *statuses[ADMIN_MAX_STATUSES];
	size_t nstatuses;
	const char *send_status;
	int64_t since_ms;                /* with since_set */
	int since_set;                   /* --since given (0s too: nothing is that new) */
	int limit;                       /* default 100 */
	const char *tenant;              /* list's, status's --tenant */
	const char *trace_id;            /* list's --trace (32 lowercase hex digits) */
	/* resolve */
	ops_decision decision;
	const char *reason;              /* NULL: none given */
	int scheduled;                   /* list --scheduled */
	/* redrive */
	int all_failed;
	int now;                         /* --now: a scheduled message, due now */
	/* purge */
	int64_t older_than_ms;
	int dry_run;
} admin_args;

ops_rc admin_do_status(const txhub_config *cfg, PGconn *conn, const admin_args *a, char *err,
                       size_t errsz);
ops_rc admin_do_list(PGconn *conn, const admin_args *a, char *err, size_t errsz);
ops_rc admin_do_show(PGconn *conn, const admin_args *a, char *err, size_t errsz);
/* resolve, or redrive of one message */
ops_rc admin_do_change(PGconn *conn, const admin_args *a, const char *actor, char *err,
                       size_t errsz);
ops_rc admin_do_redrive_all(PGconn *conn, const admin_args *a, const char *actor, char *err,
                            size_t errsz);
void admin_print_purge(const admin_args *a, const store_purge_counts *c);

/* doc as one line of JSON on standard output (--json). Returns 0, or -1
 * when out of memory (nothing printed). */
int admin_print_json(const cJSON *doc);

/* Text for a terminal: printable UTF-8 kept, control characters (C0, DEL,
 * C1), invalid UTF-8 and the backslash written as \xNN, so nothing a
 * producer stored can move the cursor or hide a character. Returns a new
 * string (the caller frees it), NULL when out of memory. Pure. */
char *admin_escape(const char *s);

/* Characters (code points) of a valid UTF-8 string: its width in a table
 * of admin_escape()d cells. Pure. */
size_t admin_width(const char *s);

#endif
