//! Real emulated BMCs for tests: [`BmcLab::start`] runs an unprivileged libvirtd, defines
//! QEMU virtual machines in it (powered off) and serves them over Redfish with the
//! sushy-tools emulator (its libvirt driver), on `https://127.0.0.1:PORT` with a fresh test CA
//! ([`BmcLab::ca_pem`]) and HTTP basic auth. [`Drop`] stops it all.
//!
//! What runs, in a temp dir of its own:
//! - `libvirtd` in session mode, with private `XDG_*` dirs and `HOME`; as root it runs as
//!   `nobody` (through `setpriv`), otherwise as the caller. [`BmcLab::virsh`] talks to it over
//!   its own socket (`qemu:///session?socket=<dir>/run/libvirt/libvirt-sock`). Optionally it
//!   runs inside a network namespace ([`BmcLabOptions::netns`]), so its VMs can use tap
//!   devices there ([`VmSpec::tap`]): then it runs in a private mount namespace where
//!   `/dev/net/tun` may be opened by anyone, so that the unprivileged QEMU can attach to taps.
//! - QEMU VMs of domain type `kvm` when a guest runs under KVM ([`crate::accel`]) and the
//!   unprivileged libvirtd may open `/dev/kvm`, `qemu` (software emulation) otherwise (on the
//!   machines this was written on, KVM opens but stalls guests), each with one blank raw disk, one virtio NIC (a tap
//!   when given, user-mode networking otherwise: a PXE override needs a NIC to point at) and
//!   its serial console in a file ([`BmcLab::serial_log`]).
//! - `sushy-emulator` from the venv `bash tests/redfish-bmc/install.sh` makes (see
//!   [`tools_dir`]), as the caller, allowed to see only this lab's VMs.
//!
//! How it stops ([`Drop`], also when a test panics): every running domain is destroyed with
//! virsh first (killing libvirtd would leave QEMU running), then the emulator and libvirtd are
//! stopped, any process still naming the lab's dir is killed, and the dirs are removed.
//!
//! What the emulator (sushy-tools 2.2.0, libvirt driver) does, as observed: a reset is
//! synchronous (the domain runs when `On` answers 204); an unknown `ResetType` answers 204 and
//! does nothing, and so does `ForceRestart` of a VM that is off; `BootSourceOverrideEnabled`
//! always reads `Continuous` (a `Once` override is stored as a persistent boot order); only
//! TLS 1.2 is accepted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::eventually::eventually_blocking;
use crate::multi_region::Pki;

/// The pinned sushy-tools version `tests/redfish-bmc/install.sh` installs.
pub const SUSHY_TOOLS_VERSION: &str = "2.2.0";
/// What to run when a tool is missing.
pub const INSTALL_HINT: &str = "run `bash tests/redfish-bmc/install.sh` (tests/setup.sh runs it) or set HARMONY_REDFISH_BMC_DIR to where it installed";
/// How long libvirtd may take to answer on its socket.
const LIBVIRTD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the emulator may take to list the lab's systems.
const EMULATOR_TIMEOUT: Duration = Duration::from_secs(60);
/// Hard limit for one virsh (or helper) command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The blank disk each VM gets (sparse: takes no space).
const DISK_BYTES: u64 = 64 * 1024 * 1024;
/// The binaries of Debian's packages.
const LIBVIRTD: &str = "/usr/sbin/libvirtd";
const VIRSH: &str = "/usr/bin/virsh";
const QEMU: &str = "/usr/bin/qemu-system-x86_64";

/// Where `tests/redfish-bmc/install.sh` installs: `$HARMONY_REDFISH_BMC_DIR`, else
/// `~/.cache/harmony/redfish-bmc` (the emulator is `venv/bin/sushy-emulator` there).
pub fn tools_dir() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("HARMONY_REDFISH_BMC_DIR") {
        return Ok(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").ok_or(
        "HOME is not set; set HARMONY_REDFISH_BMC_DIR to the dir tests/redfish-bmc/install.sh installed into",
    )?;
    Ok(PathBuf::from(home).join(".cache/harmony/redfish-bmc"))
}

