//! `RegionSiteTopology`: a region's cluster reached directly (its kubeconfig), together with the
//! control plane that administers regions, so a Score can both apply objects to the cluster and
//! create the region its agent will serve (the agent rollout), and declare tenants
//! (`TenantAdmin`, through the same admin client).

use async_trait::async_trait;
use std::time::Duration;

use crate::domain::capability::{
    ApplyFailure, ApplyOptions, BootstrapGrant, CapabilityError, K8sClient, K8sObject, ObjectRef,
    RegionAdmin, RegionState, TenantAdmin, WaitCondition, WaitOutcome, ZoneState,
};
use crate::domain::{ExecutionMode, ObjectChange, PreparationError, PreparationOutcome, Topology};
use crate::infra::control_plane::ControlPlaneClient;
use crate::infra::kube::K8sTopology;
use harmony_types::{RegionId, ZoneId};

/// A site's direct topology (`K8sTopology` by default; any `Topology + K8sClient`, borrowed
/// ones included) plus the control plane's admin client: `K8sClient` goes to the site,
/// `RegionAdmin` and `TenantAdmin` to the control plane. Its name and mode are the site's.
pub struct RegionSiteTopology<S = K8sTopology, A = ControlPlaneClient> {
    site: S,
    admin: A,
}

impl<S, A> RegionSiteTopology<S, A> {
    /// The site `site` (applied to directly) administered as a region through `admin` (usually
    /// a [`ControlPlaneClient`] holding the admin token).
    pub fn new(site: S, admin: A) -> Self {
        Self { site, admin }
    }

    /// The site's own topology.
    pub fn site(&self) -> &S {
        &self.site
    }

    /// The region administrator (the control plane's client).
    pub fn admin(&self) -> &A {
        &self.admin
    }
}

#[async_trait]
impl<S: Topology, A: Send + Sync> Topology for RegionSiteTopology<S, A> {
    fn name(&self) -> &str {
        self.site.name()
    }

    fn mode(&self) -> ExecutionMode {
        self.site.mode()
    }

    /// Prepares the site; the control plane is first contacted by the Score that needs it.
    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        self.site.ensure_ready().await
    }
}

#[async_trait]
impl<S: K8sClient, A: Send + Sync> K8sClient for RegionSiteTopology<S, A> {
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        self.site.apply(objects, options).await
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        self.site.get(object).await
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        self.site.delete(object).await
    }

    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        self.site.wait_for(object, condition, timeout).await
    }

    fn apply_progress(&self, what: &str) -> String {
        self.site.apply_progress(what)
    }
}

#[async_trait]
impl<S: Send + Sync, A: RegionAdmin> RegionAdmin for RegionSiteTopology<S, A> {
    fn control_plane_url(&self) -> &str {
        self.admin.control_plane_url()
    }

    async fn create_region(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        self.admin.create_region(region, zone).await
    }

    async fn add_zone(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        self.admin.add_zone(region, zone).await
    }

    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<BootstrapGrant, CapabilityError> {
        self.admin.new_bootstrap_token(region, zone).await
    }

    async fn region_state(
        &self,
        region: &RegionId,
    ) -> Result<Option<RegionState>, CapabilityError> {
        self.admin.region_state(region).await
    }

    async fn zone_state(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<ZoneState>, CapabilityError> {
        self.admin.zone_state(region, zone).await
    }

    async fn decommission_region(&self, region: &RegionId) -> Result<(), CapabilityError> {
        self.admin.decommission_region(region).await
    }
}

crate::forward_tenant_admin!([S: Send + Sync, A: TenantAdmin] RegionSiteTopology<S, A>, |s| s.admin);
