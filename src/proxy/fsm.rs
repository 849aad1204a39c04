//! The client-side request state machine, one function per step and one driver loop:
//!
//! ```text
//!   Recv ──► Lookup ──► Hit ─────────────────────────────► Deliver
//!    │         ├─────► Grace (stale-while-revalidate) ─────► Deliver (+ background refresh)
//!    │         ├─────► Wait (coalesced) ──► Deliver | Lookup | Fetch (vary-miss) | Synth
//!    │         ├─────► Miss ──────┐
//!    │         └─────► HitForMiss ┤
//!    └──────► Pass ───────────────┴──► Fetch ──► Deliver | Synth
//!   (any step may end in Synth, which delivers a generated response)
//! ```
//!
//! The backend side (fetching and filling a busy object) is the second machine, in `fetch.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode, Version};
use hyper::body::Incoming;

use super::body::ResponseBody;
use super::partial::{self, RangeSpec};
use super::vcl::Delivery;
use super::{Proxy, deliver, fetch};
use crate::backend::Backend;
use crate::backend::director::Member;
use crate::cache::busy::{BusyObject, HeadOutcome, Join, LeaderGuard};
use crate::cache::policy::NoCacheReason;
use crate::cache::shared::Found;
use crate::cache::shared::feed::{self, Invalidation};
use crate::cache::{CacheKey, NeedsIo, Object, vary_matches};
use crate::http::cache_control::CacheControl;
use crate::http::headers::has_field;

/// The `Cache-Status` of a response shared with the leader of a fetch.
const COLLAPSED: &str = "shellac; fwd=miss; collapsed";

/// Lookups one request may make (a waiter whose leader's response was not shareable looks up
/// again). Bounds the loop; exceeding it answers 503.
const MAX_LOOKUPS: u32 = 4;

pub(super) enum Step {
    Recv,
    /// Read the request body (at most this many bytes) before vcl_recv, whose
    /// `std.cache_req_body()` may keep it (`held.rs`).
    ReadBody(u64),
    Lookup,
    /// The tiers without I/O had no usable copy of this (variant) key, looked up at this
    /// instant: ask the tiers below (disk).
    LookupIo(CacheKey, Instant),
    /// Leader of a fetch for this key, whose copy the tiers without I/O do not have: look in
    /// the tiers below once more before fetching (the previous leader may have stored it).
    RecheckIo(CacheKey, Instant, LeaderGuard),
    /// Leader of a fetch whose key the local tiers do not have: ask the fleet's shared tier
    /// (`[storage.shared]`) — a copy, the lease on fetching it, or a wait for another node's.
    Shared(CacheKey, LeaderGuard),
    /// A PURGE applied here, to be sent to the fleet: (what, objects removed here, words).
    Broadcast(Invalidation, usize, String),
    Hit(Arc<Object>),
    Grace(Arc<Object>),
    Wait(Arc<BusyObject>),
    Miss(LeaderGuard),
    HitForMiss,
    Pass(NoCacheReason),
    Fetch(FetchMode),
    Synth(StatusCode, &'static str),
    /// A response the VCL program makes (vcl_synth; 2.x vcl_error): status and reason.
    VclSynth(u16, Option<String>),
    /// VCL's `return (restart)`: the request runs again from vcl_recv.
    Restart,
    Deliver(Response<ResponseBody>),
}

impl Step {
    fn as_str(&self) -> &'static str {
        match self {
            Step::Recv => "recv",
            Step::ReadBody(_) => "read-body",
            Step::Lookup => "lookup",
            Step::LookupIo(..) => "lookup-io",
            Step::RecheckIo(..) => "recheck-io",
            Step::Shared(..) => "shared",
            Step::Broadcast(..) => "broadcast",
            Step::Hit(_) => "hit",
            Step::Grace(_) => "grace",
            Step::Wait(_) => "wait",
            Step::Miss(_) => "miss",
            Step::HitForMiss => "hit-for-miss",
            Step::Pass(_) => "pass",
            Step::Fetch(_) => "fetch",
            Step::Synth(..) => "synth",
            Step::VclSynth(..) => "vcl-synth",
            Step::Restart => "restart",
            Step::Deliver(_) => "deliver",
        }
    }
}

