//! Status rules against status documents shaped as the real controllers write them.

use super::*;
use serde_json::json;

const T: &str = "2025-03-14T09:26:53Z";

fn assert_status(status: &ObjectStatus, state: Readiness, reason: &str, message_parts: &[&str]) {
    assert_eq!(status.state, state, "state of {status}");
    assert_eq!(status.reason, reason, "reason of {status}");
    for part in message_parts {
        assert!(
            status.message.contains(part),
            "message {:?} lacks {part:?}",
            status.message
        );
    }
    assert!(!status.message.contains('\n'), "multi-line: {status}");
}

fn check(object: &Value, state: Readiness, reason: &str, message_parts: &[&str]) {
    assert_status(&object_status(object), state, reason, message_parts);
}

// ---- Deployment --------------------------------------------------------------------------------

fn deployment(generation: i64, replicas: Option<i64>, status: Value) -> Value {
    let mut spec = json!({
        "progressDeadlineSeconds": 600,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"containers": [{"name": "app", "image": "ghcr.io/acme/web:1.4.2"}]}
        }
    });
    if let Some(replicas) = replicas {
        spec["replicas"] = json!(replicas);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "shop", "generation": generation,
            "uid": "5c1f0c8e-3a61-4d0e-9b3e-0d6a2f7c9a11", "resourceVersion": "918273",
            "creationTimestamp": T,
            "annotations": {"deployment.kubernetes.io/revision": "4"}
        },
        "spec": spec,
        "status": status
    })
}

fn deployment_available_conditions() -> Value {
    json!([
        {"type": "Available", "status": "True", "lastUpdateTime": T, "lastTransitionTime": T,
         "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
        {"type": "Progressing", "status": "True", "lastUpdateTime": T, "lastTransitionTime": T,
         "reason": "NewReplicaSetAvailable",
         "message": "ReplicaSet \"web-7d9c5b8f6\" has successfully progressed."}
    ])
}

#[test]
fn deployment_rolled_out_is_current() {
    let d = deployment(
        4,
        Some(3),
        json!({
            "observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
            "availableReplicas": 3, "conditions": deployment_available_conditions()
        }),
    );
    check(
        &d,
        Readiness::Current,
        "Available",
        &["Deployment is available. Replicas: 3"],
    );
}

#[test]
fn deployment_rolling_update_mid_way_is_in_progress() {
    let d = deployment(
        5,
        Some(3),
        json!({
            "observedGeneration": 5, "replicas": 4, "updatedReplicas": 2, "readyReplicas": 3,
            "availableReplicas": 3, "unavailableReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "True", "lastUpdateTime": T, "lastTransitionTime": T,
                 "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "lastUpdateTime": T, "lastTransitionTime": T,
                 "reason": "ReplicaSetUpdated", "message": "ReplicaSet \"web-5f6b8c9d4\" is progressing."}
            ]
        }),
    );
    check(&d, Readiness::InProgress, "LessUpdated", &["Updated: 2/3"]);
}

#[test]
fn deployment_old_pods_terminating_is_in_progress() {
    let d = deployment(
        5,
        Some(3),
        json!({
            "observedGeneration": 5, "replicas": 4, "updatedReplicas": 3, "readyReplicas": 4,
            "availableReplicas": 4, "conditions": deployment_available_conditions()
        }),
    );
    check(
        &d,
        Readiness::InProgress,
        "ExtraPods",
        &["Pending termination: 1"],
    );
}

#[test]
fn deployment_progress_deadline_exceeded_fails() {
    let d = deployment(
        5,
        Some(3),
        json!({
            "observedGeneration": 5, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3,
            "availableReplicas": 3, "unavailableReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "True", "lastUpdateTime": T, "lastTransitionTime": T,
                 "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "False", "lastUpdateTime": T, "lastTransitionTime": T,
                 "reason": "ProgressDeadlineExceeded",
                 "message": "ReplicaSet \"web-5f6b8c9d4\" has timed out progressing."}
            ]
        }),
    );
    check(
        &d,
        Readiness::Failed,
        "ProgressDeadlineExceeded",
        &["ReplicaSet \"web-5f6b8c9d4\" has timed out progressing."],
    );
}

#[test]
fn deployment_generation_not_observed_is_in_progress() {
    // The status is that of the previous generation, complete: it says nothing of the new spec.
    let d = deployment(
        6,
        Some(3),
        json!({
            "observedGeneration": 5, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
            "availableReplicas": 3, "conditions": deployment_available_conditions()
        }),
    );
    check(
        &d,
        Readiness::InProgress,
        "ObservedGeneration",
        &["generation 6, observed 5"],
    );
}

#[test]
fn deployment_without_status_defaults_to_one_replica() {
    let d = deployment(1, None, json!({}));
    check(
        &d,
        Readiness::InProgress,
        "LessReplicas",
        &["Replicas: 0/1"],
    );
}

#[test]
fn deployment_replicas_ready_but_not_yet_available_condition() {
    let d = deployment(
        2,
        Some(2),
        json!({
            "observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
            "availableReplicas": 2,
            "conditions": [
                {"type": "Progressing", "status": "True", "lastUpdateTime": T, "lastTransitionTime": T,
                 "reason": "ReplicaSetUpdated", "message": "ReplicaSet \"web-5f6b8c9d4\" is progressing."}
            ]
        }),
    );
    check(
        &d,
        Readiness::InProgress,
        "ReplicaSetNotAvailable",
        &["ReplicaSet not Available"],
    );
}

