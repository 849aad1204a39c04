//! The client-side request state machine, one function per step and one driver loop:
//!
//! ```text
//!   Recv ──► Lookup ──► Hit ─────────────────────────────► Deliver
//!    │         │  └──► Wait (coalesced) ──► Deliver | Lookup | Fetch (vary-miss) | Synth
//!    │         ├─────► Miss ──────┐
//!    │         └─────► HitForMiss ┤
//!    └──────► Pass ───────────────┴──► Fetch ──► Deliver | Synth
//!   (any step may end in Synth, which delivers a generated response)
//! ```
//!
//! The backend side (fetching and filling a busy object) is the second machine, in `fetch.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode, Version};
use hyper::body::Incoming;

use super::body::ResponseBody;
use super::{Proxy, deliver, fetch};
use crate::backend::Backend;
use crate::cache::busy::{BusyObject, HeadOutcome, Join, LeaderGuard};
use crate::cache::policy::NoCacheReason;
use crate::cache::{CacheKey, Object, vary_matches};
use crate::http::cache_control::CacheControl;

/// Lookups one request may make (a waiter whose leader's response was not shareable looks up
/// again). Bounds the loop; exceeding it answers 503.
const MAX_LOOKUPS: u32 = 4;

pub(super) enum Step {
    Recv,
    Lookup,
    Hit(Arc<Object>),
    Wait(Arc<BusyObject>),
    Miss(LeaderGuard),
    HitForMiss,
    Pass(NoCacheReason),
    Fetch(FetchMode),
    Synth(StatusCode, &'static str),
    Deliver(Response<ResponseBody>),
}

impl Step {
    fn as_str(&self) -> &'static str {
        match self {
            Step::Recv => "recv",
            Step::Lookup => "lookup",
            Step::Hit(_) => "hit",
            Step::Wait(_) => "wait",
            Step::Miss(_) => "miss",
            Step::HitForMiss => "hit-for-miss",
            Step::Pass(_) => "pass",
            Step::Fetch(_) => "fetch",
            Step::Synth(..) => "synth",
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
    /// Never stored.
    Pass(NoCacheReason),
}

/// One client request in flight.
pub(super) struct Txn<'a> {
    pub proxy: &'a Arc<Proxy>,
    pub req: Parts,
    pub body: Option<Incoming>,
    pub client: SocketAddr,
    pub key: Option<CacheKey>,
    pub head_only: bool,
    pub backend: Arc<Backend>,
    lookups: u32,
    /// Set when the client connection must close after this response (malformed request).
    close: bool,
}

/// Drives a request from `Recv` to `Deliver`.
pub(super) async fn run(
    proxy: &Arc<Proxy>,
    req: Request<Incoming>,
    client: SocketAddr,
) -> Response<ResponseBody> {
    let (parts, body) = req.into_parts();
    let mut txn = Txn {
        proxy,
        head_only: parts.method == Method::HEAD,
        req: parts,
        body: Some(body),
        client,
        key: None,
        backend: proxy.backends[0].clone(),
        lookups: 0,
        close: false,
    };
    let mut step = Step::Recv;
    loop {
        tracing::trace!(step = step.as_str(), "request step");
        step = match step {
            Step::Recv => txn.recv(),
            Step::Lookup => txn.lookup().await,
            Step::Hit(object) => txn.hit(object),
            Step::Wait(busy) => txn.wait(busy).await,
            Step::Miss(guard) => txn.miss(guard),
            Step::HitForMiss => txn.hit_for_miss(),
            Step::Pass(reason) => txn.pass(reason),
            Step::Fetch(mode) => fetch::fetch(&mut txn, mode).await,
            Step::Synth(status, detail) => txn.synth(status, detail),
            Step::Deliver(resp) => return resp.map(|b| b.counted(proxy.counters.clone())),
        };
    }
}

impl Txn<'_> {
    /// Validates the request and decides between cache lookup and pass.
    fn recv(&mut self) -> Step {
        self.proxy.counters.client_req.inc();
        let host = match self.authority() {
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
        let path = self
            .req
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        self.key = Some(CacheKey::new(&host, path));
        if self.req.method != Method::GET && self.req.method != Method::HEAD {
            return Step::Pass(NoCacheReason::Method);
        }
        if self.req.headers.contains_key(header::AUTHORIZATION) {
            return Step::Pass(NoCacheReason::Authorization);
        }
        if CacheControl::from_headers(&self.req.headers).no_store {
            return Step::Pass(NoCacheReason::RequestNoStore);
        }
        Step::Lookup
    }

    /// The authority the request is for: the absolute-form target's, else the single Host.
    fn authority(&self) -> Result<String, &'static str> {
        let hosts: Vec<&HeaderValue> = self.req.headers.get_all(header::HOST).iter().collect();
        if hosts.len() > 1 {
            return Err("duplicate Host header");
        }
        if let Some(authority) = self.req.uri.authority() {
            return Ok(authority.as_str().to_string());
        }
        match hosts.first() {
            Some(h) => match h.to_str() {
                Ok(s) if !s.is_empty() && !s.contains(['/', ' ', '@']) => Ok(s.to_string()),
                _ => Err("invalid Host header"),
            },
            None if self.req.version == Version::HTTP_11 => Err("missing Host header"),
            None => Ok(String::new()),
        }
    }

