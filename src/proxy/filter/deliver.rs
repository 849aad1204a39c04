//! A stored object delivered through a delivery chain. Preconditions and Range are answered
//! on the representation being sent: its validators (a chain that changes the length weakens
//! the stored `ETag`, unless its filter names its output with a strong one — the identity a
//! gunzip restores, `cache/identity.rs` — so `If-Match` and `If-Range` compare against what
//! the client gets) and its length. When that length is known (the chain keeps it, or its
//! filter knows it: a stored gzip's decoded length), one range is cut from the filtered
//! bytes with a `Content-Range` over them, and an unsatisfiable one is a 416 over them; when
//! it is unknown until the end, Range is ignored (RFC 9110 §14.2 allows it): a 200 with the
//! whole filtered body, no `Content-Length`, no `Accept-Ranges`. Several ranges are answered
//! as one 200 in either case. A response without a body (HEAD, 304, 412, 416) gets the
//! fields only. A response streamed as it is fetched (the fetching request's own, a
//! waiter's) goes through the chain the same way ([`streamed`]).

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};

use super::{Chain, Output};
use crate::cache::Object;
use crate::http::conditional::{self, Answer};
use crate::proxy::body::ResponseBody;

/// A response from a stored object through `chain` (taken; left empty), honouring the
/// request's preconditions and Range as above. With an empty chain, `deliver::object` as it
/// is.
pub fn object(
    chain: &mut Chain,
    object: Arc<Object>,
    method: &Method,
    request: &HeaderMap,
    head_only: bool,
    now: Instant,
    cache_status: &str,
) -> Response<ResponseBody> {
    if chain.is_empty() {
        return crate::proxy::deliver::object(
            object,
            method,
            request,
            head_only,
            now,
            cache_status,
        );
    }
    let mut chain = std::mem::take(chain);
    let stored = object.headers.map();
    let effect = chain.effect(object.status, stored);
    let output = chain.output(object.status, stored);
    let (length, etag) = sent(&object, effect.changes_length, output.as_ref());
    let answer = answer(&object, method, request, length, etag.as_ref());
    if answer == Answer::PreconditionFailed {
        return crate::proxy::deliver::synth(
            StatusCode::PRECONDITION_FAILED,
            "precondition-failed",
            false,
        );
    }
    // The stored object's response, whole or 304: the answer is this function's.
    let plain = unconditional(request, &answer);
    let mut resp =
        crate::proxy::deliver::object(object.clone(), method, &plain, head_only, now, cache_status);
    if resp.status() == StatusCode::NOT_MODIFIED {
        if let Some(etag) = etag {
            resp.headers_mut().insert(header::ETAG, etag);
        }
        return resp;
    }
    if !matches!(resp.status(), StatusCode::OK) {
        return resp;
    }
    let fields = resp.headers_mut();
    chain.head(effect, fields);
    match (&output, effect.changes_length) {
        (Some(o), true) => {
            fields.insert(header::CONTENT_LENGTH, HeaderValue::from(o.length));
            if let Some(etag) = &o.etag {
                fields.insert(header::ETAG, etag.clone());
            }
        }
        (None, true) => {
            fields.remove(header::ACCEPT_RANGES);
        }
        _ => {}
    }
    with_body(resp, answer, length, chain, object, head_only)
}

/// The representation being sent: its length when known, and its entity tag.
fn sent(
    object: &Object,
    changes_length: bool,
    output: Option<&Output>,
) -> (Option<u64>, Option<HeaderValue>) {
    let stored = object.headers.map();
    let length = match (output, changes_length) {
        (_, false) => Some(object.body_len),
        (Some(o), true) => Some(o.length),
        (None, true) => None,
    };
    let etag = match (output, changes_length) {
        (Some(Output { etag: Some(e), .. }), true) => Some(e.clone()),
        (_, true) => stored.get(header::ETAG).map(weakened),
        (_, false) => stored.get(header::ETAG).cloned(),
    };
    (length, etag)
}

