/* test_migrate.c: the parts of a migration (migrate_split): the embedded
 * migrations split as their files say, and a concurrent part holding
 * anything but index builds is refused. */
#include <criterion/criterion.h>
#include <string.h>

#include "migrate.h"

static size_t concurrent_indexes(const char *name)
{
	for (const migration *m = migrations; m->name; m++) {
		if (strcmp(m->name, name) != 0)
			continue;
		migrate_parts mp;
		char err[256];
		cr_assert_eq(migrate_split(m->sql, &mp, err, sizeof err), 0, "%s: %s", name, err);
		size_t n = mp.n;
		for (size_t i = 0; i < n; i++)
			cr_assert(strstr(mp.index[i].sql, mp.index[i].name) != NULL);
		migrate_parts_free(&mp);
		return n;
	}
	cr_assert_fail("no migration %s", name);
	return 0;
}

Test(migrate, every_embedded_migration_splits)
{
	for (const migration *m = migrations; m->name; m++) {
		migrate_parts mp;
		char err[256];
		cr_assert_eq(migrate_split(m->sql, &mp, err, sizeof err), 0, "%s: %s", m->name, err);
		cr_assert_not_null(mp.transaction);
		migrate_parts_free(&mp);
	}
	/* the index builds on the big tables run concurrently */
	cr_assert_eq(concurrent_indexes("0011_tenant_indexes.sql"), 5);
	cr_assert_eq(concurrent_indexes("0012_delivery_marks.sql"), 4);
	cr_assert_eq(concurrent_indexes("0014_trace_dead_letter.sql"), 2);
	cr_assert_eq(concurrent_indexes("0010_tenants.sql"), 0);
}

Test(migrate, the_parts_of_a_file)
{
	const char *sql = "-- header\n"
	                  "-- txhub: concurrently\n"
	                  "-- why\n"
	                  "CREATE INDEX CONCURRENTLY IF NOT EXISTS a_b ON txhub.t (x);\n"
	                  "CREATE INDEX CONCURRENTLY IF NOT EXISTS c1\n"
	                  "    ON txhub.t (y) WHERE y IS NOT NULL;\n"
	                  "-- txhub: transaction\n"
	                  "ALTER TABLE txhub.t ADD COLUMN z int;\n";
	migrate_parts mp;
	char err[256];
	cr_assert_eq(migrate_split(sql, &mp, err, sizeof err), 0, "%s", err);
	cr_assert_eq(mp.n, 2);
	cr_assert_str_eq(mp.index[0].name, "a_b");
	cr_assert_str_eq(mp.index[0].sql, "CREATE INDEX CONCURRENTLY IF NOT EXISTS a_b ON txhub.t (x)");
	cr_assert_str_eq(mp.index[1].name, "c1");
	cr_assert_str_eq(mp.transaction, "ALTER TABLE txhub.t ADD COLUMN z int;\n");
	migrate_parts_free(&mp);

	cr_assert_eq(migrate_split("SELECT 1;\n", &mp, err, sizeof err), 0);
	cr_assert_eq(mp.n, 0);
	cr_assert_str_eq(mp.transaction, "SELECT 1;\n");
	migrate_parts_free(&mp);
}

Test(migrate, a_bad_concurrent_part_is_refused)
{
	static const char *bad[] = {
		/* not an index build */
		"-- txhub: concurrently\nALTER TABLE txhub.t ADD COLUMN z int;\n-- txhub: transaction\n",
		/* without IF NOT EXISTS: a second run would fail */
		"-- txhub: concurrently\nCREATE INDEX CONCURRENTLY a ON txhub.t (x);\n"
		"-- txhub: transaction\n",
		/* no end */
		"-- txhub: concurrently\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a ON txhub.t (x)\n"
		"-- txhub: transaction\n",
		/* no transaction mark, or before */
		"-- txhub: concurrently\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a ON txhub.t (x);\n",
		"-- txhub: transaction\nSELECT 1;\n-- txhub: concurrently\n",
		/* a name to quote */
		"-- txhub: concurrently\nCREATE INDEX CONCURRENTLY IF NOT EXISTS \"A\" ON txhub.t (x);\n"
		"-- txhub: transaction\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		migrate_parts mp;
		char err[256] = "";
		cr_assert_eq(migrate_split(bad[i], &mp, err, sizeof err), -1, "%zu accepted", i);
		cr_assert_neq(err[0], '\0');
	}
}
