//! A widget platform on a split control plane: the Widget API (a CRD and its custom resources)
//! lives on the data-plane API server, the controller and its migration Job run on the
//! control-plane API server with the ServiceAccount, RBAC, ConfigMap and Secrets they use.
//! Scores only need `K8sClient`; `SplitPlaneTopology` decides where each object goes.

use serde_json::{Value, json};

use harmony::domain::capability::K8sClient;
use harmony::domain::{Score, Topology};
use harmony_modules::k8s::K8sManifestsScore;

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

fn meta(name: &str) -> Value {
    json!({"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/part-of": "widgets"}})
}

/// The Widget API: its CRD (data plane, where custom resources are served).
fn widget_api() -> K8sManifestsScore {
    K8sManifestsScore::new(
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
fn widget_platform() -> K8sManifestsScore {
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
    K8sManifestsScore::new(
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

/// The split-plane example takes no flags of its own; this gives its `--help` first line.
#[derive(Debug, Clone, Copy, clap::Args)]
#[command(
    about = "Render the widget platform into harmony-out/control-plane/ and harmony-out/data-plane/. The example renders only: applying to two live API servers needs two clusters, which one --kubeconfig cannot name; build SplitPlaneTopology::new with two K8sTopology values in your own program (docs/split-plane.md)."
)]
pub struct Flags {}

/// The `example-split-plane` program: renders the platform into `harmony-out/control-plane/`
/// and `harmony-out/data-plane/`. Render mode only (it offers no `--kubeconfig`).
pub async fn cli_main() -> std::process::ExitCode {
    use harmony::infra::split_plane::SplitPlaneTopology;
    harmony_cli::run_program(
        harmony::domain::Inventory::empty(),
        |_: Flags, ctx: &harmony::domain::RunContext| {
            let topology = SplitPlaneTopology::rendered("split-plane", ctx)
                .with_data_plane_kubeconfig(NAMESPACE, KUBECONFIG_SECRET, EXAMPLE_KUBECONFIG);
            Ok::<_, std::convert::Infallible>((topology, scores()))
        },
    )
    .await
}
