//! Hands-free boots: hosts with a BMC (`--bmc`) are set to PXE boot once and power cycled by
//! Harmony, several at once, where the others wait for the operator. Each host's result is its
//! own: one BMC that refuses or does not answer stops nothing else.

use futures::StreamExt;

use harmony::domain::capability::{BootEvent, BootOverride, HostBmc};
use harmony_types::MacAddress;

use super::OkdTopology;

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

/// Sets each host to PXE boot once and power cycles it; records the reboot request of each
/// host that was cycled (so a later run knows to wait for its boot).
pub(super) async fn pxe_boot<T: OkdTopology>(topology: &T, hosts: &[HostBmc]) -> Vec<Boot> {
    let mut boots = Vec::with_capacity(hosts.len());
    for b in hosts {
        boots.push(one(topology, b));
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

async fn one<T: OkdTopology>(topology: &T, b: &HostBmc) -> Boot {
    let kept = match topology.boot_from_network_once(b).await {
        Ok(k) => k,
        Err(e) => return failed(b, "setting a one-time PXE boot", e.to_string()),
    };
    let change = match topology.power_cycle(b).await {
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
