//! Hits over HTTP/2 as they are answered since issue 20's per-hit work: the stream runs on
//! the connection's task (no task of its own unless it has to wait: `server/h2/inline.rs`),
//! response bodies that fit are copied into h2's write buffer so several responses share a
//! write, and the rest are written with their frame head in one vectored write
//! (vendor/h2/PATCHES.md §7, `server/h2/frames.rs`). None of that may change an answer: a hit
//! over HTTP/2 has the fields, `Age`, `Cache-Status`, conditional and Range answers, HEAD,
//! access log line and counters of the same hit over HTTP/1.1, and every body arrives whole
//! and in order, whether it fits the client's window or waits for it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::h2::*;
use crate::common::*;
use bytes::Bytes;

fn h2c(c: &mut shellac::config::Config) {
    c.http2.h2c = shellac::config::http2::H2c::All;
}

/// A body of `len` bytes that no shift or swap of pieces leaves unchanged.
fn pattern(len: usize, seed: u64) -> String {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'a' + ((x >> 33) % 26) as u8)
        })
        .collect()
}

/// The size of `/obj/N`'s body.
fn size_of(path: &str) -> usize {
    path.rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}

fn origin_reply(s: &Seen) -> Reply {
    let len = size_of(&s.path);
    Reply::ok(&pattern(len, len as u64))
        .cc("max-age=600")
        .header("etag", "\"e1\"")
        .header("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT")
        .header("content-type", "application/x-test")
        .header("x-origin", "kept as is")
}

/// The response's fields but `Date` (per second), `Age` and `Cache-Status` (whose TTL counts
/// down), which the caller compares on their own.
fn fields(r: &Resp) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in &r.headers {
        if matches!(name.as_str(), "date" | "age" | "cache-status") {
            continue;
        }
        out.entry(name.as_str().to_string())
            .or_default()
            .push(value.to_str().unwrap_or("?").to_string());
    }
    out
}

fn age(r: &Resp) -> u64 {
    r.header("age")
        .and_then(|a| a.parse().ok())
        .expect("an Age")
}

/// `Cache-Status` with its TTL taken out.
fn status_words(r: &Resp) -> String {
    r.cache_status()
        .split("; ")
        .filter(|p| !p.starts_with("ttl="))
        .collect::<Vec<_>>()
        .join("; ")
}