/// How a fetch relates to the cache.
pub(super) enum FetchMode {
    /// Fill the cache; waiters follow this fetch.
    Miss(LeaderGuard),
    /// Fetch without coalescing (the URL was recently uncacheable, or another Vary variant is
    /// being fetched); store if the response is cacheable. The word is the Cache-Status detail.
    Alone(&'static str),
    /// Fetch without coalescing for a request with `Authorization`; store only if the response
    /// allows sharing (RFC 9111 §3.5), else `detail=authorization`.
    Authorized,
    /// Forward the client's Range (`Txn::range_fetch`) and store a 206 as a piece
    /// (`combine.rs`); `true` when pieces were held already.
    Range(bool),
    /// Fetch the one run of bytes the held pieces lack and deliver the whole representation.
    Complete(Arc<crate::cache::partial::Partial>, (u64, u64)),
    /// Never stored.
    Pass(NoCacheReason),
}

/// One client request in flight.
pub(super) struct Txn {
    pub proxy: Arc<Proxy>,
    pub req: Parts,
    pub body: Option<Incoming>,
    /// The body as read before vcl_recv, for `std.cache_req_body()` (`held.rs`); then
    /// `body` is `None`.
    pub held_body: Option<super::held::HeldBody>,
    /// A backend request streamed the client's body (`body`, now `None`).
    pub body_sent: bool,
    pub client: SocketAddr,
    pub key: Option<CacheKey>,
    pub head_only: bool,
    /// The backend this request was last sent to.
    pub backend: Option<Arc<Backend>>,
    /// A stale object within `keep`: revalidated with the backend if it has validators, and
    /// served if no backend can answer (when its response allowed stale serving).
    pub stale: Option<Arc<Object>>,
    /// The request's Cache-Control, when `cache.request_cache_control` is on.
    req_cc: Option<CacheControl>,
    /// A background refresh (grace): no client waits for this response.
    pub background: bool,
    /// Rules whose request matchers matched (their response phase runs in Fetch).
    pub matched_rules: Vec<usize>,
    /// Backend or director chosen by a rule (or VCL) instead of the default route.
    pub route: Option<Member>,
    /// A hash director's key hash chosen by VCL (`hash.backend(key)`).
    pub route_hash: Option<u64>,
    /// The VCL program's state for this request, when one runs.
    pub vcl: Option<Box<super::vcl::VclTxn>>,
    /// The request carries `Authorization` (and no rule said `cache`): only stored responses
    /// that allow it are reused for it, and its own response is stored only if it allows
    /// sharing (RFC 9111 §3.5).
    pub authorized: bool,
    /// Where 1xx heads from the backend go (the client connection); `None` for a background
    /// refresh, or a request that never had to wait.
    pub interim: Option<Arc<dyn super::InterimSink>>,
    /// The Range (and If-Range) a fetch for partial content sends instead of the client's.
    pub range_fetch: Option<super::combine::RangeFetch>,
    lookups: u32,
    /// When the last lookup looked: a hit is judged and delivered at that instant (one clock
    /// read per hit instead of three).
    looked_up: Instant,
    /// Set when the client connection must close after this response (malformed request).
    pub(super) close: bool,
}

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
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let mut txn = Txn {
        proxy,
        head_only: parts.method == Method::HEAD,
        req: parts,
        body: Some(body),
        client,
        key: None,
        backend: None,
        stale: None,
        req_cc: None,
        background: false,
        matched_rules: Vec::new(),
        route: None,
        route_hash: None,
        vcl: None,
        authorized: false,
        interim: None,
        range_fetch: None,
        held_body: None,
        body_sent: false,
        lookups: 0,
        looked_up: started,
        close: false,
    };
    let mut step = drive(&mut txn, Step::Recv);
    loop {
        match step {
            Step::Deliver(resp) => match super::vcl::deliver(&mut txn, resp) {
                Delivery::Send(resp) => {
                    let resp = super::observe::deliver(&txn, resp, started);
                    return Handled::Done(resp, txn.proxy);
                }
                // vcl_deliver restarted the request or answered otherwise.
                Delivery::Step(next) => step = drive(&mut txn, next),
            },
            step => return Handled::Waits(Box::new(Rest { txn, step, started })),
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
        } = *self;
        loop {
            step = match step {
                Step::Wait(busy) => txn.wait(busy).await,
                Step::ReadBody(cap) => txn.read_body(cap).await,
                Step::Fetch(mode) => fetch::fetch(&mut txn, mode).await,
                Step::LookupIo(key, now) => txn.lookup_io(key, now).await,
                Step::RecheckIo(key, now, guard) => txn.recheck_io(key, now, guard).await,
                Step::Shared(key, guard) => txn.shared(key, guard).await,
                Step::Broadcast(inv, n, what) => txn.broadcast(inv, n, what).await,
                Step::Deliver(resp) => match super::vcl::deliver(&mut txn, resp) {
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
            Step::VclSynth(status, reason) => super::vcl::synth(txn, status, reason),
            Step::Restart => super::vcl::restart(txn),
            stop @ (Step::Deliver(_)
            | Step::ReadBody(_)
            | Step::Wait(_)
            | Step::Fetch(_)
            | Step::LookupIo(..)
            | Step::RecheckIo(..)
            | Step::Shared(..)
            | Step::Broadcast(..)) => return stop,
        };
    }
}

/// What a background refresh inherits from the request that started it, so it is fetched and
/// stored as that request's own miss would be: the rules whose response phase applies, the
/// route a rule chose, and whether it carried `Authorization`.
pub(super) struct Inherited {
    pub matched_rules: Vec<usize>,
    pub route: Option<Member>,
    pub route_hash: Option<u64>,
    pub authorized: bool,
    /// The backend VCL chose (`req.backend_hint`), for the refresh's own VCL state.
    pub vcl_backend: Option<crate::vcl::run::BackendSel>,
    /// The request's transaction id (a 2.x program stores the refreshed object under it).
    pub vcl_xid: u64,
}

impl Txn {
    /// What a background refresh started by this request inherits.
    pub(super) fn inherited(&self) -> Inherited {
        Inherited {
            matched_rules: self.matched_rules.clone(),
            route: self.route.clone(),
            route_hash: self.route_hash,
            authorized: self.authorized,
            vcl_backend: self.vcl.as_ref().and_then(|v| v.state.backend),
            vcl_xid: self.vcl.as_ref().map_or(0, |v| v.state.xid),
        }
    }
}

/// Runs a background refresh fetch for `primary` (grace), revalidating `stale` if it has
/// validators. The caller holds the busy-table lead for the key.
pub(super) async fn refresh(
    proxy: Arc<Proxy>,
    req: Parts,
    client: SocketAddr,
    (primary, inherited): (CacheKey, Inherited),
    stale: Arc<Object>,
    guard: LeaderGuard,
) -> Response<ResponseBody> {
    // A background fetch runs the backend side's VCL (bereq.is_bgfetch), not the client's.
    let vcl = proxy.vcl.clone().map(|rt| {
        let mut v = super::vcl::VclTxn::background(rt, inherited.vcl_xid);
        v.state.backend = inherited.vcl_backend;
        Box::new(v)
    });
    let mut txn = Txn {
        proxy,
        head_only: true,
        req,
        body: None,
        client,
        key: Some(primary),
        backend: None,
        stale: Some(stale),
        req_cc: None,
        background: true,
        matched_rules: inherited.matched_rules,
        route: inherited.route,
        route_hash: inherited.route_hash,
        vcl,
        authorized: inherited.authorized,
        interim: None,
        range_fetch: None,
        held_body: None,
        body_sent: false,
        lookups: 1,
        looked_up: Instant::now(),
        close: false,
    };
    match fetch::fetch(&mut txn, FetchMode::Miss(guard)).await {
        Step::Deliver(resp) => resp,
        _ => deliver::synth(StatusCode::SERVICE_UNAVAILABLE, "refresh-failed", false),
    }
}

impl Txn {
    /// Validates the request and decides between cache lookup and pass.
    fn recv(&mut self) -> Step {
        // A restarted request is the same client request; so is the pass after its body was
        // read ahead for vcl_recv.
        if self.vcl.as_ref().is_none_or(|v| v.state.restarts == 0) && self.held_body.is_none() {
            self.proxy.counters.client_req.inc();
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
        if let Some(rt) = self.proxy.vcl.clone() {
            // The VCL program decides (its built-in VCL for what the operator's does not):
            // PURGE, methods, Authorization, cookies; Accept-Encoding normalised first, as
            // Varnish does before vcl_recv.
            if self.proxy.config.cache.normalize_accept_encoding {
                normalize_accept_encoding(&mut self.req.headers);
            }
            return super::vcl::recv(self, &rt);
        }
        if self.req.method.as_str() == "PURGE" {
            return self.purge();
        }
        let rules = &self.proxy.rules;
        let mut forced_lookup = false;
        if !rules.is_empty() {
            let (host, path) = (host.to_string(), path.to_string());
            let tls = self.req.extensions.get::<crate::tls::server::Session>();
            let conn = crate::rules::Conn {
                https: tls.is_some(),
                client_cert: tls.and_then(|s| s.0.client.as_deref()).unwrap_or(""),
            };
            let outcome =
                rules.on_request(&host, &path, &self.req.method, &mut self.req.headers, conn);
            self.matched_rules = outcome.matched;
            if let Some(name) = &outcome.director {
                self.route = self.proxy.backends.get(name);
            }
            if let Some((status, content_type, body)) = outcome.synth {
                self.proxy.counters.synth_resp.inc();
                return Step::Deliver(deliver::generated(status, &content_type, body, None));
            }
            if let Some((status, location)) = outcome.redirect {
                self.proxy.counters.synth_resp.inc();
                let body = format!(
                    "{} {}\n{location}\n",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or("")
                );
                return Step::Deliver(deliver::generated(
                    status,
                    "text/plain; charset=utf-8",
                    body,
                    Some(&location),
                ));
            }
            if outcome.pass.is_some() {
                return Step::Pass(NoCacheReason::Rule);
            }
            forced_lookup = outcome.cache;
        }
        if crate::http::headers::upgrade_request(
            &self.req.method,
            self.req.version,
            &self.req.headers,
            &self.proxy.config.server.upgrade_protocols,
        )
        .is_some()
        {
            return Step::Pass(NoCacheReason::Upgrade);
        }
        if self.req.method != Method::GET && self.req.method != Method::HEAD {
            return Step::Pass(NoCacheReason::Method);
        }
        // RFC 9111 §3.5: looked up, but see `authorized`. A rule's `cache = true` vouches for
        // the request: then it is a lookup like any other.
        self.authorized = !forced_lookup && has_field(&self.req.headers, &header::AUTHORIZATION);
        let cc = CacheControl::from_headers(&self.req.headers);
        if cc.no_store {
            return Step::Pass(NoCacheReason::RequestNoStore);
        }
        if self.proxy.config.cache.normalize_accept_encoding {
            normalize_accept_encoding(&mut self.req.headers);
        }
        self.read_request_directives();
        Step::Lookup
    }

    /// Reads the request's own `Cache-Control` (and `Pragma: no-cache`) when
    /// `cache.request_cache_control` makes them count.
    pub(super) fn read_request_directives(&mut self) {
        let cfg = &self.proxy.config.cache;
        if cfg.request_cache_control {
            let mut cc = CacheControl::from_headers(&self.req.headers);
            // Pragma: no-cache counts only without Cache-Control (RFC 9111 §5.4).
            if !has_field(&self.req.headers, &header::CACHE_CONTROL)
                && has_field(&self.req.headers, &header::PRAGMA)
                && self
                    .req
                    .headers
                    .get_all(header::PRAGMA)
                    .iter()
                    .any(|v| v.as_bytes().eq_ignore_ascii_case(b"no-cache"))
            {
                cc.no_cache = true;
            }
            self.req_cc = Some(cc);
        }
    }

    /// `PURGE`: from allowed networks only. With `Surrogate-Key` (or `xkey-purge`) it purges
    /// those tags; otherwise the URL, every variant — softly (stale, kept for grace) with
    /// `Soft-Purge: 1`. 200 with what was removed, 404 if nothing was cached.
    fn purge(&mut self) -> Step {
        let counters = &self.proxy.counters;
        if !self.proxy.config.invalidation.may_purge(self.client.ip()) {
            counters.purge_denied.inc();
            return Step::Synth(StatusCode::METHOD_NOT_ALLOWED, "purge-not-allowed");
        }
        counters.purge_req.inc();
        let cache = &self.proxy.cache;
        let tags: Vec<String> = ["surrogate-key", "xkey-purge"]
            .iter()
            .flat_map(|f| self.req.headers.get_all(*f).iter())
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split_ascii_whitespace())
            .map(str::to_string)
            .collect();
        let soft = self.req.headers.get("soft-purge").is_some_and(|v| v == "1");
        let Some(key) = &self.key else {
            return Step::Synth(StatusCode::BAD_REQUEST, "no-key");
        };
        let (n, what, inv) = if !tags.is_empty() {
            let what = format!("tags {}", tags.join(" "));
            (cache.purge_tags(&tags), what, Invalidation::Tags(tags))
        } else if soft {
            let what = format!("{key} (soft)");
            (cache.soft_purge(key), what, Invalidation::Soft(key.clone()))
        } else {
            (
                cache.purge(key),
                key.to_string(),
                Invalidation::Purge(key.clone()),
            )
        };
        counters.purge_objects.add(n as u64);
        if cache.shared.is_some() {
            return Step::Broadcast(inv, n, what);
        }
        purge_answer(n, &what, None)
    }

    /// The authority the request is for: the absolute-form target's, else the single Host.
    /// The request's authority: the absolute-form target's, else the single `Host` field's.
    /// Borrowed from the request, not copied (this runs on every request).
    pub(super) fn authority(req: &Parts) -> Result<&str, &'static str> {
        let Ok(host) = crate::http::headers::single_field(&req.headers, &header::HOST) else {
            return Err("duplicate Host header");
        };
        if let Some(authority) = req.uri.authority() {
            return Ok(authority.as_str());
        }
        match host {
            Some(h) => match h.to_str() {
                // Bytes, not a `char` pattern: ~90 instructions less per request.
                Ok(s) if !s.is_empty() && !s.bytes().any(|b| matches!(b, b'/' | b' ' | b'@')) => {
                    Ok(s)
                }
                _ => Err("invalid Host header"),
            },
            None if req.version == Version::HTTP_11 => Err("missing Host header"),
            None => Ok(""),
        }
    }

    /// Looks the request's (variant) key up in the tiers that need no I/O and decides from
    /// what they hold; `LookupIo` when they have no copy and a tier below needs I/O.
    fn lookup(&mut self) -> Step {
        self.lookups += 1;
        if self.lookups > MAX_LOOKUPS {
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "too-many-lookups");
        }
        // The key is moved out and back rather than cloned: this runs on every hit.
        let Some(primary) = self.key.take() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        // VCL's `req.hash_ignore_vary`: the variant stored last, whatever the request's fields
        // (a miss there fetches the request's own variant).
        let ignore_vary = self.vcl.as_ref().is_some_and(|v| v.state.hash_ignore_vary);
        let newest = if ignore_vary {
            self.proxy
                .cache
                .newest_variant_key(&primary)
                .filter(|k| matches!(self.proxy.cache.lookup_now(k), Ok(Some(_))))
        } else {
            None
        };
        let variant = newest.or_else(|| self.proxy.cache.variant_key(&primary, &self.req.headers));
        let key = variant.as_ref().unwrap_or(&primary);
        let now = Instant::now();
        self.looked_up = now;
        let always_miss = self.vcl.as_ref().is_some_and(|v| v.state.hash_always_miss);
        let step = match self.proxy.cache.lookup_now(key) {
            // VCL's `req.hash_always_miss`: fetched and stored anew whatever is cached.
            _ if always_miss => self.decide(&primary, key, now, None),
            Ok(found) => self.decide(&primary, key, now, found),
            Err(NeedsIo) => Step::LookupIo(key.clone(), now),
        };
        self.key = Some(primary);
        step
    }

