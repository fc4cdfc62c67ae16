//! The host-inventory capability: discovered machines, their roles and their logical hosts,
//! persisted so a second run sees what the first one found and decided.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use harmony_types::{HostName, Id, MacAddress};

use super::CapabilityError;
use super::timeline::{BootPhase, HostTimeline};
use crate::domain::inventory::{HostRole, PhysicalHost, RoleAssignment};
use crate::domain::outcome::ObjectChange;

/// A physical host bound to a logical host of the cluster, through the MAC it boots from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostBinding {
    /// The physical host's id.
    pub host: Id,
    /// The role of the logical host (and so of the physical host).
    pub role: HostRole,
    /// The logical host's short name, e.g. `worker0`.
    pub logical: HostName,
    /// The MAC the host PXE-boots from.
    pub mac: MacAddress,
}

/// What was seen of a host's boot, kept so a re-run knows whether a requested reboot happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootEvent {
    /// The operator was asked to reboot the host (or told to, with `--yes`).
    RebootRequested,
    /// The host was seen booting: it fetched its per-MAC iPXE script, reported to discovery or
    /// registered as a Node.
    Booted,
    /// The host was taken out of service (the bootstrap host, once the control plane is
    /// Ready), so later runs leave it out; a new reboot request puts it back in service.
    Retired,
}

/// A discovery report Harmony did not apply because it would change a known host's MACs or
/// identity (or claims another host's MAC): kept for the operator, who accepts it or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldReport {
    /// The host as reported (boot MAC first).
    pub reported: PhysicalHost,
    /// The address the report came from.
    pub client: String,
    /// What it would change, in words: `MACs 52:54:00:.. -> 52:54:00:..`, `serial A -> B`,
    /// `MAC 52:54:00:.. belongs to host X`.
    pub difference: String,
}

/// Where discovered hosts, role assignments and bindings are kept.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no host inventory (`HostInventory`)",
    label = "this Score needs a topology that implements `HostInventory` (it reads discovered hosts and records their roles and bindings)",
    note = "use a bare-metal topology that keeps an inventory: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`, backed by SqliteInventory); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) have none; or implement `HostInventory` for `{Self}`"
)]
pub trait HostInventory: Send + Sync {
    /// Every known host, sorted by id.
    async fn known_hosts(&self) -> Result<Vec<PhysicalHost>, CapabilityError>;

    /// Adds a host or updates its facts (keyed by id).
    async fn record_host(&self, host: &PhysicalHost) -> Result<ObjectChange, CapabilityError>;

    /// Every role assignment, sorted by host id.
    async fn role_assignments(&self) -> Result<Vec<RoleAssignment>, CapabilityError>;

    /// Gives a known host a role; fails when it already has another one.
    async fn assign_role(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<ObjectChange, CapabilityError>;

    /// Every binding, sorted by logical host name.
    async fn host_bindings(&self) -> Result<Vec<HostBinding>, CapabilityError>;

    /// Records a binding; re-recording the same binding is `unchanged`, and binding a host or a
    /// logical host that is already bound to something else fails.
    async fn bind_host(&self, binding: &HostBinding) -> Result<ObjectChange, CapabilityError>;

    /// Records `event` for the host that boots from `mac`, at the current time.
    async fn record_boot_event(
        &self,
        mac: MacAddress,
        event: BootEvent,
    ) -> Result<(), CapabilityError>;

    /// Records that the host booting from `mac` reached `phase` at `at_ms` (milliseconds since
    /// the Unix epoch): its boot timeline.
    async fn record_boot_phase(
        &self,
        mac: MacAddress,
        phase: BootPhase,
        at_ms: i64,
    ) -> Result<(), CapabilityError>;

    /// The boot timeline of each host of `macs`, in `macs`' order.
    async fn timelines(&self, macs: &[MacAddress]) -> Result<Vec<HostTimeline>, CapabilityError>;

    /// The MACs among `macs` whose host was asked to reboot and has not been seen booting since.
    async fn awaiting_boot(&self, macs: &[MacAddress]) -> Result<Vec<MacAddress>, CapabilityError>;

    /// The MACs among `macs` whose host was retired and not asked to reboot since.
    async fn retired(&self, macs: &[MacAddress]) -> Result<Vec<MacAddress>, CapabilityError>;

    /// Discovery reports held for the operator (see [`HeldReport`]), oldest first, one per
    /// reported host id (a newer report of the same id replaces the older).
    async fn held_reports(&self) -> Result<Vec<HeldReport>, CapabilityError>;

    /// Applies the held report of host `id` (the operator accepted the difference): the host's
    /// facts become the reported ones and the report is no longer held.
    async fn accept_held_report(&self, id: &Id) -> Result<ObjectChange, CapabilityError>;
}