fn assert_same_hit(h2: &Resp, h1: &Resp, what: &str) {
    assert_eq!(h2.status, h1.status, "{what}: status");
    assert_eq!(fields(h2), fields(h1), "{what}: fields");
    assert_eq!(status_words(h2), status_words(h1), "{what}: Cache-Status");
    assert!(h2.cache_status().starts_with("shellac; hit"), "{what}");
    // The two hits are asked one after the other; a loaded machine may take seconds between.
    assert!(age(h2).abs_diff(age(h1)) <= 10, "{what}: Age");
    assert_eq!(h2.body, h1.body, "{what}: body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_hit_is_the_http1_hit() {
    let dir = temp_dir("h2-hits-log");
    let log = dir.join("access.log");
    let origin = Origin::start(origin_reply).await;
    let log_path = log.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.log.access_log = log_path;
    })
    .await;
    let path = "/obj/6300";
    let body = pattern(6300, 6300);
    // The miss over HTTP/1.1 stores it.
    let miss = get(shellac.addr, path).await;
    assert!(miss.cache_status().contains("fwd=miss"));
    let before = shellac.stats().await;

    let mut h2 = H2Conn::open(shellac.addr).await;
    let mut h1 = Conn::open(shellac.addr).await;
    let hit2 = h2.send("GET", path, &[], b"").await;
    let hit1 = h1.send("GET", path, &[], b"").await;
    assert_eq!(hit2.text(), body);
    assert_same_hit(&hit2, &hit1, "GET");
    assert_eq!(hit2.header("content-length"), Some("6300"));

    let head2 = h2.send("HEAD", path, &[], b"").await;
    let head1 = h1.send("HEAD", path, &[], b"").await;
    assert!(head2.body.is_empty());
    assert_same_hit(&head2, &head1, "HEAD");
    assert_eq!(head2.header("content-length"), Some("6300"));

    let inm = [("if-none-match", "\"e1\"")];
    let nm2 = h2.send("GET", path, &inm, b"").await;
    let nm1 = h1.send("GET", path, &inm, b"").await;
    assert_eq!(nm2.status, 304);
    assert!(nm2.body.is_empty());
    assert_same_hit(&nm2, &nm1, "If-None-Match");
    assert_eq!(nm2.header("etag"), Some("\"e1\""));

    let range = [("range", "bytes=100-199")];
    let r2 = h2.send("GET", path, &range, b"").await;
    let r1 = h1.send("GET", path, &range, b"").await;
    assert_eq!(r2.status, 206);
    assert_eq!(r2.header("content-range"), Some("bytes 100-199/6300"));
    assert_eq!(&r2.body[..], &body.as_bytes()[100..200]);
    assert_same_hit(&r2, &r1, "Range");

    // Counters: eight hits, four of them over HTTP/2; nothing went to the origin.
    let after = shellac.stats().await;
    let delta = |k: &str| after[k] - before[k];
    assert_eq!(delta("client_req"), 8);
    assert_eq!(delta("cache_hit"), 8);
    assert_eq!(delta("h2_req"), 4);
    assert_eq!(delta("cache_miss"), 0);
    assert_eq!(origin.count(), 1);

    // The access log: each HTTP/2 line is an HTTP/1.1 line but for the protocol (the
    // HTTP/1.1 hits came from the fast hit path, the HTTP/2 ones from the full path). The log
    // thread writes each worker's records in order, not the two connections' interleaved.
    let lines = wait_lines(&log, 9).await;
    let parts: Vec<String> = lines
        .iter()
        .map(|l| l[l.find('"').expect("a request")..].to_string())
        .collect();
    for (req, status, len) in [
        ("GET", 200, "6300"),
        ("HEAD", 200, "-"),
        ("GET", 304, "-"),
        ("GET", 206, "100"),
    ] {
        let want = format!("\"{req} {path} HTTP/2.0\" {status} {len} ");
        let over_h2 = parts
            .iter()
            .find(|p| p.starts_with(&want))
            .unwrap_or_else(|| panic!("no line {want} in {lines:?}"));
        let over_h1 = over_h2.replace("HTTP/2.0", "HTTP/1.1");
        assert!(parts.contains(&over_h1), "no {over_h1} in {lines:?}");
    }
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Many streams at once on one connection, bodies from 100 bytes to 300 KB (several fit
/// h2's write buffer together, others are chained, the largest wait for the client's
/// window): each arrives whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_hits_of_every_size_arrive_whole() {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let sizes = [100usize, 6300, 9000, 16_384, 40_000, 300_000];
    for size in sizes {
        let r = get(shellac.addr, &format!("/obj/{size}")).await;
        assert_eq!(r.body.len(), size);
    }
    let conn = H2Conn::open(shellac.addr).await;
    let mut tasks = Vec::new();
    for i in 0..60 {
        let size = sizes[i % sizes.len()];
        let mut sender = conn.sender();
        tasks.push(tokio::spawn(async move {
            let req = http::Request::get(format!("http://test.example/obj/{size}"))
                .version(http::Version::HTTP_2)
                .body(http_body_util::Full::new(Bytes::new()))
                .unwrap();
            sender.ready().await.unwrap();
            let resp = sender.send_request(req).await.expect("a response");
            let cache_status = resp.headers()["cache-status"].to_str().unwrap().to_string();
            let body = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .expect("the body")
                .to_bytes();
            (size, cache_status, body)
        }));
    }
    for t in tasks {
        let (size, cache_status, body) = t.await.unwrap();
        assert!(cache_status.starts_with("shellac; hit"), "{cache_status}");
        assert_eq!(body.len(), size);
        assert!(body == pattern(size, size as u64).as_bytes(), "/obj/{size}");
    }
    assert_eq!(origin.count(), sizes.len());
    shellac.stop().await;
}

/// A client whose windows are smaller than the bodies: the streams cannot finish in their
/// first poll on the connection task and go on as tasks of their own, sending as the client
/// opens its window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_that_wait_for_the_clients_window_finish() {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    for size in [6300usize, 100_000] {
        get(shellac.addr, &format!("/obj/{size}")).await;
    }
    let tcp = tokio::net::TcpStream::connect(shellac.addr).await.unwrap();
    let (client, conn) = ::h2::client::Builder::new()
        .initial_window_size(1000)
        .initial_connection_window_size(3000)
        .handshake::<_, Bytes>(tcp)
        .await
        .expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut streams = Vec::new();
    for i in 0..6 {
        let size = if i % 2 == 0 { 6300 } else { 100_000 };
        let mut client = client.clone().ready().await.unwrap();
        let req = http::Request::get(format!("http://test.example/obj/{size}"))
            .body(())
            .unwrap();
        let (resp, _) = client.send_request(req, true).expect("a stream");
        streams.push((size, resp));
    }
    // Read all at once: a client reading one stream while another's unread data holds the
    // connection window would stall itself.
    let readers: Vec<_> = streams
        .into_iter()
        .map(|(size, resp)| {
            tokio::spawn(async move {
                let resp = resp.await.expect("a response");
                assert_eq!(resp.status(), 200);
                let mut body = resp.into_body();
                let mut got = Vec::new();
                while let Some(chunk) = body.data().await {
                    let chunk = chunk.expect("data");
                    got.extend_from_slice(&chunk);
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                (size, got)
            })
        })
        .collect();
    for reader in readers {
        let (size, got) = tokio::time::timeout(Duration::from_secs(20), reader)
            .await
            .expect("the body in time")
            .expect("the reader");
        assert_eq!(got.len(), size);
        assert!(got == pattern(size, size as u64).as_bytes(), "/obj/{size}");
    }
    shellac.stop().await;
}
