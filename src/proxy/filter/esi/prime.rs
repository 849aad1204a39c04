//! An assembled page's head waits for its first bytes: until then an include that fails
//! without `onerror="continue"` can still turn the page into a 503 (`PageFailed`), and the
//! fragments fetched by then shorten the page's `Cache-Control` (RFC 9111 for a composed
//! response: it is fresh no longer than its shortest-lived part). The request machine calls
//! [`prime`] for a response [`needs_prime`] marks, and answers 503 on `Err`.

use std::sync::Arc;

use http::Response;
use http::header::{self, HeaderMap, HeaderValue};
use http_body::Body;
use http_body_util::BodyExt;

use super::assemble::PageFailed;
use super::include::{Freshness, Page, VERDICT_NONE, VERDICT_UNKNOWN, seconds_left};
use crate::proxy::body::ResponseBody;
use std::sync::atomic::Ordering;

/// The mark on a response whose body is an assembled page.
#[derive(Clone)]
pub struct Prime(pub Arc<Page>);

/// Whether `resp` is an assembled page whose first bytes are still to be awaited.
pub fn needs_prime(resp: &Response<ResponseBody>) -> bool {
    resp.extensions().get::<Prime>().is_some()
}

/// Whether the policy must wait for `resp`'s ESI verdict before its deliver step
/// ([`settle`]).
pub fn needs_settle(resp: &Response<ResponseBody>) -> bool {
    resp.extensions()
        .get::<Prime>()
        .is_some_and(|p| p.0.hold.load(Ordering::Relaxed))
}

/// Waits until the parse of a page parsed as it is delivered knows whether it holds ESI
/// (its first element, its first non-white byte not `<`, its end, or `READ_AHEAD` bytes
/// without an answer), then lets the assembly go on: `Ok(true)` for an ESI page. VCL's
/// `obj.can_esi` reads it in vcl_deliver, as Varnish — which fetches an ESI object whole
/// before delivering it — answers there. No include starts while it waits. `Err`: the
/// body failed before an answer (the page's 503, as [`prime`]'s).
pub async fn settle(resp: &mut Response<ResponseBody>) -> Result<bool, PageFailed> {
    let Some(Prime(page)) = resp.extensions().get::<Prime>().cloned() else {
        return Ok(false);
    };
    let known = |page: &Page| page.verdict.load(Ordering::Relaxed) != VERDICT_UNKNOWN;
    let mut early = None;
    let outcome = std::future::poll_fn(|cx| {
        if known(&page) {
            return std::task::Poll::Ready(Ok(()));
        }
        match std::pin::Pin::new(resp.body_mut()).poll_frame(cx) {
            std::task::Poll::Pending if known(&page) => std::task::Poll::Ready(Ok(())),
            std::task::Poll::Pending => std::task::Poll::Pending,
            // The assembly emits nothing while held; a filter that did is kept in front.
            std::task::Poll::Ready(Some(Ok(frame))) => {
                early = frame.into_data().ok();
                std::task::Poll::Ready(Ok(()))
            }
            std::task::Poll::Ready(None) => std::task::Poll::Ready(Ok(())),
            std::task::Poll::Ready(Some(Err(e))) => std::task::Poll::Ready(Err(e)),
        }
    })
    .await;
    page.hold.store(false, Ordering::Relaxed);
    if let Err(e) = outcome {
        tracing::info!(error = %e, "ESI page failed before its first byte");
        return Err(PageFailed);
    }
    if let Some(data) = early {
        let body = std::mem::replace(resp.body_mut(), ResponseBody::empty());
        *resp.body_mut() = ResponseBody::chain(vec![ResponseBody::full(data), body]);
    }
    Ok(page.verdict.load(Ordering::Relaxed) != VERDICT_NONE)
}

