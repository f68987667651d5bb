/* admin.h: the admin commands on the command line (docs/admin.md: Admin commands): status,
 * list, show, resolve, redrive, purge.
 *
 * A thin face over ops.h: admin_parse() checks the arguments (pure, no
 * I/O, so every bad usage is refused before anything is touched), and
 * admin_run() connects, calls the operation and prints its result as text
 * for people or, with --json, as one JSON document on standard output.
 * Messages go to standard error. Used by main.c from its one thread. */
#ifndef TXHUB_ADMIN_H
#define TXHUB_ADMIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "admin_print.h"
#include "config.h"
#include "ops.h"
#include "store.h"

/* 1 when name is one of the admin commands. */
int admin_is_command(const char *name);

/* Parse the arguments after the command word (main.c has taken -c and -X
 * out; "--" ends the options, so an id may start with '-'). Every value is
 * checked here: statuses, durations, limits, ids (envelope rules), the
 * reason. Returns 0, or -1 with a message naming the argument in err (the
 * command then exits 2). With -h or --help, out->help is set and the
 * arguments need not be complete. */
int admin_parse(const char *command, int argc, char *const *argv, admin_args *out, char *err,
                size_t errsz);

/* Run a parsed command against cfg's database (and, for status, its
 * brokers). Returns the exit status: 0 done; 1 refused or failed at run
 * time (no such row, not allowed in its state, database unreachable or not
 * migrated); 2 bad usage. */
int admin_run(const txhub_config *cfg, const admin_args *a);

/* Connect to cfg's database for an admin command and check that it is
 * migrated to this binary's schema (an older one is refused with the
 * remedy). Returns the store (store_close() it), or NULL with the reason
 * in err. */
store *admin_connect(const txhub_config *cfg, char *err, size_t errsz);

/* An option of a command line: "--name", taking a value or not, for the
 * commands whose bits (1u << command) are in applies. */
typedef struct {
	const char *name;
	int value;        /* takes a value: "--name V" or "--name=V" */
	unsigned applies; /* the commands it belongs to */
} admin_option;

/* argv[*i], one of table[0..n): returns its index, with its value (NULL
 * for a flag) in *value and *i past what was used; or -1 with a message
 * naming it in err: unknown, not of this command (command_bit; what names
 * the command, "list" or "tenant add"), a value missing or given to a
 * flag. */
int admin_option_take(const admin_option *table, int n, int argc, char *const *argv, int *i,
                      unsigned command_bit, const char *what, const char **value, char *err,
                      size_t errsz);

/* Format a bad-usage message into err; returns -1 (for `return
 * admin_usage_error(...)` in a parser). */
int admin_usage_error(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The start of an admin command's run: the operator into actor
 * (admin_actor()) and the connection (admin_connect()); NULL when that
 * failed, after "txhub <what>: <reason>" on standard error (exit 1). */
store *admin_open(const txhub_config *cfg, const char *what, char *actor, size_t actorsz);

/* The operator running the command, for the history: the effective user's
 * name (getpwuid), else $USER or $LOGNAME, else "uid N"; "root (sudo:
 * alice)" when root came from sudo. */
void admin_actor(char *out, size_t outsz);

/* The admin commands' lines for `txhub help`. */
void admin_write_help(FILE *out);

#endif
