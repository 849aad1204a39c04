//! A backend's own reason phrase without VCL (the `[[rule]]` policy): stored with the object
//! (`cache::status_line`), so every hit sends the phrase the miss did. Fast hits step aside
//! for such an object; an object whose phrase is its status's own is theirs, and so is one
//! whose phrase is too long to keep (past 128 bytes: the miss and the hits send the status's
//! own).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::common::raw_origin::RawOrigin;
use super::common::*;

/// A phrase past `cache::status_line::MAX_BACKEND_REASON` (128 bytes).
fn long_phrase() -> String {
    "Fine".repeat(40)
}

/// The head of the answer to `GET path` on a kept-alive connection (fast hits take only
/// those), read up to its one-byte body.
async fn head_of(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test.example\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n")
            && got.len() > end + 4
        {
            return String::from_utf8_lossy(&got[..end]).into_owned();
        }
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("answered in time")
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_own_reason_phrase_is_stored_without_vcl() {
    let origin = RawOrigin::start(|req| {
        let line = if req.starts_with(b"GET /okay ") {
            "200 Okay".to_string()
        } else if req.starts_with(b"GET /long ") {
            format!("200 {}", long_phrase())
        } else {
            "200 OK".to_string()
        };
        format!("HTTP/1.1 {line}\r\ncache-control: max-age=60\r\ncontent-length: 1\r\n\r\nx")
            .into_bytes()
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    // (path, the miss's status line, the hits')
    let cases = [
        ("/okay", "HTTP/1.1 200 Okay\r\n", "HTTP/1.1 200 Okay\r\n"),
        ("/ok", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\n"),
        ("/long", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\n"),
    ];
    for (path, miss_line, hit_line) in cases {
        let miss = head_of(shellac.addr, path).await;
        assert!(miss.starts_with(miss_line), "{path}: {miss}");
        assert!(miss.contains("fwd=miss"), "{path}: {miss}");
        for round in 0..2 {
            let hit = head_of(shellac.addr, path).await;
            assert!(hit.starts_with(hit_line), "{path} {round}: {hit}");
            assert!(hit.contains("shellac; hit"), "{path} {round}: {hit}");
            assert!(!hit.contains("shellac-status"), "{path}: {hit}");
        }
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit"], 6);
    // The two hits of /okay took the full path; those of /ok and /long were fast.
    assert_eq!(stats["cache_hit_fast"], 4);
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
    origin.stop();
}
