//! haproxy as the TCP load balancer of a bare-metal site.
//!
//! Harmony owns one folder holding `haproxy.cfg` (rendered from a template) and the pid file.
//! In apply mode the configuration is checked with `haproxy -c` on a staging copy before the
//! real file is touched, then haproxy is started, or reloaded with `-sf` (a new process takes
//! the listeners; the old one finishes its connections and exits).

use askama::Template;
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::bare_metal::{Daemon, FileSync, ServiceMode};
use crate::domain::capability::{CapabilityError, HealthCheck, LoadBalancer, LoadBalancerService};
use crate::domain::{ChangeAction, ObjectChange};

/// Where the configuration goes and how haproxy runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaproxySettings {
    /// The folder Harmony writes `haproxy.cfg` into.
    pub dir: PathBuf,
    /// The folder the configuration names inside it (the admin socket): where haproxy runs
    /// it on its host. The same as `dir` when applying on this machine; when rendering, the
    /// folder the file will be installed into, so a render is the same bytes wherever written.
    pub host_dir: PathBuf,
    /// The haproxy binary.
    pub binary: PathBuf,
    /// Words run before the binary (e.g. `ip netns exec NAME`).
    pub prefix: Vec<String>,
}

/// The haproxy backend of the load-balancer capability.
#[derive(Debug)]
pub struct Haproxy {
    settings: HaproxySettings,
    mode: ServiceMode,
    lock: std::sync::Mutex<()>,
}

struct ServiceView {
    name: String,
    listen: String,
    check_lines: Vec<String>,
    servers: Vec<String>,
}

#[derive(Template)]
#[template(path = "haproxy/haproxy.cfg", escape = "none")]
struct Config {
    dir: String,
    services: Vec<ServiceView>,
}

const WAIT: Duration = Duration::from_secs(10);

