//! Refused requests in the access log: every refusal by the strict parser, a body that breaks
//! framing later, and a connection over `max_connections` is one line with its status, the
//! request line when it was valid (else `-`), the client and the reason `refused:<word>`.

use shellac::config::units::Size;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// Waits (bounded: 10 s) until the gauge `name` is `want`.
async fn wait_stat(shellac: &Shellac, name: &str, want: u64) {
    for _ in 0..500 {
        if shellac.stat(name).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{name} never became {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_are_access_log_lines() {
    let dir = TempDir::new("refused-log");
    let path = dir.path("access.log");
    let origin = Origin::start(|_| Reply::ok("ok").cc("max-age=60")).await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        c.log.access_log = log;
        c.log.format = "%h|%r|%m|%U%q|%H|%s|%{cache}x|%{reason}x".into();
        c.server.max_request_line = Size(64);
        c.server.max_header_size = Size(1024);
        c.server.max_body_size = Size(10);
        c.server.max_connections = 2;
    })
    .await;
    let vectors: &[(&[u8], &[u16])] = &[
        (
            b"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            &[400],
        ),
        // A TLS hello: not even a method.
        (b"\x16\x03\x01\x00\x05hello\r\n\r\n", &[400]),
        (
            format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "x".repeat(100)).leak().as_bytes(),
            &[414],
        ),
        (
            format!("GET /big HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "y".repeat(1100))
                .leak()
                .as_bytes(),
            &[431],
        ),
        (b"POST /b?x=1 HTTP/1.0\r\nContent-Length: 11\r\n\r\n", &[413]),
        (
            b"POST /te HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            &[501],
        ),
        // A good request, then a refused one on the same connection.
        (
            b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\nGET /dup HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            &[200, 400],
        ),
    ];
    for (send, statuses) in vectors {
        // Refused connections linger until the client closes: stay under max_connections.
        wait_stat(&shellac, "n_client_conn", 0).await;
        let got = exchange(shellac.addr, send, Duration::from_secs(3)).await;
        assert_eq!(&got.statuses(), statuses, "{}", got.text);
        assert!(got.closed);
    }
    // A chunked body that breaks its framing after the head went to the backend.
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(
        b"POST /late HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.write_all(b"zz\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    assert!(
        out.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    drop(s);
    wait_stat(&shellac, "n_client_conn", 0).await;
    // Over max_connections: 503 without reading the request.
    let held = (
        TcpStream::connect(shellac.addr).await.unwrap(),
        TcpStream::connect(shellac.addr).await.unwrap(),
    );
    wait_stat(&shellac, "n_client_conn", 2).await;
    let got = exchange(
        shellac.addr,
        b"GET /over HTTP/1.1\r\nHost: a\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(got.statuses(), vec![503], "{}", got.text);
    drop(held);

    let mut lines = wait_lines(&path, 10).await;
    lines.sort();
    let mut want = vec![
        "127.0.0.1|-|-||-|400|synth|refused:bad-method",
        "127.0.0.1|-|-||-|414|synth|refused:uri-too-long",
        "127.0.0.1|-|-||-|503|synth|refused:max-connections",
        "127.0.0.1|GET /big HTTP/1.1|GET|/big|HTTP/1.1|431|synth|refused:header-too-large",
        "127.0.0.1|GET /dup HTTP/1.1|GET|/dup|HTTP/1.1|400|synth|refused:duplicate-host",
        "127.0.0.1|GET /ok HTTP/1.1|GET|/ok|HTTP/1.1|200|miss|-",
        "127.0.0.1|POST /b?x=1 HTTP/1.0|POST|/b?x=1|HTTP/1.0|413|synth|refused:body-too-large",
        "127.0.0.1|POST /late HTTP/1.1|POST|/late|HTTP/1.1|400|synth|refused:bad-chunk-size",
        "127.0.0.1|POST /te HTTP/1.1|POST|/te|HTTP/1.1|501|synth|refused:unknown-transfer-coding",
        "127.0.0.1|POST /up HTTP/1.1|POST|/up|HTTP/1.1|400|synth|refused:content-length-and-transfer-encoding",
    ];
    want.sort();
    assert_eq!(lines, want);
    let stats = shellac.stats().await;
    assert_eq!(stats["client_refused"], 9);
    assert_eq!(stats["client_conn_refused"], 1);
    assert_eq!(stats["client_linger_skipped"], 0);
    assert_eq!(stats["log_dropped"], 0);
    shellac.stop().await;
    origin.stop();
}

/// JSON lines and `shellac log` show an unparsable request line as null / `-`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_in_json_lines() {
    let dir = TempDir::new("refused-json");
    let path = dir.path("access.log");
    let bench = Bench::with(|c| {
        c.log.access_log = path.to_str().unwrap().to_string();
        c.log.format = "json".into();
    })
    .await;
    let got = exchange(
        bench.shellac.addr,
        b"GET /a\x01 HTTP/1.1\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(got.statuses(), vec![400]);
    let lines = wait_lines(&path, 1).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["method"], serde_json::Value::Null);
    assert_eq!(v["url"], serde_json::Value::Null);
    assert_eq!(v["protocol"], serde_json::Value::Null);
    assert_eq!(v["status"], 400);
    assert_eq!(v["cache"], "synth");
    assert_eq!(v["reason"], "refused:bad-target");
    assert_eq!(v["client"], "127.0.0.1");
    assert_eq!(bench.origin.count(), 0);
    let line = shellac::console::render_log_line(&v).unwrap();
    assert!(
        line.contains(" 127.0.0.1 - - 400 synth(refused:bad-target) "),
        "{line}"
    );
    bench.stop().await;
}
