//! The service of an HTTP/1.1 session: each request hyper reads goes to the proxy (or, the
//! gate's stand-in for a refused one, is answered with the refusal), then through `respond`,
//! the last step before hyper writes the response (tunnel after a 101, HTTP/1.0 framing,
//! lingering, sendfile).

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
use tokio::sync::watch;

use crate::proxy::{Handled, Proxy, ResponseBody, SessionTimeouts};
use crate::reload::Live;
use crate::server::open::OpenConn;
use crate::server::{local, tunnel};

use super::ConnState;
use super::http10::Http10;

/// What the service of one session keeps across its requests.
pub(super) struct Service {
    pub(super) state: Arc<ConnState>,
    pub(super) live: Arc<Live>,
    pub(super) open: Arc<OpenConn>,
    pub(super) shutdown: watch::Receiver<bool>,
    pub(super) tunnel_idle: Duration,
    /// File regions the gate sends by sendfile(2) (`sendfile.rs`); `None`: not a plain socket.
    pub(super) regions: Option<Arc<crate::backend::Regions>>,
    /// What the connection negotiated (TLS); its requests carry it.
    pub(super) tls: Option<Arc<crate::tls::server::ConnTls>>,
    pub(super) local: local::ConnLocal,
    pub(super) peer: SocketAddr,
}

impl Service {
    /// One request: to the proxy, then `respond`; the response itself when no step had to
    /// wait, else the rest as a future.
    #[inline]
    pub(super) fn call(
        &self,
        mut req: Request<Incoming>,
    ) -> Answer<impl Future<Output = Response<ResponseBody>> + Send + use<>> {
        if let Some(t) = &self.tls {
            req.extensions_mut()
                .insert(crate::tls::server::Session(t.clone()));
        }
        // The timeouts VCL set for the session, for `sess.*` to read.
        if let Some(t) = self.state.sess.current() {
            req.extensions_mut().insert(t);
        }
        let begin = self.state.begin_request();
        let old = Http10::of(&req);
        // Ends the request when its response body is done (`respond`).
        let state = self.state.clone();
        // One configuration snapshot per request, kept until its response is done.
        let proxy = self.live.load();
        // `server.ip` / `local.ip`, when the VCL program reads them.
        self.local.attach(&proxy, &self.live, &mut req);
        // An upgrade request: what the tunnel needs if the backend switches protocols.
        let upgrade = begin.upgrade.then(|| Upgrade {
            client: hyper::upgrade::on(&mut req),
            open: self.open.clone(),
            shutdown: self.shutdown.clone(),
            idle: self.tunnel_idle,
        });
        let answered = match begin.refused {
            // The stand-in for a request the gate refused: answer it, close.
            Some(v) => {
                let resp = proxy.refuse_request(v, self.peer.ip(), state.refused_line());
                return Answer::now(respond(
                    resp,
                    false,
                    state,
                    upgrade,
                    &proxy,
                    old,
                    self.regions.as_ref(),
                ));
            }
            None => proxy.handle(req, self.peer),
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
                self.regions.as_ref(),
            )),
            Handled::Waits(mut rest) => {
                // 1xx responses from its backend go out through the gate (server/h1/interim.rs).
                rest.forward_interim(state.clone());
                let guard = InFlight::new(state);
                let regions = self.regions.clone();
                Answer::Pending(Box::pin(async move {
                    let (resp, proxy) = rest.run().await;
                    let state = guard.hand_over();
                    respond(resp, true, state, upgrade, &proxy, old, regions.as_ref())
                }))
            }
        }
    }
}

/// The service's future (hyper keeps one per connection and moves it in on every request):
/// the response itself when no step of the request had to wait, else the boxed rest.
pub(super) enum Answer<F> {
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
    if let Some(t) = resp.extensions_mut().remove::<SessionTimeouts>() {
        state.sess.keep(&t);
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
    // The session is shutting down: the connection closes after this response.
    if state.closing.load(Ordering::Relaxed) && resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
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
