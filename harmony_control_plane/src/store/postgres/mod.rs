//! The PostgreSQL adapter, for N replicas on one database: a deadpool of tokio-postgres
//! connections, TLS as the URL's `sslmode` says with the server certificate always verified
//! ([`tls`]: `--database-ca-file` or the system's CAs), every compare-and-set as one statement,
//! and events over LISTEN/NOTIFY ([`events`]) on a connection made the same way.

mod batched;
mod cached;
mod combine;
mod events;
mod identity;
mod requests;
mod schema;
mod services;
mod sessions;
mod status;
mod tenancy;
pub mod tls;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use harmony_agent_protocol::InstanceState;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use batched::Batched;
pub use events::{CHANNEL, MAX_PAYLOAD};

use super::{
    Credential, Event, Exchange, Heartbeat, NewRequest, Outcome, Refusal, RegionRecord,
    RequestRecord, RequestState, ServiceRecord, SessionRecord, Store, StoreError, Submitted,
    ZoneRecord,
};

const BACKEND: &str = "postgres";
/// Events buffered per subscriber before it lags (and gets [`Event::Resync`]).
const EVENT_BUFFER: usize = 4096;
/// Used when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keepalive idle time, so a dead server is noticed on idle connections.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// An error and its causes, joined (tokio-postgres puts the server's message in the source).
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        // Many errors (tokio-postgres', deadpool's) already print their cause: say it once.
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = cause.source();
    }
    s
}

/// What a PostgreSQL call can fail with.
#[derive(Debug)]
pub(super) enum Error {
    /// The server or the driver.
    Db(tokio_postgres::Error),
    /// A stored value that is not what the schema promises.
    Data(String),
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Db(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Db(e) => f.write_str(&tls::explain(e)),
            Error::Data(s) => f.write_str(s),
        }
    }
}

