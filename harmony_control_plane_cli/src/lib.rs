//! The `harmony-control-plane` program: the control plane library
//! ([`harmony_control_plane`]) and, optionally, Harmony's operator embedded in the same process.
//!
//! The operator needs `harmony`, `harmony_operator` and kube; composing it here keeps the
//! control-plane library free of them (ADR 0008).

mod allocator;

use clap::Parser;
use harmony_control_plane::{Config, read_admin_token};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The program's flags: the control plane's, and the embedded operator's.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "harmony-control-plane",
    version,
    about = "Harmony control plane: regions, agents over WSS, durable requests (SQLite, or PostgreSQL for N replicas)"
)]
pub struct Cli {
    /// The control plane.
    #[command(flatten)]
    pub control_plane: Config,
    /// Also run Harmony's operator (the PostgreSQL resources' controller) against the API
    /// server of this kubeconfig, where the resources live.
    #[arg(long, env = "HARMONY_CP_OPERATOR_KUBECONFIG", value_name = "FILE")]
    pub operator_kubeconfig: Option<PathBuf>,
    /// The CA bundle (PEM) the embedded operator trusts to reach this control plane for
    /// `Site`s reached through region agents; system roots when absent.
    #[arg(long, value_name = "FILE")]
    pub operator_ca: Option<PathBuf>,
    /// The operator reconciles every Ready resource again after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub operator_resync_s: u64,
    /// Run the embedded operator only while this process holds a `coordination.k8s.io` Lease
    /// in the operator's API server. Needed when several control-plane replicas run it against
    /// the same API server: without it each would reconcile every resource.
    #[arg(long)]
    pub operator_leader_election: bool,
    /// The namespace of that Lease, in the operator's API server (it must exist).
    #[arg(
        long,
        default_value = "harmony-system",
        requires = "operator_leader_election"
    )]
    pub operator_lease_namespace: String,
    /// The name of that Lease.
    #[arg(
        long,
        default_value = "harmony-control-plane-operator",
        requires = "operator_leader_election"
    )]
    pub operator_lease_name: String,
}

impl Cli {
    /// The embedded operator's leader election, when `--operator-leader-election` is set.
    pub fn operator_election(&self) -> Option<harmony_operator::LeaderElection> {
        self.operator_leader_election
            .then(|| harmony_operator::LeaderElection {
                lease_name: self.operator_lease_name.clone(),
                lease_namespace: self.operator_lease_namespace.clone(),
                ..harmony_operator::LeaderElection::default()
            })
    }
}

fn fail(e: impl std::fmt::Display) -> ! {
    log::error!("{e}");
    eprintln!("error: {e}");
    std::process::exit(2);
}

/// The program's `main`: malloc's settings ([`allocator`]), then the runtime, then
/// [`cli_main`].
pub fn program_main() {
    allocator::one_malloc_arena_unless_configured();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the async runtime: {e}")))
        .block_on(cli_main());
}

