/* intake_state.c: see intake_state.h. */
#include "intake_state.h"

rd_kafka_topic_partition_t *intake_list_add(rd_kafka_topic_partition_list_t *l, tp_key k)
{
	return rd_kafka_topic_partition_list_add(l, tp_topic(k), tp_part(k));
}

tp_key intake_elem_tp(const rd_kafka_topic_partition_t *e)
{
	return tp_of(e->topic, e->partition);
}

tp_key intake_msg_tp(const rd_kafka_message_t *m)
{
	return m->rkt ? tp_of(rd_kafka_topic_name(m->rkt), m->partition) : -1;
}

int intake_tp_in(const tp_key *parts, size_t n, tp_key p)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i] == p)
			return 1;
	return 0;
}

slot *intake_slot_find(intake *in, tp_key p)
{
	for (size_t i = 0; i < in->nslots; i++)
		if (in->slots[i].tp == p)
			return &in->slots[i];
	return NULL;
}
