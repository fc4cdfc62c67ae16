//! The topology itself: its settings, its errors, how it is built from the run's flags, and
//! its preparation; its capabilities are in `capabilities.rs`.

use async_trait::async_trait;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harmony_types::{IpAddress, Url};

use crate::domain::capability::{
    CapabilityError, ClusterLayout, DeclaredRole, HostBmc, HostInventory, RoleRule, RootDeviceRule,
};
use crate::domain::operator::OperatorHandle;
use crate::domain::{
    ExecutionMode, PreparationError, PreparationOutcome, RunContext, Topology, ValidationError,
};
use crate::infra::bare_metal::ServiceMode;
use crate::infra::dnsmasq::{Dnsmasq, DnsmasqSettings};
use crate::infra::haproxy::{Haproxy, HaproxySettings};
use crate::infra::http_boot::{BootSink, DiscoverySink, HttpBoot};
use crate::infra::inventory_sqlite::SqliteInventory;
use crate::infra::redfish::RedfishPower;

use super::discovery::{check_discovery_image, discovery_range};
use super::nodes::KubeClusterNodes;
use super::power;
use super::roles::{self, parse_roles_file, parse_roles_file_bmcs};
use super::{duplicates, reports, timeline};

/// How long a role phase waits for hosts to be discovered unless told otherwise.
pub const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Where the site's services run and the files Harmony owns for them (apply mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareMetalServices {
    /// The folder Harmony owns: `dnsmasq/`, `haproxy/`, `http/` go under it.
    pub dir: PathBuf,
    /// Interface DHCP is served on; `None` serves it where the services address is configured.
    pub interface: Option<String>,
    /// Port of the HTTP boot server.
    pub http_port: u16,
    /// DNS port.
    pub dns_port: u16,
    /// Resolvers for names outside the cluster domain.
    pub upstream_dns: Vec<IpAddress>,
    /// The dnsmasq binary.
    pub dnsmasq: PathBuf,
    /// The haproxy binary.
    pub haproxy: PathBuf,
    /// Words run before each service binary (e.g. `ip netns exec NAME`).
    pub prefix: Vec<String>,
    /// Start the embedded HTTP boot server on the services address when the topology is prepared.
    pub serve_http: bool,
    /// First and last address dnsmasq leases to machines it has no reservation for, so they
    /// boot the discovery image; `None` takes the last 50 host addresses of the network. It
    /// must hold no address of the layout.
    pub discovery_range: Option<(IpAddress, IpAddress)>,
    /// The folder holding the discovery image (`vmlinuz`, `initrd.img`, built by
    /// `discovery-image/build.sh`), served as `/discovery/<file>`; `None` serves none and
    /// unknown machines print how to build it.
    pub discovery_image: Option<PathBuf>,
}

impl Default for BareMetalServices {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("/var/lib/harmony"),
            interface: None,
            http_port: 8080,
            dns_port: 53,
            upstream_dns: Vec::new(),
            dnsmasq: PathBuf::from("dnsmasq"),
            haproxy: PathBuf::from("haproxy"),
            prefix: Vec::new(),
            serve_http: true,
            discovery_range: None,
            discovery_image: None,
        }
    }
}

