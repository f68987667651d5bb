/* ops_int.h: what ops.c (list, show, the checks of arguments) and
 * ops_status.c share, private to them. */
#ifndef TXHUB_OPS_INT_H
#define TXHUB_OPS_INT_H

#include <stddef.h>

#include <libpq-fe.h>

#include "ops_rc.h"

/* A consistent view for a read: one snapshot for all its statements. */
ops_rc ops_begin_read(PGconn *conn, char *err, size_t errsz);

#endif
