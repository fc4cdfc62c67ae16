//! The v1 ops on the agent's cluster (server-side apply with field manager `harmony-agent`) and
//! the `service_*` ops routed to the provider registry. Params are parsed from the request's raw
//! JSON; results are serialized once and travel as raw JSON.

use harmony::domain::capability::{
    ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, Readiness,
};
use harmony::domain::{ObjectChange, WaitPolicy, capture_progress};
use harmony_agent_protocol::ops::{
    ApplyManifestsParams, Capacity, ChangesResult, DeleteManifestsParams, GetObjectsParams,
    GetObjectsResult, InventoryResult,
};
use harmony_agent_protocol::{
    ErrorBody, Frame, Op, Progress, RawJson, Req, ServiceCreateParams, ServiceRef, WireChange,
    WireFieldChange, WireObjectRef, WireStatus, code,
};
use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;
use std::time::Duration;

use super::Executor;
use crate::providers::ProviderError;

/// The protocol error code of a cluster error (one to one; `AgentTopology` maps them back).
pub fn error_code(e: &CapabilityError) -> &'static str {
    match e {
        CapabilityError::InvalidObject { .. } => code::INVALID_OBJECT,
        CapabilityError::Rejected { .. } => code::REJECTED,
        CapabilityError::UnknownKind { .. } => code::UNKNOWN_KIND,
        CapabilityError::Conflict { .. } => code::CONFLICT,
        CapabilityError::Forbidden { .. } | CapabilityError::Credentials { .. } => code::FORBIDDEN,
        CapabilityError::QuotaExceeded { .. } => code::QUOTA_EXCEEDED,
        CapabilityError::NotFound { .. } => code::NOT_FOUND,
        CapabilityError::TooLarge { .. } => code::TOO_LARGE,
        CapabilityError::Unreachable { .. } => code::UNREACHABLE,
        CapabilityError::Timeout { .. } => code::TIMEOUT,
        CapabilityError::NotCurrent { .. } => code::NOT_CURRENT,
        CapabilityError::Io { .. } | CapabilityError::Unsupported { .. } => code::UNSUPPORTED,
    }
}

pub(super) fn body(e: &CapabilityError) -> ErrorBody {
    ErrorBody::new(error_code(e), e.to_string())
}

pub(super) fn provider_body(e: &ProviderError) -> ErrorBody {
    ErrorBody::new(e.code(), e.to_string())
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
        status: c.status.as_ref().map(|s| WireStatus {
            state: wire_state(s.status.state).into(),
            reason: s.status.reason.clone(),
            message: s.status.message.clone(),
            time_to_current_ms: s.time_to_current_s.map(|t| (t * 1000.0).round() as u64),
        }),
    }
}

/// The stage and detail of a progress frame for one of the apply's progress lines: the wait's
/// lines (`waiting for 3 object(s) to be current`, `waiting: 1 of 3 current; ...`,
/// `3 object(s) current`) are stage `waiting` without their own `waiting: ` prefix (the caller
/// shows `stage: detail`), the others (`1 namespace(s) and CRD(s) ready, applying 2
/// object(s)`, `pruning ...`) stage `applying`.
fn progress_stage(line: &str) -> (&'static str, &str) {
    if let Some(rest) = line.strip_prefix("waiting: ") {
        ("waiting", rest)
    } else if line.starts_with("waiting for ") || line.ends_with(" current") {
        ("waiting", line)
    } else {
        ("applying", line)
    }
}

/// The wire spelling of a readiness (`in_progress`), as the JSON report spells it.
fn wire_state(r: Readiness) -> &'static str {
    match r {
        Readiness::Current => "current",
        Readiness::InProgress => "in_progress",
        Readiness::Failed => "failed",
        Readiness::NotFound => "not_found",
    }
}

