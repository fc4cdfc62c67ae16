//! Executes v1 ops on the agent's cluster, once per request id.
//!
//! A request is admitted by the in-memory [`DedupeWindow`] (a redelivery of a request this
//! process runs or ran is answered without an API call), then, when its op has an effect, by its
//! record in the cluster ([`record`], [`record_store`]): the record is created BEFORE the op runs
//! and completed with the `res` before the result is sent, so a redelivery after the agent's
//! restart is answered with the first result, or resumed ([`resume`]) when the agent died
//! mid-op. Every result is fitted to the control plane's frame limit ([`limits`]).
//!
//! A request carrying a project ([`Req::project`]) first makes the project present in the cluster
//! ([`presence`]: namespace, quota, limits, the agent's RoleBinding) and is kept inside the
//! project's namespace ([`containment`]).

pub mod containment;
pub mod limits;
pub mod ops;
pub mod presence;
pub mod quota_use;
pub mod record;
pub mod record_store;
pub mod resume;
pub mod window;

pub use ops::{error_code, quantity, wire_change};
pub use window::{Admission, DedupeWindow};

use harmony::domain::capability::CapabilityError;
use harmony::infra::kube::K8sTopology;
use harmony_agent_protocol::{ErrorBody, Frame, MAX_FRAME_BYTES, Op, Progress, RawJson, Req, Res};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

use crate::cluster::Cluster;
use crate::providers::registry::Registry;
use record::{Decision, Resume};
use record_store::{Begun, RecordStore};

/// Runs ops against the cluster and routes the `service_*` ops to the provider registry.
pub struct Executor {
    cluster: Arc<Cluster>,
    registry: Arc<Registry>,
    window: Mutex<DedupeWindow>,
    records: Arc<RecordStore>,
    outbox: mpsc::UnboundedSender<Frame>,
    /// The control plane's `max_frame_bytes` from the last welcome.
    peer_max_frame: AtomicU64,
    /// Which projects are present, and who the agent binds in their namespaces.
    presence: presence::Presence,
    /// Which kinds are namespaced (containment of project requests).
    kinds: containment::KindScopes,
    /// The last cluster-scoped kinds discovery gave (see [`Executor::cluster_scoped_kinds`]).
    cluster_scoped: Mutex<Vec<String>>,
}

impl Executor {
    /// An executor for `cluster`, serving `service_*` ops from `registry`, keeping request
    /// records in `records` (with `window` in front) and sending results and progress to `outbox`.
    pub fn new(
        cluster: Arc<Cluster>,
        registry: Arc<Registry>,
        window: DedupeWindow,
        records: Arc<RecordStore>,
        outbox: mpsc::UnboundedSender<Frame>,
    ) -> Self {
        Self {
            cluster,
            registry,
            window: Mutex::new(window),
            records,
            outbox,
            peer_max_frame: AtomicU64::new(MAX_FRAME_BYTES as u64),
            presence: presence::Presence::new(None),
            kinds: containment::KindScopes::default(),
            cluster_scoped: Mutex::new(Vec::new()),
        }
    }

    /// Project presence as `presence` says (by default: no RoleBinding, 30 s quota wait).
    pub fn with_presence(mut self, presence: presence::Presence) -> Self {
        self.presence = presence;
        self
    }

    /// A new connection to the control plane: what is present is checked again.
    pub fn new_connection(&self) {
        self.presence.forget();
    }

    /// Sets the control plane's frame limit (from its welcome); results above it are answered
    /// with `result_too_large`.
    pub fn set_peer_max_frame(&self, bytes: u64) {
        self.peer_max_frame.store(bytes, Ordering::Relaxed);
    }

    /// A ready topology for the mode; a failed preparation is not cached.
    pub async fn topology(
        &self,
        dry_run: bool,
        prune: bool,
    ) -> Result<Arc<K8sTopology>, CapabilityError> {
        self.cluster.topology(dry_run, prune).await
    }

    /// Probes the cluster: its version, or why it cannot be reached.
    pub async fn probe(&self) -> Result<String, String> {
        let t = self
            .topology(false, false)
            .await
            .map_err(|e| e.to_string())?;
        let client = t.client().map_err(|e| e.to_string())?;
        match tokio::time::timeout(Duration::from_secs(5), client.apiserver_version()).await {
            Ok(Ok(info)) => Ok(info.git_version),
            Ok(Err(e)) => Err(format!("API server unreachable: {e}")),
            Err(_) => Err("API server did not answer within 5s".into()),
        }
    }

