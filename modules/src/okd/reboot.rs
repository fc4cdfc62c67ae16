//! The reboot step of a role phase, told truthfully: the operator is asked to reboot the hosts
//! whose scripts or bindings changed, and — on every later run — the hosts that were asked and
//! have not been seen booting since (no fetch of their per-MAC iPXE script, no discovery
//! report). A declined reboot fails the phase with the way out.

use harmony::domain::InterpretError;
use harmony::domain::ObjectChange;
use harmony::domain::capability::{BootEvent, BootPhase, CapabilityError, HostBinding};
use harmony::domain::inventory::HostRole;

use super::power_on::{self, Evidence};
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
    // Hosts with a BMC are PXE booted by Harmony; the operator reboots the others.
    let macs: Vec<_> = hosts.iter().map(|b| b.mac).collect();
    let bmcs = power_on::with_bmc(topology, &macs);
    let booted = power_on::pxe_boot(topology, &bmcs, false).await;
    let lines: Vec<String> = booted.iter().map(|b| b.line.clone()).collect();
    let mut failures: Vec<String> = booted
        .iter()
        .filter(|b| !b.ok)
        .map(|b| b.line.clone())
        .collect();
    let manual: Vec<&HostBinding> = hosts
        .into_iter()
        .filter(|b| !bmcs.iter().any(|x| x.mac == b.mac))
        .collect();
    let asked = if manual.is_empty() {
        None
    } else {
        Some(ask_operator(role, &manual, changed, topology, changes).await?)
    };
    // Then the evidence of the hands-free boots: each cycled host fetches its own script.
    let cycled: Vec<_> = bmcs
        .iter()
        .filter(|b| booted.iter().any(|x| x.mac == b.mac && x.ok))
        .cloned()
        .collect();
    if !cycled.is_empty() {
        let wait = power_on::boot_wait(topology);
        failures.extend(
            power_on::await_boots(topology, &cycled, Evidence::OwnScript, wait)
                .await
                .map_err(capability_error("waiting for the hosts to boot", changes))?,
        );
    }
    if !failures.is_empty() {
        return Ok(Reboot::Declined(format!(
            "{} {role} host(s) did not boot hands-free: {}; fix what each line says and re-run (the hosts that booted are not booted again)",
            failures.len(),
            failures.join("; ")
        )));
    }
    Ok(match asked {
        None => Reboot::GoOn(lines.join("; ")),
        Some(Reboot::GoOn(text)) if !lines.is_empty() => {
            Reboot::GoOn(format!("{}; {text}", lines.join("; ")))
        }
        Some(other) => other,
    })
}

/// Asks the operator to reboot `hosts` (hosts without a BMC), recording each request.
async fn ask_operator<T: OkdTopology>(
    role: HostRole,
    hosts: &[&HostBinding],
    changed: bool,
    topology: &T,
    changes: &[ObjectChange],
) -> Result<Reboot, InterpretError> {
    let now = power_on::now_ms();
    for b in hosts {
        topology
            .record_boot_event(b.mac, BootEvent::RebootRequested)
            .await
            .map_err(capability_error("recording the reboot request", changes))?;
        topology
            .record_boot_phase(b.mac, BootPhase::PowerOnRequested, now)
            .await
            .map_err(capability_error("recording the reboot request", changes))?;
    }
    let list = listed(hosts);
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
