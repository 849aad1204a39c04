//! The backend request: built from the client's (or the policy's `bereq`), hop-by-hop fields
//! removed, forwarding fields added; a cache fill a plain GET made conditional on the stale
//! copy it may revalidate, or a Range for the piece partial content lacks.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Version};

use super::super::txn::Txn;
use crate::backend::{Backend, RequestBody};
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

/// The backend request: hop-by-hop removed, forwarding fields (`X-Forwarded-*`, `Forwarded`,
/// `Via`) added; for cache
/// fills a plain GET without conditionals or ranges, so the whole object comes back.
pub(super) fn build_request(
    txn: &mut Txn,
    backend: &Backend,
    for_cache: bool,
) -> Request<RequestBody> {
    // Policy hook: the backend request the policy made (VCL's `bereq.*`), when it made one:
    // its method, URL and fields.
    let bereq = txn.policy.backend_request(txn);
    let mut headers: HeaderMap = match &bereq {
        Some(b) => b.headers.clone(),
        None => {
            let mut h = txn.req.headers.clone();
            super::super::coding::backend_request(txn, backend, &mut h, for_cache);
            h
        }
    };
    let vcl_method = bereq.as_ref().map(|b| b.method.clone());
    let vcl_uri = bereq.as_ref().map(|b| b.uri.clone());
    let no_body = bereq.as_ref().is_some_and(|b| b.no_body);
    let retry_connect = bereq.as_ref().is_none_or(|b| b.retry_connect);
    let from_policy = bereq.is_some();
    let timeouts = bereq.map(|b| b.timeouts);
    let https = forward_fields(txn, backend, &mut headers, (for_cache, from_policy));
    let method = if for_cache {
        fill_conditions(txn, &mut headers);
        vcl_method.clone().unwrap_or(http::Method::GET)
    } else if txn.flv_start.is_some() || txn.mp4_start.is_some() {
        // A passed seek: its Range is of the cut answer, not of the file (`pass.rs`).
        headers.remove(header::RANGE);
        headers.remove(header::IF_RANGE);
        vcl_method.clone().unwrap_or_else(|| txn.req.method.clone())
    } else {
        vcl_method.clone().unwrap_or_else(|| txn.req.method.clone())
    };
    // A GET or HEAD body is never forwarded: it cannot change what the cache keyed, and some
    // origins would read it as a second request on the pooled connection.
    let send_body = !for_cache && !no_body && !matches!(method, Method::GET | Method::HEAD);
    let body = request_body(txn, for_cache, send_body);
    // A method whose content has a meaning (POST, PUT, an ESI include's `XGET`...) sent
    // without a body says so (RFC 9110 §8.6, as Varnish does): the origin need not guess.
    if !matches!(
        method,
        Method::GET
            | Method::HEAD
            | Method::DELETE
            | Method::OPTIONS
            | Method::TRACE
            | Method::CONNECT
    ) && http_body::Body::is_end_stream(&body)
        && !headers.contains_key(header::TRANSFER_ENCODING)
    {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    let uri = vcl_uri.as_ref().unwrap_or(&txn.req.uri);
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut req = Request::new(body);
    extensions(txn, &mut req, https, timeouts, retry_connect);
    *req.method_mut() = method;
    *req.uri_mut() = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}

/// Hop-by-hop fields out (but `Connection: close` from the policy's request), an allowed
/// protocol upgrade in, `Host` and the forwarding fields
/// (`X-Forwarded-*`, `Forwarded`, `Via`) set, `Surrogate-Capability` announced. Returns
/// whether the client came over TLS.
fn forward_fields(
    txn: &Txn,
    backend: &Backend,
    headers: &mut HeaderMap,
    (for_cache, from_policy): (bool, bool),
) -> bool {
    // A policy's backend request whose `Connection` says `close` (VCL's
    // `bereq.http.connection`) keeps it: the backend closes that connection after its answer,
    // and the pool never reuses it.
    let close = from_policy && headers::connection_close(headers);
    headers::strip_hop_by_hop(headers);
    if close {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
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
    let xff = txn.policy.forwarded_for(txn);
    headers::add_forwarding_fields(headers, txn.client.ip(), https, xff);
    super::super::surrogate::on_request(&txn.proxy.config.esi, headers);
    https
}

/// A cache fill's conditions: the client's conditionals and Range out (the delivery answers
/// them), the Range partial content wants, the validators of the stale copy to revalidate.
fn fill_conditions(txn: &mut Txn, headers: &mut HeaderMap) {
    for name in CONDITIONAL {
        headers.remove(name);
    }
    // The delivery answers them instead (`Txn::stream_response`).
    txn.withheld_conditions |= CONDITIONAL[..4]
        .iter()
        .any(|name| txn.req.headers.contains_key(name));
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
        let lm = txn.policy.if_modified_since(txn, stale);
        if let Some(lm) = lm.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(header::IF_MODIFIED_SINCE, lm);
        }
    }
}

