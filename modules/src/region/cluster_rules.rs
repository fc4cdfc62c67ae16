//! `clusterRules` of a `RegionAgent`: RBAC rules for the cluster-scoped kinds the agent may
//! touch, checked so a resource cannot hand the agent wildcard, Secret or escalation rights.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use harmony::domain::ValidationError;

/// One RBAC rule for cluster-scoped kinds (a `ClusterRole` rule), as a `RegionAgent` names it.
#[derive(JsonSchema, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRule {
    /// The API groups (`""` for the core group, `apiextensions.k8s.io`); no `*`.
    pub api_groups: Vec<String>,
    /// The cluster-scoped resources (`customresourcedefinitions`, `persistentvolumes`); no `*`,
    /// no `secrets`, no namespaced kind.
    pub resources: Vec<String>,
    /// The verbs (`get`, `list`, `create`, `patch`...); no `*`, `escalate`, `bind` or
    /// `impersonate`.
    pub verbs: Vec<String>,
    /// Limits the rule to these object names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

/// Verbs that would let the agent grant itself or others more than it holds.
const ESCALATING_VERBS: &[&str] = &["escalate", "bind", "impersonate"];

/// Built-in namespaced resources: granting them cluster-wide would reach every namespace.
const NAMESPACED_RESOURCES: &[&str] = &[
    "pods",
    "configmaps",
    "services",
    "serviceaccounts",
    "persistentvolumeclaims",
    "endpoints",
    "events",
    "resourcequotas",
    "limitranges",
    "deployments",
    "statefulsets",
    "daemonsets",
    "replicasets",
    "jobs",
    "cronjobs",
    "roles",
    "rolebindings",
    "ingresses",
    "networkpolicies",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "leases",
];

impl ClusterRule {
    /// Checks the rule (`field` is its path, `spec.clusterRules[0]`); errors name the entry and
    /// the fix.
    pub fn validate(&self, field: &str) -> Result<(), ValidationError> {
        let invalid = |sub: &str, problem: String, fix: &str| {
            Err(ValidationError::new(format!("{field}.{sub}"), problem, fix))
        };
        for (sub, list) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("verbs", &self.verbs),
        ] {
            if list.is_empty() {
                return invalid(
                    sub,
                    "is empty".into(),
                    "name at least one entry (apiGroups: [\"\"] for the core group)",
                );
            }
            if let Some(w) = list.iter().find(|v| v.contains('*')) {
                return invalid(
                    sub,
                    format!("{w:?} is a wildcard"),
                    "name each group, resource and verb the agent needs; wildcards are never granted",
                );
            }
        }
        for r in &self.resources {
            let base = r.split('/').next().unwrap_or(r);
            if base == "secrets" {
                return invalid(
                    "resources",
                    format!("{r:?} would give the agent Secrets in every namespace"),
                    "remove it: the agent reaches Secrets only inside namespaces Harmony manages",
                );
            }
            if NAMESPACED_RESOURCES.contains(&base) {
                return invalid(
                    "resources",
                    format!(
                        "{r:?} is a namespaced kind: a cluster rule would grant it in every namespace"
                    ),
                    "remove it: clusterRules names cluster-scoped kinds only (customresourcedefinitions, clusterroles, persistentvolumes, storageclasses...); the agent's namespaced rights cover Harmony-managed namespaces",
                );
            }
        }
        if let Some(v) = self
            .verbs
            .iter()
            .find(|v| ESCALATING_VERBS.contains(&v.as_str()))
        {
            return invalid(
                "verbs",
                format!("{v:?} would let the agent grant more than it holds"),
                "remove it: escalate, bind and impersonate are never granted to the agent",
            );
        }
        Ok(())
    }

    /// The rule as a `ClusterRole` rule (JSON), for `RegionAgentRolloutScore::with_cluster_rules`.
    pub fn to_rule(&self) -> Value {
        let mut rule = json!({
            "apiGroups": self.api_groups,
            "resources": self.resources,
            "verbs": self.verbs,
        });
        if !self.resource_names.is_empty() {
            rule["resourceNames"] = json!(self.resource_names);
        }
        rule
    }
}

/// Checks every rule of `spec.clusterRules` and returns them as `ClusterRole` rules.
pub(super) fn checked_rules(rules: &[ClusterRule]) -> Result<Vec<Value>, ValidationError> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            r.validate(&format!("spec.clusterRules[{i}]"))
                .map(|()| r.to_rule())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> ClusterRule {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        ClusterRule {
            api_groups: own(groups),
            resources: own(resources),
            verbs: own(verbs),
            resource_names: Vec::new(),
        }
    }

    #[test]
    fn a_cluster_scoped_rule_passes_as_a_cluster_role_rule() {
        let mut crds = rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &["get", "create", "patch"],
        );
        crds.resource_names = vec!["widgets.example.com".into()];
        let rules = checked_rules(&[crds, rule(&[""], &["persistentvolumes"], &["get"])]).unwrap();
        assert_eq!(
            rules[0],
            json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                   "verbs": ["get", "create", "patch"], "resourceNames": ["widgets.example.com"]})
        );
        assert_eq!(rules[1].get("resourceNames"), None);
    }

    #[test]
    fn wildcards_secrets_namespaced_kinds_and_escalation_are_refused_by_field() {
        let cases = [
            (
                rule(&["*"], &["clusterroles"], &["get"]),
                "spec.clusterRules[1].apiGroups",
                "wildcard",
            ),
            (
                rule(&[""], &["*"], &["get"]),
                "spec.clusterRules[1].resources",
                "wildcard",
            ),
            (
                rule(&[""], &["nodes"], &["*"]),
                "spec.clusterRules[1].verbs",
                "wildcard",
            ),
            (
                rule(&[""], &["secrets"], &["get"]),
                "spec.clusterRules[1].resources",
                "Secrets in every namespace",
            ),
            (
                rule(&[""], &["secrets/status"], &["get"]),
                "spec.clusterRules[1].resources",
                "Secrets",
            ),
            (
                rule(&[""], &["configmaps"], &["get"]),
                "spec.clusterRules[1].resources",
                "namespaced kind",
            ),
            (
                rule(&["rbac.authorization.k8s.io"], &["clusterroles"], &["bind"]),
                "spec.clusterRules[1].verbs",
                "grant more than it holds",
            ),
            (
                rule(&[""], &["nodes"], &[]),
                "spec.clusterRules[1].verbs",
                "is empty",
            ),
        ];
        let fine = rule(&[""], &["nodes"], &["get"]);
        for (bad, field, problem) in cases {
            let e = checked_rules(&[fine.clone(), bad.clone()]).unwrap_err();
            assert_eq!(e.field, field, "{bad:?}: {e}");
            assert!(e.problem.contains(problem), "{bad:?}: {e}");
            assert!(!e.fix.is_empty());
        }
    }
}
