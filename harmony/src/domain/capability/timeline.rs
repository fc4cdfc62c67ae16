//! Where a host's boot time went: each boot's phases (power-on requested, DHCP lease, iPXE
//! script, kernel, initrd, discovery report or ignition, Node registered, Node Ready) with the
//! time Harmony saw each, so a slow or stuck host says which phase it is in and since when.

use serde::{Deserialize, Serialize};
use std::fmt;

use harmony_types::MacAddress;

/// A step of a host's boot as Harmony sees it from outside, in the order a boot goes through
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootPhase {
    /// Harmony asked for the boot: through the host's BMC, or by asking the operator.
    PowerOnRequested,
    /// dnsmasq leased the host an address (the lease's start).
    DhcpLease,
    /// The host fetched an iPXE script: `boot.ipxe` (discovery) or its own per-MAC script.
    ScriptFetched,
    /// It fetched a kernel.
    KernelFetched,
    /// It fetched an initrd (initramfs).
    InitrdFetched,
    /// It reported its hardware to discovery.
    DiscoveryReported,
    /// It fetched its ignition (the installer started).
    IgnitionFetched,
    /// Its Node was registered in the cluster.
    NodeRegistered,
    /// Its Node became Ready.
    NodeReady,
}

impl BootPhase {
    /// Every phase, in boot order.
    pub const ALL: [BootPhase; 9] = [
        Self::PowerOnRequested,
        Self::DhcpLease,
        Self::ScriptFetched,
        Self::KernelFetched,
        Self::InitrdFetched,
        Self::DiscoveryReported,
        Self::IgnitionFetched,
        Self::NodeRegistered,
        Self::NodeReady,
    ];

    /// The phase's stable name (`dhcp-lease`), as stored and in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PowerOnRequested => "power-on-requested",
            Self::DhcpLease => "dhcp-lease",
            Self::ScriptFetched => "script-fetched",
            Self::KernelFetched => "kernel-fetched",
            Self::InitrdFetched => "initrd-fetched",
            Self::DiscoveryReported => "discovery-reported",
            Self::IgnitionFetched => "ignition-fetched",
            Self::NodeRegistered => "node-registered",
            Self::NodeReady => "node-ready",
        }
    }

    /// The phase of a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for BootPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PowerOnRequested => "power-on requested",
            Self::DhcpLease => "DHCP lease",
            Self::ScriptFetched => "iPXE script fetched",
            Self::KernelFetched => "kernel fetched",
            Self::InitrdFetched => "initrd fetched",
            Self::DiscoveryReported => "discovery report",
            Self::IgnitionFetched => "ignition fetched",
            Self::NodeRegistered => "Node registered",
            Self::NodeReady => "Node Ready",
        })
    }
}

/// A phase and when it was seen, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseAt {
    /// The phase.
    pub phase: BootPhase,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
}

/// One boot: its phases, each at the first time it was seen in this boot, in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootTimeline {
    /// The phases seen.
    pub phases: Vec<PhaseAt>,
}

impl BootTimeline {
    /// The phase seen last.
    pub fn last(&self) -> Option<PhaseAt> {
        self.phases.last().copied()
    }

    /// When `phase` was seen in this boot.
    pub fn at(&self, phase: BootPhase) -> Option<i64> {
        self.phases
            .iter()
            .find(|p| p.phase == phase)
            .map(|p| p.at_ms)
    }
}

/// A host's boots, oldest first: a new boot begins at each power-on request (events before the
/// first one form a boot of their own: the host was started by hand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTimeline {
    /// The host's boot MAC.
    pub mac: MacAddress,
    /// Its boots.
    pub boots: Vec<BootTimeline>,
}

impl HostTimeline {
    /// Splits a host's events (any order) into boots, keeping each phase's first time in
    /// each boot.
    pub fn from_events(mac: MacAddress, mut events: Vec<PhaseAt>) -> Self {
        events.sort_by_key(|e| (e.at_ms, e.phase));
        let mut boots: Vec<BootTimeline> = Vec::new();
        for e in events {
            let new_boot = e.phase == BootPhase::PowerOnRequested || boots.is_empty();
            if new_boot {
                boots.push(BootTimeline::default());
            }
            let boot = boots.last_mut().expect("pushed above");
            if boot.at(e.phase).is_none() {
                boot.phases.push(e);
            }
        }
        Self { mac, boots }
    }

    /// The latest boot, if any.
    pub fn latest(&self) -> Option<&BootTimeline> {
        self.boots.last()
    }

