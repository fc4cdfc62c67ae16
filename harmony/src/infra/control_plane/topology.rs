use async_trait::async_trait;
use harmony_agent_protocol::containment::first_misplaced;
use harmony_agent_protocol::ops::{
    ApplyManifestsParams, ChangesResult, DeleteManifestsParams, GetObjectsParams, GetObjectsResult,
};
use harmony_agent_protocol::{ErrorBody, Op, RawJson, WireChange, WireObjectRef, code};
use harmony_api::{Health, RequestEvent};
use harmony_types::{RegionId, ZoneId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::{Duration, Instant};

use super::client::{ControlPlaneClient, ControlPlaneError, Zoned};
use super::errors::{self, Origin};
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, ObjectStatus,
    Readiness, WaitCondition, WaitOutcome,
};
use crate::domain::{
    ChangeAction, ExecutionMode, FieldChange, ObjectChange, PreparationError, PreparationOutcome,
    RunContext, Topology, WaitPolicy, WaitedStatus, report_progress,
};

/// How long one op may wait for the region's answer by default.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Transport failures to the control plane are retried this many times with the same id.
const TRANSPORT_ATTEMPTS: u32 = 3;
/// A request the control plane stopped waiting for is joined again only with this much of the
/// budget left.
const REJOIN_MIN: Duration = Duration::from_secs(1);

/// A region reached only through its agent: every `K8sClient` call becomes a v1 op sent
/// through the control plane's request API, so any Score written for `K8sClient` runs on it.
#[derive(Debug)]
pub struct AgentTopology {
    name: String,
    region: RegionId,
    zone: Option<ZoneId>,
    client: ControlPlaneClient,
    plan: bool,
    prune: bool,
    force_conflicts: bool,
    wait: WaitPolicy,
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
            zone: None,
            client,
            plan: ctx.plan,
            prune: ctx.prune,
            force_conflicts: ctx.force_conflicts,
            wait: ctx.wait,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// Sets how long one op waits for the region's answer (default 120 s).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets whether and how long an apply waits, in the region, for its objects to become
    /// current (default: the run context's, `--no-wait` / `--wait-timeout`).
    pub fn with_wait(mut self, wait: WaitPolicy) -> Self {
        self.wait = wait;
        self
    }

    /// Sends every op to the agent of `zone` of the region (by default the control plane
    /// picks a healthy zone for each op).
    pub fn with_zone(mut self, zone: ZoneId) -> Self {
        self.zone = Some(zone);
        self
    }

    /// The region.
    pub fn region(&self) -> &RegionId {
        &self.region
    }

    /// The zone, when one was set with [`Self::with_zone`].
    pub fn zone(&self) -> Option<&ZoneId> {
        self.zone.as_ref()
    }

    fn server(&self) -> String {
        match &self.zone {
            Some(z) => format!("region {} zone {z} (through its agent)", self.region),
            None => format!("region {} (through its agent)", self.region),
        }
    }

