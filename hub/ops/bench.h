/* bench.h: `txhub bench`, the load generator and verifier that ships with
 * the hub (the way pgbench ships with PostgreSQL).
 *
 * It produces transactions to the control topic (prepare, then commit or
 * rollback) at a fixed rate or flat out, consumes the forward topic,
 * records the latency from each commit handed to the producer to its
 * forward consumed, and checks that every committed transaction arrived,
 * none rolled back did, and how many arrived twice. It can start the hub
 * itself (or watch one by pid) for its CPU time and peak memory, and
 * measures the same run's two ceilings: PostgreSQL alone (the hub's own
 * apply and delivery statements at the same batching) and Kafka alone
 * (consume one topic and produce to another with the hub's producer
 * settings). Progress goes to standard error; the result is one JSON line
 * on standard output. */
#ifndef TXHUB_BENCH_H
#define TXHUB_BENCH_H

#include "config.h"

/* args: the words after `bench`; hub_args: the -c/-X words txhub was given,
 * passed on to a hub the bench starts (NULL-terminated). Returns the exit
 * status: 0 nothing lost or wrong, 1 something lost or wrong (or a run-time
 * failure), 2 bad usage. */
int bench_main(const txhub_config *cfg, int argc, char **args, char **hub_args);

#endif
