//! Keeping a project's request inside its namespace: before a request carrying a
//! [`ProjectScope`] runs, its project is made present ([`super::presence`]), then its params are
//! checked and completed: an object in another namespace, or of a cluster-scoped kind, is
//! refused (`forbidden`, naming the object); a namespaced object naming no namespace is placed
//! in the project's. `service_create` specs get the same treatment for `spec.namespace`.

use harmony_agent_protocol::ops::{ApplyManifestsParams, DeleteManifestsParams, GetObjectsParams};
use harmony_agent_protocol::tenancy::ProjectScope;
use harmony_agent_protocol::{ErrorBody, Op, RawJson, Req, ServiceCreateParams, code};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;
use std::collections::HashMap;
use tokio::sync::Mutex;

use super::Executor;
use super::ops::{body, params, raw};

/// Whether each (apiVersion, kind) is namespaced, as the API server said.
#[derive(Default)]
pub struct KindScopes {
    kinds: Mutex<HashMap<(String, String), bool>>,
}

fn split(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

impl KindScopes {
    /// Whether `kind` in `api_version` is namespaced on the server `client` talks to.
    pub async fn namespaced(
        &self,
        client: &kube::Client,
        api_version: &str,
        kind: &str,
    ) -> Result<bool, ErrorBody> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(n) = self.kinds.lock().await.get(&key) {
            return Ok(*n);
        }
        let (group, version) = split(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (_, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|e| {
                ErrorBody::new(
                    code::UNKNOWN_KIND,
                    format!(
                        "the cluster has no kind {kind} in {api_version} ({}); install its CustomResourceDefinition first or fix apiVersion/kind",
                        harmony::infra::kube::describe_error(&e)
                    ),
                )
            })?;
        let namespaced = caps.scope == Scope::Namespaced;
        self.kinds.lock().await.insert(key, namespaced);
        Ok(namespaced)
    }
}

/// The kinds the cluster serves cluster-scoped, lower-case and sorted, from API discovery
/// (reported in the agent's hello so the control plane refuses them at submit). `None` when
/// discovery did not answer within 5 s.
pub async fn cluster_scoped_kinds(client: &kube::Client) -> Option<Vec<String>> {
    let discovery = kube::discovery::Discovery::new(client.clone()).run();
    let discovery = match tokio::time::timeout(std::time::Duration::from_secs(5), discovery).await {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => {
            log::warn!("API discovery for the hello's cluster-scoped kinds: {e}");
            return None;
        }
        Err(_) => {
            log::warn!("API discovery for the hello's cluster-scoped kinds took over 5 s");
            return None;
        }
    };
    let mut kinds: Vec<String> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(_, caps)| caps.scope == Scope::Cluster)
        .map(|(ar, _)| ar.kind.to_ascii_lowercase())
        .collect();
    kinds.sort();
    kinds.dedup();
    Some(kinds)
}

fn outside(scope: &ProjectScope, object: &str, why: &str) -> ErrorBody {
    ErrorBody::new(
        code::FORBIDDEN,
        format!(
            "{object}: {why}; a request of project {}/{} only touches objects in its namespace {} (name that namespace, or none)",
            scope.tenant, scope.project, scope.namespace
        ),
    )
}

/// Checks one object of a project's request and returns the namespace it belongs in.
async fn place(
    kinds: &KindScopes,
    client: &kube::Client,
    scope: &ProjectScope,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, ErrorBody> {
    let object = match namespace {
        Some(ns) => format!("{api_version} {kind} {ns}/{name}"),
        None => format!("{api_version} {kind} {name}"),
    };
    if !kinds.namespaced(client, api_version, kind).await? {
        return Err(outside(scope, &object, "is of a cluster-scoped kind"));
    }
    match namespace {
        None => Ok(scope.namespace.clone()),
        Some(ns) if ns == scope.namespace => Ok(ns.to_string()),
        Some(ns) => Err(outside(scope, &object, &format!("is in namespace {ns}"))),
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

impl Executor {
    /// `req` made present and kept inside its project (see the module doc): the request to
    /// run, its params completed with the project's namespace.
    pub(super) async fn for_project(
        &self,
        op: Op,
        req: &Req,
        scope: &ProjectScope,
    ) -> Result<Req, ErrorBody> {
        let t = self
            .cluster
            .topology(false, false)
            .await
            .map_err(|e| body(&e))?;
        let client = t.client().map_err(|e| body(&e))?;
        self.presence.ensure(&client, scope).await?;
        let kinds = &self.kinds;
        let params: RawJson = match op {
            Op::ApplyManifests => {
                let mut p: ApplyManifestsParams = params(op, &req.params)?;
                for m in &mut p.manifests {
                    // Malformed manifests are left to the apply's own checks.
                    let (Some(api_version), Some(kind)) =
                        (text(m, "/apiVersion"), text(m, "/kind"))
                    else {
                        continue;
                    };
                    let name = text(m, "/metadata/name").unwrap_or("(unnamed)");
                    let ns = place(
                        kinds,
                        &client,
                        scope,
                        api_version,
                        kind,
                        text(m, "/metadata/namespace"),
                        name,
                    )
                    .await?;
                    if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("namespace".into(), Value::String(ns));
                    }
                }
                raw(&p)?
            }
            Op::DeleteManifests | Op::GetObjects => {
                let mut objects = if op == Op::GetObjects {
                    params::<GetObjectsParams>(op, &req.params)?.objects
                } else {
                    params::<DeleteManifestsParams>(op, &req.params)?.objects
                };
                for r in &mut objects {
                    let ns = place(
                        kinds,
                        &client,
                        scope,
                        &r.api_version,
                        &r.kind,
                        r.namespace.as_deref(),
                        &r.name,
                    )
                    .await?;
                    r.namespace = Some(ns);
                }
                if op == Op::GetObjects {
                    raw(&GetObjectsParams { objects })?
                } else {
                    let p: DeleteManifestsParams = params(op, &req.params)?;
                    raw(&DeleteManifestsParams { objects, ..p })?
                }
            }
            Op::ServiceCreate => {
                let mut p: ServiceCreateParams = params(op, &req.params)?;
                let object = format!("service instance {}", p.instance_id);
                match p.spec.get("namespace").and_then(Value::as_str) {
                    Some(ns) if ns != scope.namespace => {
                        return Err(outside(scope, &object, &format!("is in namespace {ns}")));
                    }
                    _ => {}
                }
                if p.spec.is_null() {
                    p.spec = Value::Object(Default::default());
                }
                if let Some(spec) = p.spec.as_object_mut() {
                    spec.insert("namespace".into(), Value::String(scope.namespace.clone()));
                }
                raw(&p)?
            }
            Op::GetInventory => {
                return Err(outside(
                    scope,
                    "get_inventory",
                    "reads the whole cluster's nodes",
                ));
            }
            Op::ServiceDelete | Op::ServiceStatus => req.params.clone(),
        };
        Ok(Req {
            params,
            ..req.clone()
        })
    }
}
