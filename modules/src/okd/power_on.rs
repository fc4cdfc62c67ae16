//! Hands-free boots: hosts with a BMC (`--bmc`) are set to PXE boot once and power cycled by
//! Harmony, several at once, where the others wait for the operator. Each host's result is its
//! own: one BMC that refuses or does not answer stops nothing else.

use futures::StreamExt;
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    BootEvent, BootOverride, BootPhase, CapabilityError, HostBmc, HostTimeline, PowerChange,
    PowerTimeouts, timeline::span,
};
use harmony::domain::report_progress;
use harmony_types::MacAddress;

use super::OkdTopology;

/// How often boot evidence is read while waiting for it.
const POLL: Duration = Duration::from_secs(2);

/// BMCs driven at once.
const AT_ONCE: usize = 8;

/// What happened to one host.
pub(super) struct Boot {
    /// The host's boot MAC.
    pub(super) mac: MacAddress,
    /// A line for the report: what was sent and what the BMC kept, or why it failed.
    pub(super) line: String,
    /// Whether the host was power cycled into a network boot.
    pub(super) ok: bool,
}

/// The `--bmc` entries of `macs`, in `macs`' order.
pub(super) fn with_bmc<T: OkdTopology>(topology: &T, macs: &[MacAddress]) -> Vec<HostBmc> {
    macs.iter()
        .filter_map(|m| topology.host_bmcs().iter().find(|b| &b.mac == m).cloned())
        .collect()
}

/// Sets each host to PXE boot once and power cycles it (`forced`: forced off, then on);
/// records the power-on request in its timeline and, once cycled, the reboot request (so a
/// later run knows to wait for its boot).
pub(super) async fn pxe_boot<T: OkdTopology>(
    topology: &T,
    hosts: &[HostBmc],
    forced: bool,
) -> Vec<Boot> {
    let mut boots = Vec::with_capacity(hosts.len());
    for b in hosts {
        boots.push(one(topology, b, forced));
    }
    futures::stream::iter(boots)
        .buffer_unordered(AT_ONCE)
        .collect()
        .await
}

fn failed(b: &HostBmc, what: &'static str, e: String) -> Boot {
    Boot {
        mac: b.mac,
        line: format!("host {} (BMC {}): {what} failed: {e}", b.mac, b.address),
        ok: false,
    }
}

async fn one<T: OkdTopology>(topology: &T, b: &HostBmc, forced: bool) -> Boot {
    let kept = match topology.boot_from_network_once(b).await {
        Ok(k) => k,
        Err(e) => return failed(b, "setting a one-time PXE boot", e.to_string()),
    };
    if let Err(e) = topology
        .record_boot_phase(b.mac, BootPhase::PowerOnRequested, now_ms())
        .await
    {
        return failed(b, "recording the power-on request", e.to_string());
    }
    let cycled = if forced {
        let off = PowerTimeouts {
            graceful: Duration::ZERO,
            ..PowerTimeouts::default()
        };
        match topology.power_off(b, off).await {
            Ok(first) => topology.power_on(b).await.map(|then| PowerChange {
                before: first.before,
                sent: first.sent.into_iter().chain(then.sent).collect(),
                after: then.after,
            }),
            Err(e) => Err(e),
        }
    } else {
        topology.power_cycle(b).await
    };
    let change = match cycled {
        Ok(c) => c,
        Err(e) => return failed(b, "power cycling", e.to_string()),
    };
    if let Err(e) = topology
        .record_boot_event(b.mac, BootEvent::RebootRequested)
        .await
    {
        return failed(b, "recording the reboot", e.to_string());
    }
    let kept = match kept {
        BootOverride::Once => "PXE once".to_string(),
        BootOverride::Continuous => {
            "PXE on every boot (the BMC stored Continuous, not Once)".to_string()
        }
        BootOverride::NotKept(what) => {
            format!("the BMC did not keep the PXE override ({what}); it may boot from disk")
        }
    };
    Boot {
        mac: b.mac,
        line: format!(
            "host {} power cycled by its BMC {} ({} -> {}, sent {}), next boot: {kept}",
            b.mac,
            b.address,
            change.before,
            change.after,
            if change.sent.is_empty() {
                "nothing".to_string()
            } else {
                change.sent.join(", ")
            }
        ),
        ok: true,
    }
}