#[test]
fn deletion_timestamp_is_in_progress_whatever_the_status() {
    let mut d = deployment(
        4,
        Some(3),
        json!({
            "observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
            "availableReplicas": 3, "conditions": deployment_available_conditions()
        }),
    );
    d["metadata"]["deletionTimestamp"] = json!(T);
    d["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    d["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
    check(
        &d,
        Readiness::InProgress,
        "Terminating",
        &[
            "being deleted since 2025-03-14T09:26:53Z",
            "foregroundDeletion",
        ],
    );
}

// ---- StatefulSet ------------------------------------------------------------------------------

fn statefulset(update_strategy: Value, replicas: i64, status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "pg", "namespace": "db", "generation": 3, "creationTimestamp": T},
        "spec": {
            "replicas": replicas,
            "serviceName": "pg",
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": {"app": "pg"}},
            "updateStrategy": update_strategy,
            "template": {"metadata": {"labels": {"app": "pg"}},
                         "spec": {"containers": [{"name": "pg", "image": "postgres:16"}]}}
        },
        "status": status
    })
}

#[test]
fn statefulset_rolled_out_is_current() {
    // As the API server returns it: RollingUpdate defaulted with partition 0.
    let s = statefulset(
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
        3,
        json!({
            "observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3,
            "updatedReplicas": 3, "availableReplicas": 3,
            "currentRevision": "pg-6d8f7c5b9", "updateRevision": "pg-6d8f7c5b9", "collisionCount": 0
        }),
    );
    check(
        &s,
        Readiness::Current,
        "PartitionRolledOut",
        &["updated: 3"],
    );
}

#[test]
fn statefulset_partitioned_rollout_in_progress_then_current() {
    // 5 replicas, partition 3: ordinals 3 and 4 take the new revision.
    let mut status = json!({
        "observedGeneration": 3, "replicas": 5, "readyReplicas": 5, "currentReplicas": 4,
        "updatedReplicas": 1, "availableReplicas": 5,
        "currentRevision": "pg-6d8f7c5b9", "updateRevision": "pg-84b9d6f7c", "collisionCount": 0
    });
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}});
    let s = statefulset(strategy.clone(), 5, status.clone());
    check(
        &s,
        Readiness::InProgress,
        "PartitionRollout",
        &["updated: 1/2"],
    );
    status["updatedReplicas"] = json!(2);
    status["currentReplicas"] = json!(3);
    let s = statefulset(strategy, 5, status);
    check(
        &s,
        Readiness::Current,
        "PartitionRolledOut",
        &["Partition rollout complete. updated: 2"],
    );
}

#[test]
fn statefulset_revision_mismatch_without_partition() {
    let s = statefulset(
        json!({"type": "RollingUpdate"}),
        3,
        json!({
            "observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3,
            "updatedReplicas": 1, "currentRevision": "pg-6d8f7c5b9", "updateRevision": "pg-84b9d6f7c"
        }),
    );
    check(
        &s,
        Readiness::InProgress,
        "RevisionMismatch",
        &["pg-6d8f7c5b9", "pg-84b9d6f7c"],
    );
}

#[test]
fn statefulset_less_ready_is_in_progress() {
    let s = statefulset(
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
        3,
        json!({
            "observedGeneration": 3, "replicas": 3, "readyReplicas": 1, "currentReplicas": 3,
            "updatedReplicas": 3, "currentRevision": "pg-6d8f7c5b9", "updateRevision": "pg-6d8f7c5b9"
        }),
    );
    check(&s, Readiness::InProgress, "LessReady", &["Ready: 1/3"]);
}

#[test]
fn statefulset_on_delete_is_current() {
    let s = statefulset(
        json!({"type": "OnDelete"}),
        3,
        json!({"observedGeneration": 3, "replicas": 3, "readyReplicas": 0}),
    );
    check(&s, Readiness::Current, "OnDelete", &["OnDelete"]);
}

// ---- DaemonSet --------------------------------------------------------------------------------

fn daemonset(status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-exporter", "namespace": "monitoring", "generation": 2},
        "spec": {
            "selector": {"matchLabels": {"app": "node-exporter"}},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "node-exporter"}},
                         "spec": {"containers": [{"name": "exporter", "image": "prom/node-exporter:v1.8.2"}]}}
        },
        "status": status
    })
}

#[test]
fn daemonset_on_every_node_is_current() {
    let d = daemonset(json!({
        "observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 3, "numberReady": 3, "numberMisscheduled": 0
    }));
    check(
        &d,
        Readiness::Current,
        "AllScheduled",
        &["All replicas scheduled as expected. Replicas: 3"],
    );
}

#[test]
fn daemonset_updating_is_in_progress() {
    let d = daemonset(json!({
        "observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
        "updatedNumberScheduled": 1, "numberAvailable": 2, "numberReady": 2,
        "numberUnavailable": 1, "numberMisscheduled": 0
    }));
    check(&d, Readiness::InProgress, "LessUpdated", &["Updated: 1/3"]);
}

