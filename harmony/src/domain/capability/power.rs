//! Power and boot control of bare-metal hosts through their BMCs: read the power state, power
//! on, off (graceful, then forced) or cycle, and boot once from the network. What Metal3's
//! baremetal-operator and Tinkerbell's Rufio do with `redfish://` addresses, behind a trait so
//! a Score asks for the capability and a topology picks the protocol (Redfish today).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

use harmony_types::{BmcAddress, BmcCredentialsSource, MacAddress};

use super::CapabilityError;

/// One host's BMC, as the operator declared it (`--bmc MAC=ADDRESS,credentials=SOURCE`): the
/// host is known by its boot MAC (the one that PXE boots, as Metal3's `bootMACAddress`), so a
/// machine Harmony has never seen can be powered into discovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostBmc {
    /// The host's boot MAC address.
    pub mac: MacAddress,
    /// Where its BMC answers.
    pub address: BmcAddress,
    /// Where the BMC's user and password are read from (never the values).
    pub credentials: BmcCredentialsSource,
}

const BMC_FORMS: &str = "write MAC=ADDRESS,credentials=SOURCE, e.g. 52:54:00:00:00:21=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:BMC_R14 (SOURCE env:VARIABLE or file:PATH holding USER:PASSWORD)";

impl HostBmc {
    /// Parses `--bmc MAC=ADDRESS,credentials=SOURCE`; the error names the part that is wrong
    /// and never repeats a password.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (mac, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("--bmc: no MAC before '='; {BMC_FORMS}"))?;
        let mac = MacAddress::parse(mac.trim()).map_err(|e| format!("--bmc: {e}"))?;
        let (address, options) = match rest.split_once(',') {
            Some((a, o)) => (a, o),
            None => (rest, ""),
        };
        let address = BmcAddress::parse(address.trim()).map_err(|e| format!("--bmc {mac}: {e}"))?;
        let mut credentials = None;
        for option in options.split(',').filter(|o| !o.is_empty()) {
            match option.split_once('=') {
                Some(("credentials", source)) if credentials.is_none() => {
                    credentials = Some(
                        BmcCredentialsSource::parse(source)
                            .map_err(|e| format!("--bmc {mac}: {e}"))?,
                    );
                }
                Some(("credentials", _)) => {
                    return Err(format!("--bmc {mac}: credentials given twice; {BMC_FORMS}"));
                }
                _ => {
                    let name = option.split_once('=').map_or(option, |(k, _)| k);
                    return Err(format!(
                        "--bmc {mac}: unknown option {name:?} (only credentials=); {BMC_FORMS}"
                    ));
                }
            }
        }
        let credentials = credentials
            .ok_or_else(|| format!("--bmc {mac}: no credentials=SOURCE; {BMC_FORMS}"))?;
        Ok(Self {
            mac,
            address,
            credentials,
        })
    }

    /// Checks a whole list before anything runs: one BMC per MAC, one MAC per BMC system.
    pub fn check_unique(bmcs: &[HostBmc]) -> Result<(), String> {
        for (i, a) in bmcs.iter().enumerate() {
            for b in &bmcs[..i] {
                if a.mac == b.mac {
                    return Err(format!(
                        "--bmc {}: the host has two BMCs ({} and {}); give one",
                        a.mac, b.address, a.address
                    ));
                }
                if a.address.http_root() == b.address.http_root()
                    && a.address.system_path() == b.address.system_path()
                {
                    return Err(format!(
                        "--bmc: {} is given for both {} and {}; a BMC system powers one host (name each system in its address: .../redfish/v1/Systems/ID)",
                        a.address, b.mac, a.mac
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A host's power state as its BMC reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PowerState {
    /// Powered on.
    On,
    /// Powered off.
    Off,
    /// Powering on.
    PoweringOn,
    /// Powering off.
    PoweringOff,
    /// Anything else the BMC said (or nothing), verbatim.
    Unknown(String),
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::On => f.write_str("On"),
            Self::Off => f.write_str("Off"),
            Self::PoweringOn => f.write_str("PoweringOn"),
            Self::PoweringOff => f.write_str("PoweringOff"),
            Self::Unknown(s) if s.is_empty() => f.write_str("unknown"),
            Self::Unknown(s) => write!(f, "unknown ({s})"),
        }
    }
}

/// What a one-time boot override turned into on the BMC (read back after it was set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootOverride {
    /// The next boot only, as asked.
    Once,
    /// The BMC stored the override for every boot (some BMCs and emulators ignore `Once`):
    /// the host keeps PXE booting until the override is cleared.
    Continuous,
    /// The BMC did not keep the override (read back as `Disabled` or another target): it may
    /// ignore boot overrides; boot evidence tells whether the host PXE boots anyway.
    NotKept(String),
}

/// How long power operations may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerTimeouts {
    /// How long a graceful shutdown may take before it is forced; zero forces at once (no
    /// shutdown request is sent).
    pub graceful: Duration,
    /// How long the BMC may take to report a requested state.
    pub settle: Duration,
}

impl Default for PowerTimeouts {
    /// 3 minutes for a graceful shutdown (Ironic's default soft power-off timeout is 600 s;
    /// an installer image has nothing to save), 60 s for a state to show.
    fn default() -> Self {
        Self {
            graceful: Duration::from_secs(180),
            settle: Duration::from_secs(60),
        }
    }
}

/// What a power operation did, for the report and the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerChange {
    /// The state before.
    pub before: PowerState,
    /// The reset types sent, in order (`["GracefulShutdown", "ForceOff"]`); empty when the
    /// host already was in the asked state.
    pub sent: Vec<String>,
    /// The state reported at the end.
    pub after: PowerState,
}

