//! Lazy project presence: before the first op a project runs in this cluster, the agent makes
//! the project present: its Namespace (labelled managed-by Harmony, tenant, project), a
//! ResourceQuota from the project's quota in this region, a LimitRange giving containers default
//! requests (so pods without requests are admitted under a cpu/memory quota), and a RoleBinding
//! of ClusterRole `harmony-agent-managed` to the agent's own ServiceAccount (its rights in that
//! namespace). Quota, LimitRange and RoleBinding are server-side applied (idempotent); the
//! Namespace is only ever created (the agent may not patch namespaces), and an existing one that
//! is not this project's is refused. What is present is remembered per connection to the control
//! plane, so requests do not re-apply it while the project's quota is unchanged.
//!
//! A ResourceQuota is enforced by the API server's admission only once kube-controller-manager's
//! resourcequota controller has filled its `status.hard`: the agent waits (bounded) for that
//! before running the op, so an op never slips past a quota that is not enforced yet.

use harmony_agent_protocol::tenancy::{
    AGENT_MANAGED_CLUSTER_ROLE, AGENT_ROLE_BINDING, LIMIT_RANGE_NAME, MANAGED_BY_LABEL,
    MANAGED_BY_VALUE, PROJECT_LABEL, ProjectScope, QUOTA_NAME, TENANT_LABEL,
};
use harmony_agent_protocol::{ErrorBody, code};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ops::quantity;
use crate::cluster::FIELD_MANAGER;

/// How long the agent waits for a new or changed quota to be enforced.
pub const QUOTA_WAIT: Duration = Duration::from_secs(30);
/// How long the agent waits for its new RoleBinding to take effect.
const RBAC_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(200);
/// Default CPU request of a container that states none (capped at the project's CPU quota).
pub const DEFAULT_CPU_REQUEST: &str = "100m";
/// Default memory request of a container that states none (capped at the memory quota).
pub const DEFAULT_MEMORY_REQUEST: &str = "128Mi";

/// The labels of a project's namespace and of what the agent keeps in it.
pub fn labels(scope: &ProjectScope) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string()),
        (TENANT_LABEL.to_string(), scope.tenant.clone()),
        (PROJECT_LABEL.to_string(), scope.project.clone()),
    ])
}

/// The ResourceQuota's `spec.hard` for a project's quota: cpu -> `requests.cpu`, memory ->
/// `requests.memory`, storage -> `requests.storage`, objects -> `count/<resource>` (the
/// protocol's mapping, which the control plane reads quota use by).
pub use harmony_agent_protocol::quota_use::hard;

/// The project's ResourceQuota ([`QUOTA_NAME`]).
pub fn quota_manifest(scope: &ProjectScope) -> Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": scope.namespace, "labels": labels(scope)},
        "spec": {"hard": hard(&scope.quota)}})
}

/// The smaller of two quantities (`a` when either does not parse).
fn min_quantity(a: &str, b: &str) -> String {
    match (quantity(a), quantity(b)) {
        (Some(x), Some(y)) if y < x => b.to_string(),
        _ => a.to_string(),
    }
}

/// The project's LimitRange ([`LIMIT_RANGE_NAME`]): containers without requests get
/// [`DEFAULT_CPU_REQUEST`] and [`DEFAULT_MEMORY_REQUEST`] (at most the quota), and without limits
/// the project's whole cpu/memory quota as limit (no container may use more than the project).
pub fn limit_range_manifest(scope: &ProjectScope) -> Value {
    let q = &scope.quota;
    let mut default_request = json!({"cpu": DEFAULT_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST});
    let mut default = serde_json::Map::new();
    if let Some(cpu) = &q.cpu {
        default_request["cpu"] = json!(min_quantity(DEFAULT_CPU_REQUEST, cpu));
        default.insert("cpu".into(), json!(cpu));
    }
    if let Some(memory) = &q.memory {
        default_request["memory"] = json!(min_quantity(DEFAULT_MEMORY_REQUEST, memory));
        default.insert("memory".into(), json!(memory));
    }
    let mut limit = json!({"type": "Container", "defaultRequest": default_request});
    if !default.is_empty() {
        limit["default"] = Value::Object(default);
    }
    json!({"apiVersion": "v1", "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE_NAME, "namespace": scope.namespace, "labels": labels(scope)},
        "spec": {"limits": [limit]}})
}

