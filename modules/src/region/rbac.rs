//! What the region agent may do in its cluster, and nothing more.
//!
//! The agent's ServiceAccount (`harmony-agent` in the agent's namespace) gets exactly:
//!
//! - **in its own namespace** (Role `harmony-agent`): its identity Secret (get/update/patch by
//!   name, and create), and ConfigMaps (get/list/create/patch/delete) for the records of recent
//!   requests; no other Secret;
//! - **in `harmony-system`** (Role): ConfigMaps (get/list/create/update/patch/delete), the
//!   ownership records (ApplySet parents) of Scores applied with an owner;
//! - **cluster-wide, read-only**: nodes (get, list), for `get_inventory`;
//! - **cluster-wide, for project presence**: namespaces get/list/create (never update, patch or
//!   delete: it cannot relabel or take over a namespace); resourcequotas, limitranges and
//!   rolebindings get/create/patch; `bind` on ClusterRole [`MANAGED_CLUSTER_ROLE`] only (by
//!   resourceName), so the only role it can hand out is that one;
//! - **inside each managed namespace**, through the RoleBinding the agent keeps there: ClusterRole
//!   [`MANAGED_CLUSTER_ROLE`] ([`default_rules`], or [`super::RegionAgentRolloutScore::with_rules`]):
//!   the namespaced kinds the v1 ops and the built-in providers write. It has no
//!   ClusterRoleBinding: outside managed namespaces these rights do not exist;
//! - **a ValidatingAdmissionPolicy** (with its binding) that, for requests by the agent's
//!   ServiceAccount only, refuses creating or updating ResourceQuotas, LimitRanges and
//!   RoleBindings in a namespace not labelled `app.kubernetes.io/managed-by=harmony`, a
//!   RoleBinding other than ClusterRole [`MANAGED_CLUSTER_ROLE`] to the agent's own
//!   ServiceAccount, and a Namespace without that label: the agent cannot grant itself
//!   anything outside the namespaces it manages;
//! - cluster-scoped kinds only when the rollout names them
//!   ([`super::RegionAgentRolloutScore::with_cluster_rules`], a ClusterRole and its
//!   ClusterRoleBinding).
//!
//! No rule holds `*`, `escalate`, `impersonate`, `watch` or `deletecollection`, and no rule
//! reaches Secrets cluster-wide.

use harmony_agent_protocol::tenancy::{
    AGENT_MANAGED_CLUSTER_ROLE, MANAGED_BY_LABEL, MANAGED_BY_VALUE,
};
use serde_json::{Value, json};

use super::manifests::{AGENT_NAME, IDENTITY_SECRET};

/// The ClusterRole the agent binds in each managed namespace (`harmony-agent-managed`).
pub const MANAGED_CLUSTER_ROLE: &str = AGENT_MANAGED_CLUSTER_ROLE;
/// Namespace of the ownership records (ApplySet parents) the agent keeps for owned applies.
pub const OWNERSHIP_NAMESPACE: &str = "harmony-system";

const WRITE: [&str; 6] = ["get", "list", "create", "update", "patch", "delete"];
const READ: [&str; 2] = ["get", "list"];

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

/// The rights of ClusterRole [`MANAGED_CLUSTER_ROLE`], which the agent holds only inside the
/// namespaces it manages (bound there by its RoleBinding): what `apply_manifests`,
/// `delete_manifests`, `get_objects` and the built-in providers (container: Deployment and
/// Service; postgresql: CloudNativePG Cluster; vm: KubeVirt VirtualMachine) write and read.
pub fn default_rules() -> Vec<Value> {
    vec![
        rule(
            "",
            &[
                "configmaps",
                "secrets",
                "services",
                "serviceaccounts",
                "persistentvolumeclaims",
            ],
            &WRITE,
        ),
        rule("", &["pods", "events", "endpoints"], &READ),
        rule(
            "apps",
            &["deployments", "statefulsets", "daemonsets"],
            &WRITE,
        ),
        rule("apps", &["replicasets"], &READ),
        rule("batch", &["jobs", "cronjobs"], &WRITE),
        rule(
            "networking.k8s.io",
            &["ingresses", "networkpolicies"],
            &WRITE,
        ),
        rule("policy", &["poddisruptionbudgets"], &WRITE),
        rule("autoscaling", &["horizontalpodautoscalers"], &WRITE),
        rule("events.k8s.io", &["events"], &READ),
        rule("postgresql.cnpg.io", &["clusters"], &WRITE),
        rule("route.openshift.io", &["routes"], &WRITE),
        // Setting spec.host on an OpenShift Route.
        rule("route.openshift.io", &["routes/custom-host"], &["create"]),
        rule("kubevirt.io", &["virtualmachines"], &WRITE),
        rule("kubevirt.io", &["virtualmachineinstances"], &READ),
    ]
}