/// Renders the configuration for `services` (sorted by port) with the admin socket in `dir`.
pub fn render_config(
    dir: &Path,
    services: &[LoadBalancerService],
) -> Result<String, CapabilityError> {
    let mut names = BTreeSet::new();
    let mut binds = BTreeSet::new();
    for s in services {
        let object = format!("load-balancer service {}", s.name);
        if s.name.is_empty()
            || !s
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(&object, "name must be letters, digits, '-' or '_'"));
        }
        if !names.insert(s.name.as_str()) {
            return Err(invalid(
                &object,
                "declared twice; give each service its own name",
            ));
        }
        if !binds.insert((s.listen_ip, s.port)) {
            return Err(invalid(
                &object,
                format!(
                    "{}:{} is already used by another service",
                    s.listen_ip, s.port
                ),
            ));
        }
        if s.backends.is_empty() {
            return Err(invalid(&object, "has no backend servers; add at least one"));
        }
    }
    let mut sorted: Vec<&LoadBalancerService> = services.iter().collect();
    sorted.sort_by_key(|s| (s.port, s.listen_ip));
    let views = sorted
        .into_iter()
        .map(|s| {
            let (check_lines, suffix) = match &s.health_check {
                HealthCheck::Tcp => (vec!["option tcp-check".to_string()], String::new()),
                HealthCheck::Https { path, port } => (
                    vec![
                        format!("option httpchk GET {path}"),
                        "http-check expect status 200".to_string(),
                    ],
                    format!(" port {port} check-ssl verify none"),
                ),
                HealthCheck::Http { path, port } => (
                    vec![
                        format!("option httpchk GET {path}"),
                        "http-check expect status 200".to_string(),
                    ],
                    format!(" port {port}"),
                ),
            };
            ServiceView {
                name: s.name.clone(),
                listen: format!("{}:{}", s.listen_ip, s.port),
                check_lines,
                servers: s
                    .backends
                    .iter()
                    .map(|b| {
                        format!(
                            "{} {}:{} check inter 2s fall 2 rise 1{suffix}",
                            b.name, b.ip, b.port
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let mut text = Config {
        dir: dir.display().to_string(),
        services: views,
    }
    .render()
    .map_err(|e| invalid("haproxy.cfg", format!("template failed: {e}")))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

fn invalid(object: &str, problem: impl Into<String>) -> CapabilityError {
    CapabilityError::InvalidObject {
        object: object.to_string(),
        problem: problem.into(),
    }
}

impl Haproxy {
    /// A backend writing into `settings.dir` and, in apply mode, running haproxy.
    pub fn new(settings: HaproxySettings, mode: ServiceMode) -> Self {
        Self {
            settings,
            mode,
            lock: std::sync::Mutex::new(()),
        }
    }

    /// The configuration file.
    pub fn config_path(&self) -> PathBuf {
        self.settings.dir.join("haproxy.cfg")
    }

    /// The daemon Harmony runs (apply mode).
    pub fn daemon(&self) -> Daemon {
        Daemon {
            binary: self.settings.binary.clone(),
            prefix: self.settings.prefix.clone(),
            pidfile: self.settings.dir.join("haproxy.pid"),
            install: "apt-get install haproxy".into(),
        }
    }

    /// `haproxy -c` on `text`, written to a staging file first.
    pub fn check(&self, text: &str) -> Result<(), CapabilityError> {
        let staging = self.settings.dir.join(".haproxy.cfg.check");
        std::fs::create_dir_all(&self.settings.dir)
            .map_err(|e| super::bare_metal::io_error(&self.settings.dir, e))?;
        std::fs::write(&staging, text).map_err(|e| super::bare_metal::io_error(&staging, e))?;
        let result = self
            .daemon()
            .run(&["-c".into(), "-f".into(), staging.display().to_string()]);
        let _ = std::fs::remove_file(&staging);
        result.map(|_| ()).map_err(|e| CapabilityError::Rejected {
            object: "haproxy configuration".into(),
            server: "haproxy -c".into(),
            message: e.to_string(),
        })
    }

    fn reload(&self) -> Result<(), CapabilityError> {
        let daemon = self.daemon();
        let cfg = self.config_path().display().to_string();
        let pid = daemon.pidfile.display().to_string();
        let mut args = vec!["-D".into(), "-f".into(), cfg, "-p".into(), pid];
        let old = daemon.running_pid();
        if let Some(old) = old {
            args.push("-sf".into());
            args.push(old.to_string());
        }
        daemon.run(&args).map_err(|e| CapabilityError::Rejected {
            object: "haproxy".into(),
            server: "haproxy".into(),
            message: e.to_string(),
        })?;
        let start = Instant::now();
        while daemon.running_pid().is_none_or(|p| Some(p) == old) {
            if start.elapsed() > WAIT {
                return Err(CapabilityError::Unreachable {
                    server: "haproxy".into(),
                    reason: format!(
                        "no new pid in {} within {}",
                        daemon.pidfile.display(),
                        crate::domain::capability::seconds(&WAIT)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops the haproxy Harmony started, if any (tests and teardown).
    pub fn stop(&self) -> Result<(), CapabilityError> {
        self.daemon()
            .stop(WAIT)
            .map_err(|e| CapabilityError::Rejected {
                object: "haproxy".into(),
                server: "haproxy".into(),
                message: e.to_string(),
            })
    }
}

#[async_trait]
impl LoadBalancer for Haproxy {
    async fn ensure_services(
        &self,
        services: &[LoadBalancerService],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        let text = render_config(&self.settings.host_dir, services)?;
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        tokio::task::block_in_place(|| {
            let mut sync = FileSync::new();
            sync.add("haproxy haproxy.cfg", self.config_path(), text.clone());
            let planned = sync.plan()?;
            match self.mode {
                ServiceMode::Plan => Ok(planned),
                ServiceMode::Render => sync.apply(),
                ServiceMode::Apply => {
                    let changed = planned.iter().any(|c| c.action != ChangeAction::Unchanged);
                    let running = self.daemon().running_pid().is_some();
                    if changed || !running {
                        self.check(&text)?;
                    }
                    let applied = sync.apply()?;
                    if changed || !running {
                        self.reload()?;
                    }
                    Ok(applied)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::{HostName, IpAddress};

    fn service(
        name: &str,
        port: u16,
        check: HealthCheck,
        backends: &[(&str, &str)],
    ) -> LoadBalancerService {
        LoadBalancerService {
            name: name.into(),
            listen_ip: IpAddress::parse("10.10.0.2").unwrap(),
            port,
            backends: backends
                .iter()
                .map(|(n, ip)| crate::domain::capability::BackendServer {
                    name: HostName::parse(n).unwrap(),
                    ip: IpAddress::parse(ip).unwrap(),
                    port,
                })
                .collect(),
            health_check: check,
        }
    }

    #[test]
    fn golden_config() {
        let services = [
            service(
                "ingress-http",
                80,
                HealthCheck::Tcp,
                &[("worker0", "10.10.0.21")],
            ),
            service(
                "api",
                6443,
                HealthCheck::Https {
                    path: "/readyz".into(),
                    port: 6443,
                },
                &[("bootstrap", "10.10.0.10"), ("cp0", "10.10.0.11")],
            ),
        ];
        let text = render_config(Path::new("/var/lib/harmony/haproxy"), &services).unwrap();
        crate::infra::dnsmasq::golden_for_tests("haproxy/haproxy.cfg", &text);
        assert!(text.find("frontend ingress-http").unwrap() < text.find("frontend api").unwrap());
    }

    #[test]
    fn bad_services_are_rejected_naming_them() {
        let empty = service("api", 6443, HealthCheck::Tcp, &[]);
        let err = render_config(Path::new("/x"), &[empty]).unwrap_err();
        assert!(
            err.to_string().contains("api") && err.to_string().contains("no backend"),
            "{err}"
        );
        let a = service("api", 6443, HealthCheck::Tcp, &[("cp0", "10.10.0.11")]);
        let mut b = a.clone();
        b.name = "api2".into();
        let err = render_config(Path::new("/x"), &[a, b]).unwrap_err();
        assert!(err.to_string().contains("10.10.0.2:6443"), "{err}");
    }
}
