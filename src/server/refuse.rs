//! Connections over `server.max_connections`: a 503, a transaction record, and a bounded
//! lingering close, so that a client that already sent its request reads the 503 instead of
//! a connection reset.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::h1::{LINGER_BYTES, LINGER_TIME};
use crate::proxy::Proxy;

/// Sent to a connection beyond `server.max_connections` before it is closed.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\ncache-status: shellac; detail=max-connections\r\n\r\n";

/// Refused connections lingering at once, per listener. Each holds a descriptor for at most
/// `LINGER_TIME`; beyond this many, refused connections are closed at once (and counted in
/// `client_linger_skipped`), so a flood of connections cannot pile them up.
pub(super) const MAX_LINGERING: usize = 256;

/// How many refused connections of one listener are lingering now.
#[derive(Clone, Default)]
pub(super) struct Lingering(Arc<AtomicUsize>);

/// Frees a lingering slot however the lingering task ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers a connection over the limit with a 503 and closes it: counted, logged
/// (`refused:max-connections`), then a lingering close on its own task, bounded in time, bytes
/// and number. Never waits: the accept loop goes on at once.
pub(super) fn refuse(stream: TcpStream, peer: SocketAddr, proxy: &Proxy, lingering: &Lingering) {
    proxy.counters.client_conn_refused.inc();
    proxy.log_connection_refused(peer.ip());
    // The send buffer of a new connection is empty: the 503 fits without waiting.
    if stream.try_write(REFUSED).is_err() {
        return;
    }
    if lingering.0.fetch_add(1, Ordering::Relaxed) >= MAX_LINGERING {
        lingering.0.fetch_sub(1, Ordering::Relaxed);
        proxy.counters.client_linger_skipped.inc();
        return;
    }
    let slot = Slot(lingering.0.clone());
    tokio::spawn(async move {
        let _slot = slot;
        linger(stream).await;
    });
}

/// Sends FIN after what was written, then reads and discards what the client still sends (its
/// request, at most `LINGER_BYTES`, for at most `LINGER_TIME`) until it closes: closing a socket
/// with unread bytes would reset the connection and could destroy the response before the
/// client read it.
async fn linger(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        let mut scratch = [0u8; 4096];
        let mut discarded = 0;
        while discarded <= LINGER_BYTES {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}
