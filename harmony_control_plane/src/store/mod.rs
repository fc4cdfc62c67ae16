//! Durable control-plane state behind one [`Store`] trait, with two adapters:
//! [`sqlite::SqliteStore`] (embedded default: one replica, zero set-up) and
//! [`postgres::PostgresStore`] (N replicas on one PostgreSQL).
//!
//! Times are milliseconds since the Unix epoch. Timestamps that only record when something
//! happened (`created_at`, `revoked_at`, `updated_at`, `used_at`) come from the store's clock
//! ([`now_ms`]); every decision that compares times (expiry, overlap, pruning) takes `now` from
//! the caller, so callers and tests control it. Tokens are kept as SHA-256 hashes only.
//!
//! Events ([`Event`]) travel between replicas (PostgreSQL LISTEN/NOTIFY; SQLite: in-process).
//! They are wake-ups, not a log: a receiver that may have missed some gets [`Event::Resync`] and
//! re-reads the store, and consumers poll as a safety net.

pub mod postgres;
pub mod sqlite;

mod credentials;
pub mod quantity;
mod sql;
pub mod status;
pub mod tenancy;
mod types;

pub(crate) use credentials::{BootstrapFacts, IdentityFacts, classify, merge_heartbeats};

pub use status::{ProgressLine, RequestSummary, StatusStore, ZoneState};
pub use tenancy::{
    CapExceeded, CapSet, PageSession, ProjectCreated, ProjectRecord, QuotaSet, TenancyStore,
    TenantRecord, TenantTokenRecord,
};
pub use types::*;

use async_trait::async_trait;
use harmony_agent_protocol::InstanceState;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Which database to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// An SQLite file (created when missing): one replica only.
    Sqlite(PathBuf),
    /// A PostgreSQL database shared by every replica.
    Postgres {
        /// `postgres://user:password@host:port/dbname` (never logged: it may hold a password).
        /// Its `sslmode` decides TLS: `disable`, `prefer` (the default) or `require`
        /// (`verify-full`/`verify-ca` mean `require`); TLS always verifies the server.
        url: String,
        /// Connections in this replica's pool (the LISTEN connection is extra).
        pool_size: usize,
        /// How long a call waits for a free pooled connection before it fails as overloaded
        /// (`--database-pool-wait-ms`).
        pool_wait: std::time::Duration,
        /// PEM CA bundle that signs the server's certificate (`--database-ca-file`); the
        /// system's CAs when `None`.
        ca_file: Option<PathBuf>,
    },
}

/// Opens the configured store, creating or upgrading its schema.
pub async fn open(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match config {
        StoreConfig::Sqlite(path) => Arc::new(sqlite::SqliteStore::open(path)?),
        StoreConfig::Postgres {
            url,
            pool_size,
            pool_wait,
            ca_file,
        } => Arc::new(
            postgres::PostgresStore::connect(url, *pool_size, *pool_wait, ca_file.as_deref())
                .await?,
        ),
    })
}