/// The answer to the request's preconditions and Range over the representation being sent
/// (of `length`, when known, and `etag`): Range ignored when the length is unknown, several
/// ranges one whole response.
fn answer(
    object: &Object,
    method: &Method,
    request: &HeaderMap,
    length: Option<u64>,
    etag: Option<&HeaderValue>,
) -> Answer {
    let last_modified = object
        .headers
        .get_str(&header::LAST_MODIFIED)
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok());
    let answer = conditional::evaluate(
        method,
        request,
        etag.and_then(|e| e.to_str().ok()),
        last_modified,
        // Unknown length: Range is ignored (RFC 9110 §14.2), so it is never read.
        length.unwrap_or(0),
    );
    match (answer, length) {
        (Answer::Partial(_) | Answer::Unsatisfiable, None) => Answer::Full,
        (Answer::Partial(ranges), _) if ranges.len() > 1 => Answer::Full,
        (answer, _) => answer,
    }
}

/// The request without the preconditions and Range already answered (a 304 keeps those
/// that make it one), so the stored object's response is whole or 304.
fn unconditional(request: &HeaderMap, answer: &Answer) -> HeaderMap {
    let mut plain = request.clone();
    for name in [
        header::IF_MATCH,
        header::IF_UNMODIFIED_SINCE,
        header::RANGE,
        header::IF_RANGE,
    ] {
        plain.remove(name);
    }
    if *answer != Answer::NotModified {
        plain.remove(header::IF_NONE_MATCH);
        plain.remove(header::IF_MODIFIED_SINCE);
    }
    plain
}

/// The whole (200) response `resp`, its fields filtered, as `answer` says: a 416 or one range
/// over the filtered bytes of `length`, or all of them; no body for HEAD.
fn with_body(
    mut resp: Response<ResponseBody>,
    answer: Answer,
    length: Option<u64>,
    chain: Chain,
    object: Arc<Object>,
    head_only: bool,
) -> Response<ResponseBody> {
    let fields = resp.headers_mut();
    match (answer, length) {
        (Answer::Unsatisfiable, Some(len)) => {
            fields.remove(header::CONTENT_TYPE);
            fields.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{len}"))
                    .unwrap_or(HeaderValue::from_static("bytes */0")),
            );
            fields.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            *resp.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            resp.map(|_| ResponseBody::empty())
        }
        (Answer::Partial(ranges), Some(len)) => {
            let (start, end) = ranges[0];
            fields.insert(
                header::CONTENT_RANGE,
                crate::proxy::deliver::content_range(start, end, len),
            );
            fields.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
            *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
            if head_only {
                return resp;
            }
            let filtered = ResponseBody::filtered(chain.over(ResponseBody::object(object)));
            resp.map(|_| ResponseBody::slice(filtered, start, end - start + 1))
        }
        _ if head_only => resp,
        _ => resp.map(|_| ResponseBody::filtered(chain.over(ResponseBody::object(object)))),
    }
}

/// `W/` before a strong entity tag.
fn weakened(etag: &HeaderValue) -> HeaderValue {
    let mut fields = HeaderMap::new();
    fields.insert(header::ETAG, etag.clone());
    super::weaken_etag(&mut fields);
    fields.remove(header::ETAG).unwrap_or_else(|| etag.clone())
}

/// A streamed response (a fill in progress, a passed body) of `status` through `chain`
/// (taken; left empty): its fields as the chain leaves them, its body filtered, and the length
/// known up front (`content_length`) kept only when the chain keeps it — so the caller cuts a
/// Range from the filtered bytes, or, with no length, sends the whole of them. A status
/// without a representation body passes as it is.
pub(in crate::proxy) fn streamed(
    chain: &mut Chain,
    status: StatusCode,
    fields: &mut HeaderMap,
    body: ResponseBody,
    content_length: Option<u64>,
) -> (ResponseBody, Option<u64>) {
    if chain.is_empty() {
        return (body, content_length);
    }
    let mut chain = std::mem::take(chain);
    if !super::filterable(status, false) {
        return (body, content_length);
    }
    let effect = chain.effect(status, fields);
    let output = chain.output(status, fields);
    chain.head(effect, fields);
    let content_length = match output {
        _ if !effect.changes_length => content_length,
        Some(o) => {
            fields.insert(header::CONTENT_LENGTH, HeaderValue::from(o.length));
            if let Some(etag) = o.etag {
                fields.insert(header::ETAG, etag);
            }
            Some(o.length)
        }
        None => {
            fields.remove(header::ACCEPT_RANGES);
            None
        }
    };
    (ResponseBody::filtered(chain.over(body)), content_length)
}
