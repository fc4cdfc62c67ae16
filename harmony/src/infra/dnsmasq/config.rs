//! The dnsmasq files as values: rendered from templates, parsed back from disk.

use askama::Template;
use std::collections::BTreeMap;
use std::path::Path;

use harmony_types::{HostName, IpAddress, MacAddress, Url};

use super::DnsmasqSettings;
use crate::domain::capability::{CapabilityError, DhcpHostBinding, DhcpLease, PxeBootOptions};

/// Everything dnsmasq serves, as read from (and written to) its folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsmasqState {
    /// Reservations by MAC.
    pub bindings: BTreeMap<MacAddress, DhcpHostBinding>,
    /// A records by fully qualified name.
    pub hosts: BTreeMap<HostName, IpAddress>,
    /// Wildcard records by domain.
    pub wildcards: BTreeMap<HostName, IpAddress>,
    /// PXE options, once set.
    pub pxe: Option<PxeBootOptions>,
}

#[derive(Template)]
#[template(path = "dnsmasq/dnsmasq.conf", escape = "none")]
struct MainConf<'a> {
    dir: String,
    interface: &'a Option<String>,
    listen: IpAddress,
    dns_port: u16,
    upstream_dns: &'a [IpAddress],
    domain: &'a str,
    network: std::net::Ipv4Addr,
    netmask: std::net::Ipv4Addr,
    gateway: IpAddress,
    discovery: Option<(IpAddress, IpAddress)>,
    discovery_lease: &'a str,
}

#[derive(Template)]
#[template(path = "dnsmasq/pxe.conf", escape = "none")]
struct PxeConf<'a> {
    wait_script: &'a str,
    bios_file: &'a str,
    uefi_file: &'a str,
    tftp_server: IpAddress,
}

/// The script dnsmasq hands iPXE over TFTP: it chains to the HTTP boot script and, while the
/// HTTP boot server does not answer (between runs), waits and retries.
#[derive(Template)]
#[template(path = "dnsmasq/harmony-boot.ipxe", escape = "none")]
struct WaitScript<'a> {
    script: &'a Url,
}

/// The file name of [`WaitScript`] in the TFTP root.
pub const WAIT_SCRIPT: &str = "harmony-boot.ipxe";

#[derive(Template)]
#[template(path = "dnsmasq/wildcards.conf", escape = "none")]
struct WildcardsConf {
    wildcards: Vec<(HostName, IpAddress)>,
}

fn template_error(file: &str, e: askama::Error) -> CapabilityError {
    CapabilityError::InvalidObject {
        object: format!("dnsmasq {file}"),
        problem: format!("template failed: {e}"),
    }
}

