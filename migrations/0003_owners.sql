-- 0003: who holds each partition, and one alert per missing prepare.
--
-- A replica fenced off a partition that its consumer group still assigns to
-- it takes the partition back once the owner is gone: it let go cleanly
-- (released_at) or stopped refreshing heartbeat_at. group_id tells an owner
-- of another consumer group (a misconfigured hub on the same control topic
-- and database) from a replica of one's own; a fenced replica waiting on
-- such an owner says so in contested_by/contested_at, so that both sides
-- report the clash.

ALTER TABLE txhub.partitions
    ADD COLUMN group_id     text,         -- consumer group of the owner
    ADD COLUMN heartbeat_at timestamptz,  -- refreshed every few seconds while owned
    ADD COLUMN released_at  timestamptz,  -- set when the owner let go; null while held
    ADD COLUMN contested_by text,         -- group of a fenced replica waiting for it
    ADD COLUMN contested_at timestamptz;  -- refreshed while it waits

-- When the prepare_missing alert was raised for an awaiting_prepare row
-- (once per row).
ALTER TABLE txhub.messages ADD COLUMN alerted_at timestamptz;

CREATE INDEX messages_awaiting ON txhub.messages (src_partition, created_at)
    WHERE status = 'awaiting_prepare';
