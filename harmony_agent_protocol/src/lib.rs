//! Agent protocol v1: JSON text frames between a region agent and the control plane.
//!
//! ```text
//! hello    agent -> cp   {type:"hello", agent_version, region, zone, ops:[...], protocol:1, max_frame_bytes}
//! welcome  cp -> agent   {type:"welcome", heartbeat_s, identity?, identity_expires_at?, max_frame_bytes}
//! ping     agent -> cp   {type:"ping", seq, status:{k8s_reachable, detail?, quotas?}}
//! req      cp -> agent   {type:"req", id, op, params}
//! res      agent -> cp   {type:"res", id, ok, result? | error:{code,message}}
//! progress agent -> cp   {type:"progress", id, stage, detail}
//! error    either way    {type:"error", code, message, id?}
//! services agent -> cp   {type:"services", offers:[{service_type, provider, builtin, health, detail?}]}
//! instance agent -> cp   {type:"instance", instance_id, service_type, provider, state, detail?, outputs?}
//! renew    agent -> cp   {type:"renew"}
//! identity cp -> agent   {type:"identity", identity, expires_at}
//! ```
//!
//! `params` and `result` are [`RawJson`]: the caller's exact bytes, never re-encoded on the way.
//! Each side states the largest frame it accepts (`max_frame_bytes` in hello and welcome); a
//! sender never sends a frame above the receiver's limit (a result that would be is answered
//! with `result_too_large` instead).
//!
//! Decoding never panics: a frame too large, not JSON, of an unknown `type` or missing a field
//! is a [`DecodeError`] that the receiver answers with an `error` frame. Unknown fields are
//! ignored so later minor additions stay readable by v1 peers.

mod codec;
pub mod containment;
pub mod ops;
pub mod quota_use;
pub mod raw;
pub mod secret;
pub mod services;
pub mod tenancy;

#[cfg(feature = "logging")]
pub mod logging;
#[cfg(feature = "signal")]
pub mod signal;

use serde::{Deserialize, Serialize};

pub use codec::{DecodeError, decode, decode_with_limit, encode, encoded_len};
pub use ops::{Op, WireChange, WireFieldChange, WireObjectRef, WireStatus};
pub use raw::RawJson;
pub use secret::{SecretString, scrub};
pub use services::{
    InstanceState, InstanceStatus, ProviderHealth, ServiceCreateParams, ServiceOffer, ServiceRef,
    Services,
};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest text frame either side accepts (4 MiB): enough for hundreds of manifests.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// The HTTP path agents upgrade to WebSocket on.
pub const AGENT_PATH: &str = "/v1/agent";

/// Prefix of one-time bootstrap tokens.
pub const BOOTSTRAP_PREFIX: &str = "hbt_";

/// Prefix of long-lived agent identities.
pub const IDENTITY_PREFIX: &str = "hid_";

/// How long one side of an agent connection waits without hearing anything from the other
/// before it drops the connection, for a heartbeat of `heartbeat`. The agent sends a ping frame
/// and a WebSocket ping every heartbeat, and the control plane answers the WebSocket ping at
/// once, so each side hears the other at least once per heartbeat: a flow a load balancer
/// black-holed, or a peer that went silent, is noticed by the second heartbeat after the last
/// sign of life (the agent checks at each heartbeat), with a grace of half a heartbeat, and at
/// least 2 s, for a busy peer.
pub fn silence_limit(heartbeat: std::time::Duration) -> std::time::Duration {
    heartbeat + (heartbeat / 2).max(std::time::Duration::from_secs(2))
}

/// WebSocket close codes the control plane uses to refuse or end a connection (private range).
pub mod close {
    /// The hello was missing, malformed or spoke another protocol version.
    pub const PROTOCOL: u16 = 4000;
    /// No credential, or one the control plane does not know.
    pub const UNAUTHORIZED: u16 = 4001;
    /// The bootstrap token was already exchanged for an identity.
    pub const BOOTSTRAP_USED: u16 = 4002;
    /// The bootstrap token's expiry has passed.
    pub const BOOTSTRAP_EXPIRED: u16 = 4003;
    /// The identity was revoked: the region is decommissioned.
    pub const REVOKED: u16 = 4004;
    /// The hello names a region or zone other than the credential's.
    pub const REGION_MISMATCH: u16 = 4005;
    /// A newer connection for the same region replaced this one.
    pub const REPLACED: u16 = 4008;
    /// The identity's expiry (and any overlap window) has passed.
    pub const IDENTITY_EXPIRED: u16 = 4009;
    /// The control plane could not take the connection in time (no hello arrived within its
    /// wait, as on a machine or network under load): reconnect with backoff. RFC 6455's
    /// "Try Again Later"; never fatal.
    pub const TRY_AGAIN_LATER: u16 = 1013;

    /// Whether an agent should stop instead of retrying after this close code.
    pub fn is_fatal(code: u16) -> bool {
        matches!(
            code,
            PROTOCOL
                | UNAUTHORIZED
                | BOOTSTRAP_USED
                | BOOTSTRAP_EXPIRED
                | REVOKED
                | REGION_MISMATCH
                | IDENTITY_EXPIRED
        )
    }
}