fn labels() -> Value {
    json!({"app.kubernetes.io/name": AGENT_NAME, "app.kubernetes.io/part-of": "harmony"})
}

/// `system:serviceaccount:<namespace>:harmony-agent`.
pub fn agent_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{AGENT_NAME}")
}

fn binding(kind: &str, name: &str, namespace: Option<&str>, role_kind: &str, ns: &str) -> Value {
    let mut metadata = json!({"name": name, "labels": labels()});
    if let Some(n) = namespace {
        metadata["namespace"] = json!(n);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": ns}]})
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels()}, "rules": rules})
}

/// The ValidatingAdmissionPolicy keeping the agent (user [`agent_user`]) inside managed
/// namespaces, and its binding (`Deny`).
fn guard(ns: &str) -> Vec<Value> {
    let name = format!("{AGENT_NAME}-{ns}-guard");
    let managed = |obj: &str| {
        format!(
            "has({obj}.metadata.labels) && '{MANAGED_BY_LABEL}' in {obj}.metadata.labels && {obj}.metadata.labels['{MANAGED_BY_LABEL}'] == '{MANAGED_BY_VALUE}'"
        )
    };
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["namespaces", "resourcequotas", "limitranges"]},
                {"apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["v1"],
                 "operations": ["CREATE", "UPDATE"], "resources": ["rolebindings"]}
            ]},
            "matchConditions": [{"name": "harmony-agent-only",
                "expression": format!("request.userInfo.username == '{}'", agent_user(ns))}],
            "validations": [
                {"expression": format!("request.resource.resource == 'namespaces' || (namespaceObject != null && {})", managed("namespaceObject")),
                 "message": format!("the Harmony agent may write ResourceQuotas, LimitRanges and RoleBindings only in namespaces labelled {MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"),
                 "reason": "Forbidden"},
                {"expression": format!("request.resource.resource != 'namespaces' || ({})", managed("object")),
                 "message": format!("the Harmony agent may create only namespaces labelled {MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"),
                 "reason": "Forbidden"},
                {"expression": format!(
                    "request.resource.resource != 'rolebindings' || (object.roleRef.kind == 'ClusterRole' && object.roleRef.name == '{MANAGED_CLUSTER_ROLE}' && has(object.subjects) && size(object.subjects) == 1 && object.subjects.all(s, s.kind == 'ServiceAccount' && s.name == '{AGENT_NAME}' && has(s.namespace) && s.namespace == '{ns}'))"),
                 "message": format!("the Harmony agent may bind only ClusterRole {MANAGED_CLUSTER_ROLE}, and only to its own ServiceAccount {ns}/{AGENT_NAME}"),
                 "reason": "Forbidden"}
            ]
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels()},
        "spec": {"policyName": name, "validationActions": ["Deny"]}
    });
    vec![policy, binding]
}