    /// `Lookup` continued in the tiers that need I/O.
    async fn lookup_io(&mut self, key: CacheKey, now: Instant) -> Step {
        let found = self.proxy.cache.lookup_io(&key).await;
        let Some(primary) = self.key.take() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        let step = self.decide(&primary, &key, now, found);
        self.key = Some(primary);
        step
    }

    /// A lookup's outcome once the tiers have answered for `key` (`found`): a hit or grace
    /// delivery, waiting for another request's fetch, or a fetch of this request's own.
    fn decide(
        &mut self,
        primary: &CacheKey,
        key: &CacheKey,
        now: Instant,
        found: Option<Arc<Object>>,
    ) -> Step {
        if let Some(step) = found.and_then(|object| self.classify(key, object, now, true)) {
            return step;
        }
        if self.req_cc.as_ref().is_some_and(|cc| cc.only_if_cached) {
            return Step::Synth(StatusCode::GATEWAY_TIMEOUT, "only-if-cached");
        }
        if let Some(step) = super::combine::decide(self, primary, now) {
            return step;
        }
        if self.authorized {
            // Not coalesced: a waiter would be handed whatever the leader's response is,
            // shareable with an authorized request or not. Fetched alone, stored if the
            // response allows it (and never marking the URL hit-for-miss for others).
            self.proxy.counters.cache_miss.inc();
            return Step::Fetch(FetchMode::Authorized);
        }
        let cache = &self.proxy.cache;
        if cache.is_hit_for_miss(primary, now) {
            return Step::HitForMiss;
        }
        match cache.busy.join(key) {
            // VCL's `req.hash_ignore_busy`: fetched alone rather than waiting.
            Join::Waiter(_) if self.vcl.as_ref().is_some_and(|v| v.state.hash_ignore_busy) => {
                self.proxy.counters.cache_miss.inc();
                Step::Fetch(FetchMode::Alone("ignore-busy"))
            }
            Join::Waiter(busy) => Step::Wait(busy),
            // VCL's `req.hash_always_miss`: what is stored is not looked at again either.
            Join::Leader(guard) if self.vcl.as_ref().is_some_and(|v| v.state.hash_always_miss) => {
                self.recheck(key, now, None, guard)
            }
            // The previous leader may have stored the object between our lookup and join.
            Join::Leader(guard) => match cache.lookup_now(key) {
                Ok(found) => self.recheck(key, now, found, guard),
                Err(NeedsIo) => Step::RecheckIo(key.clone(), now, guard),
            },
        }
    }

