/* kafka.h: librdkafka configuration shared by intake (consumer), forward
 * (producer) and devbroker: logs routed to our logger, kafka.* keys applied. */
#ifndef TXHUB_KAFKA_H
#define TXHUB_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* A new rd_kafka_conf_t with bootstrap.servers, our log callback and
 * certificate check (which notes why a broker's certificate is refused, for
 * kafka_describe_error()), the given
 * NULL-terminated key/value defaults, then every kafka.* key from cfg (which
 * override the defaults). NULL with the offending key in err. */
rd_kafka_conf_t *kafka_conf_new(const txhub_config *cfg, const char *const *defaults,
                                char *err, size_t errsz);

/* The longest text kafka_describe_error() adds for a refused certificate. */
#define KAFKA_TLS_VERDICT_MAX 600

/* The first librdkafka whose SCRAM login Apache Kafka 4.x accepts: 2.6.1
 * fixed the client nonce it sends (librdkafka #4895), which brokers before
 * 4.0 let pass. As rd_kafka_version() gives it (0xMMmmrrpp). */
#define KAFKA_SCRAM_FIXED_VERSION 0x02060100

/* The first librdkafka whose consumer group protocol (KIP-848,
 * kafka.group.protocol = consumer) is production-ready, in
 * rd_kafka_version()'s form. */
#define KAFKA_CONSUMER_PROTOCOL_VERSION 0x020c0000

/* Refuse kafka.group.protocol = consumer with a librdkafka of version
 * (rd_kafka_version()'s form) older than KAFKA_CONSUMER_PROTOCOL_VERSION
 * (2.0.2 does not know the key; 2.4 to 2.11 had it as a preview), naming
 * the version needed and the one run; and with it the kafka.* keys the
 * broker owns under that protocol (session.timeout.ms,
 * heartbeat.interval.ms, partition.assignment.strategy,
 * group.protocol.type), naming what replaces them, which librdkafka would
 * refuse only once the hub starts its consumer. Returns 0, or -1 with the
 * reason in err. */
int kafka_check_group_protocol(const txhub_config *cfg, int version, char *err, size_t errsz);

/* What a failed login means for a librdkafka of version (rd_kafka_version()'s
 * form) with sasl.mechanisms mechanisms (NULL: unset): when err is
 * RD_KAFKA_RESP_ERR__AUTHENTICATION, the mechanism SCRAM-* and the version
 * older than KAFKA_SCRAM_FIXED_VERSION, a line into out saying that SCRAM
 * against Apache Kafka 4.x needs librdkafka 2.6.1 or later and naming the
 * version, and 1; else 0 and out empty. */
int kafka_scram_hint(int version, const char *mechanisms, int err, char *out, size_t outsz);

/* kafka_scram_hint() for client rk (its sasl.mechanisms) and the librdkafka
 * this process runs with. */
int kafka_client_scram_hint(rd_kafka_t *rk, int err, char *out, size_t outsz);

/* An error_cb's error and reason as one line for the log and /readyz:
 * "<error name>: <reason>"; for a TLS failure "<error name>: <verdict>;
 * <reason>", the verdict on the broker's certificate (expired, unknown CA,
 * another host's) that the clients of kafka_conf_new() met within the last
 * minute; for a refused SCRAM login that kafka_client_scram_hint() explains,
 * "<error name>: <hint>; <reason>" (then 1 is returned, else 0). Any thread. */
int kafka_describe_error(rd_kafka_t *rk, int err, const char *reason, char *out, size_t outsz);

/* A new client of type on kafka_conf_new(cfg, defaults). NULL with err:
 * kafka_conf_new's, or librdkafka's reason for refusing the client, after
 * "<what>: " unless what is NULL. */
rd_kafka_t *kafka_client_new(const txhub_config *cfg, rd_kafka_type_t type,
                             const char *const *defaults, const char *what, char *err,
                             size_t errsz);

/* The value of kafka.<key> as set by the user (file, -X), or NULL. The
 * pointer lives as long as cfg's kafka list is not changed. */
const char *kafka_setting(const txhub_config *cfg, const char *key);

