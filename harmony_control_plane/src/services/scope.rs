//! Which project a request runs for, and whether it may: a tenant names one of its projects,
//! which needs a quota in the region; tenants may only run `apply_manifests`,
//! `delete_manifests` and `get_objects`, on namespaced objects of the project's namespace. The
//! [`ProjectScope`] is snapshotted into the stored request and travels on its `req` frame.

use harmony_agent_protocol::RawJson;
use harmony_agent_protocol::ops::{ApplyManifestsParams, DeleteManifestsParams, GetObjectsParams};
use harmony_agent_protocol::tenancy::{LIMIT_RANGE_NAME, ProjectQuota, ProjectScope, QUOTA_NAME};

use super::ControlPlane;
use crate::store::{RequestScope, StoreError};

/// The ops a tenant may run.
pub const TENANT_OPS: [&str; 3] = ["apply_manifests", "delete_manifests", "get_objects"];

/// Kinds that are cluster-scoped in every Kubernetes cluster (a tenant may not touch them).
pub const CLUSTER_SCOPED_KINDS: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "PriorityClass",
    "RuntimeClass",
    "IngressClass",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "CertificateSigningRequest",
    "FlowSchema",
    "PriorityLevelConfiguration",
    "ComponentStatus",
    "ClusterIssuer",
    "SecurityContextConstraints",
];

/// Kinds inside the project namespace that only the control plane sets (from the quota).
const QUOTA_KINDS: [(&str, &str); 2] = [
    ("ResourceQuota", QUOTA_NAME),
    ("LimitRange", LIMIT_RANGE_NAME),
];

/// Why a request may not run as asked.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// A field is missing or malformed (400).
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong and the fix.
        reason: String,
    },
    /// The caller's token does not allow it (403).
    #[error("{0}")]
    Forbidden(String),
    /// An object of a project's request is of a cluster-scoped kind (422 `containment`).
    #[error(
        "params: {0} is cluster-scoped in this region's cluster; a project only holds namespaced objects of its namespace {1}"
    )]
    ClusterScoped(String, String),
    /// No such project for this tenant (404; another tenant's project too).
    #[error(
        "project: tenant \"{tenant}\" has no project \"{project}\"; list them with GET /v1/projects"
    )]
    UnknownProject {
        /// The tenant.
        tenant: String,
        /// The project.
        project: String,
    },
    /// The project has no quota in the region (422).
    #[error(
        "project \"{project}\" of tenant \"{tenant}\" has no quota in region \"{region}\", so it cannot deploy there; an admin sets one with PUT /v1/admin/tenants/{tenant}/projects/{project}/quotas/{region}"
    )]
    NoQuota {
        /// The tenant.
        tenant: String,
        /// The project.
        project: String,
        /// The region.
        region: String,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who asks, and for which project.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The tenant the caller's token is for (`None`: the admin).
    pub caller: Option<&'a str>,
    /// The `tenant` field of the body.
    pub tenant: Option<&'a str>,
    /// The `project` field of the body.
    pub project: Option<&'a str>,
}

/// The scope a request runs in, after every check (`None`: an admin request for no project).
pub async fn request_scope(
    cp: &ControlPlane,
    asked: Asked<'_>,
    region: &str,
    op: &str,
    params: &RawJson,
) -> Result<Option<RequestScope>, ScopeError> {
    let tenant = match (asked.caller, asked.tenant) {
        (Some(caller), Some(named)) if caller != named => {
            return Err(ScopeError::Forbidden(format!(
                "tenant: your token is for tenant \"{caller}\", not \"{named}\"; omit tenant"
            )));
        }
        (Some(caller), _) => caller,
        (None, Some(named)) => named,
        (None, None) if asked.project.is_some() => {
            return Err(ScopeError::Invalid {
                field: "tenant",
                reason: "the admin token names the project's tenant too; add tenant".into(),
            });
        }
        (None, None) => return Ok(None),
    };
    let Some(project) = asked.project else {
        return Err(ScopeError::Invalid {
            field: "project",
            reason: format!(
                "a request for tenant \"{tenant}\" names the project it runs for; add project (GET /v1/projects lists them)"
            ),
        });
    };
    if asked.caller.is_some() && !TENANT_OPS.contains(&op) {
        return Err(ScopeError::Forbidden(format!(
            "op: a tenant token may run {} only, not {op}",
            TENANT_OPS.join(", ")
        )));
    }
    let record =
        cp.store
            .project(tenant, project)
            .await?
            .ok_or_else(|| ScopeError::UnknownProject {
                tenant: tenant.to_string(),
                project: project.to_string(),
            })?;
    let quota = record
        .quotas
        .get(region)
        .cloned()
        .ok_or_else(|| ScopeError::NoQuota {
            tenant: tenant.to_string(),
            project: project.to_string(),
            region: region.to_string(),
        })?;
    check_objects(op, params, &record.namespace)?;
    Ok(Some(snapshot(tenant, project, &record.namespace, quota)))
}

