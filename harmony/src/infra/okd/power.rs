//! [`PowerControl`] for [`HAClusterTopology`]: the `--bmc` hosts, through Redfish.

use async_trait::async_trait;

use super::{HAClusterTopology, HaClusterError};
use crate::domain::capability::{
    BootOverride, CapabilityError, HostBmc, PowerChange, PowerControl, PowerState, PowerTimeouts,
};
use crate::domain::{RunContext, ValidationError};
use crate::infra::redfish::{RedfishPower, RedfishSettings};

/// The Redfish client for the run's BMC hosts (`--bmc` and the roles file's; none without
/// one), after checking them: one BMC per host, one host per BMC system, a readable CA file.
pub(super) fn client(
    ctx: &RunContext,
    bmcs: &[HostBmc],
) -> Result<Option<RedfishPower>, HaClusterError> {
    if bmcs.is_empty() {
        return Ok(None);
    }
    HostBmc::check_unique(bmcs)
        .map_err(|e| ValidationError::new("--bmc", e, "give each host one BMC system"))?;
    let settings = RedfishSettings {
        ca_file: ctx.bmc_ca_file.clone(),
        insecure: ctx.bmc_insecure,
        ..RedfishSettings::default()
    };
    Ok(Some(RedfishPower::new(&settings)?))
}

impl HAClusterTopology {
    fn redfish(&self, host: &HostBmc) -> Result<&RedfishPower, CapabilityError> {
        self.power.as_ref().ok_or_else(|| CapabilityError::Unsupported {
            what: format!("powering host {}", host.mac),
            backend: format!("topology {}", self.layout.cluster_name),
            reason: "no --bmc was given; give the host's BMC with --bmc MAC=ADDRESS,credentials=SOURCE".into(),
        })
    }
}

#[async_trait]
impl PowerControl for HAClusterTopology {
    fn host_bmcs(&self) -> &[HostBmc] {
        &self.bmcs
    }

    async fn power_state(&self, bmc: &HostBmc) -> Result<PowerState, CapabilityError> {
        self.redfish(bmc)?.power_state(bmc).await
    }

    async fn power_on(&self, bmc: &HostBmc) -> Result<PowerChange, CapabilityError> {
        self.redfish(bmc)?.power_on(bmc).await
    }

    async fn power_off(
        &self,
        bmc: &HostBmc,
        timeouts: PowerTimeouts,
    ) -> Result<PowerChange, CapabilityError> {
        self.redfish(bmc)?.power_off(bmc, timeouts).await
    }

    async fn power_cycle(&self, bmc: &HostBmc) -> Result<PowerChange, CapabilityError> {
        self.redfish(bmc)?.power_cycle(bmc).await
    }

    async fn boot_from_network_once(&self, bmc: &HostBmc) -> Result<BootOverride, CapabilityError> {
        self.redfish(bmc)?.boot_from_network_once(bmc).await
    }
}