/// Powers hosts and sets their next boot through their BMCs.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot power hosts (`PowerControl`)",
    label = "this Score needs a topology that implements `PowerControl` (it powers hosts and sets their next boot through their BMCs)",
    note = "use a bare-metal topology with BMC access: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`) with `--bmc` entries, or the Redfish adapter `harmony::infra::redfish::RedfishPower` in your own topology; or implement `PowerControl` for `{Self}`"
)]
pub trait PowerControl: Send + Sync {
    /// The hosts whose BMC this topology knows (`--bmc`), by boot MAC: the ones a bare-metal
    /// flow powers and PXE boots itself instead of asking the operator.
    fn host_bmcs(&self) -> &[HostBmc];

    /// The host's power state.
    async fn power_state(&self, bmc: &HostBmc) -> Result<PowerState, CapabilityError>;

    /// Powers the host on; nothing is sent when it already is on.
    async fn power_on(&self, bmc: &HostBmc) -> Result<PowerChange, CapabilityError>;

    /// Powers the host off: a graceful shutdown, forced when it does not finish within the
    /// timeout (or when the BMC offers no graceful one); nothing is sent when it is off.
    async fn power_off(
        &self,
        bmc: &HostBmc,
        timeouts: PowerTimeouts,
    ) -> Result<PowerChange, CapabilityError>;

    /// Restarts the host so it boots again (into a boot override set just before): powers it
    /// on when off, else a forced restart (`ForceRestart`, else `PowerCycle`, else `ForceOff`
    /// then `On`: whichever the BMC offers).
    async fn power_cycle(&self, bmc: &HostBmc) -> Result<PowerChange, CapabilityError>;

    /// Makes the host's next boot a network (PXE) boot, and says what the BMC kept.
    async fn boot_from_network_once(&self, bmc: &HostBmc) -> Result<BootOverride, CapabilityError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmc_entries_parse_and_refuse_with_the_fix() {
        let b = HostBmc::parse(
            "52:54:00:00:00:21=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:BMC_R14",
        )
        .unwrap();
        assert_eq!(b.mac.to_string(), "52:54:00:00:00:21");
        assert_eq!(b.credentials, BmcCredentialsSource::Env("BMC_R14".into()));
        for (bad, says) in [
            ("redfish://10.0.0.5", "no MAC"),
            ("52:54:00:00:00:21=redfish://10.0.0.5", "no credentials"),
            ("zz=redfish://10.0.0.5,credentials=env:X", "MAC"),
            (
                "52:54:00:00:00:21=redfish://10.0.0.5,credentials=admin:secret",
                "names no source",
            ),
            (
                "52:54:00:00:00:21=redfish://10.0.0.5,credentials=env:A,credentials=env:B",
                "twice",
            ),
            (
                "52:54:00:00:00:21=redfish://10.0.0.5,credentials=env:A,insecure=1",
                "unknown option",
            ),
            (
                "52:54:00:00:00:21=redfish://root:calvin@10.0.0.5,credentials=env:A",
                "never go in the address",
            ),
        ] {
            let e = HostBmc::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("calvin"), "{e}");
        }
    }

    #[test]
    fn duplicates_are_refused_before_anything_runs() {
        let a = |s: &str| HostBmc::parse(s).unwrap();
        let one = a("52:54:00:00:00:21=redfish://h/redfish/v1/Systems/1,credentials=env:A");
        let other_system =
            a("52:54:00:00:00:22=redfish://h/redfish/v1/Systems/2,credentials=env:A");
        let same_system = a("52:54:00:00:00:23=redfish://h/redfish/v1/Systems/1,credentials=env:B");
        let same_mac = a("52:54:00:00:00:21=redfish://g,credentials=env:A");
        assert!(HostBmc::check_unique(&[one.clone(), other_system.clone()]).is_ok());
        let e = HostBmc::check_unique(&[one.clone(), same_system]).unwrap_err();
        assert!(e.contains("powers one host"), "{e}");
        let e = HostBmc::check_unique(&[one, same_mac]).unwrap_err();
        assert!(e.contains("two BMCs"), "{e}");
    }
}
