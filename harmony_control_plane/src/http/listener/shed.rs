//! Shedding connections that have not proven who they are, oldest first, when the listener is
//! full: an agent or caller presenting a valid credential is then served on its first attempt
//! however many idle, trickling or silent connections hold the descriptors.
//!
//! Every accepted connection is *unproven* until its first request authenticates (an API token
//! the authentication layer accepts, or an agent the session welcomed): [`Proof::proven`] then
//! takes it off the list for good. When a new connection finds every permit taken, or
//! `accept()` fails for lack of descriptors, the listener sheds the oldest unproven connection:
//! its socket fails every read and write from then on, so whatever holds it (the TLS handshake,
//! hyper, or a WebSocket session after an upgrade) ends and drops it, which frees its permit
//! and descriptor. A proven connection is never shed.

use futures::task::AtomicWaker;
use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// The connections not proven yet, by accept order.
#[derive(Debug, Default)]
pub(super) struct Unproven {
    open: Mutex<BTreeMap<u64, Arc<Mark>>>,
    next: AtomicU64,
}

/// One connection's shed signal.
#[derive(Debug, Default)]
pub(super) struct Mark {
    shed: AtomicBool,
    /// The task reading or writing the socket, woken when the connection is shed.
    waker: AtomicWaker,
    /// For a connection waiting on something other than its socket (its turn to handshake).
    notify: Notify,
}

impl Mark {
    fn is_shed(&self) -> bool {
        self.shed.load(Ordering::Acquire)
    }

    fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        self.waker.wake();
        self.notify.notify_one();
    }

    /// Completes once the connection is shed.
    pub(super) async fn until_shed(&self) {
        while !self.is_shed() {
            self.notify.notified().await;
        }
    }
}

impl Unproven {
    /// Puts a newly accepted connection on the list.
    pub(super) fn enter(self: &Arc<Self>) -> (Arc<Mark>, Proof) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mark = Arc::new(Mark::default());
        self.lock().insert(id, mark.clone());
        let proof = Proof {
            id,
            list: Arc::downgrade(self),
        };
        (mark, proof)
    }

    /// Sheds the oldest unproven connection; false when every open connection is proven.
    pub(super) fn shed_oldest(&self) -> bool {
        match self.lock().pop_first() {
            Some((_, mark)) => {
                mark.shed();
                true
            }
            None => false,
        }
    }

    /// How many connections are unproven now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Mark>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A connection's way off the unproven list, put in each of its requests' extensions. Handlers
/// call [`Proof::proven`] once the caller authenticated; a connection that closes leaves the list
/// by itself.
#[derive(Debug, Clone)]
pub struct Proof {
    id: u64,
    list: std::sync::Weak<Unproven>,
}

impl Proof {
    /// The connection authenticated: it is never shed.
    pub fn proven(&self) {
        if let Some(list) = self.list.upgrade() {
            list.lock().remove(&self.id);
        }
    }
}

/// Takes the connection off the list when it ends.
pub(super) struct Leave(pub(super) Proof);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.proven();
    }
}

/// A socket that fails every read and write once its connection is shed.
pub(super) struct Sheddable<T> {
    pub(super) io: T,
    pub(super) mark: Arc<Mark>,
}

fn shed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "shed: the listener was full and this connection had not authenticated",
    )
}

impl<T> Sheddable<T> {
    /// Ready with an error once shed; otherwise registers the task to be woken by the shedding.
    fn check(&self, cx: &Context<'_>) -> Poll<io::Error> {
        if self.mark.is_shed() {
            return Poll::Ready(shed_error());
        }
        self.mark.waker.register(cx.waker());
        if self.mark.is_shed() {
            return Poll::Ready(shed_error());
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Sheddable<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Poll::Ready(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Sheddable<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Poll::Ready(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Poll::Ready(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_unproven_connection_is_shed_and_proven_ones_never() {
        let list = Arc::new(Unproven::default());
        let (a, _pa) = list.enter();
        let (b, pb) = list.enter();
        let (c, _pc) = list.enter();
        pb.proven();
        assert_eq!(list.len(), 2);
        assert!(list.shed_oldest());
        assert!(a.is_shed() && !b.is_shed() && !c.is_shed());
        assert!(list.shed_oldest());
        assert!(c.is_shed() && !b.is_shed(), "b is proven: skipped");
        assert!(!list.shed_oldest(), "nothing unproven is left");
        assert!(!b.is_shed());
    }

    #[test]
    fn a_connection_that_ends_leaves_the_list() {
        let list = Arc::new(Unproven::default());
        let (_m, proof) = list.enter();
        drop(Leave(proof));
        assert_eq!(list.len(), 0);
        assert!(!list.shed_oldest());
    }
}
