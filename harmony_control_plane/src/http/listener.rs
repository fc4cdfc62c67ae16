//! The TLS listener: accepts TCP connections, bounds how many are open, and serves an axum
//! [`Router`] over HTTP/1.1 (with upgrades, for the agents' WebSocket) on each, with timeouts a
//! hostile or broken client cannot outlast.
//!
//! What closes a connection (all from [`Limits`]):
//! - no TLS handshake within `tls_handshake_timeout` (an idle TCP connection, a client that
//!   never sends its ClientHello);
//! - no complete request head within `header_read_timeout` of hyper starting to wait for one
//!   (slowloris: headers trickled byte by byte). hyper starts that timer as soon as it waits for
//!   a head, so it also runs while a kept-alive connection waits for its next request;
//! - no request in flight for `idle_timeout` (a kept-alive connection nobody uses). The two
//!   timers overlap on an idle connection: it is closed by whichever is shorter.
//!
//! An upgraded connection (WebSocket) leaves hyper: neither timer applies any more, the session
//! on top has its own heartbeat timeout. Every connection, upgraded or not, holds one permit of
//! a semaphore of `max_connections` from before its TLS handshake until its socket is closed.
//! When none is left, the oldest connection that has not authenticated is shed to make room
//! for the newcomer ([`shed`]: so an agent with a valid identity is served on its first attempt
//! while idle, trickling or silent connections fill the listener); when every open connection
//! authenticated, the newcomer waits for a permit and the kernel's backlog holds the rest.
//! `accept()` errors (EMFILE, ENFILE, ENOBUFS, ...) shed the oldest unauthenticated connection
//! too; with none to shed they back off from 50 ms to 500 ms instead of spinning on a listener
//! that stays readable, and never end the loop.

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

mod shed;
mod tls_stream;
pub use shed::Proof;
use shed::{Leave, Sheddable, Unproven};

/// First and longest pause after a failed `accept()`; doubled on each failure in a row.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// See [`ACCEPT_BACKOFF_MIN`].
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);
/// Shortest interval between two "connection limit reached" warnings.
const FULL_WARNING_EVERY: Duration = Duration::from_secs(10);
/// Pause after shedding a connection for a descriptor, while its task closes it.
const SHED_PAUSE: Duration = Duration::from_millis(5);
/// hyper refuses a read buffer below this size.
const MIN_HEADER_BYTES: usize = 8192;

/// Bounds on what one client can hold on the listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest TLS handshake, from accept to the end of the handshake.
    pub tls_handshake_timeout: Duration,
    /// Longest wait for a complete request head once hyper waits for one (see the module doc).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed (not upgraded ones).
    pub idle_timeout: Duration,
    /// Most connections open at once (handshaking, HTTP or upgraded); at least 1.
    pub max_connections: usize,
    /// Largest request head (request line and headers), in bytes; at least 8192 (hyper's floor).
    pub max_header_bytes: usize,
    /// TLS handshakes run at once, counted from the client's ClientHello (a connection that
    /// sends nothing holds no turn); the others wait their turn, their timeout starting with it. Without this bound, a reconnect storm of thousands of
    /// agents shares the cores among every handshake at once, each finishes late, many pass
    /// their timeout and retry: measured, 10,000 agents took 140 s to come back instead of
    /// seconds (docs/benchmarks.md).
    pub max_handshakes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            tls_handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 20_000,
            max_header_bytes: 64 * 1024,
            max_handshakes: 128,
        }
    }
}

/// Descriptors kept for everything but client connections: the state database's pool, the
/// listener, files and logs.
pub const RESERVED_FDS: u64 = 128;

impl Limits {
    /// These limits with `max_connections` lowered, if needed, to fit an open-file limit of
    /// `nofile` less [`RESERVED_FDS`]: the listener then reaches its own bound (and sheds
    /// unauthenticated connections there) before `accept()` runs out of descriptors.
    pub fn fit_to_open_files(mut self, nofile: u64) -> Self {
        let room = usize::try_from(nofile.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX);
        self.max_connections = self.max_connections.min(room).max(1);
        self
    }
}

/// The process's open-file limit (soft `RLIMIT_NOFILE`), if it can be read.
pub fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed by pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    ok.then_some(limit.rlim_cur)
}

/// Serves `app` on `listener` over TLS until the process ends. See the module doc.
pub async fn serve(
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    app: Router,
    limits: Limits,
) {
    serve_with_shutdown(listener, tls, app, limits, std::future::pending()).await
}

