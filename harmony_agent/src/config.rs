//! The agent's flags (each also read from an environment variable) and their checks.

use clap::Parser;
use harmony::infra::kube::KubeTarget;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::AgentError;
use crate::{backoff, connection, providers};

/// Command-line configuration of the agent (every flag also reads an environment variable).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "harmony-agent",
    version,
    about = "Harmony region agent: dials out to the control plane and executes ops on its cluster"
)]
pub struct Config {
    /// Control-plane URL, e.g. `wss://cp.example.com` (https:// is accepted too).
    #[arg(long, env = "HARMONY_CONTROL_PLANE_URL")]
    pub control_plane: String,
    /// The region this agent serves.
    #[arg(long, env = "HARMONY_REGION")]
    pub region: String,
    /// The zone (this cluster).
    #[arg(long, env = "HARMONY_ZONE")]
    pub zone: String,
    /// PEM bundle of CAs that sign the control plane's certificate; the system roots otherwise.
    #[arg(long, env = "HARMONY_CA_BUNDLE")]
    pub ca_bundle: Option<PathBuf>,
    /// File holding the one-time bootstrap token (used only while no identity is stored).
    #[arg(long, env = "HARMONY_BOOTSTRAP_TOKEN_FILE")]
    pub bootstrap_token_file: Option<PathBuf>,
    /// File to keep the identity in (created with mode 0600).
    #[arg(
        long,
        env = "HARMONY_IDENTITY_FILE",
        conflicts_with = "identity_secret"
    )]
    pub identity_file: Option<PathBuf>,
    /// In-cluster: keep the identity in this Secret of the agent's namespace.
    #[arg(long, env = "HARMONY_IDENTITY_SECRET")]
    pub identity_secret: Option<String>,
    /// Namespace of the identity Secret and of the request records (one ConfigMap per recent
    /// request, so a redelivered request is never executed twice). Default: the pod's namespace
    /// in-cluster, else `harmony-agent`; created when missing if the agent may.
    #[arg(long, env = "HARMONY_NAMESPACE")]
    pub namespace: Option<String>,
    /// The agent's own ServiceAccount, which the RoleBinding it keeps in each project namespace
    /// binds (ClusterRole `harmony-agent-managed`), in `--namespace`. Default: `harmony-agent`
    /// in-cluster; out of cluster (with `--kubeconfig`) no RoleBinding is made unless this is
    /// given, since the kubeconfig's user is not a ServiceAccount. `none` turns it off.
    #[arg(long, env = "HARMONY_SERVICE_ACCOUNT")]
    pub service_account: Option<String>,
    /// Kubeconfig of the cluster to operate; in-cluster service account when absent.
    #[arg(long, env = "HARMONY_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// First reconnect delay ceiling, in milliseconds.
    #[arg(long, default_value_t = DEFAULT_BACKOFF_BASE_MS)]
    pub backoff_base_ms: u64,
    /// Largest reconnect delay ceiling, in milliseconds.
    #[arg(long, default_value_t = DEFAULT_BACKOFF_MAX_MS)]
    pub backoff_max_ms: u64,
    /// How many request ids the in-memory dedupe window (a cache in front of the request
    /// records) remembers.
    #[arg(long, default_value_t = 4096)]
    pub dedupe_capacity: usize,
    /// How long a finished request stays remembered, in seconds: in memory, and as its request
    /// record (ConfigMap) in the cluster, which a background task deletes once older.
    #[arg(long, env = "HARMONY_DEDUPE_TTL_S", default_value_t = 3600)]
    pub dedupe_ttl_s: u64,
    /// The largest frame the agent accepts, in bytes, stated in its hello: the control plane
    /// refuses larger requests at submit (413).
    #[arg(long, env = "HARMONY_MAX_FRAME_BYTES", default_value_t = harmony_agent_protocol::MAX_FRAME_BYTES as u64)]
    pub max_frame_bytes: u64,
    /// Renew the identity this many seconds before it expires; by default once 2/3 of its
    /// lifetime has passed.
    #[arg(long, env = "HARMONY_RENEW_BEFORE_S")]
    pub renew_before_s: Option<u64>,
    /// Address for `/healthz` and `/readyz` (plain HTTP, for kubelet probes); off when absent.
    #[arg(long, env = "HARMONY_HEALTH_LISTEN")]
    pub health_listen: Option<std::net::SocketAddr>,
    /// Address of the local provider REST API (plain HTTP); off when absent.
    #[arg(long, env = "HARMONY_PROVIDER_LISTEN")]
    pub provider_listen: Option<std::net::SocketAddr>,
    /// File holding the bearer token the provider API requires (mandatory off loopback).
    #[arg(long, env = "HARMONY_PROVIDER_TOKEN_FILE")]
    pub provider_token_file: Option<PathBuf>,
    /// Where provider registrations and created instances persist (default: `providers.json`
    /// beside `--identity-file`).
    #[arg(long, env = "HARMONY_PROVIDERS_FILE")]
    pub providers_file: Option<PathBuf>,
    /// Built-in providers that may be enabled: comma-separated service types, or `none`.
    #[arg(
        long,
        env = "HARMONY_BUILTIN_PROVIDERS",
        default_value = "container,postgresql,vm"
    )]
    pub builtin_providers: String,
    /// How often the cluster's APIs are re-discovered for the built-in providers, in seconds.
    #[arg(long, default_value_t = 30)]
    pub discovery_interval_s: u64,
    /// How often providers are health-checked, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub provider_health_interval_ms: u64,
    /// A provider is unhealthy once its last successful check is this old (default 3 intervals).
    #[arg(long)]
    pub provider_unhealthy_after_ms: Option<u64>,
    /// A provider is unavailable once its last successful check is older (default 6 intervals).
    #[arg(long)]
    pub provider_unavailable_after_ms: Option<u64>,
    /// How often the status of each created instance is polled, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub instance_poll_ms: u64,
    /// More log output (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Config {
    /// Where the cluster's credentials come from.
    pub fn kube_target(&self) -> KubeTarget {
        match &self.kubeconfig {
            Some(p) => KubeTarget::Kubeconfig {
                path: Some(p.clone()),
                context: None,
            },
            None => KubeTarget::InCluster,
        }
    }

    /// The provider settings, checked before anything is started.
    pub fn provider_settings(&self) -> Result<ProviderSettings, AgentError> {
        let bad = |field: &'static str, problem: String| AgentError::Config { field, problem };
        let builtins = providers::registry::Builtin::parse_list(&self.builtin_providers)
            .map_err(|p| bad("--builtin-providers", p))?;
        if self.provider_health_interval_ms < 10 {
            return Err(bad(
                "--provider-health-interval-ms",
                format!(
                    "{} is too short; give at least 10",
                    self.provider_health_interval_ms
                ),
            ));
        }
        if self.instance_poll_ms < 10 {
            return Err(bad(
                "--instance-poll-ms",
                format!("{} is too short; give at least 10", self.instance_poll_ms),
            ));
        }
        if self.discovery_interval_s == 0 {
            return Err(bad(
                "--discovery-interval-s",
                "must be at least 1 second".into(),
            ));
        }
        let interval = self.provider_health_interval_ms;
        let unhealthy = self.provider_unhealthy_after_ms.unwrap_or(interval * 3);
        let unavailable = self.provider_unavailable_after_ms.unwrap_or(interval * 6);
        if unhealthy >= unavailable {
            return Err(bad(
                "--provider-unhealthy-after-ms",
                format!(
                    "{unhealthy} ms is not below --provider-unavailable-after-ms ({unavailable} ms); the unhealthy threshold must come first"
                ),
            ));
        }
        let file = match (&self.providers_file, &self.identity_file) {
            (Some(f), _) => Some(f.clone()),
            (None, Some(identity)) => Some(
                identity
                    .parent()
                    .map(|d| d.join("providers.json"))
                    .unwrap_or_else(|| PathBuf::from("providers.json")),
            ),
            (None, None) => None,
        };
        if self.provider_listen.is_some() && file.is_none() {
            return Err(bad(
                "--providers-file",
                "--provider-listen needs somewhere to keep registrations: pass --providers-file FILE (or --identity-file, beside which providers.json is kept)".into(),
            ));
        }
        let token = match &self.provider_token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    bad("--provider-token-file", format!("{}: {e}", path.display()))
                })?;
                let text = text.trim();
                if text.is_empty() {
                    return Err(bad(
                        "--provider-token-file",
                        format!("{} is empty; put the bearer token in it", path.display()),
                    ));
                }
                Some(harmony_agent_protocol::SecretString::new(text))
            }
            None => None,
        };
        if let Some(addr) = self.provider_listen
            && !addr.ip().is_loopback()
            && token.is_none()
        {
            return Err(bad(
                "--provider-token-file",
                format!(
                    "--provider-listen {addr} is not a loopback address, so the provider API needs a bearer token: pass --provider-token-file FILE, or listen on 127.0.0.1"
                ),
            ));
        }
        Ok(ProviderSettings {
            registry: providers::registry::RegistryConfig {
                policy: providers::registry::HealthPolicy {
                    interval: Duration::from_millis(interval),
                    unhealthy_after: Duration::from_millis(unhealthy),
                    unavailable_after: Duration::from_millis(unavailable),
                },
                builtins,
                file,
                discovery_interval: Duration::from_secs(self.discovery_interval_s),
                instance_poll: Duration::from_millis(self.instance_poll_ms),
            },
            listen: self.provider_listen,
            token,
        })
    }

    /// The namespace of the identity Secret and the request records: `--namespace`, else the
    /// pod's namespace (in-cluster), else [`DEFAULT_NAMESPACE`].
    pub fn namespace(&self) -> String {
        if let Some(n) = &self.namespace {
            return n.clone();
        }
        std::fs::read_to_string(connection::NAMESPACE_FILE)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
    }

    /// The ServiceAccount (namespace, name) the agent binds in project namespaces, if any: see
    /// `--service-account`.
    pub fn service_account(&self) -> Option<(String, String)> {
        let name = match self.service_account.as_deref().map(str::trim) {
            Some("none") | Some("") => return None,
            Some(name) => name.to_string(),
            None if self.kubeconfig.is_none() => DEFAULT_SERVICE_ACCOUNT.to_string(),
            None => return None,
        };
        Some((self.namespace(), name))
    }

    /// Checks the flags the connection and the request records use.
    pub fn check(&self) -> Result<(), AgentError> {
        let bad = |field: &'static str, problem: String| AgentError::Config { field, problem };
        if !(MIN_FRAME_BYTES..=MAX_FRAME_LIMIT).contains(&self.max_frame_bytes) {
            return Err(bad(
                "--max-frame-bytes",
                format!(
                    "{} is out of range; give {MIN_FRAME_BYTES} to {MAX_FRAME_LIMIT} (default {})",
                    self.max_frame_bytes,
                    harmony_agent_protocol::MAX_FRAME_BYTES
                ),
            ));
        }
        if self.dedupe_ttl_s == 0 {
            return Err(bad(
                "--dedupe-ttl-s",
                "must be at least 1 second; it should outlast the control plane's redeliveries (default 3600)".into(),
            ));
        }
        let namespace = self.namespace();
        if harmony::types::Dns1123Label::parse(&namespace).is_err() {
            return Err(bad(
                "--namespace",
                format!(
                    "{namespace:?} is not a namespace name; use lower-case letters, digits and '-'"
                ),
            ));
        }
        if let Some((_, name)) = self.service_account()
            && harmony::types::Dns1123Label::parse(&name).is_err()
        {
            return Err(bad(
                "--service-account",
                format!(
                    "{name:?} is not a ServiceAccount name; give the agent's ServiceAccount (default harmony-agent) or none"
                ),
            ));
        }
        Ok(())
    }

    /// The reconnect backoff.
    pub fn backoff(&self) -> backoff::Backoff {
        backoff::Backoff::new(
            Duration::from_millis(self.backoff_base_ms),
            Duration::from_millis(self.backoff_max_ms),
        )
    }
}

