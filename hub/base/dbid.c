/* dbid.c: see dbid.h. */
#include "dbid.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dbid_known(const dbid *d) { return d && d->system_id[0] != '\0'; }

int dbid_equal(const dbid *a, const dbid *b)
{
	return dbid_known(a) && dbid_known(b) && strcmp(a->system_id, b->system_id) == 0 &&
	       strcmp(a->name, b->name) == 0;
}

const char *dbid_describe(const dbid *d, char *buf, size_t bufsz)
{
	if (!dbid_known(d))
		snprintf(buf, bufsz, "an unknown database");
	else
		snprintf(buf, bufsz, "database \"%s\" of the cluster with system identifier %s", d->name,
		         d->system_id);
	return buf;
}

const char *dbid_format(const dbid *d, char *buf, size_t bufsz)
{
	snprintf(buf, bufsz, "%s/%s", d->system_id, d->name);
	return buf;
}

int dbid_parse(const char *s, dbid *out)
{
	memset(out, 0, sizeof *out);
	size_t digits = strspn(s, "0123456789");
	const char *name = s + digits + 1;
	if (digits == 0 || digits >= sizeof out->system_id || s[digits] != '/' || !*name ||
	    strlen(name) >= sizeof out->name)
		return -1;
	memcpy(out->system_id, s, digits);
	memcpy(out->name, name, strlen(name));
	return 0;
}

char *dbid_metadata(const dbid *d)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "db_system_identifier", d->system_id) ||
	    !cJSON_AddStringToObject(o, "db_name", d->name)) {
		cJSON_Delete(o);
		return NULL;
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* The string member key of o, or NULL. */
static const char *member(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

dbid_verdict dbid_judge(const dbid *self, const dbid *adopt, const void *md, size_t len,
                        dbid *other)
{
	memset(other, 0, sizeof *other);
	if (!md || len == 0)
		return DBID_ABSENT;
	cJSON *o = cJSON_ParseWithLength(md, len);
	const char *id = member(o, "db_system_identifier"), *name = member(o, "db_name");
	char text[128];
	int named = id && name && snprintf(text, sizeof text, "%s/%s", id, name) < (int)sizeof text &&
	            dbid_parse(text, other) == 0;
	cJSON_Delete(o);
	if (!named) {
		memset(other, 0, sizeof *other);
		return DBID_ABSENT;
	}
	if (dbid_equal(self, other))
		return DBID_SAME;
	return dbid_equal(adopt, other) ? DBID_ADOPTED : DBID_OTHER;
}
