//! Resuming a request whose record was started but never finished: the agent died (or was
//! rescheduled) mid-op and the control plane redelivered it.
//!
//! - `apply_manifests` is applied again (server-side apply is idempotent), and the report is the
//!   FIRST execution's: an object the re-run finds `unchanged` but whose `creationTimestamp` is
//!   not before the record's (the API server's clock; the record is created before the op
//!   starts) was created by the first execution and is reported `create`; one created earlier
//!   whose `harmony-agent` apply entry in `managedFields` is that recent was changed by it and is
//!   reported `update` (its field diff is not known any more). Timestamps have one-second
//!   resolution, so an object created by someone else in the same second as the record would
//!   also be reported `create`.
//! - `service_create` is never called twice: the answer is the instance's status from its
//!   provider, or `not_found` when the provider does not know the instance.
//! - `delete_manifests` and `service_delete` run again (both are idempotent); objects the first
//!   run deleted are then reported `unchanged`, since a deletion leaves nothing to tell them from
//!   objects that never existed.

use harmony::domain::capability::{K8sClient, K8sObject, ObjectRef};
use harmony_agent_protocol::ops::{ApplyManifestsParams, ChangesResult};
use harmony_agent_protocol::{
    ErrorBody, InstanceState, Op, RawJson, Req, ServiceCreateParams, WireChange, code,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

use super::Executor;
use super::ops::{params, provider_body, raw};
use crate::cluster::FIELD_MANAGER;

/// What the API server says about one object now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// `metadata.creationTimestamp`.
    pub created: Option<Time>,
    /// The time of the agent's own apply entry in `metadata.managedFields`.
    pub applied_by_agent: Option<Time>,
}

/// Reads [`Seen`] from an object.
pub fn seen(object: &Value) -> Seen {
    let time = |v: Option<&Value>| v.and_then(|t| serde_json::from_value::<Time>(t.clone()).ok());
    let applied_by_agent = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|entries| {
            entries.iter().find(|e| {
                e.get("manager").and_then(Value::as_str) == Some(FIELD_MANAGER)
                    && e.get("operation").and_then(Value::as_str) == Some("Apply")
            })
        })
        .and_then(|e| time(e.get("time")));
    Seen {
        created: time(object.pointer("/metadata/creationTimestamp")),
        applied_by_agent,
    }
}

/// Rewrites the re-run's `unchanged` entries into what the first execution did (see the
/// module doc), given what the API server says about each object (by its report name).
pub fn correct(changes: &mut [WireChange], seen: &HashMap<String, Seen>, since: &Time) {
    for c in changes.iter_mut().filter(|c| c.action == "unchanged") {
        let Some(s) = seen.get(&c.object) else {
            continue;
        };
        if s.created.as_ref().is_some_and(|t| t >= since) {
            c.action = "create".into();
        } else if s.applied_by_agent.as_ref().is_some_and(|t| t >= since) {
            c.action = "update".into();
        }
    }
}

/// The namespaces `objects` use without declaring them: the apply creates those that are
/// missing first, so the first execution may have created them.
fn implicit_namespaces(objects: &[ObjectRef]) -> Vec<ObjectRef> {
    let declared: BTreeSet<&str> = objects
        .iter()
        .filter(|r| r.kind == "Namespace" && r.api_version == "v1")
        .map(|r| r.name.as_str())
        .collect();
    let used: BTreeSet<&str> = objects
        .iter()
        .filter_map(|r| r.namespace.as_deref())
        .filter(|ns| !declared.contains(ns))
        .collect();
    used.into_iter()
        .map(|ns| ObjectRef {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: ns.into(),
        })
        .collect()
}

impl Executor {
    /// `apply_manifests` after a crash: apply again, report what the first execution did.
    pub(super) async fn reapply(&self, req: &Req, since: &Time) -> Result<RawJson, ErrorBody> {
        let p: ApplyManifestsParams = params(Op::ApplyManifests, &req.params)?;
        let outcome = self.apply(req).await;
        if p.dry_run {
            return outcome.and_then(|r| raw(&r));
        }
        let (mut changes, error) = match outcome {
            Ok(r) => (r.changes, None),
            Err(mut e) => (std::mem::take(&mut e.applied), Some(e)),
        };
        let refs: Vec<ObjectRef> = p
            .manifests
            .into_iter()
            .filter_map(|m| K8sObject::new(m).ok().map(|o| o.reference().clone()))
            .collect();
        let mut lookups: Vec<ObjectRef> = refs
            .iter()
            .filter(|r| {
                let name = r.to_string();
                changes
                    .iter()
                    .any(|c| c.object == name && c.action == "unchanged")
            })
            .cloned()
            .collect();
        let missing_namespaces: Vec<ObjectRef> = implicit_namespaces(&refs)
            .into_iter()
            .filter(|ns| {
                let name = ns.to_string();
                !changes.iter().any(|c| c.object == name)
            })
            .collect();
        lookups.extend(missing_namespaces.iter().cloned());
        let mut found = HashMap::new();
        if let Ok(t) = self.cluster.topology(false, false).await {
            for r in &lookups {
                // A lookup that fails leaves the re-run's word for that object.
                if let Ok(Some(o)) = t.get(r).await {
                    found.insert(r.to_string(), seen(o.value()));
                }
            }
        }
        let location = changes.iter().find_map(|c| c.location.clone());
        let mut created_namespaces: Vec<WireChange> = missing_namespaces
            .iter()
            .map(|ns| WireChange {
                object: ns.to_string(),
                action: "unchanged".into(),
                location: location.clone(),
                diff: Vec::new(),
                status: None,
            })
            .collect();
        correct(&mut created_namespaces, &found, since);
        created_namespaces.retain(|c| c.action == "create");
        correct(&mut changes, &found, since);
        let n = changes.iter().filter(|c| c.action == "create").count() + created_namespaces.len();
        log::info!(
            "request {}: resumed apply reports {n} object(s) created by the first execution",
            req.id
        );
        created_namespaces.extend(changes);
        let changes = created_namespaces;
        match error {
            None => raw(&ChangesResult { changes }),
            Some(mut e) => {
                e.applied = changes;
                Err(e)
            }
        }
    }

