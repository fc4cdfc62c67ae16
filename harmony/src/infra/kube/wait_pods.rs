//! The pods a wait looks at: one namespace's pods indexed by their controller, and which of
//! them belong to a workload's newest revision (the ones that can fail its rollout).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::domain::capability::{ObjectStatus, pod_failure, selector_matches};

/// One namespace's pods, indexed by the name of the controller that owns each (its
/// `ownerReferences` entry with `controller: true`).
#[derive(Default)]
pub(super) struct NamespacePods {
    pods: BTreeMap<String, Value>,
    by_owner: HashMap<String, BTreeSet<String>>,
}

impl NamespacePods {
    /// Forgets every pod (a re-list follows).
    pub(super) fn clear(&mut self) {
        self.pods.clear();
        self.by_owner.clear();
    }

    /// Adds or replaces `pod`; returns its controller's kind and name.
    pub(super) fn apply(&mut self, pod: Value) -> Option<(String, String)> {
        let name = pod["metadata"]["name"].as_str()?.to_string();
        self.delete(&name);
        let owner = controller(&pod);
        if let Some((_, owner_name)) = &owner {
            self.by_owner
                .entry(owner_name.clone())
                .or_default()
                .insert(name.clone());
        }
        self.pods.insert(name, pod);
        owner
    }

    /// Removes the pod `name`; returns its controller's kind and name.
    pub(super) fn delete(&mut self, name: &str) -> Option<(String, String)> {
        let pod = self.pods.remove(name)?;
        let owner = controller(&pod);
        if let Some((_, owner_name)) = &owner
            && let Some(set) = self.by_owner.get_mut(owner_name)
        {
            set.remove(name);
        }
        owner
    }

    /// The hopeless state of the first pod of `workload`'s newest revision that is in one.
    /// Only the pods its newest revision's controller owns are looked at when the workload
    /// says which that is; otherwise every pod its selector matches.
    pub(super) fn failure_for(&self, workload: &Value) -> Option<ObjectStatus> {
        let owned: Box<dyn Iterator<Item = &Value>> = match revision_owner(workload) {
            Some(owner) => Box::new(
                self.by_owner
                    .get(owner)
                    .into_iter()
                    .flatten()
                    .filter_map(|n| self.pods.get(n)),
            ),
            None => Box::new(self.pods.values()),
        };
        owned
            .filter(|p| selector_matches(workload, p) && of_newest_revision(workload, p))
            .find_map(pod_failure)
    }
}

/// The kind and name of the controller owning `pod`.
fn controller(pod: &Value) -> Option<(String, String)> {
    let owner = pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"].as_bool() == Some(true))?;
    Some((
        owner["kind"].as_str()?.to_string(),
        owner["name"].as_str()?.to_string(),
    ))
}

/// The name of the controller owning the pods of `workload`'s newest revision: a
/// Deployment's newest ReplicaSet (when its status names it), otherwise the workload itself.
fn revision_owner(workload: &Value) -> Option<&str> {
    match workload["kind"].as_str()? {
        "Deployment" => newest_replicaset(workload),
        _ => workload["metadata"]["name"].as_str(),
    }
}

/// The names of the workloads a pod whose controller is `kind`/`name` may belong to: the
/// controller itself, and for a ReplicaSet its Deployment (the name less the pod-template hash).
pub(super) fn workload_names(kind: &str, name: &str) -> Vec<String> {
    let mut names = vec![name.to_string()];
    if kind == "ReplicaSet"
        && let Some((deployment, _hash)) = name.rsplit_once('-')
    {
        names.push(deployment.to_string());
    }
    names
}

