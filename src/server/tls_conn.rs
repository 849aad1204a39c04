//! A client connection on a TLS listener: the handshake (under `tls.handshake_timeout`,
//! counted by outcome), then the same HTTP session as on a cleartext listener over the
//! decrypted stream. An idle TLS connection is released and parked like any other — its
//! socket plus its rustls state, boxed — and resumed without a new handshake.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConnection;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::h1::{Quiet, serve_session};
use super::open::{OpenConn, ms};
use crate::clock::now_ms;
use crate::reload::Live;
use crate::tls::server::{ConnTls, Frontend, Reason};
use crate::tls::store::ACME_TLS_ALPN;
use crate::tls::stream::{HandshakeError, TlsStream};

/// The TLS state a connection starts (or resumes) its session with.
pub(crate) enum TlsStart {
    /// A new connection: the handshake for this listener comes first.
    Handshake(Arc<Frontend>),
    /// A parked connection: its established TLS session.
    Resume(Box<ServerConnection>, Arc<ConnTls>),
}

/// A client connection's decrypted stream, as the gate reads it.
pub(super) type TlsConnStream = TlsStream<TcpStream, ServerConnection>;

impl Quiet for TlsConnStream {
    fn quiet(&mut self) -> bool {
        TlsStream::quiet(self)
    }
}

/// A TLS connection its HTTP/1.1 session released: the caller parks it until it is readable
/// again or `deadline` passes.
pub(super) struct Released {
    pub socket: TcpStream,
    pub open: Arc<OpenConn>,
    pub deadline: u64,
    pub tls: TlsStart,
    /// The `sess.*` timeouts VCL set, for the next session.
    pub sess: Option<crate::proxy::SessionTimeouts>,
}

/// Runs a TLS client connection: handshake (for a new one; `new_since`: when it was
/// accepted, if it waited for its first byte in the parking lot) and session; what the session
/// released, to be parked.
// Each argument is a separate fact about the connection.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    live: Arc<Live>,
    shutdown: watch::Receiver<bool>,
    open: Arc<OpenConn>,
    new_since: Option<u64>,
    start: TlsStart,
    local: super::local::ConnLocal,
    kept: Option<crate::proxy::SessionTimeouts>,
) -> Option<Released> {
    let proxy = live.load();
    let counters = proxy.counters.clone();
    let cfg = proxy.config.server.clone();
    drop(proxy);
    let (stream, info) = match start {
        TlsStart::Resume(conn, info) => (TlsStream::from_parts(stream, *conn), info),
        TlsStart::Handshake(frontend) => {
            let conn = match frontend.connection() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "cannot start a TLS connection");
                    Reason::Protocol.count(&counters);
                    return None;
                }
            };
            let mut tls = TlsStream::from_parts(stream, conn);
            let since = new_since.unwrap_or_else(now_ms);
            let deadline = since.saturating_add(ms(frontend.handshake_timeout));
            let left = Duration::from_millis(deadline.saturating_sub(now_ms()));
            match tokio::time::timeout(left, tls.handshake()).await {
                Err(_) => {
                    Reason::Timeout.count(&counters);
                    return None;
                }
                Ok(Err(e)) => {
                    let reason = Reason::of(&e);
                    reason.count(&counters);
                    tracing::debug!(%peer, listener = %frontend.name, reason = reason.as_str(), error = %e, "TLS handshake failed");
                    return None;
                }
                Ok(Ok(())) => {}
            }
            if let Err(e) = frontend.recheck_resumed(tls.get_ref().1) {
                let e = HandshakeError::Tls(e);
                let reason = Reason::of(&e);
                reason.count(&counters);
                tracing::debug!(%peer, listener = %frontend.name, reason = reason.as_str(), error = %e, "resumed TLS session refused");
                return None;
            }
            if tls.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) {
                // A TLS-ALPN-01 validation: the handshake was the answer (RFC 8737 §3).
                counters.acme_challenge_tls.inc();
                let _ = tokio::time::timeout(Duration::from_secs(1), tls.shutdown()).await;
                return None;
            }
            counters.tls_handshake.inc();
            let info = ConnTls::of(tls.get_ref().1);
            if info.resumed {
                counters.tls_handshake_resumed.inc();
            }
            (tls, Arc::new(info))
        }
    };
    // ALPN chose HTTP/2: its session (server/h2/) over the decrypted stream, to the end.
    if info.alpn.as_deref() == Some("h2") {
        super::h2::serve(stream, peer, live, shutdown, Some(info), local).await;
        return None;
    }
    // Boxed, as for cleartext connections: the task's future stays small.
    let session = Box::pin(serve_session(
        stream,
        peer,
        &live,
        &open,
        &cfg,
        shutdown,
        None,
        Some(info.clone()),
        local,
        kept,
    ));
    let (released, deadline, sess) = session.await?;
    let (socket, conn) = released.into_parts();
    Some(Released {
        socket,
        open,
        deadline,
        tls: TlsStart::Resume(Box::new(conn), info),
        sess,
    })
}
