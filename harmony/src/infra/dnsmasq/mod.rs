//! dnsmasq as the DHCP, TFTP and DNS server of a bare-metal site.
//!
//! Harmony owns one folder: `dnsmasq.conf` (rendered from a template), `conf.d/pxe.conf`,
//! `conf.d/wildcards.conf`, `dhcp-hosts` (one reservation per line), `hosts` (one record per
//! line) and `tftp/`. The files are the state: a second run reads them back, so reservations
//! are never duplicated. In apply mode every change is checked with `dnsmasq --test` on a
//! staging copy before the real files are touched; then a change to `dhcp-hosts` or `hosts`
//! is picked up with SIGHUP (leases are kept), and a change to the main configuration
//! restarts dnsmasq (leases survive in the lease file).

mod config;

use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harmony_types::{HostName, IpAddress, Ipv4Cidr};

use super::bare_metal::{Daemon, FileSync, ServiceMode, io_error};
use crate::domain::capability::{
    CapabilityError, DhcpHostBinding, DhcpLease, DhcpServer, DnsRecord, DnsServer, PxeBootOptions,
    TftpFile, TftpServer,
};
use crate::domain::{ChangeAction, ObjectChange};

pub use config::{DnsmasqState, WAIT_SCRIPT, parse_leases, read_leases, render_files};

/// Where dnsmasq listens and what it serves, fixed for a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsmasqSettings {
    /// The folder Harmony writes dnsmasq's files into.
    pub dir: PathBuf,
    /// The folder the files name inside them (`tftp-root`, `dhcp-hostsfile`, the pid and lease
    /// files...): where dnsmasq reads them on the host that runs it. The same as `dir` when
    /// applying on this machine; when rendering, the folder the files will be installed into,
    /// so a render is the same bytes wherever it is written.
    pub host_dir: PathBuf,
    /// Address DNS, DHCP and TFTP listen on.
    pub listen: IpAddress,
    /// Interface to serve DHCP on; `None` serves it where `listen` is configured.
    pub interface: Option<String>,
    /// DNS port (53).
    pub dns_port: u16,
    /// The network reservations are handed out in.
    pub network: Ipv4Cidr,
    /// The router handed out with each lease.
    pub gateway: IpAddress,
    /// The DNS domain of the hosts, e.g. `okd.example.com`.
    pub domain: String,
    /// Resolvers for names outside `domain`; none answers only local names.
    pub upstream_dns: Vec<IpAddress>,
    /// The dnsmasq binary.
    pub binary: PathBuf,
    /// Words run before the binary (e.g. `ip netns exec NAME`).
    pub prefix: Vec<String>,
    /// First and last address of the discovery range: a MAC without a reservation gets a short
    /// lease from it (and boots the discovery image). `None` ignores unknown MACs.
    pub discovery_range: Option<(IpAddress, IpAddress)>,
}

/// How long a lease from the discovery range lasts: long enough to boot the discovery image and
/// report, short enough that the range is free again soon after.
pub const DISCOVERY_LEASE: &str = "10m";
/// [`DISCOVERY_LEASE`] in seconds: a discovery lease began this long before its expiry.
pub const DISCOVERY_LEASE_SECS: i64 = 600;
/// How long a reserved host's lease lasts (`dhcp-range=...,static,...,1h`), in seconds.
pub const RESERVED_LEASE_SECS: i64 = 3600;

impl Dnsmasq {
    /// The discovery range, if unknown MACs get leases.
    pub fn discovery_range(&self) -> Option<(IpAddress, IpAddress)> {
        self.settings.discovery_range
    }
}

/// The dnsmasq backend of the DHCP, TFTP and DNS capabilities.
#[derive(Debug)]
pub struct Dnsmasq {
    settings: DnsmasqSettings,
    mode: ServiceMode,
    lock: std::sync::Mutex<()>,
}

const MAIN_FILES: [&str; 3] = ["dnsmasq.conf", "conf.d/pxe.conf", "conf.d/wildcards.conf"];
const RELOAD_WAIT: Duration = Duration::from_secs(10);

