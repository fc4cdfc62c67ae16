//! Executes v1 ops on the agent's cluster through `K8sTopology` (server-side apply with field
//! manager `harmony-agent`) and keeps a dedupe window so a redelivered request is answered with
//! its first result instead of acting twice.

use harmony::domain::capability::{ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef};
use harmony::domain::{ObjectChange, RunContext, Topology};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony_agent_protocol::ops::{
    ApplyManifestsParams, Capacity, ChangesResult, DeleteManifestsParams, GetObjectsParams,
    GetObjectsResult, InventoryResult,
};
use harmony_agent_protocol::{
    ErrorBody, Frame, Op, Progress, Req, Res, ServiceCreateParams, ServiceRef, WireChange,
    WireFieldChange, WireObjectRef, code,
};
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex as AsyncMutex, mpsc};

use crate::providers::ProviderError;
use crate::providers::registry::Registry;

/// The field manager of every apply the agent makes.
pub const FIELD_MANAGER: &str = "harmony-agent";

enum Seen {
    InFlight,
    Done(Res),
}

/// Remembers recent request ids and their results.
pub struct DedupeWindow {
    entries: HashMap<String, (Seen, Instant)>,
    order: VecDeque<String>,
    capacity: usize,
    ttl: Duration,
}

/// What to do with an incoming request.
pub enum Admission {
    /// New: execute it.
    Execute,
    /// Executing now: its result will be sent when done.
    InFlight,
    /// Done already: answer with this first result.
    Answer(Res),
}

impl DedupeWindow {
    /// A window of at most `capacity` ids kept at most `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    fn evict(&mut self) {
        let now = Instant::now();
        while let Some(front) = self.order.front() {
            let expired = self.entries.get(front).is_none_or(|(s, t)| {
                matches!(s, Seen::Done(_)) && now.duration_since(*t) > self.ttl
            });
            if expired || self.order.len() > self.capacity {
                if let Some(id) = self.order.pop_front() {
                    self.entries.remove(&id);
                }
            } else {
                break;
            }
        }
    }

    /// Admits request `id`.
    pub fn admit(&mut self, id: &str) -> Admission {
        self.evict();
        match self.entries.get(id) {
            Some((Seen::InFlight, _)) => Admission::InFlight,
            Some((Seen::Done(res), _)) => Admission::Answer(res.clone()),
            None => {
                self.entries
                    .insert(id.to_string(), (Seen::InFlight, Instant::now()));
                self.order.push_back(id.to_string());
                Admission::Execute
            }
        }
    }

    /// Records the result of `id`.
    pub fn finish(&mut self, res: &Res) {
        if let Some(entry) = self.entries.get_mut(&res.id) {
            *entry = (Seen::Done(res.clone()), Instant::now());
        }
    }

    /// Requests executing now.
    pub fn in_flight(&self) -> usize {
        self.entries
            .values()
            .filter(|(s, _)| matches!(s, Seen::InFlight))
            .count()
    }
}

/// The agent's cluster: one ready `K8sTopology` per (dry run, prune) mode, shared by the ops
/// and the built-in service providers so they reuse one connection.
pub struct Cluster {
    target: KubeTarget,
    name: String,
    topologies: AsyncMutex<HashMap<(bool, bool), Arc<K8sTopology>>>,
}

impl Cluster {
    /// The cluster at `target`, named `name` in messages; nothing is contacted yet.
    pub fn new(name: String, target: KubeTarget) -> Self {
        Self {
            target,
            name,
            topologies: AsyncMutex::new(HashMap::new()),
        }
    }

    /// A ready topology for the mode; a failed preparation is not cached.
    pub async fn topology(
        &self,
        dry_run: bool,
        prune: bool,
    ) -> Result<Arc<K8sTopology>, CapabilityError> {
        let mut map = self.topologies.lock().await;
        if let Some(t) = map.get(&(dry_run, prune)) {
            return Ok(t.clone());
        }
        let ctx = RunContext {
            plan: dry_run,
            prune,
            ..RunContext::default()
        };
        let topology = K8sTopology::new(self.name.clone(), self.target.clone(), &ctx)
            .with_field_manager(FIELD_MANAGER);
        topology
            .ensure_ready()
            .await
            .map_err(|e| CapabilityError::Unreachable {
                server: format!("the Kubernetes API of {}", self.name),
                reason: e.reason,
            })?;
        let topology = Arc::new(topology);
        map.insert((dry_run, prune), topology.clone());
        Ok(topology)
    }
}

/// Runs ops against the cluster and routes the `service_*` ops to the provider registry.
pub struct Executor {
    cluster: Arc<Cluster>,
    registry: Arc<Registry>,
    dedupe: Mutex<DedupeWindow>,
    outbox: mpsc::UnboundedSender<Frame>,
}

