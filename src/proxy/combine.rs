//! Partial content on the request path (RFC 9111 §3.3–3.4): a Range answered from stored
//! pieces, a Range forwarded to the backend and its 206 stored as a piece, and a full request
//! that fetches only the bytes the pieces lack and gets the whole representation.
//!
//! When the pieces are used (`decide`, from Lookup once no complete object answered):
//! - a GET with one byte range that a held piece covers → 206 from the cache (a hit);
//! - one that no piece covers → the Range goes to the backend with `If-Range` (the held
//!   validator), and its 206 joins the pieces (`fwd=partial`);
//! - a GET with one byte range and nothing held → the Range goes to the backend and its 206 is
//!   stored as the first piece (`fwd=miss`) — unless the range starts at byte 0 (a player or
//!   viewer starting at the beginning usually reads on: the whole object is fetched and stored
//!   once, as before) and the URL is not marked uncacheable (a whole object too large to
//!   store is never refetched whole for a range);
//! - a GET without Range when the pieces lack exactly one run of bytes (and the object fits
//!   `max_object_size`) → only that run is fetched (`Range` + `If-Range`) and the client gets
//!   the whole representation, held pieces and fetched bytes in order (`fwd=partial`); once
//!   complete the pieces become one stored object.
//!
//! Pieces are never used for HEAD, conditional requests, `If-Range`, several ranges,
//! `Authorization` or request `Cache-Control` (those take the usual path).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::{self, HeaderMap, HeaderValue};
use http::response::Parts;
use http::{Method, StatusCode};

use super::body::ResponseBody;
use super::deliver;
use super::fill::{Fill, PieceTarget};
use super::partial::{RangeSpec, parse_range};
use super::txn::{FetchMode, RangeFetch, Step, Txn};
use crate::backend::BackendBody;
use crate::cache::busy::{BusyHead, BusyObject};
use crate::cache::partial::{self, Partial, Validator};
use crate::cache::policy::{self, Overrides};
use crate::cache::{CacheKey, Object, VarySelection};
use crate::http::fields::has_field;

/// Request fields that make the pieces not apply (the usual path answers them).
const CONDITIONAL: [header::HeaderName; 5] = [
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
];

/// The Lookup decision for partial content (see the module docs); `None`: the usual path.
pub(super) fn decide(txn: &mut Txn, primary: &CacheKey, now: Instant) -> Option<Step> {
    if txn.req.method != Method::GET
        || txn.authorized
        || txn.stale.is_some()
        || txn.request_directives()
        || CONDITIONAL.iter().any(|n| has_field(&txn.req.headers, n))
    {
        return None;
    }
    let mut ranges = txn.req.headers.get_all(header::RANGE).iter();
    let range = match (ranges.next(), ranges.next()) {
        (Some(r), None) => Some(r.clone()),
        (None, _) => None,
        (Some(_), Some(_)) => return None,
    };
    let cache = &txn.proxy.cache;
    let held = cache
        .partial
        .get(primary)
        .filter(|p| p.vary_matches(&txn.req.headers) && p.is_fresh(now))
        .filter(|p| !banned(txn, primary, p));
    match (range, held) {
        (Some(range), Some(held)) => {
            let text = range.to_str().ok()?;
            match parse_range(text, held.length) {
                RangeSpec::Ranges(r) if r.len() == 1 => {
                    let (start, end) = r[0];
                    match held.get(start, end) {
                        Some(bytes) => Some(hit(txn, &held, (start, end), bytes, now)),
                        None => Some(fetch(txn, range, held.validator.as_ref())),
                    }
                }
                RangeSpec::Unsatisfiable => Some(unsatisfiable(txn, &held, now)),
                _ => None,
            }
        }
        (Some(range), None) => {
            let start = single_start(range.to_str().ok()?)?;
            if start == Some(0) && !cache.is_hit_for_miss(primary, now) {
                return None;
            }
            Some(fetch(txn, range, None))
        }
        (None, Some(held)) => {
            let gap = held.only_gap()?;
            if held.length > txn.proxy.max_object_size {
                return None;
            }
            let validator = held.validator.as_ref()?;
            let range = HeaderValue::from_str(&format!("bytes={}-{}", gap.0, gap.1)).ok()?;
            txn.range_fetch = Some(RangeFetch {
                range,
                if_range: Some(validator.if_range()),
            });
            txn.proxy.counters.cache_miss.inc();
            Some(Step::Fetch(FetchMode::Complete(held, gap)))
        }
        (None, None) => None,
    }
}

/// The first byte of a single byte-range (`Some(None)` for a suffix range); `None` when it
/// is not exactly one syntactically valid byte-range.
fn single_start(text: &str) -> Option<Option<u64>> {
    let spec = text.trim().strip_prefix("bytes=")?;
    let (first, last) = spec.trim().split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (first, last) = (first.trim(), last.trim());
    if spec.contains(',') || !(digits(first) || digits(last)) {
        return None;
    }
    if !first.is_empty() && !digits(first) || !last.is_empty() && !digits(last) {
        return None;
    }
    if first.is_empty() {
        return Some(None);
    }
    let a: u64 = first.parse().ok()?;
    if !last.is_empty() && last.parse::<u64>().ok()? < a {
        return None;
    }
    Some(Some(a))
}