#[test]
fn daemonset_not_yet_observed_is_in_progress() {
    let d = daemonset(json!({
        "desiredNumberScheduled": 0, "currentNumberScheduled": 0, "numberMisscheduled": 0,
        "numberReady": 0
    }));
    check(
        &d,
        Readiness::InProgress,
        "NoObservedGeneration",
        &["DaemonSet status.observedGeneration not found"],
    );
}

// ---- ReplicaSet -------------------------------------------------------------------------------

fn replicaset(status: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-7d9c5b8f6", "namespace": "shop", "generation": 1,
                     "labels": {"app.kubernetes.io/name": "web", "pod-template-hash": "7d9c5b8f6"}},
        "spec": {"replicas": 2,
                 "selector": {"matchLabels": {"app.kubernetes.io/name": "web",
                                              "pod-template-hash": "7d9c5b8f6"}}},
        "status": status
    })
}

#[test]
fn replicaset_available_is_current() {
    let r = replicaset(json!({
        "observedGeneration": 1, "replicas": 2, "fullyLabeledReplicas": 2,
        "readyReplicas": 2, "availableReplicas": 2
    }));
    check(
        &r,
        Readiness::Current,
        "Available",
        &["ReplicaSet is available. Replicas: 2"],
    );
}

#[test]
fn replicaset_less_available_is_in_progress() {
    let r = replicaset(json!({
        "observedGeneration": 1, "replicas": 2, "fullyLabeledReplicas": 2,
        "readyReplicas": 1, "availableReplicas": 1
    }));
    check(
        &r,
        Readiness::InProgress,
        "LessAvailable",
        &["Available: 1/2"],
    );
}

#[test]
fn replicaset_failure_condition_is_in_progress_with_the_controllers_words() {
    let r = replicaset(json!({
        "observedGeneration": 1, "replicas": 0,
        "conditions": [{"type": "ReplicaFailure", "status": "True", "lastTransitionTime": T,
                        "reason": "FailedCreate",
                        "message": "pods \"web-7d9c5b8f6-abcde\" is forbidden: exceeded quota: compute, requested: limits.memory=512Mi, used: limits.memory=2Gi, limited: limits.memory=2Gi"}]
    }));
    check(
        &r,
        Readiness::InProgress,
        "FailedCreate",
        &["exceeded quota: compute"],
    );
}

// ---- Job --------------------------------------------------------------------------------------

fn job(spec_extra: Value, status: Value) -> Value {
    let mut spec = json!({
        "backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1, "parallelism": 1,
        "suspend": false,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "8f1f8a52-49b2-4bd5-a2f4-3a9d1b3c5e77"}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "8f1f8a52-49b2-4bd5-a2f4-3a9d1b3c5e77",
                                             "batch.kubernetes.io/job-name": "migrate"}},
                     "spec": {"restartPolicy": "Never",
                              "containers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:7"}]}}
    });
    for (key, value) in spec_extra.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "shop", "generation": 1,
                     "uid": "8f1f8a52-49b2-4bd5-a2f4-3a9d1b3c5e77"},
        "spec": spec,
        "status": status
    })
}

#[test]
fn job_complete_is_current() {
    let j = job(
        json!({}),
        json!({
            "startTime": T, "completionTime": T, "succeeded": 1, "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {},
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": T, "lastTransitionTime": T,
                 "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"},
                {"type": "Complete", "status": "True", "lastProbeTime": T, "lastTransitionTime": T,
                 "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"}
            ]
        }),
    );
    check(&j, Readiness::Current, "Complete", &["succeeded: 1/1"]);
}

#[test]
fn job_backoff_limit_exceeded_fails() {
    let j = job(
        json!({}),
        json!({
            "startTime": T, "failed": 7, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
            "conditions": [
                {"type": "FailureTarget", "status": "True", "lastProbeTime": T, "lastTransitionTime": T,
                 "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"},
                {"type": "Failed", "status": "True", "lastProbeTime": T, "lastTransitionTime": T,
                 "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
            ]
        }),
    );
    check(
        &j,
        Readiness::Failed,
        "BackoffLimitExceeded",
        &[
            "Job has reached the specified backoff limit",
            "failed pods: 7",
        ],
    );
}

#[test]
fn job_deadline_exceeded_fails() {
    let j = job(
        json!({"activeDeadlineSeconds": 60}),
        json!({
            "startTime": T, "failed": 1, "terminating": 1,
            "conditions": [
                {"type": "FailureTarget", "status": "True", "lastProbeTime": T, "lastTransitionTime": T,
                 "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}
            ]
        }),
    );
    check(
        &j,
        Readiness::Failed,
        "DeadlineExceeded",
        &["Job was active longer than specified deadline"],
    );
}

#[test]
fn job_running_is_in_progress() {
    let j = job(
        json!({"completions": 3, "parallelism": 2}),
        json!({"startTime": T, "active": 2, "succeeded": 1, "failed": 1, "ready": 2, "terminating": 0,
               "uncountedTerminatedPods": {}}),
    );
    check(
        &j,
        Readiness::InProgress,
        "JobRunning",
        &["active: 2", "succeeded: 1/3", "failed: 1"],
    );
}

#[test]
fn job_not_started_is_in_progress() {
    let j = job(json!({}), json!({}));
    check(
        &j,
        Readiness::InProgress,
        "JobNotStarted",
        &["Job not started"],
    );
}

#[test]
fn job_suspended_is_current() {
    let j = job(
        json!({"suspend": true}),
        json!({
            "conditions": [{"type": "Suspended", "status": "True", "lastProbeTime": T,
                            "lastTransitionTime": T, "reason": "JobSuspended", "message": "Job suspended"}]
        }),
    );
    check(&j, Readiness::Current, "Suspended", &["suspended"]);
}

// ---- Pod --------------------------------------------------------------------------------------

fn pod(name: &str, status: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "shop", "creationTimestamp": T,
            "labels": {"app.kubernetes.io/name": "web", "pod-template-hash": "7d9c5b8f6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9c5b8f6",
                                 "uid": "1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5", "controller": true,
                                 "blockOwnerDeletion": true}]
        },
        "spec": {"nodeName": "worker-1", "restartPolicy": "Always",
                 "containers": [{"name": "app", "image": "ghcr.io/acme/web:1.4.2"}]},
        "status": status
    })
}

