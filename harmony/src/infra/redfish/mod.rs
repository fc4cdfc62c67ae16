//! [`PowerControl`] over Redfish (DMTF DSP0266): a host's ComputerSystem is reset through its
//! `#ComputerSystem.Reset` action and PXE booted once through `Boot.BootSourceOverrideTarget`.
//!
//! Tolerant of what the specification leaves to vendors: the reset types sent are those the
//! system lists (`ResetType@Redfish.AllowableValues`, or its `@Redfish.ActionInfo`), never
//! assumed; the action's `target` is read, not built; a PATCH carries `If-Match` when the BMC
//! gives an ETag (some require it); the boot override is read back, so a BMC that stores
//! `Continuous` for `Once`, or drops the override, is reported as such (ADR 0029).
//!
//! ```no_run
//! use harmony::domain::capability::{HostBmc, PowerControl};
//! use harmony::infra::redfish::{RedfishPower, RedfishSettings};
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let power = RedfishPower::new(&RedfishSettings::default())?;
//! let host = HostBmc::parse(
//!     "52:54:00:00:00:21=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:BMC_R14",
//! )?;
//! power.boot_from_network_once(&host).await?;
//! power.power_cycle(&host).await?;
//! # Ok(())
//! # }
//! ```

mod client;
mod credentials;
#[cfg(test)]
mod tests;

use async_trait::async_trait;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use self::client::Bmc;
use crate::domain::capability::{
    BootOverride, CapabilityError, HostBmc, PowerChange, PowerControl, PowerState, PowerTimeouts,
};

/// How [`RedfishPower`] reaches BMCs.
#[derive(Debug, Clone)]
pub struct RedfishSettings {
    /// A PEM bundle of the CAs that sign the BMCs' certificates (`--bmc-ca-file`); the system's
    /// roots when `None`.
    pub ca_file: Option<PathBuf>,
    /// Accept any BMC certificate (`--bmc-insecure`): logged as a warning at start.
    pub insecure: bool,
    /// The longest wait for one Redfish call.
    pub request_timeout: Duration,
    /// How often a power state is read while waiting for it.
    pub poll: Duration,
}

impl Default for RedfishSettings {
    /// System roots, verified; 20 s per call; state read every second.
    fn default() -> Self {
        Self {
            ca_file: None,
            insecure: false,
            request_timeout: Duration::from_secs(20),
            poll: Duration::from_secs(1),
        }
    }
}

/// Power and boot control of hosts through their Redfish BMCs.
pub struct RedfishPower {
    http: harmony_http::reqwest::Client,
    request_timeout: Duration,
    poll: Duration,
}

/// The parts of a ComputerSystem a power operation needs.
struct System {
    path: String,
    power: PowerState,
    reset_target: String,
    reset_types: Vec<String>,
}

/// Every `ResetType` of the Redfish schema: what a system offers when it lists none.
const ALL_RESET_TYPES: [&str; 9] = [
    "On",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "Nmi",
    "ForceOn",
    "PushPowerButton",
    "PowerCycle",
];

