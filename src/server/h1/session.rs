//! One HTTP/1.1 session: hyper's http1 server over the gate, its service (`service.rs`), and
//! the timer that keeps the idle, header-read, body and send timeouts (`clocks.rs`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use crate::clock::now_ms;
use crate::config::ServerConfig;
use crate::proxy::FastAnswer;
use crate::reload::Live;
use crate::server::local;
use crate::server::open::OpenConn;
use crate::vcl::run::SessTimeout;

use super::clocks::{Clocks, Tick};
use super::service::Service;
use super::{Answerer, ConnState, Gate, Parts, Quiet};

/// One HTTP/1.1 session on a client connection (hyper behind the strict gate) with its
/// timeouts, over a plain socket or a TLS stream (`tls`: what the connection negotiated; its
/// requests carry it; `kept`: the `sess.*` timeouts VCL set for it in an earlier session,
/// before it was parked). Returns the stream, when its idle time ends (`idle_timeout`, or
/// `sess.timeout_idle`) and the timeouts VCL set, if the session was released after
/// `idle_release` without a request; `None` when the connection is done.
#[allow(clippy::too_many_arguments)]
pub(in crate::server) async fn serve_session<T>(
    stream: T,
    peer: SocketAddr,
    live: &Arc<Live>,
    open: &Arc<OpenConn>,
    cfg: &ServerConfig,
    shutdown: watch::Receiver<bool>,
    new_since: Option<u64>,
    tls: Option<Arc<crate::tls::server::ConnTls>>,
    local: local::ConnLocal,
    kept: Option<crate::proxy::SessionTimeouts>,
) -> Option<(T, u64, Option<crate::proxy::SessionTimeouts>)>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Quiet + Unpin + Send + 'static,
{
    let counters = live.load().counters.clone();
    // A new session must send its first request head within header_read_timeout (of the
    // accept, for a new connection that waited for its first byte in the parking lot).
    let state = Arc::new(ConnState::new());
    if let Some(t) = &kept {
        state.sess.keep(t);
    }
    if let Some(since) = new_since {
        state.since_ms.store(since, Ordering::Relaxed);
    }
    let mut gate = Gate::new(stream, state.clone(), counters.clone(), cfg.limits());
    if cfg.fast_hits {
        gate.answer_with(Box::new(FastHits {
            live: live.clone(),
            peer,
            tls: tls.clone(),
            local: local.another(),
        }));
    }
    let mut released = gate.releasable();
    // A plain socket sends large static files itself (sendfile(2): `sendfile.rs`).
    let regions = gate.file_regions();
    let io = TokioIo::new(gate);
    let svc = Service {
        state: state.clone(),
        live: live.clone(),
        open: open.clone(),
        shutdown: shutdown.clone(),
        tunnel_idle: cfg.tunnel_idle_timeout.0,
        regions,
        tls,
        local,
        peer,
    };
    let service = service_fn(move |req: Request<Incoming>| svc.call(req));
    let conn = http1_builder(cfg)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(conn);
    let clocks = Clocks::of(cfg);
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut closing = *shutdown.borrow();
    let stop = Stop::new(shutdown);
    tokio::pin!(stop);
    if closing {
        state.closing();
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    if e.is_parse() || e.is_parse_status() {
                        counters.client_req_400.inc();
                    }
                    tracing::debug!(%peer, error = %e, "client connection ended with error");
                    return None;
                }
                // The gate handed the socket back and hyper ended at the end of stream it
                // was shown: the connection lives on, released.
                let since = state.since_ms.load(Ordering::Relaxed);
                let idle = state
                    .sess
                    .ms(SessTimeout::Idle, crate::server::open::ms(cfg.idle_timeout.0));
                let deadline = since.saturating_add(idle);
                return released.try_recv().ok().map(|s| (s, deadline, state.sess.current()));
            }
            _ = timer.as_mut() => {
                let now = now_ms();
                let at = match clocks.check(&state, &counters, now, closing) {
                    Tick::End => return None,
                    Tick::IdleClose(at) => {
                        closing = true;
                        state.closing();
                        conn.as_mut().graceful_shutdown();
                        at
                    }
                    Tick::Next(at) => at,
                };
                timer.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(at - now));
            }
            _ = &mut stop, if !closing => {
                closing = true;
                state.closing();
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// hyper's HTTP/1.1 server as the gate needs it: keep-alive, no header timer of its own (the
/// session's clocks keep it), never refusing first what the gate accepted.
fn http1_builder(cfg: &ServerConfig) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.keep_alive(true).header_read_timeout(None);
    // hyper must never refuse first what the gate accepted (its defaults: 100 fields, ~400 KB).
    if cfg.max_headers > 100 {
        builder.max_headers(cfg.max_headers);
    }
    let buf = cfg.max_header_size.0 as usize + 8192;
    if buf > 400 * 1024 {
        builder.max_buf_size(buf);
    }
    builder
}

/// Fast hits for one session (`server.fast_hits`): the gate offers each plain request head to
/// the configuration current at that moment ([`Proxy::fast_hit`]).
struct FastHits {
    live: Arc<Live>,
    peer: SocketAddr,
    /// The connection's TLS facts, for the access log.
    tls: Option<Arc<crate::tls::server::ConnTls>>,
    /// The connection's listener, for `[[site]]`s.
    local: local::ConnLocal,
}

impl Answerer for FastHits {
    fn answer(&self, head: &[u8], parts: &Parts) -> Option<FastAnswer> {
        let proxy = self.live.load();
        let listener = if proxy.has_sites() {
            self.local.listener(&self.live)
        } else {
            None
        };
        proxy.fast_hit(head, parts, self.peer, self.tls.as_deref(), listener)
    }
}

/// Resolves once shutdown is signalled, for a session's `select!`, which polls every branch on
/// every wake of the connection task. Polling the watch's `changed()` future takes the
/// channel's waiter lock each time (tokio's `Notified` in its waiting state); here it is polled
/// only on the first poll (which registers the task's waker with the channel), when the waker
/// is another one, or once the channel's version has moved (one atomic load). Measured with
/// callgrind: ~150 instructions per hit (bench/RESULTS.md).
struct Stop {
    check: watch::Receiver<bool>,
    changed: Pin<Box<dyn Future<Output = ()> + Send>>,
    registered: Option<std::task::Waker>,
}

impl Stop {
    fn new(shutdown: watch::Receiver<bool>) -> Stop {
        let mut rx = shutdown.clone();
        Stop {
            check: shutdown,
            changed: Box::pin(async move {
                let _ = rx.changed().await;
            }),
            registered: None,
        }
    }
}

impl Future for Stop {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let same_waker = this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if same_waker && !this.check.has_changed().unwrap_or(true) {
            return Poll::Pending;
        }
        if !same_waker {
            this.registered = Some(cx.waker().clone());
        }
        this.changed.as_mut().poll(cx)
    }
}
