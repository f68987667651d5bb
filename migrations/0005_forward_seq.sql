-- 0005: forwarding in order, for forward.mode = exactly_once (CONTRACT §12).
--
-- A row that becomes due for forwarding gets the next forward sequence of
-- its control-topic partition (the batch that commits it, or the run
-- loop's scan for rows decided elsewhere). In exactly_once mode a
-- partition's forwards go out in that order, in Kafka transactions that
-- also write a progress marker (the highest sequence of the transaction) to
-- a compacted topic; a partition's new owner marks every pending row up to
-- the marker sent before it forwards anything. A row whose forward failed
-- loses its sequence and gets a new one when it is due again.

ALTER TABLE txhub.messages ADD COLUMN fwd_seq bigint;
ALTER TABLE txhub.partitions ADD COLUMN next_fwd_seq bigint NOT NULL DEFAULT 1;

CREATE INDEX messages_fwd_seq ON txhub.messages (src_partition, fwd_seq)
    WHERE send_status = 'pending';
