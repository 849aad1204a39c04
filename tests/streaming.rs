//! Bodies are streamed, never buffered whole: a 21 MB pass response and a 100 MB upload go
//! through with the process's peak memory growing far less than their size.
//!
//! One test function on purpose: peak RSS is per process, so nothing may run beside it.

mod common;

use std::time::Duration;

use common::*;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MB: u64 = 1024 * 1024;

fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_through() {
    let origin = Origin::start(|s| match s.path.as_str() {
        "/video.flv" => Reply::ok("").cc("no-store").body(ReplyBody::Generated {
            len: 21 * MB,
            chunk: 64 * 1024,
        }),
        "/cached.flv" => Reply::ok("").cc("max-age=600").body(ReplyBody::Generated {
            len: 21 * MB,
            chunk: 64 * 1024,
        }),
        _ => Reply::ok(&format!("received {}", s.body_len)),
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    // Warm up allocators and the connection pool.
    get(shellac.addr, "/warm").await;
    let before = peak_rss();

    // 21 MB download, read frame by frame.
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/video.flv", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut got = 0u64;
    while let Some(frame) = body.frame().await {
        got += frame
            .unwrap()
            .into_data()
            .map(|d| d.len() as u64)
            .unwrap_or(0);
    }
    assert_eq!(got, 21 * MB);

    // 100 MB chunked upload, written piece by piece.
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").await.unwrap();
    let piece = vec![b'u'; 256 * 1024];
    for _ in 0..400 {
        s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await
            .unwrap();
        s.write_all(&piece).await.unwrap();
        s.write_all(b"\r\n").await.unwrap();
    }
    s.write_all(b"0\r\n\r\n").await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.contains(&format!("received {}", 100 * MB)), "{out}");

    let growth = peak_rss().saturating_sub(before);
    assert!(
        growth < 24 * MB,
        "peak RSS grew by {} MiB for 121 MiB streamed",
        growth / MB
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["s_req_bytes"], 100 * MB);
    assert!(stats["s_resp_bytes"] >= 21 * MB);

    // A cacheable 21 MB object is stored and served whole from the cache.
    let first = get(shellac.addr, "/cached.flv").await;
    assert_eq!(first.body.len() as u64, 21 * MB);
    // The fill may still be storing it after the client has its last byte (a loaded
    // machine): asked once it is stored.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while shellac.stats().await["cache_insert"] == 0 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hit = get(shellac.addr, "/cached.flv").await;
    assert_eq!(hit.body.len() as u64, 21 * MB);
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(origin.count_path("/cached.flv"), 1);
    shellac.stop().await;
}
