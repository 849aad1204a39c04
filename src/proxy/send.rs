//! Choosing a backend and sending the backend request: retries on connection failures,
//! restarts on chosen statuses, conditional revalidation of a stale copy.

use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};

use super::txn::Txn;
use crate::backend::director::{Member, Pick};
use crate::backend::{Backend, BackendBody, FetchError, RequestBody};
use crate::cache::{CacheKey, Object};
use crate::config::HashOn;
use crate::http::headers;

/// Request fields that would make the backend answer something other than the full object.
const CONDITIONAL: [HeaderName; 6] = [
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
];

/// The stored `Last-Modified` if it is a strong validator (RFC 9110 §8.8.2.2): at least a
/// second before the stored `Date` — or, without one, before the response arrived (the Date
/// RFC 9110 §6.6.1 has a cache record). Under VCL, as Varnish does, only such a time is sent
/// in `If-Modified-Since`: a weak one may hide a change made within the same second.
fn strong_last_modified(stale: &Object) -> Option<&str> {
    let text = stale.last_modified()?;
    let modified = httpdate::parse_http_date(text).ok()?;
    let date = match stale.headers.get_str(&header::DATE) {
        Some(d) => httpdate::parse_http_date(d).ok()?,
        None => std::time::SystemTime::now().checked_sub(stale.stored_at.elapsed())?,
    };
    let gap = date.duration_since(modified).ok()?;
    (gap >= std::time::Duration::from_secs(1)).then_some(text)
}

/// Attempts at most per request (first try, retries and restarts together).
const MAX_ATTEMPTS: usize = 16;

/// Why no backend response could be obtained.
pub(super) enum SendFailure {
    /// The route's director had no healthy backend to offer.
    NoHealthyBackend,
    /// The request body went to an earlier backend request and was not kept (VCL's
    /// `std.cache_req_body()`): a retry or restart cannot send it again.
    BodyConsumed,
    /// The last backend tried failed.
    Fetch(FetchError),
}