/// The body the backend request sends: none for a fill, a GET or HEAD; the body read before
/// vcl_recv, or the client's streamed (paced, bounded by `max_body_size`).
fn request_body(txn: &mut Txn, for_cache: bool, send_body: bool) -> RequestBody {
    match (for_cache, txn.body.take()) {
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
    }
}

/// What travels with the backend request to the origin kind: VCL's timeouts, whether a
/// failed connect may be retried, the statuses VCL takes, the site's document root, the client as FastCGI sees it.
fn extensions(
    txn: &Txn,
    req: &mut Request<RequestBody>,
    https: bool,
    timeouts: Option<crate::backend::RequestTimeouts>,
    retry_connect: bool,
) {
    if let Some(t) = timeouts {
        req.extensions_mut().insert(t);
    }
    if !retry_connect {
        req.extensions_mut().insert(crate::backend::NoConnectRetry);
    }
    // Under VCL a backend may answer any three-digit status, as Varnish takes it.
    if txn.vcl.is_some() {
        req.extensions_mut()
            .insert(crate::backend::AnyThreeDigitStatus);
    }
    // The backend request's Varnish-style records (`log.vsl_records`): its connection logs
    // `BackendClose` there.
    if let Some(t) = txn
        .vcl
        .as_deref()
        .and_then(|v| v.bereq.as_ref())
        .and_then(|b| b.vsl.clone())
    {
        req.extensions_mut().insert(crate::txlog::vsl::Current(t));
    }
    // The site's document root, for files and FastCGI origins.
    if let Some(root) = txn.site.as_ref().and_then(|s| s.root.clone()) {
        req.extensions_mut().insert(root);
    }
    // The site's directory listings, for files origins.
    if let Some(autoindex) = txn.site.as_ref().and_then(|s| s.autoindex) {
        req.extensions_mut().insert(autoindex);
    }
    // What a FastCGI origin passes to the application (REMOTE_ADDR, HTTPS, SERVER_*), and a
    // backend's PROXY protocol header names (client and server).
    let local = txn.req.extensions.get::<crate::proxy::LocalAddr>();
    req.extensions_mut().insert(crate::backend::ClientInfo {
        addr: txn.real_client(),
        https,
        local: local.map(|l| l.0),
        server: local.map(|l| l.1.map_or(l.0, |p| p.server)),
        protocol: match txn.req.version {
            Version::HTTP_2 => "HTTP/2.0",
            Version::HTTP_10 => "HTTP/1.0",
            _ => "HTTP/1.1",
        },
    });
}

impl Txn {
    /// How the slices of this request are asked for (`slice/`): the backend request a cache
    /// fill of it would send (the policy's `bereq`, forwarding fields, no conditionals, no
    /// Range), to be sent again per slice with its own `Range`. `None` when the route has no
    /// backend to offer.
    pub(in crate::proxy) fn slice_requester(&mut self) -> Option<super::super::slice::Requester> {
        let route = self
            .route
            .clone()
            .unwrap_or_else(|| self.proxy.backends.default.clone());
        let key = self.key.clone()?;
        let backend = route.pick(&crate::backend::director::Pick {
            key: &key,
            headers: &self.req.headers,
            client: self.client.ip(),
            exclude: &[],
            hash: self.route_hash,
            draw: None,
        })?;
        let (range, stale) = (self.range_fetch.take(), self.stale.take());
        let (parts, _) = build_request(self, &backend, true).into_parts();
        (self.range_fetch, self.stale) = (range, stale);
        let mut headers = parts.headers;
        for name in CONDITIONAL {
            headers.remove(name);
        }
        Some(super::super::slice::Requester {
            route,
            key,
            client: self.client.ip(),
            req_headers: self.req.headers.clone(),
            hash: self.route_hash,
            uri: parts.uri,
            headers,
            info: parts
                .extensions
                .get::<crate::backend::ClientInfo>()
                .copied(),
        })
    }
}
