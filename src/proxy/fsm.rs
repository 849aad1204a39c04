//! The client-side request state machine, one function per step and one driver loop:
//!
//! ```text
//!   Recv ──► Lookup ──► Hit ─────────────────────────────► Deliver
//!    │         ├─────► Grace (stale-while-revalidate) ─────► Deliver (+ background refresh)
//!    │         ├─────► Wait (coalesced) ──► Deliver | Lookup | Fetch (vary-miss) | Synth
//!    │         ├─────► Slices | SliceProbe (big media) ──► Deliver | Lookup (changed) | Synth
//!    │         ├─────► Miss ──────┐
//!    │         └─────► HitForMiss ┤
//!    └──────► Pass ───────────────┴──► Fetch ──► Deliver | Synth
//!   (any step may end in Synth, which delivers a generated response)
//! ```
//!
//! The backend side (fetching and filling a busy object) is the second machine, in `fetch/`.
//! The types both share are in `txn.rs`; the Lookup steps in `lookup.rs`, the steps that
//! answer from what Lookup found (Hit, Grace, Wait) in `hit.rs`, what a stored object may do
//! for a request in `judge.rs`, responses shaped for it in `respond.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::body::ResponseBody;
use super::policy::Delivery;
use super::txn::{Policy, Step, Txn};
use super::{Proxy, deliver, fetch};
use crate::cache::CacheKey;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::NoCacheReason;

/// Starts a request and runs its steps for as long as none has to wait: a hit from memory, a
/// refusal or a generated answer is complete when this returns (`Ok`), with no future behind
/// it (`Handled::Done`). Otherwise the rest runs in [`Rest::run`] (`Handled::Waits`).
///
/// Why not one `async fn` for everything: hyper keeps the service's future in a slot per
/// connection and moves it there on every request; the whole request machine as one future
/// was 2,600 bytes, moved (memcpy) 2–3 times per hit — 2.5% of the CPU of a 100-byte hit under
/// load (perf, bench/RESULTS.md). Now a hit's future is only its response, and the boxed
/// `Rest` is paid by requests that wait for a backend, a coalesced fetch or the disk.
pub(super) fn start(proxy: Arc<Proxy>, req: Request<Incoming>, client: SocketAddr) -> Handled {
    let (parts, body) = req.into_parts();
    begin(proxy, parts, Some(body), client)
}

/// An ESI include's sub-request (`Proxy::subrequest_now`): the same machine, no body.
pub(super) fn start_sub(
    proxy: Arc<Proxy>,
    parts: http::request::Parts,
    client: SocketAddr,
) -> Handled {
    begin(proxy, parts, None, client)
}

fn begin(
    proxy: Arc<Proxy>,
    parts: http::request::Parts,
    body: Option<Incoming>,
    client: SocketAddr,
) -> Handled {
    let started = Instant::now();
    let policy = Policy::choose(&proxy, None);
    let mut txn = Txn {
        proxy,
        policy,
        head_only: parts.method == Method::HEAD,
        req: parts,
        body,
        client,
        key: None,
        backend: None,
        stale: None,
        req_cc: None,
        background: false,
        matched_rules: Vec::new(),
        withheld_conditions: false,
        flv_start: None,
        mp4_start: None,
        route: None,
        route_hash: None,
        vcl: None,
        authorized: false,
        interim: None,
        range_fetch: None,
        held_body: None,
        body_sent: false,
        lookups: 0,
        waited_since: None,
        looked_up: started,
        close: false,
        filters: Default::default(),
        site: None,
    };
    super::coding::on_request(&mut txn);
    let mut step = drive(&mut txn, Step::Recv);
    loop {
        match step {
            // A page parsed as it is delivered: the deliver step waits for whether it holds
            // ESI (`Rest::run`).
            Step::Deliver(resp) if super::filter::esi::needs_settle(&resp) => {
                return Handled::Waits(Box::new(Rest {
                    txn,
                    step: Step::Deliver(resp),
                    started,
                    send: None,
                }));
            }
            Step::Deliver(resp) => match txn.policy.deliver(&mut txn, resp) {
                // An ESI page waits for its first bytes before its head goes out
                // (`Rest::run`), after vcl_deliver (which may turn its assembly off).
                Delivery::Send(resp) if super::filter::esi::needs_prime(&resp) => {
                    return Handled::Waits(Box::new(Rest {
                        txn,
                        // Not run: `send` goes first.
                        step: Step::Recv,
                        started,
                        send: Some(resp),
                    }));
                }
                Delivery::Send(resp) => {
                    let resp = super::observe::deliver(&txn, resp, started);
                    return Handled::Done(resp, txn.proxy);
                }
                // vcl_deliver restarted the request or answered otherwise.
                Delivery::Step(next) => step = drive(&mut txn, next),
            },
            step => {
                return Handled::Waits(Box::new(Rest {
                    txn,
                    step,
                    started,
                    send: None,
                }));
            }
        }
    }
}

