/* install_program.c: one transaction end to end, built by install_test.sh
 * with nothing but `pkg-config --cflags --libs txhub` against an installed
 * libtxhub (what docs/producers.md: Producing from C promises). Environment:
 * TXHUB_BROKERS, CONTROL_TOPIC, FORWARD_TOPIC, MESSAGE_KEY. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <txhub.h>

int main(void)
{
	const char *key = getenv("MESSAGE_KEY");
	txhub_producer_config cfg = {.brokers = getenv("TXHUB_BROKERS"),
	                             .control_topic = getenv("CONTROL_TOPIC")};
	txhub_message m = {.biz_id = "installed", .message_key = key,
	                   .payload_kind = TXHUB_PAYLOAD_STRING, .payload = "from C",
	                   .payload_len = 6, .forward_topic = getenv("FORWARD_TOPIC")};
	txhub_producer *p;
	char err[512];
	txhub_status st = txhub_producer_new(&cfg, &p, err, sizeof err);
	if (st == TXHUB_OK && (st = txhub_producer_prepare(p, &m, err, sizeof err)) == TXHUB_OK)
		st = txhub_producer_commit(p, "installed", key, err, sizeof err);
	if (st != TXHUB_OK) {
		fprintf(stderr, "install_program: %s: %s\n", txhub_status_name(st), err);
		return 1;
	}
	txhub_producer_destroy(p, 5000);
	printf("libtxhub %s: prepared and committed %s\n", txhub_version(), key);
	return 0;
}