/// Every RBAC and admission object of the agent in namespace `ns` (see the module doc):
/// `rules` are the managed-namespace rights ([`default_rules`] unless narrowed), `cluster_rules`
/// the cluster-wide ones a rollout option names (none by default). The agent's Namespace and
/// ServiceAccount are not included.
pub fn rbac_objects(ns: &str, rules: &[Value], cluster_rules: &[Value]) -> Vec<Value> {
    let prefix = format!("{AGENT_NAME}-{ns}");
    let inventory = format!("{prefix}-inventory");
    let projects = format!("{prefix}-projects");
    let ownership = format!("{prefix}-ownership");
    let mut objects = vec![
        // In its own namespace: its identity Secret (no other Secret), and the ConfigMaps that
        // record recent requests so a redelivered request is never run twice.
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
        binding("RoleBinding", AGENT_NAME, Some(ns), "Role", ns),
        // Ownership records of owned applies (ConfigMaps only).
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OWNERSHIP_NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "harmony"}}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": ownership, "namespace": OWNERSHIP_NAMESPACE, "labels": labels()},
            "rules": [rule("", &["configmaps"], &WRITE)]}),
        binding(
            "RoleBinding",
            &ownership,
            Some(OWNERSHIP_NAMESPACE),
            "Role",
            ns,
        ),
        // get_inventory: nodes, read-only.
        cluster_role(&inventory, json!([rule("", &["nodes"], &READ)])),
        binding("ClusterRoleBinding", &inventory, None, "ClusterRole", ns),
        // Project presence: create managed namespaces, keep their quota, limits and binding.
        cluster_role(
            &projects,
            json!([
                rule("", &["namespaces"], &["get", "list", "create"]),
                rule("", &["resourcequotas", "limitranges"], &["get", "create", "patch"]),
                rule("rbac.authorization.k8s.io", &["rolebindings"], &["get", "create", "patch"]),
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                 "resourceNames": [MANAGED_CLUSTER_ROLE], "verbs": ["bind"]}
            ]),
        ),
        binding("ClusterRoleBinding", &projects, None, "ClusterRole", ns),
        // Managed namespaces only: bound there by the agent's own RoleBindings.
        cluster_role(MANAGED_CLUSTER_ROLE, json!(rules)),
    ];
    objects.extend(guard(ns));
    if !cluster_rules.is_empty() {
        let cluster = format!("{prefix}-cluster");
        objects.push(cluster_role(&cluster, json!(cluster_rules)));
        objects.push(binding(
            "ClusterRoleBinding",
            &cluster,
            None,
            "ClusterRole",
            ns,
        ));
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_of(objects: &[Value]) -> Vec<(String, Option<String>, Value)> {
        objects
            .iter()
            .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
            .flat_map(|o| {
                let kind = o["kind"].as_str().unwrap().to_string();
                let ns = o["metadata"]["namespace"].as_str().map(str::to_string);
                o["rules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(move |r| (kind.clone(), ns.clone(), r.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn no_wildcard_no_escalation_and_no_secret_outside_managed_namespaces() {
        let objects = rbac_objects("harmony-agent", &default_rules(), &[]);
        let all = rules_of(&objects);
        assert!(!all.is_empty());
        for (kind, ns, r) in &all {
            let text = r.to_string();
            assert!(!text.contains("\"*\""), "wildcard in {kind} {ns:?}: {r}");
            for verb in ["escalate", "impersonate", "watch", "deletecollection"] {
                assert!(!r["verbs"].to_string().contains(verb), "{verb} in {r}");
            }
            // bind only by resourceName, and only the managed role.
            if r["verbs"].to_string().contains("bind") {
                assert_eq!(r["resourceNames"], json!([MANAGED_CLUSTER_ROLE]), "{r}");
            }
        }
        // Secrets: in the agent's namespace (its identity) and in the managed role, which no
        // ClusterRoleBinding binds.
        for (kind, ns, r) in &all {
            if r["resources"].to_string().contains("secrets") {
                let managed_role = kind == "ClusterRole"
                    && default_rules().contains(r)
                    && objects
                        .iter()
                        .any(|o| o["metadata"]["name"] == MANAGED_CLUSTER_ROLE);
                assert!(
                    ns.as_deref() == Some("harmony-agent") || managed_role,
                    "secrets in {kind} {ns:?}: {r}"
                );
            }
        }
        let cluster_bindings: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding")
            .collect();
        assert_eq!(cluster_bindings.len(), 2);
        for b in &cluster_bindings {
            assert_ne!(b["roleRef"]["name"], MANAGED_CLUSTER_ROLE, "{b}");
            let role = objects
                .iter()
                .find(|o| {
                    o["kind"] == "ClusterRole" && o["metadata"]["name"] == b["roleRef"]["name"]
                })
                .unwrap();
            assert!(!role["rules"].to_string().contains("secrets"), "{role}");
        }
        // Namespaces: no update, patch or delete.
        let ns_rule = all
            .iter()
            .find(|(_, _, r)| r["resources"] == json!(["namespaces"]))
            .unwrap();
        assert_eq!(ns_rule.2["verbs"], json!(["get", "list", "create"]));
    }

    #[test]
    fn the_guard_applies_to_the_agent_only_and_covers_what_it_may_create() {
        let objects = rbac_objects("agents", &default_rules(), &[]);
        let policy = objects
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicy")
            .unwrap();
        assert_eq!(
            policy["spec"]["matchConditions"][0]["expression"],
            "request.userInfo.username == 'system:serviceaccount:agents:harmony-agent'"
        );
        let text = policy["spec"].to_string();
        for r in [
            "namespaces",
            "resourcequotas",
            "limitranges",
            "rolebindings",
        ] {
            assert!(text.contains(r), "{r} not guarded");
        }
        assert!(text.contains("s.namespace == 'agents'"), "{text}");
        let binding = objects
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicyBinding")
            .unwrap();
        assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    }

    #[test]
    fn cluster_scoped_rights_only_when_named() {
        let none = rbac_objects("a", &default_rules(), &[]);
        assert!(
            !none
                .iter()
                .any(|o| o["metadata"]["name"] == "harmony-agent-a-cluster")
        );
        let crds = [
            json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "create", "patch"]}),
        ];
        let some = rbac_objects("a", &default_rules(), &crds);
        let role = some
            .iter()
            .find(|o| {
                o["kind"] == "ClusterRole" && o["metadata"]["name"] == "harmony-agent-a-cluster"
            })
            .unwrap();
        assert_eq!(role["rules"], json!(crds));
    }
}