pub(super) use harmony::domain::capability::timeline::now_ms;

/// How long a hands-free boot may take to show its evidence: the phase's discovery wait, at
/// most 5 minutes (a boot that shows nothing by then will not; half-way, it is reset once more).
pub(super) fn boot_wait<T: OkdTopology>(topology: &T) -> Duration {
    topology.discovery_timeout().min(Duration::from_secs(300))
}

/// What shows that a host booted as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Evidence {
    /// It fetched its own per-MAC iPXE script (an install boot).
    OwnScript,
    /// It reported to discovery (a discovery boot).
    DiscoveryReport,
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OwnScript => "fetch its own iPXE script",
            Self::DiscoveryReport => "report to discovery",
        })
    }
}

/// The MACs among `macs` that have not shown `evidence` since their latest boot request.
pub(super) async fn silent<T: OkdTopology>(
    topology: &T,
    macs: &[MacAddress],
    evidence: Evidence,
) -> Result<Vec<MacAddress>, CapabilityError> {
    match evidence {
        Evidence::OwnScript => topology.awaiting_boot(macs).await,
        Evidence::DiscoveryReport => {
            let known: Vec<MacAddress> = topology
                .known_hosts()
                .await?
                .iter()
                .flat_map(|h| h.macs.iter().copied())
                .collect();
            Ok(macs
                .iter()
                .filter(|m| !known.contains(m))
                .copied()
                .collect())
        }
    }
}

/// Why a host that was booted has shown nothing, from the last phase of its timeline, with
/// what to check: `52:54:00:00:00:21: power on accepted at 10:02:03 UTC, no DHCP request in
/// 5 min 0 s: check the boot order; this BMC may ignore one-time boot overrides`.
pub(super) fn stuck(t: &HostTimeline, now_ms: i64, evidence: Evidence) -> String {
    let Some(last) = t.latest().and_then(|b| b.last()) else {
        return format!("{}: no boot request or boot seen", t.mac);
    };
    let since = format!(
        "{} ({} ago)",
        harmony::domain::capability::timeline::clock(last.at_ms),
        span(now_ms - last.at_ms)
    );
    let (what, check) = match last.phase {
        BootPhase::PowerOnRequested => (
            "power on accepted, no DHCP request since".to_string(),
            "check the boot order and that its boot NIC is on the provisioning network; this BMC may ignore one-time boot overrides",
        ),
        BootPhase::DhcpLease => (
            "leased an address, fetched no iPXE script since".to_string(),
            "check that its firmware chains to iPXE (TFTP from Harmony's dnsmasq)",
        ),
        BootPhase::ScriptFetched => (
            "fetched its iPXE script, no kernel since".to_string(),
            "check the boot files under the HTTP root",
        ),
        BootPhase::KernelFetched | BootPhase::InitrdFetched => (
            format!("last {}, nothing since", last.phase),
            "the kernel may not boot on this machine: read its console",
        ),
        phase => (
            format!("last seen {phase}, did not {evidence}"),
            "read its console",
        ),
    };
    format!("{}: {what} {since}: {check}", t.mac)
}

/// Prints each phase of a host's latest boot once, as it is first seen: one line per host
/// per phase, with the time since the phase before.
#[derive(Default)]
pub(super) struct PhaseLines {
    shown: std::collections::HashMap<MacAddress, (usize, usize)>,
}

