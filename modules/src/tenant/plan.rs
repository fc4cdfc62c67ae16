//! Deciding what to change: the declaration against what the control plane holds. A pure
//! function, so idempotence is decided (and tested) without a control plane.

use harmony::domain::capability::{ProjectQuota, ProjectState, TenantState};
use harmony::domain::{ChangeAction, FieldChange, ValidationError};
use harmony_types::{Dns1123Label, RegionId};

use super::validate::{Declared, Fields};

/// A call to make on the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Create the tenant.
    Tenant,
    /// Set the tenant's cap in a region.
    Cap(RegionId, ProjectQuota),
    /// Create a project (in its namespace when one is written).
    Project(Dns1123Label, Option<Dns1123Label>),
    /// Set a project's quota in a region.
    Quota(Dns1123Label, RegionId, ProjectQuota),
}

/// One object of the report, with the call that gets it there (`None` when it is unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Planned {
    /// `control-plane Tenant acme`, `control-plane ProjectQuota acme/web eu-west`...
    pub object: String,
    /// What happens to it.
    pub action: ChangeAction,
    /// The fields that change.
    pub diff: Vec<FieldChange>,
    /// The call, unless unchanged.
    pub step: Option<Step>,
}

/// The fields of a quota as (path, value) pairs.
fn fields(q: &ProjectQuota) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        ("cpu", &q.cpu),
        ("memory", &q.memory),
        ("storage", &q.storage),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), v.clone())))
    .collect();
    out.extend(
        q.objects
            .iter()
            .map(|(k, v)| (format!("objects.{k}"), v.to_string())),
    );
    out
}

/// The field changes from `old` to `new` (a field absent from a quota is unlimited).
pub(super) fn quota_diff(old: Option<&ProjectQuota>, new: &ProjectQuota) -> Vec<FieldChange> {
    let old = old.map(fields).unwrap_or_default();
    let new = fields(new);
    let mut paths: Vec<&String> = old.iter().chain(&new).map(|(k, _)| k).collect();
    paths.sort();
    paths.dedup();
    let value = |set: &[(String, String)], path: &str| {
        set.iter().find(|(k, _)| k == path).map(|(_, v)| v.clone())
    };
    paths
        .into_iter()
        .filter_map(|path| {
            let (o, n) = (value(&old, path), value(&new, path));
            (o != n).then(|| FieldChange {
                path: path.clone(),
                old: o,
                new: n,
            })
        })
        .collect()
}

/// A quota to be set, or unchanged, as the report shows it.
fn quota(object: String, old: Option<&ProjectQuota>, new: &ProjectQuota, step: Step) -> Planned {
    let (action, step) = match old {
        Some(o) if o == new => (ChangeAction::Unchanged, None),
        Some(_) => (ChangeAction::Update, Some(step)),
        None => (ChangeAction::Create, Some(step)),
    };
    Planned {
        diff: if step.is_some() {
            quota_diff(old, new)
        } else {
            Vec::new()
        },
        object,
        action,
        step,
    }
}

