//! How the admin listener answers: the body type, the content types, JSON bodies, and a reply
//! that no cache stores.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// The body of every admin response: a whole buffer or a stream (`/log/stream`).
pub type AdminBody = BoxBody<Bytes, Infallible>;

/// The content type of JSON answers.
pub(super) const JSON: &str = "application/json";
/// The content type of plain-text answers.
pub(super) const TEXT: &str = "text/plain; charset=utf-8";

/// `v` pretty-printed, with a final newline.
pub(super) fn json(v: serde_json::Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(&v).unwrap_or_default();
    out.push(b'\n');
    out
}

/// An answer of `status` with `body` as `content_type`, never stored (`no-store`).
pub(super) fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
) -> Response<AdminBody> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    resp
}