    /// The leader's second look: a hit after all, or this request's fetch.
    fn recheck(
        &mut self,
        key: &CacheKey,
        now: Instant,
        found: Option<Arc<Object>>,
        guard: LeaderGuard,
    ) -> Step {
        match found.and_then(|object| self.classify(key, object, now, false)) {
            Some(hit) => hit,
            None if self.proxy.cache.shared.is_some() => Step::Shared(key.clone(), guard),
            None => Step::Miss(guard),
        }
    }

    /// The leader asks the fleet's shared tier: a copy (stored locally, then judged like a
    /// local one; local waiters look up again and find it), the URL's `Vary` fields (look up
    /// the request's variant), or nothing — fetch, with the fleet lease if this node got it.
    async fn shared(&mut self, key: CacheKey, mut guard: LeaderGuard) -> Step {
        let (Some(shared), Some(primary)) = (self.proxy.cache.shared.clone(), self.key.clone())
        else {
            return Step::Miss(guard);
        };
        match shared.lookup(&key, true).await {
            Found::Object(object) => {
                self.proxy.cache.store_from_shared(&primary, object.clone());
                let now = Instant::now();
                self.looked_up = now;
                match self.classify(&key, object, now, false) {
                    Some(Step::Hit(object)) => {
                        drop(guard);
                        let counters = &self.proxy.counters;
                        counters.cache_hit.inc();
                        counters.cache_hit_shared.inc();
                        let status =
                            format!("{}; detail=shared", &*deliver::hit_status(&object, now));
                        self.deliver_object_at(object, &status, now)
                    }
                    Some(step) => {
                        drop(guard);
                        step
                    }
                    None => Step::Miss(guard),
                }
            }
            Found::Varies(names) => {
                self.proxy.cache.learn_vary(&primary, names);
                drop(guard);
                Step::Lookup
            }
            Found::Miss(ticket) => {
                guard.set_ticket(ticket);
                Step::Miss(guard)
            }
        }
    }

