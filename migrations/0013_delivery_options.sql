-- 0013: the columns of the delivery options (docs/consumers.md: Delayed
-- delivery, Order per key, Trace context; issue 23). Each is NULL unless its
-- option is used, so adding them is a catalog change: no table rewrite, no
-- scan, hubs and producers keep going.
--
--   not_before        delayed delivery: the committed message is forwarded no
--                     earlier than this (forward.not_before / forward.delay_ms)
--   trace_id          trace context: the W3C trace id of the envelope's
--   traceparent,      `trace` (32 lowercase hex digits), and the traceparent and
--   tracestate        tracestate as received, sent again as headers
--   dead_lettered_at  dead-letter topic: when the parked forward was produced to
--                     forward.dead_letter_topic (once)
--
-- send_status gains 'skipped' (txhub skip: an operator gave up on a parked forward
-- so that the key's later messages flow, forward.order = key). The new check is
-- NOT VALID: rows already stored passed the narrower one, and validating would
-- read the whole table under the lock that stops the hubs' writes.
--
-- The columns and checks themselves are added by migration 12's transaction,
-- before it turns txhub.messages into a view (a database migrates from 0.4.0 to
-- this version at once): once it is the view, a 0.4.0 hub still running reads the
-- whole of txhub.message_rows through it on each scan for forwards due, holding
-- the table for seconds at a time on a big database, and this migration's own
-- lock on the table would seldom come free (docs/database.md, Upgrading). What
-- is left here needs no lock on the hubs' tables.

-- A database that an earlier build of this (unreleased) version took to
-- migration 12 before 12 held these columns lacks them: add them here, as 12
-- now does, and only then, so that an up-to-date database takes no lock.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                   WHERE attrelid = 'txhub.message_rows'::regclass
                     AND attname = 'not_before' AND NOT attisdropped) THEN
        LOCK TABLE txhub.messages, txhub.message_rows, txhub.history IN ACCESS EXCLUSIVE MODE;
        ALTER TABLE txhub.message_rows
            ADD COLUMN not_before       timestamptz,
            ADD COLUMN trace_id         text,
            ADD COLUMN traceparent      text,
            ADD COLUMN tracestate       text,
            ADD COLUMN dead_lettered_at timestamptz;
        ALTER TABLE txhub.message_rows ADD CONSTRAINT message_rows_trace_id_check
            CHECK (trace_id ~ '^[0-9a-f]{32}$') NOT VALID;
        ALTER TABLE txhub.message_rows DROP CONSTRAINT messages_send_status_check;
        ALTER TABLE txhub.message_rows ADD CONSTRAINT messages_send_status_check
            CHECK (send_status IN ('pending', 'sent', 'failed', 'skipped')) NOT VALID;
        ALTER TABLE txhub.history ADD COLUMN IF NOT EXISTS trace_id text;
        PERFORM txhub.define_messages_view();
    END IF;
END
$$;

-- Roles granted a tenant before: resolve (a delayed message's due time) and
-- redrive --now write not_before, as `txhub tenant grant` gives from now on.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT DISTINCT t.role FROM txhub.tenant_grants t
             JOIN pg_catalog.pg_roles r ON r.rolname = t.role LOOP
        EXECUTE format('GRANT UPDATE (not_before) ON txhub.message_rows TO %I', g.role);
    END LOOP;
END
$$;
