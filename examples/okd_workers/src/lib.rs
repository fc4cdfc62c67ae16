//! OKD workers on a declared bare-metal topology: three control-plane hosts, a bootstrap host
//! and two worker slots. With `--apply` the worker machines come from discovery, as
//! docs/modules/okd.md walks through: the workers phase waits for them to report (progress,
//! `--discovery-timeout`), then gives them the role by prompt on a terminal, or by `--assign`
//! rules (MAC or size) without one, and installs each to the disk `--root-device` names. Render
//! and plan (no `--apply`) use two sample machines declared in [`inventory`], so the dnsmasq,
//! haproxy and iPXE files can be read on any machine without discovery.

use clap::builder::TypedValueParser as _;
use std::path::PathBuf;
use std::process::ExitCode;

use harmony::domain::Inventory;
use harmony::domain::RunContext;
use harmony::domain::Score;
use harmony::domain::capability::ClusterNodes;
use harmony::domain::capability::{ClusterLayout, LogicalHost};
use harmony::domain::inventory::{Disk, HostRole, PhysicalHost, RoleAssignment};
use harmony::infra::okd::{BareMetalServices, HAClusterTopology, check_discovery_image};
use harmony_modules::okd::{
    DEFAULT_NODE_TIMEOUT, OkdBootstrapRemovalScore, OkdHostsScore, OkdInstallation,
    OkdInstallationReportScore, OkdNodesScore, OkdPrepareScore, OkdSanityCheckScore, OkdTopology,
};
use harmony_types::{Dns1123Label, HostName, Id, InvalidValue, IpAddress, Ipv4Cidr, MacAddress};
use std::time::Duration;

/// The cluster: `okd.example.com` on 192.168.50.0/24, services and load balancer on .2.
pub fn layout() -> Result<ClusterLayout, InvalidValue> {
    let host = |name: &str, ip: &str| -> Result<LogicalHost, InvalidValue> {
        Ok(LogicalHost::new(
            HostName::parse(name)?,
            IpAddress::parse(ip)?,
        ))
    };
    Ok(ClusterLayout {
        cluster_name: Dns1123Label::parse("okd")?,
        base_domain: HostName::parse("example.com")?,
        network: Ipv4Cidr::parse("192.168.50.0/24")?,
        gateway: IpAddress::parse("192.168.50.1")?,
        load_balancer: IpAddress::parse("192.168.50.2")?,
        services: IpAddress::parse("192.168.50.2")?,
        bootstrap: host("bootstrap", "192.168.50.10")?,
        control_plane: vec![
            host("cp0", "192.168.50.11")?,
            host("cp1", "192.168.50.12")?,
            host("cp2", "192.168.50.13")?,
        ],
        workers: vec![
            host("worker0", "192.168.50.21")?,
            host("worker1", "192.168.50.22")?,
        ],
    })
}

/// Two sample worker machines, declared with the facts discovery would report, and their
/// role: what render and plan show the files for. `--apply` declares none (machines come from
/// discovery; see [`cli_main`]).
pub fn inventory() -> Result<Inventory, InvalidValue> {
    let machine = |id: &str, mac: &str| -> Result<PhysicalHost, InvalidValue> {
        Ok(PhysicalHost {
            id: Id::parse(id)?,
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse(mac)?],
            cpu_count: 16,
            memory_bytes: 64 << 30,
            disks: vec![Disk {
                name: "nvme0n1".into(),
                size_bytes: 960 << 30,
                rotational: false,
                ..Default::default()
            }],
        })
    };
    let hosts = vec![
        machine("rack14-u10", "52:54:00:50:00:21")?,
        machine("rack14-u12", "52:54:00:50:00:22")?,
    ];
    let assignments = hosts
        .iter()
        .map(|h| RoleAssignment {
            host: h.id.clone(),
            role: HostRole::Worker,
        })
        .collect();
    Ok(Inventory {
        location: Some("paris-dc2 rack 14".into()),
        hosts,
        assignments,
    })
}

/// Prepare, bootstrap removal, workers, worker nodes, sanity check, installation report,
/// waiting up to [`DEFAULT_NODE_TIMEOUT`] for nodes.
pub fn scores<T: OkdTopology + ClusterNodes>(install: &OkdInstallation) -> Vec<Box<dyn Score<T>>> {
    scores_with_timeout(install, DEFAULT_NODE_TIMEOUT)
}

/// The Scores, waiting up to `node_timeout` for the control plane (before the bootstrap host
/// leaves the load balancer) and for the workers to be Ready nodes.
pub fn scores_with_timeout<T: OkdTopology + ClusterNodes>(
    install: &OkdInstallation,
    node_timeout: Duration,
) -> Vec<Box<dyn Score<T>>> {
    vec![
        Box::new(OkdPrepareScore::new(install.clone())),
        // The control plane was brought up before this program runs: once it is Ready the
        // bootstrap host leaves the load balancer, before workers fetch their configuration.
        Box::new(OkdBootstrapRemovalScore::new().with_timeout(node_timeout)),
        Box::new(OkdHostsScore::new(HostRole::Worker, install.clone())),
        Box::new(OkdNodesScore::new(HostRole::Worker).with_timeout(node_timeout)),
        Box::new(OkdSanityCheckScore),
        Box::new(OkdInstallationReportScore),
    ]
}

/// The installed cluster's admin kubeconfig: `--cluster-kubeconfig`, else the one
/// `openshift-install create ignition-configs` wrote into `<ignition dir>/auth/kubeconfig`.
pub fn cluster_kubeconfig(flags: &Flags) -> Option<PathBuf> {
    flags.cluster_kubeconfig.clone().or_else(|| {
        flags
            .ignition_dir
            .as_ref()
            .map(|d| d.join("auth").join("kubeconfig"))
    })
}

