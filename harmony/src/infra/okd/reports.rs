//! What the discovery endpoint does with a valid report: the provisioning network is hostile,
//! so a report is taken only from the address dnsmasq leased to one of its MACs, and a report
//! that would change a known host's MACs or identity is held for the operator, never applied
//! silently (docs/modules/okd.md, "What the provisioning network is trusted with").

use std::net::IpAddr;
use std::path::Path;

use harmony_types::DiscoveryReport;

use super::super::dnsmasq::read_leases;
use super::super::http_boot::{ReportOutcome, ReportRefused};
use super::super::inventory_sqlite::{SqliteInventory, identity_change, now_ms};
use crate::domain::capability::{BootEvent, BootPhase};

/// Takes `report`, sent from `client`: refused unless `lease_file` (dnsmasq's) holds a lease
/// of `client` to one of its MACs; held when it would change what the inventory knows of a
/// host's MACs or serial, or claims another host's MAC; else recorded, with a boot event for
/// each MAC (a report proves the host booted).
pub(super) fn take_report(
    inventory: &SqliteInventory,
    lease_file: &Path,
    client: IpAddr,
    report: DiscoveryReport,
) -> Result<ReportOutcome, ReportRefused> {
    let leases = read_leases(lease_file).map_err(|e| ReportRefused::Invalid(e.to_string()))?;
    let leased = leases
        .iter()
        .any(|l| IpAddr::V4(l.ip.addr()) == client && report.host.macs.contains(&l.mac));
    if !leased {
        return Err(ReportRefused::Forbidden(format!(
            "{client} holds no DHCP lease for any of the reported MACs; reports are taken only \
             from the address Harmony's dnsmasq leased to the machine (boot it into discovery \
             through PXE)"
        )));
    }
    // The boot MAC is the one leased to the sender: its timeline reached discovery.
    if let Some(lease) = leases
        .iter()
        .find(|l| IpAddr::V4(l.ip.addr()) == client && report.host.macs.contains(&l.mac))
        && let Err(e) =
            inventory.record_boot_phase_sync(lease.mac, BootPhase::DiscoveryReported, now_ms())
    {
        log::warn!("discovery: cannot record the report of {}: {e}", lease.mac);
    }
    let host = report.into_host();
    let known = inventory
        .hosts_read_only()
        .map_err(|e| ReportRefused::Invalid(e.to_string()))?;
    if let Some(difference) = identity_change(&host, &known) {
        inventory
            .hold_report_sync(&host, &client.to_string(), &difference)
            .map_err(|e| ReportRefused::Invalid(e.to_string()))?;
        return Ok(ReportOutcome::Held(difference));
    }
    inventory
        .record_host_sync(&host)
        .map_err(|e| ReportRefused::Invalid(e.to_string()))?;
    for mac in &host.macs {
        inventory
            .record_boot_event_sync(*mac, BootEvent::Booted)
            .map_err(|e| ReportRefused::Invalid(e.to_string()))?;
    }
    Ok(ReportOutcome::Recorded)
}
