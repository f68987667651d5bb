/* intake_trouble.c: what keeps the consumer from reading, said (see
 * intake_trouble.h): the last Kafka error while it has not joined its group (a
 * refused password or certificate, an ACL hiding the control topic or the
 * group; a refused SCRAM login explained when the librdkafka may be why),
 * and the partitions the broker refuses to let it fetch (an ACL
 * with Describe but not Read), for the log and /readyz. */
#include "intake_trouble.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "intake_state.h"
#include "kafka.h"
#include "log.h"

/* A reason this old or newer is not replaced by "all brokers are down",
 * which follows every refused connection and says less. */
#define SPECIFIC_MS 60000

void intake_note_error(intake *in, rd_kafka_t *rk, int err, const char *reason)
{
	char line[sizeof in->trouble];
	int hinted = kafka_describe_error(rk, err, reason, line, sizeof line);
	log_one_line(line);
	if (hinted && !in->scram_hint[0]) {
		kafka_client_scram_hint(rk, err, in->scram_hint, sizeof in->scram_hint);
		log_error("intake: kafka: %s", line);
	} else {
		log_warn("intake: kafka: %s", line);
	}
	int64_t now = clock_ms();
	if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN && in->trouble[0] &&
	    now - in->trouble_ms < SPECIFIC_MS)
		return;
	snprintf(in->trouble, sizeof in->trouble, "%s", line);
	in->trouble_ms = now;
}

/* Whether any slot is flagged unreadable (kept in in->unreadable). */
static void count_unreadable(intake *in)
{
	in->unreadable = 0;
	for (size_t i = 0; i < in->nslots; i++)
		in->unreadable |= in->slots[i].unreadable;
}

void intake_note_consume_error(intake *in, const rd_kafka_message_t *m)
{
	const char *why = rd_kafka_message_errstr(m);
	slot *s = m->rkt && m->partition >= 0 ? intake_slot_find(in, intake_msg_tp(m)) : NULL;
	if (m->err != RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED || !s) {
		log_warn("intake: consume: %s", why);
		snprintf(in->trouble, sizeof in->trouble, "%s", why);
		log_one_line(in->trouble);
		in->trouble_ms = clock_ms();
		return;
	}
	snprintf(in->unreadable_why, sizeof in->unreadable_why, "%s", rd_kafka_err2str(m->err));
	if (s->unreadable)
		return;
	s->unreadable = 1;
	in->unreadable = 1;
	log_error("intake: Kafka refuses reading " TP_FMT " (%s): the hub's principal "
	          "needs Read on the topic (docs/kafka.md: Kafka ACLs); nothing of it is read until "
	          "then, and reading goes on by itself once it is granted", TP_ARG(s->tp), why);
}

void intake_note_readable(intake *in, tp_key p)
{
	slot *s = intake_slot_find(in, p);
	if (s && s->unreadable) {
		s->unreadable = 0;
		log_info("intake: " TP_FMT " is read again", TP_ARG(p));
	}
	count_unreadable(in);
}

size_t intake_unreadable(const intake *in, char *why, size_t whysz)
{
	if (whysz)
		why[0] = '\0';
	tp_key parts[64];
	size_t n = 0;
	for (size_t i = 0; in->unreadable && i < in->nslots && n < 64; i++)
		if (in->slots[i].unreadable)
			parts[n++] = in->slots[i].tp;
	if (n == 0)
		return 0;
	char named[400];
	snprintf(why, whysz,
	         "Kafka refuses reading %s (%s): the hub's principal needs Read "
	         "on the topic (docs/kafka.md: Kafka ACLs)",
	         log_partitions(parts, n, named, sizeof named), in->unreadable_why);
	return n;
}

const char *intake_trouble(const intake *in) { return in->trouble[0] ? in->trouble : NULL; }

const char *intake_scram_hint(const intake *in)
{
	return in->scram_hint[0] ? in->scram_hint : NULL;
}