/// Every file of the folder, by path relative to it, with its exact bytes.
pub fn render_files(
    settings: &DnsmasqSettings,
    state: &DnsmasqState,
) -> Result<BTreeMap<String, String>, CapabilityError> {
    let mut files = BTreeMap::new();
    let main = MainConf {
        dir: settings.host_dir.display().to_string(),
        interface: &settings.interface,
        listen: settings.listen,
        dns_port: settings.dns_port,
        upstream_dns: &settings.upstream_dns,
        domain: &settings.domain,
        network: settings.network.network(),
        netmask: settings.network.netmask(),
        gateway: settings.gateway,
        discovery: settings.discovery_range,
        discovery_lease: super::DISCOVERY_LEASE,
    };
    files.insert(
        "dnsmasq.conf".to_string(),
        with_newline(
            main.render()
                .map_err(|e| template_error("dnsmasq.conf", e))?,
        ),
    );
    if let Some(pxe) = &state.pxe {
        let conf = PxeConf {
            wait_script: WAIT_SCRIPT,
            bios_file: &pxe.bios_file,
            uefi_file: &pxe.uefi_file,
            tftp_server: pxe.tftp_server,
        };
        files.insert(
            "conf.d/pxe.conf".to_string(),
            with_newline(conf.render().map_err(|e| template_error("pxe.conf", e))?),
        );
        let wait = WaitScript {
            script: &pxe.ipxe_script,
        };
        files.insert(
            format!("tftp/{WAIT_SCRIPT}"),
            with_newline(wait.render().map_err(|e| template_error(WAIT_SCRIPT, e))?),
        );
    }
    let wild = WildcardsConf {
        wildcards: state
            .wildcards
            .iter()
            .map(|(d, ip)| (d.clone(), *ip))
            .collect(),
    };
    files.insert(
        "conf.d/wildcards.conf".to_string(),
        with_newline(
            wild.render()
                .map_err(|e| template_error("wildcards.conf", e))?,
        ),
    );
    let mut by_ip: Vec<&DhcpHostBinding> = state.bindings.values().collect();
    by_ip.sort_by_key(|b| (b.ip, b.mac));
    files.insert(
        "dhcp-hosts".to_string(),
        by_ip
            .iter()
            .map(|b| {
                let macs: Vec<String> = b.macs().map(ToString::to_string).collect();
                format!("{},{},{}\n", macs.join(","), b.ip, b.hostname)
            })
            .collect(),
    );
    files.insert(
        "hosts".to_string(),
        state
            .hosts
            .iter()
            .map(|(name, ip)| format!("{ip} {name}\n"))
            .collect(),
    );
    Ok(files)
}

