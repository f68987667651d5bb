/* main.c: the command line (docs/running.md: Commands). Parses arguments, loads the
 * configuration, and hands over to the module that does the work. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "bench.h"
#include "config.h"
#include "console.h"
#include "devbroker.h"
#include "hub.h"
#include "signals.h"
#include "kafka.h"
#include "log.h"
#include "migrate.h"
#include "reference.h"
#include "store.h"
#include "tenant_cmd.h"
#include "txhub.h"

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: txhub COMMAND [-c FILE] [-X key=value]...\n"
	        "\n"
	        "commands:\n"
	        "  run        consume the control topic, persist, check back, forward\n"
	        "  migrate    apply pending database migrations (safe from several replicas)\n"
	        "  devbroker [--brokers N] [--topic NAME[:PARTITIONS]]... [--deny-topic NAME]...\n"
	        "            [--commands]\n"
	        "             an embedded Kafka cluster for development; prints its bootstrap\n"
	        "             servers on the first line of standard output; --deny-topic makes a\n"
	        "             topic refuse access, to test failed forwards; --commands reads\n"
	        "             \"deny TOPIC\" and \"allow TOPIC\" lines from standard input\n"
	        "  bench [--count N] [--rate TX_PER_S] [--start-hub [--preload]] ...\n"
	        "             load generator and verifier: commit-to-forward latency, lost,\n"
	        "             duplicated, the PostgreSQL and Kafka ceilings; one JSON line\n"
	        "             (txhub bench --help for every option)\n"
	        "  console    the web console on console.listen (default 127.0.0.1:8080): the\n"
	        "             admin commands in a browser, behind console.token\n"
	        "  config     print an example configuration file with every key and default\n"
	        "  reference KIND\n"
	        "             print one of the binary's tables as markdown, as docs/ has it\n"
	        "             (tools/regen_docs.py): KIND is config (the keys), metrics, alerts\n"
	        "             (the alert kinds) or exits (the exit statuses)\n"
	        "  version    print the version\n"
	        "  help       print this text\n"
	        "\n"
	        "admin commands (PostgreSQL only, except status's lag; safe while hubs run):\n");
	admin_write_help(out);
	fprintf(out, "\ntenants (teams sharing the hub; PostgreSQL only):\n");
	tenant_cmd_write_help(out);
	fprintf(out,
	        "\n"
	        "options:\n"
	        "  -c FILE       configuration file (default: $TXHUB_CONFIG, if set)\n"
	        "  -X key=value  set a configuration key; kafka.* keys go to librdkafka\n"
	        "\n"
	        "configuration keys (default, meaning):\n");
	config_write_help(out);
	fputc('\n', out);
	reference_write_exit_line(out);
}

/* Where the configuration comes from: the file, then the environment,
 * then the -X settings, as at start-up and again on SIGHUP. */
typedef struct {
	const char *file;
	char **sets;
	int nsets;
} config_source;

/* Fill cfg (initialised) from src and check it. Returns 0, or -1 with a
 * message naming the key in err. */
static int load_config(const config_source *src, txhub_config *cfg, char *err, size_t errsz)
{
	if (src->file && *src->file && config_load_file(cfg, src->file, err, errsz) != 0)
		return -1;
	if (config_load_env(cfg, err, errsz) != 0)
		return -1;
	for (int i = 0; i < src->nsets; i++) {
		const char *kv = src->sets[i], *eq = strchr(kv, '=');
		char key[256];
		if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key) {
			snprintf(err, errsz, "-X %s: expected key=value", kv);
			return -1;
		}
		memcpy(key, kv, (size_t)(eq - kv));
		key[eq - kv] = '\0';
		if (config_set(cfg, key, eq + 1, err, errsz) != 0)
			return -1;
	}
	if (config_validate(cfg, err, errsz) != 0)
		return -1;
	/* (before the probe: a librdkafka without the consumer protocol
	 * knows no kafka.group.protocol, and would say only that) */
	if (kafka_check_group_protocol(cfg, rd_kafka_version(), err, errsz) != 0)
		return -1;
	/* librdkafka knows its properties: ask it now, so a bad kafka.* key is
	 * a configuration error (exit 2), not a failure after start-up */
	rd_kafka_conf_t *probe = kafka_conf_new(cfg, NULL, err, errsz);
	if (!probe)
		return -1;
	/* ...and so is a kafka.* limit that disagrees with envelope.max_bytes:
	 * envelopes would be accepted and committed, then never forwarded */
	int limits = kafka_check_limits(cfg, probe, err, errsz);
	rd_kafka_conf_destroy(probe);
	return limits;
}