/// The RoleBinding giving the agent's ServiceAccount `(namespace, name)` ClusterRole
/// [`AGENT_MANAGED_CLUSTER_ROLE`] in the project's namespace.
pub fn role_binding_manifest(scope: &ProjectScope, sa: &(String, String)) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": AGENT_ROLE_BINDING, "namespace": scope.namespace, "labels": labels(scope)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT_MANAGED_CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": sa.1, "namespace": sa.0}]})
}

/// The `spec.hard` entries the quota's status does not enforce yet (absent from `status.hard`
/// or `status.used`, or another figure in `status.hard`).
pub fn not_enforced(spec: &BTreeMap<String, String>, quota: &ResourceQuota) -> Vec<String> {
    let status = quota.status.as_ref();
    let status_hard = status.and_then(|s| s.hard.as_ref());
    let used = status.and_then(|s| s.used.as_ref());
    spec.iter()
        .filter(|(k, v)| {
            let enforced = status_hard.and_then(|h| h.get(*k)).is_some_and(|h| {
                h.0 == **v || (quantity(&h.0).is_some() && quantity(&h.0) == quantity(v))
            });
            !enforced || used.is_none_or(|u| !u.contains_key(*k))
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// What the agent knows is present, and who it binds.
pub struct Presence {
    service_account: Option<(String, String)>,
    quota_wait: Duration,
    present: Mutex<HashMap<String, ProjectScope>>,
}

fn kube_error(scope: &ProjectScope, what: &str, e: kube::Error) -> ErrorBody {
    let context = format!(
        "making project {}/{} present in namespace {}: {what}",
        scope.tenant, scope.project, scope.namespace
    );
    match e {
        kube::Error::Api(s) if s.code == 403 => ErrorBody::new(
            code::FORBIDDEN,
            format!(
                "{context}: forbidden: {}; the agent's ServiceAccount needs the rollout's RBAC (RegionAgentRolloutScore: namespaces create, resourcequotas/limitranges/rolebindings create+patch, bind on ClusterRole {AGENT_MANAGED_CLUSTER_ROLE})",
                s.message
            ),
        ),
        kube::Error::Api(s) => ErrorBody::new(
            code::REJECTED,
            format!("{context}: {} ({} {})", s.message, s.code, s.reason),
        ),
        other => ErrorBody::new(
            code::UNREACHABLE,
            format!(
                "{context}: {}",
                harmony::infra::kube::describe_error(&other)
            ),
        ),
    }
}

impl Presence {
    /// Presence binding `service_account` (namespace, name) in project namespaces; `None`
    /// makes no RoleBinding (the agent's credentials are not a ServiceAccount's).
    pub fn new(service_account: Option<(String, String)>) -> Self {
        Self {
            service_account,
            quota_wait: QUOTA_WAIT,
            present: Mutex::new(HashMap::new()),
        }
    }

    /// Waits at most `wait` for a quota to be enforced (default [`QUOTA_WAIT`]).
    pub fn with_quota_wait(mut self, wait: Duration) -> Self {
        self.quota_wait = wait;
        self
    }

    /// Forgets what is present (a new connection to the control plane checks again).
    pub fn forget(&self) {
        if let Ok(mut p) = self.present.lock() {
            p.clear();
        }
    }

    fn known(&self, scope: &ProjectScope) -> bool {
        self.present
            .lock()
            .is_ok_and(|p| p.get(&scope.namespace) == Some(scope))
    }

    /// Makes `scope`'s project present in the cluster `client` talks to (see the module doc).
    pub async fn ensure(
        &self,
        client: &kube::Client,
        scope: &ProjectScope,
    ) -> Result<(), ErrorBody> {
        if self.known(scope) {
            return Ok(());
        }
        let ns = scope.namespace.as_str();
        self.namespace(client, scope).await?;
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
        quotas
            .patch(QUOTA_NAME, &apply, &Patch::Apply(quota_manifest(scope)))
            .await
            .map_err(|e| kube_error(scope, &format!("applying ResourceQuota {QUOTA_NAME}"), e))?;
        let limits: Api<LimitRange> = Api::namespaced(client.clone(), ns);
        limits
            .patch(
                LIMIT_RANGE_NAME,
                &apply,
                &Patch::Apply(limit_range_manifest(scope)),
            )
            .await
            .map_err(|e| {
                kube_error(scope, &format!("applying LimitRange {LIMIT_RANGE_NAME}"), e)
            })?;
        if let Some(sa) = &self.service_account {
            let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
            bindings
                .patch(
                    AGENT_ROLE_BINDING,
                    &apply,
                    &Patch::Apply(role_binding_manifest(scope, sa)),
                )
                .await
                .map_err(|e| {
                    kube_error(
                        scope,
                        &format!("applying RoleBinding {AGENT_ROLE_BINDING}"),
                        e,
                    )
                })?;
            wait_for_rights(client, ns).await;
        }
        self.wait_enforced(&quotas, scope).await?;
        if let Ok(mut p) = self.present.lock() {
            p.insert(scope.namespace.clone(), scope.clone());
        }
        log::info!(
            "project {}/{} present in namespace {ns} (quota {:?})",
            scope.tenant,
            scope.project,
            hard(&scope.quota)
        );
        Ok(())
    }

    /// Creates the namespace when missing; refuses one that is not this project's.
    async fn namespace(
        &self,
        client: &kube::Client,
        scope: &ProjectScope,
    ) -> Result<(), ErrorBody> {
        let api: Api<Namespace> = Api::all(client.clone());
        let name = scope.namespace.as_str();
        let existing = match api.get_opt(name).await {
            Ok(Some(n)) => n,
            Ok(None) => {
                let mut n = Namespace::default();
                n.metadata.name = Some(name.to_string());
                n.metadata.labels = Some(labels(scope));
                match api.create(&PostParams::default(), &n).await {
                    Ok(_) => {
                        log::info!(
                            "created namespace {name} for project {}/{}",
                            scope.tenant,
                            scope.project
                        );
                        return Ok(());
                    }
                    // Created meanwhile (a concurrent request): check whose it is.
                    Err(kube::Error::Api(s)) if s.code == 409 => api
                        .get(name)
                        .await
                        .map_err(|e| kube_error(scope, "reading the namespace", e))?,
                    Err(e) => {
                        return Err(kube_error(scope, &format!("creating Namespace {name}"), e));
                    }
                }
            }
            Err(e) => return Err(kube_error(scope, &format!("reading Namespace {name}"), e)),
        };
        let have = existing.metadata.labels.unwrap_or_default();
        let want = labels(scope);
        let mismatched: Vec<String> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| {
                format!(
                    "{k}={v} (has {})",
                    have.get(k).map_or("none", String::as_str)
                )
            })
            .collect();
        if mismatched.is_empty() {
            return Ok(());
        }
        Err(ErrorBody::new(
            code::FORBIDDEN,
            format!(
                "namespace {name} already exists and is not project {}/{}'s: labels {}; the agent never takes over a namespace it did not create: give the project another namespace, or have a cluster admin label this one",
                scope.tenant,
                scope.project,
                mismatched.join(", ")
            ),
        ))
    }

    async fn wait_enforced(
        &self,
        api: &Api<ResourceQuota>,
        scope: &ProjectScope,
    ) -> Result<(), ErrorBody> {
        let spec = hard(&scope.quota);
        if spec.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        loop {
            let quota = api.get(QUOTA_NAME).await.map_err(|e| {
                kube_error(scope, &format!("reading ResourceQuota {QUOTA_NAME}"), e)
            })?;
            let missing = not_enforced(&spec, &quota);
            if missing.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= self.quota_wait {
                return Err(ErrorBody::new(
                    code::TIMEOUT,
                    format!(
                        "ResourceQuota {}/{QUOTA_NAME} is not enforced after {}s: its status.hard/used do not cover {}; the API server enforces a quota only once its status is set: is kube-controller-manager's resourcequota controller running?",
                        scope.namespace,
                        self.quota_wait.as_secs(),
                        missing.join(", ")
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Waits (bounded) until the agent may read ConfigMaps in `ns`: RBAC takes a moment to see a
/// new RoleBinding. Gives up silently: the op then reports what the API server says.
async fn wait_for_rights(client: &kube::Client, ns: &str) {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_string()),
                verb: Some("get".into()),
                resource: Some("configmaps".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let started = Instant::now();
    while started.elapsed() < RBAC_WAIT {
        match api.create(&PostParams::default(), &review).await {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => return,
            Ok(_) => {}
            Err(_) => return,
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_agent_protocol::tenancy::ProjectQuota;
    use k8s_openapi::api::core::v1::ResourceQuotaStatus;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn scope(quota: ProjectQuota) -> ProjectScope {
        ProjectScope {
            tenant: "acme".into(),
            project: "web".into(),
            namespace: "acme-web".into(),
            quota,
        }
    }

    #[test]
    fn the_quota_maps_each_field_to_its_resourcequota_entry() {
        let q = ProjectQuota {
            cpu: Some("4".into()),
            memory: Some("8Gi".into()),
            storage: Some("100Gi".into()),
            objects: [
                ("configmaps".to_string(), 2),
                ("count/secrets".to_string(), 5),
            ]
            .into(),
        };
        let m = quota_manifest(&scope(q));
        assert_eq!(
            m["spec"]["hard"],
            json!({"requests.cpu": "4", "requests.memory": "8Gi", "requests.storage": "100Gi",
                   "count/configmaps": "2", "count/secrets": "5"})
        );
        assert_eq!(m["metadata"]["name"], QUOTA_NAME);
        assert_eq!(m["metadata"]["labels"][TENANT_LABEL], "acme");
        assert_eq!(m["metadata"]["labels"][MANAGED_BY_LABEL], "harmony");
    }

    #[test]
    fn default_requests_never_exceed_the_quota() {
        let m = limit_range_manifest(&scope(ProjectQuota {
            cpu: Some("50m".into()),
            memory: Some("1Gi".into()),
            ..Default::default()
        }));
        let l = &m["spec"]["limits"][0];
        assert_eq!(
            l["defaultRequest"],
            json!({"cpu": "50m", "memory": "128Mi"})
        );
        assert_eq!(l["default"], json!({"cpu": "50m", "memory": "1Gi"}));
        let m = limit_range_manifest(&scope(ProjectQuota::default()));
        assert!(m["spec"]["limits"][0].get("default").is_none());
    }

    #[test]
    fn the_role_binding_binds_only_the_managed_role_to_the_agent() {
        let sa = ("harmony-agent".to_string(), "harmony-agent".to_string());
        let m = role_binding_manifest(&scope(ProjectQuota::default()), &sa);
        assert_eq!(m["roleRef"]["name"], AGENT_MANAGED_CLUSTER_ROLE);
        assert_eq!(m["subjects"].as_array().unwrap().len(), 1);
        assert_eq!(m["subjects"][0]["namespace"], "harmony-agent");
    }

    #[test]
    fn a_quota_is_enforced_once_its_status_covers_its_spec() {
        let spec = hard(&ProjectQuota {
            memory: Some("1Gi".into()),
            objects: [("configmaps".to_string(), 2)].into(),
            ..Default::default()
        });
        let mut q = ResourceQuota::default();
        assert_eq!(
            not_enforced(&spec, &q),
            ["count/configmaps", "requests.memory"]
        );
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            )
        };
        q.status = Some(ResourceQuotaStatus {
            hard: map(&[("count/configmaps", "2"), ("requests.memory", "1024Mi")]),
            used: map(&[("count/configmaps", "0")]),
        });
        assert_eq!(not_enforced(&spec, &q), ["requests.memory"]);
        q.status = Some(ResourceQuotaStatus {
            hard: map(&[("count/configmaps", "3"), ("requests.memory", "1Gi")]),
            used: map(&[("count/configmaps", "0"), ("requests.memory", "0")]),
        });
        assert_eq!(not_enforced(&spec, &q), ["count/configmaps"]);
    }
}