fn pod_conditions(ready: bool) -> Value {
    let (status, reason, message) = if ready {
        ("True", Value::Null, Value::Null)
    } else {
        (
            "False",
            json!("ContainersNotReady"),
            json!("containers with unready status: [app]"),
        )
    };
    let mut ready_condition =
        json!({"type": "Ready", "status": status, "lastProbeTime": null, "lastTransitionTime": T});
    let mut containers_ready = json!({"type": "ContainersReady", "status": status, "lastProbeTime": null, "lastTransitionTime": T});
    if !ready {
        for c in [&mut ready_condition, &mut containers_ready] {
            c["reason"] = reason.clone();
            c["message"] = message.clone();
        }
    }
    json!([
        {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": null, "lastTransitionTime": T},
        {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": T},
        ready_condition,
        containers_ready,
        {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": T}
    ])
}

fn crash_looping_pod() -> Value {
    pod(
        "web-7d9c5b8f6-x2x4q",
        json!({
            "phase": "Running", "hostIP": "10.0.0.11", "podIP": "10.244.1.23", "startTime": T,
            "qosClass": "BestEffort",
            "conditions": pod_conditions(false),
            "containerStatuses": [{
                "name": "app", "image": "ghcr.io/acme/web:1.4.2",
                "imageID": "ghcr.io/acme/web@sha256:3b1f0c9d2e4a5b6c7d8e9f00112233445566778899aabbccddeeff0011223344",
                "containerID": "containerd://9a8b7c6d5e4f", "ready": false, "started": false,
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                    "message": "back-off 1m20s restarting failed container=app pod=web-7d9c5b8f6-x2x4q_shop(0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e)"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": T,
                                             "finishedAt": T, "containerID": "containerd://9a8b7c6d5e4f"}}
            }]
        }),
    )
}

#[test]
fn pod_running_and_ready_is_current() {
    let p = pod(
        "web-7d9c5b8f6-x2x4q",
        json!({
            "phase": "Running", "podIP": "10.244.1.23", "startTime": T,
            "conditions": pod_conditions(true),
            "containerStatuses": [{"name": "app", "ready": true, "started": true, "restartCount": 0,
                                   "image": "ghcr.io/acme/web:1.4.2",
                                   "state": {"running": {"startedAt": T}}}]
        }),
    );
    check(&p, Readiness::Current, "Ready", &["Pod is Ready"]);
    assert_eq!(pod_failure(&p), None);
}

#[test]
fn pod_running_not_ready_is_in_progress() {
    let p = pod(
        "web-7d9c5b8f6-x2x4q",
        json!({
            "phase": "Running", "startTime": T, "conditions": pod_conditions(false),
            "containerStatuses": [{"name": "app", "ready": false, "started": true, "restartCount": 0,
                                   "image": "ghcr.io/acme/web:1.4.2",
                                   "state": {"running": {"startedAt": T}}}]
        }),
    );
    check(
        &p,
        Readiness::InProgress,
        "ContainersNotReady",
        &["containers with unready status: [app]"],
    );
}

#[test]
fn pod_crash_loop_back_off_fails() {
    let p = crash_looping_pod();
    let parts = [
        "pod web-7d9c5b8f6-x2x4q container app: back-off 1m20s restarting failed container=app",
        "(last exit: Error, code 1)",
    ];
    check(&p, Readiness::Failed, "CrashLoopBackOff", &parts);
    let failure = pod_failure(&p).expect("crash loop is hopeless");
    assert_status(&failure, Readiness::Failed, "CrashLoopBackOff", &parts);
}

#[test]
fn pod_image_pull_back_off_fails() {
    let p = pod(
        "web-5f6b8c9d4-q7k2m",
        json!({
            "phase": "Pending", "hostIP": "10.0.0.12", "podIP": "10.244.2.7", "startTime": T,
            "conditions": pod_conditions(false),
            "containerStatuses": [{
                "name": "app", "image": "ghcr.io/acme/web:1.4.3", "imageID": "", "ready": false,
                "started": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff",
                                      "message": "Back-off pulling image \"ghcr.io/acme/web:1.4.3\""}}
            }]
        }),
    );
    check(
        &p,
        Readiness::Failed,
        "ImagePullBackOff",
        &[
            "pod web-5f6b8c9d4-q7k2m container app: Back-off pulling image \"ghcr.io/acme/web:1.4.3\"",
        ],
    );
}

