//! A new connection on a `server.proxy_protocol` listener: its peer must be in
//! `proxy_protocol_from` and its first bytes a PROXY protocol header (`proxy_protocol.rs`),
//! read within `header_read_timeout` of the accept; the header's client address then stands
//! for the peer everywhere after (logs, ACLs, `X-Forwarded-For`, `client.ip`, `REMOTE_ADDR`);
//! VCL's `remote.ip` stays the peer and `server.ip` reads the header's destination.
//! The header is peeked and then exactly its bytes are read, so the session that follows
//! (HTTP/1.1, the HTTP/2 preface sniff, the TLS handshake) finds the socket at its first byte.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::clock::now_ms;
use crate::proxy::Proxied;
use crate::proxy_protocol::{self, Parsed, V1_MAX};
use crate::stats::Counters;

/// Why a connection was closed before its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    Untrusted,
    Missing,
    Malformed,
    Timeout,
}

impl Refused {
    pub(super) fn count(self, counters: &Counters) {
        match self {
            Refused::Untrusted => counters.client_proxy_untrusted.inc(),
            Refused::Missing => counters.client_proxy_missing.inc(),
            Refused::Malformed => counters.client_proxy_malformed.inc(),
            Refused::Timeout => counters.client_proxy_timeout.inc(),
        }
    }
}

/// What a header said: the client address to use (the header's source, or the connection's
/// peer for a `LOCAL` / `UNKNOWN` header or one without addresses), and, when it named
/// addresses, the connection's own peer and the header's destination (VCL's `remote.ip` and
/// `server.ip`).
/// (Boxed: a connection carries it for its life, and most connections have none: an
/// unboxed one grew every idle HTTP/2 connection's task, tests/http2_idle_memory.rs.)
pub(super) type Said = (SocketAddr, Option<Box<Proxied>>);

fn said(header: &proxy_protocol::Header, peer: SocketAddr) -> Said {
    match (header.source, header.destination) {
        (Some(client), Some(server)) => (
            client,
            Some(Box::new(Proxied {
                remote: peer,
                server,
            })),
        ),
        _ => (peer, None),
    }
}

/// Reads the header of `stream` (accepted from `peer`) until `deadline` (ms, the coarse
/// clock) and returns what it said.
pub(super) async fn read(
    stream: &mut TcpStream,
    peer: SocketAddr,
    deadline: u64,
) -> Result<Said, Refused> {
    let left = || Duration::from_millis(deadline.saturating_sub(now_ms()).max(1));
    // Enough for a whole v1 header and a v2 header's fixed part.
    let mut buf = [0u8; V1_MAX];
    let mut seen = 0;
    let mut pause = 1;
    loop {
        let n = match tokio::time::timeout(left(), stream.peek(&mut buf)).await {
            Err(_) => return Err(Refused::Timeout),
            Ok(Err(_)) => return Err(Refused::Missing),
            Ok(Ok(0)) if seen == 0 => return Err(Refused::Missing),
            Ok(Ok(0)) => return Err(Refused::Malformed),
            Ok(Ok(n)) => n,
        };
        match proxy_protocol::parse(&buf[..n]) {
            Ok(Parsed::Done { len, header }) => {
                // Already in the socket's buffer: this returns at once.
                stream
                    .read_exact(&mut buf[..len])
                    .await
                    .map_err(|_| Refused::Malformed)?;
                return Ok(said(&header, peer));
            }
            Ok(Parsed::Incomplete(Some(total))) => {
                // A v2 header of known length: read it whole (waiting for the rest is a
                // read, not a spin), then parse it again.
                let mut whole = vec![0u8; total];
                match tokio::time::timeout(left(), stream.read_exact(&mut whole)).await {
                    Err(_) => return Err(Refused::Timeout),
                    Ok(Err(_)) => return Err(Refused::Malformed),
                    Ok(Ok(_)) => {}
                }
                return match proxy_protocol::parse(&whole) {
                    Ok(Parsed::Done { header, .. }) => Ok(said(&header, peer)),
                    _ => Err(Refused::Malformed),
                };
            }
            Ok(Parsed::Incomplete(None)) => {}
            Err(proxy_protocol::Error::Missing) => return Err(Refused::Missing),
            Err(proxy_protocol::Error::Malformed(why)) => {
                tracing::debug!(%peer, why, "malformed PROXY protocol header");
                return Err(Refused::Malformed);
            }
        }
        // A header split over segments (rare): a peek does not consume, so waiting for
        // readiness would return at once; look again a little later.
        if n == seen {
            if now_ms() >= deadline {
                return Err(Refused::Timeout);
            }
            tokio::time::sleep(Duration::from_millis(pause)).await;
            pause = (pause * 2).min(100);
        }
        seen = n;
    }
}

/// [`read`] for a stream that cannot be peeked (a Unix socket): the header is read a byte at
/// a time until its length is known, then exactly the rest, so nothing after it is consumed.
pub(super) async fn read_exactly<S>(
    stream: &mut S,
    peer: SocketAddr,
    deadline: u64,
) -> Result<Said, Refused>
where
    S: tokio::io::AsyncRead + Unpin,
{
    let left = || Duration::from_millis(deadline.saturating_sub(now_ms()).max(1));
    let mut buf = Vec::with_capacity(V1_MAX);
    loop {
        let want = match proxy_protocol::parse(&buf) {
            Ok(Parsed::Done { header, .. }) => return Ok(said(&header, peer)),
            Ok(Parsed::Incomplete(Some(total))) => total - buf.len(),
            Ok(Parsed::Incomplete(None)) => 1,
            Err(proxy_protocol::Error::Missing) => return Err(Refused::Missing),
            Err(proxy_protocol::Error::Malformed(why)) => {
                tracing::debug!(%peer, why, "malformed PROXY protocol header");
                return Err(Refused::Malformed);
            }
        };
        let start = buf.len();
        buf.resize(start + want, 0);
        match tokio::time::timeout(left(), stream.read_exact(&mut buf[start..])).await {
            Err(_) => return Err(Refused::Timeout),
            Ok(Err(_)) if start == 0 => return Err(Refused::Missing),
            Ok(Err(_)) => return Err(Refused::Malformed),
            Ok(Ok(_)) => {}
        }
    }
}
