//! One HTTP/1.1 session: hyper's http1 server over the gate, its service (each request to
//! the proxy, then `respond`), and the timer that keeps the idle, header-read, body and send
//! timeouts.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use crate::clock::now_ms;
use crate::config::ServerConfig;
use crate::proxy::{FastAnswer, Handled, Proxy, ResponseBody, SessionIdle};
use crate::reload::Live;
use crate::server::open::{OpenConn, ms};
use crate::server::{local, tunnel};

use super::http10::Http10;
use super::{Answerer, ConnState, Gate, PHASE_HEAD, PHASE_IDLE, Quiet};

/// The service's future (hyper keeps one per connection and moves it in on every request):
/// the response itself when no step of the request had to wait, else the boxed rest.
enum Answer<F> {
    Ready(std::future::Ready<Result<Response<ResponseBody>, Infallible>>),
    Pending(Pin<Box<F>>),
}

impl<F: Future<Output = Response<ResponseBody>>> Future for Answer<F> {
    type Output = Result<Response<ResponseBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answer::Ready(resp) => Pin::new(resp).poll(cx),
            Answer::Pending(rest) => rest.as_mut().poll(cx).map(Ok),
        }
    }
}

impl<F> Answer<F> {
    fn now(resp: Response<ResponseBody>) -> Answer<F> {
        Answer::Ready(std::future::ready(Ok(resp)))
    }
}

/// What the tunnel needs if the backend answers an upgrade request with 101.
struct Upgrade {
    client: hyper::upgrade::OnUpgrade,
    open: Arc<OpenConn>,
    shutdown: watch::Receiver<bool>,
    idle: Duration,
}

/// The last step of every response before hyper writes it: a refusal if the request's body
/// broke the framing rules while it was in flight (`check_body`), the tunnel after a 101
/// (never a 101 without one), `Connection: close` where an HTTP/1.0 client cannot find the
/// body's end otherwise (`old`), lingering after an error close; the body carries the
/// connection's state and ends the request when it is done.
fn respond(
    mut resp: Response<ResponseBody>,
    check_body: bool,
    state: Arc<ConnState>,
    upgrade: Option<Upgrade>,
    proxy: &Proxy,
    old: Http10,
    regions: Option<&Arc<crate::backend::Regions>>,
) -> Response<ResponseBody> {
    if check_body && let Some(v) = state.body_error() {
        resp = proxy.refuse_body(v, resp);
    }
    old.frame(&mut resp);
    if let Some(SessionIdle(idle)) = resp.extensions_mut().remove::<SessionIdle>() {
        state.set_idle(idle);
    }
    let backend = (resp.status() == StatusCode::SWITCHING_PROTOCOLS)
        .then(|| resp.extensions_mut().remove::<hyper::upgrade::OnUpgrade>())
        .flatten();
    match (upgrade, backend) {
        (Some(up), Some(backend)) => {
            state.decide_upgrade(true);
            let counters = proxy.counters.clone();
            counters.client_tunnel.inc();
            tokio::spawn(tunnel::run(
                up.client,
                backend,
                up.idle,
                up.shutdown,
                counters,
                up.open,
            ));
        }
        (upgrade, backend) => {
            if upgrade.is_some() {
                state.decide_upgrade(false);
            }
            if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
                // Never a 101 without a tunnel behind it.
                drop(backend);
                resp = proxy.refuse(502, "backend-invalid-response");
            }
        }
    }
    // An error followed by a close: the client may still be sending; linger. (The status
    // first: a field lookup in every hit's ten-odd fields was ~85 instructions.)
    if resp.status().as_u16() >= 400
        && resp
            .headers()
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
    {
        state.linger_on_close();
    }
    // A static file's body that reaches hyper as the files origin made it: its large parts go
    // out by sendfile(2). (HTTP/1.0 bodies too: they are sent as they are, only the framing
    // around them differs.)
    if let Some(regions) = regions
        && let Some(zero_copy) = resp.body().zero_copy()
    {
        zero_copy.enable(regions);
    }
    resp.map(|b| b.with_on_done(state))
}

/// Ends a request whose future is dropped before it has a response (the client went away
/// while it waited for a backend); once the response exists its body does that instead.
struct InFlight {
    state: Arc<ConnState>,
    armed: bool,
}

impl InFlight {
    fn new(state: Arc<ConnState>) -> InFlight {
        InFlight { state, armed: true }
    }

    /// The state, for the response body to end the request with.
    fn hand_over(mut self) -> Arc<ConnState> {
        self.armed = false;
        self.state.clone()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.armed {
            self.state.end_request();
        }
    }
}

