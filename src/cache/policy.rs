//! RFC 9111 storage and freshness decisions for a shared cache, plus Shellac's builtin policy.
//!
//! Defaults follow the RFC exactly: a response without explicit freshness, a heuristic
//! (Last-Modified) or an operator's opt-in `default_ttl` is not stored.

use std::time::{Duration, SystemTime};

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName};

use crate::config::CacheConfig;
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
}

/// Statuses a cache may store without explicit freshness, with heuristic freshness (RFC 9110
/// §15.1: "heuristically cacheable"). Operator lifetimes (`default_ttl`, a rule's `ttl` /
/// `min_ttl`) apply to these short of 5xx (so not to 501).
pub fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// Operator overrides from policy rules (response phase). All `None`/false: the origin and
/// the builtin policy decide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Fresh for this long from now, whatever the origin said about freshness.
    pub ttl: Option<Duration>,
    /// At least this fresh from now (also when the origin sent no or an expired lifetime).
    pub min_ttl: Option<Duration>,
    /// At most this fresh (replaces `cache.max_ttl`).
    pub max_ttl: Option<Duration>,
    pub grace: Option<Duration>,
    pub keep: Option<Duration>,
    /// Store despite `no-store`, `private`, `no-cache` and non-default statuses.
    pub override_origin: bool,
    /// The last rule that applied, for `Cache-Status` detail.
    pub rule: Option<String>,
    /// Cache deception armor withheld the rules' caching actions ([`Overrides::armor`]).
    pub armored: bool,
}

impl Overrides {
    /// Cache deception armor (`cache::armor`): the rules' caching actions — `ttl`, `min_ttl`,
    /// `override_origin` — apply only if the response's `Content-Type` fits the extension
    /// `path_and_query` claims; otherwise they are withheld (`armored`) and the origin's word
    /// and the builtin policy decide alone. `max_ttl`, `grace` and `keep` only shorten or
    /// shape what may be stored anyway, and stay.
    pub fn armor(&mut self, path_and_query: &str, headers: &HeaderMap) {
        let forcing = self.ttl.is_some() || self.min_ttl.is_some() || self.override_origin;
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if forcing && !super::armor::fits(path_and_query, content_type) {
            self.ttl = None;
            self.min_ttl = None;
            self.override_origin = false;
            self.armored = true;
        }
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

/// Decides whether a backend response may be stored, and for how long, by RFC 9111 and the
/// builtin policy alone.
///
/// `request_time` is when the request was sent, `response_time` when the head arrived.
pub fn evaluate(
    status: StatusCode,
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
    cfg: &CacheConfig,
) -> Result<StorePlan, NoCacheReason> {
    evaluate_with(
        status,
        headers,
        &Exchange::at(request_time, response_time),
        cfg,
        &Overrides::default(),
    )
}

/// [`evaluate`] with what the exchange adds and operator overrides applied.
///
/// A rule's `ttl` / `min_ttl` only changes how long a response the builtin policy would store
/// stays fresh (and may store one that merely lacks freshness or arrived expired); refusals
/// for the status, a failed status, `no-store`, `private` and `no-cache` stand unless the rule
/// says `override_origin`.
pub fn evaluate_with(
    status: StatusCode,
    headers: &HeaderMap,
    ex: &Exchange,
    cfg: &CacheConfig,
    o: &Overrides,
) -> Result<StorePlan, NoCacheReason> {
    let (request_time, response_time) = (ex.request_time, ex.response_time);
    let code = status.as_u16();
    if !(200..600).contains(&code) || (code == 206 && !ex.partial_content) || code == 304 {
        return Err(NoCacheReason::Status);
    }
    if ex.failed_status && !o.override_origin {
        return Err(NoCacheReason::Status);
    }
    let cc = CacheControl::targeted(headers, &cfg.targeted_cache_control);
    if !o.override_origin {
        if cc.no_store {
            return Err(NoCacheReason::NoStore);
        }
        if cc.private {
            return Err(NoCacheReason::Private);
        }
        // no-cache: stored, but reused only after validation with the origin (RFC 9111
        // §5.2.2.4) — worth storing only with a validator to revalidate with.
        if cc.no_cache && !has_validator(headers) {
            return Err(NoCacheReason::NoCache);
        }
        if ex.authorization && !shared_with_authorization(&cc) {
            return Err(NoCacheReason::Authorization);
        }
    }
    let mut strip: Vec<HeaderName> = Vec::new();
    for f in cc.no_cache_fields.iter().chain(&cc.private_fields) {
        if let Ok(name) = HeaderName::from_bytes(f.as_bytes()) {
            strip.push(name);
        }
    }
    if headers.contains_key(header::SET_COOKIE) && !strip.contains(&header::SET_COOKIE) {
        return Err(NoCacheReason::SetCookie);
    }
    let mut vary = Vec::new();
    for v in headers.get_all(header::VARY) {
        let Ok(text) = v.to_str() else {
            return Err(NoCacheReason::VaryStar);
        };
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*" {
                return Err(NoCacheReason::VaryStar);
            }
            match HeaderName::from_bytes(name.as_bytes()) {
                Ok(n) if !vary.contains(&n) => vary.push(n),
                Ok(_) => {}
                Err(_) => return Err(NoCacheReason::VaryStar),
            }
        }
    }

