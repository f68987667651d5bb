-- 0005: forwarding in order, for forward.mode = exactly_once
-- (docs/consumers.md: Forwarding exactly once).
--
-- A row that becomes due for forwarding gets the next forward sequence of
-- its control-topic partition (the batch that commits it, or the run
-- loop's scan for rows decided elsewhere). In exactly_once mode a
-- partition's forwards go out in that order, in Kafka transactions that
-- also write a progress marker (the highest sequence of the transaction) to
-- a compacted topic; a partition's new owner marks every pending row up to
-- the marker sent before it forwards anything. A row whose forward failed
-- loses its sequence and gets a new one when it is due again.
--
-- A marker also names the partition's fwd_origin (random, made with the
-- row) and the row its sequence was given to: a marker written for another
-- database (the database recreated while the topic stayed) or for another
-- history of it (restored from a backup) is not trusted, so nothing is ever
-- marked sent that this database did not forward.

ALTER TABLE txhub.messages ADD COLUMN fwd_seq bigint;
ALTER TABLE txhub.partitions ADD COLUMN next_fwd_seq bigint NOT NULL DEFAULT 1;
ALTER TABLE txhub.partitions ADD COLUMN fwd_origin text NOT NULL
    DEFAULT md5(random()::text || clock_timestamp()::text);

CREATE INDEX messages_fwd_seq ON txhub.messages (src_partition, fwd_seq)
    WHERE send_status = 'pending';
