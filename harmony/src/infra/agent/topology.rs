use async_trait::async_trait;
use harmony_agent_protocol::ops::{
    ApplyManifestsParams, ChangesResult, DeleteManifestsParams, GetObjectsParams, GetObjectsResult,
};
use harmony_agent_protocol::{ErrorBody, Op, WireChange, WireObjectRef, code};
use harmony_types::RegionId;
use serde_json::Value;
use std::time::{Duration, Instant};

use super::client::{ControlPlaneClient, ControlPlaneError};
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, WaitCondition,
    WaitOutcome,
};
use crate::domain::{
    ChangeAction, ExecutionMode, FieldChange, ObjectChange, PreparationError, PreparationOutcome,
    RunContext, Topology, report_progress,
};

/// How long one op may wait for the region's answer by default.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Transport failures to the control plane are retried this many times with the same id.
const TRANSPORT_ATTEMPTS: u32 = 3;

/// A region reached only through its agent: every `K8sClient` call becomes a v1 op sent
/// through the control plane's request API, so any Score written for `K8sClient` runs on it.
#[derive(Debug)]
pub struct AgentTopology {
    name: String,
    region: RegionId,
    client: ControlPlaneClient,
    plan: bool,
    prune: bool,
    force_conflicts: bool,
    request_timeout: Duration,
}

impl AgentTopology {
    /// A topology named `name` for `region` through `client`; nothing is contacted until
    /// `ensure_ready`.
    pub fn new(
        name: impl Into<String>,
        region: RegionId,
        client: ControlPlaneClient,
        ctx: &RunContext,
    ) -> Self {
        Self {
            name: name.into(),
            region,
            client,
            plan: ctx.plan,
            prune: ctx.prune,
            force_conflicts: ctx.force_conflicts,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// Sets how long one op waits for the region's answer (default 120 s).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The region.
    pub fn region(&self) -> &RegionId {
        &self.region
    }

    fn server(&self) -> String {
        format!("region {} (through its agent)", self.region)
    }

    fn transport(&self, e: ControlPlaneError) -> CapabilityError {
        CapabilityError::Unreachable {
            server: self.server(),
            reason: e.to_string(),
        }
    }

    fn remote(&self, op: Op, e: ErrorBody) -> CapabilityError {
        match e.code.as_str() {
            code::UNREACHABLE => CapabilityError::Unreachable {
                server: self.server(),
                reason: e.message,
            },
            code::UNSUPPORTED_OP | code::UNSUPPORTED => CapabilityError::Unsupported {
                what: op.to_string(),
                backend: self.server(),
                reason: e.message,
            },
            code::INVALID_OBJECT => CapabilityError::InvalidObject {
                object: op.to_string(),
                problem: e.message,
            },
            _ => CapabilityError::Rejected {
                object: op.to_string(),
                server: self.server(),
                message: e.message,
            },
        }
    }

    fn change(&self, w: WireChange) -> ObjectChange {
        let action = match w.action.as_str() {
            "create" => ChangeAction::Create,
            "update" => ChangeAction::Update,
            "delete" => ChangeAction::Delete,
            _ => ChangeAction::Unchanged,
        };
        ObjectChange {
            object: w.object,
            action,
            location: Some(match w.location {
                Some(l) => format!("region {} @ {l}", self.region),
                None => format!("region {}", self.region),
            }),
            diff: w
                .diff
                .into_iter()
                .map(|d| FieldChange {
                    path: d.path,
                    old: d.old,
                    new: d.new,
                })
                .collect(),
        }
    }

    /// Sends `op` and returns its result, or the remote error body.
    async fn call(
        &self,
        op: Op,
        params: Value,
    ) -> Result<Result<Value, ErrorBody>, CapabilityError> {
        let id = request_id().map_err(|e| CapabilityError::Unsupported {
            what: "a request id".into(),
            backend: "this machine".into(),
            reason: format!("no randomness: {e}"),
        })?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .client
                .request(
                    self.region.as_str(),
                    &id,
                    op.as_str(),
                    params.clone(),
                    self.request_timeout,
                )
                .await
            {
                Ok(res) if res.ok => return Ok(Ok(res.result.unwrap_or(Value::Null))),
                Ok(res) => {
                    return Ok(Err(res.error.unwrap_or_else(|| {
                        ErrorBody::new(code::INTERNAL, "the agent failed without saying why")
                    })));
                }
                // Same id on retry: the control plane joins the queued request and the agent
                // answers a redelivery with its first result, so nothing runs twice.
                Err(ControlPlaneError::Unreachable { .. }) if attempt < TRANSPORT_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(300 * u64::from(attempt))).await;
                }
                Err(ControlPlaneError::Timeout { what, after }) => {
                    return Err(CapabilityError::Timeout {
                        waited_for: what,
                        after,
                        last_seen: "no answer from the region".into(),
                    });
                }
                Err(ControlPlaneError::Status {
                    status: 504,
                    message,
                    ..
                }) => {
                    return Err(CapabilityError::Timeout {
                        waited_for: format!("region {} to answer {op}", self.region),
                        after: self.request_timeout,
                        last_seen: message,
                    });
                }
                Err(e) => return Err(self.transport(e)),
            }
        }
    }

    fn parse<T: for<'de> serde::Deserialize<'de>>(
        &self,
        op: Op,
        v: Value,
    ) -> Result<T, CapabilityError> {
        serde_json::from_value(v).map_err(|e| CapabilityError::Rejected {
            object: op.to_string(),
            server: self.server(),
            message: format!("unexpected result shape: {e}"),
        })
    }
}

