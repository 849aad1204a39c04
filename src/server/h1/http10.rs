//! HTTP/1.0 clients and keep-alive: a response may keep an HTTP/1.0 connection only if the
//! client can find the end of its body without the close.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::proxy::ResponseBody;

/// What an HTTP/1.0 request means for its response's framing. HTTP/1.0 has no chunked coding:
/// a body ends at its `Content-Length` or at the close. hyper promises `Connection:
/// keep-alive` to an HTTP/1.0 client that asked for it whatever the body (it looks at the
/// response's version, 1.1, not the client's) and then ends a body of unknown length by
/// closing — a broken promise `ab -k` and other HTTP/1.0 clients abort on (issue 32).
#[derive(Clone, Copy)]
pub(super) enum Http10 {
    /// HTTP/1.1 (or a HEAD, whose response has no body): nothing to do.
    No,
    /// An HTTP/1.0 request whose response may carry a body.
    Body,
}

impl Http10 {
    pub(super) fn of(req: &Request<Incoming>) -> Http10 {
        if req.version() == http::Version::HTTP_10 && req.method() != http::Method::HEAD {
            Http10::Body
        } else {
            Http10::No
        }
    }

    /// A body of unknown length (a page the origin streams chunked) to an HTTP/1.0 client:
    /// `Connection: close`, and the response marked HTTP/1.0 so hyper adds no keep-alive and
    /// closes after it. A known length (a stored object, an origin's `Content-Length`, an
    /// empty body) keeps the connection: hyper sends `Content-Length`.
    pub(super) fn frame(self, resp: &mut Response<ResponseBody>) {
        if matches!(self, Http10::No)
            || resp.status().is_informational()
            || resp.status() == StatusCode::NO_CONTENT
            || resp.status() == StatusCode::NOT_MODIFIED
            || resp.headers().contains_key(http::header::CONTENT_LENGTH)
            || http_body::Body::size_hint(resp.body()).exact().is_some()
        {
            return;
        }
        *resp.version_mut() = http::Version::HTTP_10;
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
}