    /// Sends a PURGE applied here to the fleet and answers with what became of it.
    async fn broadcast(&mut self, inv: Invalidation, n: usize, what: String) -> Step {
        let fleet = match &self.proxy.cache.shared {
            Some(shared) => Some(feed::broadcast(shared, inv).await),
            None => None,
        };
        purge_answer(n, &what, fleet.as_ref())
    }

    /// The leader's second look continued in the tiers that need I/O.
    async fn recheck_io(&mut self, key: CacheKey, now: Instant, guard: LeaderGuard) -> Step {
        let found = self.proxy.cache.lookup_io(&key).await;
        self.recheck(&key, now, found, guard)
    }

    /// What the stored `object` under `key` can do for this request: a fresh hit, a grace
    /// delivery, or nothing (remembering a stale copy within `keep` for revalidation and as a
    /// fallback). `count` counts a stale object once per request.
    fn classify(
        &mut self,
        key: &CacheKey,
        object: Arc<Object>,
        now: Instant,
        count: bool,
    ) -> Option<Step> {
        if self
            .proxy
            .cache
            .check_bans(key, &object, Some(&self.req.headers))
            == crate::cache::ban::BanCheck::Banned
        {
            self.proxy.counters.ban_objects.inc();
            return None;
        }
        let ignore_vary = self.vcl.as_ref().is_some_and(|v| v.state.hash_ignore_vary);
        if !ignore_vary && !object.vary_matches(&self.req.headers) {
            return None;
        }
        if self.authorized && !self.shared_with_authorization(&object) {
            // Stored for requests without credentials (or without leave to share): this
            // request's answer may differ, so it is not reused for it, nor revalidated.
            return None;
        }
        // VCL's `req.ttl` / `req.max_age` and `req.grace`, as Varnish's EXP_Ttl and
        // EXP_Ttl_grace read them: a positive `req.ttl` below the object's TTL ends its
        // freshness there (the object counts as if stored with that TTL, so its grace runs
        // from then); a non-negative `req.grace` below the object's grace shortens that.
        // Unset (or out of those ranges) they change nothing.
        let (req_ttl, req_grace) = self
            .vcl
            .as_ref()
            .map_or((None, None), |v| (v.state.req_ttl, v.state.req_grace));
        let ttl_cap = req_ttl
            .filter(|&l| l > 0.0 && l < object.ttl.get().as_secs_f64())
            .map(Duration::from_secs_f64);
        let fresh = match ttl_cap {
            Some(cap) => object.age(now) < cap,
            None => object.is_fresh(now),
        };
        if let Some(cc) = &self.req_cc {
            let age = object.age(now);
            let wants_validation = cc.no_cache
                || cc.max_age.is_some_and(|m| age > m)
                || cc.min_fresh.is_some_and(|m| object.remaining_ttl(now) < m);
            if wants_validation {
                self.stale = Some(object);
                return None;
            }
            if !fresh
                && object.stale_ok
                && let Some(max_stale) = cc.max_stale
                && max_stale.is_none_or(|m| age.saturating_sub(object.ttl.get()) <= m)
            {
                return Some(Step::Hit(object));
            }
        }
        if fresh {
            return Some(Step::Hit(object));
        }
        if count {
            self.proxy.counters.cache_expired.inc();
        }
        let graced = object.stale_ok && {
            let grace = match req_grace {
                Some(limit) if limit >= 0.0 && limit < object.grace.get().as_secs_f64() => {
                    Duration::from_secs_f64(limit)
                }
                _ => object.grace.get(),
            };
            object.age(now) < ttl_cap.unwrap_or_else(|| object.ttl.get()) + grace
        };
        // (`count` is false for the leader's second look: the fetch in progress is its own.)
        if graced && !self.legacy_grace_applies(key, !count) {
            // 2.x: a stale copy is fetched anew unless grace is what Varnish 2.1 kept it for.
            self.stale = Some(object);
            return None;
        }
        if graced {
            return Some(Step::Grace(object));
        }
        if object.within_keep(now) {
            self.stale = Some(object);
        }
        None
    }

