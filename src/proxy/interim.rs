//! 1xx informational responses (103 Early Hints, 102 Processing): forwarded from the backend
//! to the client ahead of the final response, never stored and never reused (RFC 9110 §15.2:
//! a proxy forwards the 1xx responses it did not ask for itself).
//!
//! Two halves, because hyper has one on each side only. hyper's client reports a backend's 1xx
//! heads through a callback on the request (`hyper::ext::on_informational`); it used to
//! discard them. hyper's server cannot send a 1xx response at all (a service returns exactly
//! one, final response), so the fetch hands each head, serialised, to the client connection
//! ([`InterimSink`]), whose socket adapter (`server/gate.rs`) writes it before the first byte
//! hyper writes for the request — the same place that already writes fast hits without hyper.

use std::future::Future;

use bytes::Bytes;
use http::header::HeaderMap;
use http::{Request, StatusCode, Version};
use tokio::sync::mpsc;

use crate::backend::RequestBody;
use crate::stats::Counters;

/// Where a request's 1xx heads go: the client connection, which writes them before the final
/// response (or drops them when it cannot keep the order). `false`: dropped at once.
pub trait InterimSink: Send + Sync {
    fn send(&self, head: Bytes) -> bool;
}

/// 1xx heads buffered between the backend connection and the fetch at most; more are dropped.
const CHANNEL: usize = 8;

/// Registers the 1xx callback on a backend request: each informational head arrives, already
/// serialised for the client, on the returned channel.
pub(super) fn listen(req: &mut Request<RequestBody>) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(CHANNEL);
    hyper::ext::on_informational(req, move |res| {
        if let Some(head) = serialise(res.status(), res.headers()) {
            // A full channel drops the head: hints are an optimisation, never a reason to
            // hold up the backend connection.
            let _ = tx.try_send(head);
        }
    });
    rx
}

/// Awaits `response` (the backend exchange), handing every 1xx head that arrives meanwhile to
/// `sink` — only for HTTP/1.1 clients (RFC 9110 §15.2: never a 1xx to an HTTP/1.0 client).
/// Heads still in the channel when the final response is there go first.
pub(super) async fn forward_while<F: Future>(
    response: F,
    mut heads: mpsc::Receiver<Bytes>,
    sink: &dyn InterimSink,
    client: Version,
    counters: &Counters,
) -> F::Output {
    let forward = |head: Bytes| {
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

/// A 1xx head as HTTP/1.1 bytes: status line, the end-to-end fields (hop-by-hop ones removed,
/// as from any response), blank line. `None` for 100 Continue (Shellac answers `Expect`
/// itself and never sends it to a backend) and 101 (a final answer to an upgrade, not
/// informational).
fn serialise(status: StatusCode, headers: &HeaderMap) -> Option<Bytes> {
    if !status.is_informational()
        || status == StatusCode::CONTINUE
        || status == StatusCode::SWITCHING_PROTOCOLS
    {
        return None;
    }
    let mut fields = headers.clone();
    crate::http::headers::strip_hop_by_hop(&mut fields);
    let reason = status.canonical_reason().unwrap_or("Informational");
    let mut out = Vec::with_capacity(64 + fields.len() * 48);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &fields {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Some(Bytes::from(out))
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
        let head = serialise(StatusCode::from_u16(103).unwrap(), &h).unwrap();
        assert_eq!(
            &head[..],
            b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\nlink: </b.js>; rel=preload\r\n\r\n"
        );
        let processing = serialise(StatusCode::PROCESSING, &HeaderMap::new()).unwrap();
        assert_eq!(&processing[..], b"HTTP/1.1 102 Processing\r\n\r\n");
        assert!(serialise(StatusCode::CONTINUE, &HeaderMap::new()).is_none());
        assert!(serialise(StatusCode::SWITCHING_PROTOCOLS, &HeaderMap::new()).is_none());
        assert!(serialise(StatusCode::OK, &HeaderMap::new()).is_none());
        let odd = serialise(StatusCode::from_u16(199).unwrap(), &HeaderMap::new()).unwrap();
        assert!(odd.starts_with(b"HTTP/1.1 199 Informational\r\n"));
    }
}
