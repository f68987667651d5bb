/* intake_trouble.h: what keeps the consumer from reading (intake_trouble.c). */
#ifndef TXHUB_INTAKE_TROUBLE_H
#define TXHUB_INTAKE_TROUBLE_H

#include <stddef.h>

#include "intake_state.h"

/* The consumer rk's error_cb: logged, and kept for intake_trouble() (a
 * specific reason is not replaced within a minute by "all brokers are
 * down", which follows it). A refused SCRAM login on a librdkafka older
 * than 2.6.1 (kafka_scram_hint()) is an error line the first time, and
 * kept for intake_scram_hint(). */
void intake_note_error(intake *in, rd_kafka_t *rk, int err, const char *reason);

/* Why the consumer's SCRAM login may have been refused for the librdkafka
 * it runs on (Apache Kafka 4.x needs 2.6.1 or later), once such a login
 * was refused; else NULL. */
const char *intake_scram_hint(const intake *in);

/* An error the consumer returned instead of a record: the broker refusing
 * to let a slot's partition be fetched (TOPIC_AUTHORIZATION_FAILED) flags
 * it unreadable, with an error line the first time; anything else is
 * logged and kept for intake_trouble(). */
void intake_note_consume_error(intake *in, const rd_kafka_message_t *m);

/* Partition p was read (a record, its end, or an offset committed): no
 * longer unreadable. Cheap enough for every record while in->unreadable. */
void intake_note_readable(intake *in, tp_key p);

/* The last error librdkafka reported for the consumer (a refused password
 * or certificate, brokers out of reach, the control topic or group hidden
 * by an ACL), on one line, or NULL. Kept until another comes: meant for
 * while the consumer has not joined its group. */
const char *intake_trouble(const intake *in);

/* Assigned partitions the broker refuses to let the consumer fetch (an ACL
 * with Describe but not Read on the control topic): how many; when some
 * are, one line naming them, the topic and the grant into why. They count
 * until a record or the partition's end is read, or an offset of theirs is
 * committed. */
size_t intake_unreadable(const intake *in, char *why, size_t whysz);

#endif
