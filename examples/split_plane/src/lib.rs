//! A widget platform on a split control plane: the Widget API (a CRD and its custom resources)
//! lives on the data-plane API server, the controller and its migration Job run on the
//! control-plane API server with the ServiceAccount, RBAC, ConfigMap and Secrets they use.
//! Scores only need `K8sClient`; `SplitPlaneTopology` decides where each object goes.

use async_trait::async_trait;
use serde_json::{Value, json};

use harmony::domain::capability::{K8sClient, K8sObject};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{InterpretError, Inventory, Outcome, Score, Topology, ValidationError};
use harmony_modules::k8s::apply_objects;
use harmony_types::Version;

/// Namespace of every namespaced object of the example.
pub const NAMESPACE: &str = "widgets";
/// Name of the Secret on the control plane holding the data plane's kubeconfig.
pub const KUBECONFIG_SECRET: &str = "data-plane-kubeconfig";
/// A stand-in kubeconfig for render mode (the token is not real and must never be shown).
pub const EXAMPLE_KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: data-plane
  cluster:
    server: https://data-plane.example.invalid:6443
contexts:
- name: data-plane
  context:
    cluster: data-plane
    user: widget-controller
current-context: data-plane
users:
- name: widget-controller
  user:
    token: example-only-not-a-real-token
";

/// Manifests of any kinds applied together, so placement sees a pod template and what it uses
/// in one apply.
#[derive(Debug, Clone)]
pub struct ManifestsScore {
    name: String,
    manifests: Vec<Value>,
}

impl ManifestsScore {
    /// A Score named `name` applying `manifests` in one apply.
    pub fn new(name: impl Into<String>, manifests: Vec<Value>) -> Self {
        Self {
            name: name.into(),
            manifests,
        }
    }

    fn objects(&self) -> Result<Vec<K8sObject>, harmony::domain::capability::CapabilityError> {
        self.manifests.iter().cloned().map(K8sObject::new).collect()
    }
}

impl<T: Topology + K8sClient + 'static> Score<T> for ManifestsScore {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> Value {
        let objects: Vec<Value> = match self.objects() {
            Ok(o) => o.iter().map(K8sObject::redacted).collect(),
            Err(e) => vec![Value::String(e.to_string())],
        };
        json!({ "objects": objects })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.manifests.is_empty() {
            return Err(ValidationError::new(
                "manifests",
                "is empty",
                "give at least one manifest",
            ));
        }
        for (i, m) in self.manifests.iter().enumerate() {
            K8sObject::new(m.clone()).map_err(|e| {
                ValidationError::new(
                    format!("manifests[{i}]"),
                    e.to_string(),
                    "set apiVersion, kind and metadata.name",
                )
            })?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Topology + K8sClient + 'static> Interpret<T> for ManifestsScore {
    fn name(&self) -> InterpretName {
        InterpretName("Manifests")
    }

    fn version(&self) -> Version {
        Version::parse(env!("CARGO_PKG_VERSION")).unwrap_or_else(|_| Version::new(0, 0, 0))
    }

    async fn execute(
        &self,
        _inventory: &Inventory,
        topology: &T,
    ) -> Result<Outcome, InterpretError> {
        let objects = self.objects().map_err(|e| InterpretError::Capability {
            action: format!("preparing {}", self.name),
            applied: Vec::new(),
            source: e,
        })?;
        apply_objects(topology, &self.name, &objects).await
    }
}

fn meta(name: &str) -> Value {
    json!({"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/part-of": "widgets"}})
}

/// The Widget API: its CRD (data plane, where custom resources are served).
fn widget_api() -> ManifestsScore {
    ManifestsScore::new(
        "Widget API",
        vec![json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
        })],
    )
}

/// The controller, what it needs to run, and the widgets it manages.
fn widget_platform() -> ManifestsScore {
    let controller = json!({
        "serviceAccountName": "widget-controller",
        "volumes": [
            {"name": "config", "configMap": {"name": "controller-config"}},
            {"name": "data-plane", "secret": {"secretName": KUBECONFIG_SECRET}}
        ],
        "containers": [{
            "name": "controller", "image": "example.com/widget-controller:1.0",
            "args": ["--kubeconfig=/var/run/data-plane/kubeconfig"],
            "envFrom": [{"secretRef": {"name": "controller-env"}}],
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/widget-controller"},
                {"name": "data-plane", "mountPath": "/var/run/data-plane", "readOnly": true}
            ]
        }]
    });
    ManifestsScore::new(
        "Widget platform",
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("widget-controller")}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("widget-controller"),
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("widget-controller"),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "widget-controller"},
                "subjects": [{"kind": "ServiceAccount", "name": "widget-controller", "namespace": NAMESPACE}]}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("controller-config"),
                "data": {"resync": "30s"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("controller-env"),
                "stringData": {"LICENSE_KEY": "example-only-license"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("db-credentials"),
                "stringData": {"password": "example-only-db-password"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("widget-controller"),
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "widget-controller"}},
                    "template": {"metadata": {"labels": {"app": "widget-controller"}}, "spec": controller}}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("widget-migrate"),
                "spec": {"template": {"spec": {"serviceAccountName": "widget-controller", "restartPolicy": "Never",
                    "containers": [{"name": "migrate", "image": "example.com/widget-controller:1.0",
                        "args": ["migrate"],
                        "env": [{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-credentials", "key": "password"}}}]}]}}}}),
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta("demo"),
                "spec": {"size": 3, "tokenSecretRef": {"name": "widget-token"},
                         "credentialsSecretRef": {"name": "db-credentials"}}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("widget-token"),
                "stringData": {"token": "example-only-widget-token"}}),
        ],
    )
}

/// The Scores, in the order they run.
pub fn scores<T: Topology + K8sClient + 'static>() -> Vec<Box<dyn Score<T>>> {
    vec![Box::new(widget_api()), Box::new(widget_platform())]
}