    /// Varnish 2.x's grace: a stale copy within grace answers only while a fetch of it is in
    /// progress or the request's backend is sick; otherwise it is fetched anew (4.x serves
    /// it and refreshes it in the background). True without a 2.x program.
    fn legacy_grace_applies(&self, key: &CacheKey, leading: bool) -> bool {
        let Some(v) = self.vcl.as_deref() else {
            return true;
        };
        if !v.runtime.program.dialect.is_legacy() {
            return true;
        }
        if !leading && self.proxy.cache.busy.contains(key) {
            return true;
        }
        let sel = v.state.backend.or_else(|| {
            v.runtime
                .program
                .default_target
                .map(|target| crate::vcl::run::BackendSel { target, hash: None })
        });
        sel.and_then(|s| v.runtime.member(s))
            .is_some_and(|m| !m.healthy_for(key))
    }

    /// Whether the request's own `Cache-Control` / `Pragma` count and say anything
    /// (`cache.request_cache_control`).
    pub(super) fn request_directives(&self) -> bool {
        self.req_cc
            .as_ref()
            .is_some_and(|cc| *cc != CacheControl::default())
    }

    /// Whether a stored response may answer a request with `Authorization`: it says `public`,
    /// `s-maxage` or `must-revalidate` (RFC 9111 §3.5), in the field the policy reads.
    fn shared_with_authorization(&self, object: &Object) -> bool {
        let targets = &self.proxy.config.cache.targeted_cache_control;
        crate::cache::policy::shared_with_authorization(&CacheControl::targeted(
            object.headers.map(),
            targets,
        ))
    }

    fn hit(&mut self, object: Arc<Object>) -> Step {
        if self.vcl.is_some()
            && let Some(step) = super::vcl::after_hit(self, &object)
        {
            return step;
        }
        self.proxy.counters.cache_hit.inc();
        if object.state.from_disk {
            self.proxy.counters.cache_hit_disk.inc();
        } else {
            self.proxy.counters.cache_hit_memory.inc();
        }
        let now = self.looked_up;
        if object.is_fresh(now) {
            self.refresh_ahead(&object, now);
            let status = deliver::hit_status(&object, now);
            return self.deliver_object_at(object, &status, now);
        }
        let status = deliver::stale_status(&object, now, "max-stale");
        self.deliver_object_at(object, &status, now)
    }

    /// Refresh-ahead (`cache.refresh_ahead`): a fresh object within the window before its
    /// expiry is refreshed in the background — unless a fetch for it is already running, or
    /// the URL was recently uncacheable (a refresh would only be refused again).
    fn refresh_ahead(&self, object: &Arc<Object>, now: Instant) {
        let Some(window) = self
            .proxy
            .config
            .cache
            .refresh_ahead
            .window(object.ttl.get())
        else {
            return;
        };
        if object.remaining_ttl(now) > window {
            return;
        }
        let Some(primary) = self.key.clone() else {
            return;
        };
        if self.proxy.cache.is_hit_for_miss(&primary, now) {
            return;
        }
        let current = (object.clone(), super::refresh::Why::Ahead);
        super::refresh::spawn(
            &self.proxy,
            (primary, self.inherited()),
            &self.req,
            self.client,
            current,
        );
    }

