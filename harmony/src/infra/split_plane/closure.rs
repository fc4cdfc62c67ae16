//! The closure check: every object a pod template needs must be on the plane where the pod runs,
//! declared in the same apply or already present. Pure helpers; the live lookups are done by the
//! topology.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{Decision, KindRule, PLANE_ANNOTATION, Placement, Plane, builtin};
use super::references::{Key, pod_references};
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

/// What the runnables among `objects` need (non-optional references only), per plane they go to.
pub(super) fn requirements(objects: &[K8sObject], decisions: &[Decision]) -> Vec<Requirement> {
    let mut out = Vec::new();
    for (o, d) in objects.iter().zip(decisions) {
        if builtin(o.reference()).map(|k| k.rule) != Some(KindRule::Runnable) {
            continue;
        }
        for r in pod_references(o).into_iter().filter(|r| r.required) {
            for plane in d.placement.planes() {
                out.push(Requirement {
                    plane: *plane,
                    template: o.reference().to_string(),
                    target: r.target.clone(),
                    via: r.via.clone(),
                });
            }
        }
    }
    out
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
