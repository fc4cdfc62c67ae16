//! `TenantAdminTopology`: the control plane's admin client alone, as a topology offering
//! [`TenantAdmin`], for Scores that only declare tenants and projects (no cluster is touched).

use async_trait::async_trait;

use crate::domain::capability::{
    CapabilityError, ProjectQuota, ProjectState, TenantAdmin, TenantState,
};
use crate::domain::{ExecutionMode, PreparationError, PreparationOutcome, Topology};
use crate::infra::agent::ControlPlaneClient;
use harmony_types::{Dns1123Label, RegionId};

/// The control plane reached with its admin client (`ControlPlaneClient` by default, borrowed
/// ones included): `TenantAdmin` and nothing else. Named `control-plane`; applies by default.
pub struct TenantAdminTopology<A = ControlPlaneClient> {
    admin: A,
    mode: ExecutionMode,
}

impl<A> TenantAdminTopology<A> {
    /// Tenants administered through `admin` (a [`ControlPlaneClient`] holding the admin token),
    /// in apply mode.
    pub fn new(admin: A) -> Self {
        Self {
            admin,
            mode: ExecutionMode::Apply,
        }
    }

    /// The same topology in `mode`: in plan mode Scores read the control plane and change
    /// nothing; in render mode they do not contact it.
    pub fn with_mode(mut self, mode: ExecutionMode) -> Self {
        self.mode = mode;
        self
    }

    /// The tenant administrator (the control plane's client).
    pub fn admin(&self) -> &A {
        &self.admin
    }
}

#[async_trait]
impl<A: Send + Sync> Topology for TenantAdminTopology<A> {
    fn name(&self) -> &str {
        "control-plane"
    }

    fn mode(&self) -> ExecutionMode {
        self.mode
    }

    /// Nothing to prepare: the control plane is first contacted by the Score that needs it.
    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        Ok(PreparationOutcome::Noop)
    }
}

#[async_trait]
impl<A: TenantAdmin> TenantAdmin for TenantAdminTopology<A> {
    fn tenancy_url(&self) -> &str {
        self.admin.tenancy_url()
    }

    async fn tenant(&self, tenant: &Dns1123Label) -> Result<Option<TenantState>, CapabilityError> {
        self.admin.tenant(tenant).await
    }

    async fn ensure_tenant(&self, tenant: &Dns1123Label) -> Result<bool, CapabilityError> {
        self.admin.ensure_tenant(tenant).await
    }

    async fn set_tenant_cap(
        &self,
        tenant: &Dns1123Label,
        region: &RegionId,
        cap: &ProjectQuota,
    ) -> Result<(), CapabilityError> {
        self.admin.set_tenant_cap(tenant, region, cap).await
    }

    async fn ensure_project(
        &self,
        tenant: &Dns1123Label,
        project: &Dns1123Label,
        namespace: Option<&Dns1123Label>,
    ) -> Result<bool, CapabilityError> {
        self.admin.ensure_project(tenant, project, namespace).await
    }

    async fn set_project_quota(
        &self,
        tenant: &Dns1123Label,
        project: &Dns1123Label,
        region: &RegionId,
        quota: &ProjectQuota,
    ) -> Result<(), CapabilityError> {
        self.admin
            .set_project_quota(tenant, project, region, quota)
            .await
    }

    async fn projects(&self, tenant: &Dns1123Label) -> Result<Vec<ProjectState>, CapabilityError> {
        self.admin.projects(tenant).await
    }
}
