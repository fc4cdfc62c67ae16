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

fn deployment_status(d: &Value) -> ObjectStatus {
    // Without a progress deadline the controller never sets Progressing: consider it progressing.
    let mut progressing = int_at(d, "/spec/progressDeadlineSeconds")
        .is_none_or(|deadline| deadline == i64::from(i32::MAX));
    let mut available = false;
    for c in conditions(d) {
        match c.type_ {
            "Progressing" => {
                if c.reason == "ProgressDeadlineExceeded" {
                    return failed(
                        "ProgressDeadlineExceeded",
                        or(c.message, "progress deadline exceeded"),
                    );
                }
                if c.status == "True" && c.reason == "NewReplicaSetAvailable" {
                    progressing = true;
                }
            }
            "Available" => available |= c.status == "True",
            _ => {}
        }
    }
    let spec = int_at(d, "/spec/replicas").unwrap_or(1);
    let replicas = int_or_zero(d, "/status/replicas");
    let updated = int_or_zero(d, "/status/updatedReplicas");
    let ready = int_or_zero(d, "/status/readyReplicas");
    let available_replicas = int_or_zero(d, "/status/availableReplicas");
    if spec > replicas {
        return in_progress("LessReplicas", format!("Replicas: {replicas}/{spec}"));
    }
    if spec > updated {
        return in_progress("LessUpdated", format!("Updated: {updated}/{spec}"));
    }
    if replicas > spec {
        return in_progress(
            "ExtraPods",
            format!("Pending termination: {}", replicas - spec),
        );
    }
    if updated > available_replicas {
        return in_progress(
            "LessAvailable",
            format!("Available: {available_replicas}/{updated}"),
        );
    }
    if spec > ready {
        return in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if !progressing {
        return in_progress("ReplicaSetNotAvailable", "ReplicaSet not Available");
    }
    if !available {
        return in_progress("DeploymentNotAvailable", "Deployment not Available");
    }
    current(
        "Available",
        format!("Deployment is available. Replicas: {replicas}"),
    )
}

fn statefulset_status(s: &Value) -> ObjectStatus {
    if str_at(s, "/spec/updateStrategy/type") == Some("OnDelete") {
        return current(
            "OnDelete",
            "StatefulSet is using the OnDelete update strategy",
        );
    }
    let spec = int_at(s, "/spec/replicas").unwrap_or(1);
    let ready = int_or_zero(s, "/status/readyReplicas");
    let current_replicas = int_or_zero(s, "/status/currentReplicas");
    let updated = int_or_zero(s, "/status/updatedReplicas");
    let replicas = int_or_zero(s, "/status/replicas");
    if spec > replicas {
        return in_progress("LessReplicas", format!("Replicas: {replicas}/{spec}"));
    }
    if spec > ready {
        return in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if replicas > spec {
        return in_progress(
            "ExtraPods",
            format!("Pending termination: {}", replicas - spec),
        );
    }
    if let Some(partition) = int_at(s, "/spec/updateStrategy/rollingUpdate/partition") {
        let wanted = spec - partition;
        if updated < wanted {
            return in_progress("PartitionRollout", format!("updated: {updated}/{wanted}"));
        }
        return current(
            "PartitionRolledOut",
            format!("Partition rollout complete. updated: {updated}"),
        );
    }
    if spec > current_replicas {
        return in_progress("LessCurrent", format!("current: {current_replicas}/{spec}"));
    }
    let current_revision = str_at(s, "/status/currentRevision").unwrap_or("");
    let update_revision = str_at(s, "/status/updateRevision").unwrap_or("");
    if current_revision != update_revision {
        return in_progress(
            "RevisionMismatch",
            format!("current revision {current_revision}, update revision {update_revision}"),
        );
    }
    current(
        "AllReplicasReady",
        format!("All replicas scheduled as expected. Replicas: {replicas}"),
    )
}

fn daemonset_status(d: &Value) -> ObjectStatus {
    if let Some(missing) = generation_unset(d) {
        return missing;
    }
    let Some(desired) = int_at(d, "/status/desiredNumberScheduled") else {
        return in_progress("NoDesiredNumber", "Missing .status.desiredNumberScheduled");
    };
    let scheduled = int_or_zero(d, "/status/currentNumberScheduled");
    let updated = int_or_zero(d, "/status/updatedNumberScheduled");
    let available = int_or_zero(d, "/status/numberAvailable");
    let ready = int_or_zero(d, "/status/numberReady");
    if desired > scheduled {
        return in_progress("LessCurrent", format!("Current: {scheduled}/{desired}"));
    }
    if desired > updated {
        return in_progress("LessUpdated", format!("Updated: {updated}/{desired}"));
    }
    if desired > available {
        return in_progress("LessAvailable", format!("Available: {available}/{desired}"));
    }
    if desired > ready {
        return in_progress("LessReady", format!("Ready: {ready}/{desired}"));
    }
    current(
        "AllScheduled",
        format!("All replicas scheduled as expected. Replicas: {desired}"),
    )
}

/// kstatus's `checkGenerationSet`: a controller that acted on the object wrote both.
fn generation_unset(object: &Value) -> Option<ObjectStatus> {
    let (_, kind) = group_kind(object);
    if int_at(object, "/metadata/generation").is_none() {
        return Some(in_progress(
            "NoGeneration",
            format!("{kind} metadata.generation not found"),
        ));
    }
    if int_at(object, "/status/observedGeneration").is_none() {
        return Some(in_progress(
            "NoObservedGeneration",
            format!("{kind} status.observedGeneration not found"),
        ));
    }
    None
}

fn replicaset_status(r: &Value) -> ObjectStatus {
    if let Some(c) = conditions(r).find(|c| c.type_ == "ReplicaFailure" && c.status == "True") {
        return in_progress(
            or(c.reason, "ReplicaFailure"),
            or(c.message, "Replica Failure condition. Check Pods"),
        );
    }
    let spec = int_at(r, "/spec/replicas").unwrap_or(1);
    let replicas = int_or_zero(r, "/status/replicas");
    let ready = int_or_zero(r, "/status/readyReplicas");
    let available = int_or_zero(r, "/status/availableReplicas");
    let labelled = int_or_zero(r, "/status/fullyLabeledReplicas");
    if spec > labelled {
        return in_progress("LessLabelled", format!("Labelled: {labelled}/{spec}"));
    }
    if spec > available {
        return in_progress("LessAvailable", format!("Available: {available}/{spec}"));
    }
    if spec > ready {
        return in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if replicas > spec {
        return in_progress(
            "ExtraPods",
            format!("Pending termination: {}", replicas - spec),
        );
    }
    current(
        "Available",
        format!("ReplicaSet is available. Replicas: {replicas}"),
    )
}

fn job_status(j: &Value) -> ObjectStatus {
    let parallelism = int_at(j, "/spec/parallelism").unwrap_or(1);
    let completions = int_at(j, "/spec/completions");
    let succeeded = int_or_zero(j, "/status/succeeded");
    let active = int_or_zero(j, "/status/active");
    let failed_pods = int_or_zero(j, "/status/failed");
    let suspended = j.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    for c in conditions(j) {
        if c.status != "True" {
            continue;
        }
        match c.type_ {
            "Complete" => {
                let of = completions.unwrap_or(parallelism);
                return current(
                    "Complete",
                    format!("Job completed. succeeded: {succeeded}/{of}"),
                );
            }
            // FailureTarget: the controller has decided; it only waits for the pods to stop.
            "Failed" | "FailureTarget" => {
                let said = if c.message.trim().is_empty() {
                    format!("Job failed. failed: {failed_pods}")
                } else {
                    format!("{} (failed pods: {failed_pods})", c.message)
                };
                return failed(or(c.reason, "JobFailed"), said);
            }
            "Suspended" if suspended => {
                return current("Suspended", "Job is suspended: nothing runs until resumed");
            }
            _ => {}
        }
    }
    if str_at(j, "/status/startTime").is_none_or(str::is_empty) {
        return in_progress("JobNotStarted", "Job not started");
    }
    let succeeded_of = match completions {
        Some(of) => format!("{succeeded}/{of}"),
        None => succeeded.to_string(),
    };
    in_progress(
        "JobRunning",
        format!("Job running. active: {active}, succeeded: {succeeded_of}, failed: {failed_pods}"),
    )
}

fn pod_status(p: &Value) -> ObjectStatus {
    let name = str_at(p, "/metadata/name").unwrap_or("?");
    match str_at(p, "/status/phase").unwrap_or("") {
        "Succeeded" => return current("Succeeded", "Pod has completed successfully"),
        "Failed" => {
            let reason = str_at(p, "/status/reason").filter(|r| !r.is_empty());
            let message = str_at(p, "/status/message")
                .filter(|m| !m.trim().is_empty())
                .map(str::to_string)
                .or_else(|| terminated_containers(p))
                .unwrap_or_else(|| "Pod has completed, but not successfully".to_string());
            return failed(
                reason.unwrap_or("PodFailed"),
                format!("pod {name}: {message}"),
            );
        }
        _ => {}
    }
    if let Some(hopeless) = pod_failure(p) {
        return hopeless;
    }
    match str_at(p, "/status/phase").unwrap_or("") {
        "Running" => match condition(p, "Ready") {
            Some(ready) if ready.status == "True" => current("Ready", "Pod is Ready"),
            Some(ready) => in_progress(
                or(ready.reason, "PodRunningNotReady"),
                or(ready.message, "Pod is running but is not Ready"),
            ),
            None => in_progress("PodRunningNotReady", "Pod is running but is not Ready"),
        },
        "" => in_progress("PodNotObserved", "Pod phase not available"),
        phase => {
            let mut message = format!("phase {phase}");
            if let Some(waiting) = waiting_containers(p) {
                message.push_str(&format!(": {waiting}"));
            } else if let Some(scheduled) = condition(p, "PodScheduled")
                && scheduled.status == "False"
                && !scheduled.message.is_empty()
            {
                message.push_str(&format!(": {}", scheduled.message));
            }
            in_progress(phase, message)
        }
    }
}

/// `container C: Reason` for every waiting container, if any.
fn waiting_containers(p: &Value) -> Option<String> {
    let waiting: Vec<String> = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .flat_map(|list| array_at(p, list))
        .filter_map(|c| {
            let reason = str_at(c, "/state/waiting/reason")?;
            Some(format!(
                "container {} {reason}",
                str_at(c, "/name").unwrap_or("?")
            ))
        })
        .collect();
    (!waiting.is_empty()).then(|| waiting.join(", "))
}

/// `container C terminated: Reason (exit code N)` for every container that exited non-zero.
fn terminated_containers(p: &Value) -> Option<String> {
    let ended: Vec<String> = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .flat_map(|list| array_at(p, list))
        .filter_map(|c| {
            let terminated = c.pointer("/state/terminated")?;
            let code = terminated.get("exitCode").and_then(Value::as_i64)?;
            (code != 0).then(|| {
                format!(
                    "container {} terminated: {} (exit code {code})",
                    str_at(c, "/name").unwrap_or("?"),
                    str_at(terminated, "/reason").unwrap_or("Error"),
                )
            })
        })
        .collect();
    (!ended.is_empty()).then(|| ended.join(", "))
}

// ---- other built-in kinds --------------------------------------------------------------------

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

// ---- helpers ----------------------------------------------------------------------------------

struct Condition<'a> {
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

fn conditions(object: &Value) -> impl Iterator<Item = Condition<'_>> {
    array_at(object, "/status/conditions")
        .iter()
        .map(|c| Condition {
            type_: str_at(c, "/type").unwrap_or(""),
            status: str_at(c, "/status").unwrap_or(""),
            reason: str_at(c, "/reason").unwrap_or(""),
            message: str_at(c, "/message").unwrap_or(""),
        })
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<Condition<'a>> {
    conditions(object).find(|c| c.type_ == type_)
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn int_at(value: &Value, pointer: &str) -> Option<i64> {
    value.pointer(pointer).and_then(Value::as_i64)
}

fn int_or_zero(value: &Value, pointer: &str) -> i64 {
    int_at(value, pointer).unwrap_or(0)
}

fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn is_set(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// `value` unless it is blank, then `fallback`.
fn or<'a>(value: &'a str, fallback: &'a str) -> &'a str {
    if value.trim().is_empty() {
        fallback
    } else {
        value
    }
}

fn current(reason: &str, message: impl Into<String>) -> ObjectStatus {
    ObjectStatus::new(Readiness::Current, reason, message)
}

fn in_progress(reason: &str, message: impl Into<String>) -> ObjectStatus {
    ObjectStatus::new(Readiness::InProgress, reason, message)
}

fn failed(reason: &str, message: impl Into<String>) -> ObjectStatus {
    ObjectStatus::new(Readiness::Failed, reason, message)
}

/// One line, at most [`MESSAGE_LIMIT`] characters, for the reason and the message alike.
fn tidy(mut status: ObjectStatus) -> ObjectStatus {
    status.reason = one_line(&status.reason, 80);
    status.message = one_line(&status.message, MESSAGE_LIMIT);
    status
}

/// `text` with every run of whitespace (newlines included) made one space, cut to `limit`
/// characters with an ellipsis.
fn one_line(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= limit {
        return flat;
    }
    let mut cut: String = flat.chars().take(limit.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests;