impl Dnsmasq {
    /// A backend writing into `settings.dir` and, in apply mode, running dnsmasq.
    pub fn new(settings: DnsmasqSettings, mode: ServiceMode) -> Self {
        Self {
            settings,
            mode,
            lock: std::sync::Mutex::new(()),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &DnsmasqSettings {
        &self.settings
    }

    /// The daemon Harmony runs (apply mode).
    pub fn daemon(&self) -> Daemon {
        Daemon {
            binary: self.settings.binary.clone(),
            prefix: self.settings.prefix.clone(),
            pidfile: self.settings.dir.join("dnsmasq.pid"),
            install: "apt-get install dnsmasq-base".into(),
        }
    }

    /// Reads the state back from the folder (empty when nothing was written yet).
    pub fn load_state(&self) -> Result<DnsmasqState, CapabilityError> {
        DnsmasqState::load(&self.settings.dir)
    }

    /// The leases in dnsmasq's lease file not expired now (a render folder has none unless
    /// dnsmasq ran on it).
    pub fn leases_now(&self) -> Result<Vec<DhcpLease>, CapabilityError> {
        read_leases(&self.lease_file())
    }

    /// The lease file dnsmasq keeps in its folder.
    pub fn lease_file(&self) -> PathBuf {
        self.settings.dir.join("dnsmasq.leases")
    }

    /// Brings the folder to `state`, then (apply mode) checks and reloads dnsmasq. Returns a
    /// change for each file in `own` and for any other file that changed.
    fn converge(
        &self,
        state: &DnsmasqState,
        own: &[&str],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        let dir = &self.settings.dir;
        let sync = self.file_sync(dir, state)?;
        let planned = sync.plan()?;
        let changed: Vec<&ObjectChange> = planned
            .iter()
            .filter(|c| c.action != ChangeAction::Unchanged)
            .collect();
        let keep = |c: &ObjectChange| {
            c.action != ChangeAction::Unchanged || own.iter().any(|o| c.object.ends_with(o))
        };
        if self.mode == ServiceMode::Plan {
            return Ok(planned.into_iter().filter(keep).collect());
        }
        let running = self.mode == ServiceMode::Apply && self.daemon().running_pid().is_some();
        if self.mode == ServiceMode::Apply && (!changed.is_empty() || !running) {
            self.check(state)?;
        }
        let main_changed = changed
            .iter()
            .any(|c| MAIN_FILES.iter().any(|m| c.object.ends_with(m)));
        let any_changed = !changed.is_empty();
        let applied = sync.apply()?;
        for sub in ["tftp", "conf.d"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| io_error(&dir.join(sub), e))?;
        }
        if self.mode == ServiceMode::Apply {
            self.reload(running, main_changed, any_changed)?;
        }
        Ok(applied.into_iter().filter(keep).collect())
    }

    fn file_sync(&self, dir: &Path, state: &DnsmasqState) -> Result<FileSync, CapabilityError> {
        // The staging copy checked by `dnsmasq --test` names its own folder; the real one
        // names the host's folder.
        let host_dir = if dir == self.settings.dir {
            self.settings.host_dir.clone()
        } else {
            dir.to_path_buf()
        };
        let files = render_files(
            &DnsmasqSettings {
                dir: dir.to_path_buf(),
                host_dir,
                ..self.settings.clone()
            },
            state,
        )?;
        let mut sync = FileSync::new();
        for (name, text) in files {
            sync.add(format!("dnsmasq {name}"), dir.join(&name), text);
        }
        Ok(sync)
    }

    /// `dnsmasq --test` on a staging copy, so a rejected configuration never reaches the
    /// real folder.
    fn check(&self, state: &DnsmasqState) -> Result<(), CapabilityError> {
        let staging = self.settings.dir.join(".staging");
        let _ = std::fs::remove_dir_all(&staging);
        let sync = self.file_sync(&staging, state)?;
        sync.apply()?;
        for sub in ["tftp", "conf.d"] {
            std::fs::create_dir_all(staging.join(sub)).map_err(|e| io_error(&staging, e))?;
        }
        let result = self.daemon().run(&[
            "--test".into(),
            format!("--conf-file={}", staging.join("dnsmasq.conf").display()),
        ]);
        let _ = std::fs::remove_dir_all(&staging);
        result.map(|_| ()).map_err(|e| CapabilityError::Rejected {
            object: "dnsmasq configuration".into(),
            server: "dnsmasq --test".into(),
            message: e.to_string(),
        })
    }

    fn reload(
        &self,
        running: bool,
        main_changed: bool,
        any_changed: bool,
    ) -> Result<(), CapabilityError> {
        let daemon = self.daemon();
        let failed = |e: super::bare_metal::DaemonError| CapabilityError::Rejected {
            object: "dnsmasq".into(),
            server: "dnsmasq".into(),
            message: e.to_string(),
        };
        if running && !main_changed {
            if any_changed {
                let log = self.settings.dir.join("dnsmasq.log");
                let before = count_reads(&log);
                daemon.signal(libc::SIGHUP);
                let start = Instant::now();
                while count_reads(&log) <= before && start.elapsed() < RELOAD_WAIT {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            return Ok(());
        }
        daemon.stop(RELOAD_WAIT).map_err(failed)?;
        daemon
            .run(&[format!(
                "--conf-file={}",
                self.settings.dir.join("dnsmasq.conf").display()
            )])
            .map_err(failed)?;
        let start = Instant::now();
        while daemon.running_pid().is_none() {
            if start.elapsed() > RELOAD_WAIT {
                return Err(CapabilityError::Unreachable {
                    server: "dnsmasq".into(),
                    reason: format!(
                        "started but wrote no pid to {} within {RELOAD_WAIT:?}; see {}",
                        daemon.pidfile.display(),
                        self.settings.dir.join("dnsmasq.log").display()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops the dnsmasq Harmony started, if any (tests and teardown).
    pub fn stop(&self) -> Result<(), CapabilityError> {
        self.daemon()
            .stop(RELOAD_WAIT)
            .map_err(|e| CapabilityError::Rejected {
                object: "dnsmasq".into(),
                server: "dnsmasq".into(),
                message: e.to_string(),
            })
    }

    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        tokio::task::block_in_place(f)
    }
}

/// How many times dnsmasq logged re-reading its hosts files (it logs one line per file).
fn count_reads(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().filter(|l| l.contains(": read ")).count())
        .unwrap_or(0)
}

fn invalid(object: impl Into<String>, problem: impl Into<String>) -> CapabilityError {
    CapabilityError::InvalidObject {
        object: object.into(),
        problem: problem.into(),
    }
}

#[async_trait]
impl DhcpServer for Dnsmasq {
    async fn ensure_bindings(
        &self,
        bindings: &[DhcpHostBinding],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.locked(|| {
            let mut state = self.load_state()?;
            let net = self.settings.network;
            // Every reservation (kept, then asked) by address and by name, in that order, so
            // a clash is found without comparing each pair: renders reserve thousands of hosts.
            type Positioned<'a> = Vec<(usize, &'a DhcpHostBinding)>;
            let mut by_ip: HashMap<IpAddress, Positioned> = HashMap::new();
            let mut by_name: HashMap<&HostName, Positioned> = HashMap::new();
            for (i, o) in state.bindings.values().chain(bindings.iter()).enumerate() {
                by_ip.entry(o.ip).or_default().push((i, o));
                by_name.entry(&o.hostname).or_default().push((i, o));
            }
            for b in bindings {
                if !net.contains(b.ip) {
                    return Err(invalid(
                        format!("DHCP reservation {} ({})", b.hostname, b.mac),
                        format!(
                            "address {} is outside the DHCP network {net}; reserve an address inside it",
                            b.ip
                        ),
                    ));
                }
                if let Some((first, last)) = self.settings.discovery_range
                    && (first.addr()..=last.addr()).contains(&b.ip.addr())
                {
                    return Err(invalid(
                        format!("DHCP reservation {} ({})", b.hostname, b.mac),
                        format!(
                            "address {} is inside the discovery range {first}-{last}, whose addresses go to unknown machines; reserve an address outside it",
                            b.ip
                        ),
                    ));
                }
                // A MAC of this reservation that another reservation already has.
                let claimed = state.bindings.values().find(|o| {
                    o.mac != b.mac && o.macs().any(|m| b.macs().any(|n| n == m))
                });
                if let Some(o) = claimed {
                    return Err(invalid(
                        format!("DHCP reservation {} ({})", b.hostname, b.mac),
                        format!(
                            "a MAC of it is already reserved with {} ({} / {}); free it first",
                            o.mac, o.ip, o.hostname
                        ),
                    ));
                }
                let clash = by_ip
                    .get(&b.ip)
                    .into_iter()
                    .chain(by_name.get(&b.hostname))
                    .flatten()
                    .filter(|(_, o)| o.mac != b.mac)
                    .min_by_key(|(i, _)| *i);
                if let Some((_, o)) = clash {
                    return Err(invalid(
                        format!("DHCP reservation {} ({})", b.hostname, b.mac),
                        format!(
                            "{} / {} is already reserved for MAC {} ({} / {}); free it first or pick another address and name",
                            b.ip, b.hostname, o.mac, o.ip, o.hostname
                        ),
                    ));
                }
            }
            for b in bindings {
                state.bindings.insert(b.mac, b.clone());
            }
            self.converge(&state, &["dhcp-hosts"])
        })
    }

    async fn bindings(&self) -> Result<Vec<DhcpHostBinding>, CapabilityError> {
        self.locked(|| Ok(self.load_state()?.bindings.into_values().collect()))
    }

    async fn leases(&self) -> Result<Vec<DhcpLease>, CapabilityError> {
        self.leases_now()
    }

    async fn set_pxe_options(
        &self,
        options: &PxeBootOptions,
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        for (what, file) in [
            ("bios_file", &options.bios_file),
            ("uefi_file", &options.uefi_file),
        ] {
            if file.is_empty() || file.contains(['/', ',', ' ']) {
                return Err(invalid(
                    format!("PXE option {what}"),
                    format!("{file:?} must be a plain file name inside the TFTP root"),
                ));
            }
        }
        self.locked(|| {
            let mut state = self.load_state()?;
            state.pxe = Some(options.clone());
            self.converge(&state, &["conf.d/pxe.conf"])
        })
    }
}

#[async_trait]
impl DnsServer for Dnsmasq {
    async fn ensure_records(
        &self,
        records: &[DnsRecord],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.locked(|| {
            let mut state = self.load_state()?;
            let mut wanted: BTreeMap<(bool, HostName), IpAddress> = BTreeMap::new();
            for r in records {
                let (key, ip) = match r {
                    DnsRecord::A { name, ip } => ((false, name.clone()), *ip),
                    DnsRecord::Wildcard { domain, ip } => ((true, domain.clone()), *ip),
                };
                if let Some(other) = wanted.insert(key.clone(), ip).filter(|o| *o != ip) {
                    return Err(invalid(
                        format!("DNS record {}", key.1),
                        format!("declared with two addresses, {other} and {ip}; keep one"),
                    ));
                }
            }
            for ((wild, name), ip) in wanted {
                if wild {
                    state.wildcards.insert(name, ip);
                } else {
                    state.hosts.insert(name, ip);
                }
            }
            self.converge(&state, &["hosts", "conf.d/wildcards.conf"])
        })
    }

    async fn records(&self) -> Result<Vec<DnsRecord>, CapabilityError> {
        self.locked(|| {
            let state = self.load_state()?;
            let mut out: Vec<DnsRecord> = state
                .hosts
                .into_iter()
                .map(|(name, ip)| DnsRecord::A { name, ip })
                .chain(
                    state
                        .wildcards
                        .into_iter()
                        .map(|(domain, ip)| DnsRecord::Wildcard { domain, ip }),
                )
                .collect();
            out.sort();
            Ok(out)
        })
    }
}

#[async_trait]
impl TftpServer for Dnsmasq {
    async fn ensure_tftp_files(
        &self,
        files: &[TftpFile],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.locked(|| {
            let root = self.settings.dir.join("tftp");
            let mut sync = FileSync::new();
            for f in files {
                if f.name.is_empty() || f.name.contains(['/', '\\']) || f.name.starts_with('.') {
                    return Err(invalid(
                        format!("TFTP file {:?}", f.name),
                        "must be a plain file name inside the TFTP root",
                    ));
                }
                if f.name == config::WAIT_SCRIPT {
                    return Err(invalid(
                        format!("TFTP file {:?}", f.name),
                        "is the boot script Harmony writes from the PXE options; name the file otherwise",
                    ));
                }
                let bytes = std::fs::read(&f.source).map_err(|e| CapabilityError::Io {
                    path: f.source.display().to_string(),
                    source: std::io::Error::new(
                        e.kind(),
                        format!(
                            "{e}; the iPXE binaries come from Debian's `ipxe` package (apt-get install ipxe) or set the file's source"
                        ),
                    ),
                })?;
                sync.add(format!("TFTP {}", f.name), root.join(&f.name), bytes);
            }
            match self.mode {
                ServiceMode::Plan => sync.plan(),
                _ => sync.apply(),
            }
        })
    }
}

#[cfg(test)]
mod tests;

/// Golden-file comparison shared by the backends' template tests.
#[cfg(test)]
pub(crate) fn golden_for_tests(name: &str, actual: &str) {
    tests::golden(name, actual)
}