/// What to do for `declared`, given the tenant (`None`: it does not exist) and its projects as
/// the control plane holds them. Refused, before any call, when an existing project has another
/// namespace than declared (a namespace cannot change).
pub(super) fn plan(
    declared: &Declared,
    current: Option<&TenantState>,
    projects: &[ProjectState],
    fields: Fields,
) -> Result<Vec<Planned>, ValidationError> {
    let t = &declared.tenant;
    let mut out = vec![Planned {
        object: format!("control-plane Tenant {t}"),
        action: if current.is_some() {
            ChangeAction::Unchanged
        } else {
            ChangeAction::Create
        },
        diff: Vec::new(),
        step: current.is_none().then_some(Step::Tenant),
    }];
    for (region, cap) in &declared.caps {
        let old = current.and_then(|c| c.caps.get(region.as_str()));
        out.push(quota(
            format!("control-plane TenantCap {t} {region}"),
            old,
            cap,
            Step::Cap(region.clone(), cap.clone()),
        ));
    }
    let mut quotas = Vec::new();
    for (i, project) in declared.projects.iter().enumerate() {
        let name = &project.name;
        let existing = projects.iter().find(|p| p.project == name.as_str());
        if let Some(e) = existing
            && e.namespace != project.effective_namespace
        {
            return Err(ValidationError::new(
                format!("{}projects[{i}].namespace", fields.prefix),
                format!(
                    "project \"{name}\" exists with namespace \"{}\", not \"{}\", and a project's namespace cannot change",
                    e.namespace, project.effective_namespace
                ),
                format!(
                    "set {}projects[{i}].namespace to \"{}\", or declare a project with another name",
                    fields.prefix, e.namespace
                ),
            ));
        }
        out.push(Planned {
            object: format!("control-plane Project {t}/{name}"),
            action: if existing.is_some() {
                ChangeAction::Unchanged
            } else {
                ChangeAction::Create
            },
            diff: if existing.is_some() {
                Vec::new()
            } else {
                vec![FieldChange {
                    path: "namespace".into(),
                    old: None,
                    new: Some(project.effective_namespace.clone()),
                }]
            },
            step: existing
                .is_none()
                .then(|| Step::Project(name.clone(), project.namespace.clone())),
        });
        for (region, q) in &project.quotas {
            let old = existing.and_then(|e| e.quotas.get(region.as_str()));
            quotas.push(quota(
                format!("control-plane ProjectQuota {t}/{name} {region}"),
                old,
                q,
                Step::Quota(name.clone(), region.clone(), q.clone()),
            ));
        }
    }
    // Quotas last: they are checked against the caps just set.
    out.extend(quotas);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::resource::{TenantProjectSpec, TenantSpec};
    use super::super::validate::check;
    use super::*;

    const FIELDS: Fields = Fields {
        tenant: "metadata.name",
        prefix: "spec.",
    };

    fn q(cpu: &str) -> ProjectQuota {
        ProjectQuota {
            cpu: Some(cpu.into()),
            ..ProjectQuota::default()
        }
    }

    fn declared() -> Declared {
        let spec = TenantSpec {
            caps: BTreeMap::from([("eu-west".to_string(), q("4"))]),
            projects: vec![TenantProjectSpec {
                name: "web".into(),
                namespace: None,
                quotas: BTreeMap::from([("eu-west".to_string(), q("1"))]),
            }],
        };
        check("acme", &spec, FIELDS).unwrap()
    }

    fn actions(planned: &[Planned]) -> Vec<(String, ChangeAction)> {
        planned
            .iter()
            .map(|p| (p.object.clone(), p.action))
            .collect()
    }

    fn held(cap: &str, quota: &str) -> (TenantState, Vec<ProjectState>) {
        (
            TenantState {
                tenant: "acme".into(),
                caps: BTreeMap::from([("eu-west".to_string(), q(cap))]),
            },
            vec![ProjectState {
                tenant: "acme".into(),
                project: "web".into(),
                namespace: "acme-web".into(),
                quotas: BTreeMap::from([("eu-west".to_string(), q(quota))]),
            }],
        )
    }

    #[test]
    fn a_new_tenant_creates_everything_tenant_first_quotas_last() {
        let planned = plan(&declared(), None, &[], FIELDS).unwrap();
        assert_eq!(
            actions(&planned),
            vec![
                (
                    "control-plane Tenant acme".to_string(),
                    ChangeAction::Create
                ),
                (
                    "control-plane TenantCap acme eu-west".to_string(),
                    ChangeAction::Create
                ),
                (
                    "control-plane Project acme/web".to_string(),
                    ChangeAction::Create
                ),
                (
                    "control-plane ProjectQuota acme/web eu-west".to_string(),
                    ChangeAction::Create
                ),
            ]
        );
        assert_eq!(planned[0].step, Some(Step::Tenant));
        assert_eq!(
            planned[2].step,
            Some(Step::Project(Dns1123Label::parse("web").unwrap(), None))
        );
        assert_eq!(planned[2].diff[0].new.as_deref(), Some("acme-web"));
    }

    #[test]
    fn what_the_control_plane_holds_already_is_unchanged_and_makes_no_call() {
        let (tenant, projects) = held("4", "1");
        let planned = plan(&declared(), Some(&tenant), &projects, FIELDS).unwrap();
        assert!(
            planned
                .iter()
                .all(|p| p.action == ChangeAction::Unchanged && p.step.is_none()),
            "{planned:?}"
        );
    }

    #[test]
    fn a_changed_cap_or_quota_is_an_update_showing_old_and_new() {
        let (tenant, projects) = held("2", "500m");
        let planned = plan(&declared(), Some(&tenant), &projects, FIELDS).unwrap();
        let by = |o: &str| planned.iter().find(|p| p.object == o).unwrap();
        let cap = by("control-plane TenantCap acme eu-west");
        assert_eq!(cap.action, ChangeAction::Update);
        assert_eq!(
            cap.diff,
            vec![FieldChange {
                path: "cpu".into(),
                old: Some("2".into()),
                new: Some("4".into())
            }]
        );
        let quota = by("control-plane ProjectQuota acme/web eu-west");
        assert_eq!(quota.action, ChangeAction::Update);
        assert!(
            matches!(&quota.step, Some(Step::Quota(p, r, q)) if p.as_str() == "web" && r.as_str() == "eu-west" && q.cpu.as_deref() == Some("1"))
        );
        assert_eq!(
            by("control-plane Tenant acme").action,
            ChangeAction::Unchanged
        );
        assert_eq!(
            by("control-plane Project acme/web").action,
            ChangeAction::Unchanged
        );
    }

    #[test]
    fn an_existing_project_in_another_namespace_is_refused_before_any_call() {
        let (tenant, mut projects) = held("4", "1");
        projects[0].namespace = "web-legacy".into();
        let e = plan(&declared(), Some(&tenant), &projects, FIELDS).unwrap_err();
        assert_eq!(e.field, "spec.projects[0].namespace");
        assert!(e.problem.contains("\"web-legacy\""), "{e}");
        assert!(e.fix.contains("to \"web-legacy\""), "{e}");
    }

    #[test]
    fn a_removed_quota_field_shows_as_unlimited() {
        let old = ProjectQuota {
            cpu: Some("1".into()),
            objects: BTreeMap::from([("pods".to_string(), 10)]),
            ..ProjectQuota::default()
        };
        let diff = quota_diff(Some(&old), &q("1"));
        assert_eq!(
            diff,
            vec![FieldChange {
                path: "objects.pods".into(),
                old: Some("10".into()),
                new: None
            }]
        );
    }
}