    /// The latest boot in one line: its start as UTC time, then each phase with the time it
    /// took since the one before: `52:54:00:00:00:21 power-on requested 10:02:03.120 UTC,
    /// DHCP lease +5.5 s, iPXE script fetched +12.9 s, ...`.
    pub fn line(&self) -> String {
        let Some(boot) = self.latest() else {
            return format!("{}: no boot seen", self.mac);
        };
        let mut parts = Vec::with_capacity(boot.phases.len());
        let mut previous: Option<i64> = None;
        for p in &boot.phases {
            match previous {
                None => parts.push(format!("{} {}", p.phase, clock(p.at_ms))),
                Some(before) => parts.push(format!("{} {}", p.phase, plus(p.at_ms - before))),
            }
            previous = Some(p.at_ms);
        }
        format!("{}: {}", self.mac, parts.join(", "))
    }

    /// Where the latest boot stands at `now_ms`: `in "DHCP lease" since 10:02:03 UTC (2 min 5 s)`.
    pub fn stuck_line(&self, now_ms: i64) -> String {
        match self.latest().and_then(BootTimeline::last) {
            None => format!("{}: nothing seen of it yet", self.mac),
            Some(p) => format!(
                "{}: last seen {} at {} ({} ago)",
                self.mac,
                p.phase,
                clock(p.at_ms),
                span(now_ms - p.at_ms)
            ),
        }
    }
}

/// Now, in milliseconds since the Unix epoch: the clock every boot phase is recorded with.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `10:02:03.120 UTC` for a time in milliseconds since the epoch.
pub fn clock(at_ms: i64) -> String {
    let day_ms = at_ms.rem_euclid(86_400_000);
    let (h, m, s, ms) = (
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000,
    );
    format!("{h:02}:{m:02}:{s:02}.{ms:03} UTC")
}

/// `+5.5 s` for a step of milliseconds (`+0.0 s` for a clock that stepped back).
fn plus(ms: i64) -> String {
    format!("+{}", span(ms))
}

/// `5.5 s`, `2 min 5 s`, `1 h 3 min`.
pub fn span(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 60_000 {
        format!("{}.{} s", ms / 1000, ms % 1000 / 100)
    } else if ms < 3_600_000 {
        format!("{} min {} s", ms / 60_000, ms / 1000 % 60)
    } else {
        format!("{} h {} min", ms / 3_600_000, ms / 60_000 % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(phase: BootPhase, at_ms: i64) -> PhaseAt {
        PhaseAt { phase, at_ms }
    }

    #[test]
    fn events_split_into_boots_at_each_power_on_and_keep_first_times() {
        let mac = MacAddress::parse("52:54:00:00:00:21").unwrap();
        let base = 1_780_000_000_000;
        let t = HostTimeline::from_events(
            mac,
            vec![
                at(BootPhase::ScriptFetched, base + 18_400),
                at(BootPhase::PowerOnRequested, base),
                at(BootPhase::DhcpLease, base + 5_500),
                at(BootPhase::ScriptFetched, base + 19_000),
                at(BootPhase::DiscoveryReported, base + 32_000),
                at(BootPhase::PowerOnRequested, base + 60_000),
                at(BootPhase::ScriptFetched, base + 70_000),
            ],
        );
        assert_eq!(t.boots.len(), 2);
        assert_eq!(
            t.boots[0]
                .phases
                .iter()
                .map(|p| p.phase)
                .collect::<Vec<_>>(),
            [
                BootPhase::PowerOnRequested,
                BootPhase::DhcpLease,
                BootPhase::ScriptFetched,
                BootPhase::DiscoveryReported
            ]
        );
        assert_eq!(t.boots[0].at(BootPhase::ScriptFetched), Some(base + 18_400));
        let line = t.line();
        assert!(
            line.starts_with("52:54:00:00:00:21: power-on requested ")
                && line.ends_with("iPXE script fetched +10.0 s"),
            "{line}"
        );
        let stuck = t.stuck_line(base + 70_000 + 125_000);
        assert!(
            stuck.contains("last seen iPXE script fetched") && stuck.contains("(2 min 5 s ago)"),
            "{stuck}"
        );
        // Events before any power-on request are a boot of their own (started by hand).
        let by_hand = HostTimeline::from_events(mac, vec![at(BootPhase::DhcpLease, base)]);
        assert_eq!(by_hand.boots.len(), 1);
    }

    #[test]
    fn names_round_trip_and_times_read_as_clock_and_spans() {
        for p in BootPhase::ALL {
            assert_eq!(BootPhase::parse(p.as_str()), Some(p));
        }
        assert_eq!(clock(3_723_045), "01:02:03.045 UTC");
        assert_eq!(span(5_530), "5.5 s");
        assert_eq!(span(125_000), "2 min 5 s");
        assert_eq!(span(3_780_000), "1 h 3 min");
        assert_eq!(span(-5), "0.0 s");
    }
}
