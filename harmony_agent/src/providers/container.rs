//! The built-in `kubernetes-workloads` provider: service type `container` as a Deployment (and
//! a ClusterIP Service when a port is given) on the agent's cluster.

use async_trait::async_trait;
use harmony::domain::capability::{K8sClient, ObjectRef};
use harmony_agent_protocol::{InstanceState, InstanceStatus};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::cluster_access::{ClusterAccess, object_ref};
use super::kube_backed::KubeBacked;
use super::{ProviderError, SpecReader, labels, status};
use crate::cluster::Cluster;

/// The provider's name.
pub const NAME: &str = "kubernetes-workloads";
/// The service type it serves.
pub const SERVICE_TYPE: &str = "container";

/// A `container` spec, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// The image.
    pub image: String,
    /// Replica count.
    pub replicas: i64,
    /// The port to expose through a ClusterIP Service.
    pub port: Option<u16>,
    /// Target namespace.
    pub namespace: String,
    /// Environment variables.
    pub env: BTreeMap<String, String>,
}

impl ContainerSpec {
    /// Validates a spec; errors name the field and the fix.
    pub fn parse(spec: &Value) -> Result<Self, ProviderError> {
        let r = SpecReader::new(spec, &["image", "replicas", "port", "namespace", "env"])?;
        let image = r.required_string("image", "nginx:1.27")?;
        let replicas = r.int("replicas", 1, 0, 1000)?;
        let port = match r.raw("port") {
            None => None,
            Some(_) => Some(r.int("port", 80, 1, 65535)? as u16),
        };
        let namespace = r.namespace()?;
        let mut env = BTreeMap::new();
        match r.raw("env") {
            None => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    if k.is_empty() || k.contains('=') || !k.chars().all(|c| c.is_ascii_graphic()) {
                        return Err(ProviderError::InvalidParams {
                            field: format!("spec.env.{k}"),
                            problem: "an environment variable name must be non-empty printable ASCII without '=' or spaces".into(),
                        });
                    }
                    let Some(v) = v.as_str() else {
                        return Err(ProviderError::InvalidParams {
                            field: format!("spec.env.{k}"),
                            problem: "must be a string; quote numbers and booleans".into(),
                        });
                    };
                    env.insert(k.clone(), v.to_string());
                }
            }
            Some(_) => {
                return Err(ProviderError::InvalidParams {
                    field: "spec.env".into(),
                    problem: "must be an object of NAME: \"value\" strings".into(),
                });
            }
        }
        Ok(Self {
            image,
            replicas,
            port,
            namespace,
            env,
        })
    }
}

/// The Deployment (and the Service when a port is given) for instance `id`.
pub fn manifests(id: &str, spec: &ContainerSpec) -> Vec<Value> {
    let labels = labels(id);
    let selector = json!({ super::INSTANCE_LABEL: id });
    let mut container = json!({"name": "main", "image": spec.image});
    if !spec.env.is_empty() {
        container["env"] = spec
            .env
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect();
    }
    if let Some(port) = spec.port {
        container["ports"] = json!([{"containerPort": port, "protocol": "TCP"}]);
    }
    let mut out = vec![json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": id, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container]},
            },
        },
    })];
    if let Some(port) = spec.port {
        out.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": id, "namespace": spec.namespace, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "main", "port": port, "targetPort": port, "protocol": "TCP"}],
            },
        }));
    }
    out
}

fn deployment_ref(namespace: &str, id: &str) -> ObjectRef {
    object_ref("apps/v1", "Deployment", namespace, id)
}

fn service_ref(namespace: &str, id: &str) -> ObjectRef {
    object_ref("v1", "Service", namespace, id)
}

/// The instance status a Deployment (or its absence) says.
pub fn status_of(id: &str, namespace: &str, deployment: Option<&Value>) -> InstanceStatus {
    let Some(d) = deployment else {
        return status(
            id,
            SERVICE_TYPE,
            NAME,
            InstanceState::Deleted,
            format!("no Deployment {namespace}/{id}"),
            Map::new(),
        );
    };
    let want = d
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let ready = d
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut outputs = Map::new();
    outputs.insert("namespace".into(), json!(namespace));
    outputs.insert("deployment".into(), json!(id));
    if let Some(port) = d
        .pointer("/spec/template/spec/containers/0/ports/0/containerPort")
        .and_then(Value::as_i64)
    {
        outputs.insert(
            "service".into(),
            json!(format!("{id}.{namespace}.svc:{port}")),
        );
    }
    let detail = format!("{ready}/{want} replicas ready");
    let state = if d.pointer("/metadata/deletionTimestamp").is_some() {
        InstanceState::Deleting
    } else if ready >= want {
        InstanceState::Ready
    } else {
        InstanceState::Provisioning
    };
    status(id, SERVICE_TYPE, NAME, state, detail, outputs)
}

