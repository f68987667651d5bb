-- 0008: counting what a database loss may make go out twice in
-- exactly_once (docs/consumers.md: Forwarding exactly once; docs/database.md:
-- When PostgreSQL fails over).
--
-- A check-back answer or an operator decision made in what the database
-- lost is not in the control topic: reading the topic again brings the
-- message back as prepared, it is decided again and forwarded again. Its
-- first forward carried a sequence between two offsets, which nothing
-- reproduces, so the progress marker cannot vouch for it. What the marker
-- does say is the highest such sequence (oob); a sequence between two
-- offsets lies above (N << 20) for the offset N the partition had then,
-- so every message decided that way in the lost history was prepared
-- below (oob >> 20). fwd_lost_oob keeps that oob when a lane took the
-- partition from a marker of a lost history that decided rows outside the
-- control topic after the database's offset; a message of such a
-- partition prepared below (fwd_lost_oob >> 20) and decided outside the
-- control topic afterwards may be a duplicate, and is counted in
-- txhub_forwards_after_rewind_total{outcome="decided_again"}.

ALTER TABLE txhub.partitions ADD COLUMN fwd_lost_oob bigint;
