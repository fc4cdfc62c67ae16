//! Durable state in SQLite: regions, bootstrap tokens and identities (hashes only), and the
//! service instances placed in regions.

use harmony_agent_protocol::InstanceState;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::services::ServiceRecord;
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

/// A new state for a service instance, written only if the record is still as last read.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The new state.
    pub state: InstanceState,
    /// The new detail.
    pub detail: String,
    /// The provider, when known (`None` keeps the stored one).
    pub provider: Option<String>,
    /// The outputs (`None` keeps the stored ones).
    pub outputs: Option<Map<String, Value>>,
}

const SERVICE_COLUMNS: &str = "id, service_type, region, state, detail, provider, outputs, spec, attempts, created_at, updated_at";

fn conversion(column: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        column,
        rusqlite::types::Type::Text,
        Box::new(std::io::Error::other(what)),
    )
}

fn service_row(r: &Row<'_>) -> rusqlite::Result<ServiceRecord> {
    let state: String = r.get(3)?;
    let outputs: String = r.get(6)?;
    let spec: String = r.get(7)?;
    Ok(ServiceRecord {
        id: r.get(0)?,
        service_type: r.get(1)?,
        region: r.get(2)?,
        state: InstanceState::parse(&state)
            .ok_or_else(|| conversion(3, format!("unknown instance state {state:?}")))?,
        detail: r.get(4)?,
        provider: r.get(5)?,
        outputs: serde_json::from_str(&outputs)
            .map_err(|e| conversion(6, format!("outputs: {e}")))?,
        spec: serde_json::from_str(&spec).map_err(|e| conversion(7, format!("spec: {e}")))?,
        attempts: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

fn read_service(c: &Connection, id: &str) -> rusqlite::Result<Option<ServiceRecord>> {
    c.query_row(
        &format!("SELECT {SERVICE_COLUMNS} FROM service_instances WHERE id = ?1"),
        [id],
        service_row,
    )
    .optional()
}

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
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS service_instances_by_state ON service_instances(state);
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

    /// Stores a new service instance; `Ok(false)` when its id is taken.
    pub fn insert_service(&self, rec: &ServiceRecord) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "INSERT OR IGNORE INTO service_instances
                 (id, service_type, region, state, detail, provider, outputs, spec, attempts, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    rec.id,
                    rec.service_type,
                    rec.region,
                    rec.state.as_str(),
                    rec.detail,
                    rec.provider,
                    Value::Object(rec.outputs.clone()).to_string(),
                    rec.spec.to_string(),
                    rec.attempts,
                    rec.created_at,
                    rec.updated_at,
                ],
            )?;
            Ok(n == 1)
        })
    }

    /// One service instance.
    pub fn service(&self, id: &str) -> Result<Option<ServiceRecord>, StoreError> {
        self.with(|c| read_service(c, id))
    }

    /// Every service instance, oldest first.
    pub fn services(&self) -> Result<Vec<ServiceRecord>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {SERVICE_COLUMNS} FROM service_instances ORDER BY created_at, id"
            ))?;
            let rows = stmt.query_map([], service_row)?;
            rows.collect()
        })
    }

    /// The service instances in `state`, oldest first.
    pub fn services_in_state(
        &self,
        state: InstanceState,
    ) -> Result<Vec<ServiceRecord>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {SERVICE_COLUMNS} FROM service_instances WHERE state = ?1 ORDER BY created_at, id"
            ))?;
            let rows = stmt.query_map([state.as_str()], service_row)?;
            rows.collect()
        })
    }

    /// Live instances (neither failed nor being deleted) per region, for placement.
    pub fn live_services_by_region(&self) -> Result<HashMap<String, usize>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT region, COUNT(*) FROM service_instances
                 WHERE state NOT IN ('failed', 'deleting') GROUP BY region",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))?;
            rows.collect()
        })
    }

    /// Moves a queued instance to `pending` and counts a new attempt, only if it is still
    /// queued: the dispatcher's half of the race with [`Self::cancel_queued`]. Returns the
    /// claimed record (with its new attempt number) or `None` when it was not queued any more.
    pub fn claim_queued(
        &self,
        id: &str,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let n = tx.execute(
                "UPDATE service_instances SET state = 'pending', attempts = attempts + 1,
                 detail = ?2, updated_at = ?3 WHERE id = ?1 AND state = 'queued'",
                params![id, detail, now_ms()],
            )?;
            let rec = if n == 1 { read_service(&tx, id)? } else { None };
            tx.commit()?;
            Ok(rec)
        })
    }

    /// Removes a queued instance, only if it is still queued: the cancel half of the race with
    /// [`Self::claim_queued`]. `Ok(false)` when it was claimed (or removed) first.
    pub fn cancel_queued(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "DELETE FROM service_instances WHERE id = ?1 AND state = 'queued'",
                [id],
            )?;
            Ok(n == 1)
        })
    }

    /// Starts a new attempt (create or delete) on an instance still in `from` at attempt
    /// `attempts`: moves it to `to` and counts the attempt. `None` when it changed meanwhile.
    pub fn next_attempt(
        &self,
        id: &str,
        from: (InstanceState, u32),
        to: InstanceState,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let n = tx.execute(
                "UPDATE service_instances SET state = ?4, attempts = attempts + 1, detail = ?5,
                 updated_at = ?6 WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                params![id, from.0.as_str(), from.1, to.as_str(), detail, now_ms()],
            )?;
            let rec = if n == 1 { read_service(&tx, id)? } else { None };
            tx.commit()?;
            Ok(rec)
        })
    }

    /// Writes `outcome` if the instance is still in `from` at attempt `attempts`, so a late
    /// answer never overwrites a newer decision (a cancel, a delete, a later attempt).
    pub fn settle(
        &self,
        id: &str,
        from: (InstanceState, u32),
        outcome: &Outcome,
    ) -> Result<bool, StoreError> {
        let outputs = outcome
            .outputs
            .as_ref()
            .map(|o| Value::Object(o.clone()).to_string());
        self.with(|c| {
            let n = c.execute(
                "UPDATE service_instances SET state = ?4, detail = ?5,
                 provider = COALESCE(?6, provider), outputs = COALESCE(?7, outputs), updated_at = ?8
                 WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                params![
                    id,
                    from.0.as_str(),
                    from.1,
                    outcome.state.as_str(),
                    outcome.detail,
                    outcome.provider,
                    outputs,
                    now_ms()
                ],
            )?;
            Ok(n == 1)
        })
    }

    /// Removes an instance still in `from` at attempt `attempts`.
    pub fn remove_service_if(
        &self,
        id: &str,
        from: (InstanceState, u32),
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "DELETE FROM service_instances WHERE id = ?1 AND state = ?2 AND attempts = ?3",
                params![id, from.0.as_str(), from.1],
            )?;
            Ok(n == 1)
        })
    }

    /// Removes instance `id` of `region` whatever its state (its provider reported it deleted).
    pub fn remove_service(&self, id: &str, region: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "DELETE FROM service_instances WHERE id = ?1 AND region = ?2",
                params![id, region],
            )?;
            Ok(n == 1)
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

    fn record(id: &str, state: InstanceState) -> ServiceRecord {
        ServiceRecord {
            id: id.into(),
            service_type: "queue".into(),
            region: "eu".into(),
            state,
            detail: "queued: provider unhealthy".into(),
            provider: None,
            outputs: Map::new(),
            spec: serde_json::json!({"size": 3}),
            created_at: 1,
            updated_at: 1,
            attempts: 0,
        }
    }

    #[test]
    fn cancel_and_claim_of_a_queued_create_exclude_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cp.sqlite")).unwrap();
        assert!(
            store
                .insert_service(&record("a", InstanceState::Queued))
                .unwrap()
        );
        assert!(
            !store
                .insert_service(&record("a", InstanceState::Queued))
                .unwrap()
        );
        assert!(
            store
                .insert_service(&record("b", InstanceState::Queued))
                .unwrap()
        );
        // Claimed first: the cancel loses and the record is pending at attempt 1.
        let claimed = store.claim_queued("a", "sent").unwrap().unwrap();
        assert_eq!(
            (claimed.state, claimed.attempts),
            (InstanceState::Pending, 1)
        );
        assert!(!store.cancel_queued("a").unwrap());
        assert!(store.claim_queued("a", "sent").unwrap().is_none());
        // Cancelled first: the claim loses, so the create is never sent.
        assert!(store.cancel_queued("b").unwrap());
        assert!(store.claim_queued("b", "sent").unwrap().is_none());
        assert!(store.service("b").unwrap().is_none());
        // A late answer to an old attempt does not overwrite a newer decision.
        let deleting = store
            .next_attempt(
                "a",
                (InstanceState::Pending, 1),
                InstanceState::Deleting,
                "deleting",
            )
            .unwrap()
            .unwrap();
        assert_eq!(deleting.attempts, 2);
        let ready = Outcome {
            state: InstanceState::Ready,
            detail: String::new(),
            provider: Some("q".into()),
            outputs: None,
        };
        assert!(
            !store
                .settle("a", (InstanceState::Pending, 1), &ready)
                .unwrap()
        );
        assert!(
            !store
                .remove_service_if("a", (InstanceState::Deleting, 1))
                .unwrap()
        );
        assert!(
            store
                .remove_service_if("a", (InstanceState::Deleting, 2))
                .unwrap()
        );
    }

    #[test]
    fn service_instances_survive_reopening_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp.sqlite");
        let mut ready = record("r", InstanceState::Pending);
        ready.attempts = 1;
        {
            let store = Store::open(&path).unwrap();
            store
                .insert_service(&record("q", InstanceState::Queued))
                .unwrap();
            store.insert_service(&ready).unwrap();
            let outcome = Outcome {
                state: InstanceState::Ready,
                detail: "up".into(),
                provider: Some("q1".into()),
                outputs: Some(
                    [("url".to_string(), serde_json::json!("queue://r"))]
                        .into_iter()
                        .collect(),
                ),
            };
            assert!(
                store
                    .settle("r", (InstanceState::Pending, 1), &outcome)
                    .unwrap()
            );
        }
        let store = Store::open(&path).unwrap();
        let all = store.services().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], record("q", InstanceState::Queued));
        let r = store.service("r").unwrap().unwrap();
        assert_eq!(r.state, InstanceState::Ready);
        assert_eq!(r.provider.as_deref(), Some("q1"));
        assert_eq!(r.outputs["url"], "queue://r");
        assert_eq!(r.spec, serde_json::json!({"size": 3}));
        assert_eq!(
            store
                .services_in_state(InstanceState::Queued)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(store.live_services_by_region().unwrap()["eu"], 2);
        assert!(store.remove_service("r", "eu").unwrap());
        assert!(store.service("r").unwrap().is_none());
    }
}
