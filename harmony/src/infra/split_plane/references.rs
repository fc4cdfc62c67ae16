//! What an object refers to: the ConfigMaps, Secrets, PersistentVolumeClaims and ServiceAccount a
//! pod template needs, the image pull secrets of a ServiceAccount, the ServiceAccounts a binding
//! names, and the `*SecretRef`/`*ConfigMapRef` fields of other objects. Pure functions over
//! manifests, no I/O.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

use crate::domain::capability::{K8sObject, ObjectRef};

/// Namespaced objects that name no namespace land here, as with `K8sTopology` and kubectl.
pub(super) const DEFAULT_NAMESPACE: &str = "default";

/// Kubernetes creates this ServiceAccount in every namespace; pods use it when they name none.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Identity of an object regardless of API version, namespace defaulted for namespaced kinds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Key {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl Key {
    /// The key of a declared object; `namespaced` says whether a missing namespace means `default`.
    pub(super) fn of(r: &ObjectRef, namespaced: bool) -> Self {
        let namespace = match (&r.namespace, namespaced) {
            (Some(ns), _) => Some(ns.clone()),
            (None, true) => Some(DEFAULT_NAMESPACE.to_string()),
            (None, false) => None,
        };
        Self {
            group: r.group().to_string(),
            kind: r.kind.clone(),
            namespace,
            name: r.name.clone(),
        }
    }

    fn core(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: String::new(),
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The reference used to look the object up (references only name core and RBAC kinds).
    pub(super) fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: match self.group.as_str() {
                "" => "v1".to_string(),
                g => format!("{g}/v1"),
            },
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.object_ref().fmt(f)
    }
}

/// One object a pod template needs, and how it uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PodRef {
    pub target: Key,
    /// `volume "config"`, `envFrom`, `env DB_PASSWORD`, `imagePullSecrets`, `serviceAccountName`.
    pub via: String,
    /// `false` when every use is `optional: true`, or for the implicit `default` ServiceAccount:
    /// the pod starts without it.
    pub required: bool,
}

/// The pod spec inside a runnable of `kind` (Pod, CronJob, or any kind with `spec.template`).
pub(super) fn pod_spec<'a>(kind: &str, value: &'a Value) -> Option<&'a Value> {
    match kind {
        "Pod" => value.pointer("/spec"),
        "CronJob" => value.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => value.pointer("/spec/template/spec"),
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn optional(v: &Value) -> bool {
    v.get("optional").and_then(Value::as_bool).unwrap_or(false)
}

fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// Everything the pod template of runnable `object` uses, one entry per target object.
pub(super) fn pod_references(object: &K8sObject) -> Vec<PodRef> {
    let r = object.reference();
    let ns = r.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    let Some(spec) = pod_spec(&r.kind, object.value()) else {
        return Vec::new();
    };
    let mut found: BTreeMap<Key, PodRef> = BTreeMap::new();
    let mut add = |kind: &str, name: &str, via: String, required: bool| {
        let target = Key::core(kind, ns, name);
        found
            .entry(target.clone())
            .and_modify(|p| p.required |= required)
            .or_insert(PodRef {
                target,
                via,
                required,
            });
    };

    match str_at(spec, "serviceAccountName").or_else(|| str_at(spec, "serviceAccount")) {
        Some(sa) => add(
            "ServiceAccount",
            sa,
            "serviceAccountName".into(),
            sa != DEFAULT_SERVICE_ACCOUNT,
        ),
        None => add(
            "ServiceAccount",
            DEFAULT_SERVICE_ACCOUNT,
            "default ServiceAccount".into(),
            false,
        ),
    }
    for s in items(spec, "imagePullSecrets") {
        if let Some(name) = str_at(s, "name") {
            add("Secret", name, "imagePullSecrets".into(), true);
        }
    }
    for volume in items(spec, "volumes") {
        let vname = str_at(volume, "name").unwrap_or("?");
        if let Some(cm) = volume.get("configMap")
            && let Some(name) = str_at(cm, "name")
        {
            add(
                "ConfigMap",
                name,
                format!("volume {vname:?}"),
                !optional(cm),
            );
        }
        if let Some(s) = volume.get("secret")
            && let Some(name) = str_at(s, "secretName")
        {
            add("Secret", name, format!("volume {vname:?}"), !optional(s));
        }
        // A pod whose claim does not exist stays Pending; there is no `optional` for claims.
        if let Some(claim) = volume.get("persistentVolumeClaim")
            && let Some(name) = str_at(claim, "claimName")
        {
            add(
                "PersistentVolumeClaim",
                name,
                format!("volume {vname:?}"),
                true,
            );
        }
        for source in volume
            .get("projected")
            .map(|p| items(p, "sources"))
            .into_iter()
            .flatten()
        {
            for (field, kind) in [("configMap", "ConfigMap"), ("secret", "Secret")] {
                if let Some(src) = source.get(field)
                    && let Some(name) = str_at(src, "name")
                {
                    add(
                        kind,
                        name,
                        format!("projected volume {vname:?}"),
                        !optional(src),
                    );
                }
            }
        }
    }
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|k| items(spec, k));
    for c in containers {
        for env in items(c, "env") {
            let var = str_at(env, "name").unwrap_or("?");
            let Some(from) = env.get("valueFrom") else {
                continue;
            };
            for (field, kind) in [("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")] {
                if let Some(sel) = from.get(field)
                    && let Some(name) = str_at(sel, "name")
                {
                    add(kind, name, format!("env {var}"), !optional(sel));
                }
            }
        }
        for from in items(c, "envFrom") {
            for (field, kind) in [("configMapRef", "ConfigMap"), ("secretRef", "Secret")] {
                if let Some(src) = from.get(field)
                    && let Some(name) = str_at(src, "name")
                {
                    add(kind, name, "envFrom".into(), !optional(src));
                }
            }
        }
    }
    found.into_values().collect()
}

