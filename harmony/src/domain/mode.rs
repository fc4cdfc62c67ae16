//! Execution modes (render, plan, apply) and the run context handed to topology constructors.

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::operator::OperatorHandle;

/// What a run does to the world. Capabilities read it from their topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    /// Change live infrastructure; needs the operator's confirmation.
    Apply,
    /// Compute what would change against current state, change nothing.
    Plan,
    /// Write what would be applied into an output folder; touches no infrastructure.
    Render,
}

impl ExecutionMode {
    /// Whether this mode changes infrastructure and therefore needs a confirmation.
    pub fn changes_infrastructure(self) -> bool {
        self == ExecutionMode::Apply
    }

    /// What this mode does with `what` on `site`, in its own words, for progress lines and
    /// error context: `applying the primary on paris`, `planning the primary on paris` (with
    /// `--plan`), `rendering the primary for paris` (render mode applies nothing).
    pub fn acting_on(self, what: &str, site: &str) -> String {
        match self {
            ExecutionMode::Apply => format!("applying {what} on {site}"),
            ExecutionMode::Plan => format!("planning {what} on {site}"),
            ExecutionMode::Render => format!("rendering {what} for {site}"),
        }
    }
}

impl fmt::Display for ExecutionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExecutionMode::Apply => "apply",
            ExecutionMode::Plan => "plan",
            ExecutionMode::Render => "render",
        })
    }
}

/// What the operator asked for, handed to topology constructors so they can honour it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    /// `true` with `--plan`: compute changes without making them.
    pub plan: bool,
    /// Output folder for render mode (`--out`, default `./harmony-out`).
    pub out_dir: PathBuf,
    /// `true` with `--prune`: delete owned objects that their Score no longer declares.
    pub prune: bool,
    /// `true` with `--force-conflicts`: take over fields other field managers own.
    pub force_conflicts: bool,
    /// `--kubeconfig`: target a live cluster through this file instead of rendering.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`: the kubeconfig context to use (implies a live cluster).
    pub context: Option<String>,
    /// `--apply`: bare-metal topologies change their live services instead of rendering files.
    pub apply: bool,
    /// `--inventory`: the SQLite file bare-metal topologies keep discovered hosts in.
    pub inventory: Option<PathBuf>,
    /// `--roles`: a file assigning discovered hosts to roles, instead of asking.
    pub roles: Option<PathBuf>,
    /// `--discovery-timeout`: how long to wait for hosts to be discovered.
    pub discovery_timeout: Option<Duration>,
    /// Who answers questions during the run (a terminal, `--yes`, or nobody).
    pub operator: OperatorHandle,
    /// `--assign ROLE=RULE`: rules giving discovered hosts roles without a terminal.
    pub assign: Vec<super::capability::RoleRule>,
    /// `--root-device TARGET=HINTS`: which disk hosts install to.
    pub root_device: Vec<super::capability::RootDeviceRule>,
    /// `--no-wait`, `--wait-timeout`: whether an apply waits for its objects to be current.
    pub wait: WaitPolicy,
    /// `--no-skip`: send every object's PATCH, even one the live object shows unchanged.
    pub no_skip: bool,
    /// `--bmc MAC=ADDRESS,credentials=SOURCE`: hosts Harmony powers and PXE boots itself.
    pub bmc: Vec<super::capability::HostBmc>,
    /// `--bmc-ca-file`: the CAs that sign the BMCs' certificates (the system's when `None`).
    pub bmc_ca_file: Option<PathBuf>,
    /// `--bmc-insecure`: accept any BMC certificate.
    pub bmc_insecure: bool,
}

/// Whether, and how long, an apply waits for its objects to become current (rolled out,
/// bound, complete) before it counts as done. On by default in apply mode: a PATCH that landed
/// is not a Deployment that rolled out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// `false` with `--no-wait`: an apply ends when the server accepted every object.
    pub enabled: bool,
    /// `--wait-timeout`: how long objects get to become current before the apply fails
    /// naming the ones that did not.
    pub timeout: Duration,
}

impl WaitPolicy {
    /// The default timeout: five minutes, as `helm --wait`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

    /// Waiting off (`--no-wait`).
    pub const fn disabled() -> Self {
        Self {
            enabled: false,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// Waiting on, with `timeout`.
    pub const fn within(timeout: Duration) -> Self {
        Self {
            enabled: true,
            timeout,
        }
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::within(Self::DEFAULT_TIMEOUT)
    }
}

impl Default for RunContext {
    fn default() -> Self {
        Self {
            plan: false,
            out_dir: PathBuf::from("harmony-out"),
            prune: false,
            force_conflicts: false,
            kubeconfig: None,
            context: None,
            apply: false,
            inventory: None,
            roles: None,
            discovery_timeout: None,
            operator: OperatorHandle::default(),
            assign: Vec::new(),
            root_device: Vec::new(),
            wait: WaitPolicy::default(),
            no_skip: false,
            bmc: Vec::new(),
            bmc_ca_file: None,
            bmc_insecure: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_says_what_it_does() {
        let said = |m: ExecutionMode| m.acting_on("the primary", "site-paris");
        assert_eq!(
            said(ExecutionMode::Apply),
            "applying the primary on site-paris"
        );
        assert_eq!(
            said(ExecutionMode::Plan),
            "planning the primary on site-paris"
        );
        assert_eq!(
            said(ExecutionMode::Render),
            "rendering the primary for site-paris"
        );
    }
}
