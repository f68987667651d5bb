-- 0002: partition ownership, so that a replica that lost a partition without
-- noticing (a long pause, a cut network) cannot write state for it.
--
-- Each assignment of a control-topic partition bumps its epoch and records
-- the new owner. Every write a replica makes for a partition first locks
-- this row and checks that the epoch is still the one its assignment took;
-- the batch that applies envelopes also moves next_offset in the same
-- transaction, and a new owner starts reading there.

CREATE TABLE txhub.partitions (
    topic       text        NOT NULL,
    partition   integer     NOT NULL CHECK (partition >= 0),
    epoch       bigint      NOT NULL CHECK (epoch > 0),
    owner       text        NOT NULL,  -- host/pid of the replica holding the epoch
    next_offset bigint      CHECK (next_offset >= 0),  -- first offset not yet applied
    taken_at    timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
);
