-- 0006: forwarding exactly once across a database that lost its last
-- transactions (a failover to an asynchronous standby, a restore).
--
-- Forward sequences of messages committed by a control record are derived
-- from that record's offset ((offset + 1) << 20), so that reading the
-- control topic again gives every message the sequence it had before the
-- loss; messages decided elsewhere (check-back, operators) take the
-- sequences between two offsets. When a lane takes a partition it reads the
-- progress marker and notes here what it says was forwarded: every
-- sequence up to fwd_sent_upto, except those in fwd_dead (their forward
-- failed and they were not sent since) and from fwd_unsure_from on (more
-- failures than the marker can list, or decisions made outside the control
-- topic in what the database lost). A message applied again with such a
-- sequence is stored as sent instead of being forwarded a second time.
-- fwd_recovered_epoch is the epoch whose lane did that: until it equals
-- epoch, no sequence is given out for the partition (a sequence given out
-- before could be one the marker vouches for).

ALTER TABLE txhub.partitions ADD COLUMN fwd_sent_upto bigint;
ALTER TABLE txhub.partitions ADD COLUMN fwd_dead bigint[];
ALTER TABLE txhub.partitions ADD COLUMN fwd_unsure_from bigint;
ALTER TABLE txhub.partitions ADD COLUMN fwd_recovered_epoch bigint;
