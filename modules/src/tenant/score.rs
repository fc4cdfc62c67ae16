//! `TenantScore`: a tenant, its caps and its projects with their quotas, declared on the control
//! plane through `TenantAdmin`.

use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

use harmony::domain::capability::{CapabilityError, TenantAdmin};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ChangeAction, ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, Score, Topology,
    ValidationError, report_progress,
};
use harmony_types::Version;

use super::plan::{Planned, Step, plan};
use super::resource::{Tenant, TenantProjectSpec, TenantSpec};
use super::validate::{Declared, Fields, check};

/// A tenant on the control plane, with its cap per region and its projects with their quota per
/// region, declared through the topology's [`TenantAdmin`] capability.
///
/// Idempotent: it reads the tenant and its projects first, creates what is missing, updates
/// caps and quotas that differ, and reports what it found as it should be as `unchanged`. It
/// adds and updates, never removes: caps, projects and quotas it does not name stay as they are
/// (the control plane has no route to remove them). Everything is checked before the first call
/// (names, quantities, and that an existing project keeps its namespace); the control plane
/// decides whether quotas fit under the caps (a 422 naming the cap, the resource and the
/// figures). Quotas are set after caps; one refused for the cap is tried again after the others,
/// so quota moves between projects converge. On a topology without `TenantAdmin` it does not
/// compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantScore {
    tenant: String,
    /// Shared, so `create_interpret` (a clone) copies a pointer, not the projects; the builders
    /// copy it only if a clone already shares it.
    spec: Arc<TenantSpec>,
    fields: Fields,
}

impl TenantScore {
    /// Tenant `tenant` (a DNS-1123 label), with no cap or project yet.
    pub fn new(tenant: impl Into<String>) -> Self {
        Self::from_spec(tenant, TenantSpec::default())
    }

    /// Tenant `tenant` as `spec` declares it (the `Tenant` resource's spec).
    pub fn from_spec(tenant: impl Into<String>, spec: TenantSpec) -> Self {
        Self {
            tenant: tenant.into(),
            spec: Arc::new(spec),
            fields: Fields {
                tenant: "tenant",
                prefix: "",
            },
        }
    }

    /// The Score a `Tenant` resource asks for: the tenant is the resource's name, and errors
    /// name the resource's fields (`metadata.name`, `spec.projects[0].quotas...`).
    pub fn from_resource(resource: &Tenant) -> Self {
        Self {
            fields: Fields {
                tenant: "metadata.name",
                prefix: "spec.",
            },
            ..Self::from_spec(
                resource.metadata.name.clone().unwrap_or_default(),
                resource.spec.clone(),
            )
        }
    }

    /// The tenant's cap in `region`: the most its projects' quotas there may add up to.
    pub fn with_cap(
        mut self,
        region: impl Into<String>,
        cap: harmony::domain::capability::ProjectQuota,
    ) -> Self {
        Arc::make_mut(&mut self.spec)
            .caps
            .insert(region.into(), cap);
        self
    }

    /// A project of the tenant (its namespace and quota per region).
    pub fn with_project(mut self, project: TenantProjectSpec) -> Self {
        Arc::make_mut(&mut self.spec).projects.push(project);
        self
    }

    /// The tenant's name.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    fn declared(&self) -> Result<Declared, ValidationError> {
        check(&self.tenant, &self.spec, self.fields)
    }

    fn failed(&self, action: &str, applied: &[ObjectChange], e: CapabilityError) -> InterpretError {
        InterpretError::Capability {
            action: format!("{action} for tenant {}", self.tenant),
            applied: applied.to_vec(),
            source: e,
        }
    }
}

