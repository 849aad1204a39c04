//! A passed request's response: streamed to the client as it is (a protocol switch joined by
//! the server), and, for a successful unsafe request, what it may have changed invalidated
//! here and across the fleet (RFC 9111 §4.4).

use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderValue};
use http::response::Parts;
use http::{Method, StatusCode};

use super::super::body::ResponseBody;
use super::super::txn::{Step, Txn};
use crate::backend::BackendBody;
use crate::cache::CacheKey;
use crate::cache::policy::NoCacheReason;
use crate::cache::shared::SharedTier;
use crate::cache::shared::feed::{self, Invalidation};

/// A passed request's response, streamed as is; a successful (2xx/3xx) unsafe request
/// invalidates what it may have changed (RFC 9111 §4.4).
pub(super) async fn pass(
    txn: &mut Txn,
    reason: NoCacheReason,
    parts: Parts,
    body: BackendBody,
) -> Step {
    // RFC 9111 §4.4, unless the configuration or the policy says otherwise (VCL: only when
    // the configuration asks).
    let invalidates = txn
        .proxy
        .config
        .invalidation
        .unsafe_requests_invalidate
        .unwrap_or_else(|| txn.policy.unsafe_invalidates(txn));
    if invalidates
        && !is_safe(&txn.req.method)
        && (parts.status.is_success() || parts.status.is_redirection())
    {
        let urls = invalidate(txn, &parts.headers);
        if let Some(shared) = txn.proxy.cache.shared.clone() {
            invalidate_fleet(shared, urls).await;
        }
    }
    stream(txn, reason, parts, body)
}

/// Whether `method` is safe (RFC 9110 §9.2.1: GET, HEAD, OPTIONS, TRACE). Every other method
/// — POST, PUT, DELETE, PATCH and any extension method (`M-SEARCH`, WebDAV's `MKCOL`, ...) —
/// may change the resource: Shellac cannot know what an unknown method does, so it assumes
/// the worst.
fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// The passed response, streamed to the client.
fn stream(txn: &mut Txn, reason: NoCacheReason, parts: Parts, body: BackendBody) -> Step {
    let fwd = if reason == NoCacheReason::Method {
        "method"
    } else {
        "request"
    };
    let status = format!("shellac; fwd={fwd}; detail={}", reason.as_str());
    // ESI on for the passed response (VCL `beresp.do_esi` after a pass): the page is
    // assembled as it streams, as a fetched one is (`filter/esi/`).
    if !txn.head_only && parts.headers.contains_key(super::super::filter::esi::FIELD) {
        let body = super::super::filter::fetched(body, std::mem::take(&mut txn.filters.fetch));
        let resp = txn.stream_response(parts.status, parts.headers, body, None, &status);
        return Step::Deliver(resp);
    }
    let body = if txn.head_only {
        ResponseBody::empty()
    } else {
        super::super::filter::fetched(body, std::mem::take(&mut txn.filters.fetch))
    };
    // A seek (an flv or mp4 rule's `?start=`): cut as it streams, and a Range (not sent to the
    // backend: `request.rs`) cut from the answer when its length is known up front.
    if txn.flv_start.is_some() || txn.mp4_start.is_some() {
        let length = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let resp = txn.stream_response(parts.status, parts.headers, body, length, &status);
        return Step::Deliver(resp);
    }
    let switching = parts.status == StatusCode::SWITCHING_PROTOCOLS;
    let mut parts = parts;
    let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let mut resp = super::super::deliver::respond(parts.status, parts.headers, body, &status);
    // The backend switched protocols (only ever for an upgrade it was asked for): the server
    // joins the two connections once the 101 is written (`server::tunnel`).
    if switching && let Some(on_upgrade) = on_upgrade {
        let h = resp.headers_mut();
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        if let Some(protocol) = txn.req.headers.get(header::UPGRADE) {
            h.insert(header::UPGRADE, protocol.clone());
        }
        resp.extensions_mut().insert(on_upgrade);
    }
    Step::Deliver(resp)
}

/// Purges the target URI and the same-host `Location` / `Content-Location` URIs.
fn invalidate(txn: &Txn, response: &HeaderMap) -> Vec<CacheKey> {
    let Some(target) = &txn.key else {
        return Vec::new();
    };
    let cache = &txn.proxy.cache;
    let mut removed = cache.purge(target);
    let mut urls = vec![target.clone()];
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        let Some(uri) = response.get(&name).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        if let Some(key) = same_host_key(target, uri) {
            removed += cache.purge(&key);
            urls.push(key);
        }
    }
    txn.proxy.counters.cache_invalidated.add(removed as u64);
    urls
}

/// With a fleet, the URLs an unsafe request invalidated leave the shared tier before the
/// answer (or this node's next miss would find them there: at most `write_timeout` each),
/// and every other node's tiers in the background.
async fn invalidate_fleet(shared: Arc<SharedTier>, urls: Vec<CacheKey>) {
    let at = shared.feed.position();
    for url in &urls {
        shared.purge_url(url, at).await;
    }
    tokio::spawn(async move {
        for url in urls {
            feed::broadcast(&shared, Invalidation::Purge(url)).await;
        }
    });
}

/// The cache key of `uri` if it is relative or names the same host as `target`.
fn same_host_key(target: &CacheKey, uri: &str) -> Option<CacheKey> {
    if uri.starts_with('/') && !uri.starts_with("//") {
        return Some(CacheKey::new(target.host(), uri));
    }
    let parsed: http::Uri = uri.parse().ok()?;
    let authority = parsed.authority()?;
    let key = CacheKey::new(
        authority.as_str(),
        parsed.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
    );
    (key.host() == target.host()).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23: extension methods are unsafe too (only GET, HEAD, OPTIONS, TRACE are safe).
    #[test]
    fn only_the_four_safe_methods_are_safe() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(is_safe(&Method::from_bytes(m.as_bytes()).unwrap()), "{m}");
        }
        for m in [
            "POST",
            "PUT",
            "DELETE",
            "PATCH",
            "M-SEARCH",
            "MKCOL",
            "PROPPATCH",
            "LINK",
            "get",
        ] {
            assert!(!is_safe(&Method::from_bytes(m.as_bytes()).unwrap()), "{m}");
        }
    }

    #[test]
    fn invalidation_stays_on_the_same_host() {
        let target = CacheKey::new("www.example.com", "/form");
        assert_eq!(
            same_host_key(&target, "/thanks").unwrap().path_and_query(),
            "/thanks"
        );
        assert_eq!(
            same_host_key(&target, "http://www.example.com/a?b")
                .unwrap()
                .path_and_query(),
            "/a?b"
        );
        assert!(same_host_key(&target, "http://evil.example/a").is_none());
        assert!(same_host_key(&target, "//evil.example/a").is_none());
    }
}
