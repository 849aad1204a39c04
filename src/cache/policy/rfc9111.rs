//! RFC 9111's reading of a response, before anyone decides on it: its age on arrival
//! (§4.2.3), its explicit lifetime (§4.2.1) and the heuristic one (§4.2.2), the fields its
//! directives name to drop, its `Vary`. Both storage decisions start from it: the builtin
//! policy with the operator's overrides (`overrides.rs`) and the reading VCL starts from
//! (`varnish.rs`).

use std::time::{Duration, SystemTime};

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName};

use super::plan::Exchange;
use crate::config::CacheConfig;
use crate::http::cache_control::CacheControl;

/// The freshness RFC 9111 reads in a response (§4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// The response's `Date`, else when it arrived.
    pub date: SystemTime,
    /// corrected_initial_age (§4.2.3).
    pub initial_age: Duration,
    /// `s-maxage`, `max-age` or `Expires` (§4.2.1).
    pub explicit: Option<Duration>,
}

/// How a response's age on arrival is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgeReading {
    /// RFC 9111 §4.2.3: the larger of the apparent age (`Date` to arrival) and the `Age` field
    /// plus the time the backend took to answer.
    Rfc9111,
    /// As Varnish reads it for VCL (`RFC2616_Ttl`: the origin time is now less `Age`): the
    /// `Age` field alone. `beresp.ttl` is then the lifetime less `Age` exactly, whatever the
    /// `Date` second or the backend's delay (a response that took over a second, or crossed a
    /// second boundary after its `Date`, read a whole second older than in Varnish).
    Varnish,
}

/// The response's lifetime as RFC 9111 reads it, `cc` being the Cache-Control the cache
/// obeys (possibly a targeted field, which replaces Expires too: RFC 9213 §2.2).
pub fn lifetime(
    headers: &HeaderMap,
    cc: &CacheControl,
    ex: &Exchange,
    reading: AgeReading,
) -> Lifetime {
    let (request_time, response_time) = (ex.request_time, ex.response_time);
    let date = http_date(headers, header::DATE, response_time).unwrap_or(response_time);
    let age_value = age_field(headers).unwrap_or(Duration::ZERO);
    let initial_age = match reading {
        AgeReading::Varnish => age_value,
        AgeReading::Rfc9111 => {
            // `Date` has whole seconds: the fraction of the second the response arrived in is
            // not age. Compared with the exact receive time, a response made and received
            // within one second started at up to ~1 s of age, and a `max-age=1`
            // (micro-caching) object was stale almost at once in about half the cases.
            let apparent_age = whole_seconds(response_time)
                .duration_since(date)
                .unwrap_or(Duration::ZERO);
            let response_delay = response_time
                .duration_since(request_time)
                .unwrap_or(Duration::ZERO);
            apparent_age.max(age_value + response_delay)
        }
    };
    let expires = headers.get(header::EXPIRES).filter(|_| !cc.targeted);
    let explicit = cc.s_maxage.or(cc.max_age).or_else(|| {
        expires.map(|_| {
            // An invalid Expires (e.g. "0") means "already expired" (RFC 9111 §5.3).
            http_date(headers, header::EXPIRES, response_time)
                .and_then(|exp| exp.duration_since(date).ok())
                .unwrap_or(Duration::ZERO)
        })
    });
    Lifetime {
        date,
        initial_age,
        explicit,
    }
}

/// The fields `no-cache="f"` and `private="f"` name: dropped before storing.
pub fn stripped(cc: &CacheControl) -> Vec<HeaderName> {
    let mut strip: Vec<HeaderName> = Vec::new();
    for f in cc.no_cache_fields.iter().chain(&cc.private_fields) {
        if let Ok(name) = HeaderName::from_bytes(f.as_bytes()) {
            strip.push(name);
        }
    }
    strip
}

/// Whether the response may be served stale at all: not after must-revalidate,
/// proxy-revalidate or s-maxage (RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10).
pub fn stale_ok(cc: &CacheControl) -> bool {
    !(cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage.is_some())
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

/// The heuristic lifetime (RFC 9111 §4.2.2): `cache.heuristic_percent` of the time since
/// `Last-Modified`.
pub fn heuristic(
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
/// 304 sends replaces the stored one, but those that describe the stored bytes — framing
/// and `Content-Encoding` — stay (the body is the stored one, in the coding it was stored
/// in). A stored weak `ETag` stays weak: the stored bytes may be a transformation of what
/// the origin names (gzipped by the cache, RFC 9110 §8.8.3), and a weak validator is never
/// wrong where a strong one may be.
pub fn merge_304(stored: HeaderMap, fresh: &HeaderMap) -> HeaderMap {
    let was_weak = stored
        .get(header::ETAG)
        .is_some_and(|v| v.as_bytes().starts_with(b"W/"));
    let mut headers = stored;
    for name in fresh.keys() {
        if name == header::CONTENT_LENGTH
            || name == header::CONTENT_RANGE
            || name == header::CONTENT_ENCODING
        {
            continue;
        }
        headers.remove(name);
        for v in fresh.get_all(name) {
            headers.append(name.clone(), v.clone());
        }
    }
    // The stored identity (`cache/identity.rs`) is named by the origin's new strong ETag.
    if let Some(mut identity) = crate::cache::identity::Identity::of(&headers)
        && identity.etag.is_some()
        && let Some(etag) = fresh.get(header::ETAG)
        && crate::cache::identity::strong(etag.as_bytes())
    {
        identity.etag = Some(etag.clone());
        if let Some(v) = identity.to_value() {
            headers.insert(crate::cache::identity::FIELD, v);
        }
    }
    if was_weak
        && let Some(etag) = headers.get(header::ETAG)
        && !etag.as_bytes().starts_with(b"W/")
    {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(etag.as_bytes());
        if let Ok(v) = http::HeaderValue::from_bytes(&weak) {
            headers.insert(header::ETAG, v);
        }
    }
    headers
}

/// Whether a response carries a validator a conditional request can use (RFC 9110 §8.8).
pub fn has_validator(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ETAG) || headers.contains_key(header::LAST_MODIFIED)
}

/// The largest Age Shellac represents or sends (RFC 9111 §1.2.2: 2^31).
pub const MAX_AGE: u64 = 2_147_483_648;

/// The `Age` field (RFC 9111 §5.1): a single delta-seconds. A list (`Age: 0, 7200`) or several
/// lines are not valid, and a cache reads the first value (issue 32, as the RFC 9111
/// conformance suite expects: `0, 7200` is 0, `7200, 0` is 7200). That value must be a
/// non-negative integer, else the field is ignored — `1a`, `1.5`, `-1`, `0x10` are not read as
/// their numeric prefix.
pub fn age_field(headers: &HeaderMap) -> Option<Duration> {
    let first = headers.get(header::AGE)?.to_str().ok()?;
    let member = first.split(',').next().unwrap_or(first);
    parse_age(member.trim_matches([' ', '\t']))
}

/// delta-seconds; a value too large to represent counts as [`MAX_AGE`] (RFC 9111 §1.2.2),
/// anything that is not digits is ignored.
pub(super) fn parse_age(v: &str) -> Option<Duration> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(
        v.parse::<u64>().unwrap_or(MAX_AGE).min(MAX_AGE),
    ))
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