/// Refuses an `--ignition-dir` without the ignition files, naming the flag (the Score's own
/// message names its `ignition_dir` field, which a user of the example does not set).
fn check_ignition_dir(install: &OkdInstallation) -> Result<(), String> {
    let prepare = OkdPrepareScore::new(install.clone());
    match <OkdPrepareScore as Score<HAClusterTopology>>::validate(&prepare) {
        Err(e) if e.field == "ignition_dir" => {
            Err(format!("--ignition-dir: {}; fix: {}", e.problem, e.fix))
        }
        _ => Ok(()),
    }
}

/// The example's own flags; each falls back on an environment variable.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Render the OKD workers bring-up (dnsmasq, haproxy, iPXE) into harmony-out/okd/, or apply it to this machine's services with --apply --ignition-dir DIR"
)]
pub struct Flags {
    /// The folder `openshift-install create ignition-configs --dir DIR` wrote the ignition files
    /// into; required with --apply.
    // An empty value gets through clap (which refuses an empty path) so that an empty
    // variable counts as unset, as docs/cli.md says.
    #[arg(long, value_name = "DIR", env = "HARMONY_OKD_IGNITION_DIR", value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from))]
    pub ignition_dir: Option<PathBuf>,

    /// The folder Harmony owns on this machine with --apply (dnsmasq/, haproxy/, http/ and the
    /// inventory go under it).
    #[arg(
        long,
        value_name = "DIR",
        env = "HARMONY_OKD_SERVICES_DIR",
        default_value = "/var/lib/harmony/okd",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub services_dir: PathBuf,

    /// The folder `discovery-image/build.sh DIR` wrote the discovery image into (vmlinuz,
    /// initrd.img): the HTTP boot server serves it to machines without a reservation, which
    /// boot it and report their hardware. Without it they print how to build it.
    #[arg(long, value_name = "DIR", env = "HARMONY_OKD_DISCOVERY_IMAGE", help_heading = "Bare metal", value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from))]
    pub discovery_image: Option<PathBuf>,

    /// The installed cluster's admin kubeconfig, used with --apply to wait for the nodes and
    /// approve their certificate signing requests; default: <ignition dir>/auth/kubeconfig.
    #[arg(long, value_name = "FILE", env = "HARMONY_OKD_KUBECONFIG", value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from))]
    pub cluster_kubeconfig: Option<PathBuf>,

    /// How long to wait for the control plane and the workers to be Ready nodes (seconds).
    #[arg(long, value_name = "SECONDS", env = "HARMONY_OKD_NODE_TIMEOUT", default_value_t = DEFAULT_NODE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub node_timeout: u64,
}

/// The `example-okd-workers` program: renders the bring-up into `harmony-out/okd/` (for the
/// sample machines of [`inventory`]), or applies it to this machine's dnsmasq, haproxy and HTTP
/// boot server with `--apply`, its workers found by discovery.
pub async fn cli_main() -> ExitCode {
    let console = harmony_cli::Console::stdio();
    let (args, flags) = match harmony_cli::parse_args::<HAClusterTopology, Flags, _, _>(
        std::env::args_os(),
        &console,
    ) {
        Ok(parsed) => parsed,
        Err(code) => return ExitCode::from(code),
    };
    let (layout, inventory) = match (layout(), inventory()) {
        (Ok(l), Ok(i)) => (l, i),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Applying, the machines are the racked ones that discovery finds, never the samples.
    let inventory = if args.bare_metal.apply {
        Inventory::empty()
    } else {
        inventory
    };
    let code = harmony_cli::run_args(args, console, inventory, move |ctx: &RunContext| {
        let mut flags: Flags = flags;
        // An empty environment variable counts as unset.
        flags.ignition_dir = flags.ignition_dir.filter(|d| !d.as_os_str().is_empty());
        flags.cluster_kubeconfig = flags
            .cluster_kubeconfig
            .filter(|d| !d.as_os_str().is_empty());
        if flags.services_dir.as_os_str().is_empty() {
            return Err("--services-dir: empty (given as \"\", or HARMONY_OKD_SERVICES_DIR is set but empty); give the folder Harmony owns, or leave --services-dir out and unset the variable for the default /var/lib/harmony/okd".to_string());
        }
        if ctx.apply && flags.ignition_dir.is_none() {
            return Err(
                "--ignition-dir: required with --apply, or installed hosts would have nothing to apply; run `openshift-install create ignition-configs --dir DIR` and pass --ignition-dir DIR (or set HARMONY_OKD_IGNITION_DIR)"
                    .to_string(),
            );
        }
        let kubeconfig = cluster_kubeconfig(&flags);
        let node_timeout = Duration::from_secs(flags.node_timeout);
        let install = OkdInstallation {
            ignition_dir: flags.ignition_dir,
            ..OkdInstallation::default()
        };
        check_ignition_dir(&install)?;
        let discovery_image = flags.discovery_image.filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = &discovery_image {
            check_discovery_image(dir)
                .map_err(|e| format!("--discovery-image: {}; fix: {}", e.problem, e.fix))?;
        }
        let services = BareMetalServices {
            dir: flags.services_dir,
            discovery_image,
            ..BareMetalServices::default()
        };
        let mut topology =
            HAClusterTopology::from_context(layout, services, ctx).map_err(|e| e.to_string())?;
        if let Some(kubeconfig) = kubeconfig {
            topology = topology.with_cluster_kubeconfig(kubeconfig);
        }
        Ok::<_, String>((topology, scores_with_timeout(&install, node_timeout)))
    })
    .await;
    ExitCode::from(code)
}