/// Error codes carried in `res` and `error` frames.
pub mod code {
    /// The op is not one this agent executes.
    pub const UNSUPPORTED_OP: &str = "unsupported_op";
    /// The frame `type` is unknown.
    pub const UNKNOWN_FRAME: &str = "unknown_frame";
    /// The frame is not valid JSON or lacks a field.
    pub const MALFORMED_FRAME: &str = "malformed_frame";
    /// The frame exceeds [`super::MAX_FRAME_BYTES`].
    pub const FRAME_TOO_LARGE: &str = "frame_too_large";
    /// The op's params do not match its schema.
    pub const INVALID_PARAMS: &str = "invalid_params";
    /// A manifest lacks apiVersion, kind or name.
    pub const INVALID_OBJECT: &str = "invalid_object";
    /// The Kubernetes API server refused an object.
    pub const REJECTED: &str = "rejected";
    /// The API server has no such kind.
    pub const UNKNOWN_KIND: &str = "unknown_kind";
    /// Another field manager owns the fields.
    pub const CONFLICT: &str = "conflict";
    /// The agent cannot reach its Kubernetes API server.
    pub const UNREACHABLE: &str = "unreachable";
    /// Something timed out.
    pub const TIMEOUT: &str = "timeout";
    /// Applied objects did not become current (a failed rollout, or the wait timed out); the
    /// error's `applied` changes carry each object's status.
    pub const NOT_CURRENT: &str = "not_current";
    /// Not supported in this mode or backend.
    pub const UNSUPPORTED: &str = "unsupported";
    /// No provider of this agent holds the service type.
    pub const NO_PROVIDER: &str = "no_provider";
    /// The type's provider is not healthy now; retry when it is.
    pub const PROVIDER_UNAVAILABLE: &str = "provider_unavailable";
    /// The provider refused the request or answered something unreadable.
    pub const PROVIDER_ERROR: &str = "provider_error";
    /// The result does not fit in one frame of the receiver's `max_frame_bytes`.
    pub const RESULT_TOO_LARGE: &str = "result_too_large";
    /// The request does not fit in one frame of the agent's `max_frame_bytes` (refused at submit).
    pub const TOO_LARGE: &str = "too_large";
    /// The cluster refused the agent's credentials for this object (HTTP 403).
    pub const FORBIDDEN: &str = "forbidden";
    /// The object or its namespace does not exist (HTTP 404).
    pub const NOT_FOUND: &str = "not_found";
    /// A request id was reused with another region, op or params.
    pub const DUPLICATE_ID: &str = "duplicate_id";
    /// The control plane is overloaded (no database connection free in time; HTTP 503 with
    /// `Retry-After`): retry later.
    pub const OVERLOADED: &str = "overloaded";
    /// The control plane's state database is unreachable or restarting; retry after the
    /// `Retry-After` seconds.
    pub const STORE_UNAVAILABLE: &str = "store_unavailable";
    /// The API server refused an object because a project quota is exhausted; the message names
    /// the quota and the resource.
    pub const QUOTA_EXCEEDED: &str = "quota_exceeded";
    /// A child object would live in another region (or zone) than its parent (422).
    pub const CONTAINMENT: &str = "containment";
    /// Anything else.
    pub const INTERNAL: &str = "internal";
}

/// Every v1 frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    /// The agent introduces itself.
    Hello(Hello),
    /// The control plane accepts the agent.
    Welcome(Welcome),
    /// The agent's heartbeat.
    Ping(Ping),
    /// A request for the agent.
    Req(Req),
    /// The agent's answer to a request.
    Res(Res),
    /// Advisory progress of a request.
    Progress(Progress),
    /// A frame could not be handled.
    Error(ErrorFrame),
    /// The service types the agent holds now.
    Services(Services),
    /// The status of one service instance changed.
    Instance(InstanceStatus),
    /// The agent asks for a fresh identity before its own expires.
    Renew(Renew),
    /// The control plane issues a fresh identity (answer to `renew`).
    Identity(IdentityFrame),
}

/// `renew`: agent -> control plane, "issue me a fresh identity". The current one stays valid
/// for the control plane's overlap window after the new one is issued.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renew {}

/// `identity`: control plane -> agent, a fresh identity to store and use from the next
/// connection on. Never log it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdentityFrame {
    /// The new identity (`hid_...`).
    pub identity: SecretString,
    /// When it expires, ms since the Unix epoch.
    pub expires_at: i64,
}

fn max_frame_default() -> u64 {
    MAX_FRAME_BYTES as u64
}

/// `hello`: the first frame an agent sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The agent's version (semver).
    pub agent_version: String,
    /// The region the agent serves.
    pub region: String,
    /// The zone (cluster) the agent runs in.
    pub zone: String,
    /// The ops this agent executes.
    pub ops: Vec<String>,
    /// Protocol version; must be [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The largest frame the agent accepts; the control plane refuses larger requests at submit.
    #[serde(default = "max_frame_default")]
    pub max_frame_bytes: u64,
    /// The kinds its cluster serves cluster-scoped, lower-case, from API discovery when the
    /// connection opened (empty when discovery failed): the control plane refuses a project's
    /// request naming any of them, in any spelling, at submit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_scoped: Vec<String>,
}

