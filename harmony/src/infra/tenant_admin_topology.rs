//! `TenantAdminTopology`: the control plane's admin client alone, as a topology offering
//! [`TenantAdmin`], for Scores that only declare tenants and projects (no cluster is touched).

use async_trait::async_trait;

use crate::domain::capability::TenantAdmin;
use crate::domain::{ExecutionMode, PreparationError, PreparationOutcome, Topology};
use crate::infra::control_plane::ControlPlaneClient;

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

crate::forward_tenant_admin!([A: TenantAdmin] TenantAdminTopology<A>, |s| s.admin);
