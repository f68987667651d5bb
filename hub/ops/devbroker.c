/* devbroker.c: see devbroker.h. The mock cluster lives inside an
 * rd_kafka_t handle and serves real Kafka protocol on loopback sockets, so
 * any client (txhub, kcat, the tests) can talk to it. */
#include "devbroker.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envelope.h"
#include "log.h"
#include "signals.h"


static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* --commands: standard input's lines, taken as they come. */
typedef struct {
	char buf[1024];
	size_t len;
	int eof;
} command_input;

/* Do one command line: "deny TOPIC" (the topic answers
 * TOPIC_AUTHORIZATION_FAILED) or "allow TOPIC" (it answers again). */
static void command(rd_kafka_mock_cluster_t *mc, char *line)
{
	char *topic = strchr(line, ' ');
	if (topic)
		*topic++ = '\0';
	int deny = strcmp(line, "deny") == 0, allow = strcmp(line, "allow") == 0;
	if ((!deny && !allow) || !topic || !txhubi_topic_valid(topic, strlen(topic))) {
		char shown[256];
		log_warn("devbroker: unknown command \"%s\" (deny TOPIC, allow TOPIC)",
		         log_escape(line, strlen(line), shown, sizeof shown));
		return;
	}
	rd_kafka_mock_topic_set_error(mc, topic, deny ? RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED
	                                              : RD_KAFKA_RESP_ERR_NO_ERROR);
	log_info("devbroker: %s %s", deny ? "denying" : "allowing", topic);
}

/* Wait up to 100 ms for standard input and do the whole lines read. */
static void serve_commands(rd_kafka_mock_cluster_t *mc, command_input *in)
{
	struct pollfd p = {.fd = 0, .events = POLLIN};
	if (in->eof || poll(&p, 1, 100) <= 0)
		return;
	ssize_t n = read(0, in->buf + in->len, sizeof in->buf - 1 - in->len);
	if (n <= 0) {
		in->eof = 1;
		return;
	}
	in->len += (size_t)n;
	in->buf[in->len] = '\0';
	char *line = in->buf, *nl;
	while ((nl = strchr(line, '\n'))) {
		*nl = '\0';
		if (nl > line && nl[-1] == '\r')
			nl[-1] = '\0';
		command(mc, line);
		line = nl + 1;
	}
	in->len -= (size_t)(line - in->buf);
	memmove(in->buf, line, in->len);
	if (in->len == sizeof in->buf - 1)
		in->len = 0; /* a line too long: dropped */
}

int devbroker_main(const txhub_config *cfg, int argc, char **argv)
{
	int brokers = 1, commands = 0;
	const char *topics[64];
	int parts[64], ntopics = 0;
	const char *denied[64];
	int ndenied = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--brokers") == 0 && i + 1 < argc) {
			if (parse_int(argv[++i], 1, 16, &brokers) != 0) {
				fprintf(stderr, "txhub devbroker: --brokers: \"%s\" is not a number from 1 to 16\n",
				        argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--topic") == 0 && i + 1 < argc) {
			if (ntopics == 64) {
				fprintf(stderr, "txhub devbroker: at most 64 --topic options\n");
				return 2;
			}
			char *spec = argv[++i];
			char *colon = strrchr(spec, ':');
			parts[ntopics] = 1;
			if (colon) {
				*colon = '\0';
				if (parse_int(colon + 1, 1, 1000, &parts[ntopics]) != 0) {
					fprintf(stderr, "txhub devbroker: --topic %s: partitions \"%s\" is not a "
					                "number from 1 to 1000\n", spec, colon + 1);
					return 2;
				}
			}
			if (!txhubi_topic_valid(spec, strlen(spec))) {
				fprintf(stderr, "txhub devbroker: --topic: \"%s\" is not a valid topic name\n",
				        spec);
				return 2;
			}
			topics[ntopics++] = spec;
		} else if (strcmp(argv[i], "--deny-topic") == 0 && i + 1 < argc) {
			/* for tests: the topic answers TOPIC_AUTHORIZATION_FAILED, as
			 * a real broker does when an ACL denies it */
			if (ndenied == 64 || !txhubi_topic_valid(argv[i + 1], strlen(argv[i + 1]))) {
				fprintf(stderr, "txhub devbroker: --deny-topic: \"%s\" is not a valid topic name\n",
				        argv[i + 1]);
				return 2;
			}
			denied[ndenied++] = argv[++i];
		} else if (strcmp(argv[i], "--commands") == 0) {
			commands = 1;
		} else {
			fprintf(stderr, "txhub devbroker: unknown argument \"%s\"\n"
			                "usage: txhub devbroker [--brokers N] [--topic NAME[:PARTITIONS]]... "
			                "[--deny-topic NAME]... [--commands]\n",
			        argv[i]);
			return 2;
		}
	}
	(void)cfg;
	char err[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	/* the handle only hosts the cluster; keep it quiet */
	rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "txhub devbroker: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mc) {
		fprintf(stderr, "txhub devbroker: cannot create the mock cluster\n");
		rd_kafka_destroy(rk);
		return 1;
	}
	for (int i = 0; i < ntopics; i++) {
		rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, topics[i], parts[i], 1);
		if (e) {
			fprintf(stderr, "txhub devbroker: creating %s: %s\n", topics[i], rd_kafka_err2str(e));
			rd_kafka_mock_cluster_destroy(mc);
			rd_kafka_destroy(rk);
			return 1;
		}
	}
	for (int i = 0; i < ndenied; i++)
		rd_kafka_mock_topic_set_error(mc, denied[i], RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
	signals_install();
	printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
	fflush(stdout);
	log_info("devbroker: %d broker(s) at %s, %d topic(s) created; topics are also created "
	         "on first use", brokers, rd_kafka_mock_cluster_bootstraps(mc), ntopics);
	command_input in = {.len = 0, .eof = !commands};
	while (!signals_stop_requested()) {
		if (in.eof)
			usleep(100000);
		else
			serve_commands(mc, &in);
	}
	log_info("devbroker: stopping");
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return 0;
}
