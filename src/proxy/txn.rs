//! One client request in flight ([`Txn`]) and the steps it goes through ([`Step`],
//! [`FetchMode`]): the types the request machine (`fsm.rs`), the fetch (`fetch/`) and the
//! rest of the proxy share, so that none of them needs the machine itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header;
use http::request::Parts;
use http::{Method, Response, StatusCode, Version};
use hyper::body::Incoming;

use super::Proxy;
use super::body::ResponseBody;
use super::held::HeldBody;
use crate::backend::Backend;
use crate::backend::director::Member;
use crate::cache::busy::{BusyObject, LeaderGuard};
use crate::cache::policy::NoCacheReason;
use crate::cache::shared::feed::Invalidation;
use crate::cache::{CacheKey, Object};
use crate::http::cache_control::CacheControl;

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
    /// The URL is cached in slices (`slice/`): answered from them.
    Slices(Arc<crate::cache::slices::SliceMeta>),
    /// A stored object to deliver, whose br or zstd representation is asked of the tiers
    /// below memory first (`respond.rs`).
    RepresentationIo(Box<RepresentationIo>),
    /// A stored object answering an MP4 seek: cut up front off the async threads, then
    /// delivered (`respond.rs`, `filter/mp4_precut.rs`).
    Mp4Cut(Box<Mp4Cut>),
    /// A Range starting at this byte, past `max_object_size`, of a URL not known yet: asked
    /// as its slice (`slice/`).
    SliceProbe(u64),
    Deliver(Response<ResponseBody>),
}

/// A stored object whose br or zstd representation the tiers below (disk) may hold
/// (`coding::representation`): looked up there before the response is formed
/// (`respond.rs`).
pub(super) struct RepresentationIo {
    pub(super) object: Arc<Object>,
    pub(super) rep_key: crate::cache::CacheKey,
    pub(super) coding: crate::http::accept_encoding::Coding,
    pub(super) cache_status: String,
    pub(super) now: Instant,
}

/// A stored object an MP4 seek is cut from before its head goes out (`Step::Mp4Cut`).
pub(super) struct Mp4Cut {
    pub(super) object: Arc<Object>,
    pub(super) cache_status: String,
    pub(super) now: Instant,
}

impl Step {
    pub(super) fn as_str(&self) -> &'static str {
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
            Step::Slices(_) => "slices",
            Step::RepresentationIo(_) => "representation-io",
            Step::Mp4Cut(_) => "mp4-cut",
            Step::SliceProbe(_) => "slice-probe",
            Step::Deliver(_) => "deliver",
        }
    }
}

/// The policy front-end a request runs under (its hooks: `policy/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Policy {
    /// The configuration's `[[rule]]`s (none: RFC 9111 and the builtin policy alone).
    Rules,
    /// The configuration's VCL program.
    Vcl,
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

/// What a fetch for partial content sends to the backend instead of the client's fields.
pub(super) struct RangeFetch {
    pub range: http::HeaderValue,
    pub if_range: Option<http::HeaderValue>,
}

/// One client request in flight.
pub(super) struct Txn {
    pub proxy: Arc<Proxy>,
    pub req: Parts,
    pub body: Option<Incoming>,
    /// The body as read before vcl_recv, for `std.cache_req_body()` (`held.rs`); then
    /// `body` is `None`.
    pub held_body: Option<HeldBody>,
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
    pub req_cc: Option<CacheControl>,
    /// A background refresh (grace): no client waits for this response.
    pub background: bool,
    /// Rules whose request matchers matched (their response phase runs in Fetch).
    pub matched_rules: Vec<usize>,
    /// An FLV seek's offset (`[[rule]] flv`, `?start=`), until the delivery takes it.
    pub flv_start: Option<u64>,
    /// An MP4 seek's start and end in seconds (0: the beginning; `None`: no end) and its
    /// moov bound (`[[rule]] mp4`, `?start=`, `&end=`), until the delivery takes it.
    pub mp4_start: Option<((f64, Option<f64>), usize)>,
    /// Backend or director chosen by a rule (or VCL) instead of the default route.
    pub route: Option<Member>,
    /// A hash director's key hash chosen by VCL (`hash.backend(key)`).
    pub route_hash: Option<u64>,
    /// The policy front-end this request runs under (`policy/`).
    pub policy: Policy,
    /// The VCL program's state for this request, when one runs.
    pub vcl: Option<Box<super::vcl::VclTxn>>,
    /// The request carries `Authorization` (and no rule said `cache`): only stored responses
    /// that allow it are reused for it, and its own response is stored only if it allows
    /// sharing (RFC 9111 §3.5).
    pub authorized: bool,
    /// The client's preconditions (`If-None-Match`, `If-Modified-Since`, `If-Match`,
    /// `If-Unmodified-Since`) were not sent to the backend — a cache fill is unconditional, a
    /// coalesced waiter sends nothing —, so the delivery answers them on the response it has
    /// (RFC 9110 §13.2.2), as the origin would have (`Txn::stream_response`).
    pub withheld_conditions: bool,
    /// Where 1xx heads from the backend go (the client connection); `None` for a background
    /// refresh, or a request that never had to wait.
    pub interim: Option<Arc<dyn super::InterimSink>>,
    /// The Range (and If-Range) a fetch for partial content sends instead of the client's.
    pub range_fetch: Option<RangeFetch>,
    pub lookups: u32,
    /// When the fetch this request first waited for began (`BusyObject::started`). An object
    /// stored or revalidated since answers its later lookups even when it is not fresh
    /// (`no-cache`, a zero TTL): it is that fetch's answer (or a later one), which a waiter
    /// follows as coalescing means. Without it a waiter woken to look again (the fill's body
    /// was all in: it waits for the store) found the `no-cache` object stale, waited for the
    /// next revalidation, and under load ran out of lookups (503 `too-many-lookups`).
    pub waited_since: Option<Instant>,
    /// When the last lookup looked: a hit is judged and delivered at that instant (one clock
    /// read per hit instead of three).
    pub looked_up: Instant,
    /// Set when the client connection must close after this response (malformed request).
    pub close: bool,
    /// The body filters over what this request fetches and delivers (`filter/`). Empty
    /// unless a policy chooses some.
    pub filters: super::filter::Filters,
    /// The `[[site]]` the request is for (`None`: the global configuration).
    pub site: Option<Arc<super::site::Site>>,
}