    /// Stale within grace: deliver at once, and refresh it in the background unless a fetch
    /// for it is already running.
    fn grace(&mut self, object: Arc<Object>) -> Step {
        if self.vcl.is_some()
            && let Some(step) = super::vcl::after_hit(self, &object)
        {
            return step;
        }
        self.proxy.counters.cache_grace_hit.inc();
        if let Some(primary) = self.key.clone() {
            let inherited = self.inherited();
            super::refresh::spawn(
                &self.proxy,
                (primary, inherited),
                &self.req,
                self.client,
                (object.clone(), super::refresh::Why::Grace),
            );
        }
        let status = deliver::stale_status(&object, Instant::now(), "while-revalidate");
        self.deliver_object(object, &status)
    }

    /// A stored object, with the request's conditionals and Range applied.
    pub(super) fn deliver_object(&mut self, object: Arc<Object>, cache_status: &str) -> Step {
        self.deliver_object_at(object, cache_status, Instant::now())
    }

    /// Like [`Txn::deliver_object`], with `Age` computed at `now`.
    fn deliver_object_at(&mut self, object: Arc<Object>, cache_status: &str, now: Instant) -> Step {
        // Under VCL `If-None-Match` / `If-Modified-Since` are answered after vcl_deliver, on
        // the validators it delivers (`vcl::deliver`), as Varnish does: the object's response
        // is built without them.
        if let Some(v) = self.vcl.as_deref_mut()
            && matches!(self.req.method, http::Method::GET | http::Method::HEAD)
            && (has_field(&self.req.headers, &header::IF_NONE_MATCH)
                || has_field(&self.req.headers, &header::IF_MODIFIED_SINCE))
        {
            v.conditional = true;
            let mut request = self.req.headers.clone();
            request.remove(header::IF_NONE_MATCH);
            request.remove(header::IF_MODIFIED_SINCE);
            return Step::Deliver(deliver::object(
                object,
                &self.req.method,
                &request,
                self.head_only,
                now,
                cache_status,
            ));
        }
        Step::Deliver(deliver::object(
            object,
            &self.req.method,
            &self.req.headers,
            self.head_only,
            now,
            cache_status,
        ))
    }

    /// Waits for another request's fetch of the same key and follows its response.
    async fn wait(&mut self, busy: Arc<BusyObject>) -> Step {
        match busy.wait_head().await {
            HeadOutcome::Shared(head, _) if !vary_matches(&head.vary, &self.req.headers) => {
                // Another variant is being fetched: fetch ours on our own.
                self.proxy.counters.cache_vary_miss.inc();
                Step::Fetch(FetchMode::Alone("vary-miss"))
            }
            HeadOutcome::Shared(head, reader) => {
                self.proxy.counters.cache_coalesced.inc();
                // Under a 4.x program a waiter runs vcl_hit on what is being fetched, as
                // Varnish's waiting list looks the busy object up again; VCL may take
                // another way than delivering it.
                if let Some(object) = &head.object
                    && let Some(step) = super::vcl::after_waiting(self, object)
                {
                    return step;
                }
                // Under VCL a waiter is served from the cache, as Varnish's waiting list is.
                if let Some(v) = self.vcl.as_deref_mut() {
                    v.hit = true;
                }
                let body = ResponseBody::busy(reader, head.content_length);
                if self.ranged(head.status) {
                    return Step::Deliver(self.stream_response(
                        head.status,
                        head.headers.clone(),
                        body,
                        head.content_length,
                        COLLAPSED,
                    ));
                }
                // The common case: every waiter sends the same fields, built once (a burst of
                // a thousand waiters built a thousand maps, growing each: ~3,400 instructions
                // per waiter, callgrind).
                let fields = head
                    .delivered
                    .get_or_init(|| deliver::delivery_fields(head.headers.clone(), COLLAPSED));
                let body = if self.head_only {
                    ResponseBody::empty()
                } else {
                    body
                };
                let mut resp = Response::new(body);
                *resp.status_mut() = head.status;
                *resp.headers_mut() = fields.clone();
                Step::Deliver(resp)
            }
            HeadOutcome::Retry => Step::Lookup,
            HeadOutcome::Failed(status, detail) => match self.stale.take() {
                Some(stale) if stale.stale_ok => self.deliver_stale(stale, detail),
                _ => Step::Synth(status, detail),
            },
        }
    }

    fn miss(&mut self, guard: LeaderGuard) -> Step {
        self.proxy.counters.cache_miss.inc();
        if self.vcl.is_some() {
            return super::vcl::miss(self, Some(guard), false);
        }
        Step::Fetch(FetchMode::Miss(guard))
    }

    fn hit_for_miss(&mut self) -> Step {
        self.proxy.counters.cache_hitmiss.inc();
        if self.vcl.is_some() {
            return super::vcl::miss(self, None, true);
        }
        Step::Fetch(FetchMode::Alone("hit-for-miss"))
    }

    fn pass(&mut self, reason: NoCacheReason) -> Step {
        self.proxy.counters.cache_pass.inc();
        if self.vcl.is_some() {
            return super::vcl::pass(self, reason);
        }
        Step::Fetch(FetchMode::Pass(reason))
    }

    /// Closes the client connection after this response (VCL's pipe of a plain request).
    pub(super) fn close_after(&mut self) {
        self.close = true;
    }

    /// Whether the client connection closes after this response.
    pub(super) fn closing(&self) -> bool {
        self.close
    }

