//! The reboot step of a role phase, told truthfully: the operator is asked to reboot the hosts
//! whose scripts or bindings changed, and — on every later run — the hosts that were asked and
//! have not been seen booting since (no fetch of their per-MAC iPXE script, no discovery
//! report). A declined reboot fails the phase with the way out.

use harmony::domain::InterpretError;
use harmony::domain::ObjectChange;
use harmony::domain::capability::{BootEvent, CapabilityError, HostBinding};
use harmony::domain::inventory::HostRole;

use super::{OkdTopology, capability_error, power_on};

/// How the reboot step ended.
pub(super) enum Reboot {
    /// Nothing to reboot, confirmed, or left to the operator with `--yes`: a detail line.
    GoOn(String),
    /// The operator declined: the failure message, with what to do.
    Declined(String),
}

fn listed(hosts: &[&HostBinding]) -> String {
    hosts
        .iter()
        .map(|b| format!("{} ({}, host {})", b.logical, b.mac, b.host))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asks for the reboot of `planned` hosts when `changed`, or of those still awaiting a boot
/// asked for by an earlier run; records each request so a later run can tell.
pub(super) async fn reboot_step<T: OkdTopology>(
    role: HostRole,
    planned: &[HostBinding],
    changed: bool,
    topology: &T,
    changes: &[ObjectChange],
) -> Result<Reboot, InterpretError> {
    let macs: Vec<_> = planned.iter().map(|b| b.mac).collect();
    let awaiting = topology
        .awaiting_boot(&macs)
        .await
        .map_err(capability_error("reading boot evidence", changes))?;
    let hosts: Vec<&HostBinding> = planned
        .iter()
        .filter(|b| changed || awaiting.contains(&b.mac))
        .collect();
    if hosts.is_empty() {
        return Ok(Reboot::GoOn(if planned.is_empty() {
            "no host to reboot".into()
        } else {
            format!(
                "every {role} host has booted since its reboot was asked for (it fetched its iPXE script, reported to discovery or registered as a Node)"
            )
        }));
    }
    // Hosts with a BMC are PXE booted by Harmony; the operator reboots the others.
    let macs: Vec<_> = hosts.iter().map(|b| b.mac).collect();
    let bmcs = power_on::with_bmc(topology, &macs);
    let booted = power_on::pxe_boot(topology, &bmcs).await;
    let lines: Vec<String> = booted.iter().map(|b| b.line.clone()).collect();
    let failed: Vec<&str> = booted
        .iter()
        .filter(|b| !b.ok)
        .map(|b| b.line.as_str())
        .collect();
    if !failed.is_empty() {
        return Ok(Reboot::Declined(format!(
            "{} {role} host(s) could not be booted through their BMC: {}; fix the BMC (address, credentials, reachability) and re-run; the other hosts go on",
            failed.len(),
            failed.join("; ")
        )));
    }
    let hosts: Vec<&HostBinding> = hosts
        .into_iter()
        .filter(|b| !bmcs.iter().any(|x| x.mac == b.mac))
        .collect();
    if hosts.is_empty() {
        return Ok(Reboot::GoOn(lines.join("; ")));
    }
    for b in &hosts {
        topology
            .record_boot_event(b.mac, BootEvent::RebootRequested)
            .await
            .map_err(capability_error("recording the reboot request", changes))?;
    }
    let list = listed(&hosts);
    let script_dir = format!("{}ipxe/", topology.base_url());
    let op = topology.operator();
    let by_bmc = if lines.is_empty() {
        String::new()
    } else {
        format!("{}; ", lines.join("; "))
    };
    if op.assumes_yes() {
        return Ok(Reboot::GoOn(format!(
            "{by_bmc}reboot confirmed with --yes: rebooting is the operator's job: reboot {list} so they PXE boot into the installer (a later run reminds you until each has fetched its script from {script_dir})"
        )));
    }
    let question = if changed {
        format!(
            "Reboot these {role} host(s) now so they PXE boot into the installer: {list}. Confirm once they are rebooting:"
        )
    } else {
        format!(
            "These {role} host(s) were asked to reboot and have still not booted (no fetch of their script from {script_dir}, no discovery report and no Node since): {list}. Reboot them now so they PXE boot into the installer; confirm once they are rebooting:"
        )
    };
    let confirmed = tokio::task::block_in_place(|| op.confirm(&question)).map_err(|e| {
        capability_error("asking the operator", changes)(CapabilityError::Unsupported {
            what: "this question".into(),
            backend: "the operator".into(),
            reason: e.to_string(),
        })
    })?;
    if confirmed {
        return Ok(Reboot::GoOn(format!(
            "{by_bmc}reboot confirmed by the operator"
        )));
    }
    Ok(Reboot::Declined(format!(
        "{by_bmc}reboot declined: the {role} host(s) {list} are reserved and scripted but not rebooted; reboot them (PXE boot first) and re-run: the run asks again until each has fetched its script from {script_dir}; or re-run with --yes when you reboot them yourself"
    )))
}
