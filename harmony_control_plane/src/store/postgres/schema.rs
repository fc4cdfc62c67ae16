//! The PostgreSQL schema, created (or checked) by every replica at start inside one transaction
//! that holds an advisory lock, so replicas starting together do not race on `CREATE`.

use deadpool_postgres::Client;

use crate::store::sql;

/// The schema version this code writes.
pub(super) const VERSION: i64 = 2;

/// Key of the transaction-scoped advisory lock serialising schema changes ("harmony\0").
const SCHEMA_LOCK: i64 = 0x6861_726d_6f6e_7900;

/// The tables, in PostgreSQL's column types, as version 1 created them (a new database too):
/// [`UPGRADE_TO_2`] then adds the zones (`ADD COLUMN IF NOT EXISTS`, `UPDATE ... FROM`:
/// SQLite's upgrade differs). The indexes, the same in both dialects, follow: [`sql::INDEXES`].
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS regions (
    name TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decommissioned_at BIGINT
);
CREATE TABLE IF NOT EXISTS zones (
    region TEXT NOT NULL REFERENCES regions(name),
    zone TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decommissioned_at BIGINT,
    PRIMARY KEY (region, zone)
);
CREATE TABLE IF NOT EXISTS bootstrap_tokens (
    id BIGSERIAL PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BYTEA NOT NULL UNIQUE,
    salt BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    revoked_at BIGINT
);
CREATE TABLE IF NOT EXISTS identities (
    id BIGSERIAL PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    expires_at BIGINT,
    first_used_at BIGINT,
    valid_until BIGINT,
    bootstrap_id BIGINT REFERENCES bootstrap_tokens(id)
);
CREATE TABLE IF NOT EXISTS service_instances (
    id TEXT PRIMARY KEY,
    service_type TEXT NOT NULL,
    region TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    provider TEXT,
    outputs TEXT NOT NULL DEFAULT '{}',
    spec TEXT NOT NULL DEFAULT '{}',
    attempts BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    region TEXT PRIMARY KEY,
    replica TEXT NOT NULL,
    conn TEXT NOT NULL,
    connected BOOLEAN NOT NULL,
    connected_at BIGINT NOT NULL,
    disconnected_at BIGINT,
    last_heartbeat_at BIGINT NOT NULL,
    hello_json TEXT NOT NULL,
    status_json TEXT,
    services_json TEXT,
    max_frame_bytes BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    seq BIGSERIAL NOT NULL,
    id TEXT PRIMARY KEY,
    region TEXT NOT NULL,
    op TEXT NOT NULL,
    params TEXT NOT NULL,
    body_hash BYTEA NOT NULL,
    state TEXT NOT NULL,
    res TEXT,
    created_at BIGINT NOT NULL,
    sent_at BIGINT,
    completed_at BIGINT,
    deliveries BIGINT NOT NULL DEFAULT 0
);
";

/// The upgrade to version 2 (zones): every statement idempotent. Run only when the stored
/// version is older or missing: on a current schema its backfills read every region and its
/// `ALTER TABLE`s lock their tables, which made each replica's start take seconds at 100,000
/// regions, one replica after the other under the advisory lock (docs/benchmarks.md).
const UPGRADE_TO_2: &str = "
ALTER TABLE bootstrap_tokens ADD COLUMN IF NOT EXISTS zone TEXT;
ALTER TABLE identities ADD COLUMN IF NOT EXISTS zone TEXT;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS zone TEXT;
ALTER TABLE service_instances ADD COLUMN IF NOT EXISTS zone TEXT;
ALTER TABLE service_instances ADD COLUMN IF NOT EXISTS parent TEXT;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS zone TEXT;
INSERT INTO zones (region, zone, created_at, decommissioned_at)
    SELECT name, zone, created_at, decommissioned_at FROM regions
    ON CONFLICT (region, zone) DO NOTHING;
UPDATE bootstrap_tokens t SET zone = r.zone FROM regions r
    WHERE t.zone IS NULL AND r.name = t.region;
UPDATE identities i SET zone = r.zone FROM regions r WHERE i.zone IS NULL AND r.name = i.region;
UPDATE requests q SET zone = r.zone FROM regions r WHERE q.zone IS NULL AND r.name = q.region;
UPDATE service_instances s SET zone = r.zone FROM regions r
    WHERE s.zone IS NULL AND r.name = s.region;
UPDATE sessions s SET zone = COALESCE((SELECT r.zone FROM regions r WHERE r.name = s.region), '')
    WHERE s.zone IS NULL;
ALTER TABLE sessions ALTER COLUMN zone SET NOT NULL;
";

/// Creates the schema when missing; refuses one written by a newer release.
pub(super) async fn migrate(client: &mut Client) -> Result<(), String> {
    let tx = client.transaction().await.map_err(|e| super::chain(&e))?;
    let db = |e: tokio_postgres::Error| super::chain(&e);
    // Pooled connections give up on a lock after the pool wait (see `connect`); a replica
    // waiting for another's schema change waits for as long as it takes.
    tx.batch_execute("SET LOCAL lock_timeout = 0")
        .await
        .map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(db)?;
    tx.batch_execute(TABLES).await.map_err(db)?;
    let stored: Option<i64> = tx
        .query_one(sql::SCHEMA_VERSION.postgres, &[])
        .await
        .map_err(db)?
        .get(0);
    if let Some(v) = stored
        && v > VERSION
    {
        return Err(format!(
            "the database has schema version {v}, newer than this control plane's {VERSION}; run the newer release on every replica"
        ));
    }
    if stored.is_none_or(|v| v < VERSION) {
        tx.batch_execute(UPGRADE_TO_2).await.map_err(db)?;
    }
    tx.batch_execute(super::status::TABLES).await.map_err(db)?;
    tx.batch_execute(sql::INDEXES).await.map_err(db)?;
    tx.batch_execute(super::tenancy::TABLES).await.map_err(db)?;
    // Version 1 keyed sessions by region alone: one row per (region, zone) from version 2 on.
    let keyed_by_zone: bool = tx
        .query_one(
            "SELECT COUNT(*) = 2 FROM information_schema.key_column_usage
             WHERE table_schema = current_schema() AND table_name = 'sessions'
               AND constraint_name = 'sessions_pkey'",
            &[],
        )
        .await
        .map_err(db)?
        .get(0);
    if !keyed_by_zone {
        tx.batch_execute(
            "ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_pkey;
             ALTER TABLE sessions ADD PRIMARY KEY (region, zone);",
        )
        .await
        .map_err(db)?;
    }
    if stored != Some(VERSION) {
        tx.execute(sql::CLEAR_SCHEMA_VERSION.postgres, &[])
            .await
            .map_err(db)?;
        tx.execute(sql::SET_SCHEMA_VERSION.postgres, &[&VERSION])
            .await
            .map_err(db)?;
    }
    tx.commit().await.map_err(db)
}
