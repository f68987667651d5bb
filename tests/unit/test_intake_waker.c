/* The fetcher's waker (hub/intake/intake_waker.h): when it pokes, and that
 * a waker with a question in flight stops cleanly (no broker answers here:
 * the question waits out its time-out). What it buys is measured by the
 * drains of docs/benchmark.md, not here. */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>

#include "intake_waker.h"

Test(intake_waker, pokes_after_a_full_batch_when_the_queue_is_short)
{
	cr_assert_eq(intake_waker_due(1, 0, 2000), 1);
	cr_assert_eq(intake_waker_due(1, 3999, 2000), 1);
	cr_assert_eq(intake_waker_due(1, 4000, 2000), 0, "two batches queued: room enough");
	cr_assert_eq(intake_waker_due(0, 0, 2000), 0, "a short batch: no backlog to read");
}

Test(intake_waker, stops_with_a_question_in_flight, .timeout = 20)
{
	char err[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	cr_assert_eq(rd_kafka_conf_set(conf, "bootstrap.servers", "127.0.0.1:1", err, sizeof err),
	             RD_KAFKA_CONF_OK);
	cr_assert_eq(rd_kafka_conf_set(conf, "group.id", "waker", err, sizeof err), RD_KAFKA_CONF_OK);
	cr_assert_eq(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err), RD_KAFKA_CONF_OK);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
	cr_assert_not_null(rk, "%s", err);
	intake_waker *w = intake_waker_new(rk);
	cr_assert_not_null(w);
	intake_waker_poke(w, "t", 0);
	intake_waker_poke(w, "t", 1); /* one in flight: not queued behind it */
	intake_waker_poke(w, NULL, 0);
	intake_waker_poke(NULL, "t", 0);
	intake_waker_free(w);
	intake_waker_free(NULL);
	rd_kafka_destroy(rk);
}
