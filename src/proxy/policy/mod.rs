//! The policy seam: the request machine (`fsm.rs`, `lookup.rs`, `judge.rs`, `respond.rs`,
//! `fetch/`) asks "the policy" at each of its steps — recv, lookup, hit, miss, pass, the
//! backend request, the backend response, deliver, synth, error — and never which front-end
//! wrote it. A front-end is one implementation of [`Hooks`]: one hook per step, each with a
//! default that is Shellac's own behaviour, so a front-end writes only the steps it changes.
//! Two exist: `[[rule]]`s (`Rules`, `rules.rs`) and a VCL program (`Vcl`, `vcl/`).
//!
//! A request carries its [`Policy`], chosen when it starts and again once its `[[site]]` is
//! known (`Policy::choose`, `dispatch.rs`; a site's `vcl` file is its own program): the enum
//! names the front-ends once, here, and its methods dispatch each hook with a `match` — no
//! `dyn` call and no allocation on the request path (the fast-hit path does not come here at
//! all).

mod dispatch;
mod rules;
mod vcl;

use std::sync::Arc;
use std::time::Duration;

use http::response::Parts;
use http::{HeaderMap, Method, Response, StatusCode, Uri};

use super::body::ResponseBody;
use super::txn::{FetchMode, Inherited, Step, Txn};
use crate::backend::RequestTimeouts;
use crate::backend::director::Member;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::{Exchange, NoCacheReason, Overrides, StorePlan};
use crate::cache::{CacheKey, Object};
use crate::config::CacheConfig;

/// What the lookup does beyond RFC 9111 (VCL's `req.hash_ignore_vary`,
/// `req.hash_always_miss`, `req.hash_ignore_busy`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LookupFlags {
    /// The variant stored last answers, whatever the request's fields.
    pub ignore_vary: bool,
    /// Fetched and stored anew whatever is cached.
    pub always_miss: bool,
    /// Fetched alone rather than waiting for another request's fetch.
    pub ignore_busy: bool,
}

/// Limits this request puts on how long a stored object counts as fresh and graced, in
/// seconds (VCL's `req.ttl` and `req.grace`); `None`: the object's own.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Limits {
    pub ttl: Option<f64>,
    pub grace: Option<f64>,
}

/// What the policy makes of a response about to be sent.
pub(super) enum Delivery {
    /// Send it (as the policy changed it).
    Send(Response<ResponseBody>),
    /// The policy restarted the request, or answered otherwise: run this step.
    Step(Step),
}

/// The backend request as the policy made it (VCL's `bereq`): what the fetch sends instead of
/// the client's method, URL and fields.
pub(super) struct BackendRequest<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    /// Send no body.
    pub no_body: bool,
    /// A request that fails on a reused connection before any response byte may be tried
    /// once more on a new one.
    pub retry_connect: bool,
    /// Timeouts replacing the backend's own for this request.
    pub timeouts: RequestTimeouts,
}

/// What the policy does when no backend answered.
pub(super) enum ErrorOutcome {
    /// Send the backend request again.
    Retry,
    /// Leave the fetch for this step.
    Step(Step),
    /// Store the answer the policy made as the fetch's response, as if the backend had sent
    /// it (VCL: vcl_backend_error's object with a lifetime, as Varnish inserts it).
    Store(Box<MadeAnswer>),
}

/// What the policy does instead of sending the backend request ([`Hooks::backend_fetch`]).
pub(super) enum Instead {
    /// Leave the fetch for this step.
    Step(Step),
    /// Store the answer the policy made as the fetch's response, as if the backend had sent
    /// it (VCL: vcl_backend_error's object with a lifetime after vcl_backend_fetch's
    /// `return (error(...))`, as Varnish inserts it).
    Made(Box<MadeAnswer>),
}

impl Instead {
    /// The step where nothing is stored (a slice of big media): the made answer delivered.
    pub(super) fn into_step(self) -> Step {
        match self {
            Instead::Step(step) => step,
            Instead::Made(made) => made.instead,
        }
    }
}

