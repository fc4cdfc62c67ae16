//! The SQLite schema and its migrations. Version 2 (tenancy: `super::tenancy::TABLES` and the
//! tenant/project columns of requests and service instances) is this release's; a database file of
//! the previous release (regions, bootstrap_tokens, identities, service_instances, no
//! `schema_version`) is upgraded in place by adding the missing columns. Version 2 adds zones:
//! a `zones` table, and a zone on bootstrap tokens, identities, sessions (one row per region and
//! zone), requests and service instances; existing rows take their region's zone.

use rusqlite::{Connection, Transaction};

use crate::store::sql;

/// The schema version this code writes.
pub(super) const VERSION: i64 = 2;

const PRAGMAS: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA busy_timeout = 5000;
";

/// Tables in their current shape, in SQLite's column types; `IF NOT EXISTS` keeps older tables,
/// which [`upgrade`] fixes.
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS regions (
    name TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    decommissioned_at INTEGER
);
CREATE TABLE IF NOT EXISTS zones (
    region TEXT NOT NULL REFERENCES regions(name),
    zone TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    decommissioned_at INTEGER,
    PRIMARY KEY (region, zone)
);
CREATE TABLE IF NOT EXISTS bootstrap_tokens (
    id INTEGER PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER,
    revoked_at INTEGER,
    salt BLOB,
    zone TEXT
);
CREATE TABLE IF NOT EXISTS identities (
    id INTEGER PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    expires_at INTEGER,
    first_used_at INTEGER,
    valid_until INTEGER,
    bootstrap_id INTEGER,
    zone TEXT
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
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    zone TEXT,
    parent TEXT
);
CREATE TABLE IF NOT EXISTS sessions (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    replica TEXT NOT NULL,
    conn TEXT NOT NULL,
    connected INTEGER NOT NULL,
    connected_at INTEGER NOT NULL,
    disconnected_at INTEGER,
    last_heartbeat_at INTEGER NOT NULL,
    hello_json TEXT NOT NULL,
    status_json TEXT,
    services_json TEXT,
    max_frame_bytes INTEGER NOT NULL,
    PRIMARY KEY (region, zone)
);
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    region TEXT NOT NULL,
    op TEXT NOT NULL,
    params TEXT NOT NULL,
    body_hash BLOB NOT NULL,
    state TEXT NOT NULL,
    res TEXT,
    created_at INTEGER NOT NULL,
    sent_at INTEGER,
    completed_at INTEGER,
    deliveries INTEGER NOT NULL DEFAULT 0,
    zone TEXT
);
";

/// Columns this release added to tables of the previous one.
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("bootstrap_tokens", "salt", "BLOB"),
    ("identities", "expires_at", "INTEGER"),
    ("identities", "first_used_at", "INTEGER"),
    ("identities", "valid_until", "INTEGER"),
    ("identities", "bootstrap_id", "INTEGER"),
    ("requests", "tenant", "TEXT"),
    ("requests", "project", "TEXT"),
    ("requests", "project_json", "TEXT"),
    ("service_instances", "tenant", "TEXT"),
    ("service_instances", "project", "TEXT"),
    ("bootstrap_tokens", "zone", "TEXT"),
    ("identities", "zone", "TEXT"),
    ("requests", "zone", "TEXT"),
    ("service_instances", "zone", "TEXT"),
    ("service_instances", "parent", "TEXT"),
    ("requests", "error", "TEXT"),
];

/// Version 2: every region's first zone becomes a row of `zones`, and rows without a zone take
/// their region's.
const ZONES_UPGRADE: &str = "
INSERT OR IGNORE INTO zones (region, zone, created_at, decommissioned_at)
    SELECT name, zone, created_at, decommissioned_at FROM regions;
UPDATE bootstrap_tokens SET zone = (SELECT r.zone FROM regions r WHERE r.name = bootstrap_tokens.region)
    WHERE zone IS NULL;
UPDATE identities SET zone = (SELECT r.zone FROM regions r WHERE r.name = identities.region)
    WHERE zone IS NULL;
