//! The reboot step of a role phase, told truthfully: the operator is asked to reboot the hosts
//! whose scripts or bindings changed, and — on every later run — the hosts that were asked and
//! have not been seen booting since (no fetch of their per-MAC iPXE script, no discovery
//! report). A declined reboot fails the phase with the way out.

use harmony::domain::InterpretError;
use harmony::domain::ObjectChange;
use harmony::domain::capability::{BootEvent, CapabilityError, HostBinding};
use harmony::domain::inventory::HostRole;

use super::{OkdTopology, capability_error};

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
    for b in &hosts {
        topology
            .record_boot_event(b.mac, BootEvent::RebootRequested)
            .await
            .map_err(capability_error("recording the reboot request", changes))?;
    }
    let list = listed(&hosts);
    let script_dir = format!("{}ipxe/", topology.base_url());
    let op = topology.operator();
    if op.assumes_yes() {
        return Ok(Reboot::GoOn(format!(
            "reboot confirmed with --yes: rebooting is the operator's job: reboot {list} so they PXE boot into the installer (a later run reminds you until each has fetched its script from {script_dir})"
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
        return Ok(Reboot::GoOn("reboot confirmed by the operator".into()));
    }
    Ok(Reboot::Declined(format!(
        "reboot declined: the {role} host(s) {list} are reserved and scripted but not rebooted; reboot them (PXE boot first) and re-run: the run asks again until each has fetched its script from {script_dir}; or re-run with --yes when you reboot them yourself"
    )))
}
