//! Network namespaces for the bare-metal end-to-end tests: a "services" namespace with a
//! bridge, client namespaces wired to it with veth pairs, and tap devices for QEMU. Names are
//! unique per test run; everything is deleted on drop, processes inside included. Only
//! private addresses inside these namespaces are used. Needs root (`ip netns add`).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn ip(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ip {}: {e} (install iproute2)", args.join(" ")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether this process can create network namespaces (root with iproute2).
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("network-namespace tests need root (CI runs them as root)".into());
    }
    ip(&["-V"]).map(|_| ())
}

/// A network namespace, deleted (with every process in it) when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `hm-<tag>-<pid>-<n>` with its loopback up.
    pub fn new(tag: &str) -> Result<Self, String> {
        let name = format!(
            "hm-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        ip(&["netns", "add", &name])?;
        let ns = Self { name };
        ns.run(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip netns exec NAME`: the words to put before a command to run it inside.
    pub fn prefix(&self) -> Vec<String> {
        vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.name.clone(),
        ]
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// Runs `args` inside and returns its output, or an error with its standard error.
    pub fn run(&self, args: &[&str]) -> Result<Output, String> {
        let out = self
            .command(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", args.join(" ")))?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(format!(
                "{} (in {}) failed with {}: {}{}",
                args.join(" "),
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ))
        }
    }

    /// Starts `args` inside, without waiting.
    pub fn spawn(&self, args: &[&str], stdout: Stdio, stderr: Stdio) -> Result<Child, String> {
        self.command(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("{}: {e}", args.join(" ")))
    }

    /// Binds a TCP listener inside the namespace, from this process: a short-lived thread
    /// enters the namespace, binds, and the socket stays in the namespace wherever it is used.
    pub fn bind_tcp(&self, addr: SocketAddr) -> Result<TcpListener, String> {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            // SAFETY: setns on this thread only; the fd is valid for the call.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
            }
            TcpListener::bind(addr).map_err(|e| format!("bind {addr} in {path}: {e}"))
        })
        .join()
        .map_err(|_| "the namespace thread panicked".to_string())?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(out) = ip(&["netns", "pids", &self.name]) {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: kill(2) on processes inside our own namespace.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A services namespace holding bridge `br0` with `address/prefix`, and the client
/// namespaces and tap devices plugged into it.
#[derive(Debug)]
pub struct Lab {
    /// The namespace the services (dnsmasq, haproxy, HTTP) run in.
    pub services: Netns,
    clients: Vec<Netns>,
    ports: usize,
}

impl Lab {
    /// A bridge `br0` in a new namespace, with the given addresses (CIDR form, first is main).
    pub fn new(tag: &str, addresses: &[&str]) -> Result<Self, String> {
        let services = Netns::new(tag)?;
        services.run(&["ip", "link", "add", "br0", "type", "bridge"])?;
        services.run(&["ip", "link", "set", "br0", "up"])?;
        for a in addresses {
            services.run(&["ip", "addr", "add", a, "dev", "br0"])?;
        }
        Ok(Self {
            services,
            clients: Vec::new(),
            ports: 0,
        })
    }

    /// A new namespace whose `eth0` (with `mac`, no address) is plugged into the bridge.
    pub fn client(&mut self, tag: &str, mac: &str) -> Result<&Netns, String> {
        let client = Netns::new(tag)?;
        let port = format!("vp{}", self.ports);
        self.ports += 1;
        self.services.run(&[
            "ip",
            "link",
            "add",
            &port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            client.name(),
        ])?;
        self.services
            .run(&["ip", "link", "set", &port, "master", "br0"])?;
        self.services.run(&["ip", "link", "set", &port, "up"])?;
        client.run(&["ip", "link", "set", "eth0", "address", mac])?;
        client.run(&["ip", "link", "set", "eth0", "up"])?;
        self.clients.push(client);
        self.clients
            .last()
            .ok_or_else(|| "client namespace vanished".to_string())
    }

    /// A tap device in the services namespace, plugged into the bridge (for QEMU).
    pub fn tap(&mut self) -> Result<String, String> {
        let name = format!("tap{}", self.ports);
        self.ports += 1;
        self.services
            .run(&["ip", "tuntap", "add", "dev", &name, "mode", "tap"])?;
        self.services
            .run(&["ip", "link", "set", &name, "master", "br0"])?;
        self.services.run(&["ip", "link", "set", &name, "up"])?;
        Ok(name)
    }
}

/// Polls `check` every 200 ms until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
