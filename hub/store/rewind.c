/* rewind.c: see rewind.h. */
#include "rewind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"

static rewind_mark *find(const rewind_table *t, tp_key tp)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->marks[i].tp == tp)
			return &t->marks[i];
	return NULL;
}

int rewind_taken(rewind_table *t, tp_key tp, int64_t epoch, int64_t next_offset,
                 const char *origin)
{
	rewind_mark *m = find(t, tp);
	if (!m) {
		rewind_mark *g = array_grow(t->marks, &t->cap, t->n + 1, sizeof *g);
		if (!g)
			return -1;
		t->marks = g;
		m = &t->marks[t->n++];
	}
	m->tp = tp;
	m->epoch = epoch;
	m->next_offset = next_offset;
	snprintf(m->origin, sizeof m->origin, "%s", origin ? origin : "");
	return 0;
}

void rewind_advance(rewind_table *t, tp_key tp, int64_t next_offset)
{
	rewind_mark *m = find(t, tp);
	if (m && next_offset > m->next_offset)
		m->next_offset = next_offset;
}

void rewind_set_offset(rewind_table *t, tp_key tp, int64_t next_offset)
{
	rewind_mark *m = find(t, tp);
	if (m)
		m->next_offset = next_offset;
}

const rewind_mark *rewind_find(const rewind_table *t, tp_key tp)
{
	return find(t, tp);
}

void rewind_table_free(rewind_table *t)
{
	free(t->marks);
	memset(t, 0, sizeof *t);
}

rewind_verdict rewind_judge(const rewind_mark *k, int64_t epoch, const rewind_row *db)
{
	if (!k || k->epoch != epoch)
		return REWIND_SAME; /* not taken by this store at that epoch: nothing to compare */
	if (!db->present)
		return REWIND_NO_ROW;
	if (db->epoch > epoch)
		return REWIND_FENCED;
	if (k->origin[0] && db->origin[0] && strcmp(k->origin, db->origin) != 0)
		return REWIND_OTHER_ORIGIN;
	if (db->epoch < epoch)
		return REWIND_OLDER_EPOCH;
	if (db->next_offset < k->next_offset)
		return REWIND_BEHIND;
	return REWIND_SAME;
}

const char *rewind_verdict_text(rewind_verdict v)
{
	switch (v) {
	case REWIND_SAME:
		return "as written";
	case REWIND_FENCED:
		return "taken by another replica";
	case REWIND_BEHIND:
		return "its last batches are gone";
	case REWIND_OLDER_EPOCH:
		return "its row is back at an older epoch";
	case REWIND_NO_ROW:
		return "its row is gone";
	case REWIND_OTHER_ORIGIN:
		return "its row was made again (another fwd_origin)";
	}
	return "?";
}