/// An answer the policy made to be stored ([`ErrorOutcome::Store`], [`Instead::Made`]).
pub(super) struct MadeAnswer {
    /// Its status, reason phrase (extensions) and fields, with `Content-Length`.
    pub parts: Parts,
    pub body: bytes::Bytes,
    /// How it is stored.
    pub plan: StorePlan,
    /// The same answer delivered where a fetch stores nothing (a slice of big media).
    pub instead: Step,
}

/// The storage decision for a backend response, made once for every front-end: RFC 9111
/// with the operator's overrides, or a plan the policy's program decided from RFC 9111's
/// reading of the response (`cache::policy::freshness`).
pub(super) enum Storage {
    /// RFC 9111 and the builtin policy with these overrides (`cache::policy::evaluate_with`),
    /// applied where the fetch stores (a whole response, a piece, a revalidated copy).
    Evaluate(Overrides),
    /// Store with this plan, or not for this reason; remember the URL as uncacheable this
    /// long (`None`: not at all).
    Decided {
        plan: Result<StorePlan, NoCacheReason>,
        hit_for_miss: Option<Duration>,
    },
}

/// No operator overrides.
static NO_OVERRIDES: Overrides = Overrides {
    ttl: None,
    min_ttl: None,
    max_ttl: None,
    grace: None,
    keep: None,
    override_origin: false,
    rule: None,
    armored: false,
    storage: None,
    store: 0,
};

/// How long the URL of a response that is not stored is remembered as uncacheable
/// (hit-for-miss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Remember {
    /// `cache.hit_for_miss_ttl`, unless the reason is the request's `Authorization`.
    Default,
    /// This long.
    For(Duration),
    /// Not remembered.
    Not,
}

impl Storage {
    /// The storage decision for a response with `status` and `fields` from the exchange
    /// `ex`: how to store it, or why not and how long its URL is remembered as uncacheable.
    pub(super) fn decide(
        self,
        status: StatusCode,
        fields: &HeaderMap,
        ex: &Exchange,
        cfg: &CacheConfig,
    ) -> (Result<StorePlan, NoCacheReason>, Remember) {
        match self {
            Storage::Evaluate(o) => (
                crate::cache::policy::evaluate_with(status, fields, ex, cfg, &o)
                    .map(|p| p.with_shortlived(cfg.shortlived.0)),
                Remember::Default,
            ),
            Storage::Decided { plan, hit_for_miss } => (
                plan.map(|p| p.with_shortlived(cfg.shortlived.0)),
                hit_for_miss.map_or(Remember::Not, Remember::For),
            ),
        }
    }

    /// What [`decide`](Self::decide) stores a response with `status` and `fields` with, or
    /// why it does not (big media learns its slices' lifetimes from it: `slice/`).
    pub(super) fn plan(
        &self,
        status: StatusCode,
        fields: &HeaderMap,
        ex: &Exchange,
        cfg: &CacheConfig,
    ) -> Result<StorePlan, NoCacheReason> {
        match self {
            Storage::Evaluate(o) => crate::cache::policy::evaluate_with(status, fields, ex, cfg, o),
            Storage::Decided { plan, .. } => plan.clone(),
        }
        .map(|p| p.with_shortlived(cfg.shortlived.0))
    }

    /// Whether [`decide`](Self::decide) refuses a response with `status` and `fields`: what
    /// will not be stored is gzipped only for a client that takes gzip (`coding.rs`).
    pub(super) fn refuses(
        &self,
        status: StatusCode,
        fields: &HeaderMap,
        ex: &Exchange,
        cfg: &CacheConfig,
    ) -> bool {
        match self {
            Storage::Evaluate(o) => {
                crate::cache::policy::evaluate_with(status, fields, ex, cfg, o).is_err()
            }
            Storage::Decided { plan, .. } => plan.is_err(),
        }
    }

    /// The operator overrides pieces of partial content are stored with (none for a decided
    /// plan).
    pub(super) fn overrides(&self) -> &Overrides {
        match self {
            Storage::Evaluate(o) => o,
            Storage::Decided { .. } => &NO_OVERRIDES,
        }
    }
}