    /// The kinds the cluster serves cluster-scoped (lower-case), for the hello: from discovery
    /// now, or the last list discovery gave when it does not answer (empty before any).
    pub async fn cluster_scoped_kinds(&self) -> Vec<String> {
        let found = match self.topology(false, false).await.and_then(|t| t.client()) {
            Ok(client) => containment::cluster_scoped_kinds(&client).await,
            Err(e) => {
                log::warn!("no cluster client for API discovery: {e}");
                None
            }
        };
        let mut last = self
            .cluster_scoped
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(kinds) = found {
            *last = kinds;
        }
        last.clone()
    }

    /// Requests executing now.
    pub fn in_flight(&self) -> usize {
        self.window.lock().map(|d| d.in_flight()).unwrap_or(0)
    }

    /// Handles a request: executes it once, answering redeliveries with the first result.
    pub fn submit(self: &Arc<Self>, req: Req) {
        let admission = match self.window.lock() {
            Ok(mut d) => d.admit(&req.id),
            Err(_) => Admission::Execute,
        };
        match admission {
            Admission::Answer(res) => {
                log::info!(
                    "request {} redelivered; answering with its first result",
                    req.id
                );
                let res = limits::fit(res, self.peer_max_frame.load(Ordering::Relaxed));
                let _ = self.outbox.send(Frame::Res(res));
            }
            Admission::InFlight => {
                log::info!("request {} redelivered while still executing", req.id);
            }
            Admission::Execute => {
                let me = self.clone();
                tokio::spawn(async move {
                    let _ = me.outbox.send(Frame::Progress(Progress {
                        id: req.id.clone(),
                        stage: "started".into(),
                        detail: req.op.clone(),
                    }));
                    let (res, record) = me.answer(&req).await;
                    let res = limits::fit(res, me.peer_max_frame.load(Ordering::Relaxed));
                    if record {
                        // Recorded before it is sent: a redelivery after a crash from here on
                        // gets this same answer.
                        me.records.finish(&res).await;
                    }
                    if let Ok(mut d) = me.window.lock() {
                        d.finish(&res);
                    }
                    let _ = me.outbox.send(Frame::Res(res));
                });
            }
        }
    }

    /// The answer to `req`, and whether it must be written to the request's record.
    async fn answer(&self, req: &Req) -> (Res, bool) {
        let Some(op) = Op::parse(&req.op) else {
            return (Res::err(&req.id, ops::unsupported(&req.op)), false);
        };
        let scoped;
        let req = match &req.project {
            Some(scope) => match self.for_project(op, req, scope).await {
                Ok(r) => {
                    scoped = r;
                    &scoped
                }
                Err(e) => {
                    log::info!("request {} failed: {}", req.id, e.message);
                    return (Res::err(&req.id, e), false);
                }
            },
            None => req,
        };
        if !record::has_effect(op) {
            log::info!("executing request {} ({op})", req.id);
            return (result(req, self.execute(op, req).await), false);
        }
        let begun = match self.records.begin(req).await {
            Ok(b) => b,
            Err(e) => {
                log::warn!("request {} not executed: {}", req.id, e.message);
                return (Res::err(&req.id, e), false);
            }
        };
        let record = match begun {
            Begun::Fresh => {
                log::info!("executing request {} ({op})", req.id);
                return (result(req, self.execute(op, req).await), true);
            }
            Begun::Existing(record) => *record,
        };
        match record::decide(&record, req, op) {
            Decision::Answer(res) => {
                log::info!(
                    "request {} was finished by an earlier agent process; answering with its recorded result",
                    req.id
                );
                (res, false)
            }
            Decision::Refuse(e) => {
                log::warn!("request {} refused: {}", req.id, e.message);
                (Res::err(&req.id, e), false)
            }
            Decision::Resume(how) => {
                log::warn!(
                    "request {} ({op}) was started by an earlier agent process that never finished it; resuming ({how:?})",
                    req.id
                );
                let out = match how {
                    Resume::Reapply { since } => self.reapply(req, &since).await,
                    Resume::StatusInsteadOfCreate => self.status_instead_of_create(req).await,
                    Resume::Rerun => self.execute(op, req).await,
                };
                (result(req, out), true)
            }
        }
    }
}

fn result(req: &Req, out: Result<RawJson, ErrorBody>) -> Res {
    match out {
        Ok(raw) => Res::ok_raw(&req.id, raw),
        Err(error) => {
            log::info!("request {} failed: {}", req.id, error.message);
            Res::err(&req.id, error)
        }
    }
}
