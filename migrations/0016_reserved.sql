-- 0016: placeholder for the migration of i23-order, so that this branch's 0017 has no
-- gap (tools/embed_sql.py). Delete this file when merging that branch: its
-- own 0016 file then takes the number (a duplicate version fails the build, so
-- the merge cannot forget it). It does nothing.
SELECT 1;
