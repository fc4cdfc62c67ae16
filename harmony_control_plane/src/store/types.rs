//! The records, outcomes, events and error of the [`Store`](super::Store) trait.

use harmony_agent_protocol::InstanceState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;

/// A storage failure: which backend, what it was doing, and why (never a secret: no token, no
/// password, no connection URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// `"sqlite"` or `"postgres"`.
    pub backend: &'static str,
    /// What the store was doing (`"submit a request"`).
    pub op: &'static str,
    /// The database's or driver's error.
    pub cause: String,
    /// No pooled connection was free within the pool's wait: the database is busy, not broken
    /// (the HTTP edge answers 503 with `Retry-After` instead of 500).
    pub overloaded: bool,
    /// The database could not be reached or dropped the connection (refused, reset, closed,
    /// shutting down, starting up): retrying shortly may succeed, and the HTTP edge answers 503
    /// with `Retry-After` instead of 500.
    pub unavailable: bool,
}

impl StoreError {
    /// A failure of `backend` while doing `op`.
    pub fn new(backend: &'static str, op: &'static str, cause: impl fmt::Display) -> Self {
        Self {
            backend,
            op,
            cause: cause.to_string(),
            overloaded: false,
            unavailable: false,
        }
    }

    /// The same failure, known to be the database unreachable or restarting.
    pub fn unavailable(mut self) -> Self {
        self.unavailable = true;
        self
    }

    /// `op` could not start: every pooled connection of `backend` stayed busy for `waited`.
    pub fn overloaded(
        backend: &'static str,
        op: &'static str,
        waited: std::time::Duration,
    ) -> Self {
        let waited = if waited.as_millis() < 1000 {
            format!("{} ms", waited.as_millis())
        } else {
            format!("{} s", waited.as_secs())
        };
        Self::busy(
            backend,
            op,
            format!("no database connection was free within {waited} (all busy)"),
        )
    }

    /// `op` gave up because the database is busy (`cause` says how): overload, answered 503.
    pub fn busy(backend: &'static str, op: &'static str, cause: impl fmt::Display) -> Self {
        Self {
            backend,
            op,
            cause: cause.to_string(),
            overloaded: true,
            unavailable: false,
        }
    }

    /// Whether retrying later may succeed where retrying now will not (overloaded or
    /// unavailable), as opposed to a statement the database refused.
    pub fn is_transient(&self) -> bool {
        self.overloaded || self.unavailable
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.overloaded {
            let hint = match self.backend {
                "sqlite" => "retry later, and check that no other process holds the --db file",
                _ => "retry later, or raise --database-pool-size if the database has room",
            };
            return write!(
                f,
                "the control plane is overloaded: state database ({}): cannot {}: {}; {hint}",
                self.backend, self.op, self.cause
            );
        }
        if self.unavailable {
            return write!(
                f,
                "the control plane's state database ({}) is unavailable: cannot {}: {}; retry shortly (the control plane reconnects by itself)",
                self.backend, self.op, self.cause
            );
        }
        let hint = match self.backend {
            "sqlite" => {
                "check that the --db file is writable and not used by another control plane"
            }
            _ => "check --database-url and that PostgreSQL is reachable and accepts this user",
        };
        write!(
            f,
            "state database ({}): cannot {}: {}; {hint}",
            self.backend, self.op, self.cause
        )
    }
}

impl std::error::Error for StoreError {}

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

/// A zone of a region as stored: one cluster, with its own agent, identity, session and
/// request queue. The region's first zone is the one it was created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneRecord {
    /// Region name.
    pub region: String,
    /// Zone name.
    pub zone: String,
    /// When the zone was added (ms).
    pub created_at: i64,
    /// When it was decommissioned (its own, or its region's), if it was.
    pub decommissioned_at: Option<i64>,
    /// Whether an identity was issued to this zone's agent and is not revoked.
    pub has_identity: bool,
    /// Whether one of those identities is still valid (not expired, nor past its overlap after
    /// a rotation). An agent whose identity expired while it was offline is brought back with
    /// a new bootstrap token; the zone and its queued requests are kept.
    pub live_identity: bool,
}

/// Why a credential was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Unknown token (or a bootstrap token replaced by a newer one before it was used).
    Unknown,
    /// Bootstrap token already exchanged, and its identity already used (or replaced).
    Used,
    /// Bootstrap token or identity past its expiry (an identity past its rotation overlap too).
    Expired,
    /// Identity revoked or region decommissioned.
    Revoked,
}

