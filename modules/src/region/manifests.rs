//! The agent's manifests: Namespace, ServiceAccount, its least-privilege RBAC and admission guard
//! ([`super::rbac`], which says exactly what is granted), the bootstrap Secret, the ConfigMap
//! and a hardened Deployment.

use harmony::domain::capability::{CapabilityError, K8sObject};
use serde_json::{Value, json};

use super::rbac::rbac_objects;

/// Name of the ServiceAccount, ConfigMap, Deployment and RBAC objects.
pub const AGENT_NAME: &str = "harmony-agent";
/// The Secret holding the one-time bootstrap token.
pub const BOOTSTRAP_SECRET: &str = "harmony-agent-bootstrap";
/// The Secret the agent keeps its identity in (written by the agent itself).
pub const IDENTITY_SECRET: &str = "harmony-agent-identity";
const HEALTH_PORT: u16 = 8080;

/// Everything the manifests are made of.
pub(super) struct AgentSpec<'a> {
    pub namespace: &'a str,
    pub region: &'a str,
    pub zone: &'a str,
    pub control_plane_url: &'a str,
    pub ca_pem: Option<&'a str>,
    pub image: &'a str,
    /// Rights inside managed namespaces (ClusterRole `harmony-agent-managed`).
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
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "app.kubernetes.io/part-of": "harmony"}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": labels()}}),
    ];
    objects.extend(rbac_objects(ns, s.rules, s.cluster_rules));
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
        // The ServiceAccount the agent binds in each project namespace it manages.
        json!({"name": "HARMONY_SERVICE_ACCOUNT", "value": AGENT_NAME}),
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
                "Namespace",
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "ClusterRole",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding",
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
        for rule in super::super::rbac::default_rules() {
            let verbs = rule["verbs"].to_string();
            for forbidden in ["escalate", "bind", "impersonate", "*"] {
                assert!(!verbs.contains(forbidden), "{verbs}");
            }
        }
        let env = c["env"].to_string();
        assert!(
            env.contains(r#"{"name":"HARMONY_SERVICE_ACCOUNT","value":"harmony-agent"}"#),
            "{env}"
        );
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
