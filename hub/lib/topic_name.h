/* topic_name.h: what Kafka takes as a topic name, one check for the hub and
 * the client library (meson.build compiles topic_name.c into libtxhub,
 * which the hub links; the txhubi_ prefix keeps it out of the library's
 * exports and out of the way of a program linking the static archive).
 * Pure logic, no I/O, no state. */
#ifndef TXHUB_TOPIC_NAME_H
#define TXHUB_TOPIC_NAME_H

#include <stddef.h>

/* Kafka's own limit on a topic name's length. */
#define TOPIC_NAME_MAX 249

/* 1 when s[0..len) is 1..TOPIC_NAME_MAX characters of a-z A-Z 0-9 . _ -
 * and neither "." nor "..", else 0. */
int txhubi_topic_valid(const char *s, size_t len);

#endif
