/* Unit tests for topics: what control_topic may say (one topic, a list, one
 * pattern), every refused form with the reason, matching, the progress
 * topic's default, and interned names and (topic, partition) keys. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "topics.h"

typedef struct {
	const char *text;
	int pattern;
	size_t n;            /* names, when !pattern */
	const char *names[4];
} good_case;

Test(topics, good_forms)
{
	static const good_case cases[] = {
		{"txhub.control", 0, 1, {"txhub.control"}},
		{"a,b,c", 0, 3, {"a", "b", "c"}},
		{" a , b\t,c ", 0, 3, {"a", "b", "c"}},
		{"team-a.control,team_b.control", 0, 2, {"team-a.control", "team_b.control"}},
		{"^txhub\\.control\\..*", 1, 0, {NULL}},
		{"  ^team-[a-z]+$", 1, 0, {NULL}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		topics_spec s;
		char err[512];
		cr_assert_eq(topics_parse(cases[i].text, &s, err, sizeof err), 0, "%s: %s",
		             cases[i].text, err);
		cr_assert_eq(s.pattern, cases[i].pattern, "%s", cases[i].text);
		cr_assert_eq(s.n, cases[i].n, "%s", cases[i].text);
		for (size_t k = 0; k < cases[i].n; k++)
			cr_assert_str_eq(s.names[k], cases[i].names[k], "%s item %zu", cases[i].text, k);
		cr_assert_eq(topics_single(&s), !cases[i].pattern && cases[i].n == 1);
		topics_free(&s);
	}
}

typedef struct {
	const char *text;
	const char *says; /* in the reason */
} bad_case;

Test(topics, bad_forms_refused_with_reason)
{
	static char long_name[300], long_pattern[TOPICS_PATTERN_MAX + 10];
	memset(long_name, 'a', 250);
	long_pattern[0] = '^';
	memset(long_pattern + 1, 'b', TOPICS_PATTERN_MAX + 5);
	static char too_many[65 * 8];
	size_t off = 0;
	for (int i = 0; i < TOPICS_LIST_MAX + 1; i++)
		off += (size_t)snprintf(too_many + off, sizeof too_many - off, "%st%d", i ? "," : "", i);
	const bad_case cases[] = {
		{"", "item 1 of the list is empty"},
		{"   ", "item 1 of the list is empty"},
		{"a,,b", "item 2 of the list is empty"},
		{"a,b,", "item 3 of the list is empty"},
		{",a", "item 1 of the list is empty"},
		{"a, ", "item 2 of the list is empty"},
		{"a,a", "\"a\" is named twice"},
		{"a, b ,b", "\"b\" is named twice"},
		{"bad topic", "not a valid topic name"},
		{"a,b/c", "\"b/c\" is not a valid topic name"},
		{"a,..", "\"..\" is not a valid topic name"},
		{long_name, "not a valid topic name"},
		{too_many, "more than 64 topics"},
		{"a,^b.*", "is a pattern: a pattern stands alone"},
		{"^a.*,b", "stands alone"},
		{"^a(b", "is not a valid regular expression"},
		{"^[z-a]", "is not a valid regular expression"},
		{long_pattern, "longer than 1024"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		topics_spec s;
		char err[512] = "";
		cr_assert_eq(topics_parse(cases[i].text, &s, err, sizeof err), -1, "%.60s accepted",
		             cases[i].text);
		cr_assert(strstr(err, cases[i].says), "%.60s: reason \"%s\" lacks \"%s\"",
		          cases[i].text, err, cases[i].says);
		topics_free(&s);
	}
}

Test(topics, sixty_four_is_enough)
{
	char text[64 * 8];
	size_t off = 0;
	for (int i = 0; i < TOPICS_LIST_MAX; i++)
		off += (size_t)snprintf(text + off, sizeof text - off, "%st%d", i ? "," : "", i);
	topics_spec s;
	char err[256];
	cr_assert_eq(topics_parse(text, &s, err, sizeof err), 0, "%s", err);
	cr_assert_eq(s.n, TOPICS_LIST_MAX);
	cr_assert(topics_match(&s, "t63"));
	topics_free(&s);
}

Test(topics, matching)
{
	static const struct {
		const char *spec, *topic;
		int match;
	} cases[] = {
		{"txhub.control", "txhub.control", 1},
		{"txhub.control", "txhub.control2", 0},
		{"txhub.control", "txhub", 0},
		{"a,b,c", "b", 1},
		{"a,b,c", "d", 0},
		{"a,b,c", "", 0},
		{"^txhub\\.control\\.", "txhub.control.team-a", 1},
		{"^txhub\\.control\\.", "txhub.controlx", 0},
		{"^txhub\\.control\\.", "other.txhub.control.a", 0},
		{"^team-(a|b)$", "team-a", 1},
		{"^team-(a|b)$", "team-ab", 0},
		{"^team-(a|b)$", "team-c", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		topics_spec s;
		char err[256];
		cr_assert_eq(topics_parse(cases[i].spec, &s, err, sizeof err), 0, "%s", err);
		cr_assert_eq(topics_match(&s, cases[i].topic), cases[i].match, "%s ~ %s",
		             cases[i].spec, cases[i].topic);
		cr_assert_eq(topics_match(&s, NULL), 0);
		topics_free(&s);
	}
}

Test(topics, progress_topic)
{
	static const struct {
		const char *spec, *configured, *want;
	} cases[] = {
		{"txhub.control", "", "txhub.control.progress"},
		{"orders.control", NULL, "orders.control.progress"},
		{"a,b", "", TOPICS_PROGRESS_DEFAULT},
		{"^team-.*", "", TOPICS_PROGRESS_DEFAULT},
		{"a,b", "my.progress", "my.progress"},
		{"txhub.control", "my.progress", "my.progress"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		topics_spec s;
		char err[256], out[300];
		cr_assert_eq(topics_parse(cases[i].spec, &s, err, sizeof err), 0, "%s", err);
		topics_progress_name(&s, cases[i].configured, out, sizeof out);
		cr_assert_str_eq(out, cases[i].want, "%s", cases[i].spec);
		topics_free(&s);
	}
}

Test(topics, interned_names_and_keys)
{
	int32_t a = topic_id("topics.test.a"), b = topic_id("topics.test.b");
	cr_assert_geq(a, 0);
	cr_assert_geq(b, 0);
	cr_assert_neq(a, b);
	cr_assert_eq(topic_id("topics.test.a"), a, "the same name, the same id");
	cr_assert_str_eq(topic_name(a), "topics.test.a");
	cr_assert_eq(topic_intern("topics.test.b"), topic_name(b), "one copy of each name");
	cr_assert_null(topic_name(-1));
	cr_assert_null(topic_name(TOPICS_IDS_MAX));

	static const int32_t parts[] = {0, 1, 7, 2147483647};
	for (size_t i = 0; i < 4; i++) {
		tp_key k = tp_make(b, parts[i]);
		cr_assert_eq(tp_tid(k), b);
		cr_assert_eq(tp_part(k), parts[i]);
		cr_assert_str_eq(tp_topic(k), "topics.test.b");
		cr_assert_eq(tp_of("topics.test.b", parts[i]), k);
	}
	/* one topic's keys sort by partition, and two topics never meet */
	cr_assert_lt(tp_make(a, 1), tp_make(a, 2));
	cr_assert_neq(tp_make(a, 3), tp_make(b, 3));
	cr_assert_str_eq(tp_topic(tp_make(TOPICS_IDS_MAX - 1, 0)), "?");
}

static void *intern_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++) {
		char name[64];
		snprintf(name, sizeof name, "topics.race.%d", i);
		int32_t id = topic_id(name);
		if (id < 0 || strcmp(topic_name(id), name) != 0)
			return (void *)1;
	}
	return NULL;
}

Test(topics, interning_from_threads_gives_one_id_per_name)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, intern_many, NULL), 0);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		cr_assert_null(r, "a thread saw a wrong name");
	}
	int32_t first = topic_id("topics.race.0");
	for (int i = 1; i < 200; i++) {
		char name[64];
		snprintf(name, sizeof name, "topics.race.%d", i);
		cr_assert_neq(topic_id(name), first);
	}
}