    /// Containment: refuses, before anything is sent, an object labelled for another region
    /// (or, with a zone set, another zone) than this topology's.
    fn contained<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a serde_json::Value>,
    ) -> Result<(), CapabilityError> {
        let zone = self.zone.as_ref().map(|z| z.as_str());
        match first_misplaced(objects, self.region.as_str(), zone) {
            None => Ok(()),
            Some(m) => Err(CapabilityError::InvalidObject {
                object: m.object.clone(),
                problem: m.to_string(),
            }),
        }
    }

    /// Maps an agent's error body about `object` onto the capability error of the same kind.
    fn remote(
        &self,
        op: Op,
        object: &str,
        kind: Option<(&str, &str)>,
        e: ErrorBody,
    ) -> CapabilityError {
        let server = self.server();
        let origin = Origin {
            op,
            object,
            kind,
            server: &server,
            budget: self.request_timeout,
        };
        errors::from_agent(&origin, e)
    }

    /// [`Self::remote`] for an op about one object.
    fn remote_about(&self, op: Op, object: &ObjectRef, e: ErrorBody) -> CapabilityError {
        let kind = Some((object.kind.as_str(), object.api_version.as_str()));
        self.remote(op, &object.to_string(), kind, e)
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
            status: w.status.map(|s| WaitedStatus {
                status: ObjectStatus::new(
                    match s.state.as_str() {
                        "current" => Readiness::Current,
                        "failed" => Readiness::Failed,
                        "not_found" => Readiness::NotFound,
                        _ => Readiness::InProgress,
                    },
                    s.reason,
                    s.message,
                ),
                time_to_current_s: s.time_to_current_ms.map(|ms| ms as f64 / 1000.0),
            }),
        }
    }

    /// Sends `op` and returns its result, or the remote error body. The agent's progress is
    /// reported to the run (the CLI shows it) while the op executes.
    async fn call(
        &self,
        op: Op,
        params: &impl Serialize,
    ) -> Result<Result<RawJson, ErrorBody>, CapabilityError> {
        self.call_within(op, params, self.request_timeout).await
    }

    /// [`Self::call`] giving the region `budget` to answer (an apply that waits for its
    /// objects needs the wait's timeout and then some).
    async fn call_within(
        &self,
        op: Op,
        params: &impl Serialize,
        budget: Duration,
    ) -> Result<Result<RawJson, ErrorBody>, CapabilityError> {
        let what = format!("request {op} to region {}", self.region);
        let params =
            RawJson::from_serialize(params).map_err(|e| CapabilityError::InvalidObject {
                object: what.clone(),
                problem: format!("params cannot be encoded as JSON: {e}"),
            })?;
        let id = request_id().map_err(|e| CapabilityError::Unsupported {
            what: "a request id".into(),
            backend: "this machine".into(),
            reason: format!("no randomness: {e}"),
        })?;
        let region = self.region.to_string();
        let zone = self.zone.as_ref().map(|z| z.to_string());
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let at = Zoned {
                region: &region,
                zone: zone.as_deref(),
            };
            let left = budget.saturating_sub(started.elapsed());
            let call = Instant::now();
            let answer = self
                .client
                .request_streaming_in_zone(at, &id, op.as_str(), &params, left, |event| {
                    report_progress(progress_line(&region, event))
                })
                .await;
            // The control plane bounds one call's wait (`--max-request-wait-s`, 300 s by
            // default), which an apply waiting for its objects can exceed: its 504 leaves the
            // request queued, so the same id joins it again while the budget lasts.
            if let Err(ControlPlaneError::Status { status: 504, .. }) = &answer
                && rejoin(budget, started.elapsed(), call.elapsed())
            {
                report_progress(format!(
                    "region {region}: still waiting for its answer ({} s)",
                    started.elapsed().as_secs()
                ));
                continue;
            }
            match answer {
                Ok(res) if res.ok => return Ok(Ok(res.result.unwrap_or_default())),
                Ok(res) => {
                    return Ok(Err(res.error.unwrap_or_else(|| {
                        ErrorBody::new(code::INTERNAL, "the agent failed without saying why")
                    })));
                }
                // Same id on retry: the control plane joins the stored request and the agent
                // answers a redelivery with its first result, so nothing runs twice. A 502/503
                // is a proxy whose replica went away; another replica holds the request too.
                Err(ControlPlaneError::Unreachable { .. })
                | Err(ControlPlaneError::Status {
                    status: 502 | 503, ..
                }) if attempt < TRANSPORT_ATTEMPTS => {
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
                    status: 504, error, ..
                }) => {
                    return Err(CapabilityError::Timeout {
                        waited_for: format!("region {} to answer {op}", self.region),
                        after: budget,
                        last_seen: error.error,
                    });
                }
                Err(e) => return Err(e.into_capability(&what, self.client.url())),
            }
        }
    }

    fn parse<T: DeserializeOwned>(&self, op: Op, raw: &RawJson) -> Result<T, CapabilityError> {
        raw.parse().map_err(|e| CapabilityError::Rejected {
            object: op.to_string(),
            server: self.server(),
            message: format!("unexpected result shape: {e}"),
        })
    }
}