/// What [`Proxy::handle`] gives back. `Rest` (~750 bytes) is boxed so that a hit does not
/// carry it through its returns; it costs one allocation per request that waits anyway
/// (measured neutral on hits: `bench/ab_paired.sh`, 99.7%).
pub enum Handled {
    /// The response, and the configuration snapshot the request ran with: no step had to wait.
    Done(Response<ResponseBody>, Arc<Proxy>),
    /// A step must wait: the rest of the request, to run with [`Rest::run`].
    Waits(Box<Rest>),
}

/// A request one of whose steps must wait, and that step.
pub struct Rest {
    txn: Txn,
    step: Step,
    started: Instant,
    /// An assembled ESI page past vcl_deliver, to be primed and sent (`step` is then not
    /// run unless the priming fails).
    send: Option<Response<ResponseBody>>,
}

impl Rest {
    /// Forwards the 1xx responses (103 Early Hints, ...) a backend sends for this request to
    /// `sink`, the client connection (`proxy/interim.rs`).
    pub fn forward_interim(&mut self, sink: Arc<dyn super::InterimSink>) {
        self.txn.interim = Some(sink);
    }

    /// Runs the remaining steps to `Deliver`, waiting where a step must; the response and the
    /// configuration snapshot the request ran with.
    pub async fn run(self: Box<Self>) -> (Response<ResponseBody>, Arc<Proxy>) {
        let Rest {
            mut txn,
            mut step,
            started,
            mut send,
        } = *self;
        loop {
            if let Some(resp) = send.take() {
                match super::filter::esi::prime(resp, txn.esi_turned_off()).await {
                    Ok(resp) => {
                        let resp = super::observe::deliver(&txn, resp, started);
                        return (resp, txn.proxy);
                    }
                    Err(_) => {
                        step = drive(
                            &mut txn,
                            Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "esi-include-failed"),
                        );
                    }
                }
            }
            step = match step {
                Step::Wait(busy) => txn.wait(busy).await,
                Step::ReadBody(cap) => txn.read_body(cap).await,
                Step::Fetch(mode) => fetch::fetch(&mut txn, mode).await,
                Step::LookupIo(key, now) => txn.lookup_io(key, now).await,
                Step::RecheckIo(key, now, guard) => txn.recheck_io(key, now, guard).await,
                Step::Shared(key, guard) => txn.shared(key, guard).await,
                Step::Broadcast(inv, n, what) => txn.broadcast(inv, n, what).await,
                // Boxed: big media only, and its steps (a seek's cut among them) would grow
                // every request's future inline (the test below).
                Step::Slices(meta) => Box::pin(txn.slices(meta)).await,
                Step::RepresentationIo(io) => txn.representation_io(io).await,
                // Boxed: MP4 seeks only.
                Step::Mp4Cut(io) => Box::pin(txn.mp4_cut(io)).await,
                Step::SliceProbe(start) => Box::pin(txn.slice_probe(start)).await,
                Step::Deliver(mut resp) if super::filter::esi::needs_settle(&resp) => {
                    match super::filter::esi::settle(&mut resp).await {
                        Ok(esi) => {
                            txn.esi_settled(esi);
                            Step::Deliver(resp)
                        }
                        Err(_) => drive(
                            &mut txn,
                            Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "esi-include-failed"),
                        ),
                    }
                }
                Step::Deliver(resp) => match txn.policy.deliver(&mut txn, resp) {
                    // Primed at the top of the loop (`Step::Recv` is not run then).
                    Delivery::Send(resp) if super::filter::esi::needs_prime(&resp) => {
                        send = Some(resp);
                        Step::Recv
                    }
                    Delivery::Send(resp) => {
                        let resp = super::observe::deliver(&txn, resp, started);
                        return (resp, txn.proxy);
                    }
                    Delivery::Step(next) => drive(&mut txn, next),
                },
                step => drive(&mut txn, step),
            };
        }
    }
}

/// Runs the steps that need no waiting, from `step` on, and returns the first that is
/// `Deliver` or has to wait (`Wait`, `Fetch`, `LookupIo`, `RecheckIo`).
fn drive(txn: &mut Txn, mut step: Step) -> Step {
    loop {
        tracing::trace!(step = step.as_str(), "request step");
        step = match step {
            Step::Recv => txn.recv(),
            Step::Lookup => txn.lookup(),
            Step::Hit(object) => txn.hit(object),
            Step::Grace(object) => txn.grace(object),
            Step::Miss(guard) => txn.miss(guard),
            Step::HitForMiss => txn.hit_for_miss(),
            Step::Pass(reason) => txn.pass(reason),
            Step::Synth(status, detail) => txn.synth(status, detail),
            Step::VclSynth(status, reason) => txn.policy.synth(txn, status, reason),
            Step::Restart => txn.policy.restart(txn),
            stop @ (Step::Deliver(_)
            | Step::ReadBody(_)
            | Step::Wait(_)
            | Step::Fetch(_)
            | Step::LookupIo(..)
            | Step::RecheckIo(..)
            | Step::Shared(..)
            | Step::Broadcast(..)
            | Step::Slices(_)
            | Step::SliceProbe(_)
            | Step::RepresentationIo(_)
            | Step::Mp4Cut(_)) => return stop,
        };
    }
}

