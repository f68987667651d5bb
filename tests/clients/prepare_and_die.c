/* prepare_and_die BROKERS CONTROL_TOPIC MESSAGE_KEY CHECKBACK_URL FORWARD_TOPIC
 *
 * A producer that crashes between prepare and commit, for test_producer.c:
 * prepares one message (biz_id "shop", the key as payload, first check-back
 * after 500 ms), then kills itself with SIGKILL. A program of its own
 * (spawned, not forked from the test) because the test process has threads
 * by then, and a child forked from it may find a lock of the allocator held
 * for ever (it did under AddressSanitizer). Exit status 1: could not
 * prepare. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <txhub/producer.h>

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: prepare_and_die BROKERS TOPIC KEY URL FORWARD_TOPIC\n");
		return 2;
	}
	txhub_producer_config cfg = {.brokers = argv[1], .control_topic = argv[2]};
	txhub_producer *p;
	txhub_message m = {.biz_id = "shop", .message_key = argv[3],
	                   .payload_kind = TXHUB_PAYLOAD_STRING, .payload = argv[3],
	                   .payload_len = strlen(argv[3]), .forward_topic = argv[5],
	                   .checkback_url = argv[4], .has_first_after_ms = 1, .first_after_ms = 500};
	char err[512] = "";
	if (txhub_producer_new(&cfg, &p, err, sizeof err) != TXHUB_OK ||
	    txhub_producer_prepare(p, &m, err, sizeof err) != TXHUB_OK) {
		fprintf(stderr, "prepare_and_die: %s\n", err);
		return 1;
	}
	raise(SIGKILL); /* the local transaction's outcome is in the test's "decide" */
	return 1;
}
