//! Whether an applied object is *current*: the status rules (kstatus semantics) for every kind
//! Harmony applies, decided from the object alone (and, for workloads, from their pods).
//!
//! One function, [`object_status`], decides Current / InProgress / Failed with a reason in the
//! controller's own words. [`pod_failure`] recognises the pod states no amount of waiting fixes
//! (`CrashLoopBackOff`, `ImagePullBackOff`, `ErrImagePull`, `CreateContainerConfigError`,
//! `Unschedulable`), so a workload owning such a pod fails fast instead of timing out.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

mod fields;
mod workloads;

use fields::*;
use workloads::*;

/// Where an object stands (kstatus's statuses, less the ones Harmony never reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Readiness {
    /// The object's controller has done what the object asks (rolled out, bound, complete).
    Current,
    /// Not there yet; waiting may help.
    InProgress,
    /// Hopeless without a change: waiting will not help (the reason says why).
    Failed,
    /// The object does not exist (deleted under the wait, or never created).
    NotFound,
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Readiness::Current => "current",
            Readiness::InProgress => "in progress",
            Readiness::Failed => "failed",
            Readiness::NotFound => "not found",
        })
    }
}

/// An object's readiness with the reason, in the controller's words where it gave some.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectStatus {
    /// Current, in progress, failed or not found.
    pub state: Readiness,
    /// One word: the controller's reason when it gave one (`ProgressDeadlineExceeded`,
    /// `CrashLoopBackOff`, `Unschedulable`, `BackoffLimitExceeded`), else Harmony's
    /// (`Available`, `Rollout`, `Pending`, `Exists`, ...).
    pub reason: String,
    /// One line for humans, quoting the controller's message where there is one.
    pub message: String,
}

impl ObjectStatus {
    /// A status with `state`, `reason` and `message`.
    pub fn new(state: Readiness, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            state,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ObjectStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.state, self.reason, self.message)
    }
}

/// The longest message [`object_status`] and [`pod_failure`] report, in characters; longer
/// controller messages are cut there and end with an ellipsis.
pub const MESSAGE_LIMIT: usize = 300;

/// Waiting reasons of a container that no amount of waiting fixes (the kubelet retries them
/// with back-off, but the pod's spec, image or config must change first).
pub const HOPELESS_WAITING_REASONS: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "InvalidImageName",
    "CreateContainerError",
    "RunContainerError",
];

/// The readiness of `object` (a full object as the API server returns it, `status` included).
///
/// Generic rules first, for every kind (kstatus's `checkGenericProperties`): a set
/// `metadata.deletionTimestamp` is in progress (`Terminating`); a `status.observedGeneration`
/// behind `metadata.generation` is in progress (`ObservedGeneration`); a `Reconciling=True`
/// condition is in progress and a `Stalled=True` condition failed, both with the condition's
/// reason and message. Then the kind's own rules (Deployment, StatefulSet, DaemonSet,
/// ReplicaSet, Job, Pod, PersistentVolumeClaim, Service, Namespace, CustomResourceDefinition,
/// PodDisruptionBudget); any other kind follows its `Ready` condition when it has one
/// (`True` current, `False` or `Unknown` in progress) and is otherwise current (`Exists`):
/// nothing to wait for.
pub fn object_status(object: &Value) -> ObjectStatus {
    let status = generic_status(object).unwrap_or_else(|| {
        let (group, kind) = group_kind(object);
        match (group, kind) {
            ("apps" | "extensions", "Deployment") => deployment_status(object),
            ("apps", "StatefulSet") => statefulset_status(object),
            ("apps" | "extensions", "DaemonSet") => daemonset_status(object),
            ("apps" | "extensions", "ReplicaSet") => replicaset_status(object),
            ("batch", "Job") => job_status(object),
            ("", "Pod") => pod_status(object),
            ("", "PersistentVolumeClaim") => pvc_status(object),
            ("", "Service") => service_status(object),
            ("", "Namespace") => namespace_status(object),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => crd_status(object),
            ("policy", "PodDisruptionBudget") => pdb_status(object),
            ("", "ConfigMap" | "Secret") | ("batch", "CronJob") => exists(),
            _ => ready_condition_status(object).unwrap_or_else(|| no_known_status(object)),
        }
    });
    tidy(status)
}