UPDATE requests SET zone = COALESCE((SELECT r.zone FROM regions r WHERE r.name = requests.region), '')
    WHERE zone IS NULL;
UPDATE service_instances
    SET zone = COALESCE((SELECT r.zone FROM regions r WHERE r.name = service_instances.region), '')
    WHERE zone IS NULL;
";

/// Version 1's session table was keyed by region alone: rebuilt keyed by (region, zone), its
/// rows taking their region's zone.
const SESSIONS_REKEY: &str = "
ALTER TABLE sessions RENAME TO sessions_v1;
CREATE TABLE sessions (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    replica TEXT NOT NULL,
    conn TEXT NOT NULL,
    connected INTEGER NOT NULL,
    connected_at INTEGER NOT NULL,
    disconnected_at INTEGER,
    last_heartbeat_at INTEGER NOT NULL,
    hello_json TEXT NOT NULL,
    status_json TEXT,
    services_json TEXT,
    max_frame_bytes INTEGER NOT NULL,
    PRIMARY KEY (region, zone)
);
INSERT INTO sessions (region, zone, replica, conn, connected, connected_at, disconnected_at,
        last_heartbeat_at, hello_json, status_json, services_json, max_frame_bytes)
    SELECT s.region, COALESCE(r.zone, ''), s.replica, s.conn, s.connected, s.connected_at,
        s.disconnected_at, s.last_heartbeat_at, s.hello_json, s.status_json, s.services_json,
        s.max_frame_bytes
    FROM sessions_v1 s LEFT JOIN regions r ON r.name = s.region;
DROP TABLE sessions_v1;
";

/// Brings the database to [`VERSION`]; safe to run on every start. Refuses a database written
/// by a newer release (its schema may mean things this code does not know).
pub(super) fn migrate(conn: &mut Connection) -> Result<(), String> {
    apply(conn).map_err(|e| match e {
        Step::Sql(e) => e.to_string(),
        Step::Newer(v) => format!(
            "the database has schema version {v}, newer than this control plane's {VERSION}; run the newer release or restore a backup"
        ),
    })
}

enum Step {
    Sql(rusqlite::Error),
    Newer(i64),
}

impl From<rusqlite::Error> for Step {
    fn from(e: rusqlite::Error) -> Self {
        Step::Sql(e)
    }
}

fn apply(conn: &mut Connection) -> Result<(), Step> {
    conn.execute_batch(PRAGMAS)?;
    let tx = conn.transaction()?;
    tx.execute_batch(TABLES)?;
    tx.execute_batch(super::tenancy::TABLES)?;
    tx.execute_batch(super::status::TABLES)?;
    let stored: Option<i64> = tx.query_row(sql::SCHEMA_VERSION.sqlite, [], |r| r.get(0))?;
    if let Some(v) = stored.filter(|v| *v > VERSION) {
        return Err(Step::Newer(v));
    }
    upgrade(&tx)?;
    // Indexes after `upgrade` added the columns they cover.
    tx.execute_batch(sql::INDEXES)?;
    tx.execute(sql::CLEAR_SCHEMA_VERSION.sqlite, [])?;
    tx.execute(sql::SET_SCHEMA_VERSION.sqlite, [VERSION])?;
    tx.commit()?;
    Ok(())
}

fn upgrade(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    for (table, column, ty) in ADDED_COLUMNS {
        if !has_column(tx, table, column)? {
            tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}"))?;
        }
    }
    // Tokens minted before salts existed get one now, so every unused token can be exchanged
    // for a re-derivable identity.
    tx.execute(
        "UPDATE bootstrap_tokens SET salt = randomblob(32) WHERE salt IS NULL",
        [],
    )?;
    if !has_column(tx, "sessions", "zone")? {
        tx.execute_batch(SESSIONS_REKEY)?;
    }
    tx.execute_batch(ZONES_UPGRADE)?;
    Ok(())
}

fn has_column(tx: &Transaction<'_>, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut stmt = tx.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt.query_map([], |r| r.get::<_, String>(1))?;
    for name in names {
        if name? == column {
            return Ok(true);
        }
    }
    Ok(false)
}