    // RFC 9111 §4.2.3
    let date = http_date(headers, header::DATE, response_time).unwrap_or(response_time);
    // `Date` has whole seconds: the fraction of the second the response arrived in is not
    // age. Compared with the exact receive time, a response made and received within one
    // second started at up to ~1 s of age, and a `max-age=1` (micro-caching) object was
    // stale almost at once in about half the cases.
    let apparent_age = whole_seconds(response_time)
        .duration_since(date)
        .unwrap_or(Duration::ZERO);
    let response_delay = response_time
        .duration_since(request_time)
        .unwrap_or(Duration::ZERO);
    let age_value = age_field(headers).unwrap_or(Duration::ZERO);
    let initial_age = apparent_age.max(age_value + response_delay);

    // A targeted field replaces Cache-Control and Expires alike (RFC 9213 §2.2).
    let expires = headers.get(header::EXPIRES).filter(|_| !cc.targeted);
    let revalidate = cc.no_cache && !o.override_origin;
    let explicit = cc.s_maxage.or(cc.max_age).or_else(|| {
        expires.map(|_| {
            // An invalid Expires (e.g. "0") means "already expired" (RFC 9111 §5.3).
            http_date(headers, header::EXPIRES, response_time)
                .and_then(|exp| exp.duration_since(date).ok())
                .unwrap_or(Duration::ZERO)
        })
    });
    // Without explicit freshness only the heuristically cacheable statuses may be stored
    // (RFC 9111 §3, §4.2.2); only `override_origin` stores others.
    if explicit.is_none() && !heuristically_cacheable(status) && !o.override_origin {
        return Err(NoCacheReason::Status);
    }
    if revalidate {
        // Stale from the start and never served stale (RFC 9111 §4.2.4): every use revalidates
        // (Lookup finds it stale within `keep` and sends its validators). A rule's lifetimes
        // do not apply without `override_origin`.
        let keep = o.keep.unwrap_or(cfg.keep.0);
        if keep.is_zero() {
            return Err(NoCacheReason::NoCache);
        }
        return Ok(StorePlan {
            ttl: Duration::ZERO,
            initial_age,
            strip,
            vary,
            stale_ok: false,
            grace: Duration::ZERO,
            keep,
            stale_if_error: None,
        });
    }
    // Lifetimes the operator chose — a rule's `ttl` / `min_ttl`, `cache.default_ttl` — apply to
    // the heuristically cacheable statuses short of 5xx, unless the rule says
    // `override_origin`: otherwise `min_ttl` for pages would keep a bare 500 error page (or
    // one with an Expires date in the past) for minutes. Any other status keeps exactly the
    // freshness the origin gave it.
    let operator_lifetimes =
        o.override_origin || (heuristically_cacheable(status) && !status.is_server_error());
    let (ttl, min_ttl, default_ttl) = if operator_lifetimes {
        let default_ttl = (!cfg.default_ttl.0.is_zero()).then_some(cfg.default_ttl.0);
        (o.ttl, o.min_ttl, default_ttl)
    } else {
        (None, None, None)
    };
    // Operator lifetimes count from now: they are added to the age already accrued.
    let lifetime = if let Some(ttl) = ttl {
        ttl + initial_age
    } else {
        let origin =
            explicit.or_else(|| heuristic(headers, date, response_time, cfg).or(default_ttl));
        match (origin, min_ttl) {
            (Some(l), Some(min)) => l.max(min + initial_age),
            (None, Some(min)) => min + initial_age,
            (Some(l), None) => l,
            (None, None) => return Err(NoCacheReason::NoFreshness),
        }
    };
    let lifetime = match o.max_ttl.or(cfg.max_ttl.map(|d| d.0)) {
        Some(max) => lifetime.min(max + initial_age),
        None => lifetime,
    };
    if lifetime <= initial_age {
        return Err(NoCacheReason::Expired);
    }
    let stale_ok = !(cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage.is_some());
    Ok(StorePlan {
        ttl: lifetime,
        initial_age,
        strip,
        vary,
        stale_ok,
        grace: o.grace.or(cc.stale_while_revalidate).unwrap_or(cfg.grace.0),
        keep: o.keep.unwrap_or(cfg.keep.0),
        stale_if_error: cc.stale_if_error,
    })
}

/// A backend response's freshness as VCL sees it before `vcl_backend_response` (`beresp.ttl`,
/// `beresp.grace`, `beresp.keep`) and what storing it needs. Unlike [`evaluate_with`] nothing
/// is refused here: `no-store`, `private`, `Set-Cookie` and the rest are the VCL's to judge
/// (the built-in VCL does, as Varnish's does).
#[derive(Clone, Debug, PartialEq)]
pub struct VclFreshness {
    /// Seconds of freshness left: the lifetime (`s-maxage`, `max-age`, `Expires`, else the
    /// heuristic or `cache.default_ttl` for the heuristically cacheable statuses) less the
    /// age; with no lifetime (a status Varnish does not cache) 0 less the age.
    pub ttl: f64,
    pub grace: Duration,
    pub keep: Duration,
    pub initial_age: Duration,
    /// May be served stale at all (not after must-revalidate, proxy-revalidate, s-maxage).
    pub stale_ok: bool,
    pub stale_if_error: Option<Duration>,
    /// `no-cache="f"` / `private="f"`: fields dropped before storing.
    pub strip: Vec<HeaderName>,
}