/// One progress line for people: `region east: applying: 12/45 objects`.
fn progress_line(region: &str, event: &RequestEvent) -> String {
    let stage = event.stage.as_deref().unwrap_or("working");
    match event.detail.as_deref() {
        Some(d) if !d.is_empty() => format!("region {region}: {stage}: {d}"),
        _ => format!("region {region}: {stage}"),
    }
}

/// Whether a request the control plane stopped waiting for (504) is joined again: when that
/// call did wait (`call` at least [`REJOIN_MIN`]: an immediate 504 is not the wait's cap) and at
/// least [`REJOIN_MIN`] of the caller's `budget` is left after `elapsed`.
fn rejoin(budget: Duration, elapsed: Duration, call: Duration) -> bool {
    call >= REJOIN_MIN && budget.saturating_sub(elapsed) >= REJOIN_MIN
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
        if let Some(zone) = &self.zone {
            let Some(z) = status.zone(zone.as_str()) else {
                let known: Vec<&str> = status.zones.iter().map(|z| z.zone.as_str()).collect();
                return Err(fail(format!(
                    "region {} has no zone {zone} (its zones: {}); add it with POST /v1/admin/regions/{}/zones",
                    self.region,
                    known.join(", "),
                    self.region
                )));
            };
            if z.health == Health::Unavailable {
                return Err(fail(format!(
                    "zone {zone} of region {} is unavailable ({}); nothing is placed on an unavailable zone",
                    self.region,
                    z.health_reason.as_deref().unwrap_or("no reason given")
                )));
            }
        }
        if status.health == Health::Unavailable {
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
        self.contained(objects.iter().map(K8sObject::value))
            .map_err(fail)?;
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
            wait_timeout_s: (self.wait.enabled && !self.plan)
                .then_some(self.wait.timeout.as_secs()),
        };
        let budget = if params.wait_timeout_s.is_some() {
            self.request_timeout + self.wait.timeout
        } else {
            self.request_timeout
        };
        // One object: errors name it (and its kind, for unknown_kind); a batch: the op.
        let single = match objects {
            [one] => Some(one.reference()),
            _ => None,
        };
        let object = single.map_or_else(
            || format!("{} object(s) ({})", objects.len(), Op::ApplyManifests),
            ToString::to_string,
        );
        let kind = single.map(|r| (r.kind.as_str(), r.api_version.as_str()));
        match self
            .call_within(Op::ApplyManifests, &params, budget)
            .await
            .map_err(fail)?
        {
            Ok(raw) => {
                let result: ChangesResult = self.parse(Op::ApplyManifests, &raw).map_err(fail)?;
                Ok(result.changes.into_iter().map(|c| self.change(c)).collect())
            }
            Err(mut body) => {
                let applied: Vec<ObjectChange> = std::mem::take(&mut body.applied)
                    .into_iter()
                    .map(|c| self.change(c))
                    .collect();
                let error = if body.code == code::NOT_CURRENT {
                    errors::not_current(&applied, self.wait.timeout)
                } else {
                    self.remote(Op::ApplyManifests, &object, kind, body)
                };
                Err(ApplyFailure { applied, error })
            }
        }
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        let params = GetObjectsParams {
            objects: vec![wire_ref(object)],
        };
        let result: GetObjectsResult = match self.call(Op::GetObjects, &params).await? {
            Ok(raw) => self.parse(Op::GetObjects, &raw)?,
            Err(e) => return Err(self.remote_about(Op::GetObjects, object, e)),
        };
        match result.objects.into_iter().next().flatten() {
            None => Ok(None),
            Some(v) => K8sObject::new(v).map(Some),
        }
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        let params = DeleteManifestsParams {
            objects: vec![wire_ref(object)],
            dry_run: self.plan,
        };
        let result: ChangesResult = match self.call(Op::DeleteManifests, &params).await? {
            Ok(raw) => self.parse(Op::DeleteManifests, &raw)?,
            Err(e) => return Err(self.remote_about(Op::DeleteManifests, object, e)),
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
        condition
            .poll(
                format!("{condition} on {object} in region {}", self.region),
                timeout,
                POLL_INTERVAL,
                || self.get(object),
            )
            .await
    }
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
