/* intake_assign.h: the partitions Kafka assigns here (intake_assign.c):
 * taken in PostgreSQL and started, revoked, fenced off, taken back,
 * paused. */
#ifndef TXHUB_INTAKE_ASSIGN_H
#define TXHUB_INTAKE_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include "intake_state.h"

/* The consumer's rebalance_cb (opaque: the intake): partitions assigned
 * are taken and started, those revoked or lost let go. */
void intake_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);

/* Start the partitions of l again at their offsets (librdkafka stopped
 * them: see intake.c). */
void intake_restart(intake *in, rd_kafka_topic_partition_list_t *l);

/* These partitions were taken by another replica: stop reading them and
 * drop them from the owned set (silently: the caller logs who took them). They stay in intake_fenced() while Kafka
 * still assigns them here, until taken again (a new assignment, or
 * intake_retake()) or revoked. */
void intake_fence(intake *in, const tp_key *parts, size_t n);

/* Partitions Kafka assigns here that were fenced off, sorted. The pointer
 * stays valid until the next call into intake. */
const tp_key *intake_fenced(const intake *in, size_t *n);

/* A next_offset for intake_retake(): the partition's first offset. */
#define INTAKE_FROM_BEGINNING (-2)

/* Take partitions (back) at new epochs (own, taken in PostgreSQL by the
 * caller: fenced or refused ones, or owned ones read again): read each from
 * next_offset[i] (-1: the group's committed offset; INTAKE_FROM_BEGINNING),
 * commit that offset with this hub's identity (back too), and add it to
 * the owned set at its epoch (one whose seek fails is fenced off). */
void intake_retake(intake *in, const owned_part *own, const int64_t *next_offset, size_t n);

/* Pause / resume reading every owned partition (PostgreSQL is away). The
 * consumer is still polled while paused, so the replica stays in its
 * group. */
void intake_pause(intake *in);
void intake_resume(intake *in);

#endif