/// Like [`serve`], but stops accepting and returns once `shutdown` completes. Connections
/// already open carry on until they end (their tasks run on the runtime, not in this future).
pub async fn serve_with_shutdown(
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let handshakes = Arc::new(Semaphore::new(limits.max_handshakes.max(1)));
    let unproven = Arc::new(Unproven::default());
    let mut backoff = ACCEPT_BACKOFF_MIN;
    // Under a flood every freed permit is taken at once: warn about the limit now and then only.
    let mut warned_full: Option<tokio::time::Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => return,
        };
        let (tcp, peer) = match accepted {
            Ok(c) => c,
            Err(e) if is_per_connection(&e) => {
                // The peer gave up before we accepted: nothing wrong with the listener.
                log::debug!("accept: {e}");
                continue;
            }
            Err(e) if unproven.shed_oldest() => {
                // Out of descriptors: the oldest connection that never authenticated makes room.
                log::debug!("accept: {e}; shed the oldest unauthenticated connection");
                tokio::select! {
                    () = tokio::time::sleep(SHED_PAUSE) => {}
                    () = &mut shutdown => return,
                }
                continue;
            }
            Err(e) => {
                // The listener stays readable while the backlog is not empty, so retrying at
                // once would spin at 100 % CPU until a descriptor frees up.
                log::warn!(
                    "accept failed: {e}; retrying in {} ms (at the open-file limit, raise `ulimit -n` or lower --max-connections)",
                    backoff.as_millis()
                );
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = &mut shutdown => return,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        backoff = ACCEPT_BACKOFF_MIN;
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if unproven.shed_oldest() {
                    log::debug!(
                        "{} connections open (--max-connections): shed the oldest unauthenticated one for {peer}",
                        limits.max_connections.max(1)
                    );
                } else if warned_full.is_none_or(|t| t.elapsed() >= FULL_WARNING_EVERY) {
                    warned_full = Some(tokio::time::Instant::now());
                    log::warn!(
                        "{} connections open (--max-connections), every one authenticated: new connections wait in the kernel's backlog until one closes",
                        limits.max_connections.max(1)
                    );
                }
                tokio::select! {
                    p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                    () = &mut shutdown => return,
                }
            }
        };
        let (mark, proof) = unproven.enter();
        tokio::spawn(connection(
            Sheddable { io: tcp, mark },
            peer,
            tls.clone(),
            handshakes.clone(),
            app.clone(),
            limits,
            (permit, proof),
        ));
    }
}

/// Errors that concern one connection, not the listener.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    )
}

/// One connection: TLS handshake, then HTTP/1.1 until the client leaves, a timeout fires or the
/// connection is upgraded (the upgraded socket keeps `permit`, inside [`Held`]).
async fn connection(
    tcp: Sheddable<TcpStream>,
    peer: SocketAddr,
    tls: tokio_rustls::TlsAcceptor,
    handshakes: Arc<Semaphore>,
    app: Router,
    limits: Limits,
    (permit, proof): (OwnedSemaphorePermit, Proof),
) {
    let _ = tcp.io.set_nodelay(true);
    let leave = Leave(proof.clone());
    let mark = tcp.mark.clone();
    let handshake = async {
        let mut stream = tls_stream::TlsStream::new(tcp, tls.config().clone())?;
        // The ClientHello is read before taking a turn, so a connection that sends nothing (or
        // trickles) never holds one; each step has the whole handshake timeout.
        tokio::time::timeout(limits.tls_handshake_timeout, stream.read_client_hello()).await??;
        let _turn = tokio::select! {
            t = handshakes.acquire_owned() => t.expect("the semaphore is never closed"),
            // Shed while waiting for its turn (its socket is not being read then).
            () = mark.until_shed() => return Err(io::Error::from(io::ErrorKind::ConnectionAborted)),
        };
        tokio::time::timeout(limits.tls_handshake_timeout, stream.handshake()).await??;
        Ok::<_, io::Error>(stream)
    };
    let stream = match handshake.await {
        Ok(s) => s,
        // A timeout comes out of `?` as an io::Error of kind TimedOut.
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            log::debug!(
                "TLS handshake with {peer} not done within {} ms: closed",
                limits.tls_handshake_timeout.as_millis()
            );
            return;
        }
        Err(e) => {
            log::debug!("TLS handshake with {peer} failed: {e}");
            return;
        }
    };
    let (in_flight, mut idle) = watch::channel(0usize);
    let in_flight = Arc::new(in_flight);
    let service = tower::ServiceBuilder::new()
        .map_request(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(proof.clone());
            req
        })
        .map_future(move |response| tracked(response, InFlight::begin(in_flight.clone())))
        .service(app);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .serve_connection(
            TokioIo::new(Held {
                io: stream,
                _permit: permit,
                _leave: leave,
            }),
            TowerToHyperService::new(service),
        )
        .with_upgrades();
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    log::debug!("HTTP connection from {peer}: {e}");
                }
                return;
            }
            () = idle_for(&mut idle, limits.idle_timeout), if !closing => {
                log::debug!(
                    "connection from {peer} idle for {} ms: closed",
                    limits.idle_timeout.as_millis()
                );
                // Closes at once when no request is in flight, which is the case here.
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// The router's response future, with the connection counted busy until the response body has
/// been sent or dropped (the guard rides inside the body).
async fn tracked(
    response: impl Future<Output = Result<Response<Body>, Infallible>>,
    guard: InFlight,
) -> Result<Response<Body>, Infallible> {
    let response = response.await?;
    Ok(response.map(|body| {
        Body::new(body.map_frame(move |frame| {
            let _busy = &guard;
            frame
        }))
    }))
}

/// One request in flight on a connection; counted down on drop.
struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    fn begin(count: Arc<watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// Completes once no request has been in flight for `timeout`.
async fn idle_for(in_flight: &mut watch::Receiver<usize>, timeout: Duration) {
    loop {
        if in_flight.wait_for(|n| *n == 0).await.is_err() {
            // The connection's service is gone: the connection is ending by itself.
            return std::future::pending().await;
        }
        tokio::select! {
            () = tokio::time::sleep(timeout) => {
                if *in_flight.borrow() == 0 {
                    return;
                }
            }
            // A request started (or the count moved): wait for idleness again.
            _ = in_flight.changed() => {}
        }
    }
}

/// A socket that carries its connection permit, so the permit is released exactly when the
/// socket is dropped: after the HTTP connection ends or, for an upgraded connection, when the
/// WebSocket session drops the upgraded socket. Every I/O call is passed through unchanged.
struct Held<T> {
    io: T,
    _permit: OwnedSemaphorePermit,
    /// Off the unproven list when the socket closes, not before (an upgraded socket outlives
    /// its HTTP connection).
    _leave: Leave,
}

impl<T: AsyncRead + Unpin> AsyncRead for Held<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Held<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
