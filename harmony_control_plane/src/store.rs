//! Durable state in SQLite: regions, bootstrap tokens and identities (hashes only).

use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::tokens;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A storage failure, naming the database file.
#[derive(Debug, thiserror::Error)]
#[error(
    "state database {path}: {source}; check the --db path is writable and not used by another control plane"
)]
pub struct StoreError {
    /// The database file.
    pub path: String,
    /// SQLite's error.
    #[source]
    pub source: rusqlite::Error,
}

/// A region as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRecord {
    /// Region name.
    pub name: String,
    /// Zone name.
    pub zone: String,
    /// Creation time (ms).
    pub created_at: i64,
    /// When it was decommissioned, if it was.
    pub decommissioned_at: Option<i64>,
    /// Whether an identity was ever issued and is not revoked.
    pub has_identity: bool,
}

/// Why a credential was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Unknown token.
    Unknown,
    /// Bootstrap token already exchanged.
    Used,
    /// Bootstrap token expired.
    Expired,
    /// Identity revoked or region decommissioned.
    Revoked,
}

/// What a presented credential proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A valid, unused bootstrap token for `region`/`zone` (row id).
    Bootstrap {
        /// Row id, for marking it used.
        id: i64,
        /// Its region.
        region: String,
        /// Its zone.
        zone: String,
    },
    /// A valid identity for `region`/`zone`.
    Identity {
        /// Its region.
        region: String,
        /// Its zone.
        zone: String,
    },
}

/// A bootstrap token row: id, hash, region, zone, expiry, used, revoked, region decommissioned.
type BootstrapRow = (
    i64,
    Vec<u8>,
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);
/// An identity row: hash, region, zone, revoked, region decommissioned.
type IdentityRow = (Vec<u8>, String, String, Option<i64>, Option<i64>);