#[test]
fn pod_init_container_config_error_fails() {
    let p = pod(
        "web-5f6b8c9d4-q7k2m",
        json!({
            "phase": "Pending", "startTime": T,
            "conditions": [
                {"type": "Initialized", "status": "False", "lastProbeTime": null, "lastTransitionTime": T,
                 "reason": "ContainersNotInitialized", "message": "containers with incomplete status: [migrate]"},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": T}
            ],
            "initContainerStatuses": [{
                "name": "migrate", "image": "ghcr.io/acme/migrate:7", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"waiting": {"reason": "CreateContainerConfigError",
                                      "message": "secret \"db-credentials\" not found"}}
            }],
            "containerStatuses": [{"name": "app", "image": "ghcr.io/acme/web:1.4.2", "imageID": "",
                                   "ready": false, "restartCount": 0,
                                   "state": {"waiting": {"reason": "PodInitializing"}}}]
        }),
    );
    let failure = pod_failure(&p).expect("missing secret is hopeless");
    assert_status(
        &failure,
        Readiness::Failed,
        "CreateContainerConfigError",
        &["pod web-5f6b8c9d4-q7k2m init container migrate: secret \"db-credentials\" not found"],
    );
}

#[test]
fn pod_unschedulable_fails() {
    let p = pod(
        "web-7d9c5b8f6-zz9wd",
        json!({
            "phase": "Pending", "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": null,
                            "lastTransitionTime": T, "reason": "Unschedulable",
                            "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}]
        }),
    );
    let parts = [
        "pod web-7d9c5b8f6-zz9wd: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    ];
    check(&p, Readiness::Failed, "Unschedulable", &parts);
    assert_status(
        &pod_failure(&p).expect("unschedulable"),
        Readiness::Failed,
        "Unschedulable",
        &parts,
    );
}

#[test]
fn pod_waiting_for_its_claims_to_bind_is_only_pending() {
    let p = pod(
        "pg-0",
        json!({
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": null,
                            "lastTransitionTime": T, "reason": "Unschedulable",
                            "message": "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}]
        }),
    );
    assert_eq!(pod_failure(&p), None);
    check(
        &p,
        Readiness::InProgress,
        "Pending",
        &["phase Pending", "unbound immediate PersistentVolumeClaims"],
    );
}

#[test]
fn pod_creating_containers_is_in_progress() {
    let p = pod(
        "web-7d9c5b8f6-x2x4q",
        json!({
            "phase": "Pending", "hostIP": "10.0.0.11", "startTime": T,
            "conditions": pod_conditions(false),
            "containerStatuses": [{"name": "app", "image": "ghcr.io/acme/web:1.4.2", "imageID": "",
                                   "ready": false, "started": false, "restartCount": 0,
                                   "state": {"waiting": {"reason": "ContainerCreating"}}}]
        }),
    );
    assert_eq!(pod_failure(&p), None);
    check(
        &p,
        Readiness::InProgress,
        "Pending",
        &["phase Pending: container app ContainerCreating"],
    );
}

#[test]
fn pod_without_status_is_not_observed() {
    let p = pod("web-7d9c5b8f6-x2x4q", json!({}));
    check(&p, Readiness::InProgress, "PodNotObserved", &[]);
}

#[test]
fn pod_succeeded_is_current() {
    let p = pod(
        "migrate-7xk2p",
        json!({
            "phase": "Succeeded", "startTime": T,
            "containerStatuses": [{"name": "migrate", "ready": false, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": T, "finishedAt": T}}}]
        }),
    );
    check(
        &p,
        Readiness::Current,
        "Succeeded",
        &["completed successfully"],
    );
}

#[test]
fn pod_evicted_fails_with_the_kubelets_reason() {
    let p = pod(
        "web-7d9c5b8f6-x2x4q",
        json!({
            "phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. Container app was using 3Gi, request is 0, has larger consumption of ephemeral-storage. ",
            "startTime": T
        }),
    );
    check(
        &p,
        Readiness::Failed,
        "Evicted",
        &["pod web-7d9c5b8f6-x2x4q: The node was low on resource: ephemeral-storage."],
    );
}

#[test]
fn failed_job_pod_is_not_a_pod_failure() {
    // The Job's own conditions decide (backoffLimit): its failed pods are not fail-fast signals.
    let mut p = pod(
        "migrate-7xk2p",
        json!({
            "phase": "Failed", "startTime": T,
            "containerStatuses": [{"name": "migrate", "ready": false, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 2, "reason": "Error",
                                                            "startedAt": T, "finishedAt": T}}}]
        }),
    );
    p["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(pod_failure(&p), None);
    check(
        &p,
        Readiness::Failed,
        "PodFailed",
        &["container migrate terminated: Error (exit code 2)"],
    );
}

#[test]
fn terminating_crash_looping_pod_is_not_a_pod_failure() {
    // An old ReplicaSet's pod on its way out: the rollout replacing it decides.
    let mut p = crash_looping_pod();
    p["metadata"]["deletionTimestamp"] = json!(T);
    assert_eq!(pod_failure(&p), None);
    check(&p, Readiness::InProgress, "Terminating", &["being deleted"]);
}

// ---- PersistentVolumeClaim ------------------------------------------------------------------

fn pvc(phase: &str, volume: Option<&str>) -> Value {
    let mut c = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-pg-0", "namespace": "db",
                     "annotations": {"volume.kubernetes.io/storage-provisioner": "rook-ceph.rbd.csi.ceph.com"},
                     "finalizers": ["kubernetes.io/pvc-protection"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "ceph-block",
                 "volumeMode": "Filesystem", "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": phase}
    });
    if let Some(volume) = volume {
        c["spec"]["volumeName"] = json!(volume);
        c["status"]["accessModes"] = json!(["ReadWriteOnce"]);
        c["status"]["capacity"] = json!({"storage": "10Gi"});
    }
    c
}

