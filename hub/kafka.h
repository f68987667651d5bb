/* kafka.h: librdkafka configuration shared by intake (consumer), forward
 * (producer) and devbroker: logs routed to our logger, kafka.* keys applied. */
#ifndef TXHUB_KAFKA_H
#define TXHUB_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "config.h"

/* A new rd_kafka_conf_t with bootstrap.servers, our log callback, the given
 * NULL-terminated key/value defaults, then every kafka.* key from cfg (which
 * override the defaults). NULL with the offending key in err. */
rd_kafka_conf_t *kafka_conf_new(const txhub_config *cfg, const char *const *defaults,
                                char *err, size_t errsz);

#endif