/// What the policy made of a backend response head.
pub(super) enum ResponseOutcome {
    /// Go on with it, stored as `storage` says; `buffer`: read the whole body before the
    /// response goes out.
    Store { storage: Storage, buffer: bool },
    /// Send the backend request again.
    Retry,
    /// Leave the fetch for this step (restart, synth, abandon).
    Step(Step),
    /// Store the answer the policy made instead of the backend's response (VCL:
    /// vcl_backend_error's object with a lifetime after `return (error)` or past
    /// `max_retries`, as Varnish inserts it); the backend's body is dropped.
    Made(Box<MadeAnswer>),
}

/// One hook per step of the request machine. Every hook but [`Hooks::recv`] and
/// [`Hooks::backend_response`] has Shellac's own behaviour as its default.
pub(super) trait Hooks {
    /// Recv: the request is valid and its key known (nothing read of its body unless
    /// `ReadBody` asked for it). Look it up, pass it, or answer it.
    fn recv(txn: &mut Txn) -> Step;

    /// Whether this request already ran Recv (a restart), so it is not counted again.
    fn restarted(_txn: &Txn) -> bool {
        false
    }

    /// How the lookup treats the stored variants and the busy table.
    fn lookup_flags(_txn: &Txn) -> LookupFlags {
        LookupFlags::default()
    }

    /// Limits on a stored object's freshness and grace for this request.
    fn limits(_txn: &Txn) -> Limits {
        Limits::default()
    }

    /// Whether a stale object within grace may answer now (`leading`: this request leads
    /// the fetch of `key`); false fetches it anew instead.
    fn grace_applies(_txn: &Txn, _key: &CacheKey, _leading: bool) -> bool {
        true
    }

    /// Hit (fresh or within grace): `None` delivers `object`; otherwise the step chosen
    /// instead.
    fn hit(_txn: &mut Txn, _object: &Arc<Object>) -> Option<Step> {
        None
    }

    /// A request that waited for another's fetch is about to follow it (`object`: what that
    /// fetch stores, when [`Hooks::waiters_judge`] said so): `None` follows it.
    fn waiting_hit(_txn: &mut Txn, _object: Option<&Arc<Object>>) -> Option<Step> {
        None
    }

    /// Whether waiters judge the object being fetched (the busy head carries it).
    fn waiters_judge(_txn: &Txn) -> bool {
        false
    }

    /// Miss: this request leads the fetch.
    fn miss(_txn: &mut Txn, guard: LeaderGuard) -> Step {
        Step::Fetch(FetchMode::Miss(guard))
    }

    /// A request answered from slices (`slice/`, big media), before its first slice is had:
    /// `stored` is that slice when the cache holds it (the hit), `None` when it is to be
    /// fetched (the miss). `None` goes on; otherwise the step chosen instead (a pass fetches
    /// the request as the client sent it, Range and all).
    fn slices(_txn: &mut Txn, _stored: Option<&Arc<Object>>) -> Option<Step> {
        None
    }

    /// The URL was recently uncacheable: fetched alone.
    fn hit_for_miss(_txn: &mut Txn) -> Step {
        Step::Fetch(FetchMode::Alone("hit-for-miss"))
    }

    /// Pass: fetched, never stored.
    fn pass(_txn: &mut Txn, reason: NoCacheReason) -> Step {
        Step::Fetch(FetchMode::Pass(reason))
    }

    /// A stored object answers a conditional request: true when the policy answers the
    /// conditionals itself after [`Hooks::deliver`] (the object is delivered whole).
    fn conditionals_after_deliver(_txn: &mut Txn) -> bool {
        false
    }

    /// Before the backend request is sent (`for_cache`: not a pass): `Some` when the policy
    /// does not fetch — a step, or an answer it made to store in the response's place.
    fn backend_fetch(_txn: &mut Txn, _for_cache: bool) -> Option<Instead> {
        None
    }

