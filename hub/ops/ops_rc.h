/* ops_rc.h: what an operator's operation returns (ops.h, ops_sql.h). */
#ifndef TXHUB_OPS_RC_H
#define TXHUB_OPS_RC_H

typedef enum {
	OPS_OK = 0,
	OPS_NOT_FOUND = 1, /* no such message */
	OPS_REFUSED = 2,   /* not allowed in the message's state; err names the state */
	OPS_DB_ERROR = 3,  /* PostgreSQL failed or is unreachable */
	OPS_BAD_ARG = 4,   /* an argument breaks the rules; err names it */
} ops_rc;

#endif