#[test]
fn pvc_pending_is_in_progress() {
    check(
        &pvc("Pending", None),
        Readiness::InProgress,
        "NotBound",
        &["phase Pending"],
    );
}

#[test]
fn pvc_bound_is_current() {
    check(
        &pvc("Bound", Some("pvc-3f2b1a0c-9d8e-4f7a-b6c5-d4e3f2a1b0c9")),
        Readiness::Current,
        "Bound",
        &["pvc-3f2b1a0c-9d8e-4f7a-b6c5-d4e3f2a1b0c9"],
    );
}

#[test]
fn pvc_lost_fails() {
    check(
        &pvc("Lost", Some("pvc-gone")),
        Readiness::Failed,
        "Lost",
        &["lost"],
    );
}

// ---- Service ----------------------------------------------------------------------------------

fn service(kind: &str, status: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": kind, "clusterIP": "10.96.14.7", "clusterIPs": ["10.96.14.7"],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                 "selector": {"app.kubernetes.io/name": "web"}, "sessionAffinity": "None"},
        "status": status
    })
}

#[test]
fn load_balancer_without_ingress_is_in_progress() {
    let s = service("LoadBalancer", json!({"loadBalancer": {}}));
    check(&s, Readiness::InProgress, "NoIngress", &["ingress"]);
}

#[test]
fn load_balancer_with_ingress_is_current() {
    let s = service(
        "LoadBalancer",
        json!({"loadBalancer": {"ingress": [{"ip": "192.168.10.240", "ipMode": "VIP"}]}}),
    );
    check(
        &s,
        Readiness::Current,
        "LoadBalancerReady",
        &["192.168.10.240"],
    );
}

#[test]
fn cluster_ip_service_is_current_once_it_exists() {
    let s = service("ClusterIP", json!({"loadBalancer": {}}));
    check(&s, Readiness::Current, "Exists", &["ClusterIP"]);
}

// ---- Namespace --------------------------------------------------------------------------------

#[test]
fn namespace_active_is_current() {
    let n = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"kubernetes.io/metadata.name": "shop"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    });
    check(&n, Readiness::Current, "Active", &[]);
}

#[test]
fn namespace_terminating_is_in_progress() {
    let mut n = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "deletionTimestamp": T,
                     "labels": {"kubernetes.io/metadata.name": "shop"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Terminating", "conditions": [
            {"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": T,
             "reason": "SomeResourcesRemain", "message": "Some resources are remaining: pods. has 2 resource instances"},
            {"type": "NamespaceFinalizersRemaining", "status": "False", "lastTransitionTime": T,
             "reason": "ContentHasNoFinalizers", "message": "All content-preserving finalizers finished"}
        ]}
    });
    check(&n, Readiness::InProgress, "Terminating", &["being deleted"]);
    // The phase alone says the same.
    n["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("deletionTimestamp");
    check(&n, Readiness::InProgress, "Terminating", &["Terminating"]);
}

// ---- CustomResourceDefinition ---------------------------------------------------------------

fn crd(conditions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "generation": 1},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
        "status": {
            "acceptedNames": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "conditions": conditions,
            "storedVersions": ["v1"]
        }
    })
}

#[test]
fn crd_established_is_current() {
    let c = crd(json!([
        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": T,
         "reason": "NoConflicts", "message": "no conflicts found"},
        {"type": "Established", "status": "True", "lastTransitionTime": T,
         "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
    ]));
    check(&c, Readiness::Current, "Established", &[]);
}

#[test]
fn crd_names_not_accepted_fails() {
    let c = crd(json!([
        {"type": "NamesAccepted", "status": "False", "lastTransitionTime": T,
         "reason": "PluralConflict", "message": "\"widgets\" is already in use"},
        {"type": "Established", "status": "False", "lastTransitionTime": T,
         "reason": "NotAccepted", "message": "not all names are accepted"}
    ]));
    check(
        &c,
        Readiness::Failed,
        "PluralConflict",
        &["\"widgets\" is already in use"],
    );
}

#[test]
fn crd_installing_is_in_progress() {
    let c = crd(json!([
        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": T,
         "reason": "NoConflicts", "message": "no conflicts found"},
        {"type": "Established", "status": "False", "lastTransitionTime": T,
         "reason": "Installing", "message": "the initial names have been accepted"}
    ]));
    check(&c, Readiness::InProgress, "Installing", &[]);
}

