-- 0004: the history of each message (docs/admin.md: Admin commands): every check-back attempt
-- with its answer or error, every failed forward attempt, every alert about
-- a message, and every operator action with who did it and why. Ordinary
-- steps (prepared, committed, sent) have no row: `txhub show` derives them
-- from the message's own timestamps.

CREATE TABLE txhub.history (
    id          bigserial   PRIMARY KEY,
    biz_id      text        NOT NULL,
    message_key text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    -- checkback, forward_failed, alert, resolve, redrive
    event       text        NOT NULL,
    detail      text,
    -- 'txhub' for the hub itself; the operating-system user (or console
    -- user) for operator actions
    actor       text        NOT NULL DEFAULT 'txhub'
);
CREATE INDEX history_message ON txhub.history (biz_id, message_key, at);
-- for retention: history goes with its message, or when older than it
CREATE INDEX history_at ON txhub.history (at);

-- For retention and `txhub purge`: finished rows by age, per partition.
CREATE INDEX messages_finished ON txhub.messages (src_partition, updated_at)
    WHERE status = 'rolled_back' OR (status = 'committed' AND send_status = 'sent');
CREATE INDEX rejected_created ON txhub.rejected (created_at);
CREATE INDEX conflicts_created ON txhub.conflicts (created_at);
