/* topics.h: the control topics (docs/tenants.md: Sharing one hub between teams)
 * and the names the hub keys everything by.
 *
 * What `control_topic` says, parsed (pure: no I/O): one topic name, a
 * comma-separated list of names (trimmed, each a valid Kafka topic name,
 * no duplicates, at most TOPICS_LIST_MAX), or one pattern beginning with
 * `^`, a POSIX extended regular expression over topic names, which is how
 * librdkafka subscribes to it too.
 *
 * Interned names. Every control topic the hub meets gets a small id, and
 * its name is kept for the process lifetime, so a (topic, partition) pair
 * fits one integer (tp_key) and a record carries its topic as a pointer
 * that is never freed per record. Interning takes a lock; reading a name
 * by id or key does not. Thread-safe. */
#ifndef TXHUB_TOPICS_H
#define TXHUB_TOPICS_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "topic_name.h"

/* Topics a list may name at most, and the longest pattern (bytes). */
#define TOPICS_LIST_MAX 64
#define TOPICS_PATTERN_MAX 1024

typedef struct {
	int pattern;   /* 1: one regular expression (re, source); 0: the names */
	char **names;  /* the list, in the order given (n >= 1) */
	size_t n;
	char *source;  /* the pattern as written, "^..." */
	regex_t re;
} topics_spec;

/* Parse what control_topic says into out (freed with topics_free, also
 * after a failure). Returns 0, or -1 with why in err (without the key's
 * name: the caller adds it). */
int topics_parse(const char *text, topics_spec *out, char *err, size_t errsz);

void topics_free(topics_spec *s);

/* Whether the spec names topic (a member of the list, or matched by the
 * pattern). */
int topics_match(const topics_spec *s, const char *topic);

/* Whether the spec is exactly one topic name (the 0.4.0 form). */
int topics_single(const topics_spec *s);

/* The progress topic of exactly_once (docs/consumers.md: Forwarding exactly
 * once): forward.progress_topic when set, else "<control_topic>.progress" for
 * one topic and TOPICS_PROGRESS_DEFAULT for a list or a pattern. */
#define TOPICS_PROGRESS_DEFAULT "txhub.progress"
void topics_progress_name(const topics_spec *s, const char *configured, char *out,
                          size_t outsz);

/* ---- topic names ---- */

/* Whether a name is a valid Kafka topic name (an envelope's forward topic,
 * a control topic, every topic setting): txhubi_topic_valid() of
 * topic_name.h, the client library's check too. */
/* 1 for a name Kafka keeps for its own topics (beginning with "__":
 * __consumer_offsets, __transaction_state): never a forward topic. */
int envelope_reserved_topic(const char *s, size_t len);

/* ---- interned names and (topic, partition) keys ---- */

/* Distinct topic names a process interns at most. */
#define TOPICS_IDS_MAX 4096

/* The id of name (interned on first sight: 0, 1, ...), or -1 when the
 * table is full or memory ran out. */
int32_t topic_id(const char *name);

/* The name of an id topic_id() returned (NULL for any other). */
const char *topic_name(int32_t id);

/* The interned copy of name (NULL as topic_id() fails). */
const char *topic_intern(const char *name);

/* A (topic, partition) pair: the topic's id in the high half, the
 * partition in the low half, so keys of one topic sort by partition and
 * compare with ==. */
typedef int64_t tp_key;

static inline tp_key tp_make(int32_t topic, int32_t partition)
{
	return (tp_key)(((uint64_t)(uint32_t)topic << 32) | (uint32_t)partition);
}
static inline int32_t tp_tid(tp_key k) { return (int32_t)((uint64_t)k >> 32); }
static inline int32_t tp_part(tp_key k) { return (int32_t)(uint32_t)((uint64_t)k & 0xffffffffu); }
/* The topic's name ("?" for a key no interned topic made). */
const char *tp_topic(tp_key k);

/* For log lines: printf("... " TP_FMT " ...", TP_ARG(k)) writes
 * "partition 3 of txhub.control". */
#define TP_FMT "partition %d of %s"
#define TP_ARG(k) tp_part(k), tp_topic(k)

/* The key of (name, partition), interning name; -1 when topic_id fails. */
tp_key tp_of(const char *name, int32_t partition);

#endif