/// The Secrets a ServiceAccount lists in `imagePullSecrets`: the API server adds them to every
/// pod that runs as it, so they are needed wherever those pods run.
pub(super) fn service_account_pull_secrets(service_account: &K8sObject) -> Vec<Key> {
    let ns = service_account
        .reference()
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    items(service_account.value(), "imagePullSecrets")
        .filter_map(|s| str_at(s, "name"))
        .map(|name| Key::core("Secret", ns, name))
        .collect()
}

/// The ServiceAccounts named in a RoleBinding's or ClusterRoleBinding's `subjects`.
pub(super) fn bound_service_accounts(binding: &K8sObject) -> Vec<Key> {
    let own_ns = binding.reference().namespace.as_deref();
    items(binding.value(), "subjects")
        .filter(|s| str_at(s, "kind") == Some("ServiceAccount"))
        .filter_map(|s| {
            let name = str_at(s, "name")?;
            // A RoleBinding's subject may omit its namespace; a ClusterRoleBinding's may not.
            let ns = str_at(s, "namespace").or(own_ns)?;
            Some(Key::core("ServiceAccount", ns, name))
        })
        .collect()
}

/// The Role or ClusterRole a binding's `roleRef` names.
pub(super) fn role_of(binding: &K8sObject) -> Option<Key> {
    let role_ref = binding.value().get("roleRef")?;
    let name = str_at(role_ref, "name")?;
    match str_at(role_ref, "kind")? {
        "ClusterRole" => Some(Key {
            group: RBAC_GROUP.into(),
            kind: "ClusterRole".into(),
            namespace: None,
            name: name.into(),
        }),
        "Role" => Some(Key {
            group: RBAC_GROUP.into(),
            kind: "Role".into(),
            namespace: Some(
                binding
                    .reference()
                    .namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.into()),
            ),
            name: name.into(),
        }),
        _ => None,
    }
}

/// Secrets and ConfigMaps named by fields called `secretRef`/`*SecretRef` or
/// `configMapRef`/`*ConfigMapRef` (holding `name`, optionally `namespace`) anywhere outside
/// `metadata` and `status`, with the field's path. Deliberately simple: other spellings (CNPG's
/// `superuserSecret`, for instance) are not detected; annotate those Secrets instead.
pub(super) fn data_references(object: &K8sObject) -> Vec<(Key, String)> {
    let ns = object
        .reference()
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    let mut found = Vec::new();
    if let Value::Object(map) = object.value() {
        for (k, v) in map {
            if !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind") {
                walk(v, k, ns, &mut found);
            }
        }
    }
    found
}

fn reference_kind(field: &str) -> Option<&'static str> {
    if field == "secretRef" || field.ends_with("SecretRef") {
        Some("Secret")
    } else if field == "configMapRef" || field.ends_with("ConfigMapRef") {
        Some("ConfigMap")
    } else {
        None
    }
}

