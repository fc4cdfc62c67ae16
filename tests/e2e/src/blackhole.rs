//! A TCP proxy on loopback that can black-hole the flows it carries, as a load balancer that
//! lost a flow's state does: [`BlackholeProxy::cut_existing`] makes every connection open at
//! that moment silently drop what it reads in both directions, without closing it (an end on
//! one side is not passed on either); connections accepted later are forwarded normally.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy; dropping it stops accepting (open flows end with the test's runtime).
pub struct BlackholeProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Connections accepted so far (each gets the next number).
    accepted: Arc<AtomicU64>,
    /// Connections numbered below this are black-holed.
    cut_below: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl BlackholeProxy {
    /// A proxy on a free loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicU64::new(0));
        let cut_below = Arc::new(AtomicU64::new(0));
        let (acc, cut) = (accepted.clone(), cut_below.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let n = acc.fetch_add(1, Ordering::SeqCst);
                let cut = cut.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = pump(cr, sw, n, cut.clone());
                    let down = pump(sr, cw, n, cut);
                    tokio::join!(up, down);
                });
            }
        });
        Ok(Self {
            addr,
            accepted,
            cut_below,
            task,
        })
    }

    /// Black-holes every connection open now; later ones are forwarded.
    pub fn cut_existing(&self) {
        let open = self.accepted.load(Ordering::SeqCst);
        self.cut_below.store(open, Ordering::SeqCst);
    }
}

impl Drop for BlackholeProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to` until either ends; once connection `n` is cut, reads are dropped.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    n: u64,
    cut_below: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buf).await {
            // A black-holed flow does not pass the end on either: the other side keeps its
            // half-open connection (the write half stays open) and must notice by itself.
            Ok(0) | Err(_) if n < cut_below.load(Ordering::SeqCst) => {
                let _held = to;
                return std::future::pending().await;
            }
            Ok(0) | Err(_) => return,
            Ok(r) => r,
        };
        if n < cut_below.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..read]).await.is_err() {
            return;
        }
    }
}
