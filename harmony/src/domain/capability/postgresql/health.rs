//! Replication health: what a status read observes on each site, and how a replica is judged
//! against the primary. Plain values; the measuring is in `harmony::infra::cnpg::replication`.
//!
//! What is measured where (the full account is in `docs/modules/multisite_postgresql.md`):
//! - on every site, through its Kubernetes API: the CloudNativePG `Cluster` status (phase,
//!   ready instances, current primary, system identifier), written by the operator;
//! - on the primary, over its exposed endpoint (the passthrough Route or load balancer the
//!   replicas use, with the replicas' own `streaming_replica` client certificate):
//!   `pg_is_in_recovery()`, `pg_current_wal_lsn()`, `now()` and the system identifier;
//! - on a replica that has its own exposed endpoint, the same way: `pg_is_in_recovery()`,
//!   `pg_last_wal_receive_lsn()`, `pg_last_wal_replay_lsn()`, `pg_get_wal_replay_pause_state()`,
//!   `pg_last_xact_replay_timestamp()` and whether `pg_stat_wal_receiver` has a WAL receiver.
//!   A replica without an endpoint gets only its Kubernetes status: its streaming is `Unknown`.

use serde::{Serialize, Serializer};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::PrimaryExposure;

/// A WAL position (`pg_lsn`): bytes from the start of the write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// Parses PostgreSQL's text form, two hexadecimal halves: `16/B374D848`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a WAL position (expected hex/hex, e.g. 0/3018AC0)");
        let (hi, lo) = text.split_once('/').ok_or_else(bad)?;
        let hi = u32::from_str_radix(hi, 16).map_err(|_| bad())?;
        let lo = u32::from_str_radix(lo, 16).map_err(|_| bad())?;
        Ok(Self((u64::from(hi) << 32) | u64::from(lo)))
    }

    /// How many bytes of WAL lie after `earlier` up to `self` (0 when `earlier` is not before).
    pub fn bytes_after(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl Serialize for Lsn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A site's role in a replicated cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SiteRole {
    /// Accepts writes; the replicas stream from it.
    Primary,
    /// Streams from the primary.
    Replica,
}

impl fmt::Display for SiteRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Primary => "primary",
            Self::Replica => "replica",
        })
    }
}

/// How to read one site's replication status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusProbe {
    /// What the site should be.
    pub role: SiteRole,
    /// How the site's cluster is reached from outside it; `None` when it is not exposed, and
    /// then only its Kubernetes status is read.
    pub endpoint: Option<PrimaryExposure>,
    /// Connect to this address instead of resolving the endpoint's host; the TLS server name
    /// (SNI) and the certificate check still use the host (as curl's `--connect-to`).
    pub connect_to: Option<SocketAddr>,
    /// The limit for connecting and querying.
    pub timeout: Duration,
}

