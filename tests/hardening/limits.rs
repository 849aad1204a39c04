//! Resource limits and slow clients: sizes (414, 431, 413), slow request bodies, slow readers,
//! connection limits, and an accept loop that survives running out of file descriptors.

use std::process::Command;

use shellac::config::units::{Dur, Size};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use common::binary::{BIN, Served};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_limits() {
    let bench = Bench::with(|c| {
        c.server.max_request_line = Size(256);
        c.server.max_header_size = Size(2048);
        c.server.max_headers = 10;
        c.server.max_body_size = Size(100);
    })
    .await;
    let long = "x".repeat(300);
    let v = vec![
        Vector::refused("URI too long", with_after(&format!("GET /{long} HTTP/1.1\r\nHost: a\r\n"), ""), 414),
        // Refused as soon as the line is too long, without waiting for the rest of the head.
        Vector::refused("URI too long, head unfinished", format!("GET /{long}"), 414),
        Vector::refused(
            "head too large",
            with_after(&format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n", "y".repeat(2100)), ""),
            431,
        ),
        Vector::refused(
            "too many fields",
            with_after(
                &format!("GET / HTTP/1.1\r\nHost: a\r\n{}", "X: 1\r\n".repeat(10)),
                "",
            ),
            431,
        ),
        Vector::refused(
            "body too large by Content-Length",
            with_after("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n", ""),
            413,
        ),
        Vector::refused(
            "body too large chunked",
            with_after(
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n",
                &format!("65\r\n{}\r\n0\r\n\r\n", "z".repeat(101)),
            ),
            413,
        ),
        Vector::new(
            "at the limits",
            format!(
                "POST /{} HTTP/1.1\r\nHost: a\r\n{}Content-Length: 100\r\nConnection: close\r\n\r\n{}",
                "x".repeat(200),
                "X: 1\r\n".repeat(6),
                "z".repeat(100)
            ),
        )
        .expect(&[200], 1),
    ];
    bench.run(&v).await;
    assert_eq!(bench.origin.count(), 1);
    assert_eq!(bench.shellac.stat("client_reject_limit").await, 6);
    bench.stop().await;
}

/// Issue 32: `server.max_field_size` (Varnish's `http_req_hdr_len`, nginx's per-line buffer)
/// bounds each request field line: at the limit it passes, one byte more is 431 however small
/// the head, counted in `client_reject_limit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_field_size_refuses_one_long_field_line() {
    let bench = Bench::with(|c| {
        c.server.max_field_size = Size(40);
    })
    .await;
    let field = "1...5: ..0....5....0....5....0....5....0";
    assert_eq!(field.len(), 40);
    let v = vec![
        Vector::new(
            "field line at the limit",
            format!("GET /1 HTTP/1.1\r\nHost: a\r\n{field}\r\nConnection: close\r\n\r\n"),
        )
        .expect(&[200], 1),
        Vector::refused(
            "field line one byte over",
            with_after(&format!("GET /2 HTTP/1.1\r\nHost: a\r\n{field}.\r\n"), ""),
            431,
        ),
    ];
    bench.run(&v).await;
    assert_eq!(bench.origin.count(), 1);
    assert_eq!(bench.shellac.stat("client_reject_limit").await, 1);
    bench.stop().await;
}

