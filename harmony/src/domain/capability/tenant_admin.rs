//! The tenant administration capability: make sure a tenant and its projects exist on the
//! control plane, set the tenant's cap and each project's quota per region, and read them back.
//!
//! A Score that declares tenants (`TenantScore`) needs it; a topology offers it when it can
//! reach the control plane's admin API. Traits and data only: the adapter over the control
//! plane's HTTP API lives in `infra::control_plane`.

use async_trait::async_trait;
use std::collections::BTreeMap;

use super::CapabilityError;
pub use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_types::{Dns1123Label, RegionId};

/// A tenant as the control plane holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantState {
    /// The tenant.
    pub tenant: String,
    /// Its cap per region: the most its projects' quotas there may add up to.
    pub caps: BTreeMap<String, ProjectQuota>,
}

/// A project as the control plane holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectState {
    /// Its tenant.
    pub tenant: String,
    /// The project.
    pub project: String,
    /// Its namespace in every region.
    pub namespace: String,
    /// Its quota per region (it deploys only where it has one).
    pub quotas: BTreeMap<String, ProjectQuota>,
}

/// Administer tenants and their projects on a control plane.
///
/// Errors are [`CapabilityError`]s of the kind the control plane answered (a refused admin token
/// is `Forbidden`, an unknown tenant `NotFound`, a quota over the tenant's cap `Rejected` with
/// the control plane's message naming the cap), never carrying a token.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot administer tenants (`TenantAdmin`)",
    label = "this Score needs a topology that implements `TenantAdmin` (it declares tenants and projects on the control plane)",
    note = "use the control plane's admin client as a topology: `TenantAdminTopology::new(control_plane)`, pair a site with it: `RegionSiteTopology::new(topology, control_plane)`, or implement `TenantAdmin` for `{Self}`"
)]
pub trait TenantAdmin: Send + Sync {
    /// The control plane's URL: where tenants are administered (named in reports).
    fn tenancy_url(&self) -> &str;

    /// The tenant with its caps; `None` when it does not exist.
    async fn tenant(&self, tenant: &Dns1123Label) -> Result<Option<TenantState>, CapabilityError>;

    /// Creates `tenant` when missing: `true` when it was created, `false` when it existed.
    async fn ensure_tenant(&self, tenant: &Dns1123Label) -> Result<bool, CapabilityError>;

    /// Sets `tenant`'s cap in `region`.
    async fn set_tenant_cap(
        &self,
        tenant: &Dns1123Label,
        region: &RegionId,
        cap: &ProjectQuota,
    ) -> Result<(), CapabilityError>;

    /// Creates `project` of `tenant` when missing, in `namespace` (`<tenant>-<project>` when
    /// `None`): `true` when it was created, `false` when it existed (its namespace unchanged).
    async fn ensure_project(
        &self,
        tenant: &Dns1123Label,
        project: &Dns1123Label,
        namespace: Option<&Dns1123Label>,
    ) -> Result<bool, CapabilityError>;

    /// Sets `project`'s quota in `region`; refused when the tenant's projects' quotas there
    /// would exceed its cap.
    async fn set_project_quota(
        &self,
        tenant: &Dns1123Label,
        project: &Dns1123Label,
        region: &RegionId,
        quota: &ProjectQuota,
    ) -> Result<(), CapabilityError>;

    /// Every project of `tenant`, by name.
    async fn projects(&self, tenant: &Dns1123Label) -> Result<Vec<ProjectState>, CapabilityError>;
}

/// Implements [`TenantAdmin`] for a type by forwarding every call to the administrator that
/// `|s| expr` reaches from `s` (`&Self`): one copy of the forwarding for every topology that
/// carries an administrator, and for references.
///
/// `forward_tenant_admin!([<A: TenantAdmin>] MyTopology<A>, |s| s.admin);`
#[macro_export]
macro_rules! forward_tenant_admin {
    ([$($generics:tt)*] $ty:ty, |$s:ident| $admin:expr) => {
        #[async_trait::async_trait]
        impl<$($generics)*> $crate::domain::capability::TenantAdmin for $ty {
            fn tenancy_url(&self) -> &str {
                let $s = self;
                ($admin).tenancy_url()
            }

            async fn tenant(
                &self,
                tenant: &$crate::types::Dns1123Label,
            ) -> Result<
                Option<$crate::domain::capability::TenantState>,
                $crate::domain::capability::CapabilityError,
            > {
                let $s = self;
                ($admin).tenant(tenant).await
            }

            async fn ensure_tenant(
                &self,
                tenant: &$crate::types::Dns1123Label,
            ) -> Result<bool, $crate::domain::capability::CapabilityError> {
                let $s = self;
                ($admin).ensure_tenant(tenant).await
            }

            async fn set_tenant_cap(
                &self,
                tenant: &$crate::types::Dns1123Label,
                region: &$crate::types::RegionId,
                cap: &$crate::domain::capability::ProjectQuota,
            ) -> Result<(), $crate::domain::capability::CapabilityError> {
                let $s = self;
                ($admin).set_tenant_cap(tenant, region, cap).await
            }

            async fn ensure_project(
                &self,
                tenant: &$crate::types::Dns1123Label,
                project: &$crate::types::Dns1123Label,
                namespace: Option<&$crate::types::Dns1123Label>,
            ) -> Result<bool, $crate::domain::capability::CapabilityError> {
                let $s = self;
                ($admin).ensure_project(tenant, project, namespace).await
            }

            async fn set_project_quota(
                &self,
                tenant: &$crate::types::Dns1123Label,
                project: &$crate::types::Dns1123Label,
                region: &$crate::types::RegionId,
                quota: &$crate::domain::capability::ProjectQuota,
            ) -> Result<(), $crate::domain::capability::CapabilityError> {
                let $s = self;
                ($admin)
                    .set_project_quota(tenant, project, region, quota)
                    .await
            }

            async fn projects(
                &self,
                tenant: &$crate::types::Dns1123Label,
            ) -> Result<
                Vec<$crate::domain::capability::ProjectState>,
                $crate::domain::capability::CapabilityError,
            > {
                let $s = self;
                ($admin).projects(tenant).await
            }
        }
    };
}

// A borrowed tenant administrator is one.
forward_tenant_admin!([A: TenantAdmin + ?Sized] &A, |s| **s);
