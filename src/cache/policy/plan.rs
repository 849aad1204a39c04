//! What a storage decision reads and says: the exchange it is made for, the plan for
//! storing a response, and the reason one is not stored.

use std::time::{Duration, SystemTime};

use http::header::HeaderName;

use crate::http::cache_control::CacheControl;

/// Why a response was not stored or a request not looked up. `as_str` is the word logs,
/// `Cache-Status` `detail=` and counters use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoCacheReason {
    /// Request method is not GET or HEAD.
    Method,
    /// Response to a request with `Authorization` that does not allow sharing (`public`,
    /// `s-maxage`, `must-revalidate`; RFC 9111 §3.5).
    Authorization,
    /// Request says `Cache-Control: no-store`.
    RequestNoStore,
    /// Response says `no-store`.
    NoStore,
    /// Response says `private`.
    Private,
    /// Response says `no-cache` and has no validator (`ETag`, `Last-Modified`) to revalidate
    /// it with on every use, or `keep` is 0 (with one it is stored, and revalidated each time).
    NoCache,
    /// Response sets a cookie (builtin policy).
    SetCookie,
    /// Status code is not cacheable without explicit freshness, or never cacheable.
    Status,
    /// No explicit freshness, no Last-Modified heuristic and no `default_ttl`.
    NoFreshness,
    /// Already stale when it arrived (e.g. `max-age=0`, an Expires date in the past).
    Expired,
    /// `Vary: *` never matches a later request.
    VaryStar,
    /// Larger than `max_object_size`.
    TooLarge,
    /// The URL was recently uncacheable (hit-for-miss).
    HitForMiss,
    /// A protocol upgrade (WebSocket) request: tunnelled if the backend switches, never cached.
    Upgrade,
    /// An operator rule said `pass`.
    Rule,
    /// The VCL program said `pass`, `hit_for_pass`, or made the response uncacheable.
    Vcl,
    /// A fetch body filter said its output may not be stored (proxy/filter).
    Filter,
    /// The request's `[[site]]` says `cache = false`.
    Site,
}

impl NoCacheReason {
    /// Every reason, for tables of counters keyed by `as_str`.
    pub const ALL: [NoCacheReason; 14] = [
        NoCacheReason::Method,
        NoCacheReason::Authorization,
        NoCacheReason::RequestNoStore,
        NoCacheReason::NoStore,
        NoCacheReason::Private,
        NoCacheReason::NoCache,
        NoCacheReason::SetCookie,
        NoCacheReason::Status,
        NoCacheReason::NoFreshness,
        NoCacheReason::Expired,
        NoCacheReason::VaryStar,
        NoCacheReason::TooLarge,
        NoCacheReason::HitForMiss,
        NoCacheReason::Upgrade,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NoCacheReason::Method => "method",
            NoCacheReason::Authorization => "authorization",
            NoCacheReason::RequestNoStore => "request-no-store",
            NoCacheReason::NoStore => "no-store",
            NoCacheReason::Private => "private",
            NoCacheReason::NoCache => "no-cache",
            NoCacheReason::SetCookie => "set-cookie",
            NoCacheReason::Status => "status",
            NoCacheReason::NoFreshness => "no-freshness",
            NoCacheReason::Expired => "expired",
            NoCacheReason::VaryStar => "vary-star",
            NoCacheReason::TooLarge => "too-large",
            NoCacheReason::HitForMiss => "hit-for-miss",
            NoCacheReason::Upgrade => "upgrade",
            NoCacheReason::Rule => "rule",
            NoCacheReason::Vcl => "vcl",
            NoCacheReason::Filter => "filter",
            NoCacheReason::Site => "site",
        }
    }
}

/// How to store a cacheable response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorePlan {
    /// Freshness lifetime (after clamps).
    pub ttl: Duration,
    /// RFC 9111 §4.2.3 corrected_initial_age.
    pub initial_age: Duration,
    /// Header fields to drop before storing (`no-cache="f"`, `private="f"`).
    pub strip: Vec<HeaderName>,
    /// Request header names the response varies on.
    pub vary: Vec<HeaderName>,
    /// May be served stale (grace, keep) at all: not after must-revalidate, proxy-revalidate
    /// or s-maxage (RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10).
    pub stale_ok: bool,
    /// Stale-while-revalidate window: `stale-while-revalidate=N`, else `cache.grace`.
    pub grace: Duration,
    /// Keep window (`cache.keep` or a rule's).
    pub keep: Duration,
    /// `stale-if-error=N` from the response: stale may also answer backend 5xx this long.
    pub stale_if_error: Option<Duration>,
    /// Refresh-ahead for this object (VCL 2.0 `obj.prefetch`); most follow
    /// `cache.refresh_ahead`.
    pub prefetch: crate::cache::Prefetch,
    /// Kept in the memory tier only, never written to the disk or shared tier (VCL's
    /// `storage.Transient`, `cache.shortlived`).
    pub transient: bool,
    /// The storage it is kept in (`cache/stores.rs`; `0`: `s0`). A transient plan is kept in
    /// `Transient` unless it names a storage of its own.
    pub store: u8,
}

impl StorePlan {
    /// Varnish's `shortlived`: a plan whose freshness left, grace and keep add up to less
    /// than `shortlived` is stored transient (memory only). Zero changes nothing.
    pub fn with_shortlived(mut self, shortlived: Duration) -> StorePlan {
        let left = self.ttl.saturating_sub(self.initial_age);
        if left.saturating_add(self.grace).saturating_add(self.keep) < shortlived {
            self.transient = true;
            if self.store == crate::cache::stores::S0 {
                self.store = crate::cache::stores::TRANSIENT;
            }
        }
        self
    }
}

/// What the exchange, not the response's own fields, tells the storage decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// When the backend request was sent.
    pub request_time: SystemTime,
    /// When the response head arrived.
    pub response_time: SystemTime,
    /// The route's director counts this status as failed (`restart_on` / `restart_unless`):
    /// the response is delivered because nothing better was left, never stored (unless a
    /// rule says `override_origin`).
    pub failed_status: bool,
    /// The request carried `Authorization`: stored only if the response allows sharing
    /// ([`shared_with_authorization`]).
    pub authorization: bool,
    /// A 206 to a Range the cache itself forwarded (`proxy/combine.rs`): storable as a
    /// piece of partial content (RFC 9111 §3.3). Any other 206 is not stored.
    pub partial_content: bool,
}

impl Exchange {
    /// A plain exchange: sent at `request_time`, answered at `response_time`.
    pub fn at(request_time: SystemTime, response_time: SystemTime) -> Exchange {
        Exchange {
            request_time,
            response_time,
            failed_status: false,
            authorization: false,
            partial_content: false,
        }
    }
}

/// Whether a response to a request with `Authorization` may be stored by a shared cache and
/// reused (RFC 9111 §3.5): it says `public`, `s-maxage` or `must-revalidate`.
pub fn shared_with_authorization(cc: &CacheControl) -> bool {
    cc.public || cc.s_maxage.is_some() || cc.must_revalidate
}