/// The stored form of a project's scope in one region.
pub fn snapshot(tenant: &str, project: &str, namespace: &str, quota: ProjectQuota) -> RequestScope {
    let scope = ProjectScope {
        tenant: tenant.to_string(),
        project: project.to_string(),
        namespace: namespace.to_string(),
        quota,
    };
    RequestScope {
        tenant: scope.tenant.clone(),
        project: scope.project.clone(),
        project_json: serde_json::to_string(&scope).unwrap_or_default(),
    }
}

/// One object a request touches: kind, namespace, name.
struct Object {
    kind: String,
    namespace: Option<String>,
    name: String,
}

fn objects(op: &str, params: &RawJson) -> Result<Vec<Object>, ScopeError> {
    let invalid = |e: serde_json::Error| ScopeError::Invalid {
        field: "params",
        reason: format!("not valid {op} params: {e}"),
    };
    let text = params.get();
    Ok(match op {
        "apply_manifests" => {
            let p: ApplyManifestsParams = serde_json::from_str(text).map_err(invalid)?;
            p.manifests
                .iter()
                .map(|m| {
                    let s = |v: Option<&serde_json::Value>| {
                        v.and_then(|v| v.as_str()).map(str::to_string)
                    };
                    Object {
                        kind: s(m.get("kind")).unwrap_or_default(),
                        namespace: s(m.pointer("/metadata/namespace")),
                        name: s(m.pointer("/metadata/name")).unwrap_or_default(),
                    }
                })
                .collect()
        }
        "delete_manifests" => {
            let p: DeleteManifestsParams = serde_json::from_str(text).map_err(invalid)?;
            p.objects
                .into_iter()
                .map(|o| Object {
                    kind: o.kind,
                    namespace: o.namespace,
                    name: o.name,
                })
                .collect()
        }
        "get_objects" => {
            let p: GetObjectsParams = serde_json::from_str(text).map_err(invalid)?;
            p.objects
                .into_iter()
                .map(|o| Object {
                    kind: o.kind,
                    namespace: o.namespace,
                    name: o.name,
                })
                .collect()
        }
        _ => Vec::new(),
    })
}

/// Refuses any object of a kind cluster-scoped everywhere (422, in any spelling), and (403,
/// naming the object) any object outside `namespace`, a `List`, or the quota objects the
/// control plane keeps. The kinds the zone's cluster reports are checked at placement
/// ([`check_reported`]).
pub fn check_objects(op: &str, params: &RawJson, namespace: &str) -> Result<(), ScopeError> {
    for o in objects(op, params)? {
        if CLUSTER_SCOPED_KINDS
            .iter()
            .any(|k| k.eq_ignore_ascii_case(&o.kind))
        {
            return Err(cluster_scoped_error(&o, namespace));
        }
        let named = format!("{} {}", o.kind, o.name);
        if o.kind.to_ascii_lowercase().ends_with("list") {
            return Err(ScopeError::Forbidden(format!(
                "params: {named} is a list of objects; send its items, each in the project's namespace {namespace}"
            )));
        }
        if let Some(ns) = o.namespace.as_deref().filter(|ns| *ns != namespace) {
            return Err(ScopeError::Forbidden(format!(
                "params: {named} is in namespace {ns}, outside the project's namespace {namespace}; set metadata.namespace to {namespace} or leave it out"
            )));
        }
        if QUOTA_KINDS
            .iter()
            .any(|(k, n)| *k == o.kind && *n == o.name)
        {
            return Err(ScopeError::Forbidden(format!(
                "params: {named} is kept by the control plane from the project's quota; an admin changes it with PUT /v1/admin/tenants/<tenant>/projects/<project>/quotas/<region>"
            )));
        }
    }
    Ok(())
}