/// The SQLite store; one connection behind a mutex (every statement is short).
pub struct Store {
    conn: Mutex<Connection>,
    path: String,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS regions (
    name TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    decommissioned_at INTEGER
);
CREATE TABLE IF NOT EXISTS bootstrap_tokens (
    id INTEGER PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER,
    revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS identities (
    id INTEGER PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX IF NOT EXISTS identities_by_region ON identities(region);
CREATE INDEX IF NOT EXISTS bootstrap_by_region ON bootstrap_tokens(region);
";

impl Store {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let err = |source| StoreError {
            path: shown.clone(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: shown,
        })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard).map_err(|source| StoreError {
            path: self.path.clone(),
            source,
        })
    }

    /// Creates `region`, or re-commissions a decommissioned one; `Ok(false)` if it is active.
    pub fn create_region(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let existing: Option<Option<i64>> = c
                .query_row(
                    "SELECT decommissioned_at FROM regions WHERE name = ?1",
                    [region],
                    |r| r.get(0),
                )
                .optional()?;
            match existing {
                Some(None) => Ok(false),
                Some(Some(_)) => {
                    c.execute(
                        "UPDATE regions SET zone = ?2, decommissioned_at = NULL, created_at = ?3 WHERE name = ?1",
                        params![region, zone, now_ms()],
                    )?;
                    Ok(true)
                }
                None => {
                    c.execute(
                        "INSERT INTO regions (name, zone, created_at) VALUES (?1, ?2, ?3)",
                        params![region, zone, now_ms()],
                    )?;
                    Ok(true)
                }
            }
        })
    }

    /// Stores a new bootstrap token hash for `region`, revoking its unused predecessors.
    pub fn add_bootstrap(
        &self,
        region: &str,
        hash: &[u8; 32],
        expires_at: i64,
    ) -> Result<i64, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "UPDATE bootstrap_tokens SET revoked_at = ?2 WHERE region = ?1 AND used_at IS NULL AND revoked_at IS NULL",
                params![region, now_ms()],
            )?;
            tx.execute(
                "INSERT INTO bootstrap_tokens (region, hash, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![region, &hash[..], now_ms(), expires_at],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(id)
        })
    }

    /// Checks a presented token (bootstrap or identity) without consuming it.
    pub fn check(&self, token: &str) -> Result<Result<Credential, Refusal>, StoreError> {
        let presented = tokens::hash(token);
        let is_bootstrap = token.starts_with(harmony_agent_protocol::BOOTSTRAP_PREFIX);
        self.with(|c| {
            if is_bootstrap {
                let row: Option<BootstrapRow> = c
                    .query_row(
                        "SELECT t.id, t.hash, t.region, r.zone, t.expires_at, t.used_at, t.revoked_at, r.decommissioned_at
                         FROM bootstrap_tokens t JOIN regions r ON r.name = t.region WHERE t.hash = ?1",
                        [&presented[..]],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
                    )
                    .optional()?;
                Ok(match row {
                    Some((_, stored, ..)) if !tokens::same(&stored, &presented) => Err(Refusal::Unknown),
                    None => Err(Refusal::Unknown),
                    Some((_, _, _, _, _, _, _, Some(_))) => Err(Refusal::Revoked),
                    Some((_, _, _, _, _, Some(_), _, _)) => Err(Refusal::Used),
                    Some((_, _, _, _, _, _, Some(_), _)) => Err(Refusal::Unknown),
                    Some((_, _, _, _, exp, ..)) if exp <= now_ms() => Err(Refusal::Expired),
                    Some((id, _, region, zone, ..)) => Ok(Credential::Bootstrap { id, region, zone }),
                })
            } else {
                let row: Option<IdentityRow> = c
                    .query_row(
                        "SELECT i.hash, i.region, r.zone, i.revoked_at, r.decommissioned_at
                         FROM identities i JOIN regions r ON r.name = i.region WHERE i.hash = ?1",
                        [&presented[..]],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                    )
                    .optional()?;
                Ok(match row {
                    Some((stored, ..)) if !tokens::same(&stored, &presented) => Err(Refusal::Unknown),
                    None => Err(Refusal::Unknown),
                    Some((_, _, _, Some(_), _)) | Some((_, _, _, _, Some(_))) => Err(Refusal::Revoked),
                    Some((_, region, zone, None, None)) => Ok(Credential::Identity { region, zone }),
                })
            }
        })
    }

    /// Consumes bootstrap token `id` and stores the identity hash, atomically. `Ok(false)` when
    /// the token was used concurrently.
    pub fn exchange(
        &self,
        bootstrap_id: i64,
        region: &str,
        identity_hash: &[u8; 32],
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let n = tx.execute(
                "UPDATE bootstrap_tokens SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL AND revoked_at IS NULL",
                params![bootstrap_id, now_ms()],
            )?;
            if n != 1 {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO identities (region, hash, created_at) VALUES (?1, ?2, ?3)",
                params![region, &identity_hash[..], now_ms()],
            )?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// Revokes every identity and bootstrap token of `region` and marks it decommissioned.
    /// `Ok(false)` when the region does not exist.
    pub fn decommission(&self, region: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let now = now_ms();
            let n = tx.execute(
                "UPDATE regions SET decommissioned_at = ?2 WHERE name = ?1 AND decommissioned_at IS NULL",
                params![region, now],
            )?;
            tx.execute(
                "UPDATE identities SET revoked_at = ?2 WHERE region = ?1 AND revoked_at IS NULL",
                params![region, now],
            )?;
            tx.execute(
                "UPDATE bootstrap_tokens SET revoked_at = ?2 WHERE region = ?1 AND revoked_at IS NULL",
                params![region, now],
            )?;
            tx.commit()?;
            Ok(n == 1)
        })
    }

    /// Every region, by name.
    pub fn regions(&self) -> Result<Vec<RegionRecord>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT r.name, r.zone, r.created_at, r.decommissioned_at,
                        EXISTS(SELECT 1 FROM identities i WHERE i.region = r.name AND i.revoked_at IS NULL)
                 FROM regions r ORDER BY r.name",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(RegionRecord {
                    name: r.get(0)?,
                    zone: r.get(1)?,
                    created_at: r.get(2)?,
                    decommissioned_at: r.get(3)?,
                    has_identity: r.get(4)?,
                })
            })?;
            rows.collect()
        })
    }

    /// One region.
    pub fn region(&self, name: &str) -> Result<Option<RegionRecord>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT r.name, r.zone, r.created_at, r.decommissioned_at,
                        EXISTS(SELECT 1 FROM identities i WHERE i.region = r.name AND i.revoked_at IS NULL)
                 FROM regions r WHERE r.name = ?1",
                [name],
                |r| {
                    Ok(RegionRecord {
                        name: r.get(0)?,
                        zone: r.get(1)?,
                        created_at: r.get(2)?,
                        decommissioned_at: r.get(3)?,
                        has_identity: r.get(4)?,
                    })
                },
            )
            .optional()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_is_single_use_expires_and_revocation_decommissions() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cp.sqlite")).unwrap();
        assert!(store.create_region("eu", "paris").unwrap());
        assert!(!store.create_region("eu", "paris").unwrap());
        let token = tokens::mint("hbt_").unwrap();
        store
            .add_bootstrap("eu", &tokens::hash(token.expose()), now_ms() + 60_000)
            .unwrap();
        let Ok(Credential::Bootstrap { id, region, .. }) = store.check(token.expose()).unwrap()
        else {
            panic!("valid bootstrap token refused")
        };
        assert_eq!(region, "eu");
        let identity = tokens::mint("hid_").unwrap();
        assert!(
            store
                .exchange(id, "eu", &tokens::hash(identity.expose()))
                .unwrap()
        );
        assert!(
            !store
                .exchange(id, "eu", &tokens::hash(identity.expose()))
                .unwrap()
        );
        assert_eq!(store.check(token.expose()).unwrap(), Err(Refusal::Used));
        assert!(matches!(
            store.check(identity.expose()).unwrap(),
            Ok(Credential::Identity { .. })
        ));
        assert_eq!(store.check("hid_nope").unwrap(), Err(Refusal::Unknown));

        let old = tokens::mint("hbt_").unwrap();
        store
            .add_bootstrap("eu", &tokens::hash(old.expose()), now_ms() - 1)
            .unwrap();
        assert_eq!(store.check(old.expose()).unwrap(), Err(Refusal::Expired));

        assert!(store.decommission("eu").unwrap());
        assert_eq!(
            store.check(identity.expose()).unwrap(),
            Err(Refusal::Revoked)
        );
        let r = store.region("eu").unwrap().unwrap();
        assert!(r.decommissioned_at.is_some() && !r.has_identity);
    }
}
