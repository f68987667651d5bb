/* devbroker.h: `txhub devbroker`, an embedded Kafka cluster for trying txhub
 * and for the tests (librdkafka's mock cluster; no Java needed). */
#ifndef TXHUB_DEVBROKER_H
#define TXHUB_DEVBROKER_H

#include "config.h"

/* argv holds the arguments after "devbroker" (options already removed).
 * Prints the bootstrap servers as the first line of standard output and runs
 * until SIGTERM or SIGINT. Returns the exit status (2: bad usage). */
int devbroker_main(const txhub_config *cfg, int argc, char **argv);

#endif
