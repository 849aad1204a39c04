//! The service hyper calls for each HTTP/2 stream: the request given what the connection
//! knows (TLS, `sess.timeout_idle`, the interim handle, the local address), counted, checked
//! (`check.rs`), its body paced, and handed to `Proxy::handle` exactly as an HTTP/1.1
//! request is; the answer at once when no step had to wait.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::{Request, Response};
use http_body::Body as _;
use hyper::body::Incoming;

use super::response::{Answer, H2Body, body_outcome, finish};
use super::state::{H2State, Stream};
use super::{check, interim};
use crate::backend::{BodyOutcome, BodyPace};
use crate::http::strict::Limits;
use crate::proxy::Handled;
use crate::reload::Live;
use crate::server::h1::count_violation;
use crate::server::local::ConnLocal;
use crate::stats::Counters;

/// What each stream's request needs of its connection.
pub(super) struct Service {
    pub(super) tls: Option<Arc<crate::tls::server::ConnTls>>,
    pub(super) shared: Arc<H2State>,
    pub(super) live: Arc<Live>,
    pub(super) counters: Arc<Counters>,
    pub(super) local: ConnLocal,
    pub(super) limits: Limits,
    pub(super) peer: SocketAddr,
    pub(super) body_timeout_ms: u64,
    pub(super) body_min_rate: u64,
    pub(super) max_requests: u64,
}

impl Service {
    /// One stream's request.
    #[inline]
    pub(super) fn call(
        &self,
        mut req: Request<Incoming>,
    ) -> Answer<impl Future<Output = Response<H2Body>> + Send + use<>> {
        // Over TLS (ALPN `h2`): what the connection negotiated travels with each request.
        if let Some(t) = &self.tls {
            req.extensions_mut()
                .insert(crate::tls::server::Session(t.clone()));
        }
        // The timeouts VCL set for the connection, for `sess.*` to read.
        if let Some(t) = self.shared.sess.current() {
            req.extensions_mut().insert(t);
        }
        // A load and a branch per request once the handle is kept (the first request).
        if self.shared.interim.get().is_none()
            && let Some(handle) = interim::take_handle(&mut req)
        {
            let _ = self.shared.interim.set(handle);
        }
        let stream = Stream::open(&self.shared);
        let n = self.shared.requests.fetch_add(1, Ordering::Relaxed) + 1;
        if self.max_requests > 0 && n == self.max_requests {
            self.shared.enough.store(true, Ordering::Relaxed);
            self.shared.wake.notify_one();
        }
        // One configuration snapshot per request, kept until its response is done.
        let proxy = self.live.load();
        proxy.counters.h2_req.inc();
        // `server.ip` / `local.ip`, when the VCL program reads them.
        self.local.attach(&proxy, &self.live, &mut req);
        let req = match check::request(req, &self.limits) {
            Ok(req) => req,
            Err(refusal) => {
                count_violation(&proxy.counters, refusal.violation);
                let resp = proxy.refuse_request(
                    refusal.violation,
                    self.peer.ip(),
                    Some(refusal.line.as_bytes()),
                );
                let reset = refusal.malformed.then_some(h2::Reason::PROTOCOL_ERROR);
                return Answer::Ready(Some(finish(resp, stream, reset, &proxy)));
            }
        };
        // A body is paced as over HTTP/1.1 (`body_timeout`, `body_min_rate`) and bounded by
        // `max_body_size` while it streams to the backend; how it ended is read back here.
        let mut req = req;
        let outcome = (!req.body().is_end_stream()).then(|| {
            let outcome = Arc::new(BodyOutcome::default());
            req.extensions_mut().insert(BodyPace {
                timeout_ms: self.body_timeout_ms,
                min_rate: self.body_min_rate,
                outcome: outcome.clone(),
            });
            outcome
        });
        match proxy.handle(req, self.peer) {
            Handled::Done(resp, proxy) => {
                let resp = body_outcome(resp, outcome.as_deref(), &proxy);
                Answer::Ready(Some(finish(resp, stream, None, &proxy)))
            }
            Handled::Waits(mut rest) => {
                // 1xx responses from its backend go out on its stream (`interim.rs`).
                rest.forward_interim(Arc::new(interim::StreamInterim::new(
                    self.shared.interim.get(),
                    n,
                    self.counters.clone(),
                )));
                Answer::Pending(Box::pin(async move {
                    let (resp, proxy) = rest.run().await;
                    let resp = body_outcome(resp, outcome.as_deref(), &proxy);
                    finish(resp, stream, None, &proxy)
                }))
            }
        }
    }
}