fn walk(v: &Value, path: &str, ns: &str, found: &mut Vec<(Key, String)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let child_path = format!("{path}.{k}");
                if let Some(kind) = reference_kind(k)
                    && let Some(name) = str_at(child, "name")
                {
                    let target_ns = str_at(child, "namespace").unwrap_or(ns);
                    found.push((Key::core(kind, target_ns, name), child_path.clone()));
                }
                walk(child, &child_path, ns, found);
            }
        }
        Value::Array(list) => {
            for child in list {
                walk(child, &format!("{path}[]"), ns, found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> K8sObject {
        K8sObject::new(v).unwrap()
    }

    fn targets(refs: &[PodRef]) -> Vec<(String, String, bool)> {
        refs.iter()
            .map(|r| (r.target.to_string(), r.via.clone(), r.required))
            .collect()
    }

    #[test]
    fn every_pod_template_source_is_found() {
        let cron = obj(json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c", "namespace": "ops"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "serviceAccountName": "runner",
                "imagePullSecrets": [{"name": "registry"}],
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "settings"}},
                    {"name": "tls", "secret": {"secretName": "certs", "optional": true}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "cache"}},
                    {"name": "all", "projected": {"sources": [
                        {"configMap": {"name": "extra"}}, {"secret": {"name": "token"}}]}}],
                "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
                "containers": [{"name": "main",
                    "envFrom": [{"configMapRef": {"name": "env-cm"}}],
                    "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "m"}}},
                            {"name": "PLAIN", "value": "x"}]}]}}}}}}));
        let mut got = targets(&pod_references(&cron));
        got.sort();
        let s = |a: &str, b: &str, c: bool| (a.to_string(), b.to_string(), c);
        assert_eq!(
            got,
            [
                s("v1 ConfigMap ops/env-cm", "envFrom", true),
                s("v1 ConfigMap ops/extra", "projected volume \"all\"", true),
                s("v1 ConfigMap ops/settings", "volume \"cfg\"", true),
                s(
                    "v1 PersistentVolumeClaim ops/cache",
                    "volume \"data\"",
                    true
                ),
                s("v1 Secret ops/certs", "volume \"tls\"", false),
                s("v1 Secret ops/db", "env PW", true),
                s("v1 Secret ops/init-env", "envFrom", true),
                s("v1 Secret ops/registry", "imagePullSecrets", true),
                s("v1 Secret ops/token", "projected volume \"all\"", true),
                s("v1 ServiceAccount ops/runner", "serviceAccountName", true),
            ]
        );
    }

    #[test]
    fn a_bare_pod_uses_the_default_service_account_which_is_not_required() {
        let pod = obj(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        );
        assert_eq!(
            targets(&pod_references(&pod)),
            [(
                "v1 ServiceAccount default/default".to_string(),
                "default ServiceAccount".to_string(),
                false
            )]
        );
    }

    #[test]
    fn a_service_account_brings_its_image_pull_secrets() {
        let sa = obj(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "runner", "namespace": "ops"},
            "imagePullSecrets": [{"name": "registry"}, {"name": ""}, {"name": "mirror"}]}));
        let keys: Vec<String> = service_account_pull_secrets(&sa)
            .iter()
            .map(Key::to_string)
            .collect();
        assert_eq!(keys, ["v1 Secret ops/registry", "v1 Secret ops/mirror"]);
    }

    #[test]
    fn bindings_and_custom_resource_references() {
        let rb = obj(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b", "namespace": "shop"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "app"},
                         {"kind": "ServiceAccount", "name": "other", "namespace": "ops"},
                         {"kind": "User", "name": "alice"}]}),
        );
        let sas: Vec<String> = bound_service_accounts(&rb)
            .iter()
            .map(Key::to_string)
            .collect();
        assert_eq!(
            sas,
            ["v1 ServiceAccount shop/app", "v1 ServiceAccount ops/other"]
        );
        assert_eq!(
            role_of(&rb).unwrap().to_string(),
            "rbac.authorization.k8s.io/v1 Role shop/reader"
        );
        let cr = obj(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "shop"},
            "spec": {"tokenSecretRef": {"name": "token"},
                     "backends": [{"configMapRef": {"name": "routes", "namespace": "net"}}],
                     "secretName": "not-detected"},
            "status": {"secretRef": {"name": "ignored"}}}));
        let mut refs: Vec<(String, String)> = data_references(&cr)
            .into_iter()
            .map(|(k, p)| (k.to_string(), p))
            .collect();
        refs.sort();
        assert_eq!(
            refs,
            [
                (
                    "v1 ConfigMap net/routes".to_string(),
                    "spec.backends[].configMapRef".to_string()
                ),
                (
                    "v1 Secret shop/token".to_string(),
                    "spec.tokenSecretRef".to_string()
                ),
            ]
        );
    }
}
