//! The one e2e test world: a kube-apiserver fixture, the control plane in front of it (one
//! process on SQLite, one on PostgreSQL, or replicas on PostgreSQL behind haproxy) and the agent
//! processes of its regions (all operating that fixture), each logging to its own file.
//!
//! A test starts it with [`WorldOptions`], names the binaries once with [`bins!`], and waits
//! with [`crate::eventually::eventually`]:
//!
//! ```no_run
//! # async fn demo() {
//! use harmony_e2e::world::{Bins, World, WorldOptions};
//!
//! // An integration test writes `harmony_e2e::bins!()`; a doc test has no binaries to name.
//! let bins = Bins { control_plane: "e2e-control-plane", agent: "e2e-agent" };
//! let w = World::start(bins, WorldOptions::default());
//! let _agent = w.region_with_agent("eu", "eu", "z1").await;
//! assert!(w.status("eu").await.is_healthy());
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use harmony::domain::RunContext;
use harmony::infra::control_plane::{
    AgentTopology, ControlPlaneClient, CreatedRegion, RegionStatus,
};
use harmony::types::{RegionId, ZoneId};
use harmony_agent_protocol::SecretString;

use crate::ApiServer;
use crate::eventually::eventually;
use crate::ha::Replicas;
use crate::multi_region::{Agent, AgentOptions, ControlPlane, ControlPlaneOptions, Pki};
use crate::postgres::PgServer;

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

/// The binaries a world starts. Build it with [`bins!`], which names them in the calling test
/// crate (where Cargo sets `CARGO_BIN_EXE_*`).
#[derive(Debug, Clone, Copy)]
pub struct Bins {
    /// `e2e-control-plane`.
    pub control_plane: &'static str,
    /// `e2e-agent`.
    pub agent: &'static str,
}

impl Bins {
    /// The control plane's path.
    pub fn control_plane(&self) -> &'static Path {
        Path::new(self.control_plane)
    }

    /// The agent's path.
    pub fn agent(&self) -> &'static Path {
        Path::new(self.agent)
    }

    /// The binaries in `dir`, for a program that is not a test (a benchmark finds them beside
    /// itself); the two paths live as long as the program.
    pub fn in_folder(dir: &Path) -> Self {
        let leak = |name: &str| -> &'static str {
            Box::leak(
                dir.join(name)
                    .to_string_lossy()
                    .into_owned()
                    .into_boxed_str(),
            )
        };
        Self {
            control_plane: leak("e2e-control-plane"),
            agent: leak("e2e-agent"),
        }
    }
}

/// The e2e binaries ([`Bins`]), named once for every test.
#[macro_export]
macro_rules! bins {
    () => {
        $crate::world::Bins {
            control_plane: env!("CARGO_BIN_EXE_e2e-control-plane"),
            agent: env!("CARGO_BIN_EXE_e2e-agent"),
        }
    };
}

/// Where the control plane keeps its state, and how many processes serve it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Plane {
    /// One process with its own SQLite file (or `database_url` when the options give one).
    #[default]
    Sqlite,
    /// One process on a PostgreSQL server the world starts (and stops).
    Postgres,
    /// `count` replicas on one PostgreSQL server, behind haproxy accepting `max_agents`
    /// connections; agents dial haproxy.
    Replicas {
        /// How many replicas (`cp-0`, `cp-1`, ...).
        count: usize,
        /// haproxy's connection limit.
        max_agents: usize,
    },
}

/// What a [`World`] starts.
#[derive(Default)]
pub struct WorldOptions {
    /// The API server the agents operate; a plain [`ApiServer::start`] when `None`.
    pub server: Option<ApiServer>,
    /// The control plane's store and replicas.
    pub plane: Plane,
    /// Every control-plane process's options (replicas get their id, database and token).
    pub control_plane: ControlPlaneOptions,
}

/// The control-plane processes of a world.
#[allow(
    clippy::large_enum_variant,
    reason = "one value per test world, never moved in a loop"
)]
enum Processes {
    One {
        cp: ControlPlane,
        pki: Pki,
        // Declared after `cp`: dropped (stopped) after it.
        _pg: Option<PgServer>,
    },
    Replicas(Replicas),
}

/// A fixture API server, the control plane with an admin client, and a folder for the agents'
/// identity, token and log files. Everything it started stops when it is dropped.
pub struct World {
    /// The control-plane processes (declared first: they stop before the API server).
    processes: Processes,
    /// An admin client of the control plane (through haproxy when there are replicas).
    pub client: ControlPlaneClient,
    /// The API server every agent operates.
    pub server: ApiServer,
    /// Agents' files (`NAME.identity`, `NAME.bootstrap-token`, `NAME.log`).
    pub dir: tempfile::TempDir,
    agent_bin: &'static Path,
}

