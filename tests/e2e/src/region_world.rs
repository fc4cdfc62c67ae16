//! One kube-apiserver fixture, a control-plane process in front of it and the agent processes
//! of its regions (all operating that fixture), each logging to its own file: what a test of the
//! agent path needs to create a region, bootstrap its agent and reach it through
//! [`AgentTopology`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harmony::domain::RunContext;
use harmony::infra::control_plane::{
    AgentTopology, ControlPlaneClient, CreatedRegion, RegionStatus,
};
use harmony::types::{RegionId, ZoneId};
use harmony_agent_protocol::SecretString;

use crate::ApiServer;
use crate::multi_region::{Agent, AgentOptions, ControlPlane, ControlPlaneOptions, Pki};

/// How long a region may take to reach a health.
pub const HEALTH_WAIT: Duration = Duration::from_secs(60);

/// A region name (panics when it is not one).
pub fn region(s: &str) -> RegionId {
    RegionId::parse(s).unwrap()
}

/// A zone name (panics when it is not one).
pub fn zone(s: &str) -> ZoneId {
    ZoneId::parse(s).unwrap()
}

/// A fixture API server, a control plane with an admin client, and a folder for the agents'
/// identity, token and log files.
pub struct World {
    /// The API server every agent operates.
    pub server: ApiServer,
    /// The CA and server certificate of the control plane.
    pub pki: Pki,
    /// The control-plane process.
    pub cp: ControlPlane,
    /// An admin client of the control plane.
    pub client: ControlPlaneClient,
    /// Agents' files (`NAME.identity`, `NAME.bootstrap-token`, `NAME.log`).
    pub dir: tempfile::TempDir,
    agent_bin: PathBuf,
}

impl World {
    /// Starts a control plane (`cp_bin`, with `options`) in front of `server`; agents are
    /// started later from `agent_bin`. Tests pass `env!("CARGO_BIN_EXE_e2e-control-plane")` and
    /// `env!("CARGO_BIN_EXE_e2e-agent")`. Panics when something cannot start.
    pub fn start(
        server: ApiServer,
        cp_bin: &Path,
        agent_bin: &Path,
        options: ControlPlaneOptions,
    ) -> Self {
        let pki = Pki::new().unwrap();
        let cp = ControlPlane::start(cp_bin, &pki, options).unwrap_or_else(|e| panic!("{e}"));
        let client = cp.client();
        let dir = tempfile::tempdir().unwrap();
        Self {
            server,
            pki,
            cp,
            client,
            dir,
            agent_bin: agent_bin.to_path_buf(),
        }
    }

    /// Creates region `r` with zone `z` (panics when it exists).
    pub async fn create(&self, r: &str, z: &str) -> CreatedRegion {
        self.client
            .create_region(&region(r), &zone(z))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("the region is new")
    }

    /// Options for an agent of `r`/`z` with its own identity file, presenting `token` if any.
    pub fn agent_options(
        &self,
        name: &str,
        r: &str,
        z: &str,
        token: Option<&SecretString>,
    ) -> AgentOptions {
        let token_file = token.map(|t| {
            let p = self.dir.path().join(format!("{name}.bootstrap-token"));
            std::fs::write(&p, t.expose()).unwrap();
            p
        });
        AgentOptions {
            bootstrap_token_file: token_file,
            ..AgentOptions::new(
                &self.cp.url(),
                r,
                z,
                self.pki.ca(),
                self.server.kubeconfig(),
                self.dir.path().join(format!("{name}.identity")),
            )
        }
    }

    /// Starts agent `name` with `o`, logging to [`Self::log`].
    pub fn agent(&self, name: &str, o: &AgentOptions) -> Agent {
        Agent::start(&self.agent_bin, o, &self.log(name)).unwrap()
    }

    /// Creates region `r` with zone `z`, starts its agent `name` with the bootstrap token and
    /// waits until the region is healthy.
    pub async fn region_with_agent(&self, name: &str, r: &str, z: &str) -> Agent {
        let created = self.create(r, z).await;
        let o = self.agent_options(name, r, z, Some(&created.bootstrap_token));
        let agent = self.agent(name, &o);
        self.wait_health(r, "healthy").await;
        agent
    }

    /// An [`AgentTopology`] named `r` for region `r`, with `ctx`'s settings.
    pub fn topology(&self, r: &str, ctx: &RunContext) -> AgentTopology {
        AgentTopology::new(r, region(r), self.cp.client(), ctx)
    }

    /// The log file of agent `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// Region `r`'s status (panics when it does not exist).
    pub async fn status(&self, r: &str) -> RegionStatus {
        self.client
            .region(r)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("region exists")
    }

    /// Waits up to [`HEALTH_WAIT`] for region `r` to be `want` (`healthy`, `unavailable`...).
    pub async fn wait_health(&self, r: &str, want: &str) -> RegionStatus {
        let started = Instant::now();
        loop {
            let s = self.status(r).await;
            if s.health.to_string() == want {
                return s;
            }
            assert!(
                started.elapsed() < HEALTH_WAIT,
                "region {r} not {want} after {HEALTH_WAIT:?}: {s:?}\ncontrol plane log:\n{}",
                self.cp.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
