//! What the QEMU bare-metal tests boot: Harmony's discovery image (`discovery-image/build.sh`)
//! built from this workspace's agent, a stand-in for the OKD live installer made from it, and
//! helpers to read a machine's console and the HTTP boot server's access log while it boots.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use harmony::domain::capability::HttpAccess;

use crate::eventually::eventually;

/// A console file's text (empty when it cannot be read), invalid UTF-8 replaced.
pub fn console_text(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// The target folder's profile directory the running test was built into (`.../debug`).
fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("the test's executable: {e}"))?;
    // .../<profile>/deps/<test>-HASH
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} is not in <profile>/deps", exe.display()))
}

/// Builds `harmony-discovery-agent` into the running test's target folder and profile (the
/// same `CARGO_TARGET_DIR`, so CI builds it once), then the discovery image from it with
/// `discovery-image/build.sh` (downloads cached under ~/.cache/harmony/discovery-image; an
/// image already built from the same inputs is kept). Returns the image's folder (vmlinuz,
/// initrd.img).
pub fn build_image() -> Result<PathBuf, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let profile = profile_dir()?;
    let target = profile
        .parent()
        .ok_or_else(|| format!("{} has no parent", profile.display()))?;
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&workspace)
        .args([
            "build",
            "--locked",
            "-p",
            "harmony_discovery_agent",
            "--bin",
            "harmony-discovery-agent",
        ])
        .env("CARGO_TARGET_DIR", target.as_os_str());
    if profile.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    let status = cargo
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("building harmony-discovery-agent failed".into());
    }
    let agent = profile.join("harmony-discovery-agent");
    if !agent.is_file() {
        return Err(format!("{} was not built", agent.display()));
    }
    let out = profile.join("discovery-image");
    let built = Command::new("bash")
        .arg(workspace.join("discovery-image/build.sh"))
        .arg(&out)
        .arg(&agent)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run discovery-image/build.sh: {e}"))?;
    let stdout = String::from_utf8_lossy(&built.stdout);
    if !built.status.success() {
        return Err(format!("discovery-image/build.sh failed: {stdout}"));
    }
    let dir = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    if dir != out {
        return Err(format!(
            "build.sh prints its output folder last: {} is not {}",
            dir.display(),
            out.display()
        ));
    }
    Ok(dir)
}

/// A stand-in for the OKD live installer: the discovery initramfs in `image` with its `/init`
/// replaced (a second cpio archive appended, which the kernel unpacks over the first) by a
/// script that brings the NIC up and fetches the `coreos.inst.ignition_url` on its command
/// line, saying so on the serial port (`stand-in installer: fetched URL`). `work` is a
/// scratch folder.
pub fn stand_in_installer(image: &Path, work: &Path) -> Result<Vec<u8>, String> {
    let root = work.join("installer-root");
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    std::fs::write(
        root.join("init"),
        r#"#!/bin/sh
export PATH=/bin:/usr/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
# The per-MAC script names no serial console, so the kernel writes to the screen only: these
# lines (and the kernel's banner, from dmesg) go to the serial port the test reads.
say() { echo "stand-in installer: $*" >/dev/ttyS0; }
dmesg | grep "Linux version" >/dev/ttyS0
say "kernel command line: $(cat /proc/cmdline)"
for m in $(cat /etc/modules-order); do insmod /lib/modules/$m 2>/dev/null; done
for n in /sys/class/net/*; do n=${n##*/}; [ "$n" = lo ] && continue
  ip link set "$n" up; udhcpc -i "$n" -n -q -t 6 -T 3 -s /usr/share/udhcpc/default.script >/dev/null 2>&1 && break; done
for w in $(cat /proc/cmdline); do case "$w" in coreos.inst.ignition_url=*) url=${w#*=};; esac; done
if busybox wget -q -O /tmp/ignition "$url"; then say "fetched $url"; else say "could not fetch $url"; fi
while :; do sleep 3600; done
"#,
    )
    .map_err(|e| format!("writing the stand-in init: {e}"))?;
    let script = "cd \"$1\" && chmod 755 init && \
        if command -v cpio >/dev/null; then echo init | cpio --quiet -o -H newc; \
        else echo init | busybox cpio -o -H newc; fi | gzip -9n";
    let overlay = Command::new("bash")
        .args(["-c", script, "pack"])
        .arg(&root)
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if !overlay.status.success() {
        return Err(format!(
            "packing the stand-in init failed: {}",
            String::from_utf8_lossy(&overlay.stderr)
        ));
    }
    let initrd_path = image.join("initrd.img");
    let mut initrd =
        std::fs::read(&initrd_path).map_err(|e| format!("{}: {e}", initrd_path.display()))?;
    initrd.extend_from_slice(&overlay.stdout);
    Ok(initrd)
}

/// The first request of the access log with this method and path.
pub fn hit<'a>(log: &'a [HttpAccess], method: &str, path: &str) -> Option<&'a HttpAccess> {
    log.iter().find(|a| a.method == method && a.path == path)
}

/// [`eventually`] until `check` gives a value: `Ok(Some(v))`. `Err` stops at once (the
/// machine is gone, say); after `timeout`, an error naming `what`.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    // `Some(Err(e))` ends the wait: `check` said it is no use.
    eventually(timeout, what, || {
        let polled = check();
        async move { polled.await.transpose() }
    })
    .await
    .map_err(|w| w.to_string())?
    .map_err(|e| format!("before {what}: {e}"))
}

/// Writes the kernel's banner and the images' lines of a console to the test log. Straight to
/// stderr, not `println!`: the test harness hides a passing test's printed output, and CI's log
/// should keep the proof that a real kernel booted.
pub fn print_kernel_banner(console: &Path) {
    use std::io::Write;
    const MARKERS: [&str; 4] = [
        "Linux version",
        "harmony-discovery:",
        "stand-in installer:",
        "Harmony: the boot server",
    ];
    let mut err = std::io::stderr().lock();
    for line in console_text(console).lines() {
        let Some(at) = MARKERS.iter().filter_map(|m| line.find(m)).min() else {
            continue;
        };
        // From the kernel's timestamp when there is one, past the firmware's escape codes.
        let start = line[..at].rfind("[ ").unwrap_or(at);
        let _ = writeln!(err, "console: {}", &line[start..]);
    }
}