fn error_code(e: &CapabilityError) -> &'static str {
    match e {
        CapabilityError::InvalidObject { .. } => code::INVALID_OBJECT,
        CapabilityError::Rejected { .. } => code::REJECTED,
        CapabilityError::UnknownKind { .. } => code::UNKNOWN_KIND,
        CapabilityError::Conflict { .. } => code::CONFLICT,
        CapabilityError::Unreachable { .. } => code::UNREACHABLE,
        CapabilityError::Timeout { .. } => code::TIMEOUT,
        CapabilityError::Io { .. } | CapabilityError::Unsupported { .. } => code::UNSUPPORTED,
    }
}

fn body(e: &CapabilityError) -> ErrorBody {
    ErrorBody::new(error_code(e), e.to_string())
}

/// Converts a domain change to its wire form.
pub fn wire_change(c: &ObjectChange) -> WireChange {
    WireChange {
        object: c.object.clone(),
        action: c.action.to_string(),
        location: c.location.clone(),
        diff: c
            .diff
            .iter()
            .map(|d| WireFieldChange {
                path: d.path.clone(),
                old: d.old.clone(),
                new: d.new.clone(),
            })
            .collect(),
    }
}

fn object_ref(r: &WireObjectRef) -> ObjectRef {
    ObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

fn params<T: for<'de> serde::Deserialize<'de>>(op: Op, v: &Value) -> Result<T, ErrorBody> {
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v.clone()
    };
    serde_json::from_value(v).map_err(|e| {
        ErrorBody::new(
            code::INVALID_PARAMS,
            format!("{op} params: {e}; see harmony_agent_protocol::ops for the schema"),
        )
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ErrorBody> {
    serde_json::to_value(v).map_err(|e| ErrorBody::new(code::INTERNAL, e.to_string()))
}

/// A Kubernetes quantity in base units (`500m` = 0.5, `1Ki` = 1024); `None` when malformed.
pub fn quantity(s: &str) -> Option<f64> {
    harmony::types::Quantity::parse(s.trim())
        .ok()
        .map(|q| q.value())
}

fn add(
    total: &mut Capacity,
    resources: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) {
    let Some(r) = resources else { return };
    let get = |k: &str| r.get(k).and_then(|q| quantity(&q.0)).unwrap_or(0.0);
    total.cpu_millis += (get("cpu") * 1000.0).round() as u64;
    total.memory_bytes += get("memory").round() as u64;
    total.pods += get("pods").round() as u64;
}

impl Executor {
    /// An executor for `cluster`, serving `service_*` ops from `registry` and sending results
    /// and progress to `outbox`.
    pub fn new(
        cluster: Arc<Cluster>,
        registry: Arc<Registry>,
        dedupe: DedupeWindow,
        outbox: mpsc::UnboundedSender<Frame>,
    ) -> Self {
        Self {
            cluster,
            registry,
            dedupe: Mutex::new(dedupe),
            outbox,
        }
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

    /// Requests executing now.
    pub fn in_flight(&self) -> usize {
        self.dedupe.lock().map(|d| d.in_flight()).unwrap_or(0)
    }

    /// Handles a request: executes it once, answering redeliveries from the dedupe window.
    pub fn submit(self: &Arc<Self>, req: Req) {
        let admission = match self.dedupe.lock() {
            Ok(mut d) => d.admit(&req.id),
            Err(_) => Admission::Execute,
        };
        match admission {
            Admission::Answer(res) => {
                log::info!(
                    "request {} redelivered; answering with its first result",
                    req.id
                );
                let _ = self.outbox.send(Frame::Res(res));
            }
            Admission::InFlight => {
                log::info!("request {} redelivered while still executing", req.id);
            }
            Admission::Execute => {
                let me = self.clone();
                tokio::spawn(async move {
                    log::info!("executing request {} ({})", req.id, req.op);
                    let _ = me.outbox.send(Frame::Progress(Progress {
                        id: req.id.clone(),
                        stage: "started".into(),
                        detail: req.op.clone(),
                    }));
                    let res = match me.execute(&req).await {
                        Ok(result) => Res::ok(req.id.clone(), result),
                        Err(error) => {
                            log::info!("request {} failed: {}", req.id, error.message);
                            Res::err(req.id.clone(), error)
                        }
                    };
                    if let Ok(mut d) = me.dedupe.lock() {
                        d.finish(&res);
                    }
                    let _ = me.outbox.send(Frame::Res(res));
                });
            }
        }
    }

    async fn execute(&self, req: &Req) -> Result<Value, ErrorBody> {
        let Some(op) = Op::parse(&req.op) else {
            return Err(ErrorBody::new(
                code::UNSUPPORTED_OP,
                format!(
                    "op {:?} is not supported by this agent; v1 ops: apply_manifests, delete_manifests, get_objects, get_inventory, service_create, service_delete, service_status",
                    req.op.chars().take(64).collect::<String>()
                ),
            ));
        };
        match op {
            Op::ApplyManifests => {
                let p: ApplyManifestsParams = params(op, &req.params)?;
                let objects = p
                    .manifests
                    .into_iter()
                    .map(K8sObject::new)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| body(&e))?;
                let _ = self.outbox.send(Frame::Progress(Progress {
                    id: req.id.clone(),
                    stage: "applying".into(),
                    detail: format!("{} object(s)", objects.len()),
                }));
                let t = self
                    .topology(p.dry_run, p.prune)
                    .await
                    .map_err(|e| body(&e))?;
                let options = ApplyOptions {
                    force_conflicts: p.force_conflicts,
                    owner: p.owner,
                };
                match t.apply(&objects, &options).await {
                    Ok(changes) => to_value(&ChangesResult {
                        changes: changes.iter().map(wire_change).collect(),
                    }),
                    Err(f) => {
                        let mut b = body(&f.error);
                        b.applied = f.applied.iter().map(wire_change).collect();
                        Err(b)
                    }
                }
            }
            Op::DeleteManifests => {
                let p: DeleteManifestsParams = params(op, &req.params)?;
                let t = self
                    .topology(p.dry_run, false)
                    .await
                    .map_err(|e| body(&e))?;
                let mut changes = Vec::new();
                for r in &p.objects {
                    match t.delete(&object_ref(r)).await {
                        Ok(c) => changes.push(wire_change(&c)),
                        Err(e) => {
                            let mut b = body(&e);
                            b.applied = changes;
                            return Err(b);
                        }
                    }
                }
                to_value(&ChangesResult { changes })
            }
            Op::GetObjects => {
                let p: GetObjectsParams = params(op, &req.params)?;
                let t = self.topology(false, false).await.map_err(|e| body(&e))?;
                let mut objects = Vec::new();
                for r in &p.objects {
                    let o = t.get(&object_ref(r)).await.map_err(|e| body(&e))?;
                    objects.push(o.map(|o| o.value().clone()));
                }
                to_value(&GetObjectsResult { objects })
            }
            Op::GetInventory => {
                let t = self.topology(false, false).await.map_err(|e| body(&e))?;
                let client = t.client().map_err(|e| body(&e))?;
                let unreachable = |e: kube::Error| {
                    ErrorBody::new(code::UNREACHABLE, format!("listing nodes: {e}"))
                };
                let version = client.apiserver_version().await.map_err(unreachable)?;
                let nodes = kube::Api::<Node>::all(client)
                    .list(&Default::default())
                    .await
                    .map_err(unreachable)?;
                let mut inv = InventoryResult {
                    kubernetes_version: version.git_version,
                    ..InventoryResult::default()
                };
                for n in &nodes.items {
                    inv.nodes += 1;
                    let status = n.status.as_ref();
                    let ready = status
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    if ready {
                        inv.ready_nodes += 1;
                    }
                    add(&mut inv.capacity, status.and_then(|s| s.capacity.as_ref()));
                    add(
                        &mut inv.allocatable,
                        status.and_then(|s| s.allocatable.as_ref()),
                    );
                }
                to_value(&inv)
            }
            Op::ServiceCreate => {
                let p: ServiceCreateParams = params(op, &req.params)?;
                let status = self
                    .registry
                    .create(&p.instance_id, &p.service_type, &p.spec)
                    .await
                    .map_err(|e| provider_body(&e))?;
                to_value(&status)
            }
            Op::ServiceDelete => {
                let p: ServiceRef = params(op, &req.params)?;
                let status = self
                    .registry
                    .delete(&p.instance_id, &p.service_type)
                    .await
                    .map_err(|e| provider_body(&e))?;
                to_value(&status)
            }
            Op::ServiceStatus => {
                let p: ServiceRef = params(op, &req.params)?;
                let status = self
                    .registry
                    .status(&p.instance_id, &p.service_type)
                    .await
                    .map_err(|e| provider_body(&e))?;
                to_value(&status)
            }
        }
    }
}

fn provider_body(e: &ProviderError) -> ErrorBody {
    ErrorBody::new(e.code(), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_like_kubernetes() {
        assert_eq!(quantity("500m"), Some(0.5));
        assert_eq!(quantity("4"), Some(4.0));
        assert_eq!(quantity("16Gi"), Some(16.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("12Zi"), None);
    }

    #[test]
    fn the_dedupe_window_answers_redeliveries_with_the_first_result() {
        let mut w = DedupeWindow::new(2, Duration::from_secs(60));
        assert!(matches!(w.admit("a"), Admission::Execute));
        assert!(matches!(w.admit("a"), Admission::InFlight));
        assert_eq!(w.in_flight(), 1);
        w.finish(&Res::ok("a", serde_json::json!({"n": 1})));
        assert!(
            matches!(w.admit("a"), Admission::Answer(r) if r.result == Some(serde_json::json!({"n": 1})))
        );
        // Capacity 2: the oldest finished id falls out.
        assert!(matches!(w.admit("b"), Admission::Execute));
        w.finish(&Res::ok("b", Value::Null));
        assert!(matches!(w.admit("c"), Admission::Execute));
        assert!(matches!(w.admit("a"), Admission::Execute));
    }
}