// ---- PodDisruptionBudget ----------------------------------------------------------------------

fn pdb(status: Value) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop", "generation": 1},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}}},
        "status": status
    })
}

#[test]
fn pdb_observed_is_current() {
    let p = pdb(json!({
        "observedGeneration": 1, "currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1,
        "expectedPods": 3,
        "conditions": [{"type": "DisruptionAllowed", "status": "True", "lastTransitionTime": T,
                        "observedGeneration": 1, "reason": "SufficientPods", "message": ""}]
    }));
    check(
        &p,
        Readiness::Current,
        "Observed",
        &["healthy 3/2", "disruptions allowed: 1"],
    );
}

#[test]
fn pdb_not_yet_observed_is_in_progress() {
    let p = pdb(
        json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
    );
    check(&p, Readiness::InProgress, "NoObservedGeneration", &[]);
}

#[test]
fn pdb_sync_failed_is_in_progress() {
    let p = pdb(json!({
        "observedGeneration": 1, "currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
        "expectedPods": 0,
        "conditions": [{"type": "DisruptionAllowed", "status": "False", "lastTransitionTime": T,
                        "observedGeneration": 1, "reason": "SyncFailed",
                        "message": "found no controllers for pod \"web-0\""}]
    }));
    check(
        &p,
        Readiness::InProgress,
        "SyncFailed",
        &["found no controllers"],
    );
}

// ---- custom resources and kinds without status ------------------------------------------------

fn cnpg_cluster(status: Value) -> Value {
    json!({
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": "pg", "namespace": "db", "generation": 1},
        "spec": {"instances": 3, "imageName": "ghcr.io/cloudnative-pg/postgresql:16.4",
                 "storage": {"size": "10Gi"}},
        "status": status
    })
}

#[test]
fn cnpg_cluster_not_ready_is_in_progress() {
    let c = cnpg_cluster(json!({
        "instances": 1, "readyInstances": 0, "phase": "Setting up primary",
        "phaseReason": "Creating primary instance pg-1", "latestGeneratedNode": 1,
        "currentPrimary": "", "targetPrimary": "pg-1",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": T,
                        "reason": "ClusterIsNotReady", "message": "Cluster Is Not Ready"}]
    }));
    check(
        &c,
        Readiness::InProgress,
        "ClusterIsNotReady",
        &["Cluster Is Not Ready (phase: Setting up primary)"],
    );
}

#[test]
fn cnpg_cluster_ready_is_current() {
    let c = cnpg_cluster(json!({
        "instances": 3, "readyInstances": 3, "phase": "Cluster in healthy state",
        "currentPrimary": "pg-1", "targetPrimary": "pg-1",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": T,
             "reason": "ClusterIsReady", "message": "Cluster is Ready"},
            {"type": "ContinuousArchiving", "status": "True", "lastTransitionTime": T,
             "reason": "ContinuousArchivingSuccess", "message": "Continuous archiving is working"}
        ]
    }));
    check(
        &c,
        Readiness::Current,
        "ClusterIsReady",
        &["Cluster is Ready"],
    );
}

#[test]
fn stalled_custom_resource_fails_and_reconciling_is_in_progress() {
    let mut cr = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "shop", "generation": 2},
        "status": {"observedGeneration": 2, "conditions": [
            {"type": "Stalled", "status": "True", "reason": "InvalidSpec",
             "message": "spec.size: must be at most 10"}
        ]}
    });
    check(
        &cr,
        Readiness::Failed,
        "InvalidSpec",
        &["spec.size: must be at most 10"],
    );
    cr["status"]["conditions"] = json!([
        {"type": "Reconciling", "status": "True", "reason": "Progressing", "message": "creating 2 of 3 parts"}
    ]);
    check(
        &cr,
        Readiness::InProgress,
        "Progressing",
        &["creating 2 of 3 parts"],
    );
}

#[test]
fn config_map_and_friends_are_current_once_they_exist() {
    let config_map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web-config", "namespace": "shop", "resourceVersion": "1234"},
        "data": {"LOG_LEVEL": "info"}
    });
    check(&config_map, Readiness::Current, "Exists", &[]);
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    });
    check(&role, Readiness::Current, "Exists", &[]);
}

#[test]
fn custom_resource_without_status_is_current() {
    let cr = json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "web", "namespace": "shop", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
                 "endpoints": [{"port": "http", "interval": "30s"}]}
    });
    check(&cr, Readiness::Current, "Exists", &["nothing to wait for"]);
}

// ---- messages ---------------------------------------------------------------------------------

#[test]
fn multi_line_message_is_flattened() {
    let cr = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "generation": 1},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ApplyFailed",
            "message": "apply failed:\n  - field a: invalid\r\n  - field b:\tmissing\n"}]}
    });
    let status = object_status(&cr);
    assert_eq!(status.state, Readiness::InProgress);
    assert_eq!(
        status.message,
        "apply failed: - field a: invalid - field b: missing"
    );
}

