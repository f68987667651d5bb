/* test_reference.c: `txhub reference KIND`, the tables of docs/ as
 * markdown (docs/contributing.md: Generated reference tables). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "config.h"
#include "metrics.h"
#include "reference.h"

static int last_rc; /* reference_write's, in write_reference */

static void write_reference(FILE *out, const char *what) { last_rc = reference_write(out, what); }

static void write_exit_line(FILE *out, const char *unused)
{
	(void)unused;
	reference_write_exit_line(out);
}

/* What write(arg) prints. */
static char *text_of(void (*write)(FILE *out, const char *arg), const char *arg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	write(f, arg);
	fclose(f);
	return text;
}

/* What reference_write(what) prints, and its result in *rc. */
static char *reference(const char *what, int *rc)
{
	char *text = text_of(write_reference, what);
	*rc = last_rc;
	return text;
}

/* The rows of a markdown table: its lines but the head and the rule. */
static int rows(const char *text)
{
	int n = 0;
	for (const char *p = text; (p = strchr(p, '\n')); p++)
		n++;
	return n - 2;
}

Test(reference, config_has_a_row_per_key_with_its_columns)
{
	int rc, n = 0;
	char *t = reference("config", &rc);
	cr_assert_eq(rc, 0);
	cr_assert(strncmp(t, "| key | type | default | environment | SIGHUP | meaning |\n", 57) == 0,
	          "%s", t);
	for (const config_option *o = config_options; o->key; o++, n++) {
		char row[600], type[256];
		config_type_text(o, type, sizeof type);
		snprintf(row, sizeof row, "\n| `%s` | %s | ", o->key, type);
		cr_assert(strstr(t, row), "no row %s", row);
	}
	cr_assert_eq(rows(t), n);
	/* the columns of one row: the environment variable, live, the markdown */
	cr_assert(strstr(t, "| `log.level` | debug, info, warn or error | `info` | "
	                    "`TXHUB_LOG_LEVEL` | applies | "), "%s", t);
	cr_assert(strstr(t, "| `brokers` | text | `localhost:9092` | `TXHUB_BROKERS` | restart | "
	                    "Kafka bootstrap servers |\n"));
	cr_assert(strstr(t, "| `pg.adopt_from` | text | empty |  | applies | the database"));
	cr_assert(strstr(t, "[Several control topics](kafka.md#several-control-topics)"),
	          "control_topic's .md, not its doc");
	free(t);
}

Test(reference, metrics_alerts_and_exits_have_a_row_each)
{
	int rc, n = 0;
	char *t = reference("metrics", &rc);
	cr_assert_eq(rc, 0);
	for (const metrics_metric *m = metrics_table; m->name; m++)
		n++;
	cr_assert_eq(rows(t), n);
	cr_assert(strstr(t, "\n| `txhub_consumer_lag{topic,partition}` | gauge | records of"), "%s", t);
	cr_assert(strstr(t, "\n| `txhub_ready` | gauge | "));
	free(t);
	t = reference("alerts", &rc);
	cr_assert_eq(rc, 0);
	cr_assert_eq(rows(t), ALERT_NKINDS);
	cr_assert(strstr(t, "\n| `lane_stuck` | "), "%s", t);
	free(t);
	t = reference("exits", &rc);
	cr_assert_eq(rc, 0);
	cr_assert_eq(rows(t), 3);
	cr_assert(strstr(t, "\n| 2 | bad usage or configuration: "), "%s", t);
	free(t);
}

Test(reference, unknown_kind_prints_nothing)
{
	int rc;
	char *t = reference("keys", &rc);
	cr_assert_eq(rc, -1);
	cr_assert_str_eq(t, "");
	free(t);
}

/* txhub help's last line, which txhub(1) makes its EXIT STATUS section */
Test(reference, exit_line_of_help)
{
	char *text = text_of(write_exit_line, NULL);
	cr_assert_str_eq(text, "exit status: 0 done, 1 run-time failure, 2 bad usage or configuration\n");
	free(text);
}

/* a '|' in a description would end its cell: escaped */
Test(reference, cells_escape_bars)
{
	for (const config_option *o = config_options; o->key; o++)
		cr_assert_null(strchr(o->md ? o->md : o->doc, '\n'), "%s", o->key);
	int rc;
	char *t = reference("config", &rc);
	for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
		int cells = 0;
		for (char *p = line; *p; p++)
			if (*p == '|' && (p == line || p[-1] != '\\'))
				cells++;
		cr_assert_eq(cells, 7, "%s", line);
	}
	free(t);
}