/// `Some(Failed)` when `pod` is in a state waiting cannot fix, naming the container and the
/// kubelet's or scheduler's reason and message; `None` otherwise.
///
/// Hopeless: a container or init container waiting with one of [`HOPELESS_WAITING_REASONS`]
/// (reason = the kubelet's, message = `pod P container C: <kubelet's message>`), or
/// `PodScheduled=False` with reason `Unschedulable` (message = the scheduler's), except when
/// the scheduler only waits for the pod's PersistentVolumeClaims to bind. Pods being deleted
/// and pods that already ended (`Succeeded`, `Failed`: a Job's own conditions decide those)
/// are never reported. The scheduler's verdict is taken at once: a caller that wants to give
/// a cluster autoscaler time applies its own grace period.
pub fn pod_failure(pod: &Value) -> Option<ObjectStatus> {
    if is_set(pod.pointer("/metadata/deletionTimestamp")) {
        return None;
    }
    if matches!(str_at(pod, "/status/phase"), Some("Succeeded" | "Failed")) {
        return None;
    }
    let pod_name = str_at(pod, "/metadata/name").unwrap_or("?");
    for (list, label) in [
        ("/status/initContainerStatuses", "init container"),
        ("/status/containerStatuses", "container"),
    ] {
        for container in array_at(pod, list) {
            let Some(reason) = str_at(container, "/state/waiting/reason") else {
                continue;
            };
            if !HOPELESS_WAITING_REASONS.contains(&reason) {
                continue;
            }
            let name = str_at(container, "/name").unwrap_or("?");
            let said = str_at(container, "/state/waiting/message")
                .filter(|m| !m.trim().is_empty())
                .unwrap_or(reason);
            let mut message = format!("pod {pod_name} {label} {name}: {said}");
            if let Some(last) = container.pointer("/lastState/terminated") {
                let why = str_at(last, "/reason").unwrap_or("terminated");
                match last.get("exitCode").and_then(Value::as_i64) {
                    Some(code) => message.push_str(&format!(" (last exit: {why}, code {code})")),
                    None => message.push_str(&format!(" (last exit: {why})")),
                }
            }
            return Some(tidy(ObjectStatus::new(Readiness::Failed, reason, message)));
        }
    }
    let scheduled = condition(pod, "PodScheduled")?;
    if scheduled.status == "False" && scheduled.reason == "Unschedulable" {
        // Immediate-binding claims are being provisioned: the scheduler retries once they bind.
        if scheduled
            .message
            .contains("unbound immediate PersistentVolumeClaims")
        {
            return None;
        }
        let said = if scheduled.message.trim().is_empty() {
            "no node fits the pod"
        } else {
            scheduled.message
        };
        return Some(tidy(ObjectStatus::new(
            Readiness::Failed,
            "Unschedulable",
            format!("pod {pod_name}: {said}"),
        )));
    }
    None
}

/// Whether the readiness of objects of this kind (`group`, `kind`) also depends on the pods
/// they select (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job).
pub fn selects_pods(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "apps",
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
        ) | ("batch", "Job")
    )
}

