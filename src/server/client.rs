//! One client connection from accept (or from the parking lot) to its session: the PROXY
//! protocol header first where the listener asks for one ([`behind_proxy`]), then TLS, HTTP/2
//! (h2c with prior knowledge: [`sniff_preface`]) or HTTP/1.1; a session released while idle
//! goes back to the parking lot.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::watch;

use super::h1::serve_session;
use super::open::{OpenConn, ms};
use super::tls_conn::{self, TlsStart};
use super::{h2, local, park, proxy_header};
use crate::clock::now_ms;
use crate::reload::Live;

/// A connection accepted on a `server.proxy_protocol` listener, waiting for its header.
pub(super) struct Accepted {
    pub(super) live: Arc<Live>,
    pub(super) parking: Arc<park::Parking>,
    pub(super) shutdown: watch::Receiver<bool>,
    pub(super) open: Arc<OpenConn>,
    pub(super) since: u64,
    pub(super) tls: Option<TlsStart>,
    pub(super) h2c: bool,
    pub(super) bound: Option<SocketAddr>,
}

/// Reads the PROXY protocol header of a connection accepted from `peer` (within
/// `header_read_timeout` of the accept), then serves it as the client the header names; a
/// connection without a valid header is closed and counted.
pub(super) async fn behind_proxy(mut stream: TcpStream, peer: SocketAddr, c: Accepted) {
    let timeout = c.live.load().config.server.header_read_timeout.0;
    let deadline = c.since.saturating_add(ms(timeout));
    let (client, proxied) = match proxy_header::read(&mut stream, peer, deadline).await {
        Ok(said) => said,
        Err(why) => {
            why.count(&c.live.load().counters);
            return;
        }
    };
    c.live.load().counters.client_proxy.inc();
    client_connection(
        stream,
        client,
        c.live,
        c.parking,
        c.shutdown,
        Some(c.open),
        Some(c.since),
        c.tls,
        c.h2c,
        c.bound,
        None,
        proxied,
    )
    .await;
}

/// A client connection from accept (or from the parking lot, `open` then carried over) until
/// it closes or is released: one HTTP session (hyper behind the strict gate). After
/// `idle_release` without a request the session is freed and the socket parked
/// ([`park::Parking`]) until the next request arrives, `idle_timeout` ends it or Shellac
/// shuts down; the next request starts a new task.
/// `new_since`: a new connection resumed from the parking lot on its first byte, accepted at
/// this time (its request head is due `header_read_timeout` after it). `tls`: a connection
/// on a TLS listener (server/tls_conn.rs runs it). `h2c`: a new connection on a cleartext
/// listener that accepts HTTP/2 with prior knowledge. `bound`: the listener's address when it
/// is bound to one IP (`None` from the parking lot: then asked of the socket if VCL needs it).
/// `kept`: the `sess.*` timeouts VCL set for a parked connection, for its next session.
/// `proxied`: what its PROXY protocol header said of the connection (kept while parked).
// Each argument is a separate fact about the connection, from the accept loop or the lot.
#[allow(clippy::too_many_arguments)]
pub(super) async fn client_connection(
    stream: TcpStream,
    peer: SocketAddr,
    live: Arc<Live>,
    parking: Arc<park::Parking>,
    shutdown: watch::Receiver<bool>,
    open: Option<Arc<OpenConn>>,
    new_since: Option<u64>,
    tls: Option<TlsStart>,
    h2c: bool,
    bound: Option<SocketAddr>,
    kept: Option<crate::proxy::SessionTimeouts>,
    proxied: Option<Box<crate::proxy::Proxied>>,
) {
    let local = local::ConnLocal::new(&stream, bound).proxied(proxied.clone());
    // Connection settings come from the configuration current when a session starts.
    let cfg = live.load().config.server.clone();
    let resumed = open.is_some();
    let open = match open {
        Some(open) => open,
        None => {
            let _ = stream.set_nodelay(cfg.tcp_nodelay);
            // Shared with a tunnel that outlives this task (an upgraded connection).
            Arc::new(OpenConn(live.load().shared.clone()))
        }
    };
    // The TLS and HTTP/2 sessions are boxed too (as `serve_session` below): this task's
    // future is as large as its largest branch, and an idle HTTP/2 connection would
    // otherwise carry the TLS branch's size (bench/RESULTS.md, idle HTTP/2 memory).
    if let Some(start) = tls {
        let released = Box::pin(tls_conn::run(
            stream,
            peer,
            live.clone(),
            shutdown,
            open,
            new_since,
            start,
            local,
            kept,
        ))
        .await;
        if let Some(r) = released
            && parking.park_kept(
                r.socket,
                peer,
                r.open,
                r.deadline,
                Some(r.tls),
                r.sess,
                proxied,
            )
        {
            live.load().counters.client_idle_released.inc();
        }
        return;
    }
    // A new connection on a listener that accepts h2c: HTTP/2 if it starts with the preface.
    if h2c && (new_since.is_some() || !resumed) {
        let since = new_since.unwrap_or_else(now_ms);
        match sniff_preface(&stream, since.saturating_add(ms(cfg.header_read_timeout.0))).await {
            Some(true) => {
                Box::pin(h2::serve(stream, peer, live.clone(), shutdown, None, local)).await;
                return;
            }
            Some(false) => {}
            None => {
                live.load().counters.client_header_timeout.inc();
                return;
            }
        }
    }
    // Boxed: this task's future stays small, so spawning it (from accept or the parking lot)
    // moves a few hundred bytes, not the session's state (callgrind, a new session per
    // request: memcpy −1,350 instructions per request, −300 net of the box's allocation).
    let session = Box::pin(serve_session(
        stream, peer, &live, &open, &cfg, shutdown, new_since, None, local, kept,
    ));
    let Some((released, deadline, sess)) = session.await else {
        return;
    };
    // The gauge (in park) before the counter: whoever sees the count sees the gauge too.
    if parking.park_kept(released, peer, open, deadline, None, sess, proxied) {
        live.load().counters.client_idle_released.inc();
    }
}

/// Whether a new connection's first bytes are the HTTP/2 preface (`Some(true)`), something
/// else (`Some(false)`: HTTP/1.1, or the client closed), or only a prefix of it until
/// `deadline` (ms; `None`). Peeks, so the session that follows reads every byte.
async fn sniff_preface(stream: &TcpStream, deadline: u64) -> Option<bool> {
    let mut buf = [0u8; h2::PREFACE.len()];
    let mut pause = 2;
    loop {
        let n = match tokio::time::timeout(
            Duration::from_millis(deadline.saturating_sub(now_ms()).max(1)),
            stream.peek(&mut buf),
        )
        .await
        {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => return Some(false),
            Err(_) => return None,
        };
        if n == 0 || buf[..n] != h2::PREFACE[..n] {
            return Some(false);
        }
        if n == buf.len() {
            return Some(true);
        }
        // A preface split over segments (rare): peek again a little later; a peek does not
        // consume, so waiting for readiness would return at once.
        if now_ms() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(pause)).await;
        pause = (pause * 2).min(200);
    }
}
