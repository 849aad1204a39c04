//! HTTP/1.0 clients and keep-alive: a response may keep an HTTP/1.0 connection only if the
//! client can find the end of its body without the close. The status line says `HTTP/1.1`
//! all the same (RFC 9110 §6.2; hyper as patched in vendor/hyper/PATCHES.md §1): a response's
//! `Version::HTTP_10` tells hyper the framing (no chunked coding), not the line.

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
    /// `Connection: close`, and the response marked HTTP/1.0 so hyper adds no keep-alive,
    /// sends the body as it comes and closes after it. A known length (a stored object, an origin's `Content-Length`, an
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

#[cfg(test)]
mod tests {
    use super::*;

    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What hyper's server (the vendored one, as every listener uses it) writes for `request`
    /// when the service frames `body` with [`Http10`]: the bytes up to the close.
    async fn served(request: &[u8], status: u16, body: &'static str) -> String {
        let (server, mut client) = tokio::io::duplex(4096);
        let service = service_fn(move |req: Request<Incoming>| async move {
            let old = Http10::of(&req);
            let mut resp = Response::new(ResponseBody::full(body));
            *resp.status_mut() = StatusCode::from_u16(status).expect("a status");
            old.frame(&mut resp);
            Ok::<_, std::convert::Infallible>(resp)
        });
        let conn = tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(server), service),
        );
        client.write_all(request).await.expect("written");
        let mut out = Vec::new();
        // Keep-alive: the answer is read up to its body's end, then the client hangs up.
        let mut buf = [0u8; 1024];
        loop {
            let n = client.read(&mut buf).await.expect("read");
            out.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&out);
            if n == 0 || text.ends_with(body) && text.contains("\r\n\r\n") {
                break;
            }
        }
        drop(client);
        let _ = conn.await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn an_http10_request_gets_an_http11_status_line_with_its_framing() {
        let plain = served(b"GET / HTTP/1.0\r\n\r\n", 200, "hello").await;
        assert!(plain.starts_with("HTTP/1.1 200 OK\r\n"), "{plain}");
        assert!(plain.contains("\r\nconnection: close\r\n"), "{plain}");
        assert!(plain.contains("\r\ncontent-length: 5\r\n"), "{plain}");
        assert!(plain.ends_with("\r\n\r\nhello"), "{plain}");
        // Not the 200 shortcut: the version is still HTTP/1.1.
        let missing = served(b"GET / HTTP/1.0\r\n\r\n", 404, "no").await;
        assert!(
            missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{missing}"
        );
        assert!(missing.contains("\r\nconnection: close\r\n"), "{missing}");
        // Asked for keep-alive, with a length: kept, and said so.
        let kept = served(
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            200,
            "hello",
        )
        .await;
        assert!(kept.starts_with("HTTP/1.1 200 OK\r\n"), "{kept}");
        assert!(kept.contains("\r\nconnection: keep-alive\r\n"), "{kept}");
        assert!(!kept.contains("close"), "{kept}");
        // HTTP/1.1 is untouched: no `Connection` field at all.
        let new = served(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, "hello").await;
        assert!(new.starts_with("HTTP/1.1 200 OK\r\n"), "{new}");
        assert!(!new.contains("connection:"), "{new}");
    }
}
