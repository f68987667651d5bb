-- 0009: the control topic each message came from (docs/tenants.md: Sharing one
-- hub between teams: control_topic may be several topics, and everything is per
-- (topic, partition)). txhub.partitions, txhub.rejected and txhub.conflicts
-- name their topic already; txhub.messages did not, as 0.4.0 read one topic.
--
-- Existing rows are filled WITHOUT rewriting the table and without a long lock: since
-- PostgreSQL 11 a column added with a constant default costs a catalog change only (the
-- default is kept once, in pg_attribute, and read for every row stored before), and a
-- NOT NULL column with a non-null default needs no scan. The default is the control
-- topic of the hubs that wrote those rows:
--   1. control_topic of the `txhub migrate` that runs this, when it names one topic
--      (migrate passes it as the setting txhub.migrate_control_topic);
--   2. else (a list or a pattern) the one topic txhub.partitions names, the topic 0.4.0
--      read; several there with messages stored is refused (which topic stored which
--      message cannot be told): run `txhub migrate -X control_topic=<the 0.4.0 topic>`;
--   3. else (no hub ever ran) 'txhub.control', the default, which no row uses.
-- The default stays: a 0.4.0 hub still running during the upgrade writes its rows
-- without the column, and they name its topic. txhub from this version on always
-- writes the column itself.
--
-- Indexes. The due scans (messages_check_due, messages_send_due, messages_fwd_seq,
-- messages_awaiting, messages_finished) keep their src_partition-first indexes and
-- filter the topic on the rows they find: building an index with the topic in this
-- transaction would read all of txhub.messages under a lock that stops the hubs' writes
-- (tens of seconds on 10 million rows), and CREATE INDEX CONCURRENTLY cannot run in a
-- migration's transaction. The indexes are partial, over the unfinished rows only, so a
-- partition number shared by several topics costs the few unfinished rows of the others
-- (docs/kafka.md: Several control topics).

DO $$
DECLARE
    t text := nullif(current_setting('txhub.migrate_control_topic', true), '');
    ntopics bigint;
BEGIN
    IF t IS NULL THEN
        SELECT min(topic), count(DISTINCT topic) INTO t, ntopics FROM txhub.partitions;
        IF ntopics > 1 AND EXISTS (SELECT 1 FROM txhub.messages) THEN
            RAISE EXCEPTION 'txhub.partitions names % control topics: which one stored the '
                'existing messages cannot be told; run txhub migrate with control_topic set '
                'to the one topic the hubs read before (e.g. -X control_topic=txhub.control)',
                ntopics;
        END IF;
    END IF;
    EXECUTE format('ALTER TABLE txhub.messages ADD COLUMN src_topic text NOT NULL DEFAULT %L',
                   coalesce(t, 'txhub.control'));
END
$$;