impl SendFailure {
    pub(super) fn status_detail(&self) -> (StatusCode, &'static str) {
        match self {
            SendFailure::NoHealthyBackend => {
                (StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend")
            }
            SendFailure::BodyConsumed => (StatusCode::SERVICE_UNAVAILABLE, "request-body-consumed"),
            SendFailure::Fetch(e) => (e.status(), e.as_str()),
        }
    }
}

/// Picks a backend from the route and sends the request. Connection failures (before any
/// response byte) of idempotent requests are retried on the next choice; a response whose
/// status the director's `restart_on` names is re-run on the next choice, at most
/// `max_restarts` times — after the last one, or when no other backend is left, that response
/// is delivered.
pub(super) async fn send(
    txn: &mut Txn,
    for_cache: bool,
) -> Result<Response<BackendBody>, SendFailure> {
    let route = txn
        .route
        .clone()
        .unwrap_or_else(|| txn.proxy.backends.default.clone());
    let key = txn.key.clone().unwrap_or_else(|| CacheKey::new("", "/"));
    // Owned: `txn` is lent mutably below (the miss path; one reference count per fetch).
    let proxy = txn.proxy.clone();
    let counters = &proxy.counters;
    // A body can go to a second backend only when it is held in memory (none, or kept by
    // VCL's std.cache_req_body()).
    let resendable = for_cache || txn.body_resendable();
    let idempotent = for_cache
        || (resendable
            && matches!(
                txn.req.method,
                Method::GET
                    | Method::HEAD
                    | Method::PUT
                    | Method::DELETE
                    | Method::OPTIONS
                    | Method::TRACE
            ));
    // The body this backend request would send is gone (an earlier one sent it).
    let vcl_bereq = txn.vcl.as_ref().and_then(|v| v.bereq.as_ref());
    let method = vcl_bereq.map_or(&txn.req.method, |b| &b.method);
    let sends = !for_cache
        && !vcl_bereq.is_some_and(|b| b.no_body)
        && !matches!(*method, Method::GET | Method::HEAD);
    if txn.body_spent(sends) {
        tracing::warn!("request body already sent to a backend and not kept: not sent again");
        return Err(SendFailure::BodyConsumed);
    }
    let mut tried: Vec<Arc<Backend>> = Vec::new();
    let mut restarts = 0;
    let mut last_error = None;
    for _ in 0..MAX_ATTEMPTS {
        let Some(backend) = choose(&route, &key, txn, &tried) else {
            break;
        };
        txn.backend = Some(backend.clone());
        let mut bereq = build_request(txn, &backend, for_cache);
        let sent = match txn.interim.clone() {
            Some(sink) => {
                let heads = super::interim::listen(&mut bereq, txn.proxy.counters.clone());
                let version = txn.req.version;
                super::interim::forward_while(backend.send(bereq), heads, &*sink, version, counters)
                    .await
            }
            None => backend.send(bereq).await,
        };
        match sent {
            Err(e) => {
                tracing::warn!(backend = backend.name(), error = %e, "backend fetch failed");
                if !(idempotent && e.before_response()) {
                    return Err(SendFailure::Fetch(e));
                }
                tried.push(backend);
                last_error = Some(e);
                // A retry is counted only when there is another backend to retry on: one
                // refused backend alone is a failure, not a retry that never happened.
                if choose(&route, &key, txn, &tried).is_none() {
                    break;
                }
                counters.backend_retry.inc();
            }
            Ok(resp) => {
                let Some(director) = route.director() else {
                    return Ok(resp);
                };
                if !(idempotent
                    && restarts < director.max_restarts
                    && director.restarts_on(resp.status().as_u16()))
                {
                    return Ok(resp);
                }
                tried.push(backend);
                if choose(&route, &key, txn, &tried).is_none() {
                    return Ok(resp);
                }
                restarts += 1;
                counters.backend_restart.inc();
            }
        }
    }
    match last_error {
        Some(e) => Err(SendFailure::Fetch(e)),
        None => {
            counters.backend_unhealthy.inc();
            Err(SendFailure::NoHealthyBackend)
        }
    }
}

/// Whether the director this request is routed to counts `status` as failed (`restart_on` /
/// `restart_unless`): such a response is what was left after the restarts, delivered but never
/// stored (unless a rule says `override_origin`).
pub(super) fn failed_status(txn: &Txn, status: StatusCode) -> bool {
    txn.route
        .as_ref()
        .unwrap_or(&txn.proxy.backends.default)
        .director()
        .is_some_and(|d| d.restarts_on(status.as_u16()))
}

fn choose(
    route: &Member,
    key: &CacheKey,
    txn: &Txn,
    tried: &[Arc<Backend>],
) -> Option<Arc<Backend>> {
    route.pick(&Pick {
        key,
        headers: &txn.req.headers,
        client: txn.client.ip(),
        exclude: tried,
        hash: txn.route_hash,
        draw: legacy_draw(route, txn),
    })
}

/// A 2.x VCL program's `hash` or `client` director picks as Varnish 2.1's did (`Pick::draw`):
/// from the SHA-256 of the request's hash inputs — those vcl_hash gave, else the built-in
/// vcl_hash's URL and Host (a passed request runs no vcl_hash here) — or of
/// `client.identity` / the client's address.
fn legacy_draw(route: &Member, txn: &Txn) -> Option<u32> {
    let v = txn.vcl.as_deref()?;
    if !v.runtime.program.dialect.is_legacy() {
        return None;
    }
    let Member::Director(d) = route else {
        return None;
    };
    let input = match d.hash_source()? {
        HashOn::ClientIp => match &v.state.identity {
            Some(id) => id.clone(),
            None => txn.client.ip().to_string(),
        },
        HashOn::Key if v.state.hash.is_empty() => {
            let url = txn.req.uri.path_and_query().map_or("/", |p| p.as_str());
            let host = txn
                .req
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("0.0.0.0");
            format!("{url}#{host}#")
        }
        HashOn::Key => v.state.hash_parts().map(|p| format!("{p}#")).collect(),
        HashOn::Header(_) | HashOn::Cookie(_) => return None,
    };
    Some(crate::backend::director::legacy_draw(input.as_bytes()))
}

/// The backend request: hop-by-hop removed, forwarding fields (`X-Forwarded-*`, `Forwarded`,
/// `Via`) added; for cache
/// fills a plain GET without conditionals or ranges, so the whole object comes back.
fn build_request(txn: &mut Txn, backend: &Backend, for_cache: bool) -> Request<RequestBody> {
    // VCL's backend request (`bereq.*`), when a program made one: its method, URL and fields.
    let bereq = txn.vcl.as_ref().and_then(|v| v.bereq.as_ref());
    let mut headers: HeaderMap = match bereq {
        Some(b) => b.headers.clone(),
        None => txn.req.headers.clone(),
    };
    let vcl_method = bereq.map(|b| b.method.clone());
    let vcl_uri = bereq.map(|b| b.uri.clone());
    let no_body = bereq.is_some_and(|b| b.no_body);
    let retry_connect = bereq.is_none_or(|b| b.retry_connect);
    let timeouts = bereq.map(|b| crate::backend::RequestTimeouts {
        connect: b.connect_timeout,
        first_byte: b.first_byte_timeout,
        between_bytes: b.between_bytes_timeout,
    });
    headers::strip_hop_by_hop(&mut headers);
    // A protocol upgrade the operator allows goes to the backend (never for a cache fill).
    if !for_cache
        && let Some(protocol) = headers::upgrade_request(
            &txn.req.method,
            txn.req.version,
            &txn.req.headers,
            &txn.proxy.config.server.upgrade_protocols,
        )
    {
        headers.insert(header::UPGRADE, protocol);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    headers.remove(header::EXPECT);
    // Framing is rebuilt by hyper from the body it is given; never the client's word.
    headers.remove(header::CONTENT_LENGTH);
    if let Some(authority) = txn.req.uri.authority() {
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            headers.insert(header::HOST, v);
        }
    } else if !headers.contains_key(header::HOST)
        && let Ok(v) = HeaderValue::from_str(&backend.host_header())
    {
        headers.insert(header::HOST, v);
    }
    let https = txn
        .req
        .extensions
        .get::<crate::tls::server::Session>()
        .is_some();
    headers::add_forwarding_fields(&mut headers, txn.client.ip(), https, txn.vcl.is_none());
    let method = if for_cache {
        for name in CONDITIONAL {
            headers.remove(name);
        }
        // Partial content (`combine.rs`): the one range the cache wants, of the representation
        // it holds pieces of.
        if let Some(fetch) = &txn.range_fetch {
            headers.insert(header::RANGE, fetch.range.clone());
            if let Some(v) = &fetch.if_range {
                headers.insert(header::IF_RANGE, v.clone());
            }
        }
        // Revalidate the stale copy instead of refetching it (RFC 9111 §4.3.1).
        if let Some(stale) = &txn.stale {
            if let Some(etag) = stale.etag().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(header::IF_NONE_MATCH, etag);
            }
            let lm = if txn.vcl.is_some() {
                strong_last_modified(stale)
            } else {
                stale.last_modified()
            };
            if let Some(lm) = lm.and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(header::IF_MODIFIED_SINCE, lm);
            }
        }
        vcl_method.clone().unwrap_or(http::Method::GET)
    } else {
        vcl_method.clone().unwrap_or_else(|| txn.req.method.clone())
    };
    // A GET or HEAD body is never forwarded: it cannot change what the cache keyed, and some
    // origins would read it as a second request on the pooled connection.
    let send_body = !for_cache && !no_body && !matches!(method, Method::GET | Method::HEAD);
    let body = match (for_cache, txn.body.take()) {
        // Read before vcl_recv (`held.rs`): a copy if VCL kept it, else sent once.
        _ if txn.held_body.is_some() => match txn.held_body.as_mut() {
            Some(held) => held.take_for(send_body, &txn.proxy.counters),
            None => RequestBody::empty(),
        },
        (false, Some(b)) if send_body => {
            txn.body_sent |= !http_body::Body::is_end_stream(&b);
            RequestBody::stream(
                b,
                txn.proxy.counters.clone(),
                txn.proxy.config.server.max_body_size.0,
                txn.req
                    .extensions
                    .get::<crate::backend::BodyPace>()
                    .cloned(),
            )
        }
        _ => RequestBody::empty(),
    };
    let uri = vcl_uri.as_ref().unwrap_or(&txn.req.uri);
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut req = Request::new(body);
    if let Some(t) = timeouts {
        req.extensions_mut().insert(t);
    }
    if !retry_connect {
        req.extensions_mut().insert(crate::backend::NoConnectRetry);
    }
    *req.method_mut() = method;
    *req.uri_mut() = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}
