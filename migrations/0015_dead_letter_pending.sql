-- 0015: dead letters exactly once under forward.mode = exactly_once (issue 23 §4).
--
-- Under exactly_once the hub produces a batch of dead letters in a Kafka
-- transaction of its own (deadletter.c), and before committing it records
-- here, for each parked row, where its record went: the dead-letter topic,
-- partition and offset. After the commit one statement sets the row's
-- dead_lettered_at and deletes the entry. A hub that dies in between leaves
-- the entry; the partition's next owner (after init_transactions, so that
-- nothing of the dead hub is still open) reads that offset with
-- read_committed: the record there (with the row's txhub-biz-id and
-- txhub-message-key) was committed and is recorded, anything else means the
-- transaction was aborted and the row is produced again.
--
--   parked_at  message_rows.updated_at of the park the record is for: a
--              row redriven and parked again meanwhile is not taken as
--              dead-lettered by an older park's record
--   src_topic, src_partition  the control partition whose owner resolves it
--
-- A handful of rows at a time (one batch per partition, for as long as a
-- transaction takes); no foreign key, so that purging message_rows pays
-- nothing for it: an entry whose row is gone is resolved and deleted alike.
CREATE TABLE txhub.dead_letter_pending (
    biz_id        text        NOT NULL,
    message_key   text        NOT NULL,
    parked_at     timestamptz NOT NULL,
    src_topic     text        NOT NULL,
    src_partition integer     NOT NULL CHECK (src_partition >= 0),
    topic         text        NOT NULL,
    partition     integer     NOT NULL CHECK (partition >= 0),
    "offset"      bigint      NOT NULL CHECK ("offset" >= 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (biz_id, message_key)
);
CREATE INDEX dead_letter_pending_src ON txhub.dead_letter_pending (src_topic, src_partition);