/// What a presented credential proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A valid bootstrap token for `region`/`zone`.
    Bootstrap {
        /// Row id, for [`Store::exchange`](super::Store::exchange).
        id: i64,
        /// Its region.
        region: String,
        /// Its zone.
        zone: String,
        /// The random salt its identity is derived with.
        salt: [u8; 32],
        /// Its expiry (ms).
        expires_at: i64,
        /// Already exchanged, but the identity it gave was never used: exchanging it again
        /// returns that identity (a lost `welcome`).
        issued: bool,
    },
    /// A valid identity for `region`/`zone`.
    Identity {
        /// Its region.
        region: String,
        /// Its zone.
        zone: String,
        /// When it stops being accepted: its expiry, or the end of its overlap once rotated
        /// (`None` = never, identities issued before expiry existed).
        expires_at: Option<i64>,
        /// Its first use is already recorded: a reconnect has nothing to write
        /// ([`Store::mark_identity_used`](super::Store::mark_identity_used) would change nothing).
        used: bool,
    },
}

/// What [`Store::exchange`](super::Store::exchange) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// The token is now used and the identity stored.
    Issued,
    /// The token was exchanged before for this same identity, which was never used: hand it
    /// out again (its expiry, as stored).
    AlreadyIssuedUnused {
        /// The stored identity's expiry (`None` = never).
        expires_at: Option<i64>,
    },
    /// The token was exchanged and its identity used (or revoked, or it was replaced): refuse.
    Used,
}

/// The session row of a region's zone: which replica holds its agent connection, and what that
/// agent last said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// Region name.
    pub region: String,
    /// Zone name: a session row is per (region, zone).
    pub zone: String,
    /// The control-plane replica holding the connection.
    pub replica: String,
    /// The connection's id (unique per connection, chosen by the replica).
    pub conn: String,
    /// Whether the connection is open.
    pub connected: bool,
    /// When it opened (ms).
    pub connected_at: i64,
    /// When it closed (ms), once closed.
    pub disconnected_at: Option<i64>,
    /// The last heartbeat (ms); `connected_at` until the first.
    pub last_heartbeat_at: i64,
    /// The agent's `hello` frame (JSON).
    pub hello_json: String,
    /// The last status the agent reported (JSON), if any.
    pub status_json: Option<String>,
    /// The services the agent advertises (JSON), if any.
    pub services_json: Option<String>,
    /// Largest frame the agent accepts (from its hello).
    pub max_frame_bytes: u64,
}

/// One agent heartbeat, for [`Store::session_heartbeats`](super::Store::session_heartbeats).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Region name.
    pub region: String,
    /// The connection it came on: ignored unless still the region's current one.
    pub conn: String,
    /// When it arrived (ms).
    pub at: i64,
    /// The status it carried (JSON); `None` keeps the stored one.
    pub status_json: Option<String>,
}

/// The idempotency hash of a request body: SHA-256 of `op`, a newline, and the params as
/// canonical JSON (object keys sorted, no spacing).
pub fn request_body_hash(op: &str, params: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(op.as_bytes());
    h.update(b"\n");
    // The same params in another key order or spacing are the same request (a retry that
    // re-serialized them joins it); params that are not JSON are hashed as sent.
    match serde_json::from_str::<serde_json::Value>(params) {
        Ok(v) => h.update(canonical(v).to_string().as_bytes()),
        Err(_) => h.update(params.as_bytes()),
    }
    h.finalize().into()
}

/// `v` with every object's keys in sorted order, whatever order the JSON map keeps.
fn canonical(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// A request to persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRequest {
    /// Its id: the caller's idempotency key.
    pub id: String,
    /// The region it is for.
    pub region: String,
    /// The zone it was placed in; empty means the region's first zone.
    pub zone: String,
    /// The op.
    pub op: String,
    /// The params, raw JSON bytes exactly as received (never re-encoded).
    pub params: String,
    /// [`request_body_hash`] of `op` and `params`.
    pub body_hash: [u8; 32],
    /// Submission time (ms).
    pub created_at: i64,
    /// The project it runs for (`None`: an admin request for no project).
    pub scope: Option<RequestScope>,
}

/// Who a request runs for, as stored with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestScope {
    /// The tenant.
    pub tenant: String,
    /// The project.
    pub project: String,
    /// The `ProjectScope` attached to its `req` frame (JSON), snapshotted at submit.
    pub project_json: String,
}

/// The tenant and project owning a service instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The tenant.
    pub tenant: String,
    /// The project.
    pub project: String,
}

impl NewRequest {
    /// A request with its body hash computed.
    pub fn new(id: &str, region: &str, op: &str, params: &str, created_at: i64) -> Self {
        Self {
            id: id.to_string(),
            region: region.to_string(),
            zone: String::new(),
            op: op.to_string(),
            params: params.to_string(),
            body_hash: request_body_hash(op, params),
            created_at,
            scope: None,
        }
    }

