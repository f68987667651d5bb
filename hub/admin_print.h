/* admin_print.h: each admin command's operation and its output, text or
 * JSON (admin_print.c). Internal to admin.c; same thread. Every function
 * prints only when the operation succeeded; on any other result it prints
 * nothing on standard output and leaves the reason in err. */
#ifndef TXHUB_ADMIN_PRINT_H
#define TXHUB_ADMIN_PRINT_H

#include <libpq-fe.h>

#include "admin.h"
#include "ops.h"

ops_rc admin_do_status(const txhub_config *cfg, PGconn *conn, const admin_args *a, char *err,
                       size_t errsz);
ops_rc admin_do_list(PGconn *conn, const admin_args *a, char *err, size_t errsz);
ops_rc admin_do_show(PGconn *conn, const admin_args *a, char *err, size_t errsz);
/* resolve, or redrive of one message */
ops_rc admin_do_change(PGconn *conn, const admin_args *a, const char *actor, char *err,
                       size_t errsz);
ops_rc admin_do_redrive_all(PGconn *conn, const admin_args *a, const char *actor, char *err,
                            size_t errsz);
void admin_print_purge(const admin_args *a, const ops_purge_counts *c);

#endif