impl<T: Topology + TenantAdmin> Score<T> for TenantScore {
    fn name(&self) -> String {
        format!("Tenant {}", self.tenant)
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> Value {
        json!({"tenant": self.tenant, "spec": *self.spec})
    }

    fn validate(&self) -> Result<(), ValidationError> {
        self.declared().map(|_| ())
    }
}

/// Makes the call `step` stands for: `false` when it found the tenant or project already
/// there (created meanwhile by someone else).
async fn call(
    admin: &impl TenantAdmin,
    declared: &Declared,
    step: &Step,
) -> Result<bool, CapabilityError> {
    let t = &declared.tenant;
    match step {
        Step::Tenant => admin.ensure_tenant(t).await,
        Step::Cap(region, cap) => admin.set_tenant_cap(t, region, cap).await.map(|()| true),
        Step::Project(project, namespace) => {
            admin.ensure_project(t, project, namespace.as_ref()).await
        }
        Step::Quota(project, region, quota) => admin
            .set_project_quota(t, project, region, quota)
            .await
            .map(|()| true),
    }
}

fn change(p: &Planned, location: &str) -> ObjectChange {
    ObjectChange {
        object: p.object.clone(),
        action: p.action,
        location: Some(location.to_string()),
        diff: p.diff.clone(),
        status: None,
    }
}

/// What was found already there: unchanged, no diff.
fn found(p: &Planned, location: &str) -> ObjectChange {
    ObjectChange {
        action: ChangeAction::Unchanged,
        diff: Vec::new(),
        ..change(p, location)
    }
}

#[async_trait]
impl<T: Topology + TenantAdmin> Interpret<T> for TenantScore {
    fn name(&self) -> InterpretName {
        InterpretName("Tenant")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(
        &self,
        _inventory: &Inventory,
        topology: &T,
    ) -> Result<Outcome, InterpretError> {
        let declared = self.declared()?;
        let mode = topology.mode();
        let url = topology.tenancy_url().to_string();
        let (current, projects) = if mode == ExecutionMode::Render {
            (None, Vec::new())
        } else {
            let current = topology
                .tenant(&declared.tenant)
                .await
                .map_err(|e| self.failed("reading the tenant", &[], e))?;
            let projects = match &current {
                Some(_) => topology
                    .projects(&declared.tenant)
                    .await
                    .map_err(|e| self.failed("reading the projects", &[], e))?,
                None => Vec::new(),
            };
            (current, projects)
        };
        let planned = plan(&declared, current.as_ref(), &projects, self.fields)?;
        if mode != ExecutionMode::Apply {
            return Ok(Outcome::from_changes(
                planned.iter().map(|p| change(p, &url)).collect(),
            ));
        }
        // Reported in the plan's order, whatever order the calls succeeded in.
        let mut done: Vec<(usize, ObjectChange)> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        for (i, p) in planned.iter().enumerate() {
            match p.step {
                None => done.push((i, change(p, &url))),
                Some(_) => pending.push(i),
            }
        }
        let applied = |done: &[(usize, ObjectChange)]| -> Vec<ObjectChange> {
            let mut sorted = done.to_vec();
            sorted.sort_by_key(|(i, _)| *i);
            sorted.into_iter().map(|(_, c)| c).collect()
        };
        // Each pass makes every pending call; a quota refused for the cap (another project's
        // quota may be lowered later in the same pass) is tried again while passes progress.
        loop {
            let mut refused = Vec::new();
            let before = pending.len();
            for i in pending {
                let p = &planned[i];
                let Some(step) = &p.step else { continue };
                report_progress(format!("{} {}", verb(p.action), p.object));
                match call(topology, &declared, step).await {
                    Ok(true) => done.push((i, change(p, &url))),
                    Ok(false) => done.push((i, found(p, &url))),
                    Err(e @ CapabilityError::Rejected { .. })
                        if matches!(step, Step::Quota(..)) =>
                    {
                        refused.push((i, e));
                    }
                    Err(e) => {
                        let action = format!("{} {}", verb(p.action), p.object);
                        return Err(self.failed(&action, &applied(&done), e));
                    }
                }
            }
            if refused.is_empty() {
                break;
            }
            if refused.len() == before {
                let (i, e) = refused.swap_remove(0);
                let action = format!("{} {}", verb(planned[i].action), planned[i].object);
                return Err(self.failed(&action, &applied(&done), e));
            }
            pending = refused.into_iter().map(|(i, _)| i).collect();
        }
        Ok(Outcome::from_changes(applied(&done)))
    }
}

fn verb(action: ChangeAction) -> &'static str {
    match action {
        ChangeAction::Create => "creating",
        ChangeAction::Delete => "deleting",
        ChangeAction::Update | ChangeAction::Unchanged => "updating",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builder_on_a_shared_score_leaves_the_other_copy_as_it_was() {
        let score = TenantScore::new("acme");
        let interpret_copy = score.clone();
        assert!(Arc::ptr_eq(&score.spec, &interpret_copy.spec));
        let grown = score.with_project(TenantProjectSpec {
            name: "web".into(),
            ..Default::default()
        });
        assert_eq!(grown.spec.projects.len(), 1);
        assert!(interpret_copy.spec.projects.is_empty());
    }
}