/// Issue 32: `server.send_total_timeout` (Varnish's `send_timeout`): a client that reads, but
/// so slowly that `send_timeout` (no progress at all) never fires, is closed once its response
/// has taken longer than the total, counted in `client_send_total_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_total_timeout_closes_a_trickle_reader() {
    let origin = RawOrigin::sized(16 << 20).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.send_timeout = Dur(Duration::from_secs(30));
        c.server.send_total_timeout = Dur(Duration::from_millis(500));
    })
    .await;
    let mut s = connect_small_window(shellac.addr).await;
    s.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    // 4 KiB every 50 ms (~80 KB/s, never stalled for send_timeout): the 16 MiB would take
    // minutes; the total cuts it off, long before half of it was read.
    let gave_up = || async { shellac.stat("client_send_total_timeout").await >= 1 };
    assert!(
        trickle_until_closed(&mut s, 8 << 20, gave_up).await,
        "the trickle reader was closed"
    );
    assert_eq!(shellac.stat("client_send_total_timeout").await, 1);
    assert_eq!(shellac.stat("client_send_timeout").await, 0);
    drop(s);
    shellac.stop().await;
    origin.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_bodies_are_cut_off() {
    let bench = Bench::with(|c| {
        c.server.body_timeout = Dur(Duration::from_millis(300));
        c.server.body_min_rate = Size(1000);
    })
    .await;
    // A body that stops: closed once it has stalled for body_timeout.
    let mut s = TcpStream::connect(bench.shellac.addr).await.unwrap();
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("closed within 10 s");
    assert_eq!(n.unwrap_or(0), 0, "closed without a response");
    // A body that trickles: each byte within body_timeout, but far below body_min_rate.
    let mut s = TcpStream::connect(bench.shellac.addr).await.unwrap();
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
        .await
        .unwrap();
    let mut closed = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if s.write_all(b"x").await.is_err() {
            closed = true;
            break;
        }
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await {
            closed = true;
            break;
        }
    }
    assert!(closed, "a trickling body is cut off");
    assert_eq!(bench.shellac.stat("client_body_timeout").await, 2);
    assert_eq!(
        bench.origin.count(),
        0,
        "no complete request reached the origin"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_are_cut_off() {
    let origin = RawOrigin::sized(8 << 20).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.send_timeout = Dur(Duration::from_millis(300));
    })
    .await;
    let mut s = connect_small_window(shellac.addr).await;
    s.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    // Never read: after send_timeout without progress the connection is closed.
    let mut waited = 0;
    while shellac.stat("client_send_timeout").await == 0 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(shellac.stat("client_send_timeout").await, 1);
    drop(s);
    shellac.stop().await;
    origin.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limit() {
    let bench = Bench::with(|c| c.server.max_connections = 2).await;
    let a = TcpStream::connect(bench.shellac.addr).await.unwrap();
    let b = TcpStream::connect(bench.shellac.addr).await.unwrap();
    // Let the accept loop register both.
    let mut waited = 0;
    while bench.shellac.stat("n_client_conn").await < 2 && waited < 500 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    let got = exchange(
        bench.shellac.addr,
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(got.statuses(), vec![503], "{}", got.text);
    assert!(got.closed);
    assert_eq!(bench.shellac.stat("client_conn_refused").await, 1);
    drop((a, b));
    let mut waited = 0;
    while bench.shellac.stat("n_client_conn").await > 0 && waited < 500 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    let got = exchange(
        bench.shellac.addr,
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(got.statuses(), vec![200]);
    bench.stop().await;
}

/// Regression: at max_connections the 503 was written and the socket closed at once, so a
/// client that had already sent its request (unread bytes on the server side) got a reset
/// after the 503 instead of the end of the stream. Now the refusal lingers: FIN after the 503,
/// the client's bytes read and discarded until it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_ends_cleanly_after_the_503() {
    let bench = Bench::with(|c| c.server.max_connections = 1).await;
    let held = TcpStream::connect(bench.shellac.addr).await.unwrap();
    let mut waited = 0;
    while bench.shellac.stat("n_client_conn").await < 1 && waited < 500 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    let mut request = b"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 32768\r\n\r\n".to_vec();
    request.extend_from_slice(&[b'x'; 32768]);
    // Whether the request is on the server's side before it closes is a race; every attempt
    // must end cleanly (with the old close-at-once, attempt 1 already got a reset).
    for attempt in 0..20 {
        let (got, end) = send_and_read_raw(bench.shellac.addr, &request).await;
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.starts_with("HTTP/1.1 503 "),
            "attempt {attempt}: {text}"
        );
        assert!(text.contains("detail=max-connections"), "{text}");
        assert_eq!(
            end,
            Ok(()),
            "attempt {attempt}: the stream ends with FIN, not a reset"
        );
    }
    let stats = bench.shellac.stats().await;
    assert_eq!(stats["client_conn_refused"], 20);
    assert_eq!(stats["client_refused"], 20);
    assert_eq!(stats["client_linger_skipped"], 0);
    assert_eq!(bench.origin.count(), 0);
    drop(held);
    bench.stop().await;
}

/// Sends `bytes` and reads to the end: the statuses seen, and whether the stream ended with
/// FIN (Ok) or a reset.
async fn send_and_read_to_end(
    addr: std::net::SocketAddr,
    bytes: &[u8],
) -> (Vec<u16>, Result<(), std::io::ErrorKind>) {
    let (got, end) = send_and_read_raw(addr, bytes).await;
    let got = Exchange {
        text: String::from_utf8_lossy(&got).into_owned(),
        closed: true,
    };
    (got.statuses(), end)
}

