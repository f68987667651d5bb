-- 0001: the message state, rejected records and conflicts (docs/database.md: Inspecting with psql).
-- Applied by `txhub migrate` in one transaction; never edit once released,
-- add a new numbered file instead.

CREATE TABLE txhub.messages (
    biz_id          text        NOT NULL,
    message_key     text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('prepared', 'committed',
                                'rolled_back', 'check_failed', 'awaiting_prepare')),
    -- the decision held while status = 'awaiting_prepare'
    decision        text        CHECK (decision IN ('commit', 'rollback')),
    send_status     text        CHECK (send_status IN ('pending', 'sent', 'failed')),
    payload         bytea,
    forward_topic   text,
    forward_key     text,
    forward_headers jsonb,
    checkback_url   text,
    check_attempts  integer     NOT NULL DEFAULT 0,
    next_check_at   timestamptz,
    send_attempts   integer     NOT NULL DEFAULT 0,
    next_send_at    timestamptz,
    last_error      text,
    -- the control-topic record that last changed the state; the partition
    -- decides which replica checks back and forwards, the offset orders
    -- forwards within that partition
    src_partition   integer     NOT NULL,
    src_offset      bigint      NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (biz_id, message_key)
);

-- The hot scans only ever look at the few unfinished rows: partial indexes
-- stay small however many finished rows the table holds.
CREATE INDEX messages_check_due ON txhub.messages (src_partition, next_check_at)
    WHERE status = 'prepared';
CREATE INDEX messages_send_due ON txhub.messages (src_partition, next_send_at)
    WHERE send_status = 'pending';
-- For operators: "what failed recently".
CREATE INDEX messages_stuck ON txhub.messages (updated_at)
    WHERE status = 'check_failed' OR send_status = 'failed';

CREATE TABLE txhub.rejected (
    id            bigserial   PRIMARY KEY,
    src_topic     text        NOT NULL,
    src_partition integer     NOT NULL,
    src_offset    bigint      NOT NULL,
    record_key    bytea,
    record_value  bytea,
    reason        text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (src_topic, src_partition, src_offset)
);

CREATE TABLE txhub.conflicts (
    id            bigserial   PRIMARY KEY,
    biz_id        text        NOT NULL,
    message_key   text        NOT NULL,
    arrived       text        NOT NULL,  -- prepare, commit, rollback
    met_status    text        NOT NULL,  -- the state it met
    detail        text,
    src_topic     text,
    src_partition integer,
    src_offset    bigint,
    created_at    timestamptz NOT NULL DEFAULT now()
);
-- one record yields at most one conflict: replaying it adds nothing
CREATE UNIQUE INDEX conflicts_source ON txhub.conflicts (src_topic, src_partition, src_offset)
    WHERE src_offset IS NOT NULL;
CREATE INDEX conflicts_message ON txhub.conflicts (biz_id, message_key);
