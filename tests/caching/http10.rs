//! HTTP/1.0 clients and keep-alive (issue 32): HTTP/1.0 has no chunked coding, so a response
//! may promise `Connection: keep-alive` only when its body's end is known without closing —
//! a `Content-Length`, or no body at all (HEAD, 304). A body whose length Shellac does not
//! know (an origin streaming chunked) is answered with `Connection: close` and the connection
//! closed after it. Each case is checked with a raw HTTP/1.0 client that asks for keep-alive
//! and holds Shellac to what it answered: a kept connection must serve a second request.
//! The status line says `HTTP/1.1` (RFC 9110 §6.2, as nginx, Apache and Varnish answer),
//! whoever writes it: hyper for pages, hits and Shellac's own refusals, the admin listener
//! (vendor/hyper/PATCHES.md §1); the HTTP/1.0 semantics stay.

use std::time::Duration;

use crate::common::*;
use shellac::config::units::Size;
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
    // RFC 9110 §6.2: the highest version Shellac conforms to whose major is the request's.
    assert!(
        head.starts_with("HTTP/1.1 "),
        "HTTP/1.1 status line to HTTP/1.0: {head}"
    );
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

/// One exchange on a fresh connection, read to the close (or 10 s): (status line, fields,
/// body, closed). The head's fields are lower-cased names.
async fn once(
    addr: std::net::SocketAddr,
    req: &[u8],
) -> (String, Vec<(String, String)>, String, bool) {
    let seen = exchange(addr, req, Duration::from_secs(10)).await;
    let (head, body) = seen
        .text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("a response head: {:?}", seen.text));
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_string();
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, fields, body.to_string(), seen.closed)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// RFC 9110 §6.2: an HTTP/1.0 request is answered with an `HTTP/1.1` status line (trunk
/// b00002). Without keep-alive the answer says `Connection: close` — an HTTP/1.1 status line
/// without it would promise a persistent connection — and the connection closes; the body
/// is framed as HTTP/1.0 allows (a length, or the close; never chunked). A miss, a hit, a
/// page the origin streams, a 404 and a HEAD alike; counted as requests like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_is_answered_with_an_http11_status_line_and_close() {
    let origin = origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let before = shellac.stat("client_req").await;
    let cases: [(&str, &str, &str); 5] = [
        ("GET", "/cached", "HTTP/1.1 200 OK"),
        ("GET", "/cached", "HTTP/1.1 200 OK"),
        ("GET", "/streamed", "HTTP/1.1 200 OK"),
        ("HEAD", "/streamed-cacheable", "HTTP/1.1 200 OK"),
        ("GET", "/ping", "HTTP/1.1 200 OK"),
    ];
    for (i, (method, path, line)) in cases.iter().enumerate() {
        let req = format!("{method} {path} HTTP/1.0\r\nHost: test.example\r\n\r\n");
        let (status, fields, body, closed) = once(shellac.addr, req.as_bytes()).await;
        assert_eq!(status, *line, "{i}: {method} {path}");
        assert_eq!(
            field(&fields, "connection"),
            Some("close"),
            "{i}: {fields:?}"
        );
        assert!(closed, "{i}: {method} {path}: closed after the answer");
        assert_eq!(field(&fields, "transfer-encoding"), None, "{i}: {fields:?}");
        match (*method, *path) {
            ("HEAD", _) => assert!(body.is_empty()),
            (_, "/ping") => assert_eq!(body, "pong"),
            // Streamed and uncached: no length Shellac knows, the close ends it.
            (_, "/streamed") => {
                assert_eq!(field(&fields, "content-length"), None, "{fields:?}");
                assert_eq!(body, BODY);
            }
            _ => {
                assert_eq!(field(&fields, "content-length"), Some("17"));
                assert_eq!(body, BODY);
            }
        }
        if i == 1 {
            let cs = field(&fields, "cache-status").unwrap_or_default();
            assert!(cs.contains("hit"), "the second /cached is a hit: {cs}");
        }
    }
    // Not found at the origin: still HTTP/1.1, the origin's status.
    let missing = Origin::start(|_| Reply::ok("no").status(404)).await;
    let other = Shellac::start(missing.addr, |_| {}).await;
    let (status, fields, _, closed) = once(other.addr, b"GET /gone HTTP/1.0\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert_eq!(field(&fields, "connection"), Some("close"));
    assert!(closed);
    other.stop().await;
    assert_eq!(shellac.stat("client_req").await - before, 5);
    assert_eq!(shellac.stat("cache_hit").await, 1, "the second /cached");
    shellac.stop().await;
}

/// The answers Shellac writes itself to an HTTP/1.0 client — refusals of the strict parser
/// (400, 413, 431, 414) — say `HTTP/1.1`, `Connection:
/// close`, close the connection, and are counted; nothing reaches the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_refusals_say_http11_and_close() {
    let origin = origin().await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.max_body_size = Size(100);
        c.server.max_field_size = Size(200);
        c.server.max_request_line = Size(300);
    })
    .await;
    let long_field = format!("GET / HTTP/1.0\r\nX-Long: {}\r\n\r\n", "a".repeat(300));
    let long_line = format!("GET /{} HTTP/1.0\r\n\r\n", "a".repeat(400));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "space before colon",
            b"GET / HTTP/1.0\r\nX-A : 1\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
        ),
        (
            "Transfer-Encoding in HTTP/1.0",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            "HTTP/1.1 400 Bad Request",
        ),
        (
            "body over max_body_size",
            b"POST / HTTP/1.0\r\nContent-Length: 1000\r\n\r\n".to_vec(),
            "HTTP/1.1 413 Payload Too Large",
        ),
        (
            "field line over max_field_size",
            long_field.into_bytes(),
            "HTTP/1.1 431 Request Header Fields Too Large",
        ),
        (
            "request line over max_request_line",
            long_line.into_bytes(),
            "HTTP/1.1 414 URI Too Long",
        ),
    ];
    let before = shellac.stats().await;
    for (name, req, line) in &cases {
        let (status, fields, _, closed) = once(shellac.addr, req).await;
        assert_eq!(status, *line, "{name}");
        assert_eq!(
            field(&fields, "connection"),
            Some("close"),
            "{name}: {fields:?}"
        );
        assert!(closed, "{name}: closed after the refusal");
    }
    let after = shellac.stats().await;
    let delta = |k: &str| after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
    assert_eq!(delta("client_req_400"), 2);
    assert_eq!(delta("client_reject_header"), 1);
    assert_eq!(delta("client_reject_framing"), 1);
    assert_eq!(delta("client_reject_limit"), 3);
    assert_eq!(origin.count(), 0, "nothing refused reaches the origin");
    shellac.stop().await;
}

/// The admin listener is served by the same (patched) hyper: an HTTP/1.0 request to it is
/// answered `HTTP/1.1` with `Connection: close`, its body delimited by the close or a length
/// (`shellac` commands speak HTTP/1.0 to it and read to the close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_to_the_admin_listener_says_http11_and_close() {
    let origin = origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let (status, fields, body, closed) = once(shellac.admin, b"GET /stats HTTP/1.0\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(field(&fields, "connection"), Some("close"), "{fields:?}");
    assert_eq!(field(&fields, "transfer-encoding"), None, "{fields:?}");
    assert!(closed);
    assert!(body.contains("client_req"), "{body}");
    shellac.stop().await;
}
