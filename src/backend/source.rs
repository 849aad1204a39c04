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

/// `301 Moved Permanently` to `uri`'s path with a `/` added, its query kept: a directory
/// asked for without its trailing slash (`files` and `fastcgi` alike, as nginx answers).
pub(crate) fn slash_redirect(uri: &http::Uri) -> Response<Source> {
    moved_to(&format!("{}/", uri.path()), uri.query())
}

/// A `301` to `path` (a directory's path with its `/`), the request's query kept.
pub(crate) fn moved_to(path: &str, query: Option<&str>) -> Response<Source> {
    use http::header::{self, HeaderValue};
    let mut location = path.to_string();
    if let Some(q) = query {
        location.push('?');
        location.push_str(q);
    }
    let mut resp = plain_response(http::StatusCode::MOVED_PERMANENTLY);
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory without its slash: `301` to the path with it, the query kept, the body
    /// a short plain text with its length.
    #[test]
    fn a_slash_redirect_keeps_the_query() {
        let uri: http::Uri = "/blog?p=1&q=%20".parse().expect("uri");
        let resp = slash_redirect(&uri);
        assert_eq!(resp.status(), http::StatusCode::MOVED_PERMANENTLY);
        assert_eq!(resp.headers()[http::header::LOCATION], "/blog/?p=1&q=%20");
        assert_eq!(resp.headers()[http::header::CONTENT_LENGTH], "22");
        let uri: http::Uri = "/a/b".parse().expect("uri");
        assert_eq!(
            slash_redirect(&uri).headers()[http::header::LOCATION],
            "/a/b/"
        );
    }
}
