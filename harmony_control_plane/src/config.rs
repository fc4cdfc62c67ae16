//! The control plane's flags (clap), and the settings, store choice and listener limits they
//! imply.

use clap::Args;
use harmony_agent_protocol::MAX_FRAME_BYTES;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::CpError;
use crate::http::listener::Limits;
use crate::services::{HealthPolicy, Settings};
use crate::store::StoreConfig;

/// The WebSocket read buffer sizes `--ws-buffer-bytes` accepts: below 1 KiB tungstenite reads
/// in pieces too small to hold a heartbeat; above 16 MiB, per connection, it is a mistake.
pub const WS_BUFFER_BYTES: std::ops::RangeInclusive<usize> = 1024..=16 * 1024 * 1024;

/// Command-line configuration of the control plane.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address to listen on (agents and API share it).
    #[arg(long, env = "HARMONY_CP_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Server certificate chain (PEM).
    #[arg(long, env = "HARMONY_CP_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// Server private key (PEM).
    #[arg(long, env = "HARMONY_CP_TLS_KEY")]
    pub tls_key: PathBuf,
    /// File holding the admin token (first line); the API requires it as a Bearer token.
    #[arg(long, env = "HARMONY_CP_ADMIN_TOKEN_FILE")]
    pub admin_token_file: PathBuf,
    /// SQLite state file, used when no --database-url is given (one replica only).
    #[arg(
        long,
        env = "HARMONY_CP_DB",
        default_value = "harmony-control-plane.sqlite"
    )]
    pub db: PathBuf,
    /// PostgreSQL URL (`postgres://user:password@host:port/db`) shared by every replica; when
    /// absent the state lives in the SQLite file of --db.
    #[arg(long, env = "HARMONY_CP_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,
    /// PEM CA bundle that signs the PostgreSQL server's certificate (CloudNativePG: Secret
    /// `<cluster>-ca`, key `ca.crt`); the system's CAs when absent. TLS follows the URL's
    /// `sslmode` (`disable`, `prefer` by default, `require`) and always verifies the server.
    #[arg(long, env = "HARMONY_CP_DATABASE_CA_FILE", value_name = "FILE")]
    pub database_ca_file: Option<PathBuf>,
    /// PostgreSQL connections of this replica's pool; the replica opens two more, one for
    /// events and one for writing heartbeats.
    #[arg(long, default_value_t = 16)]
    pub database_pool_size: usize,
    /// How long a call waits for a free pooled PostgreSQL connection, and a statement for a
    /// lock (`lock_timeout`), in milliseconds; past it the HTTP call is answered 503
    /// (overloaded) with `Retry-After`.
    #[arg(long, default_value_t = 10_000)]
    pub database_pool_wait_ms: u64,
    /// This replica's name in session rows and logs (default: host name and a random suffix).
    #[arg(long, env = "HARMONY_CP_REPLICA_ID")]
    pub replica_id: Option<String>,
    /// Heartbeat interval agents are told to use, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub heartbeat_ms: u64,
    /// A region whose last heartbeat is older than this is unhealthy (default 3 heartbeats).
    #[arg(long)]
    pub unhealthy_after_ms: Option<u64>,
    /// A region whose last heartbeat is older than this is unavailable (default 6 heartbeats).
    #[arg(long)]
    pub unavailable_after_ms: Option<u64>,
    /// How long a bootstrap token stays valid, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub bootstrap_ttl_s: u64,
    /// How long an agent identity stays valid, in seconds (agents renew after 2/3 of it).
    #[arg(long, default_value_t = 30 * 24 * 3600)]
    pub identity_ttl_s: u64,
    /// How long an identity stays valid after its agent renewed it, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub identity_overlap_s: u64,
    /// Longest a request API call waits for a region's answer, in seconds.
    #[arg(long, default_value_t = 300)]
    pub max_request_wait_s: u64,
    /// Finished requests (and their results) are kept this long, in seconds.
    #[arg(long, default_value_t = 7 * 24 * 3600)]
    pub request_retention_s: u64,
    /// WebSocket read buffer per agent connection, in bytes (tungstenite defaults to 128 KiB).
    /// Kept for the connection's life, so small: heartbeats are a few hundred bytes, and a
    /// larger frame grows it for that frame (measured in docs/benchmarks.md). 1 KiB to 16 MiB.
    #[arg(long, default_value_t = 1024)]
    pub ws_buffer_bytes: usize,
    /// Most connections open at once (agents and API); more wait in the kernel's backlog.
    #[arg(long, default_value_t = 20_000)]
    pub max_connections: usize,
    /// TLS handshakes run at once; more accepted connections wait their turn (a reconnect storm
    /// then comes back in order instead of every handshake finishing late).
    #[arg(long, default_value_t = 128)]
    pub max_handshakes: usize,
    /// A TLS handshake not finished within this many milliseconds is dropped.
    #[arg(long, default_value_t = 10_000)]
    pub tls_handshake_timeout_ms: u64,
    /// A request head not received within this many milliseconds closes the connection.
    #[arg(long, default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// A kept-alive HTTP connection idle this many milliseconds is closed (agents' WebSockets
    /// are not: their sessions time out on missing heartbeats).
    #[arg(long, default_value_t = 60_000)]
    pub idle_timeout_ms: u64,
    /// More log output (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// This host's name, for the default replica id.
fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "control-plane".into())
}

impl Config {
    /// The health thresholds this configuration implies.
    pub fn policy(&self) -> HealthPolicy {
        let hb = Duration::from_millis(self.heartbeat_ms.max(50));
        HealthPolicy {
            heartbeat: hb,
            unhealthy_after: self
                .unhealthy_after_ms
                .map(Duration::from_millis)
                .unwrap_or(hb * 3),
            unavailable_after: self
                .unavailable_after_ms
                .map(Duration::from_millis)
                .unwrap_or(hb * 6),
        }
    }

    /// The replica id: `--replica-id`, or the host name and a random suffix (so a restarted
    /// replica never mistakes the previous run's sessions for its own).
    pub fn replica_id(&self) -> String {
        match &self.replica_id {
            Some(id) => id.clone(),
            None => {
                let suffix = crate::services::random_hex(3).unwrap_or_else(|_| "0".into());
                format!("{}-{suffix}", host_name())
            }
        }
    }

    /// The services' settings; refuses contradictory flags.
    pub fn settings(&self) -> Result<Settings, CpError> {
        let policy = self.policy();
        if policy.unhealthy_after >= policy.unavailable_after {
            return Err(CpError::Config {
                field: "--unhealthy-after-ms",
                problem: format!(
                    "{} ms is not below --unavailable-after-ms {} ms; unhealthy must come first",
                    policy.unhealthy_after.as_millis(),
                    policy.unavailable_after.as_millis()
                ),
            });
        }
        if self.identity_overlap_s >= self.identity_ttl_s {
            return Err(CpError::Config {
                field: "--identity-overlap-s",
                problem: format!(
                    "{} s is not below --identity-ttl-s {} s; the overlap after a renewal must be shorter than an identity's life",
                    self.identity_overlap_s, self.identity_ttl_s
                ),
            });
        }
        if !WS_BUFFER_BYTES.contains(&self.ws_buffer_bytes) {
            return Err(CpError::Config {
                field: "--ws-buffer-bytes",
                problem: format!(
                    "{} bytes is outside {} to {}; give a size in that range (the default, 1024, suits heartbeats)",
                    self.ws_buffer_bytes,
                    WS_BUFFER_BYTES.start(),
                    WS_BUFFER_BYTES.end()
                ),
            });
        }
        let replica_id = self.replica_id();
        if replica_id.is_empty() || replica_id.len() > 100 {
            return Err(CpError::Config {
                field: "--replica-id",
                problem: "must be 1 to 100 characters; omit it for host name and a random suffix"
                    .into(),
            });
        }
        Ok(Settings {
            replica_id,
            policy,
            bootstrap_ttl: Duration::from_secs(self.bootstrap_ttl_s.max(1)),
            identity_ttl: Duration::from_secs(self.identity_ttl_s.max(1)),
            identity_overlap: Duration::from_secs(self.identity_overlap_s),
            max_request_wait: Duration::from_secs(self.max_request_wait_s.max(1)),
            request_retention: Duration::from_secs(self.request_retention_s.max(1)),
            max_frame_bytes: MAX_FRAME_BYTES,
        })
    }

