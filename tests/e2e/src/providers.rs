//! Service-provider harness: the external provider process (`e2e-provider`) on a fixed loopback
//! port that survives restarts, and a plain HTTP/1.1 JSON client for the agent's provider API and
//! the provider's own endpoints.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::eventually::eventually_blocking;
use crate::multi_region::free_port;

/// An external provider process; `restart` brings it back on the same port with its instances.
pub struct ProviderProcess {
    child: Option<Child>,
    binary: PathBuf,
    /// Its name (also in its outputs).
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    dir: PathBuf,
    ready_after_ms: u64,
    starts: u32,
}

impl ProviderProcess {
    /// Starts `binary` (tests pass `env!("CARGO_BIN_EXE_e2e-provider")`) on a free loopback port,
    /// keeping its state and logs in `dir`, and waits until it accepts connections.
    pub fn start(
        binary: &Path,
        name: &str,
        dir: &Path,
        ready_after_ms: u64,
    ) -> Result<Self, String> {
        let mut p = Self {
            child: None,
            binary: binary.to_path_buf(),
            name: name.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], free_port()?)),
            dir: dir.to_path_buf(),
            ready_after_ms,
            starts: 0,
        };
        p.spawn()?;
        Ok(p)
    }

    fn spawn(&mut self) -> Result<(), String> {
        self.starts += 1;
        let log = self
            .dir
            .join(format!("provider-{}-{}.log", self.name, self.starts));
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&self.binary)
            .arg("--listen")
            .arg(self.addr.to_string())
            .arg("--name")
            .arg(&self.name)
            .arg("--state-file")
            .arg(self.dir.join(format!("provider-{}.json", self.name)))
            .arg("--ready-after-ms")
            .arg(self.ready_after_ms.to_string())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        let addr = self.addr;
        eventually_blocking(
            Duration::from_secs(20),
            format!("provider {} to listen on {addr}", self.name),
            || TcpStream::connect(addr).map(drop),
        )
        .map_err(|w| w.to_string())
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops it with SIGKILL (its health checks then fail).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port, with the instances it had.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill9();
        self.spawn()
    }

    /// The instances it holds now: id -> `{service_type, spec, created_ms}`.
    pub fn instances(&self) -> Result<serde_json::Map<String, Value>, String> {
        let (status, body) = http_json("GET", &format!("{}/v1/instances", self.url()), None, None)?;
        if status != 200 {
            return Err(format!("GET /v1/instances answered {status}: {body}"));
        }
        Ok(body["instances"].as_object().cloned().unwrap_or_default())
    }
}

impl Drop for ProviderProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One HTTP/1.1 call with an optional JSON body and bearer token; returns the status and the
/// body as JSON (a JSON string when it is not JSON).
pub fn http_json(
    method: &str,
    url: &str,
    body: Option<&Value>,
    bearer: Option<&str>,
) -> Result<(u16, Value), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// is supported here"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut tcp = TcpStream::connect(host).map_err(|e| format!("{method} {url}: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        payload.len()
    );
    if body.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    if let Some(t) = bearer {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes())
        .and_then(|_| tcp.write_all(payload.as_bytes()))
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw)
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{method} {url}: no HTTP header in {text:?}"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{method} {url}: no status in {head:?}"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    Ok((status, value))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
