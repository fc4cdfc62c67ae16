//! The boot timeline of [`HAClusterTopology`]'s hosts: phases recorded in the inventory by the
//! boot server (scripts, kernels, initrds, ignitions), the discovery endpoint and the Scores
//! (power-on requests, Nodes), and each boot's DHCP lease read from dnsmasq's lease file (its
//! start is its expiry less the lease time Harmony configures).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use harmony_types::{IpAddress, MacAddress};

use super::HAClusterTopology;
use crate::domain::capability::{BootEvent, BootPhase, CapabilityError, DhcpLease, HostTimeline};
use crate::infra::dnsmasq::{DISCOVERY_LEASE_SECS, RESERVED_LEASE_SECS, read_leases};
use crate::infra::http_boot::{BootFetch, BootSink};
use crate::infra::inventory_sqlite::{SqliteInventory, now_ms};

/// The boot server's sink: a per-MAC script fetch is boot evidence ([`BootEvent::Booted`]);
/// every boot file fetched is a phase of the fetching host's timeline, the host found by its
/// MAC in the path or by the address dnsmasq leased it.
pub(super) fn boot_sink(
    inventory: Arc<SqliteInventory>,
    lease_file: std::path::PathBuf,
) -> BootSink {
    Arc::new(move |fetch: BootFetch| {
        let at = now_ms();
        if let Some(mac) = fetch.mac
            && let Err(e) = inventory.record_boot_event_sync(mac, BootEvent::Booted)
        {
            log::warn!("http boot: cannot record that {mac} booted: {e}");
        }
        let Some(mac) = fetch.mac.or_else(|| leased_to(&lease_file, fetch.client)) else {
            log::debug!(
                "http boot: {} fetched a boot file but holds no lease: not in any timeline",
                fetch.client
            );
            return;
        };
        if let Err(e) = inventory.record_boot_phase_sync(mac, fetch.phase, at) {
            log::warn!("http boot: cannot record {} of {mac}: {e}", fetch.phase);
        }
    })
}

/// The MAC dnsmasq leased `client` to.
pub(super) fn leased_to(lease_file: &Path, client: IpAddr) -> Option<MacAddress> {
    read_leases(lease_file)
        .ok()?
        .into_iter()
        .find(|l| IpAddr::V4(l.ip.addr()) == client)
        .map(|l| l.mac)
}

/// When `lease` began, in milliseconds: its expiry less the lease time of its range.
fn lease_start_ms(lease: &DhcpLease, discovery: Option<(IpAddress, IpAddress)>) -> Option<i64> {
    let expires = i64::try_from(lease.expires?).ok()?;
    let in_discovery = discovery.is_some_and(|(first, last)| {
        (u32::from(first.addr())..=u32::from(last.addr())).contains(&u32::from(lease.ip.addr()))
    });
    let length = if in_discovery {
        DISCOVERY_LEASE_SECS
    } else {
        RESERVED_LEASE_SECS
    };
    Some((expires - length) * 1000)
}

impl HAClusterTopology {
    /// The timelines of `macs`; a lease that began in a host's latest boot (and is not yet in
    /// its timeline) is recorded first, so the lease's start survives its renewals.
    pub(super) fn timelines_now(
        &self,
        macs: &[MacAddress],
    ) -> Result<Vec<HostTimeline>, CapabilityError> {
        let timelines = self.inventory.timelines_sync(macs)?;
        let leases = read_leases(&self.dnsmasq.lease_file())?;
        let mut recorded = false;
        for t in &timelines {
            let Some(boot) = t.latest() else { continue };
            let Some(first) = boot.phases.first() else {
                continue;
            };
            if boot.at(BootPhase::DhcpLease).is_some() {
                continue;
            }
            let start = leases
                .iter()
                .filter(|l| l.mac == t.mac)
                .filter_map(|l| lease_start_ms(l, self.dnsmasq.discovery_range()))
                // Lease times are whole seconds: allow the second the boot began in.
                .find(|s| *s >= first.at_ms - 1000 && *s <= now_ms() + 1000);
            if let Some(start) = start {
                self.inventory.record_boot_phase_sync(
                    t.mac,
                    BootPhase::DhcpLease,
                    start.max(first.at_ms),
                )?;
                recorded = true;
            }
        }
        if recorded {
            self.inventory.timelines_sync(macs)
        } else {
            Ok(timelines)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_begins_its_range_s_lease_time_before_it_expires() {
        let ip = |s: &str| IpAddress::parse(s).unwrap();
        let range = Some((ip("10.0.0.200"), ip("10.0.0.249")));
        let lease = |addr: &str| DhcpLease {
            mac: MacAddress::parse("52:54:00:00:00:21").unwrap(),
            ip: ip(addr),
            expires: Some(1_780_000_600),
        };
        assert_eq!(
            lease_start_ms(&lease("10.0.0.210"), range),
            Some(1_780_000_000_000)
        );
        assert_eq!(
            lease_start_ms(&lease("10.0.0.21"), range),
            Some(1_779_997_000_000)
        );
        let infinite = DhcpLease {
            expires: None,
            ..lease("10.0.0.21")
        };
        assert_eq!(lease_start_ms(&infinite, range), None);
    }
}