impl PhaseLines {
    /// Reports the phases of `timelines` not reported yet.
    pub(super) fn report(&mut self, timelines: &[HostTimeline]) {
        for t in timelines {
            let Some(boot) = t.latest() else { continue };
            let (boots, phases) = self.shown.entry(t.mac).or_insert((0, 0));
            if *boots != t.boots.len() {
                (*boots, *phases) = (t.boots.len(), 0);
            }
            for (i, p) in boot.phases.iter().enumerate().skip(*phases) {
                let step = match i.checked_sub(1).map(|j| boot.phases[j].at_ms) {
                    Some(before) => format!(" (+{})", span(p.at_ms - before)),
                    None => String::new(),
                };
                report_progress(format!(
                    "{}: {} at {}{step}",
                    t.mac,
                    p.phase,
                    harmony::domain::capability::timeline::clock(p.at_ms)
                ));
            }
            *phases = boot.phases.len();
        }
    }
}

/// Waits up to `wait` for each of `hosts` to show `evidence`; at half the wait, the hosts
/// still silent are reset once more, forced. Returns one line per host that never showed it,
/// saying where its boot stopped ([`stuck`]).
pub(super) async fn await_boots<T: OkdTopology>(
    topology: &T,
    hosts: &[HostBmc],
    evidence: Evidence,
    wait: Duration,
) -> Result<Vec<String>, CapabilityError> {
    let started = Instant::now();
    let macs: Vec<MacAddress> = hosts.iter().map(|b| b.mac).collect();
    let mut retried = false;
    let mut lines = PhaseLines::default();
    loop {
        lines.report(&topology.timelines(&macs).await?);
        let quiet = silent(topology, &macs, evidence).await?;
        if quiet.is_empty() {
            return Ok(Vec::new());
        }
        let timelines = topology.timelines(&quiet).await?;
        let now = now_ms();
        if started.elapsed() >= wait {
            return Ok(timelines.iter().map(|t| stuck(t, now, evidence)).collect());
        }
        if !retried && started.elapsed() >= wait / 2 {
            retried = true;
            let again = with_bmc(topology, &quiet);
            for b in pxe_boot(topology, &again, true).await {
                report_progress(format!(
                    "no sign that {} booted after {}: reset once more, forced: {}",
                    b.mac,
                    span(i64::try_from(started.elapsed().as_millis()).unwrap_or(0)),
                    b.line
                ));
            }
        } else {
            let lines: Vec<String> = timelines.iter().map(|t| t.stuck_line(now)).collect();
            report_progress(format!(
                "waiting for {} host(s) to {evidence}: {}",
                quiet.len(),
                lines.join("; ")
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::domain::capability::PhaseAt;

    #[test]
    fn a_silent_host_says_where_its_boot_stopped_and_what_to_check() {
        let mac = MacAddress::parse("52:54:00:00:00:21").unwrap();
        let at = |phase, at_ms| PhaseAt { phase, at_ms };
        let t0 = 1_780_000_000_000;
        let only_power = HostTimeline::from_events(mac, vec![at(BootPhase::PowerOnRequested, t0)]);
        let line = stuck(&only_power, t0 + 300_000, Evidence::DiscoveryReport);
        assert!(
            line.starts_with("52:54:00:00:00:21: power on accepted, no DHCP request since ")
                && line.contains("(5 min 0 s ago)")
                && line.contains("this BMC may ignore one-time boot overrides"),
            "{line}"
        );
        let leased = HostTimeline::from_events(
            mac,
            vec![
                at(BootPhase::PowerOnRequested, t0),
                at(BootPhase::DhcpLease, t0 + 5_000),
            ],
        );
        let line = stuck(&leased, t0 + 60_000, Evidence::OwnScript);
        assert!(line.contains("fetched no iPXE script since"), "{line}");
        let nothing = HostTimeline::from_events(mac, vec![]);
        assert!(stuck(&nothing, t0, Evidence::OwnScript).contains("no boot request"));
    }
}
