-- 0014: trace context and the dead-letter topic (issue 23 §3, §4; the
-- columns came with 0013).
--
--   messages_trace        `txhub list --trace ID` (and the console's search)
--                         finds a message by its trace id; partial: rows
--                         without a trace context get no entry, so a hub
--                         whose producers send none pays nothing
--   messages_dead_letter  the parked forwards not yet produced to
--                         forward.dead_letter_topic, read by the hub that
--                         owns their partition (deadletter.c); parked rows
--                         are few, and leave it once dead-lettered
--   history trace_id      every history row about a message carries its
--                         trace id, whoever writes it (the hub, `txhub
--                         resolve`/`redrive`, the console, a later feature):
--                         a trigger fills history.trace_id from the
--                         message's row when the writer left it NULL. History
--                         is written on failures and operator actions only,
--                         never for a message that simply goes through.
--
-- Cost on a live database: the two indexes are built CONCURRENTLY first,
-- outside the transaction (`txhub migrate` runs the part after "txhub:
-- concurrently" one statement at a time): the hubs keep writing while they
-- are built. One of the same name made beforehand is kept (IF NOT EXISTS),
-- an invalid one (a build that failed) is dropped and built again. The
-- trigger is a catalog change.

-- txhub: concurrently
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_trace ON txhub.message_rows (trace_id)
    WHERE trace_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_dead_letter
    ON txhub.message_rows (src_topic, src_partition)
    WHERE send_status = 'failed' AND dead_lettered_at IS NULL;
-- txhub: transaction

-- Runs with the writer's rights: a tenant's role (row-level security) reads
-- the trace id of its own rows only, which are the only ones it may write
-- history about.
CREATE FUNCTION txhub.history_trace_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.trace_id IS NULL THEN
        SELECT m.trace_id INTO NEW.trace_id FROM txhub.message_rows m
        WHERE m.biz_id = NEW.biz_id AND m.message_key = NEW.message_key;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER history_trace_id BEFORE INSERT ON txhub.history
    FOR EACH ROW EXECUTE FUNCTION txhub.history_trace_id();
