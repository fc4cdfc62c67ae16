//! The control plane as N replicas on one PostgreSQL that Harmony deploys first: a
//! CloudNativePG cluster (`PostgreSQLScore`), then the `harmony-control-plane` Deployment whose
//! replicas read the database URL from the Secret CloudNativePG writes (`<cluster>-app`, key
//! `uri`) and verify the database's TLS certificate with the CA CloudNativePG made
//! (`<cluster>-ca`, key `ca.crt` only: that Secret also holds the CA's key), a Service in front of them for agents and API clients, and a PodDisruptionBudget so a
//! node drain never takes the last replicas at once.
//!
//! ```
//! use example_control_plane_ha::ControlPlaneHa;
//! use harmony::infra::default_topology::DefaultTopology;
//!
//! let ha = ControlPlaneHa::example().unwrap();
//! assert_eq!(ha.replicas, 3);
//! let scores = ha.scores::<DefaultTopology>();
//! assert_eq!(scores.len(), 2); // the database first, then the replicas
//! ```

use serde_json::{Value, json};

use harmony::domain::capability::{K8sClient, PostgreSQL};
use harmony::domain::{Score, Topology};
use harmony_modules::k8s::K8sManifestsScore;
use harmony_modules::postgresql::PostgreSQLScore;
use harmony_types::{Dns1123Label, InvalidValue};

/// Port the control plane listens on inside its pods.
pub const LISTEN_PORT: u16 = 8443;

/// The deployment's parameters.
#[derive(Debug, Clone)]
pub struct ControlPlaneHa {
    /// Namespace of the database and the replicas.
    pub namespace: Dns1123Label,
    /// The `harmony-control-plane` image.
    pub image: String,
    /// Control-plane replicas (any replica accepts any call).
    pub replicas: u32,
    /// PostgreSQL instances of the CloudNativePG cluster (a primary and standbys).
    pub db_instances: u32,
    /// Storage per PostgreSQL instance.
    pub db_storage: String,
    /// Secret (type `kubernetes.io/tls`) with the certificate agents and clients trust.
    pub tls_secret: String,
    /// Secret with key `token`: the admin token.
    pub admin_token_secret: String,
}

impl ControlPlaneHa {
    /// The example's defaults: three replicas on a three-instance PostgreSQL 17 cluster.
    pub fn example() -> Result<Self, InvalidValue> {
        Ok(Self {
            namespace: Dns1123Label::parse("harmony-system")?,
            image: "registry.example.com/harmony-control-plane:0.1.0".into(),
            replicas: 3,
            db_instances: 3,
            db_storage: "10Gi".into(),
            tls_secret: "harmony-control-plane-tls".into(),
            admin_token_secret: "harmony-control-plane-admin".into(),
        })
    }

    /// The CloudNativePG cluster's name; CloudNativePG writes `<name>-app` with its `uri`.
    pub fn database_name(&self) -> String {
        "harmony-control-plane-db".into()
    }

    /// The Scores, in order: the database, then the replicas that use it.
    pub fn scores<T: Topology + K8sClient + PostgreSQL + 'static>(&self) -> Vec<Box<dyn Score<T>>> {
        let mut db = PostgreSQLScore::new(
            self.database_name(),
            self.namespace.to_string(),
            self.db_storage.clone(),
        );
        db.spec.cluster.instances = self.db_instances;
        vec![
            Box::new(db),
            Box::new(K8sManifestsScore::new(
                "harmony-control-plane",
                vec![self.deployment(), self.service(), self.disruption_budget()],
            )),
        ]
    }

    fn labels() -> Value {
        json!({"app.kubernetes.io/name": "harmony-control-plane"})
    }

    fn deployment(&self) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "harmony-control-plane", "namespace": self.namespace.to_string(), "labels": Self::labels()},
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": Self::labels()},
                "template": {
                    "metadata": {"labels": Self::labels()},
                    "spec": {
                        // Spread replicas over nodes: losing one node loses one replica.
                        "topologySpreadConstraints": [{
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": Self::labels()},
                        }],
                        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": "control-plane",
                            "image": self.image,
                            "args": [
                                format!("--listen=0.0.0.0:{LISTEN_PORT}"),
                                "--tls-cert=/etc/harmony/tls/tls.crt",
                                "--tls-key=/etc/harmony/tls/tls.key",
                                "--admin-token-file=/etc/harmony/admin/token",
                                // The pod name tells replicas apart in GET /v1/regions and the logs.
                                "--replica-id=$(POD_NAME)",
                            ],
                            "env": [
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "HARMONY_CP_DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": format!("{}-app", self.database_name()), "key": "uri"}}},
                                // CloudNativePG serves TLS with its own CA; the replicas verify it.
                                {"name": "HARMONY_CP_DATABASE_CA_FILE", "value": "/etc/harmony/db-ca/ca.crt"},
                            ],
                            "ports": [{"name": "https", "containerPort": LISTEN_PORT}],
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": LISTEN_PORT, "scheme": "HTTPS"}, "periodSeconds": 5},
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": LISTEN_PORT, "scheme": "HTTPS"}, "periodSeconds": 10},
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
                            "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
                            "volumeMounts": [
                                {"name": "tls", "mountPath": "/etc/harmony/tls", "readOnly": true},
                                {"name": "admin", "mountPath": "/etc/harmony/admin", "readOnly": true},
                                {"name": "db-ca", "mountPath": "/etc/harmony/db-ca", "readOnly": true},
                            ],
                        }],
                        "volumes": [
                            {"name": "tls", "secret": {"secretName": self.tls_secret}},
                            {"name": "admin", "secret": {"secretName": self.admin_token_secret}},
                            // Only the certificate: the Secret also holds the CA's private key.
                            {"name": "db-ca", "secret": {
                                "secretName": format!("{}-ca", self.database_name()),
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }},
                        ],
                    },
                },
            },
        })
    }

    fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "harmony-control-plane", "namespace": self.namespace.to_string(), "labels": Self::labels()},
            "spec": {
                "type": "LoadBalancer",
                "selector": Self::labels(),
                // TLS passes through to the replicas; any replica serves agents and the API.
                "ports": [{"name": "https", "port": 443, "targetPort": LISTEN_PORT}],
            },
        })
    }

    fn disruption_budget(&self) -> Value {
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "harmony-control-plane", "namespace": self.namespace.to_string(), "labels": Self::labels()},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": Self::labels()}},
        })
    }
}

/// The `example-control-plane-ha` program: renders the database and the replicas into
/// `harmony-out/` or, with `--kubeconfig FILE` / `--context NAME`, applies them to that cluster.
pub async fn cli_main() -> std::process::ExitCode {
    let ha = match ControlPlaneHa::example() {
        Ok(ha) => ha,
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
    harmony_cli::run(harmony::domain::Inventory::empty(), topology, ha.scores()).await
}
