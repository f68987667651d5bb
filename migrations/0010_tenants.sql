-- 0010: tenants (docs/tenants.md: Sharing one hub between teams): teams sharing
-- one hub, their rules, who may see their rows, and their console tokens.
-- `txhub tenant` manages these tables; nobody needs SQL for them.
--
-- Cost on a live database: every statement here is a catalog change. The
-- `tenant` columns are nullable without a default, so ADD COLUMN rewrites
-- nothing and scans nothing, however many rows the tables hold; CREATE
-- POLICY only records the policies (row-level security stays off on the
-- existing tables until the first `txhub tenant grant`). The tables are
-- locked first, in the order the hubs lock them (below): taken one after
-- the other as the statements come (txhub.messages by its ALTER, then
-- txhub.partitions by its CREATE POLICY), a hub's batch that holds its
-- partitions' rows and waits for txhub.messages deadlocked with this.
--
-- No index on the tenant columns, on purpose: building one in this
-- transaction would read every row of txhub.messages (10 million rows:
-- several GB of heap, tens of seconds) under a lock that stops the hubs'
-- writes the whole time, and CREATE INDEX CONCURRENTLY cannot run in a
-- migration's transaction. Nothing on the hot path reads by tenant. The
-- operators' reads by tenant (`txhub list --tenant`, `status --tenant`,
-- `tenant show`, and a team's own `txhub list` under row-level security)
-- filter on top of the scans they make anyway: the unfinished states walk
-- their small partial indexes, the finished counts and `list`'s ordering
-- read the rows. A database where that is too slow gets, while hubs run:
--   CREATE INDEX CONCURRENTLY messages_tenant ON txhub.messages (tenant, status)
--       WHERE tenant IS NOT NULL;
-- (docs/tenants.md: Sharing one hub between teams).

-- Every table this changes, in the hubs' order (docs/architecture.md,
-- Migrations); `txhub migrate` gives up on the locks after a short
-- lock_timeout and tries again, so hubs wait behind this only that long.
LOCK TABLE txhub.partitions, txhub.messages, txhub.conflicts, txhub.rejected, txhub.history,
    txhub.gaps IN ACCESS EXCLUSIVE MODE;

-- ---- the rules ----

-- A list of rule entries: one dimension, min_n..1000 entries, none null,
-- empty, longer than max_len bytes or holding a control character. What an
-- entry means (a topic name, a pattern, a URL) is checked by `txhub tenant`
-- and again by every hub that loads the row (hub/tenant_rules.c), which
-- keeps its last good rules when a row edited by hand does not pass.
CREATE FUNCTION txhub.tenant_list_ok(l text[], min_n integer, max_len integer)
    RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT l IS NOT NULL AND cardinality(l) BETWEEN min_n AND 1000
        AND (cardinality(l) = 0 OR array_ndims(l) = 1)
        AND NOT EXISTS (SELECT 1 FROM unnest(l) x
                        WHERE x IS NULL OR x = '' OR octet_length(x) > max_len
                           OR x ~ '[[:cntrl:]]')
$$;

CREATE TABLE txhub.tenants (
    name               text        PRIMARY KEY
                                   CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    -- topic names, or one pattern beginning with ^ (a regular expression)
    control_topics     text[]      NOT NULL CHECK (txhub.tenant_list_ok(control_topics, 1, 1000)),
    -- biz_ids, or prefixes written abc*; disjoint across tenants
    biz_ids            text[]      NOT NULL CHECK (txhub.tenant_list_ok(biz_ids, 1, 65)),
    -- topic names, or prefixes written abc*
    forward_topics     text[]      NOT NULL CHECK (txhub.tenant_list_ok(forward_topics, 1, 250)),
    -- entries as in checkback.allow (docs/producers.md: Check-back); none: no check-back URL
    checkback_allow    text[]      NOT NULL DEFAULT '{}'
                                   CHECK (txhub.tenant_list_ok(checkback_allow, 0, 2048)),
    -- null: only envelope.max_bytes
    max_envelope_bytes integer     CHECK (max_envelope_bytes > 0),
    enabled            boolean     NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (updated_at >= created_at)
);

-- Every change of a tenant: the row before and after (to_jsonb of
-- txhub.tenants; null before an add and after a remove), who (the
-- operating-system user, as for resolve and redrive) and when. No foreign
-- key: the history outlives a removed tenant.
CREATE TABLE txhub.tenant_history (
    id       bigserial   PRIMARY KEY,
    tenant   text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    action   text        NOT NULL CHECK (action IN ('add', 'set', 'remove', 'grant', 'token')),
    actor    text        NOT NULL,
    before   jsonb,
    after    jsonb,
    detail   text
);
CREATE INDEX tenant_history_tenant ON txhub.tenant_history (tenant, at);

-- PostgreSQL roles that see and act on a tenant's rows (row-level
-- security below). role is a name: a role dropped or renamed later simply
-- matches nobody.
CREATE TABLE txhub.tenant_grants (
    tenant     text        NOT NULL REFERENCES txhub.tenants (name) ON DELETE CASCADE,
    role       text        NOT NULL CHECK (role <> ''),
    granted_at timestamptz NOT NULL DEFAULT now(),
    granted_by text        NOT NULL,
    PRIMARY KEY (tenant, role)
);