fn with_newline(mut s: String) -> String {
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

fn corrupt(path: &Path, line: usize, text: &str, why: String) -> CapabilityError {
    CapabilityError::InvalidObject {
        object: format!("{}:{}", path.display(), line + 1),
        problem: format!(
            "{text:?} cannot be read back ({why}); Harmony owns this file: remove the line or the file and re-run"
        ),
    }
}

fn read_lines(path: &Path) -> Result<Vec<(usize, String)>, CapabilityError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t
            .lines()
            .enumerate()
            .map(|(i, l)| (i, l.trim().to_string()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(super::io_error(path, e)),
    }
}

impl DnsmasqState {
    /// Reads the state back from `dir`; a missing folder is an empty state.
    pub fn load(dir: &Path) -> Result<Self, CapabilityError> {
        let mut state = DnsmasqState::default();
        let path = dir.join("dhcp-hosts");
        for (i, line) in read_lines(&path)? {
            let parts: Vec<&str> = line.split(',').collect();
            let [macs @ .., ip, name] = &parts[..] else {
                return Err(corrupt(
                    &path,
                    i,
                    &line,
                    "expected MAC[,MAC...],IP,hostname".into(),
                ));
            };
            let macs = macs
                .iter()
                .map(|m| MacAddress::parse(m).map_err(|e| corrupt(&path, i, &line, e.to_string())))
                .collect::<Result<Vec<_>, _>>()?;
            let Some((mac, others)) = macs.split_first() else {
                return Err(corrupt(
                    &path,
                    i,
                    &line,
                    "expected MAC[,MAC...],IP,hostname".into(),
                ));
            };
            let binding = DhcpHostBinding {
                mac: *mac,
                other_macs: others.to_vec(),
                ip: IpAddress::parse(ip).map_err(|e| corrupt(&path, i, &line, e.to_string()))?,
                hostname: HostName::parse(name)
                    .map_err(|e| corrupt(&path, i, &line, e.to_string()))?,
            };
            state.bindings.insert(binding.mac, binding);
        }
        let path = dir.join("hosts");
        for (i, line) in read_lines(&path)? {
            let Some((ip, name)) = line.split_once(' ') else {
                return Err(corrupt(&path, i, &line, "expected IP NAME".into()));
            };
            state.hosts.insert(
                HostName::parse(name.trim())
                    .map_err(|e| corrupt(&path, i, &line, e.to_string()))?,
                IpAddress::parse(ip).map_err(|e| corrupt(&path, i, &line, e.to_string()))?,
            );
        }
        let path = dir.join("conf.d/wildcards.conf");
        for (i, line) in read_lines(&path)? {
            let fields: Vec<&str> = line
                .strip_prefix("address=/")
                .map(|r| r.split('/').collect())
                .unwrap_or_default();
            let [domain, ip] = fields[..] else {
                return Err(corrupt(
                    &path,
                    i,
                    &line,
                    "expected address=/DOMAIN/IP".into(),
                ));
            };
            state.wildcards.insert(
                HostName::parse(domain).map_err(|e| corrupt(&path, i, &line, e.to_string()))?,
                IpAddress::parse(ip).map_err(|e| corrupt(&path, i, &line, e.to_string()))?,
            );
        }
        state.pxe = load_pxe(&dir.join("conf.d/pxe.conf"))?;
        Ok(state)
    }
}

fn load_pxe(path: &Path) -> Result<Option<PxeBootOptions>, CapabilityError> {
    let lines = read_lines(path)?;
    if lines.is_empty() {
        return Ok(None);
    }
    let boot = |tag: &str| {
        lines
            .iter()
            .find_map(|(_, l)| l.strip_prefix(&format!("dhcp-boot={tag},")))
            .map(str::to_string)
    };
    let missing = |what: &str| corrupt(path, 0, what, "line missing".into());
    boot("tag:ipxe").ok_or_else(|| missing("dhcp-boot=tag:ipxe"))?;
    // The HTTP script is the one the TFTP wait script chains to.
    let wait = path
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("tftp").join(WAIT_SCRIPT))
        .unwrap_or_default();
    let script = std::fs::read_to_string(&wait)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("chain --autofree "))
                .and_then(|l| l.split_whitespace().next())
                .map(str::to_string)
        })
        .ok_or_else(|| corrupt(&wait, 0, "chain --autofree URL", "line missing".into()))?;
    let uefi = boot("tag:!ipxe,tag:efi64").ok_or_else(|| missing("dhcp-boot efi64"))?;
    let bios = boot("tag:!ipxe,tag:bios").ok_or_else(|| missing("dhcp-boot bios"))?;
    let split = |s: &str| -> Option<(String, String)> {
        let (file, rest) = s.split_once(",,")?;
        Some((file.to_string(), rest.to_string()))
    };
    let (uefi_file, server) = split(&uefi).ok_or_else(|| missing("dhcp-boot efi64 server"))?;
    let (bios_file, _) = split(&bios).ok_or_else(|| missing("dhcp-boot bios server"))?;
    Ok(Some(PxeBootOptions {
        tftp_server: IpAddress::parse(&server)
            .map_err(|e| corrupt(path, 0, &uefi, e.to_string()))?,
        bios_file,
        uefi_file,
        ipxe_script: Url::parse(&script).map_err(|e| corrupt(path, 0, &script, e.to_string()))?,
    }))
}

/// Reads dnsmasq's lease file (`EXPIRY MAC IP HOSTNAME CLIENT-ID` per line, expiry in seconds
/// since the epoch, 0 for infinite): the leases not expired now. A missing file has none;
/// lines dnsmasq writes for other purposes (`duid ...`, IPv6) are skipped.
pub fn read_leases(path: &Path) -> Result<Vec<DhcpLease>, CapabilityError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(super::io_error(path, e)),
    };
    Ok(parse_leases(&text, now))
}

/// The leases of a lease file's text not expired at `now`, in seconds since the epoch (see
/// [`read_leases`]).
pub fn parse_leases(text: &str, now: u64) -> Vec<DhcpLease> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let expiry: u64 = words.next()?.parse().ok()?;
            let mac = MacAddress::parse(words.next()?).ok()?;
            let ip = IpAddress::parse(words.next()?).ok()?;
            let expires = (expiry != 0).then_some(expiry);
            expires
                .is_none_or(|e| e > now)
                .then_some(DhcpLease { mac, ip, expires })
        })
        .collect()
}
