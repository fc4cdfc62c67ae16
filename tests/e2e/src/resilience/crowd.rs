//! A crowd of unauthenticated connections filling the control plane's descriptors (idle TCP
//! connections, slowloris request heads, silent WebSocket upgrades), and honest agents getting
//! in through it. The helpers the crowd is made of are shared with the suite's other hostile
//! scenarios (`tests/control_plane_hostile.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use harmony::infra::control_plane::Health;
use harmony_agent_protocol::SecretString;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::eventually::eventually;
use crate::ha::{raise_fd_limit, tls_connector};
use crate::multi_region::{Agent, ControlPlaneOptions};
use crate::world::{Bins, World, WorldOptions};

/// A WebSocket upgrade of the agents' path after which nothing is sent (no hello).
pub const SILENT_UPGRADE: &str = "GET /v1/agent HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/// Reads (discarding whatever comes) until the server closes `io` or `until` passes; when it
/// closed, the moment it did.
pub async fn closed_by_server(
    io: &mut (impl AsyncRead + Unpin),
    until: Instant,
) -> Option<Instant> {
    let mut buf = [0u8; 512];
    let read_to_end = async { while let Ok(1..) = io.read(&mut buf).await {} };
    let limit = until.saturating_duration_since(Instant::now());
    tokio::time::timeout(limit, read_to_end)
        .await
        .ok()
        .map(|()| Instant::now())
}

/// A request head never finished: one byte a second until the server closes the connection
/// (or `until` passes). Returns when it closed (if it did) and how many bytes were sent.
pub async fn trickle(
    tls: &mut tokio_rustls::client::TlsStream<TcpStream>,
    until: Instant,
) -> (Option<Instant>, usize) {
    let head = b"GET /v1/regions HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ";
    let mut sent = 0;
    let mut buf = [0u8; 512];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while Instant::now() < until {
        tokio::select! {
            r = tls.read(&mut buf) => match r {
                Ok(1..) => {}
                _ => return (Some(Instant::now()), sent),
            },
            _ = tick.tick() => {
                let byte = head.get(sent).copied().unwrap_or(b'a');
                if tls.write_all(&[byte]).await.is_err() || tls.flush().await.is_err() {
                    return (Some(Instant::now()), sent);
                }
                sent += 1;
            }
        }
    }
    (None, sent)
}

/// How many descriptors process `pid` holds (0 when it cannot be read).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// An agent of `region` (zone `z1`) bootstrapping with `token`, its files in the world's
/// folder, named after the region.
pub fn bootstrap_agent(w: &World, region: &str, token: &SecretString) -> Agent {
    w.agent(region, &w.agent_options(region, region, "z1", Some(token)))
}

/// Waits until every region of `regions` is healthy, at most `wait` in all; the error has the
/// world's logs.
pub async fn wait_healthy(w: &World, regions: &[String], wait: Duration) -> Result<(), String> {
    eventually(wait, format!("agents {regions:?} healthy"), || async {
        for region in regions {
            let s = w.status(region).await;
            if s.health != Health::Healthy {
                return Err(s);
            }
        }
        Ok(())
    })
    .await
    .map_err(|e| format!("{e}\n{}", w.logs()))
}

/// A request (`get_inventory`) through `region`'s agent, which must succeed.
pub async fn inventory_through(
    w: &World,
    region: &str,
    id: &str,
    wait: Duration,
) -> Result<(), String> {
    let res = w
        .client
        .request(region, id, "get_inventory", serde_json::json!({}), wait)
        .await
        .map_err(|e| e.to_string())?;
    if res.ok {
        Ok(())
    } else {
        Err(format!("request {id} through {region} failed: {res:?}"))
    }
}

/// How big the crowd is, and how many honest agents come through it.
#[derive(Debug, Clone, Copy)]
pub struct CrowdSize {
    /// The control plane's open-file limit (its connection limit is that minus 128).
    pub open_files: u64,
    /// Idle TCP connections (never start TLS), opened first.
    pub idle: usize,
    /// Slowloris connections (a request head trickled one byte a second).
    pub slowloris: usize,
    /// Silent WebSocket upgrades (no hello).
    pub upgrades: usize,
    /// Honest agents started once the crowd is in.
    pub agents: usize,
}

impl CrowdSize {
    /// Issue 32's figure: 2,000 idle, 500 slowloris and 200 silent upgrades against a control
    /// plane allowed 1,024 descriptors, three honest agents.
    pub const ISSUE: Self = Self {
        open_files: 1_024,
        idle: 2_000,
        slowloris: 500,
        upgrades: 200,
        agents: 3,
    };

    /// Every crowd member.
    pub fn members(&self) -> usize {
        self.idle + self.slowloris + self.upgrades
    }
}

/// What the honest agents met.
#[derive(Debug, Clone)]
pub struct CrowdOutcome {
    /// Crowd members started.
    pub members: usize,
    /// Crowd members that got a connection (the rest were shed or refused on the way in).
    pub opened: usize,
    /// The control plane's descriptors once the crowd was in.
    pub descriptors: usize,
    /// Honest agents started.
    pub agents: usize,
    /// Agents whose first attempt got them in (no "connection to the control plane lost" in
    /// their log).
    pub first_attempt: usize,
    /// From starting the agents to every region healthy.
    pub healthy_after: Duration,
}

