//! The agent's manifests: Namespace, ServiceAccount, least-privilege RBAC for the v1 ops, the
//! bootstrap Secret, the ConfigMap and a hardened Deployment.

use harmony::domain::capability::{CapabilityError, K8sObject};
use serde_json::{Value, json};

/// Name of the ServiceAccount, ConfigMap, Deployment and RBAC objects.
pub const AGENT_NAME: &str = "harmony-agent";
/// The Secret holding the one-time bootstrap token.
pub const BOOTSTRAP_SECRET: &str = "harmony-agent-bootstrap";
/// The Secret the agent keeps its identity in (written by the agent itself).
pub const IDENTITY_SECRET: &str = "harmony-agent-identity";
const HEALTH_PORT: u16 = 8080;

/// RBAC rules for the v1 ops: read and write any namespaced or cluster object a Score applies,
/// but never `escalate`, `bind`, `impersonate`, `watch` or `deletecollection`, so the agent
/// cannot grant itself or anyone more than it holds. Narrow them with
/// [`super::RegionAgentRolloutScore::with_rules`].
pub fn default_rules() -> Vec<Value> {
    vec![json!({
        "apiGroups": ["*"],
        "resources": ["*"],
        "verbs": ["get", "list", "create", "update", "patch", "delete"]
    })]
}

/// Everything the manifests are made of.
pub(super) struct AgentSpec<'a> {
    pub namespace: &'a str,
    pub region: &'a str,
    pub zone: &'a str,
    pub control_plane_url: &'a str,
    pub ca_pem: Option<&'a str>,
    pub image: &'a str,
    pub rules: &'a [Value],
    /// Cluster-scoped rules a rollout option names (none by default).
    pub cluster_rules: &'a [Value],
    /// The bootstrap token, only when a new one was minted (never printed: Secrets are redacted).
    pub bootstrap_token: Option<&'a str>,
}

fn labels() -> Value {
    json!({"app.kubernetes.io/name": AGENT_NAME, "app.kubernetes.io/part-of": "harmony"})
}

pub(super) fn manifests(s: &AgentSpec<'_>) -> Result<Vec<K8sObject>, CapabilityError> {
    let ns = s.namespace;
    let cluster_name = format!("{AGENT_NAME}-{ns}");
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "app.kubernetes.io/part-of": "harmony"}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": labels()}}),
        // In its own namespace: its identity Secret (no other Secret), and the ConfigMaps that
        // record recent requests so a redelivered request is never run twice (the ops
        // ClusterRole may be narrowed with `with_rules`; these must not be).
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": labels()},
        "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [IDENTITY_SECRET],
             "verbs": ["get", "update", "patch"]},
            // `create` cannot be limited by name; the identity Secret must be created once.
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["configmaps"],
             "verbs": ["get", "list", "create", "patch", "delete"]}
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AGENT_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": ns}]}),
        // get_inventory: nodes, read-only.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("{cluster_name}-inventory"), "labels": labels()},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{cluster_name}-inventory"), "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{cluster_name}-inventory")},
            "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": ns}]}),
        // apply_manifests, delete_manifests, get_objects.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("{cluster_name}-ops"), "labels": labels()},
            "rules": s.rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{cluster_name}-ops"), "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{cluster_name}-ops")},
            "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": ns}]}),
    ];
    if !s.cluster_rules.is_empty() {
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("{cluster_name}-cluster"), "labels": labels()},
            "rules": s.cluster_rules}),
        );
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{cluster_name}-cluster"), "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{cluster_name}-cluster")},
            "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": ns}]}));
    }
    let mut data = json!({
        "HARMONY_CONTROL_PLANE_URL": s.control_plane_url,
        "HARMONY_REGION": s.region,
        "HARMONY_ZONE": s.zone,
    });
    if let Some(ca) = s.ca_pem {
        data["ca.crt"] = json!(ca);
    }
    objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": labels()}, "data": data}));
    if let Some(token) = s.bootstrap_token {
        objects.push(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": BOOTSTRAP_SECRET, "namespace": ns, "labels": labels()},
            "stringData": {"token": token}}),
        );
    }
    objects.push(deployment(s));
    objects.into_iter().map(K8sObject::new).collect()
}