impl RedfishPower {
    /// A client with these settings; fails when the CA file cannot be read or holds no
    /// certificate.
    pub fn new(settings: &RedfishSettings) -> Result<Self, CapabilityError> {
        let pem = match &settings.ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|source| CapabilityError::Io {
                path: format!("--bmc-ca-file {}", path.display()),
                source,
            })?),
            None => None,
        };
        if settings.insecure {
            log::warn!(
                "--bmc-insecure: BMC certificates are not verified; anyone on the path to a BMC can read its credentials"
            );
        }
        let http = harmony_http::ClientSettings::new()
            .ca_pem(pem.as_deref())
            .accept_any_certificate(settings.insecure)
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(10)))
            .read_timeout(Some(settings.request_timeout))
            .user_agent(concat!("harmony/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CapabilityError::Unsupported {
                what: "a Redfish client".into(),
                backend: "harmony".into(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            http,
            request_timeout: settings.request_timeout,
            poll: settings.poll,
        })
    }

    fn open<'a>(&'a self, host: &'a HostBmc) -> Result<Bmc<'a>, CapabilityError> {
        Bmc::open(&self.http, host, self.request_timeout)
    }

    /// The system the address names, or the BMC's only one.
    async fn system(&self, bmc: &Bmc<'_>, host: &HostBmc) -> Result<System, CapabilityError> {
        let path = match host.address.system_path() {
            Some(p) => p.to_string(),
            None => {
                let list = bmc.get("/redfish/v1/Systems").await?.body;
                let members: Vec<&str> = list
                    .get("Members")
                    .and_then(Value::as_array)
                    .map(|m| {
                        m.iter()
                            .filter_map(|x| x.get("@odata.id").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                match members.as_slice() {
                    [one] => one.to_string(),
                    [] => {
                        return Err(CapabilityError::NotFound {
                            object: bmc.object(),
                            server: bmc.server(),
                            message: "the BMC lists no ComputerSystem".into(),
                        });
                    }
                    many => {
                        return Err(CapabilityError::Rejected {
                            object: bmc.object(),
                            server: bmc.server(),
                            message: format!(
                                "the BMC has {} systems ({}); name the host's in its address: {}/redfish/v1/Systems/ID",
                                many.len(),
                                many.iter().take(5).copied().collect::<Vec<_>>().join(", "),
                                host.address.as_str().trim_end_matches('/'),
                            ),
                        });
                    }
                }
            }
        };
        let body = bmc.get(&path).await?.body;
        let reset = body.pointer("/Actions/#ComputerSystem.Reset");
        let reset_target = reset
            .and_then(|r| r.get("target"))
            .and_then(Value::as_str)
            .ok_or_else(|| CapabilityError::Unsupported {
                what: format!("resetting {}", bmc.object()),
                backend: bmc.server(),
                reason: format!("{path} has no #ComputerSystem.Reset action"),
            })?;
        // Some BMCs give the target as an absolute URL of their own: keep its path.
        let root = host.address.http_root();
        let reset_target = reset_target
            .strip_prefix(root.as_str())
            .unwrap_or(reset_target)
            .to_string();
        let mut reset_types =
            string_list(reset.and_then(|r| r.get("ResetType@Redfish.AllowableValues")));
        if reset_types.is_empty()
            && let Some(info) = reset
                .and_then(|r| r.get("@Redfish.ActionInfo"))
                .and_then(Value::as_str)
        {
            let info = bmc.get(info).await?.body;
            if let Some(params) = info.get("Parameters").and_then(Value::as_array) {
                for p in params {
                    if p.get("Name").and_then(Value::as_str) == Some("ResetType") {
                        reset_types = string_list(p.get("AllowableValues"));
                    }
                }
            }
        }
        if reset_types.is_empty() {
            reset_types = ALL_RESET_TYPES.iter().map(|s| s.to_string()).collect();
        }
        Ok(System {
            power: power_state(&body),
            path,
            reset_target,
            reset_types,
        })
    }

    async fn reset(
        &self,
        bmc: &Bmc<'_>,
        system: &System,
        reset_type: &str,
    ) -> Result<(), CapabilityError> {
        log::info!("{}: {}: ResetType {reset_type}", bmc.object(), bmc.server());
        bmc.post(&system.reset_target, json!({ "ResetType": reset_type }))
            .await
            .map(drop)
    }

    /// Reads the power state until `wanted` or `within` has passed; the last state read.
    async fn wait_for(
        &self,
        bmc: &Bmc<'_>,
        path: &str,
        wanted: &PowerState,
        within: Duration,
    ) -> Result<PowerState, CapabilityError> {
        let start = Instant::now();
        loop {
            let state = power_state(&bmc.get(path).await?.body);
            if &state == wanted || start.elapsed() >= within {
                return Ok(state);
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    fn offers(system: &System, reset_type: &str) -> bool {
        system.reset_types.iter().any(|t| t == reset_type)
    }

    fn refuse(bmc: &Bmc<'_>, system: &System, what: &str) -> CapabilityError {
        CapabilityError::Unsupported {
            what: format!("{what} {}", bmc.object()),
            backend: bmc.server(),
            reason: format!(
                "the system offers only the reset types {}",
                system.reset_types.join(", ")
            ),
        }
    }

    fn timeout(bmc: &Bmc<'_>, wanted: &str, after: Duration, last: &PowerState) -> CapabilityError {
        CapabilityError::Timeout {
            waited_for: format!(
                "{} to report power {wanted} ({})",
                bmc.object(),
                bmc.server()
            ),
            after,
            last_seen: format!("PowerState {last}"),
        }
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn power_state(system: &Value) -> PowerState {
    match system.get("PowerState").and_then(Value::as_str) {
        Some("On") => PowerState::On,
        Some("Off") => PowerState::Off,
        Some("PoweringOn") => PowerState::PoweringOn,
        Some("PoweringOff") => PowerState::PoweringOff,
        other => PowerState::Unknown(other.unwrap_or_default().chars().take(64).collect()),
    }
}

/// Serves any host it is given; [`PowerControl::host_bmcs`] is the topology's list, so a
/// `RedfishPower` alone lists none.
#[async_trait]
impl PowerControl for RedfishPower {
    fn host_bmcs(&self) -> &[HostBmc] {
        &[]
    }

    async fn power_state(&self, host: &HostBmc) -> Result<PowerState, CapabilityError> {
        let bmc = self.open(host)?;
        Ok(self.system(&bmc, host).await?.power)
    }

    async fn power_on(&self, host: &HostBmc) -> Result<PowerChange, CapabilityError> {
        let bmc = self.open(host)?;
        let system = self.system(&bmc, host).await?;
        if system.power == PowerState::On {
            return Ok(PowerChange {
                before: PowerState::On,
                sent: vec![],
                after: PowerState::On,
            });
        }
        let kind = ["On", "ForceOn", "PushPowerButton"]
            .into_iter()
            .find(|t| Self::offers(&system, t))
            .ok_or_else(|| Self::refuse(&bmc, &system, "powering on"))?;
        self.reset(&bmc, &system, kind).await?;
        let settle = PowerTimeouts::default().settle;
        let after = self
            .wait_for(&bmc, &system.path, &PowerState::On, settle)
            .await?;
        if after != PowerState::On {
            return Err(Self::timeout(&bmc, "On", settle, &after));
        }
        Ok(PowerChange {
            before: system.power,
            sent: vec![kind.into()],
            after,
        })
    }

    async fn power_off(
        &self,
        host: &HostBmc,
        timeouts: PowerTimeouts,
    ) -> Result<PowerChange, CapabilityError> {
        let bmc = self.open(host)?;
        let system = self.system(&bmc, host).await?;
        if system.power == PowerState::Off {
            return Ok(PowerChange {
                before: PowerState::Off,
                sent: vec![],
                after: PowerState::Off,
            });
        }
        let mut sent = Vec::new();
        // A zero graceful timeout is a forced power-off: no shutdown request first.
        if !timeouts.graceful.is_zero() && Self::offers(&system, "GracefulShutdown") {
            self.reset(&bmc, &system, "GracefulShutdown").await?;
            sent.push("GracefulShutdown".to_string());
            let after = self
                .wait_for(&bmc, &system.path, &PowerState::Off, timeouts.graceful)
                .await?;
            if after == PowerState::Off {
                return Ok(PowerChange {
                    before: system.power,
                    sent,
                    after,
                });
            }
            log::info!(
                "{}: no Off within {} s of GracefulShutdown (PowerState {after}); forcing",
                bmc.object(),
                timeouts.graceful.as_secs()
            );
        }
        if !Self::offers(&system, "ForceOff") {
            return Err(Self::refuse(&bmc, &system, "forcing off"));
        }
        self.reset(&bmc, &system, "ForceOff").await?;
        sent.push("ForceOff".into());
        let after = self
            .wait_for(&bmc, &system.path, &PowerState::Off, timeouts.settle)
            .await?;
        if after != PowerState::Off {
            return Err(Self::timeout(&bmc, "Off", timeouts.settle, &after));
        }
        Ok(PowerChange {
            before: system.power,
            sent,
            after,
        })
    }

    async fn power_cycle(&self, host: &HostBmc) -> Result<PowerChange, CapabilityError> {
        let bmc = self.open(host)?;
        let system = self.system(&bmc, host).await?;
        if matches!(system.power, PowerState::Off | PowerState::PoweringOff) {
            drop(bmc);
            return self.power_on(host).await;
        }
        if let Some(kind) = ["ForceRestart", "PowerCycle"]
            .into_iter()
            .find(|t| Self::offers(&system, t))
        {
            self.reset(&bmc, &system, kind).await?;
            return Ok(PowerChange {
                before: system.power,
                sent: vec![kind.into()],
                after: PowerState::On,
            });
        }
        if !Self::offers(&system, "ForceOff") || !Self::offers(&system, "On") {
            return Err(Self::refuse(&bmc, &system, "power cycling"));
        }
        let settle = PowerTimeouts::default().settle;
        self.reset(&bmc, &system, "ForceOff").await?;
        let off = self
            .wait_for(&bmc, &system.path, &PowerState::Off, settle)
            .await?;
        if off != PowerState::Off {
            return Err(Self::timeout(&bmc, "Off", settle, &off));
        }
        self.reset(&bmc, &system, "On").await?;
        let after = self
            .wait_for(&bmc, &system.path, &PowerState::On, settle)
            .await?;
        Ok(PowerChange {
            before: system.power,
            sent: vec!["ForceOff".into(), "On".into()],
            after,
        })
    }

    async fn boot_from_network_once(
        &self,
        host: &HostBmc,
    ) -> Result<BootOverride, CapabilityError> {
        let bmc = self.open(host)?;
        let system = self.system(&bmc, host).await?;
        let current = bmc.get(&system.path).await?;
        let targets = string_list(
            current
                .body
                .pointer("/Boot/BootSourceOverrideTarget@Redfish.AllowableValues"),
        );
        if !targets.is_empty() && !targets.iter().any(|t| t == "Pxe") {
            return Err(CapabilityError::Unsupported {
                what: format!("a network boot of {}", bmc.object()),
                backend: bmc.server(),
                reason: format!(
                    "the system's boot override targets are {}; none is Pxe",
                    targets.join(", ")
                ),
            });
        }
        bmc.patch(
            &system.path,
            json!({"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}),
            current.etag.as_deref(),
        )
        .await?;
        let after = bmc.get(&system.path).await?.body;
        let target = after
            .pointer("/Boot/BootSourceOverrideTarget")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let enabled = after
            .pointer("/Boot/BootSourceOverrideEnabled")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kept = match (target, enabled) {
            ("Pxe", "Once") => BootOverride::Once,
            ("Pxe", "Continuous") => {
                log::warn!(
                    "{}: {} stored the PXE boot override as Continuous, not Once: the host PXE boots until it is cleared",
                    bmc.object(),
                    bmc.server()
                );
                BootOverride::Continuous
            }
            (t, e) => BootOverride::NotKept(format!(
                "BootSourceOverrideTarget {t:?}, BootSourceOverrideEnabled {e:?}"
            )),
        };
        Ok(kept)
    }
}
