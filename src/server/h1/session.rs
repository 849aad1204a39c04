//! One HTTP/1.1 session: hyper's http1 server over the gate, its service (`service.rs`), and
//! the timer that keeps the idle, header-read, body and send timeouts (`clocks.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::{oneshot, watch};

use crate::clock::now_ms;
use crate::config::ServerConfig;
use crate::proxy::{FastAnswer, Proxy};
use crate::reload::Live;
use crate::server::local;
use crate::server::open::OpenConn;
use crate::vcl::run::SessTimeout;

use super::clocks::{Armed, Clocks, Tick};
use super::lean::{Lean, LeanLoop};
use super::service::Service;
use super::stop::Stop;
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
            generation: 0,
            proxy: std::sync::Weak::new(),
            peer,
            tls: tls.clone(),
            local: local.another(),
        }));
    }
    let mut released = gate.releasable();
    // A plain socket sends large static files itself (sendfile(2): `sendfile.rs`).
    let regions = gate.file_regions();
    let clocks = Clocks::of(cfg);
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut armed = Armed::default();
    // `closing`: hyper's graceful shutdown was asked for; `stopped`: shutdown reached the
    // session (`Stop` resolved, or was set before it started; never polled again).
    let mut closing = false;
    let mut stopped = *shutdown.borrow();
    let stop = Stop::new(shutdown.clone());
    tokio::pin!(stop);
    // Released: its idle deadline (from the last request's end) and the timeouts VCL set.
    let released_at = |released: &mut oneshot::Receiver<T>| {
        let since = state.since_ms.load(Ordering::Relaxed);
        let idle = state.sess.ms(
            SessTimeout::Idle,
            crate::server::open::ms(cfg.idle_timeout.0),
        );
        let deadline = since.saturating_add(idle);
        released
            .try_recv()
            .ok()
            .map(|s| (s, deadline, state.sess.current()))
    };
    // Fast hits only, the gate owning the socket, until hyper is needed (`lean.rs`).
    if cfg.fast_hits && !stopped {
        let lean = LeanLoop {
            state: &state,
            counters: &counters,
            clocks: &clocks,
            peer,
        };
        match lean
            .run(&mut gate, (timer.as_mut(), &mut armed), stop.as_mut())
            .await
        {
            Lean::Hyper => {}
            Lean::Stopped => stopped = true,
            Lean::Ended => return released_at(&mut released),
            Lean::End => return None,
        }
    }
    let io = TokioIo::new(gate);
    let svc = Service {
        state: state.clone(),
        live: live.clone(),
        open: open.clone(),
        shutdown,
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
    if stopped && state.on_stop() {
        closing = true;
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
                return released_at(&mut released);
            }
            _ = std::future::poll_fn(|cx| armed.poll(timer.as_mut(), cx)) => {
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
                armed.reset(
                    timer.as_mut(),
                    tokio::time::Instant::now() + Duration::from_millis(at - now),
                );
            }
            _ = &mut stop, if !stopped && !closing => {
                stopped = true;
                if state.on_stop() {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
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
    /// The configuration the last fast hit ran under, and its generation: loaded again only
    /// when a reload moved the generation on (one atomic load a hit instead of `ArcSwap`'s
    /// ~170 instructions, callgrind). Weak: an idle connection keeps no old configuration
    /// alive.
    generation: u64,
    proxy: std::sync::Weak<Proxy>,
    peer: SocketAddr,
    /// The connection's TLS facts, for the access log.
    tls: Option<Arc<crate::tls::server::ConnTls>>,
    /// The connection's listener, for `[[site]]`s.
    local: local::ConnLocal,
}

impl Answerer for FastHits {
    fn answer(&mut self, head: &[u8], parts: &Parts) -> Option<FastAnswer> {
        let generation = self.live.generation_acquire();
        let cached = if generation == self.generation {
            self.proxy.upgrade()
        } else {
            None
        };
        let proxy = cached.unwrap_or_else(|| {
            let proxy = self.live.load();
            self.proxy = Arc::downgrade(&proxy);
            self.generation = generation;
            proxy
        });
        let listener = if proxy.has_sites() {
            self.local.listener(&self.live)
        } else {
            None
        };
        proxy.fast_hit(head, parts, self.peer, self.tls.as_deref(), listener)
    }
}
