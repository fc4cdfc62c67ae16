//! The listener's TLS stream, over rustls' unbuffered API (ADR 0032): the buffers are ours, so
//! a connection holds them only while bytes are in flight. An idle connection (an agent between
//! two heartbeats) keeps its keys and state and no buffer: rustls' buffered connection
//! (tokio-rustls) keeps a 4 KiB read buffer per connection for as long as it lives.
//!
//! Three buffers, each freed once empty:
//! - `incoming`: TLS bytes read from the socket, not yet processed (a partial record waits
//!   here for the rest of it);
//! - `outgoing`: TLS bytes encoded (handshake, application data, alerts), not yet written;
//! - `plain`: decrypted application data the reader has not taken yet.
//!
//! Writes take at most one record's worth of plaintext ([`MAX_PLAINTEXT_PER_WRITE`]) and are
//! accepted only once everything encoded before them is written (backpressure from the socket).
//! A peer that closes TCP without a `close_notify` alert is an `UnexpectedEof` error, as in
//! rustls' own reader; after its `close_notify`, reads return end of file and writes still work.

use rustls::ServerConfig;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes asked of the socket per read, at least (a record whose header has arrived is asked for
/// whole).
const READ_CHUNK: usize = 1024;
/// Largest `incoming` may grow: a handshake message rustls accepts (64 KiB, joined over
/// records) plus one whole record (16 KiB of payload, 2 KiB of expansion, its header).
const MAX_INCOMING: usize = 0xffff + 16_384 + 2048 + 5;
/// Room asked before encoding a handshake message (rustls says how much it needs when that is
/// not enough: a certificate chain can be larger).
const HANDSHAKE_GUESS: usize = 4096;
/// Plaintext encrypted per `poll_write`: one full TLS record.
pub(super) const MAX_PLAINTEXT_PER_WRITE: usize = 16_384;
/// Room for a record's header, nonce, content type and tag, asked before encrypting (rustls
/// says how much it needs when that is not enough).
const RECORD_OVERHEAD: usize = 64;

/// A server-side TLS connection over `IO`. Built by [`TlsStream::new`], then
/// [`TlsStream::read_client_hello`] and [`TlsStream::handshake`]; then an `AsyncRead` and
/// `AsyncWrite` of the plaintext.
pub(super) struct TlsStream<IO> {
    io: IO,
    conn: UnbufferedServerConnection,
    incoming: Vec<u8>,
    /// Bytes of `incoming` that hold data.
    used: usize,
    outgoing: Vec<u8>,
    /// Bytes of `outgoing` already written to the socket.
    sent: usize,
    plain: Vec<u8>,
    /// Bytes of `plain` already given to the reader.
    taken: usize,
    /// The peer sent `close_notify` (or closed TCP): reads return end of file.
    read_closed: bool,
    /// Our `close_notify` is encoded.
    close_queued: bool,
}

/// What the caller of [`TlsStream::step`] wants from a `WriteTraffic` state.
enum Want<'a> {
    Read,
    Write(&'a [u8]),
    Close,
}

/// What one call to rustls' state machine came to.
enum Step {
    /// Something was done (records decrypted, handshake bytes encoded): ask again.
    Again,
    /// The handshake needs more bytes from the peer.
    Blocked,
    /// The handshake is done and nothing is left to process: more bytes are needed to read.
    Idle,
    /// `Want::Write` encrypted this many bytes of plaintext (0 for `Want::Close`).
    Wrote(usize),
    /// Both sides sent `close_notify`.
    Closed,
}

/// Where the first TLS record of `bytes` ends (its 5-byte header gives its length), once its
/// header is in.
fn first_record_end(bytes: &[u8]) -> Option<usize> {
    match bytes {
        [_, _, _, hi, lo, ..] => Some(5 + usize::from(u16::from_be_bytes([*hi, *lo]))),
        _ => None,
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn eof_without_close_notify() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "peer closed connection without sending TLS close_notify",
    )
}

/// Appends what `write` puts into a slice to `out`, growing the slice once if `write` says it is
/// too small (`required` turns its error into the size it asked for).
fn append_with<E>(
    out: &mut Vec<u8>,
    first_guess: usize,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, E>,
    required: impl Fn(&E) -> Option<usize>,
    describe: impl Fn(E) -> io::Error,
) -> io::Result<usize> {
    let start = out.len();
    out.resize(start + first_guess, 0);
    let result = match write(&mut out[start..]) {
        Err(e) => match required(&e) {
            Some(size) => {
                out.resize(start + size, 0);
                write(&mut out[start..])
            }
            None => Err(e),
        },
        ok => ok,
    };
    match result {
        Ok(n) => {
            out.truncate(start + n);
            Ok(n)
        }
        Err(e) => {
            out.truncate(start);
            Err(describe(e))
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> TlsStream<IO> {
    /// A connection that has read nothing yet.
    pub(super) fn new(io: IO, config: Arc<ServerConfig>) -> io::Result<Self> {
        Ok(Self {
            io,
            conn: UnbufferedServerConnection::new(config).map_err(tls_error)?,
            incoming: Vec::new(),
            used: 0,
            outgoing: Vec::new(),
            sent: 0,
            plain: Vec::new(),
            taken: 0,
            read_closed: false,
            close_queued: false,
        })
    }

    /// Bytes the connection holds in its buffers now (capacity, not contents): 0 while idle.
    #[cfg(test)]
    pub(super) fn buffered_bytes(&self) -> usize {
        self.incoming.capacity() + self.outgoing.capacity() + self.plain.capacity()
    }

    /// Completes once the first TLS record (the ClientHello) is read whole. Nothing is
    /// processed: the expensive part of the handshake waits for [`TlsStream::handshake`].
    pub(super) async fn read_client_hello(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            loop {
                if first_record_end(&self.incoming[..self.used]).is_some_and(|end| end <= self.used)
                {
                    return Poll::Ready(Ok(()));
                }
                if ready!(self.poll_fill(cx))? == 0 {
                    return Poll::Ready(Err(eof_without_close_notify()));
                }
            }
        })
        .await
    }

    /// Runs the handshake to its end, its last flight written.
    pub(super) async fn handshake(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            loop {
                match self.step(Want::Read)? {
                    Step::Again | Step::Wrote(_) => {}
                    Step::Idle => {
                        ready!(self.poll_send(cx))?;
                        return Poll::Ready(Ok(()));
                    }
                    Step::Blocked => {
                        ready!(self.poll_send(cx))?;
                        if ready!(self.poll_fill(cx))? == 0 {
                            return Poll::Ready(Err(eof_without_close_notify()));
                        }
                    }
                    Step::Closed => {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            "TLS connection closed during the handshake",
                        )));
                    }
                }
            }
        })
        .await
    }

    /// One turn of rustls' state machine over `incoming`, handling the state it returns.
    fn step(&mut self, want: Want<'_>) -> io::Result<Step> {
        let Self {
            conn,
            incoming,
            used,
            outgoing,
            plain,
            read_closed,
            ..
        } = self;
        let status = conn.process_tls_records(&mut incoming[..*used]);
        let mut discard = status.discard;
        let step = match status.state.map_err(tls_error)? {
            ConnectionState::ReadTraffic(mut records) => {
                while let Some(record) = records.next_record() {
                    let record = record.map_err(tls_error)?;
                    discard += record.discard;
                    plain.extend_from_slice(record.payload);
                }
                Step::Again
            }
            ConnectionState::EncodeTlsData(mut encode) => {
                append_with(
                    outgoing,
                    HANDSHAKE_GUESS,
                    |out| encode.encode(out),
                    |e| match e {
                        EncodeError::InsufficientSize(InsufficientSizeError { required_size }) => {
                            Some(*required_size)
                        }
                        _ => None,
                    },
                    |e| io::Error::other(format!("TLS: {e}")),
                )?;
                Step::Again
            }
            // The encoded bytes are in `outgoing`, which is written in order before anything
            // encoded after them.
            ConnectionState::TransmitTlsData(transmit) => {
                transmit.done();
                Step::Again
            }
            ConnectionState::BlockedHandshake => Step::Blocked,
            ConnectionState::WriteTraffic(mut traffic) => match want {
                Want::Read => Step::Idle,
                Want::Write(data) => {
                    append_with(
                        outgoing,
                        data.len() + RECORD_OVERHEAD,
                        |out| traffic.encrypt(data, out),
                        encrypt_size,
                        encrypt_error,
                    )?;
                    Step::Wrote(data.len())
                }
                Want::Close => {
                    append_with(
                        outgoing,
                        RECORD_OVERHEAD,
                        |out| traffic.queue_close_notify(out),
                        encrypt_size,
                        encrypt_error,
                    )?;
                    Step::Wrote(0)
                }
            },
            ConnectionState::PeerClosed => {
                *read_closed = true;
                Step::Again
            }
            ConnectionState::Closed => {
                *read_closed = true;
                Step::Closed
            }
            // Early data is off (the config's `max_early_data_size` is 0); any state a newer
            // rustls adds is refused rather than ignored.
            other => {
                return Err(io::Error::other(format!(
                    "TLS: unexpected connection state {other:?}"
                )));
            }
        };
        incoming.copy_within(discard..*used, 0);
        *used -= discard;
        Ok(step)
    }

    /// Reads more TLS bytes into `incoming`: the number read, 0 at end of file. While the
    /// socket has nothing and no partial record waits, `incoming` is freed.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.used >= MAX_INCOMING {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS: more than {MAX_INCOMING} bytes without a complete message"),
            )));
        }
        // A record whose header is in asks for the rest of it at once; otherwise a small read,
        // enough for a heartbeat's record.
        let record_end = first_record_end(&self.incoming[..self.used]).unwrap_or(0);
        let want = record_end.max(self.used + READ_CHUNK).min(MAX_INCOMING);
        if self.incoming.len() < want {
            self.incoming.resize(want, 0);
        }
        let mut buf = ReadBuf::new(&mut self.incoming[self.used..]);
        match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                self.used += n;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if self.used == 0 {
                    self.incoming = Vec::new();
                }
                Poll::Pending
            }
        }
    }

    /// Writes `outgoing` to the socket; ready once all of it is written (and freed).
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.outgoing.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.outgoing[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        if !self.outgoing.is_empty() || self.outgoing.capacity() > 0 {
            self.outgoing = Vec::new();
            self.sent = 0;
        }
        Poll::Ready(Ok(()))
    }
}

