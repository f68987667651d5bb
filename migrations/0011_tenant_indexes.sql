-- 0011: indexes for reading one tenant's rows (the console's Tenants page
-- and its sessions scoped to a tenant, `txhub list --tenant`, `status
-- --tenant`): each read walks its tenant's entries instead of the table.
--
-- Partial (WHERE tenant IS NOT NULL): rows of no tenant (every row of a
-- hub without tenants, and everything stored before 0.5.0) get no entry,
-- so a hub without tenants pays nothing on its writes, and the build on an
-- existing database writes nothing for its old rows.
--
-- Cost of this migration on a live database: none for the hubs. The
-- indexes are built CONCURRENTLY, outside the migration's transaction
-- (`txhub migrate` runs the part after "txhub: concurrently" first, one
-- statement at a time): each build reads its table while the hubs go on
-- writing to it, and waits for the transactions that were writing when it
-- began. A build that failed or was interrupted leaves an invalid index,
-- which the next `txhub migrate` drops and builds again; one made by hand
-- beforehand with the same name is kept (IF NOT EXISTS). Measured on 1
-- million messages and 200,000 rejected records (2 cores, PostgreSQL with
-- fsync off), built in a transaction: every row with a tenant, 0.67 s for
-- each messages index and 0.1 s for each rejected one; no row with a tenant
-- (a database from before tenants), under 0.1 s per index. A concurrent
-- build reads its table twice and waits for the writers of the moment, so
-- it takes longer; nobody waits for it (docs/tenants.md: Sharing one hub between
-- teams).
--
-- Cost on the hot path, for rows with a tenant: one more index entry for
-- each new row version of a message (messages_tenant_created) and one for
-- the version that records a delivery (messages_tenant_sent), one per
-- rejected record (two indexes), one per conflict.

-- txhub: concurrently
-- Messages a tenant stored, by time: its rate, and its rows newest first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_tenant_created ON txhub.messages (tenant, created_at)
    WHERE tenant IS NOT NULL;
-- Forwards a tenant's messages made, by the time of the delivery.
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_tenant_sent ON txhub.messages (tenant, updated_at)
    WHERE tenant IS NOT NULL AND send_status = 'sent';
-- A tenant's rejected records: newest first (id) and its rate (created_at).
CREATE INDEX CONCURRENTLY IF NOT EXISTS rejected_tenant ON txhub.rejected (tenant, id)
    WHERE tenant IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS rejected_tenant_created ON txhub.rejected (tenant, created_at)
    WHERE tenant IS NOT NULL;
-- A tenant's conflicts, newest first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS conflicts_tenant ON txhub.conflicts (tenant, id)
    WHERE tenant IS NOT NULL;
-- txhub: transaction
-- (nothing more)
