-- 0012: each message written once (issue 22). A delivery no longer updates its
-- message's row: each (topic, partition) has a delivery mark, the forward sequence up
-- to which every committed row of the partition is delivered or carries its own
-- record (a failed attempt, a retry, a parked forward), moved by the hub in one
-- statement per partition with the next delivery reports, never per message.
--
-- The rows move to txhub.message_rows (same columns, same meanings, every
-- index, grant and row-level security policy goes with the rename), and
-- txhub.messages becomes a view over it with the columns of docs/database.md:
-- Inspecting with psql in the same order: its send_status is 'sent' for a row
-- stored 'pending' whose forward sequence is at or below its partition's mark.
-- updated_at of such a row is the time of its last write (its decision, or the
-- failure before it): the delivery follows within the marks' interval
-- (docs/architecture.md: Storage: each message written once). The view runs
-- with the caller's rights (security_invoker), so a tenant's role sees its rows
-- only (migration 0010's policies on the table apply), and writes through it
-- (INSERT, UPDATE, DELETE, as operators' psql and older scripts do) reach the
-- table through the triggers below. The hub itself reads and writes
-- txhub.message_rows.
--
-- Cost on a live database: the rename, the view, the marks table and the triggers
-- are catalog changes, made in one short transaction that the hubs' writes wait
-- for. The four new indexes are built first, CONCURRENTLY (`txhub migrate` runs
-- the part after "txhub: concurrently" outside any transaction, one statement at
-- a time), on txhub.messages while it is still the table: the hubs keep writing
-- while they are built, and the rename takes them along. An index of the same name
-- made beforehand is kept (IF NOT EXISTS); an invalid one, left by a build that
-- failed, is dropped and built again.

-- txhub: concurrently
-- The due scans. A delivered row stays 'pending' in the table, so the send scans may
-- not walk send_status = 'pending': rows that wait for their own attempt (a retry, a
-- decision made outside the control topic, a lease given back) have no sequence and
-- are found here; the sequenced ones above their partition's mark are a range of
-- messages_fwd_seq (kept from 0005).
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_send_retry
    ON txhub.messages (src_partition, next_send_at)
    WHERE send_status = 'pending' AND fwd_seq IS NULL;
-- Counts by status, retention and purge: the decided rows by partition and age, one
-- index per status so that each count is an index-only scan and each purge walk stops
-- at its batch. (messages_finished held only the rows updated to 'sent', which no
-- longer happens.)
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_committed
    ON txhub.messages (src_partition, updated_at) WHERE status = 'committed';
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_rolled_back
    ON txhub.messages (src_partition, updated_at) WHERE status = 'rolled_back';
-- A tenant's forwards by time (the console's Tenants page); was messages_tenant_sent.
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_tenant_committed
    ON txhub.messages (tenant, updated_at) WHERE tenant IS NOT NULL AND status = 'committed';
-- txhub: transaction

-- The tables this changes, in the hubs' order (they lock txhub.partitions before
-- them, which this leaves alone).
LOCK TABLE txhub.messages, txhub.history IN ACCESS EXCLUSIVE MODE;
ALTER TABLE txhub.messages RENAME TO message_rows;

-- The columns of the delivery options and their checks, which migration 13
-- describes: added here, while 0.4.0 hubs still running read the table fast, not
-- there (see 0013).
ALTER TABLE txhub.message_rows
    ADD COLUMN not_before       timestamptz,
    ADD COLUMN trace_id         text,
    ADD COLUMN traceparent      text,
    ADD COLUMN tracestate       text,
    ADD COLUMN dead_lettered_at timestamptz;
-- NOT VALID: the column is new, every row NULL; checked as part of ADD COLUMN the
-- constraint would read the whole table under the lock that stops the hubs' writes
ALTER TABLE txhub.message_rows ADD CONSTRAINT message_rows_trace_id_check
    CHECK (trace_id ~ '^[0-9a-f]{32}$') NOT VALID;
ALTER TABLE txhub.message_rows DROP CONSTRAINT messages_send_status_check;
ALTER TABLE txhub.message_rows ADD CONSTRAINT messages_send_status_check
    CHECK (send_status IN ('pending', 'sent', 'failed', 'skipped')) NOT VALID;

-- history rows about a message carry its trace id
ALTER TABLE txhub.history ADD COLUMN trace_id text;


CREATE TABLE txhub.forward_marks (
    topic      text        NOT NULL,
    partition  integer     NOT NULL CHECK (partition >= 0),
    -- every committed row of the partition with fwd_seq <= upto, send_status
    -- 'pending', was delivered
    upto       bigint      NOT NULL CHECK (upto >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
) WITH (fillfactor = 50); -- one row per partition, updated in place (HOT) a few times a second

-- A tenant's role sees the marks of its control topics, as it sees their partitions;
-- row-level security goes on with the other tables' (the first `txhub tenant grant`,
-- or now if one was made already).
CREATE POLICY tenant_read ON txhub.forward_marks FOR SELECT USING (txhub.granted_topic(topic));
DO $$
BEGIN
    IF (SELECT relrowsecurity FROM pg_class WHERE oid = 'txhub.message_rows'::regclass) THEN
        ALTER TABLE txhub.forward_marks ENABLE ROW LEVEL SECURITY;
    END IF;
END
$$;

-- replaced by the indexes built above
DROP INDEX txhub.messages_send_due;
DROP INDEX txhub.messages_finished;
DROP INDEX txhub.messages_tenant_sent;

-- The view and its trigger function are built from the table's columns, whatever
-- earlier migrations added; a later migration that adds a column to
-- txhub.message_rows calls txhub.define_messages_view() again (CREATE OR REPLACE:
-- the new columns come last, grants and the trigger stay).
CREATE FUNCTION txhub.define_messages_view() RETURNS void LANGUAGE plpgsql AS $$
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
    EXECUTE 'CREATE OR REPLACE FUNCTION txhub.messages_write() RETURNS trigger LANGUAGE plpgsql AS $f$ '
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
SELECT txhub.define_messages_view();
CREATE TRIGGER messages_write INSTEAD OF INSERT OR UPDATE ON txhub.messages
    FOR EACH ROW EXECUTE FUNCTION txhub.messages_write();

COMMENT ON VIEW txhub.messages IS
    'CONTRACT §6: one row per message; send_status sent for rows at or below their '
    'partition''s delivery mark (txhub.forward_marks). Rows live in txhub.message_rows.';

-- Roles granted a tenant before: the view and the marks, as `txhub tenant grant`
-- gives from now on.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT DISTINCT t.role FROM txhub.tenant_grants t
             JOIN pg_catalog.pg_roles r ON r.rolname = t.role LOOP
        EXECUTE format('GRANT SELECT ON txhub.messages, txhub.forward_marks TO %I', g.role);
    END LOOP;
END
$$;