/// One HTTP/1.1 session on a client connection (hyper behind the strict gate) with its
/// timeouts, over a plain socket or a TLS stream (`tls`: what the connection negotiated; its
/// requests carry it). Returns the stream and when it went idle if the session was released
/// after `idle_release` without a request; `None` when the connection is done.
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
) -> Option<(T, u64)>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Quiet + Unpin + Send + 'static,
{
    let counters = live.load().counters.clone();
    // A new session must send its first request head within header_read_timeout (of the
    // accept, for a new connection that waited for its first byte in the parking lot).
    let state = Arc::new(ConnState::new());
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
    let svc_state = state.clone();
    let svc_live = live.clone();
    let svc_open = open.clone();
    let svc_shutdown = shutdown.clone();
    let tunnel_idle = cfg.tunnel_idle_timeout.0;
    let svc_regions = regions;
    let service = service_fn(move |mut req: Request<Incoming>| {
        if let Some(t) = &tls {
            req.extensions_mut()
                .insert(crate::tls::server::Session(t.clone()));
        }
        // The idle timeout VCL set for the session, for `sess.timeout_idle` to read.
        let idle_override = svc_state.idle_override();
        if idle_override != 0 {
            req.extensions_mut()
                .insert(SessionIdle(Some(Duration::from_millis(idle_override))));
        }
        let begin = svc_state.begin_request();
        let old = Http10::of(&req);
        // Ends the request when its response body is done (`respond`).
        let state = svc_state.clone();
        // One configuration snapshot per request, kept until its response is done.
        let proxy = svc_live.load();
        // `server.ip` / `local.ip`, when the VCL program reads them.
        local.attach(&proxy, &svc_live, &mut req);
        // An upgrade request: what the tunnel needs if the backend switches protocols.
        let upgrade = begin.upgrade.then(|| Upgrade {
            client: hyper::upgrade::on(&mut req),
            open: svc_open.clone(),
            shutdown: svc_shutdown.clone(),
            idle: tunnel_idle,
        });
        let answered = match begin.refused {
            // The stand-in for a request the gate refused: answer it, close.
            Some(v) => {
                let resp = proxy.refuse_request(v, peer.ip(), state.refused_line());
                return Answer::now(respond(
                    resp,
                    false,
                    state,
                    upgrade,
                    &proxy,
                    old,
                    svc_regions.as_ref(),
                ));
            }
            None => proxy.handle(req, peer),
        };
        match answered {
            // No step had to wait (a hit from memory): no future, nothing for hyper to move.
            Handled::Done(resp, proxy) => Answer::now(respond(
                resp,
                true,
                state,
                upgrade,
                &proxy,
                old,
                svc_regions.as_ref(),
            )),
            Handled::Waits(mut rest) => {
                // 1xx responses from its backend go out through the gate (server/h1/interim.rs).
                rest.forward_interim(state.clone());
                let guard = InFlight::new(state);
                let regions = svc_regions.clone();
                Answer::Pending(Box::pin(async move {
                    let (resp, proxy) = rest.run().await;
                    let state = guard.hand_over();
                    respond(resp, true, state, upgrade, &proxy, old, regions.as_ref())
                }))
            }
        }
    });
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
    let conn = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    let idle = ms(cfg.idle_timeout.0);
    // 0: never released.
    let release = match ms(cfg.idle_release.0) {
        0 => u64::MAX,
        r => r,
    };
    let head = ms(cfg.header_read_timeout.0);
    let body = ms(cfg.body_timeout.0);
    let send = ms(cfg.send_timeout.0);
    // 0: no total limit.
    let send_total = ms(cfg.send_total_timeout.0);
    let min_rate = cfg.body_min_rate.0;
    // The timer is not touched per request. It fires at the current phase's deadline or after
    // the shortest timeout (or `idle_release`), whichever is first, and re-checks: a phase
    // that started after the timer was set can only end later than that tick, so no deadline
    // is ever missed. Body and send stalls are noticed within one tick of their deadline.
    let tick = idle
        .min(head)
        .min(body)
        .min(send)
        .min(release)
        .min(if send_total == 0 {
            u64::MAX
        } else {
            send_total
        });
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
                return released.try_recv().ok().map(|s| (s, since));
            }
            _ = timer.as_mut() => {
                let now = now_ms();
                if state.send_stalled(now, send) {
                    counters.client_send_timeout.inc();
                    return None;
                }
                if state.send_too_long(now, send_total) {
                    counters.client_send_total_timeout.inc();
                    return None;
                }
                if state.body_too_slow(now, body, min_rate) {
                    counters.client_body_timeout.inc();
                    return None;
                }
                let since = state.since_ms.load(Ordering::Relaxed);
                let phase = state.phase.load(Ordering::Relaxed);
                // VCL's `sess.timeout_idle` for this session; such a session is not
                // released (a parked socket would forget it).
                let (idle, release) = match state.idle_override() {
                    0 => (idle, release),
                    set => (set, u64::MAX),
                };
                let (expired, next) = match phase {
                    PHASE_IDLE if !closing => {
                        let release_at = since.saturating_add(release);
                        if now >= release_at && now < since + idle {
                            // hyper reads next (this loop polls it again) and, if the gate
                            // agrees the connection is idle, sees the end of the stream.
                            state.want_release();
                        }
                        let next = if now < release_at { release_at } else { since + idle };
                        (now >= since + idle, next.min(since + idle))
                    }
                    PHASE_HEAD if !closing => (now >= since + head, since + head),
                    _ => (false, u64::MAX),
                };
                match phase {
                    PHASE_IDLE if expired => {
                        counters.client_idle_closed.inc();
                        closing = true;
                        state.closing();
                        conn.as_mut().graceful_shutdown();
                    }
                    PHASE_HEAD if expired => {
                        counters.client_header_timeout.inc();
                        return None;
                    }
                    _ => {}
                }
                let at = next.min(now + tick).max(now + 1);
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
    fn answer(&self, head: &[u8]) -> Option<FastAnswer> {
        let proxy = self.live.load();
        let listener = if proxy.has_sites() {
            self.local.listener(&self.live)
        } else {
            None
        };
        proxy.fast_hit(head, self.peer, self.tls.as_deref(), listener)
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