/// `welcome`: the control plane's answer to a valid hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// How often to send `ping`, in seconds (fractions allowed).
    pub heartbeat_s: f64,
    /// The long-lived identity, only after a bootstrap exchange. Never log it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<SecretString>,
    /// Protocol version the control plane speaks.
    #[serde(default = "protocol_v1")]
    pub protocol: u32,
    /// When the identity in use (the one issued here, or the one presented) expires, ms since
    /// the Unix epoch; `None` when it never does. The agent sends `renew` before then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_expires_at: Option<i64>,
    /// The largest frame the control plane accepts from this agent.
    #[serde(default = "max_frame_default")]
    pub max_frame_bytes: u64,
}

fn protocol_v1() -> u32 {
    PROTOCOL_VERSION
}

/// `ping`: a heartbeat with health inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ping {
    /// Increments by one per heartbeat of a connection.
    pub seq: u64,
    /// What the agent observes.
    pub status: AgentStatus,
}

/// Health inputs an agent reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// Whether the agent's Kubernetes API server answered its last probe.
    pub k8s_reachable: bool,
    /// Why it is not reachable, or the server version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Requests executing now.
    #[serde(default)]
    pub in_flight: u32,
    /// Nodes in the agent's cluster at its last probe (`None`: not reported, or it may not list
    /// nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_count: Option<u32>,
    /// The cluster's allocatable capacity, summed over its nodes at the last probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<ops::Capacity>,
    /// The ResourceQuota use of its Harmony-managed project namespaces (`None`: not read yet,
    /// or an agent from before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<quota_use::QuotaReport>,
}

/// `req`: an op for the agent to execute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Req {
    /// Unique per request; redeliveries reuse it.
    pub id: String,
    /// The op name ([`Op`]); unknown names are answered with `unsupported_op`.
    pub op: String,
    /// The op's parameters, exactly as the caller sent them.
    #[serde(default)]
    pub params: RawJson,
    /// The project the op runs for, when a tenant's project submitted it: the agent makes the
    /// project present (namespace, quota) first and keeps the op inside its namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<tenancy::ProjectScope>,
}

impl Req {
    /// A request whose params are `params` serialized once.
    pub fn new(
        id: impl Into<String>,
        op: impl Into<String>,
        params: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            id: id.into(),
            op: op.into(),
            params: RawJson::from_serialize(params)?,
            project: None,
        })
    }
}

/// `res`: the outcome of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Res {
    /// The request's id.
    pub id: String,
    /// Whether the op succeeded.
    pub ok: bool,
    /// The op's result when `ok`, exactly as the agent encoded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<RawJson>,
    /// Why it failed when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl Res {
    /// A successful result, serialized once (a value that cannot be serialized becomes an
    /// `internal` error rather than a panic).
    pub fn ok(id: impl Into<String>, result: impl Serialize) -> Self {
        let id = id.into();
        match RawJson::from_serialize(&result) {
            Ok(raw) => Self::ok_raw(id, raw),
            Err(e) => Self::err(
                id,
                ErrorBody::new(code::INTERNAL, format!("cannot encode the result: {e}")),
            ),
        }
    }

    /// A successful result already encoded.
    pub fn ok_raw(id: impl Into<String>, result: RawJson) -> Self {
        Self {
            id: id.into(),
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// Parses the result into `T` (`null` when there is none).
    pub fn result_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match &self.result {
            Some(raw) => raw.parse(),
            None => serde_json::from_str("null"),
        }
    }

    /// A failure.
    pub fn err(id: impl Into<String>, error: ErrorBody) -> Self {
        Self {
            id: id.into(),
            ok: false,
            result: None,
            error: Some(error),
        }
    }
}

/// A machine-readable code and a message for people (never secret values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, derive_new::new)]
pub struct ErrorBody {
    /// One of [`code`].
    #[new(into)]
    pub code: String,
    /// What went wrong and what to do.
    #[new(into)]
    pub message: String,
    /// Changes made before the failure (apply ops); none for an error built with `new`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[new(default)]
    pub applied: Vec<WireChange>,
}

/// `progress`: advisory progress of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The request's id.
    pub id: String,
    /// A short stage name (`started`, `applying`, `done`).
    pub stage: String,
    /// Detail for people.
    #[serde(default)]
    pub detail: String,
}

/// `error`: a frame could not be handled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorFrame {
    /// One of [`code`].
    pub code: String,
    /// What was wrong.
    pub message: String,
    /// The request id, when the frame had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl ErrorFrame {
    /// An error frame for a decode failure.
    pub fn from_decode(e: &DecodeError) -> Self {
        Self {
            code: e.code().into(),
            message: e.to_string(),
            id: None,
        }
    }
}

#[cfg(test)]
mod tests;