/// Starts a world whose control plane may hold `size.open_files` descriptors (every timeout
/// two minutes, so no crowd member is freed by one during the run), fills it with the crowd,
/// oldest first, then starts the honest agents and waits until each region is healthy and a
/// request goes through the first. An error says what failed, with the logs.
pub async fn honest_agents_through_a_crowd(
    bins: Bins,
    size: CrowdSize,
) -> Result<CrowdOutcome, String> {
    let fd_limit = raise_fd_limit();
    let needed = size.members() as u64 + 512;
    if fd_limit < needed {
        return Err(format!(
            "the open-file hard limit is {fd_limit}; the crowd needs {needed} (raise it with `ulimit -Hn`)"
        ));
    }
    let w = tokio::task::block_in_place(|| {
        World::start(
            bins,
            WorldOptions {
                control_plane: ControlPlaneOptions {
                    extra_args: [
                        "--tls-handshake-timeout-ms",
                        "120000",
                        "--header-read-timeout-ms",
                        "120000",
                    ]
                    .map(String::from)
                    .to_vec(),
                    open_files: Some(size.open_files),
                    heartbeat_ms: 1_000,
                    unhealthy_after_ms: 3_000,
                    unavailable_after_ms: 6_000,
                    ..ControlPlaneOptions::default()
                },
                ..WorldOptions::default()
            },
        )
    });
    let pid = w.cp().pid().ok_or("the control plane has no pid")?;
    let regions: Vec<String> = (0..size.agents).map(|i| format!("honest{i}")).collect();
    let mut tokens = Vec::new();
    for region in &regions {
        tokens.push(w.create(region, "z1").await.bootstrap_token);
    }
    let (addr, tls) = (w.cp().addr, tls_connector(&w.pki().ca_pem)?);

    // The crowd, oldest first. Every member's connect and handshake is bounded (so a listener
    // that cannot take the crowd does not stall the run) and a member shed on the way just
    // ends: the crowd only has to keep the listener full. Each reports once it is settled.
    let (settled_tx, mut settled) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let mut crowd = Vec::new();
    let until = Instant::now() + Duration::from_secs(180);
    for _ in 0..size.idle {
        let settled = settled_tx.clone();
        crowd.push(tokio::spawn(async move {
            let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await;
            let Ok(Ok(mut tcp)) = tcp else {
                let _ = settled.send(false);
                return;
            };
            let _ = settled.send(true);
            closed_by_server(&mut tcp, until).await;
        }));
        // Oldest first: the connects are made in order.
        tokio::task::yield_now().await;
    }
    let handshakes = Arc::new(tokio::sync::Semaphore::new(128));
    for i in 0..size.slowloris + size.upgrades {
        let permit = handshakes
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let (tls, settled) = (tls.clone(), settled_tx.clone());
        let slowloris = i < size.slowloris;
        crowd.push(tokio::spawn(async move {
            let open = async {
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
                    .map_err(std::io::Error::other)?;
                let tcp = TcpStream::connect(addr).await?;
                let mut s = tls.connect(name, tcp).await?;
                if !slowloris {
                    s.write_all(SILENT_UPGRADE.as_bytes()).await?;
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        s.read_exact(&mut b).await?;
                        head.push(b[0]);
                    }
                }
                Ok::<_, std::io::Error>(s)
            };
            let opened = tokio::time::timeout(Duration::from_secs(5), open).await;
            drop(permit);
            let Ok(Ok(mut s)) = opened else {
                let _ = settled.send(false);
                return;
            };
            let _ = settled.send(true);
            if slowloris {
                trickle(&mut s, until).await;
            } else {
                closed_by_server(&mut s, until).await;
            }
        }));
    }
    // (Each task keeps its sender for its life: count the reports, not the channel's end.)
    let mut opened = 0;
    for _ in 0..crowd.len() {
        opened += usize::from(settled.recv().await.unwrap_or(false));
    }
    let descriptors = open_fds(pid);
    if opened as u64 <= size.open_files {
        return Err(format!(
            "only {opened} crowd connections opened, not more than the {} descriptors: the crowd did not fill the control plane",
            size.open_files
        ));
    }

    // Honest agents now.
    let _agents: Vec<Agent> = regions
        .iter()
        .zip(&tokens)
        .map(|(region, token)| bootstrap_agent(&w, region, token))
        .collect();
    let started = Instant::now();
    wait_healthy(&w, &regions, Duration::from_secs(60)).await?;
    let healthy_after = started.elapsed();
    let first_attempt = regions
        .iter()
        .filter(|region| {
            let text = std::fs::read_to_string(w.log(region)).unwrap_or_default();
            !text.contains("connection to the control plane lost")
        })
        .count();
    inventory_through(
        &w,
        &regions[0],
        "through-a-full-listener",
        Duration::from_secs(60),
    )
    .await?;
    for c in crowd {
        c.abort();
    }
    Ok(CrowdOutcome {
        members: size.members(),
        opened,
        descriptors,
        agents: size.agents,
        first_attempt,
        healthy_after,
    })
}
