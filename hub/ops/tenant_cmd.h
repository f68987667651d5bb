/* tenant_cmd.h: `txhub tenant add|set|remove|list|show|grant|token`
 * (docs/tenants.md: Sharing one hub between teams) on the command line, under
 * the admin commands' rules (docs/admin.md: Admin commands): -c, -X, --json,
 * exit 0 done, 1 refused or failed, 2 bad usage naming the argument; a refused
 * or bad command changes nothing.
 *
 * tenant_cmd_parse() checks every argument without I/O, so bad usage is
 * refused before the database is touched; tenant_cmd_run() connects and
 * calls tenant_ops.h. Used by main.c from its one thread. */
#ifndef TXHUB_TENANT_CMD_H
#define TXHUB_TENANT_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "tenant_rules.h"

typedef enum {
	TENANT_ADD,
	TENANT_SET,
	TENANT_REMOVE,
	TENANT_LIST,
	TENANT_SHOW,
	TENANT_GRANT,
	TENANT_TOKEN,
} tenant_sub;

/* A parsed command. Strings point into the argv given to
 * tenant_cmd_parse() and live as long as it does; the lists are owned
 * (tenant_cmd_free()). */
typedef struct {
	tenant_sub sub;
	const char *word;      /* "add", ... */
	int help;              /* -h or --help */
	int json;              /* --json */
	const char *name;      /* NAME */
	const char *role;      /* grant's ROLE */
	/* --control-topic, --biz, --forward-topic, --checkback-allow */
	const char **lists[4];
	size_t nlists[4];
	int64_t max_envelope_bytes; /* 0: none */
	unsigned given;        /* 1u << tenant_field for each option given */
	int enable;            /* set: -1 unchanged, 0 --disable, 1 --enable */
} tenant_args;

/* Parse the words after "tenant" (main.c has taken -c and -X out): the
 * sub-command, NAME (first: the words after a list option are more of its
 * values, as in --biz a b c; a list option given again adds to them, as in
 * --biz a --biz b c), ROLE for grant, and the options. Returns 0,
 * or -1 with a message naming the argument in err (exit 2). Free *out with
 * tenant_cmd_free() either way. */
int tenant_cmd_parse(int argc, char *const *argv, tenant_args *out, char *err, size_t errsz);
void tenant_cmd_free(tenant_args *a);

/* Run it against cfg's database; returns the exit status. */
int tenant_cmd_run(const txhub_config *cfg, const tenant_args *a);

/* The lines for `txhub help`. */
void tenant_cmd_write_help(FILE *out);

#endif
