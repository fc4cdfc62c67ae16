//! The SQLite adapter: the embedded default for one replica. One connection behind a mutex
//! (every statement is short), used from tokio's blocking pool so the runtime never waits on
//! the disk; WAL journal. Events go straight to an in-process broadcast channel.

mod identity;
mod requests;
mod schema;
mod services;
mod sessions;
mod status;
mod tenancy;

use async_trait::async_trait;
use harmony_agent_protocol::InstanceState;
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

use super::{
    Credential, Event, Exchange, Heartbeat, NewRequest, Outcome, Refusal, RegionRecord,
    RequestRecord, RequestState, ServiceRecord, SessionRecord, Store, StoreError, Submitted,
    ZoneRecord,
};

const BACKEND: &str = "sqlite";
/// Events buffered per subscriber before it lags (and gets [`Event::Resync`]).
const EVENT_BUFFER: usize = 4096;

/// A value that is not what the schema promises (a corrupt or foreign row).
fn conversion(column: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        column,
        rusqlite::types::Type::Text,
        Box::new(std::io::Error::other(what)),
    )
}

/// The 32 bytes (a hash, a salt) in `column` of `r`; `what` names them when they are not 32.
fn bytes32(r: &rusqlite::Row<'_>, column: usize, what: &str) -> rusqlite::Result<[u8; 32]> {
    let bytes: Vec<u8> = r.get(column)?;
    bytes
        .try_into()
        .map_err(|_| conversion(column, format!("{what} is not 32 bytes")))
}

/// The SQLite store.
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    events: broadcast::Sender<Event>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date;
    /// a database of the previous release is upgraded in place.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display();
        let mut conn = Connection::open(path)
            .map_err(|e| StoreError::new(BACKEND, "open the database", format!("{shown}: {e}")))?;
        schema::migrate(&mut conn).map_err(|e| {
            StoreError::new(
                BACKEND,
                "create or upgrade the schema",
                format!("{shown}: {e}"),
            )
        })?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            events: broadcast::channel(EVENT_BUFFER).0,
        })
    }

    /// Runs `f` on the connection in the blocking pool.
    async fn run<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            // A panic in another call cannot leave a half-done transaction behind (rusqlite rolls
            // back on drop), so the connection stays usable.
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|e| StoreError::new(BACKEND, op, e))?
        .map_err(|e| failure(op, e))
    }
}