/// All control-plane state. Every method is one atomic step: compare-and-set methods return
/// whether they won (`bool`, `Option`), so concurrent replicas never overwrite each other.
/// Tenants and projects are its [`TenancyStore`] half; zone transitions, request summaries and
/// progress lines its [`StatusStore`] half.
#[async_trait]
pub trait Store: TenancyStore + StatusStore + Send + Sync + 'static {
    /// `"sqlite"` or `"postgres"`, for logs.
    fn backend(&self) -> &'static str;

    // --- regions ---------------------------------------------------------------------------

    /// Creates `region` with its first zone `zone`, or re-commissions a decommissioned one;
    /// `Ok(false)` if it is active.
    async fn create_region(&self, region: &str, zone: &str) -> Result<bool, StoreError>;
    /// Adds zone `zone` to the active region `region`, or re-commissions a decommissioned zone;
    /// `Ok(false)` if the zone is active (or the region unknown or decommissioned: the caller
    /// reads the region first).
    async fn add_zone(&self, region: &str, zone: &str) -> Result<bool, StoreError>;
    /// Every zone of every region, by region, the region's first zone first, then by creation.
    /// A zone of a decommissioned region shows the region's decommission time.
    async fn zones(&self) -> Result<Vec<ZoneRecord>, StoreError>;
    /// The zones of one region, ordered as [`Store::zones`] orders them (what placing one
    /// request reads: an index lookup, not every zone).
    async fn region_zones(&self, region: &str) -> Result<Vec<ZoneRecord>, StoreError>;
    /// Marks zone `zone` of `region` decommissioned and revokes its identities and bootstrap
    /// tokens; `Ok(false)` when it does not exist or already is decommissioned.
    async fn decommission_zone(&self, region: &str, zone: &str) -> Result<bool, StoreError>;
    /// One region.
    async fn region(&self, name: &str) -> Result<Option<RegionRecord>, StoreError>;
    /// Every region, by name.
    async fn regions(&self) -> Result<Vec<RegionRecord>, StoreError>;
    /// Marks `region` decommissioned and revokes its identities and bootstrap tokens.
    /// `Ok(false)` when it does not exist or already is decommissioned. Requests and the session
    /// row are left to the caller (cancel them, publish [`Event::CloseRegion`]).
    async fn decommission(&self, region: &str) -> Result<bool, StoreError>;

    // --- bootstrap tokens and identities (hashes only) --------------------------------------

    /// Stores a new bootstrap token (its hash and the random `salt` its identity is derived
    /// with) for zone `zone` of `region`, revoking that zone's earlier bootstrap tokens.
    /// Returns its id.
    async fn add_bootstrap(
        &self,
        region: &str,
        zone: &str,
        hash: &[u8; 32],
        salt: &[u8; 32],
        expires_at: i64,
    ) -> Result<i64, StoreError>;
    /// Checks the hash of a presented token (identity or bootstrap) at `now`, without consuming
    /// it. A bootstrap token already exchanged is still accepted (`issued: true`) while the
    /// identity it gave was never used, so a lost `welcome` can be repaired by
    /// [`Store::exchange`].
    async fn check(
        &self,
        token_hash: &[u8; 32],
        now: i64,
    ) -> Result<Result<Credential, Refusal>, StoreError>;
    /// Exchanges bootstrap token `bootstrap_id` for the identity `identity_hash` (derived from
    /// the token and its salt, so a re-presented token gives the same one), atomically.
    async fn exchange(
        &self,
        bootstrap_id: i64,
        region: &str,
        identity_hash: &[u8; 32],
        expires_at: i64,
    ) -> Result<Exchange, StoreError>;
    /// Records the first use of an identity (a connection authenticated with it): from then on
    /// its bootstrap token cannot give it again. Later calls change nothing.
    async fn mark_identity_used(
        &self,
        identity_hash: &[u8; 32],
        now: i64,
    ) -> Result<(), StoreError>;
    /// Issues identity `new` (expiring at `new_expires_at`) to `region` in place of `old`, which
    /// stays valid until `old_valid_until` (the overlap). `Ok(false)` when `old` is not a valid
    /// identity of `region` at `now` (unknown, revoked, expired).
    async fn rotate_identity(
        &self,
        region: &str,
        old: &[u8; 32],
        new: &[u8; 32],
        now: i64,
        new_expires_at: i64,
        old_valid_until: i64,
    ) -> Result<bool, StoreError>;

    // --- live sessions (one row per region and zone) ----------------------------------------

    /// Records a new agent connection for `s.region`/`s.zone`, replacing the previous row (the newest
    /// connection wins; the caller closes the old one with [`Event::CloseRegion`]). `Ok(false)`
    /// when the row already holds a connection opened later (by `connected_at`): this one is
    /// stale and should be closed.
    async fn session_open(&self, s: &SessionRecord) -> Result<bool, StoreError>;
    /// Applies many heartbeats in one statement; a beat only counts when its connection id is
    /// still the region's current, connected one. Returns how many rows it updated.
    async fn session_heartbeats(&self, beats: &[Heartbeat]) -> Result<u64, StoreError>;
    /// [`Store::session_heartbeats`] for the replica's periodic write of every heartbeat it
    /// buffered (one caller at a time). A backend with a connection pool writes them on a
    /// connection of their own, so a busy pool never delays them: a zone's health then reflects
    /// its agent's heartbeats, not how long the control plane's other calls queued.
    async fn flush_session_heartbeats(&self, beats: &[Heartbeat]) -> Result<u64, StoreError> {
        self.session_heartbeats(beats).await
    }
    /// Stores the services an agent advertises; `Ok(false)` when `conn` is not current.
    async fn session_services(
        &self,
        region: &str,
        conn: &str,
        services_json: &str,
    ) -> Result<bool, StoreError>;
    /// Marks the session disconnected; `Ok(false)` when `conn` is not the current connection
    /// (a newer one replaced it, which must stay connected).
    async fn session_close(&self, region: &str, conn: &str, now: i64) -> Result<bool, StoreError>;
    /// Marks every connected session held by `replica` disconnected (a replica starting again
    /// with the same id, or stopping). Returns how many.
    async fn sessions_close_replica(&self, replica: &str, now: i64) -> Result<u64, StoreError>;
    /// The session row of zone `zone` of `region`.
    async fn session(&self, region: &str, zone: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Every session row, by region and zone.
    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError>;
    /// The session rows of one region's zones, by zone.
    async fn region_sessions(&self, region: &str) -> Result<Vec<SessionRecord>, StoreError>;

    // --- durable requests -------------------------------------------------------------------

    /// Persists a request, or finds the one already stored under its id: `Existing` when it has
    /// the same region and body hash (the caller joins it), `Mismatch` otherwise (409).
    async fn submit_request(&self, r: &NewRequest) -> Result<Submitted, StoreError>;
    /// One request.
    async fn request(&self, id: &str) -> Result<Option<RequestRecord>, StoreError>;
    /// The queued and sent requests of zone `zone` of `region`, in submit order.
    async fn unanswered(&self, region: &str, zone: &str) -> Result<Vec<RequestRecord>, StoreError>;
    /// How many queued or sent requests each (region, zone) has (those with none are absent);
    /// reads no params.
    async fn unanswered_counts(&self) -> Result<HashMap<(String, String), u64>, StoreError>;
    /// The (region, zone) pairs with at least one request never delivered (`queued`), for the
    /// safety-net poll that makes a lost event delay, never lose, a request.
    async fn queued_zones(&self) -> Result<Vec<(String, String)>, StoreError>;
    /// Marks a queued or sent request sent (again) and counts the delivery; `Ok(false)` when it
    /// is finished or unknown.
    async fn mark_sent(&self, id: &str, now: i64) -> Result<bool, StoreError>;
    /// Stores the `res` frame (raw JSON) of a queued or sent request; `Ok(false)` when it was
    /// already finished: only the first result wins.
    async fn complete_request(
        &self,
        id: &str,
        res_json: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Drops an unanswered request (region decommissioned, ...), storing `res_json` (an error
    /// `res` frame for the waiters); `Ok(false)` when it was already finished.
    async fn cancel_request(&self, id: &str, res_json: &str, now: i64) -> Result<bool, StoreError>;
    /// Deletes finished (done or cancelled) requests completed before `older_than`.
    async fn prune_requests(&self, older_than: i64) -> Result<u64, StoreError>;

    // --- service instances ------------------------------------------------------------------

    /// Stores a new service instance; `Ok(false)` when its id is taken.
    async fn insert_service(&self, rec: &ServiceRecord) -> Result<bool, StoreError>;
    /// One service instance.
    async fn service(&self, id: &str) -> Result<Option<ServiceRecord>, StoreError>;
    /// Every service instance, oldest first.
    async fn services(&self) -> Result<Vec<ServiceRecord>, StoreError>;
    /// The service instances in `state`, oldest first.
    async fn services_in_state(
        &self,
        state: InstanceState,
    ) -> Result<Vec<ServiceRecord>, StoreError>;
    /// Live instances (neither failed nor being deleted) per region, for placement.
    async fn live_services_by_region(&self) -> Result<HashMap<String, usize>, StoreError>;
    /// Moves a queued instance to `pending` and counts an attempt, only if still queued (the
    /// dispatcher's half of the race with [`Store::cancel_queued`]). `None` when it was not.
    async fn claim_queued(
        &self,
        id: &str,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError>;
    /// Removes a queued instance, only if still queued; `Ok(false)` when claimed first.
    async fn cancel_queued(&self, id: &str) -> Result<bool, StoreError>;
    /// Starts a new attempt on an instance still at `from` (state, attempts): moves it to `to`
    /// and counts the attempt. `None` when it changed meanwhile.
    async fn next_attempt(
        &self,
        id: &str,
        from: (InstanceState, u32),
        to: InstanceState,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError>;
    /// Writes `outcome` if the instance is still at `from`, so a late answer never overwrites a
    /// newer decision (a cancel, a delete, a later attempt).
    async fn settle(
        &self,
        id: &str,
        from: (InstanceState, u32),
        outcome: &Outcome,
    ) -> Result<bool, StoreError>;
    /// Removes an instance still at `from`.
    async fn remove_service_if(
        &self,
        id: &str,
        from: (InstanceState, u32),
    ) -> Result<bool, StoreError>;
    /// Removes instance `id` of `region` whatever its state (its provider reported it deleted).
    async fn remove_service(&self, id: &str, region: &str) -> Result<bool, StoreError>;

    // --- events between replicas ------------------------------------------------------------

    /// Sends `e` to every replica's subscribers, this one included.
    async fn publish(&self, e: &Event) -> Result<(), StoreError>;
    /// A new receiver of published events (from now on).
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event>;
}

/// The next event from `rx`, turning a lag (the receiver fell behind and events were dropped)
/// into [`Event::Resync`]; `None` once the store is gone.
pub async fn next_event(rx: &mut tokio::sync::broadcast::Receiver<Event>) -> Option<Event> {
    use tokio::sync::broadcast::error::RecvError;
    match rx.recv().await {
        Ok(e) => Some(e),
        Err(RecvError::Lagged(_)) => Some(Event::Resync),
        Err(RecvError::Closed) => None,
    }
}
