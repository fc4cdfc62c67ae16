//! The status rules of the workload kinds (kstatus's, in its order per kind): Deployment,
//! StatefulSet, DaemonSet, ReplicaSet, Job and Pod.

use serde_json::Value;

use super::fields::*;
use super::{ObjectStatus, group_kind, pod_failure};

pub(super) fn deployment_status(d: &Value) -> ObjectStatus {
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

pub(super) fn statefulset_status(s: &Value) -> ObjectStatus {
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

pub(super) fn daemonset_status(d: &Value) -> ObjectStatus {
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
pub(super) fn generation_unset(object: &Value) -> Option<ObjectStatus> {
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

pub(super) fn replicaset_status(r: &Value) -> ObjectStatus {
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

pub(super) fn job_status(j: &Value) -> ObjectStatus {
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

pub(super) fn pod_status(p: &Value) -> ObjectStatus {
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
pub(super) fn waiting_containers(p: &Value) -> Option<String> {
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
pub(super) fn terminated_containers(p: &Value) -> Option<String> {
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
