//! The closure check: every object a pod template needs must be on the plane where the pod runs,
//! declared in the same apply or already present: what the template names (ConfigMaps, Secrets,
//! PersistentVolumeClaims, its ServiceAccount), the image pull secrets of that ServiceAccount,
//! and the Services of this apply that select its pods. Pure helpers; the live lookups are done
//! by the topology.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{Decision, KindRule, PLANE_ANNOTATION, Placement, Plane, builtin, key_of};
use super::references::{Key, pod_references, service_account_pull_secrets};
use super::selection::selects;
use crate::domain::capability::{CapabilityError, K8sObject};

/// Who refuses a run that fails the check, as error messages name it.
const CHECKER: &str = "the split-plane closure check";

/// One object a pod template needs on one plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Requirement {
    pub plane: Plane,
    /// The runnable, e.g. `apps/v1 Deployment shop/web`.
    pub template: String,
    pub target: Key,
    pub via: String,
}

fn rule(o: &K8sObject) -> Option<KindRule> {
    builtin(o.reference()).map(|k| k.rule)
}

/// The runnables among `objects`, with their decisions.
fn runnables<'a>(
    objects: &'a [K8sObject],
    decisions: &'a [Decision],
) -> impl Iterator<Item = (&'a K8sObject, &'a Decision)> {
    objects
        .iter()
        .zip(decisions)
        .filter(|(o, _)| rule(o) == Some(KindRule::Runnable))
}

/// The ServiceAccount a runnable's pods run as (`default` when the template names none).
fn service_account_of(runnable: &K8sObject) -> Option<Key> {
    pod_references(runnable)
        .into_iter()
        .find(|r| r.target.kind == "ServiceAccount")
        .map(|r| r.target)
}

/// What the runnables among `objects` need (non-optional references only), per plane they go
/// to: what their pod templates name, the pull secrets of a ServiceAccount declared in this
/// apply, and the Services of this apply that select their pods.
pub(super) fn requirements(objects: &[K8sObject], decisions: &[Decision]) -> Vec<Requirement> {
    let mut out = Vec::new();
    for (o, d) in runnables(objects, decisions) {
        let template = o.reference().to_string();
        let mut needs: Vec<(Key, String)> = pod_references(o)
            .into_iter()
            .filter(|r| r.required)
            .map(|r| (r.target, r.via))
            .collect();
        if let Some(sa) = service_account_of(o)
            && let Some(declared) = objects.iter().find(|x| key_of(x.reference()) == sa)
        {
            needs.extend(pull_secrets(declared));
        }
        for service in objects
            .iter()
            .filter(|x| rule(x) == Some(KindRule::SelectsPods))
        {
            if let Some(selector) = selects(service, o) {
                needs.push((
                    key_of(service.reference()),
                    format!("selects its pods: {selector}"),
                ));
            }
        }
        for (target, via) in needs {
            for plane in d.placement.planes() {
                out.push(Requirement {
                    plane: *plane,
                    template: template.clone(),
                    target: target.clone(),
                    via: via.clone(),
                });
            }
        }
    }
    out
}

/// The pull secrets `service_account` lists, each with how the pod template needs it.
fn pull_secrets(service_account: &K8sObject) -> Vec<(Key, String)> {
    let r = service_account.reference();
    let name = match &r.namespace {
        Some(ns) => format!("{ns}/{}", r.name),
        None => r.name.clone(),
    };
    service_account_pull_secrets(service_account)
        .into_iter()
        .map(|secret| (secret, format!("imagePullSecrets of ServiceAccount {name}")))
        .collect()
}

/// The ServiceAccounts runnables run as that this apply does not declare, per plane and
/// runnable: the topology reads them on that plane, live, for [`live_pull_secrets`].
pub(super) fn undeclared_service_accounts(
    objects: &[K8sObject],
    decisions: &[Decision],
) -> Vec<(Plane, String, Key)> {
    let mut out = Vec::new();
    for (o, d) in runnables(objects, decisions) {
        let Some(sa) = service_account_of(o) else {
            continue;
        };
        if objects.iter().any(|x| key_of(x.reference()) == sa) {
            continue;
        }
        for plane in d.placement.planes() {
            out.push((*plane, o.reference().to_string(), sa.clone()));
        }
    }
    out
}