    /// Before a VCL restart: what the last run found is forgotten; the request (as VCL left
    /// it) and its VCL state stay.
    pub(super) fn reset_for_restart(&mut self) {
        self.key = None;
        self.stale = None;
        self.backend = None;
        self.route = None;
        self.route_hash = None;
        self.req_cc = None;
        self.range_fetch = None;
        self.lookups = 0;
        self.head_only = self.req.method == Method::HEAD;
    }

    /// Serves a stale object because no backend could answer (`why`).
    pub(super) fn deliver_stale(&mut self, object: Arc<Object>, why: &'static str) -> Step {
        self.proxy.counters.cache_stale_served.inc();
        let status = deliver::stale_status(&object, Instant::now(), why);
        self.deliver_object(object, &status)
    }

    /// A streamed response (busy object or backend body) to this request: a single Range is
    /// answered with 206 when the length is known up front; HEAD gets no body.
    /// Whether a `status` response to this request is cut to its Range (a GET with `Range`
    /// and no `If-Range`, to a 200).
    fn ranged(&self, status: StatusCode) -> bool {
        status == StatusCode::OK
            && self.req.method == Method::GET
            && has_field(&self.req.headers, &header::RANGE)
            && !has_field(&self.req.headers, &header::IF_RANGE)
    }

    pub(super) fn stream_response(
        &self,
        status: StatusCode,
        mut headers: http::HeaderMap,
        body: ResponseBody,
        content_length: Option<u64>,
        cache_status: &str,
    ) -> Response<ResponseBody> {
        if let (true, Some(len)) = (self.ranged(status), content_length) {
            let range = self
                .req
                .headers
                .get(header::RANGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            match partial::parse_range(range, len) {
                RangeSpec::Ranges(r) if r.len() == 1 => {
                    let (start, end) = r[0];
                    headers.insert(
                        header::CONTENT_RANGE,
                        deliver::content_range(start, end, len),
                    );
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                    let body = ResponseBody::slice(body, start, end - start + 1);
                    return deliver::respond(
                        StatusCode::PARTIAL_CONTENT,
                        headers,
                        body,
                        cache_status,
                    );
                }
                RangeSpec::Unsatisfiable => {
                    headers.insert(
                        header::CONTENT_RANGE,
                        HeaderValue::from_str(&format!("bytes */{len}"))
                            .unwrap_or(HeaderValue::from_static("bytes */0")),
                    );
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
                    return deliver::respond(
                        StatusCode::RANGE_NOT_SATISFIABLE,
                        headers,
                        ResponseBody::empty(),
                        cache_status,
                    );
                }
                _ => {}
            }
        }
        let body = if self.head_only {
            ResponseBody::empty()
        } else {
            body
        };
        deliver::respond(status, headers, body, cache_status)
    }

    fn synth(&mut self, status: StatusCode, detail: &'static str) -> Step {
        self.proxy.counters.synth_resp.inc();
        Step::Deliver(deliver::synth(status, detail, self.close))
    }
}

/// The answer to a PURGE: 200 with what was removed (here, and from the shared tier), 404 if
/// nothing was cached; with a fleet, whether the other nodes confirmed it.
fn purge_answer(n: usize, what: &str, fleet: Option<&feed::Broadcast>) -> Step {
    let shared = fleet.map_or(0, |b| b.shared_removed);
    let status = if n > 0 || shared > 0 {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    let mut body = format!(
        "{} {}\npurged {n} object{} for {what}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        if n == 1 { "" } else { "s" }
    );
    if let Some(b) = fleet {
        body.push_str(&b.summary());
        body.push('\n');
    }
    Step::Deliver(deliver::generated(
        status,
        "text/plain; charset=utf-8",
        body,
        None,
    ))
}

/// Rewrites `Accept-Encoding` to `gzip`, `br` or nothing, so clients that differ only in how
/// they spell it share one variant (and the backend sees what the variant was fetched with).
pub(super) fn normalize_accept_encoding(headers: &mut http::HeaderMap) {
    // Fast paths: no field (nothing to do), or already normalised.
    if !crate::http::headers::has_field(headers, &header::ACCEPT_ENCODING) {
        return;
    }
    let mut values = headers.get_all(header::ACCEPT_ENCODING).iter();
    match (values.next(), values.next()) {
        (None, _) => return,
        (Some(v), None) if v == "gzip" || v == "br" => return,
        _ => {}
    }
    let accepts = |coding: &str| {
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|item| {
                let mut parts = item.split(';');
                let name = parts.next().unwrap_or("").trim();
                let zero_q = parts.any(|p| {
                    let p = p.trim();
                    p.strip_prefix("q=")
                        .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
                });
                name.eq_ignore_ascii_case(coding) && !zero_q
            })
    };
    let chosen = if accepts("gzip") {
        Some("gzip")
    } else if accepts("br") {
        Some("br")
    } else {
        None
    };
    headers.remove(header::ACCEPT_ENCODING);
    if let Some(c) = chosen {
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_normalised() {
        for (given, want) in [
            ("gzip, deflate, br", Some("gzip")),
            ("br;q=1.0, gzip;q=0", Some("br")),
            ("GZIP", Some("gzip")),
            ("identity", None),
            ("deflate", None),
        ] {
            let mut h = http::HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(given));
            normalize_accept_encoding(&mut h);
            assert_eq!(
                h.get(header::ACCEPT_ENCODING).map(|v| v.to_str().unwrap()),
                want,
                "{given}"
            );
        }
    }
}
