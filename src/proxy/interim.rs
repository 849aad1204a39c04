//! 1xx informational responses (103 Early Hints, 102 Processing): forwarded from the backend
//! to the client ahead of the final response, never stored and never reused (RFC 9110 §15.2:
//! a proxy forwards the 1xx responses it did not ask for itself).
//!
//! Two halves, because hyper has one on each side only. hyper's client reports a backend's 1xx
//! heads through a callback on the request (`hyper::ext::on_informational`); it used to
//! discard them. hyper's server cannot send a 1xx response at all (a service returns exactly
//! one, final response), so the fetch hands each head to the client connection
//! ([`InterimSink`]): over HTTP/1.1 the socket adapter (`server/h1/interim.rs`) writes it, serialised,
//! before the first byte hyper writes for the request — the same place that already writes
//! fast hits without hyper; over HTTP/2 it goes out as a HEADERS frame on the request's stream
//! ahead of the final response's (`server/h2/interim.rs`, through vendor/h2's patch §11).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderMap;
use http::{Request, StatusCode, Version};
use tokio::sync::mpsc;

use crate::backend::RequestBody;
use crate::stats::Counters;

/// One 1xx response from a backend: its status and end-to-end fields (hop-by-hop ones
/// removed, as from any response).
#[derive(Debug)]
pub struct InterimHead {
    pub status: StatusCode,
    pub fields: HeaderMap,
}

/// Where a request's 1xx heads go: the client connection, which sends them before the final
/// response (or drops them when it cannot keep the order), at most [`MAX_INTERIM`] per
/// request. `false`: dropped at once.
pub trait InterimSink: Send + Sync {
    fn send(&self, head: InterimHead) -> bool;
}

/// 1xx heads a client connection forwards per request at most (HTTP/1.1 and HTTP/2); more are
/// dropped (`client_interim_dropped`).
pub const MAX_INTERIM: usize = 8;

/// 1xx heads buffered between the backend connection and the fetch at most; more are dropped.
const CHANNEL: usize = MAX_INTERIM;

/// Registers the 1xx callback on a backend request: each informational head to forward
/// arrives on the returned channel.
pub(super) fn listen(
    req: &mut Request<RequestBody>,
    counters: Arc<Counters>,
) -> mpsc::Receiver<InterimHead> {
    let (tx, rx) = mpsc::channel(CHANNEL);
    hyper::ext::on_informational(req, move |res| {
        if let Some(head) = forwarded(res.status(), res.headers()) {
            // A full channel drops the head: hints are an optimisation, never a reason to
            // hold up the backend connection.
            if tx.try_send(head).is_err() {
                counters.client_interim_dropped.inc();
            }
        }
    });
    rx
}

/// The head a client gets for a backend's 1xx: the end-to-end fields (hop-by-hop ones
/// removed, as from any response). `None` for 100 Continue (Shellac answers `Expect` itself
/// and never sends it to a backend) and 101 (a final answer to an upgrade, not
/// informational).
fn forwarded(status: StatusCode, headers: &HeaderMap) -> Option<InterimHead> {
    if !status.is_informational()
        || status == StatusCode::CONTINUE
        || status == StatusCode::SWITCHING_PROTOCOLS
    {
        return None;
    }
    let mut fields = headers.clone();
    crate::http::headers::strip_hop_by_hop(&mut fields);
    Some(InterimHead { status, fields })
}

/// Awaits `response` (the backend exchange), handing every 1xx head that arrives meanwhile to
/// `sink` — only for HTTP/1.1 and HTTP/2 clients (RFC 9110 §15.2: never a 1xx to an HTTP/1.0
/// client); the sink forwards at most [`MAX_INTERIM`] per request, over any number of
/// backend exchanges (retries, restarts).
/// Heads still in the channel when the final response is there go first.
pub(super) async fn forward_while<F: Future>(
    response: F,
    mut heads: mpsc::Receiver<InterimHead>,
    sink: &dyn InterimSink,
    client: Version,
    counters: &Counters,
) -> F::Output {
    let forward = |head: InterimHead| {
        if client >= Version::HTTP_11 && sink.send(head) {
            return;
        }
        counters.client_interim_dropped.inc();
    };
    tokio::pin!(response);
    let out = loop {
        tokio::select! {
            biased;
            Some(head) = heads.recv() => forward(head),
            out = &mut response => break out,
        }
    };
    while let Ok(head) = heads.try_recv() {
        forward(head);
    }
    out
}

/// A 1xx head as HTTP/1.1 bytes: status line, fields, blank line.
pub fn serialise(head: &InterimHead) -> Bytes {
    let reason = head.status.canonical_reason().unwrap_or("Informational");
    let mut out = Vec::with_capacity(64 + head.fields.len() * 48);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(head.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &head.fields {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn early_hints_are_serialised_without_hop_by_hop_fields() {
        let mut h = HeaderMap::new();
        h.append("link", HeaderValue::from_static("</a.css>; rel=preload"));
        h.append("link", HeaderValue::from_static("</b.js>; rel=preload"));
        h.insert("connection", HeaderValue::from_static("x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        let head = forwarded(StatusCode::from_u16(103).unwrap(), &h).unwrap();
        assert!(!head.fields.contains_key("x-secret"));
        assert!(!head.fields.contains_key("connection"));
        assert_eq!(
            &serialise(&head)[..],
            b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\nlink: </b.js>; rel=preload\r\n\r\n"
        );
        let processing = forwarded(StatusCode::PROCESSING, &HeaderMap::new()).unwrap();
        assert_eq!(
            &serialise(&processing)[..],
            b"HTTP/1.1 102 Processing\r\n\r\n"
        );
        assert!(forwarded(StatusCode::CONTINUE, &HeaderMap::new()).is_none());
        assert!(forwarded(StatusCode::SWITCHING_PROTOCOLS, &HeaderMap::new()).is_none());
        assert!(forwarded(StatusCode::OK, &HeaderMap::new()).is_none());
        let odd = forwarded(StatusCode::from_u16(199).unwrap(), &HeaderMap::new()).unwrap();
        assert!(serialise(&odd).starts_with(b"HTTP/1.1 199 Informational\r\n"));
    }
}
