/* ops_order.h: the keys held back by forward.order = key (docs/consumers.md: Order per key), for
 * `txhub status` and the console (ops_order.c; ops.h). */
#ifndef TXHUB_OPS_ORDER_H
#define TXHUB_OPS_ORDER_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "ops_rc.h"

struct pg_conn;

/* forward.order = key: a key whose messages are held for an earlier unsent one. */
typedef struct {
	char topic[256], key[1024];    /* forward topic and key */
	char control_topic[256];
	int32_t partition;             /* of the control topic: the order is per partition */
	int64_t held;                  /* messages held */
	/* the unsent message before them (to redrive or skip); "" when none now */
	char by_biz_id[128], by_message_key[512], by_send_status[16];
} ops_blocked_key;

/* Most keys status lists (the most held first). */
#define OPS_BLOCKED_MAX 100
#define OPS_BLOCKED_MAX_TEXT "100"

/* The held keys (ops_order.c), in the open read of ops_status_read_tenant: the
 * messages held in all into *messages, the keys (at most OPS_BLOCKED_MAX,
 * the caller frees them) into *keys and *nkeys (NULL and 0 on entry). */
ops_rc ops_blocked_read(struct pg_conn *conn, const char *tenant, int64_t *messages,
                        ops_blocked_key **keys, size_t *nkeys, char *err, size_t errsz);
/* {"messages": N, "keys": [{forward_topic, forward_key, control_topic,
 * partition, held, blocked_by: {biz_id, message_key, send_status} | null}]} */
cJSON *ops_blocked_json(int64_t messages, const ops_blocked_key *keys, size_t nkeys);

#endif