    /// The backend request the policy made, sent instead of the client's; `None`: the
    /// client's, as Shellac forwards it.
    fn backend_request(_txn: &Txn) -> Option<BackendRequest<'_>> {
        None
    }

    /// Whether Shellac adds `X-Forwarded-For` to the backend request (false: the policy's
    /// program adds it itself).
    fn forwarded_for(_txn: &Txn) -> bool {
        true
    }

    /// The `If-Modified-Since` that revalidates `stale`: its `Last-Modified`.
    fn if_modified_since<'a>(_txn: &Txn, stale: &'a Object) -> Option<&'a str> {
        stale.last_modified()
    }

    /// A director's draw as the policy's dialect made it (`Pick::draw`); `None`: the
    /// director's own.
    fn route_draw(_txn: &Txn, _route: &Member) -> Option<u32> {
        None
    }

    /// Whether a successful unsafe request invalidates what it may have changed when
    /// `invalidation.unsafe_requests_invalidate` is not set (RFC 9111 §4.4).
    fn unsafe_invalidates(_txn: &Txn) -> bool {
        true
    }

    /// The most of the request body Recv needs read first (and may keep); `None`: nothing.
    fn body_to_read(_txn: &Txn) -> Option<u64> {
        None
    }

    /// What a background refresh started by this request takes of the policy's state (the
    /// machine fills in the rest: `Txn::inherited`).
    fn inherit(_txn: &Txn, _into: &mut Inherited) {}

    /// A background refresh's own policy state, from what the request that started it left.
    fn background(_txn: &mut Txn, _from: &Inherited) {}

    /// What the transaction record says of the policy's run.
    fn trace(_txn: &Txn) -> Option<String> {
        None
    }

    /// No backend answered (`status`, `detail`): `None` answers as Shellac does (the error,
    /// or a stale copy).
    fn backend_error(_txn: &mut Txn, _status: StatusCode, _detail: &str) -> Option<ErrorOutcome> {
        None
    }

    /// The stale copy a 304 revalidated was purged meanwhile: `None` fetches it again
    /// unconditionally.
    fn stale_gone(_txn: &mut Txn) -> Option<ErrorOutcome> {
        None
    }

    /// The backend response head (`was_304`: a 304 revalidating the stale copy): the
    /// policy may change it, and decides how it is stored.
    fn backend_response(
        txn: &mut Txn,
        parts: &mut Parts,
        ex: &Exchange,
        mode: &FetchMode,
        was_304: bool,
    ) -> ResponseOutcome;

    /// A response's fields about to be stored.
    fn storing(_txn: &Txn, _headers: &mut HeaderMap) {}

    /// Deliver: every response on its way to the client.
    fn deliver(_txn: &mut Txn, response: Response<ResponseBody>) -> Delivery {
        Delivery::Send(response)
    }

    /// A response the policy makes (`Step::VclSynth`): status and reason.
    fn synth(_txn: &mut Txn, status: u16, _reason: Option<String>) -> Step {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        Step::Synth(status, "vcl-synth")
    }

    /// The policy restarts the request (`Step::Restart`).
    fn restart(_txn: &mut Txn) -> Step {
        Step::Synth(StatusCode::SERVICE_UNAVAILABLE, "restart")
    }
}

/// The backend's own reason phrase (`200 Okay`), when it sent one other than its status's
/// and no longer than [`MAX_BACKEND_REASON`](crate::cache::status_line::MAX_BACKEND_REASON):
/// both front-ends store it with the object (`cache::status_line`) so a hit sends it, as
/// Varnish keeps `obj.reason` (VCL's `beresp.reason` reads it). For a longer one the miss
/// and the hits send the status's own (delivery sends only a stored phrase).
fn backend_reason(parts: &Parts) -> Option<String> {
    let r = parts.extensions.get::<hyper::ext::ReasonPhrase>()?;
    let r = std::str::from_utf8(r.as_bytes()).ok()?;
    (r.len() <= crate::cache::status_line::MAX_BACKEND_REASON).then(|| r.to_string())
}