/// Serves `container` on the agent's cluster.
pub struct ContainerProvider {
    cluster: ClusterAccess,
}

impl ContainerProvider {
    /// The provider on `cluster`.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self {
            cluster: ClusterAccess::new(cluster, NAME),
        }
    }
}

#[async_trait]
impl KubeBacked for ContainerProvider {
    const NAME: &'static str = NAME;
    const SERVICE_TYPE: &'static str = SERVICE_TYPE;

    fn cluster(&self) -> &ClusterAccess {
        &self.cluster
    }

    fn primary(namespace: &str, id: &str) -> ObjectRef {
        deployment_ref(namespace, id)
    }

    fn owned(namespace: &str, id: &str) -> Vec<ObjectRef> {
        vec![service_ref(namespace, id), deployment_ref(namespace, id)]
    }

    fn status_of(id: &str, namespace: &str, primary: Option<&Value>) -> InstanceStatus {
        status_of(id, namespace, primary)
    }

    async fn converge(&self, id: &str, spec: &Value) -> Result<String, ProviderError> {
        let spec = ContainerSpec::parse(spec)?;
        self.cluster.apply(manifests(id, &spec)).await?;
        if spec.port.is_none() {
            // Converge: a port removed from the spec takes its Service away.
            self.cluster
                .topology()
                .await?
                .delete(&service_ref(&spec.namespace, id))
                .await
                .map_err(|e| self.cluster.err(e))?;
        }
        Ok(spec.namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_becomes_a_labelled_deployment_and_service() {
        let spec = ContainerSpec::parse(&json!({"image": "nginx:1.27", "replicas": 2, "port": 8080, "env": {"B": "2", "A": "1"}})).unwrap();
        assert_eq!(spec.namespace, "harmony-services");
        let m = manifests("web-1", &spec);
        assert_eq!(m.len(), 2);
        let d = &m[0];
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["name"], "web-1");
        assert_eq!(d["metadata"]["namespace"], "harmony-services");
        assert_eq!(
            d["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "harmony-agent"
        );
        assert_eq!(
            d["metadata"]["labels"]["harmony.io/service-instance"],
            "web-1"
        );
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["harmony.io/service-instance"],
            "web-1"
        );
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "nginx:1.27");
        assert_eq!(
            c["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(c["ports"][0]["containerPort"], 8080);
        let s = &m[1];
        assert_eq!(s["kind"], "Service");
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(s["spec"]["ports"][0]["port"], 8080);
        let only = manifests(
            "w",
            &ContainerSpec::parse(&json!({"image": "x", "namespace": "apps"})).unwrap(),
        );
        assert_eq!(only.len(), 1);
        assert_eq!(only[0]["spec"]["replicas"], 1);
        assert_eq!(only[0]["metadata"]["namespace"], "apps");
    }

    #[test]
    fn bad_specs_name_the_field() {
        let e = |v: Value| ContainerSpec::parse(&v).unwrap_err().to_string();
        assert!(e(json!({})).starts_with("spec.image: is required"));
        assert!(
            e(json!({"image": "x", "port": 0}))
                .starts_with("spec.port: must be an integer from 1 to 65535")
        );
        assert!(e(json!({"image": "x", "replicas": "2"})).starts_with("spec.replicas:"));
        assert!(
            e(json!({"image": "x", "env": {"A": 1}})).starts_with("spec.env.A: must be a string")
        );
        assert!(e(json!({"image": "x", "env": {"A=B": "1"}})).starts_with("spec.env.A=B:"));
        assert!(e(json!({"image": "x", "namespace": "NS"})).starts_with("spec.namespace:"));
    }

    #[test]
    fn status_follows_the_deployment() {
        let d = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"ports": [{"containerPort": 80}]}]}}}, "status": {}});
        let s = status_of("web", "apps", Some(&d));
        assert_eq!(s.state, InstanceState::Provisioning);
        assert_eq!(s.detail, "0/1 replicas ready");
        assert_eq!(s.outputs["service"], "web.apps.svc:80");
        assert_eq!(s.outputs["deployment"], "web");
        let d = json!({"spec": {"replicas": 1}, "status": {"readyReplicas": 1}});
        assert_eq!(
            status_of("web", "apps", Some(&d)).state,
            InstanceState::Ready
        );
        assert_eq!(status_of("web", "apps", None).state, InstanceState::Deleted);
    }
}
