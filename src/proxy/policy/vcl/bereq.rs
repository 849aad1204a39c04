//! What the VCL front-end tells the fetch about the backend request: the request the program
//! made (`bereq.*`), that the program adds `X-Forwarded-For` itself, the `If-Modified-Since`
//! Varnish sends (a strong `Last-Modified` only), a 2.x `hash` / `client` director's draw,
//! a background refresh's own VCL state, and the trace the transaction record logs.

use std::time::{Duration, SystemTime};

use http::header;

use super::super::BackendRequest;
use crate::backend::RequestTimeouts;
use crate::backend::director::Member;
use crate::cache::Object;
use crate::config::HashOn;
use crate::proxy::txn::{Inherited, Txn};
use crate::proxy::vcl::VclTxn;

/// The backend request VCL made (`bereq.*`), when a program made one.
pub(super) fn backend_request(txn: &Txn) -> Option<BackendRequest<'_>> {
    let b = txn.vcl.as_ref()?.bereq.as_ref()?;
    Some(BackendRequest {
        method: &b.method,
        uri: &b.uri,
        headers: &b.headers,
        no_body: b.no_body,
        retry_connect: b.retry_connect,
        timeouts: RequestTimeouts {
            connect: b.connect_timeout,
            first_byte: b.first_byte_timeout,
            between_bytes: b.between_bytes_timeout,
        },
    })
}

/// The stored `Last-Modified` if it is a strong validator (RFC 9110 §8.8.2.2): at least a
/// second before the stored `Date` — or, without one, before the response arrived (the Date
/// RFC 9110 §6.6.1 has a cache record). Under VCL, as Varnish does, only such a time is sent
/// in `If-Modified-Since`: a weak one may hide a change made within the same second.
pub(super) fn strong_last_modified(stale: &Object) -> Option<&str> {
    let text = stale.last_modified()?;
    let modified = httpdate::parse_http_date(text).ok()?;
    let date = match stale.headers.get_str(&header::DATE) {
        Some(d) => httpdate::parse_http_date(d).ok()?,
        None => SystemTime::now().checked_sub(stale.stored_at.elapsed())?,
    };
    let gap = date.duration_since(modified).ok()?;
    (gap >= Duration::from_secs(1)).then_some(text)
}

/// A 2.x VCL program's `hash` or `client` director picks as Varnish 2.1's did (`Pick::draw`):
/// from the SHA-256 of the request's hash inputs — those vcl_hash gave, else the built-in
/// vcl_hash's URL and Host (a passed request runs no vcl_hash here) — or of
/// `client.identity` / the client's address.
pub(super) fn legacy_draw(txn: &Txn, route: &Member) -> Option<u32> {
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

/// A background fetch runs the backend side's VCL (`bereq.is_bgfetch`), not the client's:
/// its own state, under the id of the request that started it and with its backend.
pub(super) fn background(txn: &mut Txn, from: &Inherited) {
    txn.vcl = txn.vcl_program().map(|rt| {
        let mut v = VclTxn::background(rt, from.vcl_xid);
        v.state.backend = from.vcl_backend;
        Box::new(v)
    });
}
