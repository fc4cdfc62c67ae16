//! Network namespaces for the bare-metal end-to-end tests: a "services" namespace with a
//! bridge, client namespaces wired to it with veth pairs, and tap devices for QEMU. Names are
//! unique per test run; everything is deleted on drop, processes inside included. Only
//! private addresses inside these namespaces are used. Needs root (`ip netns add`).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

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

impl Netns {
    /// Runs busybox udhcpc once on `eth0` (bounded: 5 discovers, 2 s apart, so dnsmasq's ping
    /// check of a dynamic address fits), its script and output under `dir`; returns whether a
    /// lease was bound and what the script saw (`EVENT ip=.. hostname=.. router=.. dns=..
    /// domain=..` per line). With `configure`, the leased address is set on `eth0`, so that
    /// the namespace can then talk from it, as a machine that booted would.
    pub fn udhcpc(&self, dir: &std::path::Path, configure: bool) -> (bool, String) {
        let script = dir.join(format!("{}-udhcpc.sh", self.name()));
        let out = dir.join(format!("{}-udhcpc.out", self.name()));
        let set = if configure {
            "[ \"$1\" = bound ] && ip addr add \"$ip/${mask:-24}\" dev \"$interface\"\n"
        } else {
            ""
        };
        let text = format!(
            "#!/bin/sh\necho \"$1 ip=$ip hostname=$hostname router=$router dns=$dns domain=$domain\" >> {}\n{set}exit 0\n",
            out.display()
        );
        if std::fs::write(&script, text).is_err()
            || Command::new("chmod")
                .args(["+x", &script.display().to_string()])
                .status()
                .map(|s| !s.success())
                .unwrap_or(true)
        {
            return (false, format!("cannot write {}", script.display()));
        }
        let status = self
            .command("busybox")
            .args([
                "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "5", "-T", "2", "-A", "1",
            ])
            .arg("-s")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        (
            status.map(|s| s.success()).unwrap_or(false),
            std::fs::read_to_string(&out).unwrap_or_default(),
        )
    }

    /// POSTs `body` to `url` from inside with curl (10 s at most): `STATUS BODY`, the status
    /// `000` when nothing answered.
    pub fn post(&self, url: &str, body: &str) -> String {
        let out = self
            .command("curl")
            .args([
                "-s",
                "-m",
                "10",
                "-w",
                "%{http_code}",
                "-o",
                "/dev/stderr",
                "-X",
                "POST",
            ])
            .args(["--data", body, url])
            .output();
        match out {
            Ok(out) => format!(
                "{} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => format!("000 cannot run curl: {e}"),
        }
    }

    /// Takes a DHCP lease on `eth0` and sets its address (see [`Netns::udhcpc`]); returns the
    /// address leased.
    pub fn lease(&self, dir: &std::path::Path) -> Result<String, String> {
        let (ok, seen) = self.udhcpc(dir, true);
        let ip = seen
            .lines()
            .filter(|l| l.starts_with("bound "))
            .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("ip=")))
            .map(str::to_string);
        match ip {
            Some(ip) if ok => Ok(ip),
            _ => Err(format!("no DHCP lease in {}: {seen}", self.name())),
        }
    }
}

impl Netns {
    /// Makes `127.0.0.1:port` inside this namespace reach `127.0.0.1:port` of the test's own
    /// namespace (e.g. the API-server fixture, whose certificate names 127.0.0.1), relaying
    /// bytes both ways on plain threads. Lives as long as the test process.
    pub fn forward_loopback(&self, port: u16) -> Result<(), String> {
        let listener = self.bind_tcp(SocketAddr::from(([127, 0, 0, 1], port)))?;
        listener
            .set_nonblocking(false)
            .map_err(|e| format!("listener: {e}"))?;
        std::thread::spawn(move || {
            for inside in listener.incoming().flatten() {
                let Ok(outside) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                for (from, to) in [
                    (inside.try_clone(), outside.try_clone()),
                    (outside.try_clone(), inside.try_clone()),
                ] {
                    if let (Ok(mut from), Ok(mut to)) = (from, to) {
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut from, &mut to);
                            let _ = to.shutdown(std::net::Shutdown::Write);
                        });
                    }
                }
            }
        });
        Ok(())
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

    /// The client namespace named `name` (as [`Netns::name`] gave it).
    pub fn client_named(&self, name: &str) -> Option<&Netns> {
        self.clients.iter().find(|c| c.name() == name)
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
