//! The request path: the state every request reads ([`Proxy`], `state.rs`; built in
//! `build.rs`), the request state machine (`fsm.rs`), and here the entry points the client
//! sessions call: a request handled, an ESI include's sub-request, the refusals.
//!
//! Architecture invariant: the pipeline never touches a socket; it turns a parsed request into
//! a response. Connections live in `server`, origins in `backend`.

mod backend_side;
pub mod body;
mod build;
mod chunks;
mod coding;
mod combine;
mod deliver;
mod esi_page;
mod ext;
mod fast_hit;
mod fetch;
mod fill;
pub mod filter;
mod fsm;
mod held;
mod hit;
mod hit_fields;
mod interim;
mod judge;
mod lookup;
mod observe;
pub mod partial;
mod policy;
mod purge;
mod recv_site;
mod refresh;
pub mod represent;
mod request_body;
mod respond;
pub mod site;
mod slice;
mod snapshot;
mod state;
mod surrogate;
pub mod throttle;
mod txn;
mod vcl;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::http::strict::Violation;
pub use body::ResponseBody;
pub use ext::{BackendClose, Listener, LocalAddr, Proxied, SessionTimeouts};
pub use fast_hit::FastAnswer;
pub use fsm::{Handled, Rest};
pub use interim::{InterimHead, InterimSink, MAX_INTERIM, serialise as serialise_interim};
pub(crate) use state::Subrequest;
pub use state::{Process, Proxy};

/// The log reason of a connection refused at `server.max_connections` (the `Cache-Status`
/// detail of its 503 is `max-connections`).
pub const MAX_CONNECTIONS_REASON: &str = "refused:max-connections";

impl Proxy {
    /// Runs one request through the state machine: the response when no step had to wait (a
    /// hit from memory, a refusal, a generated answer), otherwise the rest of the request's
    /// work, to be run with [`Rest::run`] (why: `fsm::start`).
    ///
    /// First the request is put in the one form every later step sees: fields whose name
    /// contains `_` dropped (unless `server.underscores_in_headers`), the rewrite fields and
    /// (from untrusted clients) the forwarding fields removed, the target's escapes normalised
    /// (`http::target`).
    pub fn handle(self: Arc<Self>, mut req: Request<Incoming>, client: SocketAddr) -> Handled {
        let trusted = self.config.server.trusts(client.ip());
        if !self.config.server.underscores_in_headers {
            let dropped = crate::http::headers::drop_underscored(req.headers_mut());
            if dropped > 0 {
                self.counters.client_field_underscore.add(dropped as u64);
            }
        }
        if self.vcl.is_some() {
            crate::http::headers::sanitize_request_for_vcl(req.headers_mut(), trusted);
        } else {
            crate::http::headers::sanitize_request(req.headers_mut(), trusted);
        }
        if let Some(normal) = req
            .uri()
            .path_and_query()
            .and_then(|p| crate::http::target::normalise(p.as_str()))
        {
            let mut parts = req.uri().clone().into_parts();
            if let Ok(pq) = normal.parse() {
                parts.path_and_query = Some(pq);
                if let Ok(uri) = http::Uri::from_parts(parts) {
                    *req.uri_mut() = uri;
                }
            }
        }
        fsm::start(self, req, client)
    }

    /// An ESI include's request (`filter/esi/include.rs`) through the whole state machine —
    /// policy, lookup, coalescing, grace — as a client's request without a body would go, run
    /// as far as it goes without waiting: a stored fragment is answered here, so its page
    /// reads it in place (no task, no channel); a step that must wait (a miss, a coalesced
    /// fetch) is left as a boxed future, allocated only then.
    pub(crate) fn subrequest_now(
        self: Arc<Self>,
        req: http::request::Parts,
        client: SocketAddr,
    ) -> Subrequest {
        match fsm::start_sub(self, req, client) {
            fsm::Handled::Done(resp, _) => Subrequest::Done(resp),
            fsm::Handled::Waits(rest) => {
                Subrequest::Waits(Box::pin(async move { rest.run().await.0 }))
            }
        }
    }

    /// A generated error answer: `status` with `detail` (in `Cache-Status`) and
    /// `Connection: close`. Never cached; not logged by itself (see [`Proxy::refuse_request`]).
    pub fn refuse(&self, status: u16, detail: &str) -> Response<ResponseBody> {
        let status = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
        deliver::synth(status, detail, true)
    }

    /// The answer to a request the strict parser refused (framing, fields, limits): the
    /// violation's status, `Connection: close`. Counted in `client_refused`; logged (access log,
    /// `shellac log`) with reason `refused:<word>` and the request line when it was valid
    /// (`line`), else `-`.
    pub fn refuse_request(
        &self,
        v: Violation,
        client: IpAddr,
        line: Option<&[u8]>,
    ) -> Response<ResponseBody> {
        let resp = self.refuse(v.status(), v.as_str());
        match observe::refusal(self, client, v.status(), v.refused_reason(), line) {
            Some(record) => resp.map(|b| b.recorded(record)),
            None => resp,
        }
    }

    /// A request whose body broke the framing rules after its head was forwarded: `answer`
    /// (what the pipeline made of it) is dropped for the refusal. Its transaction record, which
    /// knows the request line and the backend, is kept with the refusal's status and reason.
    pub fn refuse_body(
        &self,
        v: Violation,
        answer: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        self.counters.client_refused.inc();
        self.replace_answer(v.status(), v.as_str(), v.refused_reason(), answer)
    }

    /// The answer to an HTTP/2 request whose body came too slowly (`server.body_timeout`,
    /// `server.body_min_rate`), in place of the aborted fetch's: `408`, logged with reason
    /// `refused:body-timeout`. (Over HTTP/1.1 the connection is closed instead: its framing
    /// is lost mid-body; an HTTP/2 stream can still be answered.)
    pub fn refuse_slow_body(&self, answer: Response<ResponseBody>) -> Response<ResponseBody> {
        self.replace_answer(408, "body-timeout", "refused:body-timeout", answer)
    }

    /// `answer` (its transaction record kept) replaced by a synthetic `status` page.
    fn replace_answer(
        &self,
        status: u16,
        detail: &str,
        reason: &'static str,
        mut answer: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        let record = answer.body_mut().take_record();
        drop(answer);
        let resp = self.refuse(status, detail);
        match record {
            Some(mut r) => {
                r.status = status;
                r.decision = observe::refused(reason);
                resp.map(|b| b.recorded(r))
            }
            None => resp,
        }
    }

    /// Records a connection refused at `server.max_connections` (it was answered 503 without
    /// reading its request): counted in `client_refused`, logged with reason
    /// `refused:max-connections` and `-` for the request line.
    pub fn log_connection_refused(&self, client: IpAddr) {
        if let Some(r) = observe::refusal(self, client, 503, MAX_CONNECTIONS_REASON, None) {
            r.finish(true);
        }
    }
}
