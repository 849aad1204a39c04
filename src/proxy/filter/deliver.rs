//! A stored object delivered through a delivery chain. Preconditions are answered first, on
//! the stored validators (`partial::evaluate`, `If-None-Match` compares weakly, so a weakened
//! `ETag` still matches). Range is answered over the representation being sent: when the
//! chain keeps the length, one range is cut from the filtered bytes (positions are the same),
//! with the stored object's `Content-Range`; when it changes the length (unknown until the
//! end), Range is ignored (RFC 9110 §14.2 allows it): a 200 with the whole filtered body, no
//! `Content-Length`, no `Accept-Ranges`. Several ranges are answered as one 200 in either
//! case. A response without a body (HEAD, 304, 412, 416) gets the fields only. A response
//! streamed as it is fetched (the fetching request's own, a waiter's) goes through the chain
//! the same way ([`streamed`]).

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderMap};
use http::{Method, Response, StatusCode};

use super::Chain;
use crate::cache::Object;
use crate::proxy::body::ResponseBody;
use crate::proxy::partial::{self, Answer};

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
    let effect = chain.effect(object.status, object.headers.map());
    let answer = partial::evaluate(method, request, &object.headers, object.body_len);
    let window = match &answer {
        Answer::Partial(ranges) if ranges.len() == 1 && !effect.changes_length => Some(ranges[0]),
        _ => None,
    };
    let ignore_range = match &answer {
        Answer::Partial(ranges) => window.is_none() || ranges.len() > 1,
        Answer::Unsatisfiable => effect.changes_length,
        _ => false,
    };
    let without_range;
    let request = if ignore_range {
        let mut r = request.clone();
        r.remove(header::RANGE);
        r.remove(header::IF_RANGE);
        without_range = r;
        &without_range
    } else {
        request
    };
    let mut resp = crate::proxy::deliver::object(
        object.clone(),
        method,
        request,
        head_only,
        now,
        cache_status,
    );
    match resp.status() {
        StatusCode::OK | StatusCode::PARTIAL_CONTENT => {
            chain.head(effect, resp.headers_mut());
            if effect.changes_length {
                resp.headers_mut().remove(header::ACCEPT_RANGES);
            }
            if head_only {
                return resp;
            }
            let whole = ResponseBody::object(object);
            let filtered = ResponseBody::filtered(chain.over(whole));
            let body = match window {
                Some((start, end)) => ResponseBody::slice(filtered, start, end - start + 1),
                None => filtered,
            };
            resp.map(|_| body)
        }
        StatusCode::NOT_MODIFIED if effect.changes_length => {
            super::weaken_etag(resp.headers_mut());
            resp
        }
        _ => resp,
    }
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
    chain.head(effect, fields);
    let content_length = if effect.changes_length {
        fields.remove(header::ACCEPT_RANGES);
        None
    } else {
        content_length
    };
    (ResponseBody::filtered(chain.over(body)), content_length)
}