/// What `template` needs on `plane` because the ServiceAccount it runs as, found live there,
/// lists image pull secrets.
pub(super) fn live_pull_secrets(
    plane: Plane,
    template: &str,
    service_account: &K8sObject,
) -> Vec<Requirement> {
    pull_secrets(service_account)
        .into_iter()
        .map(|(target, via)| Requirement {
            plane,
            template: template.to_string(),
            target,
            via,
        })
        .collect()
}

/// The error for requirements met neither by declarations nor by live objects. `declared_on`
/// says where a missing object was declared instead, so the message can point at the mistake.
pub(super) fn error(
    missing: &[Requirement],
    declared_on: &BTreeMap<Key, BTreeSet<Plane>>,
) -> CapabilityError {
    let mut by_template: Vec<(&str, Plane, Vec<String>)> = Vec::new();
    for m in missing {
        let mut item = format!("{} ({})", m.target, m.via);
        if let Some(planes) = declared_on.get(&m.target) {
            let names: Vec<&str> = planes.iter().map(|p| p.label()).collect();
            item.push_str(&format!(", declared for the {} only", names.join(" and ")));
        }
        match by_template
            .iter_mut()
            .find(|(t, p, _)| *t == m.template && *p == m.plane)
        {
            Some((_, _, items)) => items.push(item),
            None => by_template.push((&m.template, m.plane, vec![item])),
        }
    }
    let Some(((first, plane, items), others)) = by_template.split_first() else {
        return CapabilityError::InvalidObject {
            object: "<none>".into(),
            problem: "closure check failed without a missing object".into(),
        };
    };
    let mut message = format!(
        "its pod template needs {} on the {plane}, where it is neither declared by this apply nor present",
        items.join(" and ")
    );
    for (template, plane, items) in others {
        message.push_str(&format!(
            "; also {template} needs {} on the {plane}",
            items.join(" and ")
        ));
    }
    let pin = match plane {
        Plane::Control => Placement::Control,
        Plane::Data => Placement::Data,
    };
    message.push_str(&format!(
        ". Nothing was applied. Declare the missing object in the same Score as the pod template, \
         create it on the {plane} first, or annotate its declaration {PLANE_ANNOTATION}: {pin}"
    ));
    CapabilityError::Rejected {
        object: first.to_string(),
        server: format!("{CHECKER} ({plane})"),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infra::split_plane::placement::{KindOverrides, place};
    use serde_json::json;

    #[test]
    fn optional_and_implicit_references_are_not_required() {
        let web = K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [{"name": "c",
                "envFrom": [{"secretRef": {"name": "db-credentials"}},
                            {"configMapRef": {"name": "tuning", "optional": true}}]}]}}}}))
        .unwrap();
        let objects = [web];
        let decisions = place(&objects, &KindOverrides::new()).unwrap();
        let reqs = requirements(&objects, &decisions);
        assert_eq!(reqs.len(), 1, "{reqs:?}");
        assert_eq!(reqs[0].target.to_string(), "v1 Secret shop/db-credentials");
        assert_eq!(reqs[0].plane, Plane::Control);
    }

    fn targets(reqs: &[Requirement]) -> Vec<(String, String)> {
        let mut t: Vec<(String, String)> = reqs
            .iter()
            .map(|r| (r.target.to_string(), r.via.clone()))
            .collect();
        t.sort();
        t
    }

    #[test]
    fn a_mounted_claim_is_required_with_the_pod() {
        let db = K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db-data"}}]}}}}))
        .unwrap();
        let objects = [db];
        let reqs = requirements(&objects, &place(&objects, &KindOverrides::new()).unwrap());
        assert_eq!(
            targets(&reqs),
            [(
                "v1 PersistentVolumeClaim shop/db-data".to_string(),
                "volume \"data\"".to_string()
            )]
        );
        assert_eq!(reqs[0].plane, Plane::Control);
    }

    #[test]
    fn a_service_selecting_the_pods_must_be_on_their_plane() {
        let web = K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c"}]}}}}))
        .unwrap();
        let service = |pin: &str| {
            K8sObject::new(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "shop",
                             "annotations": {PLANE_ANNOTATION: pin}},
                "spec": {"selector": {"app": "web"}}}))
            .unwrap()
        };
        let objects = [web, service("data")];
        let decisions = place(&objects, &KindOverrides::new()).unwrap();
        let reqs = requirements(&objects, &decisions);
        assert_eq!(
            targets(&reqs),
            [(
                "v1 Service shop/web".to_string(),
                "selects its pods: app=web".to_string()
            )]
        );
        // Pinned to the data plane, the Service misses the pods: the error names it.
        let declared = BTreeMap::from([(reqs[0].target.clone(), BTreeSet::from([Plane::Data]))]);
        let text = error(&reqs, &declared).to_string();
        assert!(
            text.contains("needs v1 Service shop/web (selects its pods: app=web), declared for the data-plane only on the control-plane"),
            "{text}"
        );
    }

    #[test]
    fn the_pull_secrets_of_the_service_account_are_required_declared_or_live() {
        let web = |sa: &str| {
            K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"template": {"spec": {"serviceAccountName": sa,
                    "containers": [{"name": "c"}]}}}}))
            .unwrap()
        };
        let sa = K8sObject::new(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "app", "namespace": "shop"},
            "imagePullSecrets": [{"name": "registry"}]}))
        .unwrap();
        let objects = [web("app"), sa.clone()];
        let decisions = place(&objects, &KindOverrides::new()).unwrap();
        assert_eq!(
            targets(&requirements(&objects, &decisions)),
            [
                (
                    "v1 Secret shop/registry".to_string(),
                    "imagePullSecrets of ServiceAccount shop/app".to_string()
                ),
                (
                    "v1 ServiceAccount shop/app".to_string(),
                    "serviceAccountName".to_string()
                ),
            ]
        );
        assert!(undeclared_service_accounts(&objects, &decisions).is_empty());
        // Not declared here: the topology reads it live on the runnable's plane.
        let alone = [web("app")];
        let decisions = place(&alone, &KindOverrides::new()).unwrap();
        let undeclared = undeclared_service_accounts(&alone, &decisions);
        assert_eq!(undeclared.len(), 1);
        let (plane, template, key) = &undeclared[0];
        assert_eq!(
            (*plane, template.as_str(), key.to_string().as_str()),
            (
                Plane::Control,
                "apps/v1 Deployment shop/web",
                "v1 ServiceAccount shop/app"
            )
        );
        assert_eq!(
            targets(&live_pull_secrets(*plane, template, &sa)),
            [(
                "v1 Secret shop/registry".to_string(),
                "imagePullSecrets of ServiceAccount shop/app".to_string()
            )]
        );
    }

    #[test]
    fn the_error_names_each_pod_template_and_what_it_misses() {
        let req = |template: &str, name: &str, via: &str| Requirement {
            plane: Plane::Control,
            template: template.into(),
            target: Key {
                group: String::new(),
                kind: "Secret".into(),
                namespace: Some("shop".into()),
                name: name.into(),
            },
            via: via.into(),
        };
        let missing = [
            req("apps/v1 Deployment shop/web", "db-credentials", "envFrom"),
            req("batch/v1 Job shop/migrate", "admin", "env PW"),
        ];
        let elsewhere =
            BTreeMap::from([(missing[1].target.clone(), BTreeSet::from([Plane::Data]))]);
        let text = error(&missing, &elsewhere).to_string();
        assert!(
            text.starts_with("apps/v1 Deployment shop/web rejected by the split-plane closure check (control-plane): its pod template needs v1 Secret shop/db-credentials (envFrom) on the control-plane"),
            "{text}"
        );
        assert!(
            text.contains("also batch/v1 Job shop/migrate needs v1 Secret shop/admin (env PW), declared for the data-plane only"),
            "{text}"
        );
        assert!(text.contains("harmony.io/plane: control"), "{text}");
    }
}
