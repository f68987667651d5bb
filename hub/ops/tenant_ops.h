/* tenant_ops.h: what an operator does to tenants (docs/tenants.md: Sharing one
 * hub between teams): add, set, remove, list, show, grant, token, as a library
 * (the command line in tenant_cmd.c is one face; the console will be another),
 * and the lookup of a tenant's console token.
 *
 * The same rules as ops.h: nothing here prints; each function returns an
 * ops_rc, fills a cJSON document, and puts a one-line reason into err
 * (written only when the result is not OPS_OK). Every write is one
 * transaction that also writes its txhub.tenant_history row (actor: the
 * operating-system user); on any result but OPS_OK nothing was written.
 *
 * Adds and changes are serialised: each takes txhub.tenants in SHARE ROW
 * EXCLUSIVE mode (readers go on, a second writer waits) before it reads
 * the other tenants to check for overlap, so two concurrent adds that
 * overlap cannot both succeed. A stored row that does not pass the rules
 * (edited by hand) refuses every add and change it would have to be
 * checked against, naming it: never compared as if it were fine.
 *
 * Connections: the caller's, left with no transaction open; one thread at
 * a time per connection. */
#ifndef TXHUB_TENANT_OPS_H
#define TXHUB_TENANT_OPS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "ops.h"
#include "tenant_rules.h"

struct pg_conn;

/* Longest PostgreSQL role name (NAMEDATALEN - 1). */
#define TENANT_ROLE_MAX 63
/* A console token: 32 random bytes as 64 hex characters. */
#define TENANT_TOKEN_LEN 64

/* A change to a tenant (set): the fields given replace the stored ones. */
typedef struct {
	tenant_def def;  /* name, and the lists and cap that are given */
	unsigned given;  /* 1u << tenant_field for each field given */
	int enable;      /* -1: unchanged; 0: disable; 1: enable */
} tenant_change;

/* Add a tenant (d->enabled is ignored: a new tenant is enabled). On
 * OPS_BAD_ARG and on an overlap (OPS_REFUSED) *bad is the field at fault;
 * an overlap names the other tenant. OPS_REFUSED too when the name is
 * taken. *out: the tenant as stored (tenant_ops_json's shape). */
ops_rc tenant_add(struct pg_conn *conn, const tenant_def *d, const char *actor,
                  tenant_field *bad, cJSON **out, char *err, size_t errsz);

/* Change a tenant: OPS_NOT_FOUND when there is none, else as tenant_add.
 * *out: {"tenant": {...}, "changed": [field names]} ("changed" empty, and
 * nothing written, when the values given are those stored). */
ops_rc tenant_set(struct pg_conn *conn, const tenant_change *c, const char *actor,
                  tenant_field *bad, cJSON **out, char *err, size_t errsz);

/* Remove a tenant with its grants and tokens; its messages keep its name.
 * *out: {"removed": name, "tenant": {...} as it was}. */
ops_rc tenant_remove(struct pg_conn *conn, const char *name, const char *actor, cJSON **out,
                     char *err, size_t errsz);

/* Every tenant, by name: an array of {"name", "control_topics",
 * "biz_ids", "forward_topics", "checkback_allow", "max_envelope_bytes"
 * (null: none), "enabled", "created_at", "updated_at", "roles"}. */
ops_rc tenant_list(struct pg_conn *conn, cJSON **out, char *err, size_t errsz);

/* One tenant: {"tenant": {...}, "messages": {status: count, every status},
 * "send": {"pending", "sent", "failed"}, "grants": [{"role", "granted_at",
 * "granted_by"}], "tokens": [{"id", "created_at", "created_by",
 * "revoked_at", "expires_at"}], "history": [{"at", "action", "actor",
 * "detail", "changes": [{"field", "before", "after"}]}] oldest first}. The
 * counts read every message of the tenant (no index on tenant: see
 * migrations/0010_tenants.sql). OPS_NOT_FOUND when there is none. */
ops_rc tenant_show(struct pg_conn *conn, const char *name, cJSON **out, char *err,
                   size_t errsz);

/* Let PostgreSQL role `role` see and act on the tenant's rows: turns
 * row-level security on for txhub's tables (once), grants the role what
 * `txhub list/show/status/resolve/redrive` need, and records the grant.
 * OPS_NOT_FOUND for an unknown tenant or role; OPS_REFUSED for a role that
 * would see every row anyway (the tables' owner, a superuser, BYPASSRLS).
 * Granting again is harmless ("already": true). */
ops_rc tenant_grant(struct pg_conn *conn, const char *name, const char *role, const char *actor,
                    cJSON **out, char *err, size_t errsz);

/* A new console token for the tenant: random (OpenSSL), written to
 * token[0..TENANT_TOKEN_LEN] once, only its SHA-256 stored. *out: {"tenant",
 * "id", "token"}. OPS_NOT_FOUND for an unknown tenant. */
ops_rc tenant_token_issue(struct pg_conn *conn, const char *name, const char *actor,
                          char token[TENANT_TOKEN_LEN + 1], cJSON **out, char *err,
                          size_t errsz);

/* The tenant a console token belongs to, and the token's id, when the
 * token logs in: not revoked, not expired, its tenant enabled. Looked up
 * by its SHA-256, as a parameter (no comparison in C). OPS_OK, or
 * OPS_NOT_FOUND (err says only "no such token", whatever the reason). */
ops_rc tenant_token_lookup(struct pg_conn *conn, const char *token, char *tenant,
                           size_t tenantsz, int64_t *id, char *err, size_t errsz);

/* Whether token id of tenant still logs in (the same rules): OPS_OK, or
 * OPS_NOT_FOUND once it was revoked, expired, deleted, or its tenant
 * removed or disabled. The console asks it on every request of a session
 * the token opened. */
ops_rc tenant_token_live(struct pg_conn *conn, int64_t id, const char *tenant, char *err,
                         size_t errsz);

#endif
