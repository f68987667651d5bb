-- 0009: PLACEHOLDER on branch i21-tenants only, so that 0010 builds (tools/embed_sql.py
-- wants versions without gaps). Migration 0009 belongs to another branch of issue 21
-- (topics); delete this file when merging it: the build fails on the duplicate version
-- until then, on purpose.
SELECT 1;