/// See [`VclFreshness`]. `legacy`: a 2.x program, which follows Varnish 2.1's list of
/// cacheable statuses.
pub fn vcl_freshness(
    status: StatusCode,
    headers: &HeaderMap,
    ex: &Exchange,
    cfg: &CacheConfig,
    legacy: bool,
) -> VclFreshness {
    let (request_time, response_time) = (ex.request_time, ex.response_time);
    let cc = CacheControl::targeted(headers, &cfg.targeted_cache_control);
    let date = http_date(headers, header::DATE, response_time).unwrap_or(response_time);
    let apparent_age = whole_seconds(response_time)
        .duration_since(date)
        .unwrap_or(Duration::ZERO);
    // In whole seconds, as the Age field counts: the few milliseconds a backend takes to
    // answer would otherwise show in `beresp.ttl` (29.999 for `max-age=30`), where Varnish,
    // which counts no delay at all, reads the lifetime less the Age field exactly.
    let response_delay = Duration::from_secs(
        response_time
            .duration_since(request_time)
            .unwrap_or(Duration::ZERO)
            .as_secs(),
    );
    let initial_age =
        apparent_age.max(age_field(headers).unwrap_or(Duration::ZERO) + response_delay);
    let expires = headers.get(header::EXPIRES).filter(|_| !cc.targeted);
    let explicit = cc.s_maxage.or(cc.max_age).or_else(|| {
        expires.map(|_| {
            http_date(headers, header::EXPIRES, response_time)
                .and_then(|exp| exp.duration_since(date).ok())
                .unwrap_or(Duration::ZERO)
        })
    });
    // Varnish's list (RFC 9111 lets a cache decline any status): other statuses get no
    // lifetime even with `max-age`. In 4.x a redirect that may be temporary gets only an
    // explicit one; Varnish 2.1 gave 302 and 307 the default TTL too.
    let code = status.as_u16();
    let storable = if legacy {
        matches!(code, 200 | 203 | 300 | 301 | 302 | 307 | 404 | 410)
    } else {
        matches!(
            code,
            200 | 203 | 204 | 300 | 301 | 302 | 307 | 404 | 410 | 414
        )
    };
    let default_ttl = (!cfg.default_ttl.0.is_zero()).then_some(cfg.default_ttl.0);
    let lifetime = if !storable {
        None
    } else if explicit.is_some() {
        explicit
    } else if code == 302 || code == 307 {
        if legacy { default_ttl } else { None }
    } else if heuristically_cacheable(status) && !status.is_server_error() {
        heuristic(headers, date, response_time, cfg).or(default_ttl)
    } else {
        None
    };
    let lifetime = match (lifetime, cfg.max_ttl.map(|d| d.0)) {
        (Some(l), Some(max)) => Some(l.min(max + initial_age)),
        (l, _) => l,
    };
    // Without a lifetime it reads as Varnish's does: none left, less the age.
    let ttl = lifetime.unwrap_or(Duration::ZERO).as_secs_f64() - initial_age.as_secs_f64();
    let mut strip: Vec<HeaderName> = Vec::new();
    for f in cc.no_cache_fields.iter().chain(&cc.private_fields) {
        if let Ok(name) = HeaderName::from_bytes(f.as_bytes()) {
            strip.push(name);
        }
    }
    VclFreshness {
        ttl,
        // `stale-while-revalidate` counts only for a response with a lifetime, as in Varnish.
        grace: cc
            .stale_while_revalidate
            .filter(|_| lifetime.is_some())
            .unwrap_or(cfg.grace.0),
        keep: cfg.keep.0,
        initial_age,
        stale_ok: !(cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage.is_some()),
        stale_if_error: cc.stale_if_error,
        strip,
    }
}

/// The `Vary` field names of a response; `None` for `Vary: *` (or a field that is not a list
/// of names), which no later request matches.
pub fn vary_names(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut vary = Vec::new();
    for v in headers.get_all(header::VARY) {
        let text = v.to_str().ok()?;
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*" {
                return None;
            }
            let n = HeaderName::from_bytes(name.as_bytes()).ok()?;
            if !vary.contains(&n) {
                vary.push(n);
            }
        }
    }
    Some(vary)
}

/// A stored response's fields with a 304's merged in (RFC 9111 §3.2, §4.3.4): each field the
/// 304 sends replaces the stored one (framing fields excepted: the body is the stored one).
pub fn merge_304(stored: HeaderMap, fresh: &HeaderMap) -> HeaderMap {
    let mut headers = stored;
    for name in fresh.keys() {
        if name == header::CONTENT_LENGTH || name == header::CONTENT_RANGE {
            continue;
        }
        headers.remove(name);
        for v in fresh.get_all(name) {
            headers.append(name.clone(), v.clone());
        }
    }
    headers
}

/// Whether a response carries a validator a conditional request can use (RFC 9110 §8.8).
fn has_validator(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ETAG) || headers.contains_key(header::LAST_MODIFIED)
}

/// The largest Age Shellac represents or sends (RFC 9111 §1.2.2: 2^31).
pub const MAX_AGE: u64 = 2_147_483_648;