/// A statement's failure: busy (another process held the file's lock past the busy timeout)
/// when retrying later may succeed, so the HTTP edge answers 503 with `Retry-After`.
fn failure(op: &'static str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ffi::ErrorCode::{DatabaseBusy, DatabaseLocked};
    match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => StoreError::busy(BACKEND, op, e),
        _ => StoreError::new(BACKEND, op, e),
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn create_region(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        let (region, zone) = (region.to_owned(), zone.to_owned());
        self.run("create a region", move |c| {
            identity::create_region(c, &region, &zone)
        })
        .await
    }

    async fn region(&self, name: &str) -> Result<Option<RegionRecord>, StoreError> {
        let name = name.to_owned();
        self.run("read a region", move |c| identity::region(c, &name))
            .await
    }

    async fn regions(&self) -> Result<Vec<RegionRecord>, StoreError> {
        self.run("list regions", |c| identity::regions(c)).await
    }

    async fn decommission(&self, region: &str) -> Result<bool, StoreError> {
        let region = region.to_owned();
        self.run("decommission a region", move |c| {
            identity::decommission(c, &region)
        })
        .await
    }

    async fn add_zone(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        let (region, zone) = (region.to_owned(), zone.to_owned());
        self.run("add a zone", move |c| identity::add_zone(c, &region, &zone))
            .await
    }

    async fn zones(&self) -> Result<Vec<ZoneRecord>, StoreError> {
        self.run("list zones", |c| identity::zones(c)).await
    }

    async fn region_zones(&self, region: &str) -> Result<Vec<ZoneRecord>, StoreError> {
        let region = region.to_owned();
        self.run("list a region's zones", move |c| {
            identity::region_zones(c, &region)
        })
        .await
    }

    async fn decommission_zone(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        let (region, zone) = (region.to_owned(), zone.to_owned());
        self.run("decommission a zone", move |c| {
            identity::decommission_zone(c, &region, &zone)
        })
        .await
    }

    async fn add_bootstrap(
        &self,
        region: &str,
        zone: &str,
        hash: &[u8; 32],
        salt: &[u8; 32],
        expires_at: i64,
    ) -> Result<i64, StoreError> {
        let (region, zone, hash, salt) = (region.to_owned(), zone.to_owned(), *hash, *salt);
        self.run("store a bootstrap token", move |c| {
            identity::add_bootstrap(c, &region, &zone, &hash, &salt, expires_at)
        })
        .await
    }

    async fn check(
        &self,
        token_hash: &[u8; 32],
        now: i64,
    ) -> Result<Result<Credential, Refusal>, StoreError> {
        let hash = *token_hash;
        self.run("check a credential", move |c| {
            identity::check(c, &hash, now)
        })
        .await
    }

    async fn exchange(
        &self,
        bootstrap_id: i64,
        region: &str,
        identity_hash: &[u8; 32],
        expires_at: i64,
    ) -> Result<Exchange, StoreError> {
        let (region, hash) = (region.to_owned(), *identity_hash);
        self.run("exchange a bootstrap token", move |c| {
            identity::exchange(c, bootstrap_id, &region, &hash, expires_at)
        })
        .await
    }

    async fn mark_identity_used(
        &self,
        identity_hash: &[u8; 32],
        now: i64,
    ) -> Result<(), StoreError> {
        let hash = *identity_hash;
        self.run("record an identity's first use", move |c| {
            identity::mark_identity_used(c, &hash, now)
        })
        .await
    }

    async fn rotate_identity(
        &self,
        region: &str,
        old: &[u8; 32],
        new: &[u8; 32],
        now: i64,
        new_expires_at: i64,
        old_valid_until: i64,
    ) -> Result<bool, StoreError> {
        let (region, old, new) = (region.to_owned(), *old, *new);
        self.run("rotate an identity", move |c| {
            identity::rotate_identity(c, &region, &old, &new, now, new_expires_at, old_valid_until)
        })
        .await
    }

    async fn session_open(&self, s: &SessionRecord) -> Result<bool, StoreError> {
        let s = s.clone();
        self.run("record an agent session", move |c| sessions::open(c, &s))
            .await
    }

    async fn session_heartbeats(&self, beats: &[Heartbeat]) -> Result<u64, StoreError> {
        if beats.is_empty() {
            return Ok(0);
        }
        let beats = beats.to_vec();
        self.run("record heartbeats", move |c| {
            sessions::heartbeats(c, &beats)
        })
        .await
    }

    async fn session_services(
        &self,
        region: &str,
        conn: &str,
        services_json: &str,
    ) -> Result<bool, StoreError> {
        let (region, conn, json) = (region.to_owned(), conn.to_owned(), services_json.to_owned());
        self.run("record advertised services", move |c| {
            sessions::services(c, &region, &conn, &json)
        })
        .await
    }

    async fn session_close(&self, region: &str, conn: &str, now: i64) -> Result<bool, StoreError> {
        let (region, conn) = (region.to_owned(), conn.to_owned());
        self.run("close an agent session", move |c| {
            sessions::close(c, &region, &conn, now)
        })
        .await
    }

    async fn sessions_close_replica(&self, replica: &str, now: i64) -> Result<u64, StoreError> {
        let replica = replica.to_owned();
        self.run("close a replica's sessions", move |c| {
            sessions::close_replica(c, &replica, now)
        })
        .await
    }

    async fn session(&self, region: &str, zone: &str) -> Result<Option<SessionRecord>, StoreError> {
        let (region, zone) = (region.to_owned(), zone.to_owned());
        self.run("read a session", move |c| sessions::one(c, &region, &zone))
            .await
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.run("list sessions", |c| sessions::all(c)).await
    }

    async fn region_sessions(&self, region: &str) -> Result<Vec<SessionRecord>, StoreError> {
        let region = region.to_owned();
        self.run("list a region's sessions", move |c| {
            sessions::of_region(c, &region)
        })
        .await
    }

    async fn submit_request(&self, r: &NewRequest) -> Result<Submitted, StoreError> {
        let r = r.clone();
        self.run("submit a request", move |c| requests::submit(c, &r))
            .await
    }

    async fn request(&self, id: &str) -> Result<Option<RequestRecord>, StoreError> {
        let id = id.to_owned();
        self.run("read a request", move |c| requests::one(c, &id))
            .await
    }

    async fn unanswered(&self, region: &str, zone: &str) -> Result<Vec<RequestRecord>, StoreError> {
        let (region, zone) = (region.to_owned(), zone.to_owned());
        self.run("list unanswered requests", move |c| {
            requests::unanswered(c, &region, &zone)
        })
        .await
    }

    async fn unanswered_counts(&self) -> Result<HashMap<(String, String), u64>, StoreError> {
        self.run("count unanswered requests", |c| {
            requests::unanswered_counts(c)
        })
        .await
    }

    async fn queued_zones(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.run("list zones with queued requests", |c| {
            requests::queued_zones(c)
        })
        .await
    }

    async fn mark_sent(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run("mark a request sent", move |c| {
            requests::mark_sent(c, &id, now)
        })
        .await
    }

    async fn complete_request(
        &self,
        id: &str,
        res_json: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (id, res) = (id.to_owned(), res_json.to_owned());
        self.run("store a request's result", move |c| {
            requests::finish(c, &id, RequestState::Done, &res, now)
        })
        .await
    }

    async fn cancel_request(&self, id: &str, res_json: &str, now: i64) -> Result<bool, StoreError> {
        let (id, res) = (id.to_owned(), res_json.to_owned());
        self.run("cancel a request", move |c| {
            requests::finish(c, &id, RequestState::Cancelled, &res, now)
        })
        .await
    }

    async fn prune_requests(&self, older_than: i64) -> Result<u64, StoreError> {
        self.run("prune finished requests", move |c| {
            requests::prune(c, older_than)
        })
        .await
    }

    async fn insert_service(&self, rec: &ServiceRecord) -> Result<bool, StoreError> {
        let rec = rec.clone();
        self.run("store a service instance", move |c| {
            services::insert(c, &rec)
        })
        .await
    }

    async fn service(&self, id: &str) -> Result<Option<ServiceRecord>, StoreError> {
        let id = id.to_owned();
        self.run("read a service instance", move |c| services::one(c, &id))
            .await
    }

    async fn services(&self) -> Result<Vec<ServiceRecord>, StoreError> {
        self.run("list service instances", |c| services::all(c))
            .await
    }

    async fn services_in_state(
        &self,
        state: InstanceState,
    ) -> Result<Vec<ServiceRecord>, StoreError> {
        self.run("list service instances by state", move |c| {
            services::in_state(c, state)
        })
        .await
    }

    async fn live_services_by_region(&self) -> Result<HashMap<String, usize>, StoreError> {
        self.run("count live service instances", |c| {
            services::live_by_region(c)
        })
        .await
    }

    async fn claim_queued(
        &self,
        id: &str,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError> {
        let (id, detail) = (id.to_owned(), detail.to_owned());
        self.run("claim a queued service instance", move |c| {
            services::claim_queued(c, &id, &detail)
        })
        .await
    }

    async fn cancel_queued(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run("cancel a queued service instance", move |c| {
            services::cancel_queued(c, &id)
        })
        .await
    }

    async fn next_attempt(
        &self,
        id: &str,
        from: (InstanceState, u32),
        to: InstanceState,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError> {
        let (id, detail) = (id.to_owned(), detail.to_owned());
        self.run("start a service instance attempt", move |c| {
            services::next_attempt(c, &id, from, to, &detail)
        })
        .await
    }

    async fn settle(
        &self,
        id: &str,
        from: (InstanceState, u32),
        outcome: &Outcome,
    ) -> Result<bool, StoreError> {
        let (id, outcome) = (id.to_owned(), outcome.clone());
        self.run("settle a service instance", move |c| {
            services::settle(c, &id, from, &outcome)
        })
        .await
    }

    async fn remove_service_if(
        &self,
        id: &str,
        from: (InstanceState, u32),
    ) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run("remove a service instance", move |c| {
            services::remove_if(c, &id, from)
        })
        .await
    }

    async fn remove_service(&self, id: &str, region: &str) -> Result<bool, StoreError> {
        let (id, region) = (id.to_owned(), region.to_owned());
        self.run("remove a service instance", move |c| {
            services::remove(c, &id, &region)
        })
        .await
    }

    async fn publish(&self, e: &Event) -> Result<(), StoreError> {
        // No subscriber is not an error: nobody is waiting.
        let _ = self.events.send(e.clone());
        Ok(())
    }

    fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod zone_upgrade_tests;