/// Checks that everything the lab runs is installed: libvirtd, virsh, QEMU and the emulator's
/// venv. The error names what is missing and how to install it.
pub fn available() -> Result<(), String> {
    let venv = tools_dir()?.join("venv");
    for path in [
        PathBuf::from(LIBVIRTD),
        PathBuf::from(VIRSH),
        PathBuf::from(QEMU),
        venv.join("bin/sushy-emulator"),
        venv.join("bin/python"),
    ] {
        if !path.exists() {
            return Err(format!("{} not found; {INSTALL_HINT}", path.display()));
        }
    }
    Ok(())
}

/// Which device a VM boots from first (the other one comes second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BootFirst {
    /// The NIC first (PXE), then the disk.
    Network,
    /// The (blank) disk first, then the NIC: what a BMC ignoring a PXE override leaves.
    #[default]
    Disk,
}

/// One virtual machine of the lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSpec {
    /// The libvirt domain name (letters, digits, `-`, `_` and `.`).
    pub name: String,
    /// The MAC address of its one NIC (`52:54:00:..`).
    pub mac: String,
    /// Its memory in MiB.
    pub memory_mib: u32,
    /// What it boots from first.
    pub boot: BootFirst,
    /// A tap device (`type='ethernet'`, `managed='no'`) for its NIC, which must exist (in
    /// [`BmcLabOptions::netns`] when given) and be usable by the user QEMU runs as (`nobody`
    /// as root: `ip tuntap add dev TAP mode tap user nobody`). `None`: user-mode networking.
    pub tap: Option<String>,
    /// Whether its NIC has a boot ROM. `false` (`<rom enabled='no'/>`): the NIC cannot PXE
    /// boot, whatever the boot order or a Redfish override says, so the VM falls through to
    /// its blank disk: a machine that accepts a PXE override and does not boot from the network.
    pub pxe_rom: bool,
}

impl VmSpec {
    /// VM number `i`: `bmc-vm<i>`, MAC `52:54:00:42:00:<i>`, 128 MiB, disk first, no tap, a
    /// NIC that can PXE boot.
    pub fn numbered(i: usize) -> Self {
        Self {
            name: format!("bmc-vm{i}"),
            mac: format!("52:54:00:42:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff),
            memory_mib: 128,
            boot: BootFirst::Disk,
            tap: None,
            pxe_rom: true,
        }
    }
}

/// What [`BmcLab::start`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmcLabOptions {
    /// The VMs, in the order [`BmcLab::bmc_url`] and the other accessors number them.
    pub vms: Vec<VmSpec>,
    /// A network namespace (as `ip netns` names it) to run libvirtd, and so QEMU, in; the
    /// emulator stays in the caller's namespace on 127.0.0.1. Needs root.
    pub netns: Option<String>,
    /// The basic-auth user of the emulator.
    pub username: String,
    /// Its password.
    pub password: String,
}

impl BmcLabOptions {
    /// `count` VMs as [`VmSpec::numbered`] makes them, no namespace, user `admin`, password
    /// `password`.
    pub fn with_vms(count: usize) -> Self {
        Self {
            vms: (0..count).map(VmSpec::numbered).collect(),
            netns: None,
            username: "admin".into(),
            password: "password".into(),
        }
    }
}

/// A running libvirtd with the lab's VMs and a Redfish emulator in front of it; everything is
/// stopped and removed on drop.
pub struct BmcLab {
    /// Owned by the user libvirtd runs as: its XDG dirs, the disks, logs and serial consoles.
    dir: tempfile::TempDir,
    /// The CA, server certificate and key of the emulator.
    pki: Pki,
    /// The emulator's config, htpasswd and log (the caller's own, mode 0700).
    sushy_dir: tempfile::TempDir,
    run_as: Option<(u32, u32)>,
    options: BmcLabOptions,
    libvirtd: Option<Child>,
    sushy: Option<Child>,
    port: u16,
    uuids: Vec<String>,
    /// Where [`Drop`] copies the logs to ([`BmcLab::keep_logs_in`]).
    keep_logs: Option<PathBuf>,
}