fn deployment(s: &AgentSpec<'_>) -> Value {
    let from_config = |key: &str| json!({"name": key, "valueFrom": {"configMapKeyRef": {"name": AGENT_NAME, "key": key}}});
    let mut env = vec![
        from_config("HARMONY_CONTROL_PLANE_URL"),
        from_config("HARMONY_REGION"),
        from_config("HARMONY_ZONE"),
        json!({"name": "HARMONY_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}),
        json!({"name": "HARMONY_IDENTITY_SECRET", "value": IDENTITY_SECRET}),
        json!({"name": "HARMONY_BOOTSTRAP_TOKEN_FILE", "value": "/etc/harmony/bootstrap/token"}),
        json!({"name": "HARMONY_HEALTH_LISTEN", "value": format!("0.0.0.0:{HEALTH_PORT}")}),
    ];
    let mut mounts =
        vec![json!({"name": "bootstrap", "mountPath": "/etc/harmony/bootstrap", "readOnly": true})];
    let mut volumes = vec![
        // Optional: once the agent holds an identity the bootstrap Secret may be pruned.
        json!({"name": "bootstrap", "secret": {"secretName": BOOTSTRAP_SECRET, "optional": true}}),
    ];
    if s.ca_pem.is_some() {
        env.push(json!({"name": "HARMONY_CA_BUNDLE", "value": "/etc/harmony/ca/ca.crt"}));
        mounts.push(json!({"name": "ca", "mountPath": "/etc/harmony/ca", "readOnly": true}));
        volumes.push(json!({"name": "ca", "configMap": {"name": AGENT_NAME, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}));
    }
    let probe = |path: &str, period: u32| {
        json!({"httpGet": {"path": path, "port": HEALTH_PORT}, "periodSeconds": period,
               "timeoutSeconds": 2, "failureThreshold": 3})
    };
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": AGENT_NAME, "namespace": s.namespace, "labels": labels()},
        "spec": {
            // One agent per region: a second would replace the first's connection.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": AGENT_NAME}},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": AGENT_NAME,
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"}
                    },
                    "containers": [{
                        "name": "agent",
                        "image": s.image,
                        "env": env,
                        "ports": [{"name": "health", "containerPort": HEALTH_PORT}],
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]}
                        },
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"cpu": "500m", "memory": "256Mi"}
                        },
                        "livenessProbe": probe("/healthz", 10),
                        "readinessProbe": probe("/readyz", 5),
                        "volumeMounts": mounts
                    }],
                    "volumes": volumes
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(token: Option<&'static str>) -> AgentSpec<'static> {
        AgentSpec {
            namespace: "harmony-agent",
            region: "eu-west",
            zone: "paris-1",
            control_plane_url: "https://cp.example.com",
            ca_pem: Some("-----BEGIN CERTIFICATE-----\n..."),
            image: "registry.example.com/harmony-agent:0.1.0",
            rules: &[],
            cluster_rules: &[],
            bootstrap_token: token,
        }
    }

    #[test]
    fn the_deployment_is_hardened_and_the_token_only_appears_in_its_secret() {
        let objects = manifests(&spec(Some("hbt_secret"))).unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o.reference().kind.as_str())
            .collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "ConfigMap",
                "Secret",
                "Deployment"
            ]
        );
        let deployment = objects.last().unwrap().value();
        let pod = &deployment["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        let others: String = objects
            .iter()
            .filter(|o| !o.is_secret())
            .map(|o| o.value().to_string())
            .collect();
        assert!(!others.contains("hbt_secret"));
        for rule in default_rules() {
            let verbs = rule["verbs"].to_string();
            for forbidden in ["escalate", "bind", "impersonate", "*"] {
                assert!(!verbs.contains(forbidden), "{verbs}");
            }
        }
        // The namespaced Role covers the request records whatever `with_rules` narrows.
        let role = objects[2].value();
        assert!(
            role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["resources"][0] == "configmaps"
                    && r["verbs"].to_string().contains("create")),
            "{role}"
        );
        // Without a new token there is no Secret to apply.
        let kinds = manifests(&spec(None)).unwrap();
        assert!(kinds.iter().all(|o| !o.is_secret()));
    }
}
