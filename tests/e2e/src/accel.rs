//! Which accelerator the QEMU tests run their guests under: KVM when `/dev/kvm` opens and a
//! guest really runs under it, software emulation (TCG) otherwise. Decided by booting Debian's
//! iPXE ROM for a few seconds (on nested virtualisation, as on this project's CI machines, KVM
//! opens but the guest stalls as iPXE starts), kept for the machine's current boot in the temp
//! folder so the other test processes need not probe again, and printed.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::eventually::eventually_blocking;

/// The accelerator chosen and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accel {
    /// `kvm` or `tcg`, as `qemu-system-x86_64 -accel` and libvirt's domain type (`kvm`,
    /// `qemu`) name them.
    pub name: &'static str,
    /// Why: what the probe saw.
    pub why: String,
}

impl Accel {
    /// libvirt's domain type for it: `kvm` or `qemu`.
    pub fn libvirt_domain_type(&self) -> &'static str {
        if self.name == "kvm" { "kvm" } else { "qemu" }
    }
}

/// How long the probe guest gets to show that iPXE runs.
const PROBE: Duration = Duration::from_secs(20);

/// The accelerator for this process's QEMU guests (probed on first call, then printed).
pub fn qemu_accel() -> &'static Accel {
    static CHOSEN: OnceLock<Accel> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let accel = cached().unwrap_or_else(|| {
            let accel = probe();
            remember(&accel);
            accel
        });
        eprintln!("QEMU accelerator: {} ({})", accel.name, accel.why);
        accel
    })
}

/// Where a probe's result is kept for the other test processes of this boot of the machine.
fn cache_file() -> Option<(std::path::PathBuf, String)> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some((
        std::env::temp_dir().join("harmony-qemu-accel"),
        boot.trim().to_string(),
    ))
}

/// The result an earlier probe of this boot kept: `BOOT_ID NAME WHY`.
fn cached() -> Option<Accel> {
    let (file, boot) = cache_file()?;
    let text = std::fs::read_to_string(file).ok()?;
    let mut parts = text.splitn(3, ' ');
    if parts.next()? != boot {
        return None;
    }
    let name = match parts.next()? {
        "kvm" => "kvm",
        "tcg" => "tcg",
        _ => return None,
    };
    Some(Accel {
        name,
        why: format!("{} (probed earlier in this boot)", parts.next()?.trim()),
    })
}

fn remember(accel: &Accel) {
    if let Some((file, boot)) = cache_file() {
        let _ = std::fs::write(file, format!("{boot} {} {}", accel.name, accel.why));
    }
}

fn tcg(why: impl Into<String>) -> Accel {
    Accel {
        name: "tcg",
        why: why.into(),
    }
}

fn probe() -> Accel {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        return tcg(format!("/dev/kvm: {e}"));
    }
    let Ok(serial) = tempfile::NamedTempFile::new() else {
        return tcg("no temp file for the KVM probe");
    };
    let child = Command::new("qemu-system-x86_64")
        .args([
            "-accel",
            "kvm",
            "-m",
            "128",
            "-display",
            "none",
            "-nodefaults",
        ])
        .args(["-no-reboot", "-boot", "n"])
        .arg("-serial")
        .arg(format!("file:{}", serial.path().display()))
        .args([
            "-netdev",
            "user,id=n0",
            "-device",
            "virtio-net-pci,netdev=n0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return tcg(format!(
                "cannot start qemu-system-x86_64 for the KVM probe: {e}"
            ));
        }
    };
    let ran = eventually_blocking(PROBE, "the probe guest to start under KVM", || {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(serial.path()) {
            let _ = f.read_to_string(&mut text);
        }
        if text.contains("initialising devices") {
            return Some(Ok(()));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Some(Err(format!("the probe guest exited under KVM ({status})")));
        }
        None
    })
    .unwrap_or_else(|_| {
        Err(format!(
            "/dev/kvm opens but an iPXE guest did not get past its start within {} s under KVM (nested virtualisation?)",
            PROBE.as_secs()
        ))
    });
    let _ = child.kill();
    let _ = child.wait();
    match ran {
        Ok(()) => Accel {
            name: "kvm",
            why: "an iPXE guest ran under KVM".into(),
        },
        Err(why) => tcg(why),
    }
}