impl std::fmt::Debug for BmcLab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BmcLab")
            .field("dir", &self.dir.path())
            .field("base_url", &self.base_url())
            .field("systems", &self.uuids)
            .finish_non_exhaustive()
    }
}

impl BmcLab {
    /// Starts libvirtd, defines the VMs (powered off), starts the emulator and waits until
    /// `GET /redfish/v1/Systems` lists them all. Any error names what failed, with the logs'
    /// last lines; what was started by then is stopped again.
    pub fn start(options: BmcLabOptions) -> Result<Self, String> {
        available()?;
        validate(&options)?;
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let taps = options.vms.iter().any(|v| v.tap.is_some());
        if !root && (options.netns.is_some() || taps) {
            return Err("a BMC lab with a network namespace or tap devices needs root".into());
        }
        let run_as = if root { Some(nobody()?) } else { None };
        let dir = tempfile::Builder::new()
            .prefix("harmony-bmc-")
            .tempdir()
            .map_err(|e| format!("a temp dir for the BMC lab: {e}"))?;
        let sushy_dir = tempfile::Builder::new()
            .prefix("harmony-sushy-")
            .tempdir()
            .map_err(|e| format!("a temp dir for the emulator: {e}"))?;
        let pki = Pki::new().map_err(|e| format!("making a CA and server certificate: {e}"))?;
        let mut lab = Self {
            dir,
            pki,
            sushy_dir,
            run_as,
            options,
            libvirtd: None,
            sushy: None,
            port: 0,
            uuids: Vec::new(),
            keep_logs: None,
        };
        lab.start_libvirtd()?;
        for i in 0..lab.options.vms.len() {
            lab.define(i, None)?;
            let uuid = lab.virsh(&["domuuid", &lab.options.vms[i].name])?;
            lab.uuids.push(uuid.trim().to_string());
        }
        lab.start_sushy()?;
        Ok(lab)
    }

    /// `https://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// VM `i`'s Redfish system: `https://127.0.0.1:PORT/redfish/v1/Systems/<uuid>`.
    pub fn bmc_url(&self, i: usize) -> String {
        format!("{}/redfish/v1/Systems/{}", self.base_url(), self.uuids[i])
    }

    /// The Redfish system ids (the domains' UUIDs), in VM order.
    pub fn system_ids(&self) -> &[String] {
        &self.uuids
    }

    /// The VMs as started.
    pub fn vms(&self) -> &[VmSpec] {
        &self.options.vms
    }

    /// The emulator's basic-auth user.
    pub fn username(&self) -> &str {
        &self.options.username
    }

    /// The emulator's basic-auth password.
    pub fn password(&self) -> &str {
        &self.options.password
    }

    /// The PEM CA certificate that signed the emulator's certificate (for 127.0.0.1 and
    /// localhost).
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The libvirt URI of this lab's libvirtd.
    pub fn libvirt_uri(&self) -> String {
        format!(
            "qemu:///session?socket={}",
            self.dir.path().join("run/libvirt/libvirt-sock").display()
        )
    }

    /// Runs `virsh -c <this lab's URI> ARGS` (at most a minute): its standard output, or an
    /// error with its standard error.
    pub fn virsh(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(VIRSH);
        cmd.arg("-q").arg("-c").arg(self.libvirt_uri()).args(args);
        cmd.env_remove("LIBVIRT_DEFAULT_URI");
        let what = format!("virsh {}", args.join(" "));
        let (ok, stdout, stderr) = run_with_timeout(&mut cmd, &what)?;
        if ok {
            Ok(stdout)
        } else {
            Err(format!("{what} failed: {}", stderr.trim()))
        }
    }