pub(super) fn object_ref(r: &WireObjectRef) -> ObjectRef {
    ObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

/// Parses `op`'s params from the request's raw JSON (`null` or absent is `{}`).
pub(super) fn params<T: serde::de::DeserializeOwned>(
    op: Op,
    raw: &RawJson,
) -> Result<T, ErrorBody> {
    let parsed = if raw.is_null() {
        serde_json::from_str("{}")
    } else {
        raw.parse()
    };
    parsed.map_err(|e| {
        ErrorBody::new(
            code::INVALID_PARAMS,
            format!("{op} params: {e}; see harmony_agent_protocol::ops for the schema"),
        )
    })
}

/// Serializes a result once.
pub(super) fn raw<T: serde::Serialize>(v: &T) -> Result<RawJson, ErrorBody> {
    RawJson::from_serialize(v)
        .map_err(|e| ErrorBody::new(code::INTERNAL, format!("cannot encode the result: {e}")))
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

/// The `unsupported_op` error for an op name v1 does not define.
pub(super) fn unsupported(op: &str) -> ErrorBody {
    ErrorBody::new(
        code::UNSUPPORTED_OP,
        format!(
            "op {:?} is not supported by this agent; v1 ops: apply_manifests, delete_manifests, get_objects, get_inventory, service_create, service_delete, service_status",
            op.chars().take(64).collect::<String>()
        ),
    )
}

impl Executor {
    /// Runs `op` once.
    pub(super) async fn execute(&self, op: Op, req: &Req) -> Result<RawJson, ErrorBody> {
        match op {
            Op::ApplyManifests => raw(&self.apply(req).await?),
            Op::DeleteManifests => {
                let p: DeleteManifestsParams = params(op, &req.params)?;
                let t = self
                    .cluster
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
                raw(&ChangesResult { changes })
            }
            Op::GetObjects => {
                let p: GetObjectsParams = params(op, &req.params)?;
                let t = self
                    .cluster
                    .topology(false, false)
                    .await
                    .map_err(|e| body(&e))?;
                let mut objects = Vec::new();
                for r in &p.objects {
                    let o = t.get(&object_ref(r)).await.map_err(|e| body(&e))?;
                    objects.push(o.map(|o| o.value().clone()));
                }
                raw(&GetObjectsResult { objects })
            }
            Op::GetInventory => raw(&self.inventory().await?),
            Op::ServiceCreate => {
                let p: ServiceCreateParams = params(op, &req.params)?;
                let status = self
                    .registry
                    .create(&p.instance_id, &p.service_type, &p.spec)
                    .await
                    .map_err(|e| provider_body(&e))?;
                raw(&status)
            }
            Op::ServiceDelete => {
                let p: ServiceRef = params(op, &req.params)?;
                let status = self
                    .registry
                    .delete(&p.instance_id, &p.service_type)
                    .await
                    .map_err(|e| provider_body(&e))?;
                raw(&status)
            }
            Op::ServiceStatus => {
                let p: ServiceRef = params(op, &req.params)?;
                let status = self
                    .registry
                    .status(&p.instance_id, &p.service_type)
                    .await
                    .map_err(|e| provider_body(&e))?;
                raw(&status)
            }
        }
    }

    /// `apply_manifests`: the change report, or the error with what was applied before it.
    pub(super) async fn apply(&self, req: &Req) -> Result<ChangesResult, ErrorBody> {
        let p: ApplyManifestsParams = params(Op::ApplyManifests, &req.params)?;
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
            .cluster
            .topology(p.dry_run, p.prune)
            .await
            .map_err(|e| body(&e))?;
        // A project's ownership records live in its namespace: another tenant's owner of the
        // same name is another ApplySet, and a prune lists only the project's namespace.
        let options = ApplyOptions {
            force_conflicts: p.force_conflicts,
            owner: p.owner,
            owner_namespace: req.project.as_ref().map(|s| s.namespace.clone()),
        };
        let wait = match p.wait_timeout_s {
            Some(s) if !p.dry_run => WaitPolicy::within(Duration::from_secs(s.clamp(1, 86_400))),
            _ => WaitPolicy::disabled(),
        };
        // The wait's progress lines (N of M current, the slowest object and why) reach the
        // caller as progress frames of this request.
        let outbox = self.outbox.clone();
        let id = req.id.clone();
        let sink: Arc<dyn Fn(String) + Send + Sync> = Arc::new(move |line: String| {
            let (stage, detail) = progress_stage(&line);
            let _ = outbox.send(Frame::Progress(Progress {
                id: id.clone(),
                stage: stage.into(),
                detail: detail.into(),
            }));
        });
        let applied = capture_progress(sink, t.apply_with_wait(&objects, &options, wait)).await;
        match applied {
            Ok(changes) => Ok(ChangesResult {
                changes: changes.iter().map(wire_change).collect(),
            }),
            Err(f) => {
                let mut b = body(&f.error);
                b.applied = f.applied.iter().map(wire_change).collect();
                Err(b)
            }
        }
    }

    /// The cluster's node count and summed allocatable capacity, for the heartbeat status
    /// (`None` when nodes cannot be listed: unreachable, or not allowed).
    pub async fn node_summary(&self) -> Option<(u32, Capacity)> {
        let t = self.cluster.topology(false, false).await.ok()?;
        let client = t.client().ok()?;
        let nodes = kube::Api::<Node>::all(client)
            .list(&Default::default())
            .await
            .ok()?;
        let mut total = Capacity::default();
        for n in &nodes.items {
            add(
                &mut total,
                n.status.as_ref().and_then(|s| s.allocatable.as_ref()),
            );
        }
        Some((u32::try_from(nodes.items.len()).unwrap_or(u32::MAX), total))
    }

    async fn inventory(&self) -> Result<InventoryResult, ErrorBody> {
        let t = self
            .cluster
            .topology(false, false)
            .await
            .map_err(|e| body(&e))?;
        let client = t.client().map_err(|e| body(&e))?;
        let unreachable = |e: kube::Error| {
            ErrorBody::new(
                code::UNREACHABLE,
                format!(
                    "listing nodes: {}",
                    harmony::infra::kube::describe_error(&e)
                ),
            )
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
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                inv.ready_nodes += 1;
            }
            add(&mut inv.capacity, status.and_then(|s| s.capacity.as_ref()));
            add(
                &mut inv.allocatable,
                status.and_then(|s| s.allocatable.as_ref()),
            );
        }
        Ok(inv)
    }
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
    fn wait_lines_are_stage_waiting_once_and_apply_lines_stage_applying() {
        assert_eq!(
            progress_stage("waiting: 1 of 3 current; apps/v1 Deployment shop/web: Replicas: 0/2"),
            (
                "waiting",
                "1 of 3 current; apps/v1 Deployment shop/web: Replicas: 0/2"
            )
        );
        assert_eq!(
            progress_stage("waiting for 3 object(s) to be current (timeout 240 s)"),
            (
                "waiting",
                "waiting for 3 object(s) to be current (timeout 240 s)"
            )
        );
        assert_eq!(
            progress_stage("3 object(s) current"),
            ("waiting", "3 object(s) current")
        );
        assert_eq!(
            progress_stage("1 namespace(s) and CRD(s) ready, applying 2 object(s)"),
            (
                "applying",
                "1 namespace(s) and CRD(s) ready, applying 2 object(s)"
            )
        );
        assert_eq!(
            progress_stage("pruning v1 ConfigMap shop/old"),
            ("applying", "pruning v1 ConfigMap shop/old")
        );
    }

    #[test]
    fn params_come_from_the_raw_json_and_null_is_empty() {
        #[derive(serde::Deserialize)]
        struct Optional {
            #[serde(default)]
            n: u32,
        }
        let p: Optional = params(Op::GetInventory, &RawJson::null()).unwrap();
        assert_eq!(p.n, 0);
        let p = params::<Optional>(
            Op::GetInventory,
            &RawJson::from_string("{\"n\": 1e0}".into()).unwrap(),
        );
        assert!(p.is_err(), "1e0 is a float, not the u32 asked for");
        let e = params::<GetObjectsParams>(
            Op::GetObjects,
            &RawJson::from_string(r#"{"objects": 3}"#.into()).unwrap(),
        )
        .unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert!(
            e.message.starts_with("get_objects params: "),
            "{}",
            e.message
        );
    }
}