/// The topology could not be set up from what the operator gave.
#[derive(Debug, thiserror::Error)]
pub enum HaClusterError {
    /// The layout is inconsistent.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The roles file is missing or wrong.
    #[error("roles file {path}: {problem}")]
    Roles {
        /// The file.
        path: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// The inventory cannot be opened.
    #[error("inventory: {0}")]
    Inventory(#[from] CapabilityError),
    /// The `--inventory` file given to render or plan from cannot be read.
    #[error(
        "--inventory {path}: {problem}; fix: give --inventory the inventory.sqlite Harmony's discovery keeps in the services folder, or leave it out to render from the declared hosts"
    )]
    InventoryFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// An HA cluster on bare metal and the services that bring it up.
pub struct HAClusterTopology {
    pub(super) layout: ClusterLayout,
    pub(super) mode: ExecutionMode,
    pub(super) root: PathBuf,
    pub(super) services: BareMetalServices,
    pub(super) dnsmasq: Dnsmasq,
    pub(super) haproxy: Haproxy,
    pub(super) http: HttpBoot,
    pub(super) inventory: Arc<SqliteInventory>,
    pub(super) operator: OperatorHandle,
    pub(super) declared: Vec<DeclaredRole>,
    pub(super) discovery_timeout: Duration,
    /// `--inventory FILE` as given, to name it in messages (`None`: the services folder's own).
    pub(super) inventory_flag: Option<PathBuf>,
    /// `--assign ROLE=RULE`, checked against the layout and the roles file.
    pub(super) role_rules: Vec<RoleRule>,
    /// `--root-device TARGET=HINTS`.
    pub(super) root_device_rules: Vec<RootDeviceRule>,
    pub(super) cluster_nodes: Option<KubeClusterNodes>,
    /// `--bmc`: hosts powered and PXE booted through their BMCs.
    pub(super) bmcs: Vec<HostBmc>,
    /// The Redfish client, built when there is a `--bmc` (its CA file read at start).
    pub(super) power: Option<RedfishPower>,
}

impl std::fmt::Debug for HAClusterTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HAClusterTopology")
            .field("cluster", &self.layout.cluster_domain())
            .field("mode", &self.mode)
            .field("root", &self.root)
            .finish()
    }
}

impl HAClusterTopology {
    /// Builds the topology from the layout, the services and the operator's flags: render into
    /// `--out DIR/<cluster>/` by default, `--plan` to compare, `--apply` to run the services
    /// with their files in `services.dir`.
    pub fn from_context(
        layout: ClusterLayout,
        services: BareMetalServices,
        ctx: &RunContext,
    ) -> Result<Self, HaClusterError> {
        layout.validate()?;
        let discovery = discovery_range(&layout, services.discovery_range)?;
        if let Some(dir) = &services.discovery_image {
            check_discovery_image(dir)?;
        }
        let (mode, service_mode) = if ctx.plan {
            (ExecutionMode::Plan, ServiceMode::Plan)
        } else if ctx.apply {
            (ExecutionMode::Apply, ServiceMode::Apply)
        } else {
            (ExecutionMode::Render, ServiceMode::Render)
        };
        let root = match mode {
            ExecutionMode::Apply => services.dir.clone(),
            _ => ctx.out_dir.join(layout.cluster_name.as_str()),
        };
        let inventory = match (&ctx.inventory, mode) {
            (Some(path), ExecutionMode::Apply) => SqliteInventory::open_lazily(path),
            (None, ExecutionMode::Apply) => {
                SqliteInventory::open_lazily(&root.join("inventory.sqlite"))
            }
            (Some(path), _) => copy_into_memory(path)?,
            (None, _) => SqliteInventory::in_memory()?,
        };
        let declared = match &ctx.roles {
            Some(path) => parse_roles_file(path, &layout)?,
            None => Vec::new(),
        };
        // `--bmc` and the roles file's `[[bmc]]` entries, checked together.
        let mut bmcs = ctx.bmc.clone();
        if let Some(path) = &ctx.roles {
            bmcs.extend(parse_roles_file_bmcs(path)?);
        }
        let layout_for_rules = layout.clone();
        let declared_for_rules = declared.clone();
        let http_url = Url::parse(&format!(
            "http://{}:{}/",
            layout.services, services.http_port
        ))
        .map_err(|e| {
            ValidationError::new(
                "services.http_port",
                e.to_string(),
                "use a port in 1..=65535",
            )
        })?;
        let dnsmasq = Dnsmasq::new(
            DnsmasqSettings {
                dir: root.join("dnsmasq"),
                host_dir: services.dir.join("dnsmasq"),
                listen: layout.services,
                interface: services.interface.clone(),
                dns_port: services.dns_port,
                network: layout.network,
                gateway: layout.gateway,
                domain: layout.cluster_domain(),
                upstream_dns: services.upstream_dns.clone(),
                binary: services.dnsmasq.clone(),
                prefix: services.prefix.clone(),
                discovery_range: Some(discovery),
            },
            service_mode,
        );
        let haproxy = Haproxy::new(
            HaproxySettings {
                dir: root.join("haproxy"),
                host_dir: services.dir.join("haproxy"),
                binary: services.haproxy.clone(),
                prefix: services.prefix.clone(),
            },
            service_mode,
        );
        let http = HttpBoot::new(root.join("http"), http_url, service_mode)
            .with_discovery_image(services.discovery_image.clone());
        Ok(Self {
            layout,
            mode,
            root,
            services,
            dnsmasq,
            haproxy,
            http,
            inventory: Arc::new(inventory),
            operator: ctx.operator.clone(),
            declared,
            discovery_timeout: ctx.discovery_timeout.unwrap_or(DEFAULT_DISCOVERY_TIMEOUT),
            inventory_flag: ctx.inventory.clone(),
            role_rules: roles::check_role_rules(
                &ctx.assign,
                &layout_for_rules,
                &declared_for_rules,
            )?,
            root_device_rules: ctx.root_device.clone(),
            cluster_nodes: None,
            power: power::client(ctx, &bmcs)?,
            bmcs,
        })
    }