/// What a background refresh (or a slice's fetch) inherits from the request that started it,
/// so it is fetched and stored as that request's own miss would be: the rules whose response
/// phase applies, the route a rule chose, and whether it carried `Authorization`.
#[derive(Clone)]
pub(super) struct Inherited {
    pub policy: Policy,
    pub matched_rules: Vec<usize>,
    pub route: Option<Member>,
    pub route_hash: Option<u64>,
    pub authorized: bool,
    /// The backend VCL chose (`req.backend_hint`), for the refresh's own VCL state (set by
    /// the VCL front-end's `inherit` hook).
    pub vcl_backend: Option<crate::vcl::run::BackendSel>,
    /// The request's transaction id (a 2.x program stores the refreshed object under it).
    pub vcl_xid: u64,
    /// The request's site.
    pub site: Option<Arc<super::site::Site>>,
}

impl Txn {
    /// What a background refresh started by this request inherits.
    /// The policy front-end adds its own state (`Policy::inherit`); the machine's types do
    /// not read it.
    pub(super) fn inherited(&self) -> Inherited {
        let mut inherited = Inherited {
            policy: self.policy,
            matched_rules: self.matched_rules.clone(),
            route: self.route.clone(),
            route_hash: self.route_hash,
            authorized: self.authorized,
            vcl_backend: None,
            vcl_xid: 0,
            site: self.site.clone(),
        };
        self.policy.inherit(self, &mut inherited);
        inherited
    }

    /// The VCL program this request runs under: the one its VCL state began with, else its
    /// site's (`[[site]] vcl`), else the configuration's.
    pub(super) fn vcl_program(&self) -> Option<Arc<super::vcl::VclRuntime>> {
        if let Some(v) = &self.vcl {
            return Some(v.runtime.clone());
        }
        self.site
            .as_ref()
            .and_then(|s| self.proxy.site_vcl.get(s.vcl?).cloned())
            .or_else(|| self.proxy.vcl.clone())
    }

    /// The rules this request runs under: its site's, else the global ones.
    pub(super) fn rules(&self) -> &crate::rules::Rules {
        match self.site.as_ref().and_then(|s| s.rules.as_ref()) {
            Some(rules) => rules,
            None => &self.proxy.rules,
        }
    }

    /// The cache settings this request's responses are stored with: its site's, else the
    /// global ones.
    pub(super) fn cache_config(&self) -> &crate::config::CacheConfig {
        match self.site.as_ref().and_then(|s| s.cache_config.as_ref()) {
            Some(c) => c,
            None => &self.proxy.config.cache,
        }
    }
}

impl Txn {
    /// The client as an application should see it: the connection's peer, or — when the peer is
    /// in `server.trusted_proxies` — the last `X-Forwarded-For` address not itself trusted
    /// (nginx's `real_ip_recursive`), port 0 (the client's port is not forwarded).
    pub(super) fn real_client(&self) -> SocketAddr {
        let server = &self.proxy.config.server;
        if !server.trusts(self.client.ip()) {
            return self.client;
        }
        let forwarded: Vec<std::net::IpAddr> = self
            .req
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|a| a.trim().parse().ok())
            .collect();
        match forwarded.iter().rev().find(|ip| !server.trusts(**ip)) {
            Some(ip) => SocketAddr::new(*ip, 0),
            None => self.client,
        }
    }

    /// The authority the request is for: the absolute-form target's, else the single Host.
    /// The request's authority: the absolute-form target's, else the single `Host` field's.
    /// Borrowed from the request, not copied (this runs on every request).
    pub(super) fn authority(req: &Parts) -> Result<&str, &'static str> {
        let Ok(host) = crate::http::fields::single_field(&req.headers, &header::HOST) else {
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
        self.waited_since = None;
        self.head_only = self.req.method == Method::HEAD;
    }
}