    /// The same request, run for a project.
    pub fn scoped(mut self, scope: RequestScope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// The same request placed in `zone` (without it, the region's first zone).
    pub fn in_zone(mut self, zone: &str) -> Self {
        self.zone = zone.to_string();
        self
    }
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestState {
    /// Persisted, not yet delivered.
    Queued,
    /// Delivered to the agent at least once, no result yet.
    Sent,
    /// Its result is stored.
    Done,
    /// Dropped before a result (its `res` holds the error given to waiters).
    Cancelled,
}

impl RequestState {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Queued => "queued",
            RequestState::Sent => "sent",
            RequestState::Done => "done",
            RequestState::Cancelled => "cancelled",
        }
    }

    /// Parses a stored word.
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "queued" => RequestState::Queued,
            "sent" => RequestState::Sent,
            "done" => RequestState::Done,
            "cancelled" => RequestState::Cancelled,
            _ => return None,
        })
    }

    /// Whether it has its final `res` (done or cancelled).
    pub fn is_finished(self) -> bool {
        matches!(self, RequestState::Done | RequestState::Cancelled)
    }
}

/// A stored request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// Its id.
    pub id: String,
    /// Its region.
    pub region: String,
    /// The zone it was placed in (its agent is the one that answers it).
    pub zone: String,
    /// Its op.
    pub op: String,
    /// Its params, raw JSON as submitted.
    pub params: String,
    /// [`request_body_hash`] of op and params.
    pub body_hash: [u8; 32],
    /// Its state.
    pub state: RequestState,
    /// The `res` frame (raw JSON) once done or cancelled.
    pub res: Option<String>,
    /// Submit order (increasing, not contiguous).
    pub seq: i64,
    /// Submission time (ms).
    pub created_at: i64,
    /// Last delivery (ms).
    pub sent_at: Option<i64>,
    /// When its result was stored (ms).
    pub completed_at: Option<i64>,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// The project it runs for, as snapshotted at submit.
    pub scope: Option<RequestScope>,
}

/// What [`Store::submit_request`](super::Store::submit_request) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// Newly persisted.
    Created,
    /// The same request (id, region, body) was submitted before: join it.
    Existing(RequestRecord),
    /// The id is taken by a request with another region, op or params (409 `duplicate_id`).
    Mismatch(RequestRecord),
}

/// A service instance as stored and as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceRecord {
    /// The instance id (a DNS-1123 label).
    pub id: String,
    /// The service type.
    #[serde(rename = "type")]
    pub service_type: String,
    /// The region it was placed in.
    pub region: String,
    /// The zone it was placed in (its parent's, when it has one); empty means the region's
    /// first zone.
    pub zone: String,
    /// The instance it belongs to, if any: it lives in its parent's region and zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Its state.
    pub state: InstanceState,
    /// Why it is in that state.
    pub detail: String,
    /// The provider serving it, once an agent named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// What a consumer needs to use it (never secret values).
    pub outputs: Map<String, Value>,
    /// The provider-specific spec it was created with.
    pub spec: Value,
    /// Creation time (ms since epoch).
    pub created_at: i64,
    /// Last change (ms since epoch).
    pub updated_at: i64,
    /// Dispatch attempts so far (creates and deletes); numbers the request ids.
    #[serde(skip)]
    pub attempts: u32,
    /// The tenant and project owning it (`None`: created by the admin for no project).
    #[serde(skip)]
    pub owner: Option<Owner>,
}

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

/// A wake-up sent between replicas. Events are hints: the store holds the truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A request for `region` was persisted: its holder delivers it.
    RequestQueued {
        /// The region.
        region: String,
        /// The zone whose agent delivers it (`None`: every zone of the region looks).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
    },
    /// Request `id` is finished (done or cancelled): waiters read its `res`.
    RequestDone {
        /// The request id.
        id: String,
    },
    /// An agent's progress on request `id` (relayed, not persisted).
    Progress {
        /// The request id.
        id: String,
        /// A short stage name.
        stage: String,
        /// Detail for people (the PostgreSQL adapter may truncate it).
        detail: String,
    },
    /// The holder of `region`'s agent connection closes it now.
    CloseRegion {
        /// The region.
        region: String,
        /// Only this zone's connection; `None` = every zone of the region.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        /// WebSocket close code (`harmony_agent_protocol::close`).
        code: u16,
        /// Close reason.
        reason: String,
        /// Only this connection id (a replaced one); `None` = whichever is open.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conn: Option<String>,
    },
    /// Service instance `id` changed.
    InstanceChanged {
        /// The instance id.
        id: String,
    },
    /// Events may have been missed (listener reconnected, receiver lagged): re-read the store.
    Resync,
}