fn request_id() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn wire_ref(r: &ObjectRef) -> WireObjectRef {
    WireObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

#[async_trait]
impl Topology for AgentTopology {
    fn name(&self) -> &str {
        &self.name
    }

    fn mode(&self) -> ExecutionMode {
        if self.plan {
            ExecutionMode::Plan
        } else {
            ExecutionMode::Apply
        }
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        let fail = |reason: String| PreparationError {
            topology: self.name.clone(),
            reason,
        };
        let status = self
            .client
            .region(self.region.as_str())
            .await
            .map_err(|e| fail(e.to_string()))?
            .ok_or_else(|| {
                fail(format!(
                    "the control plane at {} has no region {}; create it and roll out its agent (RegionAgentRolloutScore)",
                    self.client.url(),
                    self.region
                ))
            })?;
        if status.decommissioned {
            return Err(fail(format!("region {} is decommissioned", self.region)));
        }
        if status.health == "unavailable" {
            return Err(fail(format!(
                "region {} is unavailable ({}); nothing is placed on an unavailable region",
                self.region, status.health_reason
            )));
        }
        Ok(PreparationOutcome::Success(format!(
            "region {} via {}: {} ({}), agent {}",
            self.region,
            self.client.url(),
            status.health,
            status.health_reason,
            status.agent_version.as_deref().unwrap_or("unknown")
        )))
    }
}

#[async_trait]
impl K8sClient for AgentTopology {
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let fail = |error| ApplyFailure {
            applied: Vec::new(),
            error,
        };
        report_progress(format!(
            "sending {} object(s) to region {}",
            objects.len(),
            self.region
        ));
        let params = ApplyManifestsParams {
            manifests: objects.iter().map(|o| o.value().clone()).collect(),
            force_conflicts: options.force_conflicts || self.force_conflicts,
            owner: options.owner.clone(),
            dry_run: self.plan,
            prune: self.prune,
        };
        let params = serde_json::to_value(&params).map_err(|e| {
            fail(CapabilityError::InvalidObject {
                object: "manifests".into(),
                problem: e.to_string(),
            })
        })?;
        match self.call(Op::ApplyManifests, params).await.map_err(fail)? {
            Ok(v) => {
                let result: ChangesResult = self.parse(Op::ApplyManifests, v).map_err(fail)?;
                Ok(result.changes.into_iter().map(|c| self.change(c)).collect())
            }
            Err(mut body) => {
                let applied = std::mem::take(&mut body.applied)
                    .into_iter()
                    .map(|c| self.change(c))
                    .collect();
                Err(ApplyFailure {
                    applied,
                    error: self.remote(Op::ApplyManifests, body),
                })
            }
        }
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        let params = serde_json::to_value(GetObjectsParams {
            objects: vec![wire_ref(object)],
        })
        .unwrap_or(Value::Null);
        let result: GetObjectsResult = match self.call(Op::GetObjects, params).await? {
            Ok(v) => self.parse(Op::GetObjects, v)?,
            Err(e) => return Err(self.remote(Op::GetObjects, e)),
        };
        match result.objects.into_iter().next().flatten() {
            None => Ok(None),
            Some(v) => K8sObject::new(v).map(Some),
        }
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        let params = serde_json::to_value(DeleteManifestsParams {
            objects: vec![wire_ref(object)],
            dry_run: self.plan,
        })
        .unwrap_or(Value::Null);
        let result: ChangesResult = match self.call(Op::DeleteManifests, params).await? {
            Ok(v) => self.parse(Op::DeleteManifests, v)?,
            Err(e) => return Err(self.remote(Op::DeleteManifests, e)),
        };
        result
            .changes
            .into_iter()
            .next()
            .map(|c| self.change(c))
            .ok_or_else(|| CapabilityError::Rejected {
                object: object.to_string(),
                server: self.server(),
                message: "the agent reported no change for the object".into(),
            })
    }

    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        let started = Instant::now();
        loop {
            let last_seen = match self.get(object).await {
                Ok(current) => match condition.check(current.as_ref()) {
                    Ok(()) => return Ok(WaitOutcome::Satisfied),
                    Err(seen) => seen,
                },
                Err(e @ CapabilityError::Unreachable { .. })
                | Err(e @ CapabilityError::Timeout { .. }) => format!("error: {e}"),
                Err(e) => return Err(e),
            };
            if started.elapsed() >= timeout {
                return Err(CapabilityError::Timeout {
                    waited_for: format!("{condition} on {object} in region {}", self.region),
                    after: timeout,
                    last_seen,
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}
