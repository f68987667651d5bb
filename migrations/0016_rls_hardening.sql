-- 0016: row-level security that a tenant's role cannot talk its way out of
-- (issue 30; docs/operators.md, "Each team's PostgreSQL role").
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

-- 0012's function, with the same body, and a search_path for itself and for
-- the trigger function it makes: CREATE OR REPLACE FUNCTION resets what the
-- new definition does not say, so the SET clause must be in the text it
-- executes, or a later migration's call would drop it again.
CREATE OR REPLACE FUNCTION txhub.define_messages_view() RETURNS void LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cols text;
    sets text;
    vals text;
    c record;
BEGIN
    SELECT string_agg(CASE WHEN a.attname = 'send_status'
                      THEN 'CASE WHEN r.send_status = ''pending'' AND r.fwd_seq <= '
                           '(SELECT f.upto FROM txhub.forward_marks f WHERE f.topic = '
                           'r.src_topic AND f.partition = r.src_partition) THEN ''sent''::text '
                           'ELSE r.send_status END AS send_status'
                      ELSE 'r.' || quote_ident(a.attname) END, ', ' ORDER BY a.attnum),
           string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),
           string_agg('NEW.' || quote_ident(a.attname), ', ' ORDER BY a.attnum)
      INTO cols, sets, vals
      FROM pg_attribute a
     WHERE a.attrelid = 'txhub.message_rows'::regclass AND a.attnum > 0 AND NOT a.attisdropped;
    EXECUTE 'CREATE OR REPLACE VIEW txhub.messages WITH (security_invoker = true) AS SELECT '
            || cols || ' FROM txhub.message_rows r';
    -- an INSERT through the view that leaves a column out gets the table's default
    FOR c IN SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) AS def
               FROM pg_attribute a JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
              WHERE a.attrelid = 'txhub.message_rows'::regclass AND NOT a.attisdropped LOOP
        EXECUTE format('ALTER VIEW txhub.messages ALTER COLUMN %I SET DEFAULT %s', c.attname, c.def);
    END LOOP;
    EXECUTE 'CREATE OR REPLACE FUNCTION txhub.messages_write() RETURNS trigger LANGUAGE plpgsql '
            'SET search_path = pg_catalog, pg_temp AS $f$ '
            'BEGIN IF TG_OP = ''INSERT'' THEN INSERT INTO txhub.message_rows (' || sets
            || ') VALUES (' || vals || '); '
            -- made pending again (a redrive or a replay by hand): due on its own,
            -- without the sequence a mark may cover
            'ELSE IF NEW.send_status = ''pending'' '
            'AND OLD.send_status IS DISTINCT FROM ''pending'' THEN NEW.fwd_seq := NULL; END IF; '
            'UPDATE txhub.message_rows SET (' || sets || ') = ROW(' || vals || ') '
            'WHERE biz_id = OLD.biz_id AND message_key = OLD.message_key; '
            'IF NOT FOUND THEN RETURN NULL; END IF; END IF; RETURN NEW; END $f$';
END
$$;

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
