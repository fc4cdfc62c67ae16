//! A small web shop as Scores: a namespace, its configuration, a database password, the web
//! Deployment and its Service. Written against the `K8sClient` capability only, so the same
//! Scores render to files on a laptop and apply to a cluster.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapEnvSource, Container, ContainerPort, EnvFromSource, EnvVar, EnvVarSource,
    PodSpec, PodTemplateSpec, Secret, SecretKeySelector, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

use harmony::domain::capability::K8sClient;
use harmony::domain::{Score, Topology};
use harmony_modules::k8s::{K8sResourceScore, NamespaceScore};
use harmony_types::{Dns1123Label, InvalidValue};

/// The web shop's parameters.
#[derive(Debug, Clone)]
pub struct WebShop {
    /// Namespace everything goes into.
    pub namespace: Dns1123Label,
    /// Container image of the web tier.
    pub image: String,
    /// Web replicas.
    pub replicas: i32,
    /// Database password (rendered into the Secret, never shown on screen).
    pub db_password: String,
}

impl WebShop {
    /// The example's defaults.
    pub fn example() -> Result<Self, InvalidValue> {
        Ok(Self {
            namespace: Dns1123Label::parse("webshop")?,
            image: "nginxinc/nginx-unprivileged:1.27".into(),
            replicas: 2,
            db_password: "example-only-not-a-real-password".into(),
        })
    }

    fn meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(self.namespace.to_string()),
            labels: Some(labels()),
            ..Default::default()
        }
    }

    /// The Scores, in the order they should run.
    pub fn scores<T: Topology + K8sClient + 'static>(&self) -> Vec<Box<dyn Score<T>>> {
        let config = ConfigMap {
            metadata: self.meta("web-config"),
            data: Some(BTreeMap::from([
                ("LISTEN_PORT".to_string(), "8080".to_string()),
                ("SHOP_TITLE".to_string(), "Harmony demo shop".to_string()),
            ])),
            ..Default::default()
        };
        let secret = Secret {
            metadata: self.meta("db-credentials"),
            string_data: Some(BTreeMap::from([(
                "password".to_string(),
                self.db_password.clone(),
            )])),
            ..Default::default()
        };
        let container = Container {
            name: "web".into(),
            image: Some(self.image.clone()),
            ports: Some(vec![ContainerPort {
                container_port: 8080,
                name: Some("http".into()),
                ..Default::default()
            }]),
            env_from: Some(vec![EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "web-config".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            env: Some(vec![EnvVar {
                name: "DB_PASSWORD".into(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: "db-credentials".into(),
                        key: "password".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let deployment = Deployment {
            metadata: self.meta("web"),
            spec: Some(DeploymentSpec {
                replicas: Some(self.replicas),
                selector: LabelSelector {
                    match_labels: Some(labels()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![container],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        let service = Service {
            metadata: self.meta("web"),
            spec: Some(ServiceSpec {
                selector: Some(labels()),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(IntOrString::String("http".into())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        vec![
            Box::new(
                NamespaceScore::new(self.namespace.clone())
                    .with_label("pod-security.kubernetes.io/enforce", "baseline"),
            ),
            Box::new(K8sResourceScore::single(config)),
            Box::new(K8sResourceScore::single(secret)),
            Box::new(K8sResourceScore::single(deployment)),
            Box::new(K8sResourceScore::single(service)),
        ]
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/name".to_string(), "webshop".to_string())])
}

/// The `example-webapp` program: renders the shop into `harmony-out/` or, with `--kubeconfig
/// FILE` / `--context NAME`, applies it to that cluster.
pub async fn cli_main() -> std::process::ExitCode {
    let shop = match WebShop::example() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let topology = |ctx: &_| {
        Ok::<_, std::convert::Infallible>(
            harmony::infra::default_topology::DefaultTopology::from_context(ctx),
        )
    };
    harmony_cli::run(harmony::domain::Inventory::empty(), topology, shop.scores()).await
}