/* What a forwarded record adds to the bytes its envelope carried. Its value,
 * key and headers are all cut from one envelope (a string payload decodes
 * to fewer bytes than it is written with, an integer biz_id is its digits),
 * so together they are at most envelope.max_bytes. Kafka's framing adds, in
 * librdkafka's reckoning, 36 bytes of record overhead, two length varints
 * of at most 5 bytes per header (ENVELOPE_HEADERS_MAX plus txhub's two) and
 * the names of txhub's two headers (29 bytes): 725 bytes, rounded up. */
#define KAFKA_RECORD_ROOM 1024

/* What a fetch response holding one envelope adds to it: the control
 * record's key and headers (which producers choose) and Kafka's framing. */
#define KAFKA_FETCH_ROOM 65536

/* librdkafka's default receive.message.max.bytes (when fetch.max.bytes is
 * left at its default). */
#define KAFKA_RECEIVE_DEFAULT 100000000

/* The forward producer's message.max.bytes: librdkafka refuses to produce a
 * record larger than that, so it is derived from envelope.max_bytes
 * (envelope.max_bytes + KAFKA_RECORD_ROOM) unless kafka.message.max.bytes
 * is set. */
int64_t kafka_forward_max_bytes(const txhub_config *cfg);

/* The least receive.message.max.bytes with which the consumer can fetch an
 * envelope of envelope.max_bytes: envelope.max_bytes + KAFKA_FETCH_ROOM. */
int64_t kafka_receive_min_bytes(const txhub_config *cfg);

/* The consumer's receive.message.max.bytes when librdkafka's own would be
 * too small for the largest envelope, else 0 (leave librdkafka's, which
 * follows fetch.max.bytes). Never below an explicit kafka.fetch.max.bytes
 * + 512, which librdkafka would refuse. */
int64_t kafka_consumer_receive_bytes(const txhub_config *cfg);

/* What the consumer fetches in one response at most (fetch.max.bytes) by
 * default: librdkafka's own is queued.max.messages.kbytes (8 MiB here),
 * and the prefetch queue may overshoot its bound by one response. */
#define KAFKA_FETCH_DEFAULT (2 * 1024 * 1024)

/* The consumer's fetch.max.bytes, or 0 when kafka.fetch.max.bytes is set
 * (the user's stands): KAFKA_FETCH_DEFAULT, or enough for the largest
 * envelope and its framing when that is more (kafka_receive_min_bytes() -
 * 512); never below an explicit kafka.message.max.bytes, nor above an
 * explicit kafka.receive.message.max.bytes - 512 (librdkafka refuses
 * either). */
int64_t kafka_consumer_fetch_bytes(const txhub_config *cfg);

/* The producers' queue.buffering.max.kbytes by default (KiB): what a
 * producer holds in memory, not yet delivered. */
#define KAFKA_PRODUCER_QUEUE_KB (16 * 1024)

/* The forward producers' queue.buffering.max.kbytes, or 0 when
 * kafka.queue.buffering.max.kbytes is set: KAFKA_PRODUCER_QUEUE_KB, or
 * room for two of the largest forwards (2 * kafka_forward_max_bytes())
 * when that is more; librdkafka refuses for good a record larger than
 * the whole queue. */
int64_t kafka_producer_queue_kbytes(const txhub_config *cfg);

/* Refuse kafka.* settings too small for envelope.max_bytes: an explicit
 * kafka.message.max.bytes below kafka_forward_max_bytes() (every large
 * envelope would be stored and then never forwarded),
 * kafka.queue.buffering.max.kbytes that cannot hold that many bytes (the
 * producer would never take the record), or
 * kafka.receive.message.max.bytes below kafka_receive_min_bytes(); and a
 * kafka.auto.offset.reset other than error (the consumer would skip
 * records without a word; intake decides instead). conf is
 * built from cfg without defaults (main.c's probe). Returns 0, or -1 with
 * both keys named in err. */
int kafka_check_limits(const txhub_config *cfg, const rd_kafka_conf_t *conf, char *err,
                       size_t errsz);

#endif