    /// `service_create` after a crash: the instance's status, never a second create.
    pub(super) async fn status_instead_of_create(&self, req: &Req) -> Result<RawJson, ErrorBody> {
        let p: ServiceCreateParams = params(Op::ServiceCreate, &req.params)?;
        let status = self
            .registry
            .recover_created(&p.instance_id, &p.service_type, &p.spec)
            .await
            .map_err(|e| provider_body(&e))?;
        if status.state == InstanceState::Deleted {
            return Err(ErrorBody::new(
                code::NOT_FOUND,
                format!(
                    "the agent restarted while creating instance {:?} for request {}, and its provider {:?} does not know the instance; a create is never repeated under the same request id: submit service_create again with a new request id",
                    p.instance_id, req.id, status.provider
                ),
            ));
        }
        log::info!(
            "request {}: service_create of {} answered with its status ({}) instead of a second create",
            req.id,
            p.instance_id,
            status.state
        );
        raw(&status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(text: &str) -> Time {
        serde_json::from_value(json!(text)).unwrap()
    }

    fn change(object: &str, action: &str) -> WireChange {
        WireChange {
            object: object.into(),
            action: action.into(),
            location: None,
            diff: Vec::new(),
            status: None,
        }
    }

    #[test]
    fn seen_reads_creation_and_the_agents_apply_time() {
        let o = json!({"metadata": {"creationTimestamp": "2025-01-01T00:00:05Z", "managedFields": [
            {"manager": "kubectl", "operation": "Update", "time": "2025-01-01T00:00:09Z"},
            {"manager": "harmony-agent", "operation": "Apply", "time": "2025-01-01T00:00:07Z"}
        ]}});
        assert_eq!(
            seen(&o),
            Seen {
                created: Some(t("2025-01-01T00:00:05Z")),
                applied_by_agent: Some(t("2025-01-01T00:00:07Z")),
            }
        );
        assert_eq!(seen(&json!({})), Seen::default());
    }

    #[test]
    fn unchanged_objects_the_first_execution_touched_are_reported_as_it_did() {
        let since = t("2025-01-01T00:00:05Z");
        let mut changes = vec![
            change("v1 ConfigMap a/new", "unchanged"),
            change("v1 ConfigMap a/same-second", "unchanged"),
            change("v1 ConfigMap a/changed", "unchanged"),
            change("v1 ConfigMap a/old", "unchanged"),
            change("v1 ConfigMap a/created-by-rerun", "create"),
            change("v1 ConfigMap a/unknown", "unchanged"),
        ];
        let seen = HashMap::from([
            (
                "v1 ConfigMap a/new".to_string(),
                Seen {
                    created: Some(t("2025-01-01T00:00:06Z")),
                    applied_by_agent: None,
                },
            ),
            (
                "v1 ConfigMap a/same-second".to_string(),
                Seen {
                    created: Some(since.clone()),
                    applied_by_agent: None,
                },
            ),
            (
                "v1 ConfigMap a/changed".to_string(),
                Seen {
                    created: Some(t("2024-01-01T00:00:00Z")),
                    applied_by_agent: Some(t("2025-01-01T00:00:06Z")),
                },
            ),
            (
                "v1 ConfigMap a/old".to_string(),
                Seen {
                    created: Some(t("2024-01-01T00:00:00Z")),
                    applied_by_agent: Some(t("2024-06-01T00:00:00Z")),
                },
            ),
        ]);
        correct(&mut changes, &seen, &since);
        let actions: Vec<&str> = changes.iter().map(|c| c.action.as_str()).collect();
        assert_eq!(
            actions,
            [
                "create",
                "create",
                "update",
                "unchanged",
                "create",
                "unchanged"
            ]
        );
    }

    #[test]
    fn implicit_namespaces_are_the_used_undeclared_ones() {
        let r = |kind: &str, ns: Option<&str>, name: &str| ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: ns.map(Into::into),
            name: name.into(),
        };
        let found = implicit_namespaces(&[
            r("Namespace", None, "declared"),
            r("ConfigMap", Some("declared"), "a"),
            r("ConfigMap", Some("implicit"), "b"),
            r("ConfigMap", Some("implicit"), "c"),
        ]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].to_string(), "v1 Namespace implicit");
    }
}