impl Txn {
    /// Validates the request and decides between cache lookup and pass.
    pub(super) fn recv(&mut self) -> Step {
        // A restarted request is the same client request; so is the pass after its body was
        // read ahead for vcl_recv.
        // An ESI include is not a client's request (counted in `esi_includes`).
        if !self.policy.restarted(self)
            && self.held_body.is_none()
            && self
                .req
                .extensions
                .get::<crate::esi::Level>()
                .is_none_or(|l| l.0 == 0)
        {
            self.proxy.counters.client_req.inc();
        }
        // The site, and its rewrites (before the key: they change the path looked up).
        if (self.proxy.sites.is_some() || self.proxy.has_rewrites())
            && let Some(step) = self.site_and_rewrite()
        {
            return step;
        }
        // The site's own program, if it has one (a restart stays in the one it began with).
        if self.vcl.is_none() {
            self.policy = Policy::choose(&self.proxy, self.site.as_deref());
        }
        let host = match Txn::authority(&self.req) {
            Ok(h) => h,
            Err(problem) => {
                self.proxy.counters.client_req_400.inc();
                self.close = true;
                return Step::Synth(StatusCode::BAD_REQUEST, problem);
            }
        };
        if self.req.method == Method::CONNECT {
            self.close = true;
            return Step::Synth(StatusCode::METHOD_NOT_ALLOWED, "connect-not-supported");
        }
        // An expectation other than 100-continue cannot be met (RFC 9110 §10.1.1): 417, before
        // anything is forwarded or the body read (hyper sends `100 Continue` only then).
        let unmet = |v: &http::HeaderValue| {
            v.as_bytes()
                .split(|b| *b == b',')
                .any(|e| !e.trim_ascii().eq_ignore_ascii_case(b"100-continue"))
        };
        if self.req.headers.get_all(header::EXPECT).iter().any(unmet) {
            self.close = true;
            return Step::Synth(StatusCode::EXPECTATION_FAILED, "expectation-failed");
        }
        let path = self
            .req
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        self.key = Some(CacheKey::new(host, path));
        // An ACME server validating HTTP-01: before rules, cache and backends.
        if path.starts_with(crate::acme::challenge::HTTP01_PREFIX)
            && matches!(self.req.method, Method::GET | Method::HEAD)
            && let Some(answer) = self.proxy.shared.acme.tokens.answer(path)
        {
            self.proxy.counters.acme_challenge_http.inc();
            return Step::Deliver(deliver::generated(
                StatusCode::OK,
                "application/octet-stream",
                answer,
                None,
            ));
        }
        if let Some(cap) = self.body_to_read() {
            return Step::ReadBody(cap);
        }
        match self.policy.recv(self) {
            Step::Lookup if self.site.as_ref().is_some_and(|s| !s.cache) => {
                Step::Pass(NoCacheReason::Site)
            }
            step => step,
        }
    }

    pub(super) fn miss(&mut self, guard: LeaderGuard) -> Step {
        self.proxy.counters.cache_miss.inc();
        self.policy.miss(self, guard)
    }

    pub(super) fn hit_for_miss(&mut self) -> Step {
        self.proxy.counters.cache_hitmiss.inc();
        self.policy.hit_for_miss(self)
    }

    pub(super) fn pass(&mut self, reason: NoCacheReason) -> Step {
        self.proxy.counters.cache_pass.inc();
        self.policy.pass(self, reason)
    }

    pub(super) fn synth(&mut self, status: StatusCode, detail: &'static str) -> Step {
        self.proxy.counters.synth_resp.inc();
        Step::Deliver(deliver::synth(status, detail, self.close))
    }
}

#[cfg(test)]
mod tests {
    /// Regression (the miss path at 48ed772, +3% instructions per miss): a fetch step split
    /// into an `async fn` that takes the exchange or the backend request by value holds a
    /// second copy of it, and the request's future (boxed by the service, so copied whole once
    /// per miss) grew by it. The bound is for this build of the tests (debug; 12,128 bytes with
    /// rustc 1.95, 12,480 with the split steps; 12,832 since unused backend bodies are drained
    /// for their connection's sake (7e3275b): `send`'s and `exchange`'s loop locals are held
    /// across one more await, the drain itself being small; a paired miss run measured no
    /// cost, `bench/miss_paired.sh` 99.0% and swapped 101.3%); raise it only for state a miss
    /// needs, measured with bench/miss_instructions.sh or bench/miss_paired.sh.
    #[test]
    fn a_miss_future_holds_no_second_copy_of_its_exchange() {
        fn future_size<A, F>(_: impl FnOnce(A) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let size = future_size(super::Rest::run);
        assert!(size <= 12_900, "Rest::run's future is {size} bytes");
    }
}