/* hub_run's reload: the configuration again, from the same sources. */
static int reload_config(void *ctx, txhub_config *cfg, char *err, size_t errsz)
{
	if (config_init(cfg) != 0) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	return load_config(ctx, cfg, err, errsz);
}

/* The -c and -X words again, for a hub `txhub bench` starts (static: it
 * lives as long as the process). */
static char **hub_args(const char *file, char **sets, int nsets)
{
	static char *words[2 * 100 + 3];
	int n = 0;
	if (file && *file) {
		words[n++] = "-c";
		words[n++] = (char *)file;
	}
	for (int i = 0; i < nsets && n < 2 * 100; i++) {
		words[n++] = "-X";
		words[n++] = sets[i];
	}
	words[n] = NULL;
	return words;
}

/* glibc gives each thread that allocates an arena of its own, up to 8 a
 * core: the hub's threads (librdkafka's, the lanes', the writer's) kept
 * about 10 MiB more at its peak for it. Two, unless MALLOC_ARENA_MAX says
 * otherwise. */
static void limit_arenas(void)
{
#ifdef M_ARENA_MAX
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 2);
#endif
}

/* What a command gets: the configuration (loaded unless CMD_NO_CONFIG),
 * its own arguments, and where the configuration came from. */
typedef struct {
	txhub_config *cfg;
	int argc;
	char **argv;
	const config_source *src;
	admin_args *admin;
	tenant_args *tenant;
} command_ctx;

enum {
	CMD_NO_CONFIG = 1, /* runs before (and without) the configuration */
	CMD_ARGS = 2,      /* takes arguments of its own */
	CMD_SIGNALS = 4,   /* long-running: the signal handlers before start-up */
};

static int cmd_help(command_ctx *c)
{
	(void)c;
	usage(stdout);
	return 0;
}

static int cmd_version(command_ctx *c)
{
	(void)c;
	/* the librdkafka it runs with, not the one it was built against */
	printf("txhub %s (librdkafka %s)\n", txhub_version(), rd_kafka_version_str());
	return 0;
}

static int cmd_config(command_ctx *c)
{
	(void)c;
	config_write_example(stdout);
	return 0;
}

static int cmd_reference(command_ctx *c)
{
	if (c->argc != 1 || reference_write(stdout, c->argv[0]) != 0) {
		fprintf(stderr, "txhub reference: expected one of %s\n", reference_names);
		return 2;
	}
	return 0;
}

static int cmd_run(command_ctx *c) { return hub_run(c->cfg, reload_config, (void *)c->src); }

static int cmd_console(command_ctx *c) { return console_main(c->cfg); }

static int cmd_devbroker(command_ctx *c) { return devbroker_main(c->cfg, c->argc, c->argv); }

static int cmd_bench(command_ctx *c)
{
	return bench_main(c->cfg, c->argc, c->argv,
	                  hub_args(c->src->file, c->src->sets, c->src->nsets));
}

static int cmd_migrate(command_ctx *c)
{
	char err[1024];
	int applied = 0, status = 0;
	store *st = store_connect(c->cfg, err, sizeof err);
	if (!st) {
		log_error("migrate: %s", err);
		status = 1;
	} else if (migrate_apply(st, c->cfg->control_topic, &applied, err, sizeof err) != 0) {
		log_error("migrate: %s", err);
		status = 1;
	} else {
		log_info("migrate: %d migration(s) applied; schema at version %d", applied,
		         migrate_latest());
	}
	store_close(st);
	return status;
}

static int cmd_tenant(command_ctx *c) { return tenant_cmd_run(c->cfg, c->tenant); }

static int cmd_admin(command_ctx *c) { return admin_run(c->cfg, c->admin); }

/* The top-level commands (the admin commands are admin.c's table, the
 * tenant subcommands tenant_cmd.c's; tests/docs/check_docs.py reads all
 * three). */