    /// VM `i`'s state as `virsh domstate` prints it (`shut off`, `running`, ...), or the
    /// error prefixed with `error: `.
    pub fn domain_state(&self, i: usize) -> String {
        match self.virsh(&["domstate", &self.options.vms[i].name]) {
            Ok(s) => s.trim().to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    /// Redefines VM `i` to boot from its disk first (the NIC second), whatever a Redfish boot
    /// override set: a BMC that ignored the override. Takes effect at the VM's next start.
    pub fn set_boot_order_disk_first(&mut self, i: usize) -> Result<(), String> {
        self.options.vms[i].boot = BootFirst::Disk;
        let uuid = self.uuids[i].clone();
        self.define(i, Some(&uuid))
    }

    /// The file VM `i`'s serial console writes to.
    pub fn serial_log(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}-serial.log", self.options.vms[i].name))
    }

    /// Keeps the logs after the lab is gone: on drop, once the VMs are stopped, each VM's
    /// serial console (`<vm>-serial.log`) and QEMU log (`<vm>-qemu.log`), the emulator's
    /// (`sushy.log`) and libvirtd's (`libvirtd.log`) are copied into `dir` (created).
    pub fn keep_logs_in(&mut self, dir: PathBuf) {
        self.keep_logs = Some(dir);
    }

    fn copy_logs(&self) {
        let Some(dir) = &self.keep_logs else {
            return;
        };
        let _ = std::fs::create_dir_all(dir);
        let mut files = vec![
            (
                self.sushy_dir.path().join("sushy.log"),
                "sushy.log".to_string(),
            ),
            (
                self.dir.path().join("libvirtd.log"),
                "libvirtd.log".to_string(),
            ),
        ];
        for (i, vm) in self.options.vms.iter().enumerate() {
            files.push((self.serial_log(i), format!("{}-serial.log", vm.name)));
            files.push((
                self.dir
                    .path()
                    .join(format!("cache/libvirt/qemu/log/{}.log", vm.name)),
                format!("{}-qemu.log", vm.name),
            ));
        }
        for (from, name) in files {
            if from.exists() {
                let _ = std::fs::copy(&from, dir.join(name));
            }
        }
    }

    /// The last lines of the emulator's, libvirtd's and each VM's QEMU log, for failure
    /// messages.
    pub fn log_tail(&self) -> String {
        let mut out = format!(
            "--- sushy-emulator log\n{}\n--- libvirtd log\n{}",
            tail(&self.sushy_dir.path().join("sushy.log")),
            tail(&self.dir.path().join("libvirtd.log"))
        );
        for vm in &self.options.vms {
            let log = self
                .dir
                .path()
                .join(format!("cache/libvirt/qemu/log/{}.log", vm.name));
            if log.exists() {
                out.push_str(&format!("\n--- QEMU log of {}\n{}", vm.name, tail(&log)));
            }
        }
        out
    }

    fn start_libvirtd(&mut self) -> Result<(), String> {
        let d = self.dir.path().to_path_buf();
        self.chown(&d)?;
        set_mode(&d, 0o755)?;
        for sub in ["run", "config", "config/libvirt", "cache", "home", "disks"] {
            let p = d.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| format!("creating {}: {e}", p.display()))?;
            set_mode(&p, 0o700)?;
            self.chown(&p)?;
        }
        // QEMU's console output goes to files, not through virtlogd (which would be started
        // on demand and outlive the lab for two minutes).
        let qemu_conf = d.join("config/libvirt/qemu.conf");
        std::fs::write(&qemu_conf, "stdio_handler = \"file\"\n")
            .map_err(|e| format!("writing {}: {e}", qemu_conf.display()))?;
        self.chown(&qemu_conf)?;
        let log_path = d.join("libvirtd.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;

        let mut argv: Vec<String> = Vec::new();
        if let Some(ns) = &self.options.netns {
            argv.extend(["ip", "netns", "exec", ns].map(String::from));
        }
        if self.options.vms.iter().any(|v| v.tap.is_some()) {
            // A private mount namespace whose /dev/net/tun anyone may open: the tap devices
            // are created for the unprivileged user, but the host's tun device is root-only.
            argv.extend(
                [
                    "unshare",
                    "-m",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    "mount -t tmpfs -o mode=755 harmony-tun /dev/net \
                     && mknod -m 666 /dev/net/tun c 10 200 && exec \"$@\"",
                    "sh",
                ]
                .map(String::from),
            );
        }
        if let Some((uid, gid)) = self.run_as {
            argv.extend([
                "setpriv".into(),
                format!("--reuid={uid}"),
                format!("--regid={gid}"),
                "--clear-groups".into(),
            ]);
        }
        let p = |s: &str| d.join(s).display().to_string();
        argv.extend([
            "env".into(),
            "-i".into(),
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            "LC_ALL=C".into(),
            format!("HOME={}", p("home")),
            format!("XDG_RUNTIME_DIR={}", p("run")),
            format!("XDG_CONFIG_HOME={}", p("config")),
            format!("XDG_CACHE_HOME={}", p("cache")),
            LIBVIRTD.into(),
        ]);
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&d)
            .stdin(Stdio::null())
            .stdout(
                log.try_clone()
                    .map_err(|e| format!("{}: {e}", log_path.display()))?,
            )
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start libvirtd ({}): {e}", argv.join(" ")))?;
        self.libvirtd = Some(child);

        let answered = eventually_blocking(LIBVIRTD_TIMEOUT, "libvirtd to answer virsh", || {
            if let Some(Ok(Some(status))) = self.libvirtd.as_mut().map(Child::try_wait) {
                self.libvirtd = None;
                return Ok(Err(status));
            }
            self.virsh(&["version"]).map(Ok)
        });
        match answered {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(status)) => Err(format!(
                "libvirtd exited with {status} before answering ({})\n{}",
                argv.join(" "),
                self.log_tail()
            )),
            Err(w) => Err(format!(
                "libvirtd did not answer on {}: {w}\n{}",
                self.libvirt_uri(),
                self.log_tail()
            )),
        }
    }

    /// Defines (or redefines, with its UUID) VM `i` from its spec.
    fn define(&self, i: usize, uuid: Option<&str>) -> Result<(), String> {
        let vm = &self.options.vms[i];
        let disk = self.dir.path().join(format!("disks/{}.img", vm.name));
        if !disk.exists() {
            let f = std::fs::File::create(&disk)
                .map_err(|e| format!("creating {}: {e}", disk.display()))?;
            f.set_len(DISK_BYTES)
                .map_err(|e| format!("sizing {}: {e}", disk.display()))?;
            self.chown(&disk)?;
        }
        let (disk_order, nic_order) = match vm.boot {
            BootFirst::Network => (2, 1),
            BootFirst::Disk => (1, 2),
        };
        let rom = if vm.pxe_rom {
            ""
        } else {
            "<rom enabled='no'/>"
        };
        let nic = match &vm.tap {
            Some(tap) => format!(
                "<interface type='ethernet'><mac address='{}'/><target dev='{tap}' managed='no'/>\
                 <model type='virtio'/>{rom}<boot order='{nic_order}'/></interface>",
                vm.mac
            ),
            None => format!(
                "<interface type='user'><mac address='{}'/><model type='virtio'/>{rom}\
                 <boot order='{nic_order}'/></interface>",
                vm.mac
            ),
        };
        let uuid = uuid
            .map(|u| format!("<uuid>{u}</uuid>"))
            .unwrap_or_default();
        let domain_type = domain_type();
        let xml = format!(
            "<domain type='{domain_type}'>
  <name>{name}</name>
  {uuid}
  <memory unit='MiB'>{mem}</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{QEMU}</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='{disk}'/>\
<target dev='vda' bus='virtio'/><boot order='{disk_order}'/></disk>
    {nic}
    <serial type='file'><source path='{serial}' append='on'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
",
            name = vm.name,
            mem = vm.memory_mib,
            disk = disk.display(),
            serial = self.serial_log(i).display(),
        );
        let path = self.dir.path().join(format!("{}.xml", vm.name));
        std::fs::write(&path, xml).map_err(|e| format!("writing {}: {e}", path.display()))?;
        self.virsh(&["define", &path.display().to_string()])
            .map(|_| ())
            .map_err(|e| format!("{e}\n{}", self.log_tail()))
    }

    fn start_sushy(&mut self) -> Result<(), String> {
        let venv = tools_dir()?.join("venv");
        let sd = self.sushy_dir.path().to_path_buf();
        let htpasswd = sd.join("htpasswd");
        let hash = bcrypt_hash(&venv.join("bin/python"), &self.options.password)?;
        std::fs::write(&htpasswd, format!("{}:{hash}\n", self.options.username))
            .map_err(|e| format!("writing {}: {e}", htpasswd.display()))?;
        let log_path = sd.join("sushy.log");
        let q = |p: &Path| py_str(&p.display().to_string());
        let mut last = String::new();
        // A free port is found by binding and releasing it; another process may take it first.
        for _ in 0..3 {
            self.port = crate::multi_region::free_port()?;
            let config = sd.join("sushy.conf");
            // Redfish identities of this lab's domains: their UUIDs and names.
            let allowed: Vec<String> = self
                .uuids
                .iter()
                .chain(self.options.vms.iter().map(|v| &v.name))
                .map(|u| py_str(u))
                .collect();
            let text = format!(
                "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n\
                 SUSHY_EMULATOR_LISTEN_PORT = {port}\n\
                 SUSHY_EMULATOR_SSL_CERT = {cert}\n\
                 SUSHY_EMULATOR_SSL_KEY = {key}\n\
                 SUSHY_EMULATOR_AUTH_FILE = {auth}\n\
                 SUSHY_EMULATOR_LIBVIRT_URI = {uri}\n\
                 SUSHY_EMULATOR_ALLOWED_INSTANCES = [{allowed}]\n",
                port = self.port,
                cert = q(&self.pki.cert()),
                key = q(&self.pki.key()),
                auth = q(&htpasswd),
                uri = py_str(&self.libvirt_uri()),
                allowed = allowed.join(", "),
            );
            std::fs::write(&config, text)
                .map_err(|e| format!("writing {}: {e}", config.display()))?;
            let log = std::fs::File::create(&log_path)
                .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
            let child = Command::new(venv.join("bin/sushy-emulator"))
                .arg("--config")
                .arg(&config)
                .env("PYTHONUNBUFFERED", "1")
                .env_remove("LIBVIRT_DEFAULT_URI")
                .env_remove("SUSHY_EMULATOR_CONFIG")
                .current_dir(&sd)
                .stdin(Stdio::null())
                .stdout(
                    log.try_clone()
                        .map_err(|e| format!("{}: {e}", log_path.display()))?,
                )
                .stderr(log)
                .spawn()
                .map_err(|e| format!("cannot start sushy-emulator: {e}; {INSTALL_HINT}"))?;
            self.sushy = Some(child);
            match self.wait_for_sushy() {
                Ok(()) => return Ok(()),
                Err(e) if tail(&log_path).contains("Address already in use") => {
                    last = e;
                    self.stop_sushy();
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Polls `GET /redfish/v1/Systems` (with basic auth) until it lists every VM.
    fn wait_for_sushy(&mut self) -> Result<(), String> {
        let url = format!("{}/redfish/v1/Systems", self.base_url());
        let (user, password) = (self.options.username.clone(), self.options.password.clone());
        let ca = self.pki.ca_pem.clone();
        let expected = self.uuids.len();
        // Requests run on a runtime of their own, on a thread of their own: the caller may be
        // inside a tokio runtime.
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<bool>();
        let poller = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("a runtime: {e}")));
                    return;
                }
            };
            let client = match harmony_http::ClientSettings::new()
                .ca_pem(Some(ca.as_bytes()))
                .connect_timeout(Duration::from_secs(2))
                .read_timeout(Some(Duration::from_secs(10)))
                .build()
            {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(format!("an HTTP client: {e}")));
                    return;
                }
            };
            while go_rx.recv().unwrap_or(false) {
                let answer = rt.block_on(async {
                    let r = client
                        .get(&url)
                        .basic_auth(&user, Some(&password))
                        .send()
                        .await
                        .map_err(|e| harmony_http::describe(&e))?;
                    let status = r.status().as_u16();
                    let body: serde_json::Value = r
                        .json()
                        .await
                        .map_err(|e| format!("HTTP {status}, not JSON: {e}"))?;
                    let count = body["Members"].as_array().map(Vec::len).unwrap_or(0);
                    if status == 200 && count == expected {
                        Ok(())
                    } else {
                        Err(format!(
                            "HTTP {status}, {count} of {expected} members: {body}"
                        ))
                    }
                });
                if tx.send(answer).is_err() {
                    return;
                }
            }
        });
        // Ok(Err(why)): the emulator or the poller stopped, no use waiting on.
        let listed = eventually_blocking(
            EMULATOR_TIMEOUT,
            format!("sushy-emulator to list the lab's {expected} systems"),
            || {
                if let Some(Ok(Some(status))) = self.sushy.as_mut().map(Child::try_wait) {
                    self.sushy = None;
                    return Ok(Err(format!(
                        "sushy-emulator exited with {status} before answering"
                    )));
                }
                if go_tx.send(true).is_err() {
                    return Ok(Err("the poller thread stopped".to_string()));
                }
                match rx.recv() {
                    Ok(Ok(())) => Ok(Ok(())),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Ok(Err("the poller thread stopped".to_string())),
                }
            },
        );
        let result = match listed {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(format!(
                "{why} (GET {}/redfish/v1/Systems)\n{}",
                self.base_url(),
                self.log_tail()
            )),
            Err(w) => Err(format!(
                "{w} (GET {}/redfish/v1/Systems, basic auth, TLS)\n{}",
                self.base_url(),
                self.log_tail()
            )),
        };
        let _ = go_tx.send(false);
        let _ = poller.join();
        result
    }

    fn stop_sushy(&mut self) {
        if let Some(mut child) = self.sushy.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn chown(&self, path: &Path) -> Result<(), String> {
        let Some((uid, gid)) = self.run_as else {
            return Ok(());
        };
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .map_err(|e| format!("chown {} to {uid}:{gid}: {e}", path.display()))
    }
}

