//! HTTP/1.0 clients and keep-alive (issue 32): HTTP/1.0 has no chunked coding, so a response
//! may promise `Connection: keep-alive` only when its body's end is known without closing —
//! a `Content-Length`, or no body at all (HEAD, 304). A body whose length Shellac does not
//! know (an origin streaming chunked) is answered with `Connection: close` and the connection
//! closed after it. Each case is checked with a raw HTTP/1.0 client that asks for keep-alive
//! and holds Shellac to what it answered: a kept connection must serve a second request.

use std::time::Duration;

use crate::common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: &str = "hello, old client";

/// One response as an HTTP/1.0 client reads it.
struct Answer {
    head: String,
    body: Vec<u8>,
    /// The response promised keep-alive (`Connection: keep-alive`).
    kept: bool,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn status(&self) -> u16 {
        self.head
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

/// Sends `GET`/`HEAD path` as HTTP/1.0 with `Connection: keep-alive` (and `extra` fields) on
/// `s`, reads the response the way an HTTP/1.0 client must (RFC 1945 §7.2.2, RFC 9112 §6.3):
/// a bodiless status or HEAD has no body, else `Content-Length` bytes, else everything up to
/// the close. A response that promises keep-alive without a way to find its end fails here.
async fn ask(s: &mut TcpStream, method: &str, path: &str, extra: &str) -> Answer {
    let req = format!(
        "{method} {path} HTTP/1.0\r\nHost: test.example\r\nConnection: keep-alive\r\n{extra}\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("a response head within 10 s")
            .expect("read");
        assert!(n > 0, "closed before a response head: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut body = buf[end + 4..].to_vec();
    let mut a = Answer {
        kept: false,
        head,
        body: Vec::new(),
    };
    a.kept = a
        .field("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("keep-alive"));
    assert!(
        !a.head.to_ascii_lowercase().contains("transfer-encoding"),
        "no transfer coding to an HTTP/1.0 client: {}",
        a.head
    );
    let bodiless = method == "HEAD" || a.status() == 304 || a.status() == 204;
    let length: Option<usize> = a.field("content-length").and_then(|v| v.parse().ok());
    if bodiless {
        assert!(
            body.is_empty(),
            "{method} {path}: bytes after a bodiless answer"
        );
    } else if let Some(len) = length {
        while body.len() < len {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
                .await
                .expect("the body within 10 s")
                .expect("read");
            assert!(n > 0, "closed after {} of {len} body bytes", body.len());
            body.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(body.len(), len, "exactly Content-Length bytes");
    } else {
        assert!(
            !a.kept,
            "{method} {path}: keep-alive promised without a Content-Length: {}",
            a.head
        );
        // Close-delimited: the connection must close after the body.
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut body))
            .await
            .expect("the connection closed after a body without a length")
            .expect("read");
    }
    a.body = body;
    a
}

/// Whether the server closed `s` (reads EOF within 5 s).
async fn closed(s: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), s.read(&mut byte)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// Asks `method path` and holds Shellac to its answer: kept → a second request on the same
/// connection is answered; not kept → the connection is closed.
async fn ask_and_check(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    extra: &str,
) -> Answer {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let a = ask(&mut s, method, path, extra).await;
    if a.kept {
        let again = ask(&mut s, "GET", "/ping", "").await;
        assert_eq!(
            again.status(),
            200,
            "the kept connection serves a second request"
        );
    } else {
        assert!(closed(&mut s).await, "{method} {path}: not kept, so closed");
    }
    a
}

async fn origin() -> Origin {
    Origin::start(|seen| match seen.path.as_str() {
        "/cached" => Reply::ok(BODY).cc("max-age=60").header("etag", "\"v1\""),
        "/streamed" => Reply::ok(BODY).cc("no-store").chunked(),
        "/streamed-cacheable" => Reply::ok(BODY).cc("max-age=60").chunked(),
        "/empty" => Reply::ok("").cc("no-store"),
        "/empty-streamed" => Reply::ok("").cc("no-store").chunked(),
        _ => Reply::ok("pong").cc("no-store"),
    })
    .await
}

/// Issue 32: a cached page has a known length: keep-alive kept, with `Content-Length`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_keep_alive_cached_body_has_a_length() {
    let origin = origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    ask_and_check(shellac.addr, "GET", "/cached", "").await;
    let hit = ask_and_check(shellac.addr, "GET", "/cached", "").await;
    assert_eq!(hit.body, BODY.as_bytes());
    assert!(hit.kept, "a hit keeps the connection: {}", hit.head);
    assert_eq!(hit.field("content-length"), Some("17"));
    assert!(hit.field("cache-status").unwrap_or("").contains("hit"));
    shellac.stop().await;
}

/// Issue 32: an uncached page the origin streams chunked has no length Shellac knows: no
/// keep-alive promise, `Connection: close`, and the body ends with the close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_keep_alive_streamed_body_closes() {
    let origin = origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for path in ["/streamed", "/streamed-cacheable"] {
        let a = ask_and_check(shellac.addr, "GET", path, "").await;
        assert_eq!(a.body, BODY.as_bytes(), "{path}");
        assert!(!a.kept, "{path}: {}", a.head);
        assert_eq!(a.field("connection"), Some("close"), "{path}: {}", a.head);
    }
    // Once stored, the streamed page has a length: kept.
    let hit = ask_and_check(shellac.addr, "GET", "/streamed-cacheable", "").await;
    assert!(hit.kept, "{}", hit.head);
    assert_eq!(hit.body, BODY.as_bytes());
    shellac.stop().await;
}

/// Issue 32: empty bodies, HEAD and 304 keep the promise too (a length of 0, or no body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_keep_alive_empty_head_and_304() {
    let origin = origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let empty = ask_and_check(shellac.addr, "GET", "/empty", "").await;
    assert!(empty.body.is_empty());
    assert!(empty.kept, "{}", empty.head);
    let streamed = ask_and_check(shellac.addr, "GET", "/empty-streamed", "").await;
    assert!(streamed.body.is_empty(), "{}", streamed.head);
    for path in ["/cached", "/streamed", "/streamed-cacheable"] {
        let head = ask_and_check(shellac.addr, "HEAD", path, "").await;
        assert_eq!(head.status(), 200, "HEAD {path}");
    }
    // The cached page is fresh now: HEAD and a matching If-None-Match keep the connection.
    let head = ask_and_check(shellac.addr, "HEAD", "/cached", "").await;
    assert!(head.kept, "HEAD of a hit: {}", head.head);
    let not_modified =
        ask_and_check(shellac.addr, "GET", "/cached", "If-None-Match: \"v1\"\r\n").await;
    assert_eq!(not_modified.status(), 304, "{}", not_modified.head);
    assert!(not_modified.kept, "{}", not_modified.head);
    shellac.stop().await;
}
