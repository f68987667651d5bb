-- 0007: control-topic offsets a hub could not read (issue 20).
--
-- A partition's next offset may be gone from the broker: deleted by
-- retention (or DeleteRecords) before any hub read it, or beyond the
-- partition's end (the topic deleted and made again, or records the broker
-- lost). The hub that finds it records it here, in the transaction that
-- moves the partition's next_offset to where it reads from now, so that it
-- is reported once and `txhub status` (which reads only PostgreSQL) shows
-- it on every replica and after restarts. Never deleted by retention: a
-- row per event, and events are rare.
--
--   kind 'lost':      [from_offset, to_offset) deleted before it was read;
--                     those envelopes are gone; read on from to_offset
--   kind 'truncated': the partition ended at from_offset, the hub stood at
--                     to_offset; it read the partition again from resume_offset

CREATE TABLE txhub.gaps (
    id            bigserial   PRIMARY KEY,
    topic         text        NOT NULL,
    partition     integer     NOT NULL CHECK (partition >= 0),
    kind          text        NOT NULL CHECK (kind IN ('lost', 'truncated')),
    from_offset   bigint      NOT NULL CHECK (from_offset >= 0),
    to_offset     bigint      NOT NULL CHECK (to_offset > from_offset),
    resume_offset bigint      NOT NULL CHECK (resume_offset >= 0),  -- where the hub read on
    detected_by   text        NOT NULL,  -- host/pid of the hub that found it
    detected_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX gaps_partition ON txhub.gaps (topic, partition, id);