/// The `Age` field (RFC 9111 §5.1): a single delta-seconds. A list (`Age: 0, 7200`) or several
/// lines are not valid, and a cache reads the first value (issue 32, as the RFC 9111
/// conformance suite expects: `0, 7200` is 0, `7200, 0` is 7200). That value must be a
/// non-negative integer, else the field is ignored — `1a`, `1.5`, `-1`, `0x10` are not read as
/// their numeric prefix.
fn age_field(headers: &HeaderMap) -> Option<Duration> {
    let first = headers.get(header::AGE)?.to_str().ok()?;
    let member = first.split(',').next().unwrap_or(first);
    parse_age(member.trim_matches([' ', '\t']))
}

/// delta-seconds; a value too large to represent counts as [`MAX_AGE`] (RFC 9111 §1.2.2),
/// anything that is not digits is ignored.
fn parse_age(v: &str) -> Option<Duration> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(
        v.parse::<u64>().unwrap_or(MAX_AGE).min(MAX_AGE),
    ))
}

fn heuristic(
    headers: &HeaderMap,
    date: SystemTime,
    now: SystemTime,
    cfg: &CacheConfig,
) -> Option<Duration> {
    if cfg.heuristic_percent == 0 {
        return None;
    }
    let lm = http_date(headers, header::LAST_MODIFIED, now)?;
    let since = date.duration_since(lm).ok()?;
    let h = since * cfg.heuristic_percent / 100;
    (!h.is_zero()).then_some(h)
}

/// A date field (`crate::http::date`: the three HTTP-date formats, any case). A field given on
/// more than one line is invalid (RFC 9110 §5.3: these fields are not lists), so an `Expires`
/// on two lines is already expired (RFC 9111 §5.3) and a `Last-Modified` on two gives no
/// heuristic freshness.
fn http_date(headers: &HeaderMap, name: HeaderName, now: SystemTime) -> Option<SystemTime> {
    let mut lines = headers.get_all(name).iter();
    let v = lines.next()?.to_str().ok()?;
    if lines.next().is_some() {
        return None;
    }
    crate::http::date::parse(v, now)
}

