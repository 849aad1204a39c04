//! A response body as an origin kind produced it ([`Source`]): hyper's, with what goes back
//! when it was read to the end ([`Release`]), or any other kind's stream. `BackendBody`
//! (`body.rs`) wraps it with the between-bytes timeout and the connection-limit lease.

use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use hyper::body::Incoming;

use super::conn::Http1Conn;
use super::endpoint::Endpoint;
use super::error::BoxError;
use super::idle::KeepAlive;
use super::mux::Slot;

/// A body any origin kind can produce as a stream of frames (a file read in pieces, FastCGI
/// stdout records): `BackendBody::from_stream` wraps it like hyper's own.
pub type BoxStream = Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError> + Send>>;

/// A response body as a kind produced it, with what goes back when it ends.
pub(crate) enum Source {
    /// hyper's body (HTTP/1.1, HTTP/2) and what is released once it was read to the end.
    Hyper { body: Incoming, release: Release },
    /// Any other kind's body; what it holds is released when it is dropped.
    Stream(BoxStream),
}

/// What a hyper body gives back at its end.
pub(crate) enum Release {
    Nothing,
    /// An HTTP/1.1 connection whose response was read to the end goes back to the pool.
    Pool {
        pool: Arc<KeepAlive>,
        endpoint: Arc<Endpoint>,
        conn: Http1Conn,
    },
    /// An HTTP/2 stream slot, held until the body ends or is dropped.
    Slot {
        _held: Slot,
    },
}

/// A short plain-text answer a kind gives itself (`404 Not Found`, `403 Forbidden`, a
/// redirect's body): `Content-Type: text/plain` and a known length.
pub(crate) fn plain_response(status: http::StatusCode) -> Response<Source> {
    use http::header::{self, HeaderValue};
    use http_body_util::BodyExt;
    let text = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let len = text.len();
    let body: BoxStream =
        Box::pin(http_body_util::Full::new(Bytes::from(text)).map_err(|never| match never {}));
    let mut resp = Response::new(Source::Stream(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    resp
}