-- Console tokens scoped to a tenant: only the SHA-256 of the token is
-- kept; the token itself is printed once, by `txhub tenant token`.
CREATE TABLE txhub.tenant_tokens (
    id         bigserial   PRIMARY KEY,
    tenant     text        NOT NULL REFERENCES txhub.tenants (name) ON DELETE CASCADE,
    sha256     bytea       NOT NULL UNIQUE CHECK (octet_length(sha256) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL,
    revoked_at timestamptz,
    expires_at timestamptz
);

-- ---- each row's tenant ----

-- The tenant of the control topic that stored the row (null: none, as
-- with enforcement off and no tenant owning the topic). A removed
-- tenant's rows keep its name.
ALTER TABLE txhub.messages ADD COLUMN tenant text;
ALTER TABLE txhub.rejected ADD COLUMN tenant text;
ALTER TABLE txhub.conflicts ADD COLUMN tenant text;
ALTER TABLE txhub.history ADD COLUMN tenant text;

-- ---- row-level security ----
--
-- A role granted a tenant (`txhub tenant grant NAME ROLE`, or a member of
-- such a role) sees that tenant's rows and may act on them as resolve and
-- redrive do; rows of no tenant, and every other tenant's, stay hidden.
-- PostgreSQL enforces it, not txhub. The owner of the tables (the role
-- that ran `txhub migrate`, which the hubs use) is not subject to these
-- policies: owners bypass row-level security unless it is FORCEd, which
-- txhub never does; nor are superusers and roles with BYPASSRLS.
--
-- On the new tables row-level security is on from here (only the owner
-- used them so far); on the existing ones the first grant turns it on, so
-- that a database without tenants behaves as before for every role.

-- The tenants granted to the current role (directly or through
-- membership). Runs with the caller's rights: its policy below lets a role
-- read only its own grants.
CREATE FUNCTION txhub.granted_tenants() RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT g.tenant), '{}')
    FROM txhub.tenant_grants g JOIN pg_catalog.pg_roles r ON r.rolname = g.role
    WHERE pg_catalog.pg_has_role(r.oid, 'MEMBER')
$$;

-- Whether topic is a control topic of a tenant granted to the current role
-- (by name, or by its pattern, read here as PostgreSQL's regular expression).
CREATE FUNCTION txhub.granted_topic(topic text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM txhub.tenants t
                   WHERE t.name = ANY (txhub.granted_tenants())
                     AND (topic = ANY (t.control_topics)
                          OR (cardinality(t.control_topics) = 1
                              AND left(t.control_topics[1], 1) = '^'
                              AND topic ~ t.control_topics[1])))
$$;

ALTER TABLE txhub.tenant_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_grants ON txhub.tenant_grants FOR SELECT
    USING (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                   WHERE r.rolname = role AND pg_catalog.pg_has_role(r.oid, 'MEMBER')));
ALTER TABLE txhub.tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY granted ON txhub.tenants FOR SELECT
    USING (name = ANY ((SELECT txhub.granted_tenants())::text[]));
-- owner only: no policy
ALTER TABLE txhub.tenant_history ENABLE ROW LEVEL SECURITY;
ALTER TABLE txhub.tenant_tokens ENABLE ROW LEVEL SECURITY;

-- (SELECT txhub.granted_tenants()) is evaluated once per statement, not
-- per row.
CREATE POLICY tenant_read ON txhub.messages FOR SELECT
    USING (tenant = ANY ((SELECT txhub.granted_tenants())::text[]));
-- resolve and redrive; the grant gives UPDATE on the columns they write
-- only, so a row cannot be moved to another tenant nor its payload changed
CREATE POLICY tenant_act ON txhub.messages FOR UPDATE
    USING (tenant = ANY ((SELECT txhub.granted_tenants())::text[]))
    WITH CHECK (tenant = ANY ((SELECT txhub.granted_tenants())::text[]));

CREATE POLICY tenant_read ON txhub.rejected FOR SELECT
    USING (tenant = ANY ((SELECT txhub.granted_tenants())::text[]));

-- A history or conflict row without a tenant of its own (written before
-- enforcement, or by the hub's check-backs and alerts) goes with its
-- message's: the sub-select sees only messages the role may see.
CREATE POLICY tenant_read ON txhub.conflicts FOR SELECT
    USING (coalesce(tenant, (SELECT m.tenant FROM txhub.messages m
                             WHERE m.biz_id = conflicts.biz_id
                               AND m.message_key = conflicts.message_key))
           = ANY ((SELECT txhub.granted_tenants())::text[]));
CREATE POLICY tenant_read ON txhub.history FOR SELECT
    USING (coalesce(tenant, (SELECT m.tenant FROM txhub.messages m
                             WHERE m.biz_id = history.biz_id
                               AND m.message_key = history.message_key))
           = ANY ((SELECT txhub.granted_tenants())::text[]));
-- resolve and redrive write their history row with the message's tenant
CREATE POLICY tenant_act ON txhub.history FOR INSERT
    WITH CHECK (tenant = ANY ((SELECT txhub.granted_tenants())::text[]));

-- `txhub status`: the partitions of the role's tenants' control topics.
CREATE POLICY tenant_read ON txhub.partitions FOR SELECT USING (txhub.granted_topic(topic));
CREATE POLICY tenant_read ON txhub.gaps FOR SELECT USING (txhub.granted_topic(topic));