    async fn lookup(&mut self) -> Step {
        self.lookups += 1;
        if self.lookups > MAX_LOOKUPS {
            return Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "too-many-lookups");
        }
        let Some(key) = self.key.clone() else {
            return Step::Synth(StatusCode::INTERNAL_SERVER_ERROR, "no-key");
        };
        let cache = &self.proxy.cache;
        let now = Instant::now();
        if let Some(step) = self.fresh_hit(&key, now, true).await {
            return step;
        }
        if cache.is_hit_for_miss(&key, now) {
            return Step::HitForMiss;
        }
        match cache.busy.join(&key) {
            Join::Waiter(busy) => Step::Wait(busy),
            Join::Leader(guard) => {
                // The previous leader may have stored the object between our lookup and join.
                match self.fresh_hit(&key, now, false).await {
                    Some(hit) => hit,
                    None => Step::Miss(guard),
                }
            }
        }
    }

    /// A hit if a fresh object matching the request is stored; `count` counts a stale one.
    async fn fresh_hit(&self, key: &CacheKey, now: Instant, count: bool) -> Option<Step> {
        let object = self.proxy.cache.lookup(key).await?;
        if !object.vary_matches(&self.req.headers) {
            return None;
        }
        if object.is_fresh(now) {
            return Some(Step::Hit(object));
        }
        if count {
            self.proxy.counters.cache_expired.inc();
        }
        None
    }

    fn hit(&mut self, object: Arc<Object>) -> Step {
        self.proxy.counters.cache_hit.inc();
        if object.state.from_disk {
            self.proxy.counters.cache_hit_disk.inc();
        } else {
            self.proxy.counters.cache_hit_memory.inc();
        }
        Step::Deliver(deliver::from_object(object, self.head_only, Instant::now()))
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
                let body = if self.head_only {
                    ResponseBody::empty()
                } else {
                    ResponseBody::busy(reader, head.content_length)
                };
                Step::Deliver(deliver::respond(
                    head.status,
                    head.headers.clone(),
                    body,
                    "shellac; fwd=miss; collapsed",
                ))
            }
            HeadOutcome::Retry => Step::Lookup,
            HeadOutcome::Failed(status, detail) => Step::Synth(status, detail),
        }
    }

    fn miss(&mut self, guard: LeaderGuard) -> Step {
        self.proxy.counters.cache_miss.inc();
        Step::Fetch(FetchMode::Miss(guard))
    }

    fn hit_for_miss(&mut self) -> Step {
        self.proxy.counters.cache_hitmiss.inc();
        Step::Fetch(FetchMode::Alone("hit-for-miss"))
    }

    fn pass(&mut self, reason: NoCacheReason) -> Step {
        self.proxy.counters.cache_pass.inc();
        Step::Fetch(FetchMode::Pass(reason))
    }

    fn synth(&mut self, status: StatusCode, detail: &'static str) -> Step {
        self.proxy.counters.synth_resp.inc();
        Step::Deliver(deliver::synth(status, detail, self.close))
    }
}