/// The `harmony-control-plane` program: parse flags, log, serve until SIGTERM or Ctrl-C.
pub async fn cli_main() {
    let cli = Cli::parse();
    harmony_agent_protocol::logging::init(cli.control_plane.verbose);
    let operator = match &cli.operator_kubeconfig {
        None => None,
        Some(path) => Some(
            operator_clients(path, &cli)
                .await
                .unwrap_or_else(|e| fail(e)),
        ),
    };
    // Bound before the operator starts, so its loopback client finds the port listening.
    let server = harmony_control_plane::Server::bind(&cli.control_plane)
        .await
        .unwrap_or_else(|e| fail(e));
    let cp = server.cp.clone();
    let resync = Duration::from_secs(cli.operator_resync_s.max(1));
    let election = cli.operator_election();
    let operator = async move {
        match operator {
            Some((client, control_plane)) => {
                log::info!("operator: reconciling PostgreSQL resources, resync every {resync:?}");
                let config = harmony_operator::OperatorConfig {
                    resync,
                    control_plane: Some(control_plane),
                    ..harmony_operator::OperatorConfig::default()
                };
                match election {
                    None => harmony_operator::run(client, config).await,
                    Some(election) => {
                        log::info!(
                            "operator: leader election on Lease {}/{}",
                            election.lease_namespace,
                            election.lease_name
                        );
                        // The lease is left to expire when the process ends: the shutdown
                        // below stops everything at once.
                        let never = std::future::pending::<()>();
                        if let Err(e) =
                            harmony_operator::run_elected(client, config, election, never).await
                        {
                            log::error!("operator: {e}");
                        }
                    }
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = operator => {
            log::error!("the operator stopped");
            std::process::exit(1);
        }
        _ = server.run() => {}
        _ = harmony_control_plane::shutdown_signal() => {
            log::info!("shutting down on signal");
            harmony_control_plane::services::stop(&cp).await;
        }
    }
}

/// The address the embedded operator dials: the listen address, loopback when unspecified.
fn loopback(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// The embedded operator's clients: the API server where its resources live, and this control
/// plane itself (over loopback, for `Site`s reached through region agents).
async fn operator_clients(
    path: &Path,
    cli: &Cli,
) -> Result<
    (
        kube::Client,
        harmony::infra::control_plane::ControlPlaneClient,
    ),
    String,
> {
    let client = operator_client(path).await?;
    let ca = match &cli.operator_ca {
        Some(p) => {
            Some(std::fs::read(p).map_err(|e| format!("--operator-ca {}: {e}", p.display()))?)
        }
        None => None,
    };
    let admin = read_admin_token(&cli.control_plane.admin_token_file).map_err(|e| e.to_string())?;
    let url = format!("https://{}", loopback(cli.control_plane.listen));
    let control_plane =
        harmony::infra::control_plane::ControlPlaneClient::new(&url, admin, ca.as_deref())
            .map_err(|e| format!("the operator's client for {url}: {e}"))?;
    Ok((client, control_plane))
}

/// A client for the API server where the operator's resources live.
async fn operator_client(path: &Path) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("--operator-kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| format!("--operator-kubeconfig {}: {e}", path.display()))?;
    kube::Client::try_from(config)
        .map_err(|e| format!("--operator-kubeconfig {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_operator_is_elected_only_when_asked() {
        let base = [
            "harmony-control-plane",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--admin-token-file",
            "a",
        ];
        assert!(
            Cli::try_parse_from(base)
                .unwrap()
                .operator_election()
                .is_none()
        );
        let mut with = base.to_vec();
        with.extend([
            "--operator-leader-election",
            "--operator-lease-namespace",
            "ops",
        ]);
        let election = Cli::try_parse_from(with)
            .unwrap()
            .operator_election()
            .unwrap();
        assert_eq!(
            (
                election.lease_namespace.as_str(),
                election.lease_name.as_str()
            ),
            ("ops", "harmony-control-plane-operator")
        );
        // A lease flag without the election is a mistake, not silently ignored.
        let mut stray = base.to_vec();
        stray.extend(["--operator-lease-name", "x"]);
        assert!(Cli::try_parse_from(stray).is_err());
    }

    #[test]
    fn every_flag_of_the_previous_program_still_parses() {
        let cli = Cli::try_parse_from([
            "harmony-control-plane",
            "--listen",
            "127.0.0.1:9443",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--admin-token-file",
            "a",
            "--db",
            "s.sqlite",
            "--heartbeat-ms",
            "200",
            "--unhealthy-after-ms",
            "600",
            "--unavailable-after-ms",
            "1500",
            "--bootstrap-ttl-s",
            "60",
            "--max-request-wait-s",
            "30",
            "--ws-buffer-bytes",
            "8192",
            "--operator-kubeconfig",
            "k",
            "--operator-ca",
            "ca.pem",
            "--operator-resync-s",
            "10",
            "-vv",
        ])
        .unwrap();
        assert_eq!(cli.control_plane.heartbeat_ms, 200);
        assert_eq!(cli.control_plane.verbose, 2);
        assert_eq!(cli.operator_resync_s, 10);
        assert_eq!(
            loopback(cli.control_plane.listen),
            "127.0.0.1:9443".parse().unwrap()
        );
        assert_eq!(
            loopback("0.0.0.0:8443".parse().unwrap()),
            "127.0.0.1:8443".parse().unwrap()
        );
    }
}