/// Refuses (422) any object whose kind, in any spelling, is one of `cluster_scoped` (lower-case
/// kinds, as an agent's hello reports them).
pub fn check_reported(
    op: &str,
    params: &RawJson,
    namespace: &str,
    cluster_scoped: &[String],
) -> Result<(), ScopeError> {
    if cluster_scoped.is_empty() {
        return Ok(());
    }
    for o in objects(op, params)? {
        if cluster_scoped.contains(&o.kind.to_ascii_lowercase()) {
            return Err(cluster_scoped_error(&o, namespace));
        }
    }
    Ok(())
}

/// The 422 for object `o` of a cluster-scoped kind.
fn cluster_scoped_error(o: &Object, namespace: &str) -> ScopeError {
    ScopeError::ClusterScoped(format!("{} {}", o.kind, o.name), namespace.to_string())
}

/// The namespace of a stored scope (empty when it does not parse).
pub fn namespace_of(scope: &RequestScope) -> String {
    serde_json::from_str::<ProjectScope>(&scope.project_json)
        .map(|s| s.namespace)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> RawJson {
        RawJson::from_string(s.into()).unwrap()
    }

    #[test]
    fn only_namespaced_objects_of_the_project_pass() {
        let ns = "acme-web";
        let ok = raw(
            r#"{"manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"acme-web"}},
                {"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}]}"#,
        );
        check_objects("apply_manifests", &ok, ns).unwrap();
        let elsewhere = raw(
            r#"{"manifests":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"kube-system"}}]}"#,
        );
        let e = check_objects("apply_manifests", &elsewhere, ns)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Secret s") && e.contains("kube-system") && e.contains(ns),
            "{e}"
        );
        let cluster = raw(
            r#"{"objects":[{"api_version":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","name":"admin"}]}"#,
        );
        let e = check_objects("get_objects", &cluster, ns).unwrap_err();
        assert!(matches!(e, ScopeError::ClusterScoped(..)), "{e}");
        assert!(
            e.to_string().contains("ClusterRole admin") && e.to_string().contains("cluster-scoped"),
            "{e}"
        );
        // Every spelling of a kind cluster-scoped everywhere.
        for kind in ["clusterrole", "CLUSTERROLE", "clusterRole", "namespace"] {
            let p = raw(&format!(
                r#"{{"manifests":[{{"apiVersion":"v1","kind":"{kind}","metadata":{{"name":"a"}}}}]}}"#
            ));
            assert!(
                matches!(
                    check_objects("apply_manifests", &p, ns),
                    Err(ScopeError::ClusterScoped(..))
                ),
                "{kind}"
            );
        }
        // A kind only the zone's cluster knows as cluster-scoped (a CRD), from its hello.
        let gateway = raw(
            r#"{"manifests":[{"apiVersion":"gateway.networking.k8s.io/v1","kind":"gatewayclass","metadata":{"name":"g"}}]}"#,
        );
        check_objects("apply_manifests", &gateway, ns).unwrap();
        assert!(matches!(
            check_reported("apply_manifests", &gateway, ns, &["gatewayclass".into()]),
            Err(ScopeError::ClusterScoped(..))
        ));
        check_reported("apply_manifests", &ok, ns, &["gatewayclass".into()]).unwrap();
        let quota = raw(&format!(
            r#"{{"objects":[{{"api_version":"v1","kind":"ResourceQuota","namespace":"acme-web","name":"{QUOTA_NAME}"}}]}}"#
        ));
        assert!(matches!(
            check_objects("delete_manifests", &quota, ns),
            Err(ScopeError::Forbidden(_))
        ));
        let e = check_objects("apply_manifests", &raw(r#"{"manifests":3}"#), ns).unwrap_err();
        assert!(
            matches!(
                e,
                ScopeError::Invalid {
                    field: "params",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn the_snapshot_is_the_scope_the_agent_reads() {
        let s = snapshot(
            "acme",
            "web",
            "acme-web",
            ProjectQuota {
                cpu: Some("2".into()),
                ..Default::default()
            },
        );
        let back: ProjectScope = serde_json::from_str(&s.project_json).unwrap();
        assert_eq!(
            (back.tenant.as_str(), back.namespace.as_str()),
            ("acme", "acme-web")
        );
        assert_eq!(back.quota.cpu.as_deref(), Some("2"));
    }
}