/// Whether `workload`'s `spec.selector` (matchLabels and matchExpressions) selects `pod`.
/// Namespaces are not compared: the caller only offers pods of the workload's namespace.
///
/// All of `matchLabels` and every `matchExpressions` requirement (`In`, `NotIn`, `Exists`,
/// `DoesNotExist`) must hold for the pod's `metadata.labels`. A Job's selector is the one the
/// API server set (`batch.kubernetes.io/controller-uid`), so pass the object as read back. An
/// absent or empty selector, or an operator this does not know, selects nothing: a fail-fast
/// signal must never come from someone else's pod.
pub fn selector_matches(workload: &Value, pod: &Value) -> bool {
    let Some(selector) = workload
        .pointer("/spec/selector")
        .and_then(Value::as_object)
    else {
        return false;
    };
    let empty = serde_json::Map::new();
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if match_labels.is_none_or(|m| m.is_empty()) && expressions.is_empty() {
        return false;
    }
    let labels_hold = match_labels.into_iter().flatten().all(|(key, wanted)| {
        wanted
            .as_str()
            .is_some_and(|wanted| label(key) == Some(wanted))
    });
    let expressions_hold = expressions.iter().all(|requirement| {
        let Some(key) = requirement.get("key").and_then(Value::as_str) else {
            return false;
        };
        let values: Vec<&str> = requirement
            .get("values")
            .and_then(Value::as_array)
            .map(|values| values.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let value = label(key);
        match requirement.get("operator").and_then(Value::as_str) {
            Some("In") => value.is_some_and(|v| values.contains(&v)),
            Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    });
    labels_hold && expressions_hold
}

/// The API group (`""` for the core group) and kind of `object`, from `apiVersion` and `kind`.
pub fn group_kind(object: &Value) -> (&str, &str) {
    let api_version = str_at(object, "/apiVersion").unwrap_or("");
    let group = api_version
        .rsplit_once('/')
        .map_or("", |(group, _version)| group);
    (group, str_at(object, "/kind").unwrap_or(""))
}

// ---- generic rules (kstatus generic.go) ------------------------------------------------------

fn generic_status(object: &Value) -> Option<ObjectStatus> {
    if let Some(since) = object
        .pointer("/metadata/deletionTimestamp")
        .filter(|v| is_set(Some(v)))
    {
        let since = since.as_str().unwrap_or("?");
        let finalizers: Vec<&str> = array_at(object, "/metadata/finalizers")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut message = format!("being deleted since {since}");
        if !finalizers.is_empty() {
            message.push_str(&format!(", finalizers: {}", finalizers.join(", ")));
        }
        return Some(in_progress("Terminating", message));
    }
    if let Some(generation) = int_at(object, "/metadata/generation")
        && let Some(observed) = int_at(object, "/status/observedGeneration")
        && observed != generation
    {
        return Some(in_progress(
            "ObservedGeneration",
            format!("generation {generation}, observed {observed}"),
        ));
    }
    for c in conditions(object) {
        if c.type_ == "Reconciling" && c.status == "True" {
            return Some(in_progress(
                or(c.reason, "Reconciling"),
                or(c.message, "reconciling"),
            ));
        }
        if c.type_ == "Stalled" && c.status == "True" {
            return Some(failed(or(c.reason, "Stalled"), or(c.message, "stalled")));
        }
    }
    None
}

/// kstatus's `checkReadyCondition`, for kinds without rules of their own.
fn ready_condition_status(object: &Value) -> Option<ObjectStatus> {
    let ready = condition(object, "Ready")?;
    match ready.status {
        "True" => Some(current(
            or(ready.reason, "Ready"),
            or(ready.message, "Ready condition is True"),
        )),
        "False" | "Unknown" => {
            let mut message = or(
                ready.message,
                &format!("Ready condition is {}", ready.status),
            )
            .to_string();
            if let Some(phase) = str_at(object, "/status/phase")
                && !phase.is_empty()
                && !message.contains(phase)
            {
                message.push_str(&format!(" (phase: {phase})"));
            }
            Some(in_progress(or(ready.reason, "NotReady"), message))
        }
        _ => None,
    }
}

fn no_known_status(object: &Value) -> ObjectStatus {
    match object.get("status") {
        Some(Value::Object(status)) if !status.is_empty() => current(
            "Exists",
            "exists; no Ready, Reconciling or Stalled condition to wait for",
        ),
        _ => exists(),
    }
}

fn exists() -> ObjectStatus {
    current("Exists", "exists; nothing to wait for")
}

// ---- workloads (kstatus core.go) -------------------------------------------------------------

fn pvc_status(c: &Value) -> ObjectStatus {
    match str_at(c, "/status/phase") {
        Some("Bound") => {
            let volume = str_at(c, "/spec/volumeName").unwrap_or("?");
            current("Bound", format!("PVC is Bound to volume {volume}"))
        }
        Some("Lost") => failed("Lost", "PVC lost its PersistentVolume"),
        phase => in_progress("NotBound", format!("phase {}", phase.unwrap_or("unknown"))),
    }
}

fn service_status(s: &Value) -> ObjectStatus {
    let kind = str_at(s, "/spec/type").unwrap_or("ClusterIP");
    if kind != "LoadBalancer" {
        return current("Exists", format!("Service type {kind} exists"));
    }
    let ingress = array_at(s, "/status/loadBalancer/ingress");
    let addresses: Vec<&str> = ingress
        .iter()
        .filter_map(|i| str_at(i, "/ip").or_else(|| str_at(i, "/hostname")))
        .collect();
    if ingress.is_empty() {
        return in_progress(
            "NoIngress",
            "LoadBalancer Service waits for status.loadBalancer.ingress",
        );
    }
    current(
        "LoadBalancerReady",
        format!("LoadBalancer ingress: {}", addresses.join(", ")),
    )
}

fn namespace_status(n: &Value) -> ObjectStatus {
    match str_at(n, "/status/phase") {
        Some("Active") => current("Active", "Namespace is Active"),
        None => exists(),
        Some(phase) => in_progress(phase, format!("Namespace phase {phase}")),
    }
}

fn crd_status(c: &Value) -> ObjectStatus {
    if let Some(names) = condition(c, "NamesAccepted")
        && names.status == "False"
    {
        return failed(
            or(names.reason, "NamesNotAccepted"),
            or(names.message, "names not accepted"),
        );
    }
    if let Some(established) = condition(c, "Established") {
        if established.status == "True" {
            return current("Established", "CRD is established");
        }
        if established.status == "False" && established.reason != "Installing" {
            return failed(
                or(established.reason, "NotEstablished"),
                or(established.message, "CRD is not established"),
            );
        }
    }
    in_progress("Installing", "Install in progress")
}

fn pdb_status(p: &Value) -> ObjectStatus {
    if int_at(p, "/status/observedGeneration").is_none() {
        return in_progress(
            "NoObservedGeneration",
            "PodDisruptionBudget status.observedGeneration not found",
        );
    }
    let healthy = int_or_zero(p, "/status/currentHealthy");
    let desired = int_or_zero(p, "/status/desiredHealthy");
    let allowed = int_or_zero(p, "/status/disruptionsAllowed");
    if let Some(c) = condition(p, "DisruptionAllowed")
        && c.status == "False"
        && c.reason == "SyncFailed"
    {
        return in_progress("SyncFailed", or(c.message, "disruption controller failed"));
    }
    current(
        "Observed",
        format!("healthy {healthy}/{desired}, disruptions allowed: {allowed}"),
    )
}

#[cfg(test)]
mod tests;
