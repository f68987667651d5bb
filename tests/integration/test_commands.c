/* test_commands.c: the command line (docs/running.md: Commands): migrate from several
 * replicas at once, exit status 2 with a message naming the bad key or
 * argument, and run refusing an unmigrated database. */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "migrate.h"

/* Run the binary with exactly these arguments; stderr into err. */
static int txhub_raw(const char *const *args, char *err, size_t errsz)
{
	const char *bin = getenv("TXHUB_BIN");
	cr_assert_not_null(bin);
	char path[] = "/tmp/txhub-cmd-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	const char *argv[32];
	int n = 0;
	argv[n++] = bin;
	for (; *args; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(fd, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	ssize_t got = pread(fd, err, errsz - 1, 0);
	err[got > 0 ? got : 0] = '\0';
	close(fd);
	unlink(path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(commands, migrate_from_several_replicas_at_once_applies_each_once, .timeout = 120)
{
	h_env e;
	h_setup(&e, "mig"); /* migrated once already */
	PQclear(PQexec(e.db, "DROP SCHEMA txhub CASCADE"));
	pid_t pids[4];
	for (int i = 0; i < 4; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			char err[2048];
			const char *args[] = {"migrate", NULL};
			_exit(h_txhub(&e, args, err, sizeof err));
		}
	}
	for (int i = 0; i < 4; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "migrate %d failed", i);
	}
	/* every migration exactly once: versions 1..n, no repeats */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.schema_migrations"), migrate_latest());
	cr_assert_eq(h_count(&e, "SELECT count(DISTINCT version) FROM txhub.schema_migrations"),
	             migrate_latest());
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 0);
	h_teardown(&e);
}

Test(commands, run_refuses_an_unmigrated_database, .timeout = 60)
{
	h_env e;
	h_setup(&e, "nomig");
	PQclear(PQexec(e.db, "DROP SCHEMA txhub CASCADE"));
	char err[4096];
	const char *args[] = {"run", NULL};
	cr_assert_eq(h_txhub(&e, args, err, sizeof err), 1);
	cr_assert(strstr(err, "txhub migrate") != NULL, "message: %s", err);
	h_teardown(&e);
}

typedef struct {
	const char *args[8];
	const char *mention;
} usage_case;

Test(commands, bad_usage_and_configuration_exit_2_naming_the_culprit)
{
	char conf[] = "/tmp/txhub-conf-XXXXXX";
	int fd = mkstemp(conf);
	cr_assert(fd >= 0);
	dprintf(fd, "# comment\nbrokers = localhost:1\nthis line is wrong\n");
	close(fd);
	usage_case cases[] = {
		{{"run", "-X", "no.such.key=1", NULL}, "no.such.key"},
		{{"run", "-X", "checkback.max_attempts=abc", NULL}, "checkback.max_attempts"},
		{{"run", "-X", "checkback.max_attempts=0", NULL}, "checkback.max_attempts"},
		{{"run", "-X", "envelope.max_bytes=99999999999", NULL}, "envelope.max_bytes"},
		{{"run", "-X", "log.level=loud", NULL}, "log.level"},
		{{"run", "-X", "alert.webhook=ftp://x", NULL}, "alert.webhook"},
		{{"run", "-X", "control_topic=bad topic", NULL}, "control_topic"},
		{{"run", "-X", "forward.backoff_max_ms=1", NULL}, "forward.backoff_max_ms"},
		{{"run", "-X", "forward.order=keys", NULL}, "forward.order"},
		{{"skip", "b", "k", "-X", "forward.order=none", "--reason", "r", NULL}, "forward.order"},
		{{"run", "-X", "novalue", NULL}, "novalue"},
		{{"run", "-X", NULL}, "-X"},
		{{"run", "-c", conf, NULL}, ":3:"},
		{{"run", "-c", "/nonexistent/txhub.conf", NULL}, "/nonexistent/txhub.conf"},
		{{"run", "extra", NULL}, "extra"},
		{{"frobnicate", NULL}, "frobnicate"},
		{{NULL}, "usage"},
		{{"devbroker", "--brokers", "0", NULL}, "--brokers"},
		{{"devbroker", "--topic", "a b", NULL}, "--topic"},
		{{"devbroker", "--bogus", NULL}, "--bogus"},
		{{"run", "-X", "kafka.bad key=1", NULL}, "kafka.bad key"},
		{{"run", "-X", "kafka.auto.offset.reset=earliest", NULL}, "kafka.auto.offset.reset"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char err[4096];
		int rc = txhub_raw(cases[i].args, err, sizeof err);
		cr_expect_eq(rc, 2, "case %zu (%s): exit %d, stderr: %s", i,
		             cases[i].args[0] ? cases[i].args[0] : "", rc, err);
		cr_expect(strstr(err, cases[i].mention) != NULL, "case %zu: \"%s\" not in: %s", i,
		          cases[i].mention, err);
	}
	unlink(conf);
}

Test(commands, kafka_property_unknown_to_librdkafka_exits_2)
{
	char err[4096];
	const char *args[] = {"run", "-X", "kafka.no.such.property=1", NULL};
	cr_assert_eq(txhub_raw(args, err, sizeof err), 2, "stderr: %s", err);
	cr_assert(strstr(err, "kafka.no.such.property") != NULL, "stderr: %s", err);
	const char *args2[] = {"run", "-X", "kafka.acks=sometimes", NULL};
	cr_assert_eq(txhub_raw(args2, err, sizeof err), 2, "stderr: %s", err);
	cr_assert(strstr(err, "kafka.acks") != NULL, "stderr: %s", err);
}

/* A kafka.* limit too small for envelope.max_bytes would let the hub
 * accept and commit envelopes it can never forward (or never read): it is
 * a configuration error, naming both keys. */
Test(commands, kafka_limits_below_envelope_max_bytes_exit_2_naming_both_keys)
{
	char err[4096];
	const char *a1[] = {"run", "-X", "kafka.message.max.bytes=1000000", NULL};
	cr_assert_eq(txhub_raw(a1, err, sizeof err), 2, "stderr: %s", err);
	cr_assert(strstr(err, "kafka.message.max.bytes") && strstr(err, "envelope.max_bytes (1048576)") &&
	          strstr(err, "1049600"), "stderr: %s", err);
	const char *a2[] = {"run", "-X", "envelope.max_bytes=2000000", "-X",
	                    "kafka.message.max.bytes=2000000", NULL};
	cr_assert_eq(txhub_raw(a2, err, sizeof err), 2, "stderr: %s", err);
	cr_assert(strstr(err, "kafka.message.max.bytes") && strstr(err, "envelope.max_bytes"),
	          "stderr: %s", err);
	const char *a3[] = {"run", "-X", "kafka.receive.message.max.bytes=1000000", NULL};
	cr_assert_eq(txhub_raw(a3, err, sizeof err), 2, "stderr: %s", err);
	cr_assert(strstr(err, "kafka.receive.message.max.bytes") && strstr(err, "envelope.max_bytes"),
	          "stderr: %s", err);
}

Test(commands, version_help_and_config_exit_0)
{
	char err[4096];
	const char *v[] = {"version", NULL};
	const char *h[] = {"help", NULL};
	const char *c[] = {"config", NULL};
	cr_assert_eq(txhub_raw(v, err, sizeof err), 0);
	char out[256];
	FILE *p = popen("\"$TXHUB_BIN\" version", "r");
	cr_assert_not_null(p);
	cr_assert_not_null(fgets(out, sizeof out, p));
	pclose(p);
	char want[128];
	snprintf(want, sizeof want, "(librdkafka %s)\n", rd_kafka_version_str());
	cr_assert(strstr(out, want), "txhub version: %s", out);
	cr_assert_eq(txhub_raw(h, err, sizeof err), 0);
	cr_assert_eq(txhub_raw(c, err, sizeof err), 0);
	/* txhub reference KIND: the tables of docs/; no KIND or another is bad usage */
	const char *kinds[] = {"config", "metrics", "alerts", "exits"};
	for (size_t i = 0; i < 4; i++) {
		const char *r[] = {"reference", kinds[i], NULL};
		cr_assert_eq(txhub_raw(r, err, sizeof err), 0, "reference %s: %s", kinds[i], err);
	}
	const char *r0[] = {"reference", NULL}, *r1[] = {"reference", "keys", NULL},
	           *r2[] = {"reference", "config", "metrics", NULL};
	cr_assert_eq(txhub_raw(r0, err, sizeof err), 2);
	cr_assert(strstr(err, "expected one of config, metrics, alerts or exits"), "stderr: %s", err);
	cr_assert_eq(txhub_raw(r1, err, sizeof err), 2);
	cr_assert_eq(txhub_raw(r2, err, sizeof err), 2);
}

/* SIGHUP, SIGUSR1 and SIGUSR2 used to kill the hub (their default action);
 * now each is logged, the hub goes on working, and SIGTERM still stops it
 * cleanly. */
Test(commands, hup_and_usr_signals_do_not_stop_the_hub, .timeout = 120)
{
	h_env e;
	h_setup(&e, "sig");
	char fwd[128], buf[512], log[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	h_control_topic(&e);
	pid_t hub = h_hub_start(&e, NULL);
	h_hub_log(log, sizeof log, &e);
	h_pause_ms(300); /* in the middle of the start-up */
	kill(hub, SIGHUP);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions", "4", 60000),
	          "the hub did not get going");
	kill(hub, SIGUSR1);
	kill(hub, SIGUSR2);
	kill(hub, SIGHUP);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"k\","
	                          "\"payload\":1,\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, -1, "k", buf);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages", "sent", 30000),
	          "the hub stopped working after the signals");
	cr_assert_eq(waitpid(hub, NULL, WNOHANG), 0, "the hub died");
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_geq(h_log_lines(log, "SIGHUP"), 1);
	cr_assert_eq(h_log_lines(log, "SIGUSR1 ignored"), 1);
	cr_assert_eq(h_log_lines(log, "SIGUSR2 ignored"), 1);
	h_teardown(&e);
}