/// Whether `pod` belongs to `workload`'s newest revision, so that a rollout fixing a
/// crash-looping Deployment is not failed by the old ReplicaSet's pods still crashing while
/// they are replaced: a Deployment's pods must be owned by the ReplicaSet its `Progressing`
/// condition names (`ReplicaSet "web-5d4f8c" is progressing.`), a StatefulSet's carry its
/// `updateRevision`. When the workload does not say, every selected pod counts.
fn of_newest_revision(workload: &Value, pod: &Value) -> bool {
    let kind = workload["kind"].as_str().unwrap_or_default();
    match kind {
        "Deployment" => {
            let Some(rs) = newest_replicaset(workload) else {
                return true;
            };
            pod["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(|owners| {
                    owners
                        .iter()
                        .filter(|o| o["kind"] == "ReplicaSet")
                        .all(|o| o["name"].as_str() == Some(rs))
                })
        }
        "StatefulSet" => match workload["status"]["updateRevision"].as_str() {
            Some(rev) => {
                pod["metadata"]["labels"]["controller-revision-hash"].as_str() == Some(rev)
            }
            None => true,
        },
        _ => true,
    }
}

/// The ReplicaSet a Deployment's `Progressing` condition names (the new one in a rollout).
fn newest_replicaset(deployment: &Value) -> Option<&str> {
    let message = deployment["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Progressing")?["message"]
        .as_str()?;
    let (_, rest) = message
        .split_once("eplica set \"")
        .or_else(|| message.split_once("eplicaSet \""))?;
    rest.split_once('"').map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_revision_pods_can_fail_a_rollout() {
        let deployment = serde_json::json!({"kind": "Deployment", "status": {"conditions": [
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
             "message": "ReplicaSet \"web-7c9f\" is progressing."}]}});
        let pod = |rs: &str| {
            serde_json::json!({"metadata": {"ownerReferences": [
            {"kind": "ReplicaSet", "name": rs}]}})
        };
        assert_eq!(newest_replicaset(&deployment), Some("web-7c9f"));
        assert!(of_newest_revision(&deployment, &pod("web-7c9f")));
        assert!(!of_newest_revision(&deployment, &pod("web-55aa")));
        let created = serde_json::json!({"kind": "Deployment", "status": {"conditions": [
            {"type": "Progressing", "message": "Created new replica set \"web-1\""}]}});
        assert_eq!(newest_replicaset(&created), Some("web-1"));
        let silent = serde_json::json!({"kind": "Deployment", "status": {}});
        assert!(of_newest_revision(&silent, &pod("anything")));
        let sts = serde_json::json!({"kind": "StatefulSet", "status": {"updateRevision": "db-2"}});
        let labelled = |rev: &str| serde_json::json!({"metadata": {"labels": {"controller-revision-hash": rev}}});
        assert!(of_newest_revision(&sts, &labelled("db-2")));
        assert!(!of_newest_revision(&sts, &labelled("db-1")));
    }

    #[test]
    fn pods_are_found_by_their_controller_and_failures_by_the_newest_revision() {
        let deployment = serde_json::json!({"kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"conditions": [{"type": "Progressing", "status": "True",
                "message": "ReplicaSet \"web-new\" is progressing."}]}});
        let pod = |name: &str, rs: &str, reason: &str| {
            serde_json::json!({"kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "controller": true}]},
            "status": {"containerStatuses": [{"name": "app",
                "state": {"waiting": {"reason": reason, "message": "m"}}}]}})
        };
        let mut pods = NamespacePods::default();
        assert_eq!(
            pods.apply(pod("old-1", "web-old", "CrashLoopBackOff")),
            Some(("ReplicaSet".to_string(), "web-old".to_string()))
        );
        assert!(
            pods.failure_for(&deployment).is_none(),
            "old pods do not fail the rollout"
        );
        pods.apply(pod("new-1", "web-new", "ImagePullBackOff"));
        assert_eq!(
            pods.failure_for(&deployment).unwrap().reason,
            "ImagePullBackOff"
        );
        pods.delete("new-1");
        assert!(pods.failure_for(&deployment).is_none());
        assert_eq!(workload_names("ReplicaSet", "web-new"), ["web-new", "web"]);
        assert_eq!(workload_names("Job", "migrate"), ["migrate"]);
    }
}