/// Whether a ban newer than the held pieces matches the URL and their fields.
fn banned(txn: &Txn, primary: &CacheKey, held: &Partial) -> bool {
    let cache = &txn.proxy.cache;
    if cache.bans.is_empty() {
        return false;
    }
    let probe = Object {
        status: StatusCode::PARTIAL_CONTENT,
        headers: crate::cache::StoredFields::from_map(&held.headers),
        body: crate::cache::Body::Memory(Default::default()),
        body_len: 0,
        vary: None,
        initial_age: held.initial_age.into(),
        ttl: held.ttl.into(),
        stale_ok: false,
        grace: Default::default(),
        stale_if_error: None::<std::time::Duration>.into(),
        keep: Default::default(),
        stored_at: held.oldest,
        state: Default::default(),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: crate::cache::Prefetch::CONFIGURED,
    };
    if cache.bans.check(primary, &probe, Some(&txn.req.headers))
        == crate::cache::ban::BanCheck::Banned
    {
        cache.partial.remove(primary);
        txn.proxy.counters.ban_objects.inc();
        return true;
    }
    false
}

/// A range a held piece covers: 206 from the cache.
fn hit(
    txn: &Txn,
    held: &Partial,
    (start, end): (u64, u64),
    bytes: bytes::Bytes,
    now: Instant,
) -> Step {
    let counters = &txn.proxy.counters;
    counters.cache_hit.inc();
    counters.cache_hit_memory.inc();
    counters.cache_partial_hit.inc();
    let mut headers = held.headers.clone();
    headers.insert(header::AGE, HeaderValue::from(held.age(now).as_secs()));
    headers.insert(
        header::CONTENT_RANGE,
        deliver::content_range(start, end, held.length),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
    let status = format!("shellac; hit; ttl={}", held.remaining_ttl(now).as_secs());
    Step::Deliver(deliver::respond(
        StatusCode::PARTIAL_CONTENT,
        headers,
        ResponseBody::full(bytes),
        &status,
    ))
}

/// A range beyond the held representation's length: 416 from the cache.
fn unsatisfiable(txn: &Txn, held: &Partial, now: Instant) -> Step {
    txn.proxy.counters.cache_hit.inc();
    txn.proxy.counters.cache_partial_hit.inc();
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&format!("bytes */{}", held.length)) {
        headers.insert(header::CONTENT_RANGE, v);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
    let status = format!("shellac; hit; ttl={}", held.remaining_ttl(now).as_secs());
    Step::Deliver(deliver::respond(
        StatusCode::RANGE_NOT_SATISFIABLE,
        headers,
        ResponseBody::empty(),
        &status,
    ))
}

/// The client's Range forwarded to the backend (with `If-Range` when pieces are held).
fn fetch(txn: &mut Txn, range: HeaderValue, validator: Option<&Validator>) -> Step {
    txn.range_fetch = Some(RangeFetch {
        range,
        if_range: validator.map(Validator::if_range),
    });
    txn.proxy.counters.cache_miss.inc();
    Step::Fetch(FetchMode::Range(validator.is_some()))
}

/// When the request was sent, when its answer arrived (wall clock), and when (monotonic).
pub(super) struct Times {
    pub request: SystemTime,
    pub response: SystemTime,
    pub received: Instant,
}

/// A 206 to a Range the cache forwarded (`FetchMode::Range`): streamed to the client as it
/// is, and stored as a piece if it may be. `joined`: pieces were held already (`fwd=partial`).
pub(super) fn ranged(
    txn: &mut Txn,
    parts: Parts,
    body: BackendBody,
    times: Times,
    overrides: &Overrides,
    joined: bool,
) -> Step {
    let fwd = if joined { "partial" } else { "miss" };
    match piece_plan(txn, &parts, &times, overrides) {
        Ok((target, plan, vary)) => {
            let (headers, reader) = start_fill(
                txn,
                parts.status,
                parts.headers,
                plan,
                vary,
                target,
                &times,
                body,
            );
            let len = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok());
            Step::Deliver(deliver::respond(
                StatusCode::PARTIAL_CONTENT,
                headers,
                ResponseBody::busy(reader, len),
                &format!("shellac; fwd={fwd}; stored"),
            ))
        }
        Err(why) => Step::Deliver(deliver::respond(
            parts.status,
            parts.headers,
            ResponseBody::backend(body),
            &format!("shellac; fwd={fwd}; detail={why}"),
        )),
    }
}