/// `t` without its fraction of a second.
fn whole_seconds(t: SystemTime) -> SystemTime {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => SystemTime::UNIX_EPOCH + Duration::from_secs(d.as_secs()),
        Err(_) => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn eval(pairs: &[(&str, &str)], status: u16) -> Result<StorePlan, NoCacheReason> {
        eval_with(pairs, status, &CacheConfig::default())
    }

    fn eval_with(
        pairs: &[(&str, &str)],
        status: u16,
        cfg: &CacheConfig,
    ) -> Result<StorePlan, NoCacheReason> {
        let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        evaluate(StatusCode::from_u16(status).unwrap(), &h, now, now, cfg)
    }

    const DATE: (&str, &str) = ("date", "Sun, 22 Nov 2026 00:00:00 GMT");

    #[test]
    fn explicit_freshness_order() {
        let p = eval(&[DATE, ("cache-control", "max-age=60, s-maxage=30")], 200).unwrap();
        assert_eq!(p.ttl, Duration::from_secs(30));
        let p = eval(
            &[
                DATE,
                ("cache-control", "max-age=60"),
                ("expires", "Sun, 22 Nov 2026 01:00:00 GMT"),
            ],
            200,
        )
        .unwrap();
        assert_eq!(p.ttl, Duration::from_secs(60));
        let p = eval(&[DATE, ("expires", "Sun, 22 Nov 2026 01:00:00 GMT")], 200).unwrap();
        assert_eq!(p.ttl, Duration::from_secs(3600));
        assert_eq!(
            eval(&[DATE, ("expires", "0")], 200),
            Err(NoCacheReason::Expired)
        );
        assert_eq!(
            eval(&[DATE, ("cache-control", "max-age=0")], 200),
            Err(NoCacheReason::Expired)
        );
    }

    #[test]
    fn heuristic_and_default_ttl() {
        let p = eval(
            &[DATE, ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT")],
            200,
        )
        .unwrap();
        assert_eq!(p.ttl, Duration::from_secs(3600), "10% of 10 hours");
        assert_eq!(eval(&[DATE], 200), Err(NoCacheReason::NoFreshness));
        let cfg = CacheConfig {
            default_ttl: crate::config::units::Dur(Duration::from_secs(5)),
            ..Default::default()
        };
        assert_eq!(
            eval_with(&[DATE], 200, &cfg).unwrap().ttl,
            Duration::from_secs(5)
        );
        assert_eq!(eval_with(&[DATE], 302, &cfg), Err(NoCacheReason::Status));
        assert_eq!(
            eval(
                &[DATE, ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT")],
                500
            ),
            Err(NoCacheReason::Status)
        );
        assert!(
            eval(&[DATE, ("cache-control", "max-age=5")], 500).is_ok(),
            "explicit freshness allows any final status"
        );
    }

    /// Issue 23: every status RFC 9110 §15.1 calls heuristically cacheable gets heuristic
    /// freshness (414 and 501 were missing); operator lifetimes stop short of 5xx.
    #[test]
    fn heuristic_freshness_for_every_heuristically_cacheable_status() {
        let lm = ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT");
        for code in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
            let p = eval(&[DATE, lm], code).unwrap_or_else(|e| panic!("{code}: {e:?}"));
            assert_eq!(p.ttl, Duration::from_secs(3600), "{code}");
        }
        for code in [201, 202, 302, 303, 307, 400, 403, 500, 502, 503] {
            assert_eq!(
                eval(&[DATE, lm], code),
                Err(NoCacheReason::Status),
                "{code}"
            );
        }
        let cfg = CacheConfig {
            default_ttl: crate::config::units::Dur(Duration::from_secs(5)),
            ..Default::default()
        };
        assert!(eval_with(&[DATE], 414, &cfg).is_ok());
        assert_eq!(
            eval_with(&[DATE], 501, &cfg),
            Err(NoCacheReason::NoFreshness),
            "default_ttl never keeps a server error"
        );
    }

    /// Issue 23: the obsolete date formats (RFC 850, asctime) and any letter case are read, not
    /// taken for an invalid (already expired) Expires.
    #[test]
    fn expires_in_obsolete_formats() {
        for expires in [
            "Sunday, 22-Nov-26 01:00:00 GMT",
            "Sun Nov 22 01:00:00 2026",
            "sun, 22 nov 2026 01:00:00 gmt",
        ] {
            let p = eval(&[DATE, ("expires", expires)], 200)
                .unwrap_or_else(|e| panic!("{expires}: {e:?}"));
            assert_eq!(p.ttl, Duration::from_secs(3600), "{expires}");
        }
        let p = eval(
            &[
                ("date", "sunday, 22-nov-26 00:00:00 GMT"),
                ("last-modified", "Sat Nov 21 14:00:00 2026"),
            ],
            200,
        )
        .unwrap();
        assert_eq!(
            p.ttl,
            Duration::from_secs(3600),
            "Date and Last-Modified too"
        );
    }

    /// Issue 32: an Expires off the grammar (other zone, two-digit IMF year, missing comma,
    /// doubled spaces, dashes, periods, one-digit hour) or on two lines is already expired; an
    /// invalid or doubled Last-Modified gives no heuristic; an invalid Date is the receipt time.
    #[test]
    fn invalid_expires_means_expired() {
        for expires in [
            "Sun, 22 Nov 2026 01:00:00 UTC",
            "Sun, 22 Nov 2026 01:00:00 AEST",
            "Sun, 22 Nov 26 01:00:00 GMT",
            "Sun 22 Nov 2026 01:00:00 GMT",
            "Sun, 22  Nov 2026 01:00:00 GMT",
            "Sun, 22-Nov-2026 01:00:00 GMT",
            "Sun, 22 Nov 2026 01.00.00 GMT",
            "Sun, 22 Nov 2026 1:00:00 GMT",
        ] {
            assert_eq!(
                eval(&[DATE, ("expires", expires)], 200),
                Err(NoCacheReason::Expired),
                "{expires}"
            );
        }
        let two = ("expires", "Sun, 22 Nov 2026 01:00:00 GMT");
        assert_eq!(
            eval(&[DATE, two, two], 200),
            Err(NoCacheReason::Expired),
            "two Expires lines"
        );
        for lm in [
            &[("last-modified", "Sat, 21 Nov 2026 14:00:00 UTC")][..],
            &[("last-modified", "Sat, 21 Nov 2026 4:00:00 GMT")][..],
            &[
                ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT"),
                ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT"),
            ][..],
        ] {
            let mut pairs = vec![DATE];
            pairs.extend_from_slice(lm);
            assert_eq!(eval(&pairs, 200), Err(NoCacheReason::NoFreshness), "{lm:?}");
        }
        // An invalid Date is no Date: the receipt time stands in, so Expires − Date is 1 h.
        let p = eval(
            &[
                ("date", "Sun, 22 Nov 2026 00:00:00 UTC"),
                ("expires", "Sun, 22 Nov 2026 01:00:00 GMT"),
            ],
            200,
        )
        .unwrap();
        assert_eq!(p.ttl, Duration::from_secs(3600));
    }

    /// RFC 9213 §2.2: a valid targeted field replaces Cache-Control *and* Expires; a member of
    /// the wrong type is ignored, not read as 0 (which would be "already stale").
    #[test]
    fn targeted_field_replaces_expires_and_ignores_wrong_types() {
        let expires = ("expires", "Sun, 22 Nov 2026 01:00:00 GMT");
        assert_eq!(
            eval(&[DATE, expires, ("cdn-cache-control", "public")], 200),
            Err(NoCacheReason::NoFreshness)
        );
        assert_eq!(
            eval(&[DATE, expires, ("cdn-cache-control", "max-age=60")], 200)
                .unwrap()
                .ttl,
            Duration::from_secs(60)
        );
        assert_eq!(
            eval(&[DATE, ("cdn-cache-control", "max-age=3600.0")], 200),
            Err(NoCacheReason::NoFreshness),
            "ignored, so no explicit lifetime at all"
        );
        assert_eq!(
            eval(
                &[
                    DATE,
                    ("cache-control", "max-age=60"),
                    ("cdn-cache-control", "Max-Age=3600")
                ],
                200
            )
            .unwrap()
            .ttl,
            Duration::from_secs(60),
            "not a Dictionary: Cache-Control counts"
        );
    }

    #[test]
    fn max_ttl_clamps() {
        let cfg = CacheConfig {
            max_ttl: Some(crate::config::units::Dur(Duration::from_secs(10))),
            ..Default::default()
        };
        assert_eq!(
            eval_with(&[DATE, ("cache-control", "max-age=600")], 200, &cfg)
                .unwrap()
                .ttl,
            Duration::from_secs(10)
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(
            eval(&[("cache-control", "no-store, max-age=60")], 200),
            Err(NoCacheReason::NoStore)
        );
        assert_eq!(
            eval(&[("cache-control", "private, max-age=60")], 200),
            Err(NoCacheReason::Private)
        );
        assert_eq!(
            eval(&[("cache-control", "no-cache, max-age=60")], 200),
            Err(NoCacheReason::NoCache),
            "no validator to revalidate with"
        );
        assert_eq!(
            eval(
                &[("cache-control", "max-age=60"), ("set-cookie", "a=b")],
                200
            ),
            Err(NoCacheReason::SetCookie)
        );
        assert_eq!(
            eval(&[("cache-control", "max-age=60"), ("vary", "*")], 200),
            Err(NoCacheReason::VaryStar)
        );
        assert_eq!(
            eval(&[("cache-control", "max-age=60")], 206),
            Err(NoCacheReason::Status)
        );
        let p = eval(
            &[
                ("cache-control", "max-age=60, no-cache=\"Set-Cookie\""),
                ("set-cookie", "a=b"),
            ],
            200,
        )
        .unwrap();
        assert_eq!(p.strip, vec![header::SET_COOKIE]);
    }

    /// RFC 9111 §3.5: a response to a request with Authorization is stored only with
    /// `public`, `s-maxage` or `must-revalidate`.
    #[test]
    fn authorization_needs_leave_to_share() {
        let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
        let ex = Exchange {
            authorization: true,
            ..Exchange::at(now, now)
        };
        let run = |cc: &str, o: &Overrides| {
            let mut h = HeaderMap::new();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_str(cc).unwrap());
            evaluate_with(StatusCode::OK, &h, &ex, &CacheConfig::default(), o)
        };
        let none = Overrides::default();
        assert_eq!(run("max-age=60", &none), Err(NoCacheReason::Authorization));
        for cc in [
            "public, max-age=60",
            "s-maxage=60",
            "max-age=60, must-revalidate",
        ] {
            assert!(run(cc, &none).is_ok(), "{cc}");
        }
        let force = Overrides {
            override_origin: true,
            ..Default::default()
        };
        assert!(run("max-age=60", &force).is_ok(), "override_origin");
    }

    /// Issue 23 (RFC 9111 §5.2.2.4): a `no-cache` response with a validator is stored, stale
    /// from the start and never servable stale, so every use revalidates.
    #[test]
    fn no_cache_is_stored_for_revalidation() {
        for validator in [
            ("etag", "\"v1\""),
            ("last-modified", "Sat, 21 Nov 2026 14:00:00 GMT"),
        ] {
            let p = eval(
                &[DATE, ("cache-control", "no-cache, max-age=600"), validator],
                200,
            )
            .unwrap_or_else(|e| panic!("{validator:?}: {e:?}"));
            assert_eq!(p.ttl, Duration::ZERO);
            assert!(!p.stale_ok);
            assert_eq!(p.grace, Duration::ZERO);
            assert_eq!(p.keep, Duration::from_secs(3600));
        }
        let etag = ("etag", "\"v1\"");
        assert!(eval(&[DATE, ("cache-control", "no-cache"), etag], 200).is_ok());
        assert_eq!(
            eval(&[DATE, ("cache-control", "no-cache"), etag], 500),
            Err(NoCacheReason::Status)
        );
        let cfg = CacheConfig {
            keep: crate::config::units::Dur(Duration::ZERO),
            ..Default::default()
        };
        assert_eq!(
            eval_with(&[DATE, ("cache-control", "no-cache"), etag], 200, &cfg),
            Err(NoCacheReason::NoCache),
            "nothing to keep it for"
        );
    }

    #[test]
    fn stale_windows() {
        let p = eval(
            &[
                DATE,
                (
                    "cache-control",
                    "max-age=60, stale-while-revalidate=30, stale-if-error=300",
                ),
            ],
            200,
        )
        .unwrap();
        assert_eq!(p.grace, Duration::from_secs(30));
        assert_eq!(p.stale_if_error, Some(Duration::from_secs(300)));
        assert!(p.stale_ok);
        let p = eval(
            &[DATE, ("cache-control", "max-age=60, must-revalidate")],
            200,
        )
        .unwrap();
        assert!(!p.stale_ok);
        assert_eq!(
            p.grace,
            Duration::ZERO,
            "RFC default: no stale serving without permission"
        );
    }

    #[test]
    fn operator_overrides() {
        let o = |ttl: Option<u64>, min: Option<u64>, force: bool| Overrides {
            ttl: ttl.map(Duration::from_secs),
            min_ttl: min.map(Duration::from_secs),
            override_origin: force,
            ..Default::default()
        };
        let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
        let run = |pairs: &[(&str, &str)], ov: &Overrides| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    http::HeaderValue::from_str(v).unwrap(),
                );
            }
            evaluate_with(
                StatusCode::OK,
                &h,
                &Exchange::at(now, now),
                &CacheConfig::default(),
                ov,
            )
        };
        // Static files: 1 h whatever the origin says (with override_origin).
        assert_eq!(
            run(&[("cache-control", "no-store")], &o(Some(3600), None, true))
                .unwrap()
                .ttl,
            Duration::from_secs(3600)
        );
        assert_eq!(
            run(
                &[("cache-control", "no-store")],
                &o(Some(3600), None, false)
            ),
            Err(NoCacheReason::NoStore),
            "ttl alone never overrides no-store"
        );
        // Minimum TTL for pages with an Expires in the past.
        assert_eq!(
            run(
                &[DATE, ("expires", "Sat, 21 Nov 2026 00:00:00 GMT")],
                &o(None, Some(120), false)
            )
            .unwrap()
            .ttl,
            Duration::from_secs(120)
        );
        assert_eq!(
            run(
                &[DATE, ("cache-control", "max-age=600")],
                &o(None, Some(120), false)
            )
            .unwrap()
            .ttl,
            Duration::from_secs(600)
        );
        assert_eq!(
            run(&[("cache-control", "private")], &o(None, Some(120), false)),
            Err(NoCacheReason::Private)
        );
        // Set-Cookie is never overridden by ttl (strip_set_cookie removes it first).
        assert_eq!(
            run(&[("set-cookie", "a=b")], &o(Some(60), None, true)),
            Err(NoCacheReason::SetCookie)
        );
    }

    /// Issue 23, defect 1: a rule's `ttl` / `min_ttl` without `override_origin` stored a bare
    /// 500 (and a restart's final 503) that the builtin policy refuses.
    #[test]
    fn rule_lifetimes_never_make_an_error_cacheable() {
        let now = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
        let run = |status: u16, pairs: &[(&str, &str)], ex: Exchange, o: &Overrides| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            let status = StatusCode::from_u16(status).unwrap();
            evaluate_with(status, &h, &ex, &CacheConfig::default(), o)
        };
        let plain = Exchange::at(now, now);
        let min = Overrides {
            min_ttl: Some(Duration::from_secs(120)),
            ..Default::default()
        };
        let ttl = Overrides {
            ttl: Some(Duration::from_secs(3600)),
            ..Default::default()
        };
        for o in [&min, &ttl] {
            assert_eq!(run(500, &[DATE], plain, o), Err(NoCacheReason::Status));
            assert_eq!(
                run(
                    503,
                    &[DATE, ("expires", "Sat, 21 Nov 2026 00:00:00 GMT")],
                    plain,
                    o
                ),
                Err(NoCacheReason::Expired),
                "an explicit lifetime in the past is not lengthened for an error"
            );
            assert_eq!(
                run(500, &[DATE, ("cache-control", "max-age=60")], plain, o)
                    .unwrap()
                    .ttl,
                Duration::from_secs(60),
                "the origin's own lifetime for a 500, not the rule's"
            );
            // Heuristically cacheable statuses get the rule's lifetime.
            assert!(run(200, &[DATE], plain, o).is_ok());
            assert!(run(404, &[DATE], plain, o).is_ok());
        }
        // The director marks the status failed: never stored, whatever its freshness.
        let failed = Exchange {
            failed_status: true,
            ..plain
        };
        let fresh503 = [DATE, ("cache-control", "max-age=60")];
        assert!(run(503, &fresh503, plain, &Overrides::default()).is_ok());
        assert_eq!(
            run(503, &fresh503, failed, &Overrides::default()),
            Err(NoCacheReason::Status)
        );
        assert_eq!(
            run(200, &fresh503, failed, &min),
            Err(NoCacheReason::Status)
        );
        // Only override_origin stores such a status.
        let force = Overrides {
            ttl: Some(Duration::from_secs(3600)),
            override_origin: true,
            ..Default::default()
        };
        assert_eq!(
            run(500, &[DATE], plain, &force).unwrap().ttl,
            Duration::from_secs(3600)
        );
        assert!(run(503, &fresh503, failed, &force).is_ok());
    }

    #[test]
    fn age_overflow_and_garbage() {
        assert_eq!(
            parse_age("99999999999999999999"),
            Some(Duration::from_secs(MAX_AGE))
        );
        assert_eq!(parse_age("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_age("-1"), None);
        assert_eq!(parse_age("1.5"), None);
        assert_eq!(parse_age("1a"), None);
        assert_eq!(parse_age("+1"), None);
        assert_eq!(parse_age(""), None);
        assert_eq!(
            eval(
                &[
                    DATE,
                    ("cache-control", "max-age=60"),
                    ("age", "99999999999999999999")
                ],
                200
            ),
            Err(NoCacheReason::Expired)
        );
    }

    /// Issue 23: an `Age` that is not a non-negative integer is ignored as a whole (never read
    /// as its numeric prefix). Issue 32: of a list or several lines, the first value counts.
    #[test]
    fn age_list_or_lines_use_the_first_value() {
        let age = |lines: &[&str]| {
            let mut h = HeaderMap::new();
            for l in lines {
                h.append(header::AGE, HeaderValue::from_str(l).unwrap());
            }
            age_field(&h).map(|d| d.as_secs())
        };
        for bad in [
            "1a", "1.5", "7200.0", "-7200", "abc", "a7200", "0x10", "", "1 2", "abc, 0",
        ] {
            assert_eq!(age(&[bad]), None, "{bad:?}");
        }
        assert_eq!(age(&[" 10 "]), Some(10));
        assert_eq!(age(&["0, 0"]), Some(0));
        assert_eq!(age(&["0, 7200"]), Some(0), "a list: the first value");
        assert_eq!(age(&["7200, 0"]), Some(7200));
        assert_eq!(age(&["0,7200"]), Some(0));
        assert_eq!(age(&["0", "7200"]), Some(0), "two lines: the first");
        assert_eq!(age(&["7200", "0"]), Some(7200));
        assert_eq!(age(&[]), None);
        // In the freshness decision: a garbage Age is no age at all.
        let p = eval(
            &[DATE, ("cache-control", "max-age=60"), ("age", "59a")],
            200,
        )
        .unwrap();
        assert_eq!(p.initial_age, Duration::ZERO);
        assert!(
            eval(
                &[DATE, ("cache-control", "max-age=60"), ("age", "0, 60")],
                200
            )
            .is_ok()
        );
        assert_eq!(
            eval(
                &[DATE, ("cache-control", "max-age=60"), ("age", "60, 0")],
                200
            ),
            Err(NoCacheReason::Expired)
        );
    }

    /// Received 0.999 s into the second its `Date` names: no age yet (the fraction is the
    /// date's resolution); a second later, one second.
    #[test]
    fn the_fraction_of_the_dates_second_is_not_age() {
        let date = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
        let mut h = HeaderMap::new();
        h.insert(
            header::DATE,
            HeaderValue::from_static("Sun, 22 Nov 2026 00:00:00 GMT"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=1"));
        let cfg = CacheConfig::default();
        let at = |ms| date + Duration::from_millis(ms);
        let p = evaluate(StatusCode::OK, &h, at(990), at(999), &cfg).unwrap();
        assert_eq!(
            p.initial_age,
            Duration::from_millis(9),
            "only the response delay"
        );
        let p = evaluate(StatusCode::OK, &h, at(1500), at(1500), &cfg);
        assert_eq!(p.err(), Some(NoCacheReason::Expired), "a whole second old");
    }

    #[test]
    fn age_is_corrected() {
        let p = eval(&[DATE, ("cache-control", "max-age=60"), ("age", "20")], 200).unwrap();
        assert_eq!(p.initial_age, Duration::from_secs(20));
        assert_eq!(
            eval(&[DATE, ("cache-control", "max-age=60"), ("age", "60")], 200),
            Err(NoCacheReason::Expired)
        );
    }

    /// What VCL reads as `beresp.ttl` and `beresp.grace` matches Varnish (varnishtest b00043):
    /// the lifetime less the Age field exactly (a backend's few milliseconds do not show), a
    /// status Varnish does not cache has no lifetime and no `stale-while-revalidate` grace.
    #[test]
    fn vcl_freshness_reads_as_varnish_does() {
        let cfg = CacheConfig::default();
        let sent = httpdate::parse_http_date("Sun, 22 Nov 2026 00:00:00 GMT").unwrap();
        let ex = Exchange {
            request_time: sent,
            response_time: sent + Duration::from_millis(3),
            failed_status: false,
            authorization: false,
            partial_content: false,
        };
        let fresh = |pairs: &[(&str, &str)], status: u16| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            vcl_freshness(StatusCode::from_u16(status).unwrap(), &h, &ex, &cfg, false)
        };
        let swr = ("cache-control", "max-age=30, stale-while-revalidate=30");
        let f = fresh(&[swr], 200);
        assert_eq!((f.ttl, f.grace), (30.0, Duration::from_secs(30)));
        let f = fresh(&[swr, ("age", "40")], 200);
        assert_eq!((f.ttl, f.grace), (-10.0, Duration::from_secs(30)));
        let f = fresh(&[swr], 500);
        assert_eq!((f.ttl, f.grace), (0.0, cfg.grace.0));
        let f = fresh(&[("cache-control", "max-age=30")], 307);
        assert_eq!(f.ttl, 30.0);
        assert_eq!(fresh(&[], 307).ttl, 0.0);
        // Varnish 2.1 gave a 302 the default TTL (varnishtest 2.1.5/b00015), not a 204.
        let cfg = CacheConfig {
            default_ttl: crate::config::units::Dur(Duration::from_secs(120)),
            ..CacheConfig::default()
        };
        let h = HeaderMap::new();
        let found = StatusCode::FOUND;
        assert_eq!(vcl_freshness(found, &h, &ex, &cfg, true).ttl, 120.0);
        assert_eq!(vcl_freshness(found, &h, &ex, &cfg, false).ttl, 0.0);
        let no_content = StatusCode::NO_CONTENT;
        assert_eq!(vcl_freshness(no_content, &h, &ex, &cfg, true).ttl, 0.0);
        assert_eq!(vcl_freshness(no_content, &h, &ex, &cfg, false).ttl, 120.0);
    }

    #[test]
    fn every_no_cache_reason_has_a_pass_reason_counter() {
        use crate::stats::{Counters, PASS_REASONS};
        for r in NoCacheReason::ALL {
            assert!(
                PASS_REASONS.iter().any(|(w, _, _)| *w == r.as_str()),
                "{} missing from PASS_REASONS",
                r.as_str()
            );
        }
        let c = Counters::default();
        c.pass_reason.inc("no-store");
        c.pass_reason.inc("something new");
        let snap: Vec<_> = c.pass_reason.snapshot().collect();
        assert!(snap.contains(&("no-store", "pass_reason_no_store", 1)));
        assert!(snap.contains(&("other", "pass_reason_other", 1)));
    }
}