/// The first reconnect delay ceiling (`--backoff-base-ms`), in milliseconds. The agents
/// benchmark's simulated agents reconnect with these defaults too.
pub const DEFAULT_BACKOFF_BASE_MS: u64 = 1000;
/// The largest reconnect delay ceiling (`--backoff-max-ms`), in milliseconds.
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 60_000;

/// The namespace of the request records (and identity Secret) out of cluster.
pub const DEFAULT_NAMESPACE: &str = "harmony-agent";
/// The agent's ServiceAccount in-cluster when `--service-account` is not given.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "harmony-agent";
/// The smallest `--max-frame-bytes`: a frame must hold a useful request.
pub const MIN_FRAME_BYTES: u64 = 64 * 1024;
/// The largest `--max-frame-bytes` (64 MiB): larger frames belong in several requests.
pub const MAX_FRAME_LIMIT: u64 = 64 * 1024 * 1024;

/// The checked provider settings.
pub struct ProviderSettings {
    /// What the registry needs.
    pub registry: providers::registry::RegistryConfig,
    /// Where the provider API listens.
    pub listen: Option<std::net::SocketAddr>,
    /// The bearer token the provider API requires.
    pub token: Option<harmony_agent_protocol::SecretString>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &[&str]) -> Config {
        let mut args = vec![
            "harmony-agent",
            "--control-plane",
            "wss://cp",
            "--region",
            "r1",
            "--zone",
            "z1",
        ];
        args.extend_from_slice(extra);
        Config::try_parse_from(args).unwrap()
    }

    fn problem(extra: &[&str]) -> String {
        match config(extra).provider_settings() {
            Ok(_) => panic!("accepted {extra:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn provider_flags_default_and_are_checked() {
        let s = config(&["--identity-file", "/var/lib/agent/identity"])
            .provider_settings()
            .unwrap();
        assert_eq!(s.registry.builtins.len(), 3);
        assert_eq!(s.registry.policy.interval, Duration::from_millis(5000));
        assert_eq!(
            s.registry.policy.unhealthy_after,
            Duration::from_millis(15_000)
        );
        assert_eq!(
            s.registry.policy.unavailable_after,
            Duration::from_millis(30_000)
        );
        assert_eq!(s.registry.discovery_interval, Duration::from_secs(30));
        assert_eq!(s.registry.instance_poll, Duration::from_millis(5000));
        assert_eq!(
            s.registry.file.as_deref(),
            Some(std::path::Path::new("/var/lib/agent/providers.json"))
        );
        assert!(s.listen.is_none());
        let s = config(&[
            "--builtin-providers",
            "none",
            "--provider-health-interval-ms",
            "100",
        ])
        .provider_settings()
        .unwrap();
        assert!(s.registry.builtins.is_empty() && s.registry.file.is_none());
        assert_eq!(
            s.registry.policy.unavailable_after,
            Duration::from_millis(600)
        );

        let e = problem(&[
            "--provider-unhealthy-after-ms",
            "500",
            "--provider-unavailable-after-ms",
            "500",
        ]);
        assert!(e.starts_with("--provider-unhealthy-after-ms:"), "{e}");
        let e = problem(&["--provider-listen", "127.0.0.1:0"]);
        assert!(e.starts_with("--providers-file:"), "{e}");
        let e = problem(&[
            "--provider-listen",
            "0.0.0.0:7000",
            "--providers-file",
            "/tmp/p.json",
        ]);
        assert!(e.starts_with("--provider-token-file:"), "{e}");
        let e = problem(&["--builtin-providers", "container,redis"]);
        assert!(e.starts_with("--builtin-providers:"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let token = token.to_str().unwrap();
        let s = config(&[
            "--provider-listen",
            "0.0.0.0:7000",
            "--providers-file",
            "/tmp/p.json",
            "--provider-token-file",
            token,
        ])
        .provider_settings()
        .unwrap();
        assert_eq!(
            s.token.map(|t| t.expose().to_string()).as_deref(),
            Some("s3cret")
        );
    }

    #[test]
    fn frame_limit_namespace_and_renewal_flags_default_and_are_checked() {
        let c = config(&[]);
        assert_eq!(
            c.max_frame_bytes,
            harmony_agent_protocol::MAX_FRAME_BYTES as u64
        );
        assert_eq!(c.renew_before_s, None);
        assert!(c.check().is_ok());
        assert_eq!(config(&["--namespace", "agents"]).namespace(), "agents");
        let e = config(&["--max-frame-bytes", "1000"]).check().unwrap_err();
        assert!(e.to_string().starts_with("--max-frame-bytes: 1000"), "{e}");
        let e = config(&["--dedupe-ttl-s", "0"]).check().unwrap_err();
        assert!(e.to_string().starts_with("--dedupe-ttl-s:"), "{e}");
        let e = config(&["--namespace", "Bad_NS"]).check().unwrap_err();
        assert!(e.to_string().starts_with("--namespace:"), "{e}");
        assert_eq!(
            config(&["--renew-before-s", "600"]).renew_before_s,
            Some(600)
        );
    }

    #[test]
    fn the_service_account_defaults_in_cluster_only() {
        let ns = |c: &Config| c.namespace();
        let c = config(&["--namespace", "agents"]);
        assert_eq!(
            c.service_account(),
            Some((ns(&c), "harmony-agent".to_string()))
        );
        let c = config(&["--kubeconfig", "/k", "--namespace", "agents"]);
        assert_eq!(c.service_account(), None);
        let c = config(&["--kubeconfig", "/k", "--service-account", "bot"]);
        assert_eq!(c.service_account().map(|s| s.1).as_deref(), Some("bot"));
        assert_eq!(
            config(&["--service-account", "none"]).service_account(),
            None
        );
        let e = config(&["--service-account", "Bad_SA"])
            .check()
            .unwrap_err();
        assert!(e.to_string().starts_with("--service-account:"), "{e}");
    }
}