/// The backend's answer to the fetch of the one run of bytes the held pieces lacked
/// (`FetchMode::Complete`). A 206 for exactly that run of the same representation: the client
/// gets the whole representation (held pieces, then the fetched bytes as they arrive, then the
/// rest) and the pieces become a stored object. Anything else that is not a full answer: the
/// pieces are dropped and the whole object fetched (`Step::Fetch` again).
pub(super) fn complete(
    txn: &mut Txn,
    (held, gap): (Arc<Partial>, (u64, u64)),
    parts: Parts,
    body: BackendBody,
    times: Times,
    overrides: &Overrides,
) -> Step {
    let same = partial::content_range(&parts.headers) == Some((gap.0, gap.1, held.length))
        && held.validator.is_some()
        && Validator::of(&parts.headers) == held.validator;
    let planned = if same {
        piece_plan(txn, &parts, &times, overrides).ok()
    } else {
        None
    };
    let Some((target, plan, vary)) = planned else {
        drop(body);
        if let Some(primary) = &txn.key {
            txn.proxy.cache.partial.remove(primary);
        }
        txn.range_fetch = None;
        return Step::Fetch(FetchMode::Alone("partial"));
    };
    let (before, after) = held.around(gap);
    let (mut headers, reader) = start_fill(
        txn,
        StatusCode::OK,
        parts.headers,
        plan,
        vary,
        target,
        &times,
        body,
    );
    headers.remove(header::CONTENT_RANGE);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(held.length));
    let gap_len = gap.1 - gap.0 + 1;
    let body = ResponseBody::chain(vec![
        ResponseBody::parts(before),
        ResponseBody::busy(reader, Some(gap_len)),
        ResponseBody::parts(after),
    ]);
    Step::Deliver(deliver::respond(
        StatusCode::OK,
        headers,
        body,
        "shellac; fwd=partial; stored",
    ))
}

/// Whether a 206 may be stored as a piece: a `Content-Range` with the complete length, the
/// storage policy (RFC 9111; a 206 to a Range the cache sent is storable), a size within
/// `max_object_size`. The piece's target, plan and `Vary` selection, or why not (the
/// `Cache-Status` detail).
fn piece_plan(
    txn: &Txn,
    parts: &Parts,
    times: &Times,
    overrides: &Overrides,
) -> Result<(PieceTarget, policy::StorePlan, VarySelection), &'static str> {
    let Some((start, end, length)) = partial::content_range(&parts.headers) else {
        return Err("content-range");
    };
    if end - start + 1 > txn.proxy.max_object_size {
        return Err("too-large");
    }
    let exchange = policy::Exchange {
        partial_content: true,
        ..policy::Exchange::at(times.request, times.response)
    };
    let plan = policy::evaluate_with(
        parts.status,
        &parts.headers,
        &exchange,
        txn.cache_config(),
        overrides,
    )
    .map_err(|reason| reason.as_str())?;
    let vary = plan
        .vary
        .iter()
        .map(|name| (name.clone(), txn.req.headers.get(name).cloned()))
        .collect();
    let target = PieceTarget {
        start,
        length,
        size: end - start + 1,
        validator: Validator::of(&parts.headers),
    };
    Ok((target, plan, vary))
}

/// Starts the fill that stores the piece; the fields to deliver (with `Age`) and a reader of
/// the body as it arrives.
#[allow(clippy::too_many_arguments)]
fn start_fill(
    txn: &Txn,
    status: StatusCode,
    mut headers: HeaderMap,
    plan: policy::StorePlan,
    vary: VarySelection,
    target: PieceTarget,
    times: &Times,
    body: BackendBody,
) -> (HeaderMap, crate::cache::busy::BusyReader) {
    for name in &plan.strip {
        headers.remove(name);
    }
    headers.remove(header::AGE);
    let mut delivered = headers.clone();
    if plan.initial_age.as_secs() > 0 {
        delivered.insert(header::AGE, HeaderValue::from(plan.initial_age.as_secs()));
    }
    let busy = BusyObject::new();
    busy.set_head(BusyHead {
        status,
        headers: delivered.clone(),
        content_length: Some(target.size),
        vary: vary.clone(),
        delivered: Default::default(),
        object: None,
    });
    let reader = busy.reader();
    let primary = txn.key.clone().unwrap_or_else(|| CacheKey::new("", "/"));
    let charge = super::fill::charge(&txn.proxy, &primary, &plan, &headers);
    let fill = Fill {
        status: StatusCode::PARTIAL_CONTENT,
        headers,
        vary,
        plan,
        stored_at: times.received,
        piece: Some(target),
        seen: Default::default(),
        esi: None,
        identity: None,
        charge,
    };
    tokio::spawn(fill.run(txn.proxy.clone(), primary, busy, None, body));
    (delivered, reader)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_byte_ranges() {
        assert_eq!(single_start("bytes=0-99"), Some(Some(0)));
        assert_eq!(single_start("bytes=500-"), Some(Some(500)));
        assert_eq!(single_start("bytes=-5"), Some(None));
        for not in [
            "bytes=1-2,4-5",
            "bytes=5-1",
            "items=1-2",
            "bytes=-",
            "bytes=a-b",
            "bytes=1",
        ] {
            assert_eq!(single_start(not), None, "{not}");
        }
    }
}