/// `resp` with its first chunk read (and put back in front of the rest), its
/// `Cache-Control` shortened to the fragments' known so far; `Err` when the page failed.
/// `off`: the policy turned the assembly off after it was set up (VCL's `resp.do_esi =
/// false` in vcl_deliver): the page's body goes out as it is.
pub async fn prime(
    resp: Response<ResponseBody>,
    off: bool,
) -> Result<Response<ResponseBody>, PageFailed> {
    let (mut parts, mut body) = resp.into_parts();
    let Some(Prime(page)) = parts.extensions.remove::<Prime>() else {
        return Ok(Response::from_parts(parts, body));
    };
    if off {
        page.off.store(true, std::sync::atomic::Ordering::Relaxed);
        return Ok(Response::from_parts(parts, body));
    }
    let first = loop {
        match body.frame().await {
            None => break None,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => break Some(data),
                Err(_) => continue,
            },
            Some(Err(e)) => {
                tracing::info!(error = %e, "ESI page failed before its first byte");
                return Err(PageFailed);
            }
        }
    };
    let known = page.freshness.lock().map(|f| *f).unwrap_or_default();
    compose(&mut parts.headers, known);
    // A page that turned out to hold no ESI, sent identity: its length is its body's.
    if let Ok(Some(len)) = page.length.lock().map(|l| *l)
        && parts.status == http::StatusCode::OK
        && !parts.headers.contains_key(header::CONTENT_ENCODING)
    {
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    let body = match first {
        Some(data) => ResponseBody::chain(vec![ResponseBody::full(data), body]),
        None => ResponseBody::empty(),
    };
    Ok(Response::from_parts(parts, body))
}

/// The page's `Cache-Control` with the fragments' freshness folded in: when a fragment is
/// fresh for less than what the page has left, `max-age` becomes that (and `Age` and
/// `Expires` go, the value being what is left); `private` / `no-store` of a fragment carry
/// over; while some fragment's freshness is unknown (neither stored nor fetched yet), the
/// page is `no-cache`: a cache after Shellac must ask again before reusing it.
pub fn compose(fields: &mut HeaderMap, parts: Freshness) {
    if parts == Freshness::default() {
        return;
    }
    let (cc, page_left) = seconds_left(fields);
    let left = match (page_left, parts.max_age) {
        (Some(p), Some(f)) => Some(p.min(f)),
        (p, f) => p.or(f),
    };
    let shorter = parts
        .max_age
        .is_some_and(|f| page_left.is_none_or(|p| f < p));
    let unknown = parts.unknown > 0;
    let adds_private = parts.private && !cc.private;
    let adds_no_store = parts.no_store && !cc.no_store;
    if !(shorter || unknown || adds_private || adds_no_store) {
        return;
    }
    let mut words = Vec::new();
    if parts.no_store || cc.no_store {
        words.push("no-store".to_string());
    }
    if parts.private || cc.private {
        words.push("private".to_string());
    }
    if unknown || cc.no_cache {
        words.push("no-cache".to_string());
    } else {
        words.push(format!("max-age={}", left.unwrap_or(0)));
    }
    if let Ok(v) = HeaderValue::from_str(&words.join(", ")) {
        fields.insert(header::CACHE_CONTROL, v);
        fields.remove(header::AGE);
        fields.remove(header::EXPIRES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_fresh_no_longer_than_its_shortest_part() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        h.insert(header::AGE, HeaderValue::from_static("100"));
        compose(
            &mut h,
            Freshness {
                max_age: Some(30),
                private: false,
                no_store: false,
                unknown: 0,
            },
        );
        assert_eq!(h[header::CACHE_CONTROL], "max-age=30");
        assert!(h.get(header::AGE).is_none());
        // A longer-lived fragment changes nothing.
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=10"),
        );
        compose(
            &mut h,
            Freshness {
                max_age: Some(60),
                private: false,
                no_store: false,
                unknown: 0,
            },
        );
        assert_eq!(h[header::CACHE_CONTROL], "max-age=10");
        // A private fragment makes the page private.
        compose(
            &mut h,
            Freshness {
                max_age: Some(60),
                private: true,
                no_store: false,
                unknown: 0,
            },
        );
        assert_eq!(h[header::CACHE_CONTROL], "private, max-age=10");
        // A part not known yet: downstream caches must ask again.
        compose(
            &mut h,
            Freshness {
                unknown: 1,
                ..Freshness::default()
            },
        );
        assert_eq!(h[header::CACHE_CONTROL], "private, no-cache");
    }
}