    /// Reaches the installed cluster (its Nodes and certificate signing requests) through
    /// `kubeconfig`: usually `<ignition dir>/auth/kubeconfig`, which `openshift-install create
    /// ignition-configs` writes. Nothing is read or contacted until a Score asks, and never in
    /// render or plan mode.
    pub fn with_cluster_kubeconfig(mut self, kubeconfig: PathBuf) -> Self {
        self.cluster_nodes = Some(KubeClusterNodes::new(kubeconfig));
        self
    }

    /// The kubeconfig of the installed cluster, when one was given.
    pub fn cluster_kubeconfig(&self) -> Option<&std::path::Path> {
        self.cluster_nodes.as_ref().map(|n| n.kubeconfig())
    }

    pub(super) fn cluster_nodes(&self) -> Result<&KubeClusterNodes, CapabilityError> {
        self.cluster_nodes
            .as_ref()
            .ok_or_else(|| CapabilityError::Unsupported {
                what: "reading the installed cluster's nodes".into(),
                backend: format!("topology {}", self.layout.cluster_name),
                reason: "no kubeconfig for the installed cluster was given; build the topology with `with_cluster_kubeconfig(<ignition dir>/auth/kubeconfig)` (the OKD example does so from --ignition-dir, or --cluster-kubeconfig FILE)".into(),
            })
    }

    /// The folder the files go to.
    pub fn root(&self) -> &PathBuf {
        &self.root
    }

    /// The dnsmasq backend.
    pub fn dnsmasq(&self) -> &Dnsmasq {
        &self.dnsmasq
    }

    /// The haproxy backend.
    pub fn haproxy(&self) -> &Haproxy {
        &self.haproxy
    }

    /// The HTTP boot backend.
    pub fn http(&self) -> &HttpBoot {
        &self.http
    }

    /// The inventory.
    pub fn inventory(&self) -> &SqliteInventory {
        &self.inventory
    }

    /// A sink for the discovery endpoint: a report is taken only from the address dnsmasq
    /// leased to one of its MACs; one that would change a known host's MACs or serial (or
    /// claims another host's MAC) is held for the operator; others are recorded in the
    /// inventory, with a boot event for each MAC.
    pub fn discovery_sink(&self) -> DiscoverySink {
        let inventory = self.inventory.clone();
        let leases = self.dnsmasq.lease_file();
        Arc::new(move |client, report| reports::take_report(&inventory, &leases, client, report))
    }

    /// A sink for the HTTP boot server that records, in the inventory, each host seen
    /// fetching its per-MAC iPXE script (the evidence that a requested reboot happened) and
    /// every boot file each host fetches (its boot timeline).
    pub fn boot_sink(&self) -> BootSink {
        timeline::boot_sink(self.inventory.clone(), self.dnsmasq.lease_file())
    }

    /// Serves HTTP boot and discovery on an already bound listener (e.g. one opened inside a
    /// network namespace) instead of binding the services address at preparation.
    pub fn serve_http_on(
        &self,
        listener: std::net::TcpListener,
    ) -> Result<SocketAddr, CapabilityError> {
        self.http.serve_on_with_boots(
            listener,
            Some(self.discovery_sink()),
            Some(self.boot_sink()),
        )
    }

