-- 0016: row-level security that a tenant's role cannot talk its way out of
-- (issue 30; docs/tenants.md, "Each team's PostgreSQL role").
--
-- 1. search_path. The policies of 0010, 0012 and this migration, the view's
--    trigger and the history trigger run functions with the caller's rights,
--    and a function without a search_path of its own resolves its operators
--    and functions (=, ~, array_agg, cardinality, left, ...) in the CALLER's
--    path. A role granted tenant a that may create objects in a schema of its
--    own (CREATE SCHEMA team_a AUTHORIZATION team_a) and puts it first in its
--    path could define team_a.array_agg(text) returning a's and b's names and
--    read and update tenant b's rows. Each such function now runs with
--    search_path = pg_catalog, pg_temp (pg_temp last: a temporary table
--    cannot stand in for a catalog one; functions and operators are never
--    looked up in pg_temp). The policies' own expressions were resolved when
--    they were created, so they need nothing.
-- 2. History. A role's INSERT into txhub.history must name a message of its
--    own tenant with that tenant (was: any message, if the row said one of
--    the role's tenants), and a role reads a history row only with its
--    message, when the row's tenant is that message's or none. `txhub show`
--    and the console read history the same way (hub/ops/ops.c).
-- 3. txhub.dead_letter_pending gets the policy of the other tables of a
--    control partition (its control topic granted), and row-level security
--    wherever the first `txhub tenant grant` turned it on already.
--
-- Cost on a live database: catalog changes only, nothing is read or
-- rewritten. ALTER FUNCTION and CREATE OR REPLACE FUNCTION lock no table.
-- The policies lock their table (ACCESS EXCLUSIVE) until the commit, a
-- moment: dead_letter_pending first, then history (the order of the hubs'
-- statements that write both, hub/forward/deadletter*.c); parsing the
-- history policies reads txhub.message_rows' definition (ACCESS SHARE, which
-- no hub's write waits for).

-- This migration's own statements resolve names in the catalog only.
SET LOCAL search_path = pg_catalog, pg_temp;

-- ---- 1. every function the policies, the view and the triggers run ----

ALTER FUNCTION txhub.granted_tenants() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION txhub.granted_topic(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION txhub.tenant_list_ok(text[], integer, integer)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION txhub.history_trace_id() SET search_path = pg_catalog, pg_temp;
-- as define_messages_view() below makes it from now on
ALTER FUNCTION txhub.messages_write() SET search_path = pg_catalog, pg_temp;

-- define_messages_view() (0012) remakes the view and its trigger function
-- with CREATE OR REPLACE FUNCTION, which resets what the new definition
-- does not say: the SET clause must be in the text it executes, or a later
-- migration's call would drop it again. Its body as 0012 left it, with
-- that clause added, and one for itself. A body that makes the trigger
-- function some other way stops the migration (nothing is guessed), one
-- that has the clause already is left as it is.
DO $$
DECLARE
    body text;
    made constant text := 'RETURNS trigger LANGUAGE plpgsql AS $f$ ';
    fixed constant text :=
        'RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$ ';
BEGIN
    SELECT p.prosrc INTO body FROM pg_proc p
     WHERE p.oid = 'txhub.define_messages_view()'::regprocedure;
    IF position(fixed IN body) > 0 THEN
        RETURN;
    ELSIF position(made IN body) = 0 THEN
        RAISE EXCEPTION 'txhub.define_messages_view() does not make txhub.messages_write() '
                        'as migration 0012 does: fix it by hand';
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION txhub.define_messages_view() RETURNS void '
                   'LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
                   replace(body, made, fixed));
END
$$;
ALTER FUNCTION txhub.define_messages_view() SET search_path = pg_catalog, pg_temp;

-- ---- 3. txhub.dead_letter_pending, as txhub.forward_marks ----

DROP POLICY IF EXISTS tenant_read ON txhub.dead_letter_pending;
CREATE POLICY tenant_read ON txhub.dead_letter_pending FOR SELECT
    USING (txhub.granted_topic(src_topic));
DO $$
BEGIN
    IF (SELECT relrowsecurity FROM pg_class WHERE oid = 'txhub.message_rows'::regclass) THEN
        ALTER TABLE txhub.dead_letter_pending ENABLE ROW LEVEL SECURITY;
    END IF;
END
$$;

-- ---- 2. history: a role's rows belong to a message of its tenant ----

-- resolve, redrive and skip write their history row with the message's
-- tenant (hub/ops/ops_write.c); the sub-select sees the role's messages only
ALTER POLICY tenant_act ON txhub.history
    WITH CHECK (tenant = ANY ((SELECT txhub.granted_tenants())::text[])
                AND EXISTS (SELECT 1 FROM txhub.message_rows m
                            WHERE m.biz_id = history.biz_id
                              AND m.message_key = history.message_key
                              AND m.tenant = history.tenant));
-- a history row without a tenant of its own (written before tenants, or by
-- the hub's check-backs) goes with its message's; one naming another
-- tenant than its message's (forged before this migration) shows to no role
ALTER POLICY tenant_read ON txhub.history
    USING (EXISTS (SELECT 1 FROM txhub.message_rows m
                   WHERE m.biz_id = history.biz_id AND m.message_key = history.message_key
                     AND m.tenant = ANY ((SELECT txhub.granted_tenants())::text[])
                     AND (history.tenant IS NULL OR history.tenant = m.tenant)));
