/* marker.c: see marker.h. */
#include "marker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Sequences are written as JSON numbers while a double holds them
 * exactly, as strings beyond (a control partition past 8.5 billion
 * records): a reader takes either. */
#define EXACT_MAX 9007199254740991LL /* 2^53 - 1 */

void marker_dead_init(marker_dead *d, const store_marker *m)
{
	memset(d, 0, sizeof *d);
	d->unsure_from = -1;
	if (!m || m->version < 2)
		return;
	d->n = m->ndead < STORE_MARKER_DEAD_MAX ? m->ndead : STORE_MARKER_DEAD_MAX;
	memcpy(d->seq, m->dead, d->n * sizeof *d->seq);
	d->unsure_from = m->unsure_from;
	d->oob = m->oob;
}

/* Index of s in d, or -1. */
static long dead_find(const marker_dead *d, int64_t s)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->seq[i] == s)
			return (long)i;
	return -1;
}

void marker_dead_add(marker_dead *d, int64_t s)
{
	if (dead_find(d, s) >= 0)
		return;
	if (d->n < STORE_MARKER_DEAD_MAX)
		d->seq[d->n++] = s;
	else if (d->unsure_from < 0 || s < d->unsure_from)
		d->unsure_from = s; /* no room: unsure from there on */
}

void marker_dead_fail(marker_dead *d, const store_forward *f)
{
	int64_t s = f->fwd_seq, orig = STORE_OFFSET_SEQ(f->src_offset);
	if (s != orig) {
		/* a retry of a listed row fails again: still listed; else a row
		 * decided outside the control topic */
		if (dead_find(d, orig) < 0 && s > d->oob)
			d->oob = s;
		return;
	}
	marker_dead_add(d, s);
}

void marker_dead_sent(marker_dead *d, const store_forward *items, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		int64_t orig = STORE_OFFSET_SEQ(items[k].src_offset);
		if (orig == items[k].fwd_seq)
			continue;
		long i = dead_find(d, orig);
		if (i >= 0) /* a failed row sent at last */
			d->seq[i] = d->seq[--d->n];
		else if (items[k].fwd_seq > d->oob) /* decided outside the control topic */
			d->oob = items[k].fwd_seq;
	}
}

static cJSON *seq_value(int64_t s)
{
	if (s <= EXACT_MAX)
		return cJSON_CreateNumber((double)s);
	char text[32];
	snprintf(text, sizeof text, "%lld", (long long)s);
	return cJSON_CreateString(text);
}

char *marker_encode(const store_forward *last, const char *origin, int64_t epoch,
                    int32_t partition, const marker_dead *d, const char *txn_id)
{
	cJSON *j = cJSON_CreateObject(), *dead = cJSON_CreateArray();
	char *value = NULL;
	int ok = j && dead && cJSON_AddNumberToObject(j, "v", 2) &&
	         cJSON_AddItemToObject(j, "seq", seq_value(last->fwd_seq)) &&
	         cJSON_AddStringToObject(j, "origin", origin) &&
	         cJSON_AddStringToObject(j, "biz_id", last->biz_id) &&
	         cJSON_AddStringToObject(j, "message_key", last->message_key) &&
	         cJSON_AddNumberToObject(j, "epoch", (double)epoch) &&
	         cJSON_AddNumberToObject(j, "partition", partition) &&
	         (!txn_id || cJSON_AddStringToObject(j, "txn", txn_id));
	for (size_t i = 0; ok && i < d->n; i++)
		ok = cJSON_AddItemToArray(dead, seq_value(d->seq[i]));
	if (ok && cJSON_AddItemToObject(j, "dead", dead)) {
		dead = NULL;
		if ((d->unsure_from < 0 ||
		     cJSON_AddItemToObject(j, "unsure_from", seq_value(d->unsure_from))) &&
		    (d->oob <= 0 || cJSON_AddItemToObject(j, "oob", seq_value(d->oob))))
			value = cJSON_PrintUnformatted(j);
	}
	cJSON_Delete(dead);
	cJSON_Delete(j);
	return value;
}

/* A sequence: a positive JSON number held exactly, or such a number's
 * decimal digits as a string. Returns 0 and *out, or -1. */
static int seq_of(const cJSON *v, int64_t *out)
{
	if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= (double)EXACT_MAX &&
	    v->valuedouble == (double)(int64_t)v->valuedouble) {
		*out = (int64_t)v->valuedouble;
		return 0;
	}
	if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > 19)
		return -1;
	for (const char *p = v->valuestring; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	char *end;
	long long s = strtoll(v->valuestring, &end, 10);
	if (*end || s < 1)
		return -1;
	*out = s;
	return 0;
}

static int parse_dead(const cJSON *j, store_marker *m)
{
	const cJSON *dead = cJSON_GetObjectItemCaseSensitive(j, "dead");
	const cJSON *unsure = cJSON_GetObjectItemCaseSensitive(j, "unsure_from");
	const cJSON *oob = cJSON_GetObjectItemCaseSensitive(j, "oob");
	const cJSON *e;
	m->unsure_from = -1;
	if (oob && seq_of(oob, &m->oob) != 0)
		return -1;
	if (!cJSON_IsArray(dead) || cJSON_GetArraySize(dead) > STORE_MARKER_DEAD_MAX)
		return -1;
	cJSON_ArrayForEach(e, dead)
		if (seq_of(e, &m->dead[m->ndead++]) != 0)
			return -1;
	return unsure && seq_of(unsure, &m->unsure_from) != 0 ? -1 : 0;
}

int marker_parse(const char *payload, size_t len, store_marker *m)
{
	char text[4096];
	if (len >= sizeof text)
		return -1;
	memcpy(text, payload, len);
	text[len] = '\0';
	memset(m, 0, sizeof *m);
	cJSON *j = cJSON_Parse(text);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "v");
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(j, "seq");
	const cJSON *origin = cJSON_GetObjectItemCaseSensitive(j, "origin");
	const cJSON *biz = cJSON_GetObjectItemCaseSensitive(j, "biz_id");
	const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "message_key");
	int rc = -1;
	m->version = v ? (cJSON_IsNumber(v) && v->valuedouble == 2 ? 2 : 0) : 1;
	if (m->version > 0 && seq_of(seq, &m->seq) == 0 && cJSON_IsString(origin) &&
	    strlen(origin->valuestring) < sizeof m->origin && cJSON_IsString(biz) &&
	    strlen(biz->valuestring) < sizeof m->biz_id && cJSON_IsString(key) &&
	    strlen(key->valuestring) < sizeof m->message_key &&
	    (m->version == 1 || parse_dead(j, m) == 0)) {
		snprintf(m->origin, sizeof m->origin, "%s", origin->valuestring);
		snprintf(m->biz_id, sizeof m->biz_id, "%s", biz->valuestring);
		snprintf(m->message_key, sizeof m->message_key, "%s", key->valuestring);
		rc = 0;
	}
	if (rc != 0)
		memset(m, 0, sizeof *m);
	else if (m->version == 1)
		m->unsure_from = -1;
	cJSON_Delete(j);
	return rc;
}

int marker_txn_of(const char *payload, size_t len, char *out, size_t outsz)
{
	cJSON *j = cJSON_ParseWithLength(payload, len);
	const cJSON *v = j ? cJSON_GetObjectItemCaseSensitive(j, "txn") : NULL;
	int rc = -1;
	if (cJSON_IsString(v) && *v->valuestring && strlen(v->valuestring) < outsz) {
		snprintf(out, outsz, "%s", v->valuestring);
		rc = 0;
	}
	cJSON_Delete(j);
	return rc;
}