    /// Stops the daemons this topology started (tests and teardown).
    pub fn stop_services(&self) -> Result<(), CapabilityError> {
        self.dnsmasq.stop()?;
        self.haproxy.stop()
    }
}

fn copy_into_memory(path: &std::path::Path) -> Result<SqliteInventory, HaClusterError> {
    let unusable = |problem: String| HaClusterError::InventoryFile {
        path: path.display().to_string(),
        problem,
    };
    if !path.is_file() {
        return Err(unusable("no such file".into()));
    }
    let file = SqliteInventory::open_read_only(path).map_err(|e| unusable(sqlite_problem(&e)))?;
    let memory = SqliteInventory::in_memory()?;
    let run = async {
        for h in file.known_hosts().await? {
            memory.record_host(&h).await?;
        }
        for a in file.role_assignments().await? {
            memory.assign_role(&a).await?;
        }
        for b in file.host_bindings().await? {
            memory.bind_host(&b).await?;
        }
        Ok::<_, CapabilityError>(())
    };
    futures::executor::block_on(run).map_err(|e| unusable(sqlite_problem(&e)))?;
    Ok(memory)
}

/// What SQLite said, without the wrapper that names the file again.
fn sqlite_problem(e: &CapabilityError) -> String {
    match e {
        CapabilityError::Rejected { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[async_trait]
impl Topology for HAClusterTopology {
    fn name(&self) -> &str {
        self.layout.cluster_name.as_str()
    }

    fn mode(&self) -> ExecutionMode {
        self.mode
    }

    fn validate_inventory(
        &self,
        inventory: &crate::domain::Inventory,
    ) -> Result<(), ValidationError> {
        let flag = self
            .inventory_flag
            .as_ref()
            .map(|p| p.display().to_string());
        let location = flag
            .clone()
            .unwrap_or_else(|| self.inventory.location().to_string());
        let source = duplicates::Source::File(&location, flag.is_some());
        let stored = self.inventory.hosts_read_only().map_err(|e| {
            ValidationError::new(
                "--inventory",
                format!("cannot read {location}: {}", sqlite_problem(&e)),
                "give --inventory the inventory.sqlite Harmony keeps in the services folder",
            )
        })?;
        duplicates::check_unique_macs(&inventory.hosts, &stored, source)
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        let fail = |reason: String| PreparationError {
            topology: self.layout.cluster_name.to_string(),
            reason,
        };
        if self.mode == ExecutionMode::Plan {
            return Ok(PreparationOutcome::Noop);
        }
        for sub in ["dnsmasq/tftp", "dnsmasq/conf.d", "haproxy", "http/www"] {
            let dir = self.root.join(sub);
            std::fs::create_dir_all(&dir).map_err(|e| {
                fail(format!(
                    "cannot create {}: {e}; pass a writable folder (--out DIR, or the services folder)",
                    dir.display()
                ))
            })?;
        }
        let image = match self.http.discovery_image() {
            Some(dir) => format!("; discovery image from {}", dir.display()),
            None => "; no discovery image: unknown machines cannot report themselves until one is built with discovery-image/build.sh DIR and served with --discovery-image DIR".to_string(),
        };
        if self.mode != ExecutionMode::Apply {
            return Ok(PreparationOutcome::Success(format!(
                "rendering into {}{image}",
                self.root.display()
            )));
        }
        for (daemon, arg) in [
            (self.dnsmasq.daemon(), "--version"),
            (self.haproxy.daemon(), "-v"),
        ] {
            daemon
                .run(&[arg.to_string()])
                .map_err(|e| fail(e.to_string()))?;
        }
        let mut started = String::new();
        if self.services.serve_http && !self.http.is_serving() {
            let addr = SocketAddr::from((self.layout.services.addr(), self.services.http_port));
            let listener = std::net::TcpListener::bind(addr).map_err(|e| {
                fail(format!(
                    "cannot listen on {addr} for HTTP boot: {e}; configure {} on this machine or choose another http_port",
                    self.layout.services
                ))
            })?;
            self.serve_http_on(listener)
                .map_err(|e| fail(e.to_string()))?;
            started = format!("; HTTP boot server on {addr}");
        }
        Ok(PreparationOutcome::Success(format!(
            "services folder {}{started}{image}",
            self.root.display()
        )))
    }
}