impl StatusProbe {
    /// A probe with a 10 s limit that resolves the endpoint's host.
    pub fn new(role: SiteRole, endpoint: Option<PrimaryExposure>) -> Self {
        Self {
            role,
            endpoint,
            connect_to: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// A value that was read, or why it was not.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    /// What was read.
    Read(T),
    /// Why nothing was read (never with secret values).
    NotRead(String),
}

impl<T> Reading<T> {
    /// The value, if it was read.
    pub fn value(&self) -> Option<&T> {
        match self {
            Self::Read(v) => Some(v),
            Self::NotRead(_) => None,
        }
    }
}

/// A CloudNativePG `Cluster` as its site's Kubernetes API reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClusterStatus {
    /// `status.phase` (`Cluster in healthy state`, ...).
    pub phase: Option<String>,
    /// `status.readyInstances`.
    pub ready_instances: Option<u32>,
    /// `spec.instances`.
    pub instances: Option<u32>,
    /// `spec.replica.enabled`: the operator runs it as a replica cluster.
    pub replica_mode: bool,
    /// `status.currentPrimary`: the instance (pod) that is the (designated) primary.
    pub current_primary: Option<String>,
    /// `status.systemID`: PostgreSQL's system identifier.
    pub system_id: Option<String>,
}

/// What SQL read on a site's exposed endpoint, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SqlReading {
    /// `pg_is_in_recovery()`: true on a replica.
    pub in_recovery: bool,
    /// `system_identifier` of `pg_control_system()`: the same on a primary and its replicas.
    pub system_id: String,
    /// `now()` on that server, in seconds since the Unix epoch.
    pub clock_epoch: f64,
    /// `pg_current_wal_lsn()` (primary only).
    pub current_lsn: Option<Lsn>,
    /// `pg_last_wal_receive_lsn()` (replica only; `None` before anything was streamed).
    pub receive_lsn: Option<Lsn>,
    /// `pg_last_wal_replay_lsn()` (replica only).
    pub replay_lsn: Option<Lsn>,
    /// `pg_get_wal_replay_pause_state()`: `not paused`, `pause requested` or `paused`.
    pub replay_pause_state: Option<String>,
    /// `pg_last_xact_replay_timestamp()`: commit time of the last replayed transaction, in the
    /// primary's clock, seconds since the Unix epoch.
    pub last_replayed_commit_epoch: Option<f64>,
    /// `pg_stat_wal_receiver` has a row: a WAL receiver process runs.
    pub wal_receiver_running: bool,
    /// `pg_stat_wal_receiver.status` (`streaming`, ...); `None` unless the role may read it
    /// (`pg_read_all_stats`), which `streaming_replica` may not.
    pub wal_receiver_status: Option<String>,
    /// Rows of `pg_stat_replication`: WAL senders (standbys connected to this server).
    pub wal_senders: u32,
}

/// Everything one site's status read observed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteObservation {
    /// The Kubernetes side.
    pub cluster: Reading<ClusterStatus>,
    /// The SQL side.
    pub sql: Reading<SqlReading>,
    /// The site's cluster has an endpoint outside its site (SQL was attempted through it).
    pub exposed: bool,
}

impl SiteObservation {
    /// Nothing observed, for `why` (render mode, a missing site, ...).
    pub fn nothing(why: impl Into<String>) -> Self {
        let why = why.into();
        Self {
            cluster: Reading::NotRead(why.clone()),
            sql: Reading::NotRead(why),
            exposed: false,
        }
    }
}

/// Whether a replica streams from the primary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum Streaming {
    /// In recovery, a WAL receiver runs, replay is not paused, same system as the primary.
    Streaming,
    /// Measured, and it does not stream: why.
    NotStreaming(String),
    /// Not measured: why.
    Unknown(String),
}

/// One site's line of the status table and of the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteHealth {
    /// The site's name.
    pub site: String,
    /// What it should be.
    pub role: SiteRole,
    /// The `Cluster`'s `status.phase`.
    pub phase: Option<String>,
    /// `status.readyInstances`.
    pub ready_instances: Option<u32>,
    /// `spec.instances`.
    pub instances: Option<u32>,
    /// Replicas only.
    pub streaming: Option<Streaming>,
    /// Replicas: the primary's `pg_current_wal_lsn()` minus this replica's
    /// `pg_last_wal_replay_lsn()`, both read in one status read (primary first).
    pub lag_bytes: Option<u64>,
    /// Replicas: 0 when `lag_bytes` is 0; otherwise the primary's `now()` minus the commit
    /// time of the last transaction the replica replayed. An upper bound: after a long idle
    /// period it counts the idle time until the replica replays the first new commit.
    pub lag_seconds: Option<f64>,
    /// The primary's current WAL position, or the replica's replay position.
    pub lsn: Option<Lsn>,
    /// What was not measured and why, and anything wrong that is not a lag.
    pub notes: Vec<String>,
    /// The site's cluster has an endpoint outside its site; without one, a replica's streaming
    /// cannot be measured from outside and only its Kubernetes status is known.
    pub exposed: bool,
}

/// CloudNativePG's `status.phase` of a cluster whose instances are all up.
pub const CNPG_HEALTHY_PHASE: &str = "Cluster in healthy state";

/// The replication status of a cluster across its sites, judged against a lag threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicationReport {
    /// A replica is within the threshold when it streams and lags at most this many bytes.
    pub max_lag_bytes: u64,
    /// The primary first, then the replicas in their order.
    pub sites: Vec<SiteHealth>,
}

mod assess;
