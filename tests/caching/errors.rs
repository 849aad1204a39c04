//! Failure handling: backend refused / connect timeout / first byte / between bytes, malformed
//! client requests, client idle and header-read timeouts. Each with its status and counter.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::*;
use shellac::config::units::Dur;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_backend_is_503() {
    let dead = SocketAddr::from(([127, 0, 0, 1], refused_port()));
    let shellac = Shellac::start(dead, |_| {}).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 503);
    assert!(r.text().contains("backend-connect-failed"), "{}", r.text());
    assert_eq!(
        r.header("cache-status"),
        Some("shellac; detail=backend-connect-failed")
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_fail"], 1);
    assert_eq!(stats["synth_resp"], 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_timeout_is_503() {
    // A listener with a backlog of 0 that never accepts: once its queue is full, further SYNs
    // are dropped and connecting hangs.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
        {
            fillers.push(s);
        }
    }
    let shellac = Shellac::start(addr, |c| {
        c.backends[0].connect_timeout = Dur(Duration::from_millis(200))
    })
    .await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 503);
    assert!(r.text().contains("backend-connect-timeout"), "{}", r.text());
    assert_eq!(shellac.stat("backend_fail").await, 1);
    shellac.stop().await;
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_byte_timeout_is_504() {
    let origin = Origin::start(|_| Reply::ok("late").delay(Duration::from_secs(2))).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].first_byte_timeout = Dur(Duration::from_millis(200))
    })
    .await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 504);
    assert!(r.text().contains("backend-first-byte-timeout"));
    assert_eq!(shellac.stat("backend_timeout").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn between_bytes_timeout_truncates_and_stores_nothing() {
    let origin = Origin::start(|_| {
        Reply::ok("").cc("max-age=60").body(ReplyBody::Stall {
            first: b"part".to_vec(),
            pause: Duration::from_secs(2),
            rest: b"never".to_vec(),
        })
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].between_bytes_timeout = Dur(Duration::from_millis(200))
    })
    .await;
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let body = http_body_util::BodyExt::collect(resp.into_body()).await;
    assert!(
        body.is_err(),
        "a truncated body is an error for the client, not a short success"
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_body_timeout"], 1);
    assert_eq!(stats["n_object"], 0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_request_is_400_and_closes() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let out = raw(
        shellac.addr,
        b"GET / HTTP/1.1\r\nHost: a\r\nBad Header Line\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert_eq!(
        out.matches("HTTP/1.1").count(),
        1,
        "connection closed after the 400: {out}"
    );
    assert_eq!(shellac.stat("client_req_400").await, 1);

    let out = raw(
        shellac.addr,
        b"GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 400"), "missing Host: {out}");
    assert!(out.contains("missing-host"), "{out}");
    assert_eq!(
        out.matches("HTTP/1.1 ").count(),
        1,
        "closed after the 400: {out}"
    );

    let out = raw(
        shellac.addr,
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 400"), "duplicate Host: {out}");
    assert_eq!(origin.count(), 0, "nothing malformed reached the backend");
    assert_eq!(shellac.stat("client_req_400").await, 3);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_client_connections_are_closed() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.idle_timeout = Dur(Duration::from_millis(300))
    })
    .await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    // Read the response and then, without sending anything else, until the server closes.
    // (The response may arrive in several reads: read to EOF rather than counting reads.)
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "closed within 5 s");
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    assert_eq!(shellac.stat("client_idle_closed").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_heads_are_cut_off() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.header_read_timeout = Dur(Duration::from_millis(300))
    })
    .await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n").await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("closed within 5 s");
    assert_eq!(n.unwrap_or(0), 0);
    assert_eq!(shellac.stat("client_header_timeout").await, 1);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_refused() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let out = raw(
        shellac.addr,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

/// An expectation other than `100-continue` is answered 417 before anything reaches the
/// origin (RFC 9110 §10.1.1; varnishtest 2.1.5/c00018); `100-continue` goes through.
#[tokio::test]
async fn an_unknown_expectation_is_417() {
    let origin = Origin::start(|seen| Reply::ok(&seen.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let text = raw(
        shellac.addr,
        b"POST /a HTTP/1.1\r\nHost: a\r\nExpect: 101-continue\r\nContent-Length: 3\r\n\r\nfoo",
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 417 "), "{text}");
    assert_eq!(origin.count(), 0);
    let text = raw(
        shellac.addr,
        b"POST /b HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\nfoo",
    )
    .await;
    assert!(text.contains("HTTP/1.1 200 "), "{text}");
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}