impl World {
    /// Starts what `options` says; agents are started later with [`Self::agent`]. Panics when
    /// something cannot start.
    pub fn start(bins: Bins, options: WorldOptions) -> Self {
        let server = options
            .server
            .unwrap_or_else(|| ApiServer::start().unwrap_or_else(|e| panic!("{e}")));
        let cp_bin = bins.control_plane();
        let processes = match options.plane {
            Plane::Sqlite => {
                let pki = Pki::new().unwrap();
                let cp = ControlPlane::start(cp_bin, &pki, options.control_plane)
                    .unwrap_or_else(|e| panic!("{e}"));
                Processes::One { cp, pki, _pg: None }
            }
            Plane::Postgres => {
                let pg = PgServer::start().unwrap_or_else(|e| panic!("{e}"));
                pg.create_database("harmony").unwrap();
                let pki = Pki::new().unwrap();
                let o = ControlPlaneOptions {
                    database_url: Some(pg.url("harmony")),
                    ..options.control_plane
                };
                let cp = ControlPlane::start(cp_bin, &pki, o).unwrap_or_else(|e| panic!("{e}"));
                Processes::One {
                    cp,
                    pki,
                    _pg: Some(pg),
                }
            }
            Plane::Replicas { count, max_agents } => Processes::Replicas(
                Replicas::start(cp_bin, count, options.control_plane, max_agents)
                    .unwrap_or_else(|e| panic!("{e}")),
            ),
        };
        let client = match &processes {
            Processes::One { cp, .. } => cp.client(),
            Processes::Replicas(ha) => ControlPlaneClient::new(
                &ha.agent_url(),
                SecretString::new(ha.admin_token.clone()),
                Some(ha.pki.ca_pem.as_bytes()),
            )
            .unwrap_or_else(|e| panic!("{e}")),
        };
        Self {
            processes,
            client,
            server,
            dir: tempfile::tempdir().unwrap(),
            agent_bin: bins.agent(),
        }
    }

    /// The control-plane process, or replica `cp-0` when there are several.
    pub fn cp(&self) -> &ControlPlane {
        match &self.processes {
            Processes::One { cp, .. } => cp,
            Processes::Replicas(ha) => &ha.replicas[0],
        }
    }

    /// [`Self::cp`], to kill or restart it.
    pub fn cp_mut(&mut self) -> &mut ControlPlane {
        match &mut self.processes {
            Processes::One { cp, .. } => cp,
            Processes::Replicas(ha) => &mut ha.replicas[0],
        }
    }

    /// The replicas, their haproxy and database (panics when the world has one process).
    pub fn replicas(&self) -> &Replicas {
        match &self.processes {
            Processes::Replicas(ha) => ha,
            Processes::One { .. } => panic!("this world has one control-plane process"),
        }
    }

    /// [`Self::replicas`], to kill or restart them.
    pub fn replicas_mut(&mut self) -> &mut Replicas {
        match &mut self.processes {
            Processes::Replicas(ha) => ha,
            Processes::One { .. } => panic!("this world has one control-plane process"),
        }
    }

    /// The CA and server certificate of the control plane.
    pub fn pki(&self) -> &Pki {
        match &self.processes {
            Processes::One { pki, .. } => pki,
            Processes::Replicas(ha) => &ha.pki,
        }
    }

    /// The admin token.
    pub fn admin_token(&self) -> &str {
        match &self.processes {
            Processes::One { cp, .. } => &cp.admin_token,
            Processes::Replicas(ha) => &ha.admin_token,
        }
    }

    /// The URL agents (and [`Self::client`]) dial: the process, or haproxy.
    pub fn url(&self) -> String {
        match &self.processes {
            Processes::One { cp, .. } => cp.url(),
            Processes::Replicas(ha) => ha.agent_url(),
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
                &self.url(),
                r,
                z,
                self.pki().ca(),
                self.server.kubeconfig(),
                self.dir.path().join(format!("{name}.identity")),
            )
        }
    }

    /// Starts agent `name` with `o`, logging to [`Self::log`].
    pub fn agent(&self, name: &str, o: &AgentOptions) -> Agent {
        Agent::start(self.agent_bin, o, &self.log(name)).unwrap()
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
        AgentTopology::new(r, region(r), self.client.clone(), ctx)
    }

    /// The log file of agent `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// Every control-plane log (and haproxy's), then every agent log in [`Self::dir`], each
    /// headed by its name: for failure messages.
    pub fn logs(&self) -> String {
        let mut out = match &self.processes {
            Processes::One { cp, .. } => format!("----- control plane log\n{}\n", cp.logs()),
            Processes::Replicas(ha) => ha.logs(),
        };
        let mut files: Vec<_> = std::fs::read_dir(self.dir.path())
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|x| x == "log"))
        {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            out.push_str(&format!("----- {}\n{text}\n", f.display()));
        }
        out
    }

    /// Region `r`'s status (panics when it does not exist).
    pub async fn status(&self, r: &str) -> RegionStatus {
        self.client
            .region(r)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("region exists")
    }

    /// Waits up to [`HEALTH_WAIT`] until `ok` holds for region `r`'s status (`what` says what
    /// that is, for the failure message, which carries every log).
    pub async fn wait_region(
        &self,
        r: &str,
        what: &str,
        ok: impl Fn(&RegionStatus) -> bool,
    ) -> RegionStatus {
        eventually(HEALTH_WAIT, format!("region {r}: {what}"), || async {
            let s = self.status(r).await;
            if ok(&s) { Ok(s) } else { Err(s) }
        })
        .await
        .unwrap_or_else(|w| panic!("{w}\n{}", self.logs()))
    }

    /// Waits up to [`HEALTH_WAIT`] for region `r` to be `want` (`healthy`, `unavailable`...).
    pub async fn wait_health(&self, r: &str, want: &str) -> RegionStatus {
        self.wait_region(r, want, |s| s.health.to_string() == want)
            .await
    }
}