    /// Which database holds the state: PostgreSQL with --database-url, else SQLite at --db.
    pub fn store(&self) -> StoreConfig {
        match &self.database_url {
            Some(url) if !url.trim().is_empty() => StoreConfig::Postgres {
                url: url.trim().to_string(),
                pool_size: self.database_pool_size.max(1),
                pool_wait: Duration::from_millis(self.database_pool_wait_ms.max(1)),
                ca_file: self.database_ca_file.clone(),
            },
            _ => StoreConfig::Sqlite(self.db.clone()),
        }
    }

    /// The listener's limits.
    pub fn limits(&self) -> Limits {
        Limits {
            tls_handshake_timeout: Duration::from_millis(self.tls_handshake_timeout_ms.max(1)),
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms.max(1)),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms.max(1)),
            max_connections: self.max_connections.max(1),
            max_handshakes: self.max_handshakes.max(1),
            ..Limits::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: Config,
    }

    fn parse(extra: &[&str]) -> Config {
        let mut args = vec![
            "cp",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--admin-token-file",
            "a",
        ];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args).unwrap().config
    }

    #[test]
    fn no_database_flag_means_the_sqlite_default() {
        // clap also reads HARMONY_CP_DATABASE_URL: only check the default where it is unset.
        let c = parse(&[]);
        if std::env::var_os("HARMONY_CP_DATABASE_URL").is_none() {
            assert_eq!(
                c.store(),
                StoreConfig::Sqlite(PathBuf::from("harmony-control-plane.sqlite"))
            );
        }
        let pg = parse(&[
            "--database-url",
            "postgres://h/db",
            "--database-pool-size",
            "4",
            "--database-ca-file",
            "/etc/pg/ca.crt",
        ]);
        assert_eq!(
            pg.store(),
            StoreConfig::Postgres {
                url: "postgres://h/db".into(),
                pool_size: 4,
                pool_wait: Duration::from_secs(10),
                ca_file: Some(PathBuf::from("/etc/pg/ca.crt")),
            }
        );
    }

    #[test]
    fn defaults_and_overrides_of_the_new_flags() {
        let c = parse(&[]);
        let s = c.settings().unwrap();
        assert_eq!(s.identity_ttl, Duration::from_secs(30 * 86_400));
        assert_eq!(s.identity_overlap, Duration::from_secs(3600));
        assert!(s.replica_id.len() > 7, "{}", s.replica_id);
        let l = c.limits();
        assert_eq!(l.max_connections, 20_000);
        assert_eq!(l.idle_timeout, Duration::from_secs(60));
        let c = parse(&[
            "--replica-id",
            "cp-2",
            "--idle-timeout-ms",
            "1500",
            "--header-read-timeout-ms",
            "800",
            "--max-connections",
            "10",
        ]);
        assert_eq!(c.settings().unwrap().replica_id, "cp-2");
        let l = c.limits();
        assert_eq!(l.idle_timeout, Duration::from_millis(1500));
        assert_eq!(l.header_read_timeout, Duration::from_millis(800));
        assert_eq!(l.max_connections, 10);
    }

    #[test]
    fn contradictory_flags_are_refused_naming_the_flag() {
        let bad = parse(&[
            "--unhealthy-after-ms",
            "2000",
            "--unavailable-after-ms",
            "1000",
        ]);
        assert!(
            bad.settings()
                .unwrap_err()
                .to_string()
                .starts_with("--unhealthy-after-ms")
        );
        for size in ["512", "0", "16777217"] {
            let bad = parse(&["--ws-buffer-bytes", size]);
            let e = bad.settings().unwrap_err().to_string();
            assert!(
                e.starts_with("--ws-buffer-bytes") && e.contains("1024 to 16777216"),
                "{size}: {e}"
            );
        }
        assert!(parse(&["--ws-buffer-bytes", "1024"]).settings().is_ok());
        let bad = parse(&["--identity-ttl-s", "60", "--identity-overlap-s", "60"]);
        assert!(
            bad.settings()
                .unwrap_err()
                .to_string()
                .starts_with("--identity-overlap-s")
        );
    }
}
