-- 0013: the columns of the delivery options (CONTRACT §15, issue 23). Each is
-- NULL unless its option is used, so adding them is a catalog change: no table
-- rewrite, no scan, hubs and producers keep going.
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
-- added NOT VALID: rows already stored passed the narrower one, and validating
-- would read the whole table under the lock that stops the hubs' writes.
-- Locks first, in the order writers take them (the view, then its table): a
-- writer that went through the view while this waited for the table would
-- otherwise deadlock with CREATE OR REPLACE VIEW below.
LOCK TABLE txhub.messages, txhub.message_rows, txhub.history IN ACCESS EXCLUSIVE MODE;

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

SELECT txhub.define_messages_view();

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