#[test]
fn long_message_is_cut_with_an_ellipsis() {
    let long = "x ".repeat(400);
    let mut d = deployment(1, Some(1), json!({"observedGeneration": 1}));
    d["status"]["conditions"] = json!([{"type": "Progressing", "status": "False",
        "reason": "ProgressDeadlineExceeded", "message": long}]);
    let status = object_status(&d);
    assert_eq!(status.state, Readiness::Failed);
    assert!(
        status.message.chars().count() <= MESSAGE_LIMIT,
        "{}",
        status.message
    );
    assert!(status.message.ends_with('…'));
}

// ---- selectors --------------------------------------------------------------------------------

fn labelled_pod(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}})
}

fn with_selector(selector: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"selector": selector}})
}

#[test]
fn match_labels_select_pods_with_all_labels() {
    let d = with_selector(json!({"matchLabels": {"app": "web", "tier": "frontend"}}));
    assert!(selector_matches(
        &d,
        &labelled_pod(json!({"app": "web", "tier": "frontend", "pod-template-hash": "7d9c5b8f6"}))
    ));
    assert!(!selector_matches(&d, &labelled_pod(json!({"app": "web"}))));
    assert!(!selector_matches(
        &d,
        &labelled_pod(json!({"app": "api", "tier": "frontend"}))
    ));
    assert!(!selector_matches(
        &d,
        &json!({"metadata": {"name": "unlabelled"}})
    ));
}

#[test]
fn match_expressions_operators() {
    let d = with_selector(json!({"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["web", "api"]},
        {"key": "track", "operator": "NotIn", "values": ["canary"]},
        {"key": "release", "operator": "Exists"},
        {"key": "debug", "operator": "DoesNotExist"}
    ]}));
    assert!(selector_matches(
        &d,
        &labelled_pod(json!({"app": "api", "release": "r7"}))
    ));
    assert!(selector_matches(
        &d,
        &labelled_pod(json!({"app": "web", "track": "stable", "release": ""}))
    ));
    // In
    assert!(!selector_matches(
        &d,
        &labelled_pod(json!({"app": "db", "release": "r7"}))
    ));
    // NotIn
    assert!(!selector_matches(
        &d,
        &labelled_pod(json!({"app": "web", "track": "canary", "release": "r7"}))
    ));
    // Exists
    assert!(!selector_matches(&d, &labelled_pod(json!({"app": "web"}))));
    // DoesNotExist
    assert!(!selector_matches(
        &d,
        &labelled_pod(json!({"app": "web", "release": "r7", "debug": "true"}))
    ));
}

#[test]
fn match_labels_and_expressions_must_both_hold() {
    let d = with_selector(json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}]
    }));
    assert!(selector_matches(
        &d,
        &labelled_pod(json!({"app": "web", "tier": "frontend"}))
    ));
    assert!(!selector_matches(
        &d,
        &labelled_pod(json!({"app": "web", "tier": "backend"}))
    ));
    assert!(!selector_matches(
        &d,
        &labelled_pod(json!({"app": "api", "tier": "frontend"}))
    ));
}

#[test]
fn absent_empty_or_unknown_selectors_select_nothing() {
    let pod = labelled_pod(json!({"app": "web"}));
    let no_selector = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}});
    assert!(!selector_matches(&no_selector, &pod));
    assert!(!selector_matches(&with_selector(json!({})), &pod));
    assert!(!selector_matches(
        &with_selector(json!({"matchLabels": {}, "matchExpressions": []})),
        &pod
    ));
    assert!(!selector_matches(
        &with_selector(
            json!({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]})
        ),
        &pod
    ));
}

#[test]
fn job_selector_set_by_the_server_selects_its_pods() {
    let j = job(json!({}), json!({}));
    let own = labelled_pod(json!({
        "batch.kubernetes.io/controller-uid": "8f1f8a52-49b2-4bd5-a2f4-3a9d1b3c5e77",
        "batch.kubernetes.io/job-name": "migrate", "controller-uid": "8f1f8a52-49b2-4bd5-a2f4-3a9d1b3c5e77",
        "job-name": "migrate"
    }));
    let other_run = labelled_pod(json!({
        "batch.kubernetes.io/controller-uid": "0a0a0a0a-49b2-4bd5-a2f4-3a9d1b3c5e77",
        "batch.kubernetes.io/job-name": "migrate"
    }));
    assert!(selector_matches(&j, &own));
    assert!(!selector_matches(&j, &other_run));
}

#[test]
fn workload_pods_select_their_own() {
    let d = deployment(1, Some(1), json!({}));
    assert!(selector_matches(&d, &crash_looping_pod()));
}

#[test]
fn kinds_are_told_by_group_and_kind() {
    assert_eq!(
        group_kind(&json!({"apiVersion": "v1", "kind": "Pod"})),
        ("", "Pod")
    );
    assert_eq!(
        group_kind(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})),
        ("apps", "Deployment")
    );
    assert_eq!(
        group_kind(
            &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"})
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition")
    );
    // A Deployment-named kind of another group is a custom resource: its Ready condition decides.
    let foreign = json!({"apiVersion": "example.com/v1", "kind": "Deployment", "metadata": {"name": "x"},
                         "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    check(&foreign, Readiness::Current, "Ready", &[]);
    assert!(selects_pods("batch", "Job"));
    assert!(!selects_pods("example.com", "Deployment"));
}
