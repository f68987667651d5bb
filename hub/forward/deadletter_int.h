/* deadletter_int.h: what the dead-letter thread's parts share:
 * deadletter.c (the thread, parked rows read, at_least_once) and
 * deadletter_once.c (exactly_once: the replica's transactional producer,
 * pending entries and their recovery). Internal to hub/forward/. */
#ifndef TXHUB_DEADLETTER_INT_H
#define TXHUB_DEADLETTER_INT_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>

#include "deadletter.h"
#include "owned.h"
#include "store.h"

/* The owned partitions are looked at this often for parked rows ... */
#define DL_LOOK_MS 1000
/* ... at most this many at a time. */
#define DL_BATCH 100
/* After a failure the next attempt waits from 1 s, doubling, up to this. */
#define DL_BACKOFF_MAX_MS 60000
/* exactly_once: the transactional producer with nothing to do this long
 * is closed (librdkafka 2.0.2's idle ones burn CPU) ... */
#define DL_IDLE_MS 10000
/* ... its calls (init, commit, abort) wait this long each ... */
#define DL_CALL_MS 10000
/* ... and reading back a pending record waits at most this long (another
 * producer's open transaction before it holds read_committed readers back). */
#define DL_RECOVER_MS 15000

/* exactly_once: one owned control partition with dead-letter work, at its
 * epoch, on the replica's transactional producer (deadletter.h). */
typedef struct {
	tp_key tp;
	int64_t epoch;
	int claimed;     /* step 0 done: the ids before fenced, the producer's written */
	int recovered;   /* its pending entries resolved since the producer's init_transactions */
} dl_txn;

struct deadletter {
	const txhub_config *cfg;
	alert *al;
	pthread_t thread;
	int started;

	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t cv;
	owned_set own;      /* a copy of the run loop's */
	int stopping;

	/* the thread's */
	rd_kafka_t *rk;
	store *st;
	int64_t delivery_timeout_ms;
	int fails;          /* batches in a row that failed */
	char last_why[600]; /* the failure last logged */
	int eos;            /* forward.mode = exactly_once */
	char txid[480];     /* exactly_once: the producer's transactional.id */
	rd_kafka_t *txrk;   /* exactly_once: the producer; NULL: closed (idle, or failed) */
	int64_t tx_used_ms; /* when it last had work */
	dl_txn *txns;       /* exactly_once: the partitions that had work */
	size_t ntxns, captxns;
	const char *failpoint; /* TXHUB_FAILPOINT, for the crash tests */
};

/* One parked row being dead-lettered. */
typedef struct {
	store_forward f;         /* biz_id, message_key, payload, key, headers, trace */
	char *error;             /* its last_error */
	char attempts[16];
	rd_kafka_resp_err_t err; /* its delivery report; -1 until it came */
	int produced;
	char parked_at[64];      /* its updated_at (the park), as text */
	int32_t partition;       /* where the broker put it (delivery report) */
	int64_t offset;
} dl_item;

void dl_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);

void dl_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque);

void dl_items_free(dl_item *items, size_t n);

int dl_read_parked(deadletter *d, const owned_part *parts, size_t nparts, dl_item **out,
                       char *err, size_t errsz);

/* What dl_keys_command does with the rows of the items acknowledged. */
typedef enum {
	DL_DONE,     /* at_least_once: recorded dead-lettered at `at` (store_dl_done) */
	DL_DONE_EOS, /* exactly_once: committed at vals[i] (store_dl_pending_done) */
	DL_CLEAR,    /* exactly_once: their pending entries go (store_dl_pending_clear) */
} dl_keys_do;

/* what on the rows of items[0..n) whose err is NO_ERROR. Returns 0, or -1
 * with err. */
int dl_keys_command(deadletter *d, dl_keys_do what, const dl_item *items, size_t n,
                    const char *const *vals, const char *at, char *err, size_t errsz);

void dl_batch_failed(deadletter *d, const dl_item *bad, size_t nbad, const char *why);

int dl_db_ready(deadletter *d);

void dl_count_sent(deadletter *d, const dl_item *items, size_t n, size_t nok);

size_t dl_produce_all(deadletter *d, rd_kafka_t *rk, dl_item *items, size_t n,
                          const char *at, dl_item **first_bad);

void dl_items_failed(deadletter *d, dl_item *items, size_t n, const dl_item *first_bad,
                         size_t nbad);

/* exactly_once: the producer closed (NULL d->txrk: nothing); every
 * partition's pending entries are to be resolved again. */
void dl_producer_close(deadletter *d);

int dl_dead_letter_eos(deadletter *d, const owned_set *own);

#endif