/// Sends `bytes` and reads to the end (at most 10 s without data): the bytes received, and
/// whether the stream ended with FIN (Ok) or a reset.
async fn send_and_read_raw(
    addr: std::net::SocketAddr,
    bytes: &[u8],
) -> (Vec<u8>, Result<(), std::io::ErrorKind>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) => break Ok(()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => break Err(e.kind()),
            Err(_) => panic!(
                "no end of stream within 10 s: {}",
                String::from_utf8_lossy(&got)
            ),
        }
    };
    (got, end)
}

/// Regression: CONNECT's 405 closed the socket with the client's pipelined bytes unread (hyper
/// gives a CONNECT's socket to its upgrade machinery, which dropped it without a shutdown), so
/// the client got a reset after the 405. CONNECT is now refused by the gate, and every refusal
/// ends with a lingering close (checked here too with a refused request's body unread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_closes_end_cleanly_with_unread_bytes() {
    let bench = Bench::start().await;
    let pipelined = "GET / HTTP/1.1\r\nHost: a\r\n\r\n".repeat(1000);
    let connect = format!("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n{pipelined}");
    let refused = format!(
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 30000\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        "x".repeat(30000)
    );
    for attempt in 0..20 {
        for (name, bytes, status) in [("CL+TE", &refused, 400), ("CONNECT", &connect, 405)] {
            let (statuses, end) = send_and_read_to_end(bench.shellac.addr, bytes.as_bytes()).await;
            assert_eq!(statuses, vec![status], "{name}, attempt {attempt}");
            assert_eq!(end, Ok(()), "{name}, attempt {attempt}: FIN, not a reset");
        }
    }
    assert_eq!(bench.origin.count(), 0);
    bench.stop().await;
}

/// Runs the real binary with a file-descriptor limit of 64, exhausts it with idle client
/// connections, and checks the accept loop backs off and serves again once they close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_loop_survives_emfile() {
    let origin = RawOrigin::ok().await;
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "ulimit -n 64 && exec {BIN} serve --listen 127.0.0.1:0 --admin 127.0.0.1:0 --backend {}",
        origin.addr
    ));
    let served = Served::start(cmd);
    let (proxy, admin) = (served.proxy, served.admin);
    // Hold more connections than the process has descriptors.
    let mut held = Vec::new();
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(proxy).await {
            held.push(s);
        }
    }
    let mut saw_emfile = false;
    for _ in 0..100 {
        if let Ok(line) = served.log.recv_timeout(Duration::from_millis(100))
            && line.contains("accept failed")
        {
            saw_emfile = true;
            break;
        }
    }
    assert!(saw_emfile, "the descriptor limit was reached");
    drop(held);
    // Served again once descriptors are free (bounded wait).
    let mut ok = false;
    for _ in 0..50 {
        let got = exchange(
            proxy,
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            Duration::from_secs(2),
        )
        .await;
        if got.statuses() == vec![200] {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "serving again after EMFILE");
    let stats = get(admin, "/stats").await.text();
    assert!(!stats.contains("\"client_accept_error\": 0,"), "{stats}");
    served.stop();
    origin.stop();
}

/// Regression (issue 23, defect 11): a refusal answered to a HEAD request carried a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_head_request_gets_no_body() {
    let bench = Bench::with(|c| c.server.max_request_line = Size(256)).await;
    let long = "x".repeat(300);
    for (name, req, status) in [
        (
            "duplicate Host",
            "HEAD / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_string(),
            400,
        ),
        (
            "URI too long",
            format!("HEAD /{long} HTTP/1.1\r\nHost: a\r\n\r\n"),
            414,
        ),
    ] {
        let text = raw(bench.shellac.addr, req.as_bytes()).await;
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status}")),
            "{name}: {text:?}"
        );
        let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
        assert_eq!(body, "", "{name}: no body after the head: {text:?}");
        // The head still says what a GET would have got (RFC 9110 §9.3.2).
        assert!(
            head.to_ascii_lowercase().contains("content-length: "),
            "{name}: {head}"
        );
    }
    // The same refusal to a GET has its body.
    let text = raw(
        bench.shellac.addr,
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    )
    .await;
    assert!(
        !text.split_once("\r\n\r\n").unwrap().1.is_empty(),
        "{text:?}"
    );
    assert_eq!(bench.origin.count(), 0);
    bench.shellac.stop().await;
}