static const struct command {
	const char *name;
	int flags;
	int (*run)(command_ctx *c);
} commands[] = {
	{"help", CMD_NO_CONFIG, cmd_help},
	{"version", CMD_NO_CONFIG, cmd_version},
	{"config", CMD_NO_CONFIG, cmd_config},
	{"reference", CMD_NO_CONFIG | CMD_ARGS, cmd_reference},
	{"run", CMD_SIGNALS, cmd_run},
	{"migrate", 0, cmd_migrate},
	{"console", CMD_SIGNALS, cmd_console},
	{"devbroker", CMD_ARGS | CMD_SIGNALS, cmd_devbroker},
	{"bench", CMD_ARGS, cmd_bench},
	{"tenant", CMD_ARGS, cmd_tenant},
};

static const struct command admin_cmd = {"(admin)", CMD_ARGS, cmd_admin};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return admin_is_command(name) ? &admin_cmd : NULL;
}

int main(int argc, char **argv)
{
	txhub_config cfg;
	char err[1024];
	const char *file = getenv("TXHUB_CONFIG");
	const char *command = NULL;
	char **rest = calloc((size_t)argc + 1, sizeof *rest);
	char **sets = calloc((size_t)argc + 1, sizeof *sets);
	int nrest = 0, nsets = 0, status = 2, ended = 0;
	admin_args admin;
	tenant_args tenant;
	memset(&tenant, 0, sizeof tenant);
	limit_arenas();

	if (!rest || !sets || config_init(&cfg) != 0) {
		fprintf(stderr, "txhub: out of memory\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (ended) {
			rest[nrest++] = argv[i];
		} else if (strcmp(a, "--") == 0 && command) {
			/* the rest are the command's own: an id may start with '-' */
			ended = 1;
			rest[nrest++] = argv[i];
		} else if (strcmp(a, "-c") == 0 || strcmp(a, "-X") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "txhub: %s needs an argument\n", a);
				goto out;
			}
			if (a[1] == 'c')
				file = argv[++i];
			else
				sets[nsets++] = argv[++i];
		} else if (strncmp(a, "-X", 2) == 0 && a[2]) {
			sets[nsets++] = argv[i] + 2;
		} else if (!command && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			command = "help";
		} else if (!command) {
			command = a;
		} else {
			rest[nrest++] = argv[i];
		}
	}
	if (!command) {
		usage(stderr);
		goto out;
	}
	const struct command *cmd = find_command(command);
	if (!cmd) {
		fprintf(stderr, "txhub: unknown command \"%s\" (try txhub help)\n", command);
		goto out;
	}
	config_source src = {file, sets, nsets};
	command_ctx ctx = {&cfg, nrest, rest, &src, &admin, &tenant};
	if (cmd->flags & CMD_NO_CONFIG) {
		status = cmd->run(&ctx);
		goto out;
	}
	/* before the slow start-up (config, connections): no signal may find
	 * its default action, which for SIGHUP and SIGUSR1/2 is to die */
	if (cmd->flags & CMD_SIGNALS)
		signals_install();
	/* bad usage is refused before anything is loaded or touched */
	int is_admin = cmd == &admin_cmd, is_tenant = cmd->run == cmd_tenant;
	if (is_admin && admin_parse(command, nrest, rest, &admin, err, sizeof err) != 0) {
		fprintf(stderr, "txhub %s: %s\n", command, err);
		goto out;
	}
	if (is_tenant && tenant_cmd_parse(nrest, rest, &tenant, err, sizeof err) != 0) {
		fprintf(stderr, "txhub tenant%s%s: %s\n", tenant.word ? " " : "",
		        tenant.word ? tenant.word : "", err);
		goto out;
	}
	if ((is_admin && admin.help) || (is_tenant && tenant.help)) {
		usage(stdout);
		status = 0;
		goto out;
	}
	if (!(cmd->flags & CMD_ARGS) && nrest > 0) {
		fprintf(stderr, "txhub %s: unexpected argument \"%s\"\n", command, rest[0]);
		goto out;
	}
	if (load_config(&src, &cfg, err, sizeof err) != 0) {
		fprintf(stderr, "txhub: %s\n", err);
		goto out;
	}
	config_apply_logging(&cfg);
	status = cmd->run(&ctx);
out:
	tenant_cmd_free(&tenant);
	config_free(&cfg);
	free(rest);
	free(sets);
	return status;
}