impl Drop for BmcLab {
    fn drop(&mut self) {
        // QEMU outlives a killed libvirtd: destroy the running domains first.
        if self.libvirtd.is_some()
            && let Ok(names) = self.virsh(&["list", "--name"])
        {
            for name in names.lines().map(str::trim).filter(|n| !n.is_empty()) {
                let _ = self.virsh(&["destroy", name]);
            }
        }
        self.stop_sushy();
        self.copy_logs();
        if let Some(mut child) = self.libvirtd.take() {
            // SAFETY: kill(2) on our own child's pid; no memory is touched.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            if crate::command::wait_or_kill(&mut child, Duration::from_secs(5)).is_err() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        kill_naming(&self.dir.path().display().to_string());
    }
}

/// SIGKILLs every process (but this one) whose command line names `needle` (the lab's dir):
/// a QEMU that survived, should anything have gone wrong.
fn kill_naming(needle: &str) {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            // SAFETY: kill(2) with a pid read from /proc; no memory is touched.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

fn validate(options: &BmcLabOptions) -> Result<(), String> {
    let word = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let mut names = std::collections::BTreeSet::new();
    for vm in &options.vms {
        if !word(&vm.name) || !names.insert(vm.name.as_str()) {
            return Err(format!(
                "VM name {:?}: use unique names of letters, digits, '-', '_' and '.'",
                vm.name
            ));
        }
        let parts: Vec<&str> = vm.mac.split(':').collect();
        if parts.len() != 6
            || !parts
                .iter()
                .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(format!(
                "VM {}: MAC {:?} is not aa:bb:cc:dd:ee:ff",
                vm.name, vm.mac
            ));
        }
        if vm.memory_mib < 16 {
            return Err(format!(
                "VM {}: {} MiB is too little",
                vm.name, vm.memory_mib
            ));
        }
        if let Some(tap) = &vm.tap
            && (!word(tap) || tap.len() > 15)
        {
            return Err(format!(
                "VM {}: tap name {tap:?} is not a device name",
                vm.name
            ));
        }
    }
    if let Some(ns) = &options.netns
        && !word(ns)
    {
        return Err(format!("network namespace name {ns:?}"));
    }
    let u = &options.username;
    if u.is_empty() || u.contains([':', '\n', '\r']) || options.password.contains(['\n', '\r']) {
        return Err("the basic-auth user must be non-empty without ':' or line breaks, the password without line breaks".into());
    }
    Ok(())
}

/// The uid and gid of `nobody`.
fn nobody() -> Result<(u32, u32), String> {
    // SAFETY: getpwnam with a NUL-terminated name; the record is read at once, on this thread.
    let pw = unsafe { libc::getpwnam(c"nobody".as_ptr()) };
    if pw.is_null() {
        return Err("no user `nobody` to run libvirtd as".into());
    }
    // SAFETY: pw is non-null and points to getpwnam's static record.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

/// A bcrypt hash of `password` (the only format sushy-tools' htpasswd accepts), made by the
/// venv's python with its `bcrypt` (a dependency of sushy-tools); the password goes on stdin.
fn bcrypt_hash(python: &Path, password: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = Command::new(python)
        .args([
            "-c",
            "import bcrypt, sys; print(bcrypt.hashpw(sys.stdin.buffer.read(), bcrypt.gensalt(rounds=4)).decode())",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}; {INSTALL_HINT}", python.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(password.as_bytes())
            .map_err(|e| format!("hashing the password: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("hashing the password: {e}"))?;
    let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && hash.starts_with("$2") {
        Ok(hash)
    } else {
        Err(format!(
            "hashing the password with bcrypt failed ({}): {}; {INSTALL_HINT}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A Python string literal (a JSON string is one).
fn py_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {mode:o} {}: {e}", path.display()))
}

/// The last 30 lines of a file (empty when it cannot be read).
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Runs `cmd`, killing it after [`COMMAND_TIMEOUT`]: success, stdout and stderr.
fn run_with_timeout(cmd: &mut Command, what: &str) -> Result<(bool, String, String), String> {
    let hint = format!("; {INSTALL_HINT}");
    let ran = crate::command::run_bounded(cmd, what, COMMAND_TIMEOUT, &hint)?;
    Ok((ran.status.success(), ran.stdout, ran.stderr))
}

/// libvirt's domain type for the lab's VMs: `kvm` when guests run under KVM and every user may
/// open `/dev/kvm` (libvirtd runs unprivileged), else `qemu`; said once.
fn domain_type() -> &'static str {
    use std::os::unix::fs::PermissionsExt;
    static CHOSEN: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| {
        let accel = crate::accel::qemu_accel();
        let open_to_all = std::fs::metadata("/dev/kvm")
            .is_ok_and(|m| m.permissions().mode() & 0o006 == 0o006);
        let chosen = if accel.name == "kvm" && open_to_all {
            "kvm"
        } else {
            "qemu"
        };
        eprintln!(
            "BMC lab: libvirt domain type {chosen} (accelerator {}: {}; /dev/kvm open to libvirtd's user: {open_to_all})",
            accel.name, accel.why
        );
        chosen
    })
}