fn encrypt_size(e: &EncryptError) -> Option<usize> {
    match e {
        EncryptError::InsufficientSize(InsufficientSizeError { required_size }) => {
            Some(*required_size)
        }
        _ => None,
    }
}

fn encrypt_error(e: EncryptError) -> io::Error {
    io::Error::other(format!("TLS: {e}"))
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.taken < this.plain.len() {
                let n = buf.remaining().min(this.plain.len() - this.taken);
                buf.put_slice(&this.plain[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.plain.len() {
                    this.plain = Vec::new();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            // Bytes a key update queued go out with whatever the writer sends next, or now.
            if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                return Poll::Ready(Err(e));
            }
            if this.read_closed {
                return Poll::Ready(Ok(()));
            }
            match this.step(Want::Read)? {
                Step::Again | Step::Wrote(_) | Step::Closed => {}
                Step::Idle | Step::Blocked => {
                    if ready!(this.poll_fill(cx))? == 0 {
                        this.read_closed = true;
                        return Poll::Ready(Err(eof_without_close_notify()));
                    }
                }
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        ready!(this.poll_send(cx))?;
        let data = &data[..data.len().min(MAX_PLAINTEXT_PER_WRITE)];
        let n = loop {
            match this.step(Want::Write(data))? {
                Step::Wrote(n) => break n,
                Step::Again | Step::Idle => {}
                Step::Blocked => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::NotConnected,
                        "TLS handshake not complete",
                    )));
                }
                Step::Closed => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        };
        // Start sending now; what the socket does not take yet goes with the next write or flush.
        if let Poll::Ready(Err(e)) = this.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.close_queued {
            this.close_queued = true;
            loop {
                match this.step(Want::Close) {
                    Ok(Step::Wrote(_)) | Ok(Step::Closed) | Ok(Step::Blocked) | Err(_) => break,
                    Ok(Step::Again | Step::Idle) => {}
                }
            }
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "tls_stream_tests.rs"]
mod tests;