/// The PostgreSQL store. Dropping it stops its event listener.
pub struct PostgresStore {
    pool: Pool,
    /// One connection for the periodic write of buffered heartbeats, outside `pool`: during a
    /// reconnect storm the pool's queue (up to the pool wait, per flush) would otherwise hold
    /// back every zone's first heartbeat, and make live zones look late.
    heartbeats: Pool,
    /// How long a call waits for a pooled connection.
    wait: Duration,
    events: broadcast::Sender<Event>,
    listener: JoinHandle<()>,
    /// The request path's calls, each kind combined into batched statements.
    batched: Batched,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// Runs `$body` (a future using the pooled client `$c`) as operation `$op`.
macro_rules! pooled {
    ($self:ident, $op:literal, $c:ident => $body:expr) => {{
        #[allow(unused_mut, reason = "only some bodies need the client mutable")]
        let mut $c = $self.client($op).await?;
        $body.await.map_err(|e| pg_error($op, e))
    }};
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/dbname?sslmode=require`), creates
    /// or checks the schema (serialised between replicas by an advisory lock) and starts
    /// listening for events. `pool_size` connections at most, plus one for events and one for
    /// the periodic heartbeat write; a call waits up to `pool_wait` for a free one, then fails
    /// as overloaded. TLS follows the URL's `sslmode`, verifying the server against the PEM CAs
    /// of `ca_file` (or the system's).
    pub async fn connect(
        url: &str,
        pool_size: usize,
        pool_wait: Duration,
        ca_file: Option<&Path>,
    ) -> Result<Self, StoreError> {
        let fail = |op, cause: String| StoreError::new(BACKEND, op, cause);
        if pool_size == 0 {
            return Err(fail(
                "size the connection pool",
                "the pool size is 0; give at least 1".into(),
            ));
        }
        // The URL may hold a password: errors quote the driver, never the URL.
        let mut config = tls::parse_url(url).map_err(|e| fail("parse --database-url", e))?;
        let tls = tls::connector(&config, ca_file).map_err(|e| fail("set up TLS", e))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("harmony-control-plane");
        }
        config.keepalives(true).keepalives_idle(KEEPALIVE_IDLE);
        // A statement never waits on a lock longer than a call waits for a connection: calls
        // combined into one statement (ADR 0027) would otherwise all wait behind a lock that,
        // sent alone, only one of them met; past it they are answered as overloaded (503).
        //
        // Statements are prepared once per connection (`cached.rs`) and planned once: one
        // generic plan each (ADR 0034). Planning every call was nearly a third of PostgreSQL's
        // statement time in a reconnect storm. A generic plan is made at a statement's first
        // call and kept, so one made while a table was nearly empty (a fleet bootstrapping)
        // would scan it whole for as long as the connection lives. With sequential scans
        // disabled the planner takes an index wherever one serves, and scans a table only where
        // no index can; the sweep's listings of every zone and session, in key order, are read
        // through the primary keys (50 % slower than a scan at 12,000 zones: docs/benchmarks.md).
        let session = format!(
            "-c lock_timeout={} -c plan_cache_mode=force_generic_plan -c enable_seqscan=off",
            pool_wait.as_millis().max(1)
        );
        let options = match config.get_options() {
            Some(given) => format!("{given} {session}"),
            None => session,
        };
        config.options(&options);

        let build = |size: usize| {
            let manager = Manager::from_config(
                config.clone(),
                tls.clone(),
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(pool_wait))
                .create_timeout(Some(CONNECT_TIMEOUT))
                .recycle_timeout(Some(CONNECT_TIMEOUT))
                .build()
                .map_err(|e| fail("build the connection pool", chain(&e)))
        };
        let pool = build(pool_size)?;
        let heartbeats = build(1)?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| fail("connect", tls::explain(&e)))?;
        schema::migrate(&mut client)
            .await
            .map_err(|e| fail("create or check the schema", e))?;
        drop(client);

        let events = broadcast::channel(EVENT_BUFFER).0;
        let first = events::connect(&config, &tls)
            .await
            .map_err(|e| fail("listen for events", e))?;
        let listener = events::spawn(config, tls, first, events.clone());
        let batched = Batched::start(&pool, pool_wait);
        Ok(Self {
            pool,
            heartbeats,
            wait: pool_wait,
            events,
            listener,
            batched,
        })
    }

    async fn client(&self, op: &'static str) -> Result<deadpool_postgres::Client, StoreError> {
        pooled_client(&self.pool, self.wait, op).await
    }

    /// Writes `beats` on a connection of `pool` (the main pool, or the heartbeats' own).
    async fn write_heartbeats(&self, pool: &Pool, beats: &[Heartbeat]) -> Result<u64, StoreError> {
        if beats.is_empty() {
            return Ok(0);
        }
        let op = "record heartbeats";
        let c = pooled_client(pool, self.wait, op).await?;
        sessions::heartbeats(&c, beats)
            .await
            .map_err(|e| pg_error(op, e))
    }
}

/// A pooled connection for `op`, waiting up to `wait` for one.
async fn pooled_client(
    pool: &Pool,
    wait: Duration,
    op: &'static str,
) -> Result<deadpool_postgres::Client, StoreError> {
    pool.get().await.map_err(|e| match e {
        // Every connection stayed busy: overload, which the HTTP edge answers with 503.
        deadpool_postgres::PoolError::Timeout(deadpool_postgres::TimeoutType::Wait) => {
            StoreError::overloaded(BACKEND, op, wait)
        }
        e => {
            let lost = match &e {
                deadpool_postgres::PoolError::Backend(b) => connection_lost(b),
                deadpool_postgres::PoolError::Timeout(_) | deadpool_postgres::PoolError::Closed => {
                    true
                }
                _ => false,
            };
            let error = StoreError::new(BACKEND, op, tls::explain(&e));
            if lost { error.unavailable() } else { error }
        }
    })
}

/// A statement's failure; a lost or refused connection is [`StoreError::unavailable`], a
/// statement that waited past `lock_timeout` for a lock is [`StoreError::overloaded`].
pub(super) fn pg_error(op: &'static str, e: Error) -> StoreError {
    if let Error::Db(db) = &e
        && db.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
    {
        return StoreError::busy(
            BACKEND,
            op,
            "a statement waited longer than the pool wait for a lock another transaction holds",
        );
    }
    let lost = matches!(&e, Error::Db(db) if connection_lost(db));
    let error = StoreError::new(BACKEND, op, e);
    if lost { error.unavailable() } else { error }
}

/// Whether `e` says the database is unreachable or restarting rather than that a statement
/// failed: the connection closed, refused, reset or timed out, or the server shutting down or
/// starting up.
fn connection_lost(e: &tokio_postgres::Error) -> bool {
    use std::io::ErrorKind as K;
    use tokio_postgres::error::SqlState;
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        return [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::CONNECTION_EXCEPTION,
            SqlState::CONNECTION_DOES_NOT_EXIST,
            SqlState::CONNECTION_FAILURE,
            SqlState::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
        ]
        .contains(code);
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                K::ConnectionRefused
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::BrokenPipe
                    | K::UnexpectedEof
                    | K::NotConnected
                    | K::TimedOut
            );
        }
        source = s.source();
    }
    false
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn create_region(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        pooled!(self, "create a region", c => identity::create_region(&mut c, region, zone))
    }

    async fn add_zone(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        pooled!(self, "add a zone", c => identity::add_zone(&c, region, zone))
    }

    async fn zones(&self) -> Result<Vec<ZoneRecord>, StoreError> {
        pooled!(self, "list zones", c => identity::zones(&c))
    }

    async fn region_zones(&self, region: &str) -> Result<Vec<ZoneRecord>, StoreError> {
        self.batched.region_zones.call(region.to_string()).await
    }

    async fn decommission_zone(&self, region: &str, zone: &str) -> Result<bool, StoreError> {
        pooled!(self, "decommission a zone", c =>
            identity::decommission_zone(&mut c, region, zone))
    }

    async fn region(&self, name: &str) -> Result<Option<RegionRecord>, StoreError> {
        self.batched.region.call(name.to_string()).await
    }

    async fn regions(&self) -> Result<Vec<RegionRecord>, StoreError> {
        pooled!(self, "list regions", c => identity::regions(&c))
    }

    async fn decommission(&self, region: &str) -> Result<bool, StoreError> {
        pooled!(self, "decommission a region", c => identity::decommission(&mut c, region))
    }

    async fn add_bootstrap(
        &self,
        region: &str,
        zone: &str,
        hash: &[u8; 32],
        salt: &[u8; 32],
        expires_at: i64,
    ) -> Result<i64, StoreError> {
        pooled!(self, "store a bootstrap token", c =>
            identity::add_bootstrap(&mut c, region, zone, hash, salt, expires_at))
    }

    async fn check(
        &self,
        token_hash: &[u8; 32],
        now: i64,
    ) -> Result<Result<Credential, Refusal>, StoreError> {
        // Identities first, batched: every reconnecting agent presents one.
        if let Some(facts) = self.batched.identity.call(token_hash.to_vec()).await? {
            return Ok(facts.decide(now));
        }
        pooled!(self, "check a credential", c => identity::check_bootstrap(&c, token_hash, now))
    }

    async fn exchange(
        &self,
        bootstrap_id: i64,
        region: &str,
        identity_hash: &[u8; 32],
        expires_at: i64,
    ) -> Result<Exchange, StoreError> {
        pooled!(self, "exchange a bootstrap token", c =>
            identity::exchange(&mut c, bootstrap_id, region, identity_hash, expires_at))
    }

    async fn mark_identity_used(
        &self,
        identity_hash: &[u8; 32],
        now: i64,
    ) -> Result<(), StoreError> {
        pooled!(self, "record an identity's first use", c =>
            identity::mark_identity_used(&c, identity_hash, now))
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
        pooled!(self, "rotate an identity", c => identity::rotate_identity(
            &mut c, region, old, new, now, new_expires_at, old_valid_until))
    }

    async fn session_open(&self, s: &SessionRecord) -> Result<bool, StoreError> {
        pooled!(self, "record an agent session", c => sessions::open(&c, s))
    }

    async fn session_heartbeats(&self, beats: &[Heartbeat]) -> Result<u64, StoreError> {
        self.write_heartbeats(&self.pool, beats).await
    }

    async fn flush_session_heartbeats(&self, beats: &[Heartbeat]) -> Result<u64, StoreError> {
        self.write_heartbeats(&self.heartbeats, beats).await
    }

    async fn session_services(
        &self,
        region: &str,
        conn: &str,
        services_json: &str,
    ) -> Result<bool, StoreError> {
        pooled!(self, "record advertised services", c =>
            sessions::services(&c, region, conn, services_json))
    }

    async fn session_close(&self, region: &str, conn: &str, now: i64) -> Result<bool, StoreError> {
        pooled!(self, "close an agent session", c => sessions::close(&c, region, conn, now))
    }

    async fn sessions_close_replica(&self, replica: &str, now: i64) -> Result<u64, StoreError> {
        pooled!(self, "close a replica's sessions", c => sessions::close_replica(&c, replica, now))
    }

    async fn session(&self, region: &str, zone: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.batched
            .session
            .call((region.to_string(), zone.to_string()))
            .await
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        pooled!(self, "list sessions", c => sessions::all(&c))
    }

    async fn region_sessions(&self, region: &str) -> Result<Vec<SessionRecord>, StoreError> {
        self.batched.region_sessions.call(region.to_string()).await
    }

    async fn submit_request(&self, r: &NewRequest) -> Result<Submitted, StoreError> {
        self.batched.submit.call(r.clone()).await
    }

    async fn request(&self, id: &str) -> Result<Option<RequestRecord>, StoreError> {
        self.batched.read.call(id.to_string()).await
    }

    async fn unanswered(&self, region: &str, zone: &str) -> Result<Vec<RequestRecord>, StoreError> {
        self.batched
            .unanswered
            .call((region.to_string(), zone.to_string()))
            .await
    }

    async fn unanswered_counts(&self) -> Result<HashMap<(String, String), u64>, StoreError> {
        pooled!(self, "count unanswered requests", c => requests::unanswered_counts(&c))
    }

    async fn queued_zones(&self) -> Result<Vec<(String, String)>, StoreError> {
        pooled!(self, "list zones with queued requests", c => requests::queued_zones(&c))
    }

    async fn mark_sent(&self, id: &str, now: i64) -> Result<bool, StoreError> {
        self.batched.mark_sent.call((id.to_string(), now)).await
    }

    async fn complete_request(
        &self,
        id: &str,
        res_json: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        self.batched
            .finish
            .call((
                id.to_string(),
                RequestState::Done,
                res_json.to_string(),
                now,
            ))
            .await
    }

    async fn cancel_request(&self, id: &str, res_json: &str, now: i64) -> Result<bool, StoreError> {
        pooled!(self, "cancel a request", c =>
            requests::finish(&c, id, RequestState::Cancelled, res_json, now))
    }

    async fn prune_requests(&self, older_than: i64) -> Result<u64, StoreError> {
        pooled!(self, "prune finished requests", c => requests::prune(&c, older_than))
    }

    async fn insert_service(&self, rec: &ServiceRecord) -> Result<bool, StoreError> {
        pooled!(self, "store a service instance", c => services::insert(&c, rec))
    }

    async fn service(&self, id: &str) -> Result<Option<ServiceRecord>, StoreError> {
        pooled!(self, "read a service instance", c => services::one(&c, id))
    }

    async fn services(&self) -> Result<Vec<ServiceRecord>, StoreError> {
        pooled!(self, "list service instances", c => services::all(&c))
    }

    async fn services_in_state(
        &self,
        state: InstanceState,
    ) -> Result<Vec<ServiceRecord>, StoreError> {
        pooled!(self, "list service instances by state", c => services::in_state(&c, state))
    }

    async fn live_services_by_region(&self) -> Result<HashMap<String, usize>, StoreError> {
        pooled!(self, "count live service instances", c => services::live_by_region(&c))
    }

    async fn claim_queued(
        &self,
        id: &str,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError> {
        pooled!(self, "claim a queued service instance", c =>
            services::claim_queued(&c, id, detail))
    }

    async fn cancel_queued(&self, id: &str) -> Result<bool, StoreError> {
        pooled!(self, "cancel a queued service instance", c => services::cancel_queued(&c, id))
    }

    async fn next_attempt(
        &self,
        id: &str,
        from: (InstanceState, u32),
        to: InstanceState,
        detail: &str,
    ) -> Result<Option<ServiceRecord>, StoreError> {
        pooled!(self, "start a service instance attempt", c =>
            services::next_attempt(&c, id, from, to, detail))
    }

    async fn settle(
        &self,
        id: &str,
        from: (InstanceState, u32),
        outcome: &Outcome,
    ) -> Result<bool, StoreError> {
        pooled!(self, "settle a service instance", c => services::settle(&c, id, from, outcome))
    }

    async fn remove_service_if(
        &self,
        id: &str,
        from: (InstanceState, u32),
    ) -> Result<bool, StoreError> {
        pooled!(self, "remove a service instance", c => services::remove_if(&c, id, from))
    }

    async fn remove_service(&self, id: &str, region: &str) -> Result<bool, StoreError> {
        pooled!(self, "remove a service instance", c => services::remove(&c, id, region))
    }

    async fn publish(&self, e: &Event) -> Result<(), StoreError> {
        let payload = events::encode(e)
            .map_err(|cause| StoreError::new(BACKEND, "publish an event", cause))?;
        self.batched.publish.call(payload).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}
