//! A tunnel between a client and a backend after the backend answered an `Upgrade` request
//! with 101 (WebSocket): bytes are copied both ways unread, until either side closes, nothing
//! moves for `tunnel_idle_timeout`, or Shellac shuts down.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use super::open::OpenConn;
use crate::clock::now_ms;
use crate::stats::Counters;

/// Joins the two upgraded connections (the client's once hyper has written the 101).
pub(super) async fn run(
    client: OnUpgrade,
    backend: OnUpgrade,
    idle: Duration,
    mut shutdown: watch::Receiver<bool>,
    counters: Arc<Counters>,
    _open: Arc<OpenConn>,
) {
    let (client, backend) = match (client.await, backend.await) {
        (Ok(c), Ok(b)) => (c, b),
        (c, b) => {
            tracing::debug!(client = c.is_ok(), backend = b.is_ok(), "upgrade failed");
            return;
        }
    };
    let last = Arc::new(AtomicU64::new(now_ms()));
    let mut client = Active {
        inner: TokioIo::new(client),
        last: last.clone(),
    };
    let mut backend = Active {
        inner: TokioIo::new(backend),
        last: last.clone(),
    };
    let idle_ms = idle.as_millis().min(u64::MAX as u128) as u64;
    let watchdog = async {
        loop {
            let quiet = now_ms().saturating_sub(last.load(Ordering::Relaxed));
            if quiet >= idle_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis(idle_ms - quiet)).await;
        }
    };
    tokio::select! {
        r = tokio::io::copy_bidirectional(&mut client, &mut backend) => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "tunnel ended with an error");
            }
        }
        _ = watchdog => counters.client_tunnel_idle_closed.inc(),
        _ = shutdown.changed() => {}
    }
}

/// An upgraded connection that notes when bytes last moved through it.
struct Active<T> {
    inner: T,
    last: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Active<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.last.store(now_ms(), Ordering::Relaxed);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Active<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
