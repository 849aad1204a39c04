//! VCL constructs Shellac once refused as unsupported and now runs with Varnish's meaning,
//! end to end: `req.max_age`, `bereq.retry_connect`, `std.cache_req_body()`, saint mode, a
//! backend's `.preamble`, vmod blob and `req.hash`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;
use common::vcl::start_vcl;
use common::{Origin, Reply, get_with, request};

/// `req.max_age` (Varnish 8's name for `req.ttl`, varnishtest v00000): a positive value
/// below the object's TTL ends its freshness there, and its grace runs from then, as
/// Varnish's EXP_Ttl; zero or less (unset reads -1) changes nothing. The stored object is
/// 30 s old when it arrives (`Age: 30`), so no clock has to move.
#[tokio::test]
async fn req_max_age_caps_the_freshness_a_hit_may_have() {
    let origin = Origin::start(|_| Reply::ok("body").cc("max-age=60").header("age", "30")).await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (req.http.max-age) {
        set req.max_age = std.duration(req.http.max-age, 0s);
    }
    if (req.http.grace) {
        set req.grace = std.duration(req.http.grace, 0s);
    }
    set req.http.x-max-age = req.max_age;
}
sub vcl_backend_response { set beresp.grace = 1h; }
sub vcl_deliver {
    set resp.http.x-max-age = req.http.x-max-age;
    set resp.http.x-hits = obj.hits;
}
"#;
    let shellac = start_vcl("req-max-age", vcl, &[origin.addr]).await;
    let first = get_with(shellac.addr, "/", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-max-age"), Some("-1.000"), "unset reads -1");
    assert_eq!(origin.count(), 1);
    // Younger than the cap: a fresh hit.
    let r = get_with(shellac.addr, "/", &[("max-age", "40s")]).await;
    assert_eq!(r.header("x-max-age"), Some("40.000"));
    assert_eq!(r.header("x-hits"), Some("1"));
    assert!(!r.cache_status().contains("stale"), "{}", r.cache_status());
    // Zero is no cap (Varnish reads only a positive req.max_age).
    let r = get_with(shellac.addr, "/", &[("max-age", "0s")]).await;
    assert_eq!(r.header("x-hits"), Some("2"));
    assert!(!r.cache_status().contains("stale"), "{}", r.cache_status());
    assert_eq!(origin.count(), 1);
    // Older than the cap, with the request's grace cut to 0: a miss.
    let r = get_with(shellac.addr, "/", &[("max-age", "10s"), ("grace", "0s")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-hits"), Some("0"));
    assert_eq!(origin.count(), 2);
    // Older than the cap, within the object's grace counted from the cap: delivered stale
    // while a background fetch refreshes it.
    let r = get_with(shellac.addr, "/", &[("max-age", "10s")]).await;
    assert_eq!(r.status, 200);
    assert!(
        r.cache_status().contains("stale-while-revalidate"),
        "{}",
        r.cache_status()
    );
    for _ in 0..100 {
        if origin.count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.count(), 3, "the grace hit refreshed the object");
    shellac.stop().await;
}

/// An origin that answers the first request on each connection (`hello`, keep-alive) and
/// closes the connection when a second one arrives on it, as an origin whose idle timeout
/// ran out just as the proxy reused the connection. Returns its address and the requests it
/// read (heads).
async fn closes_reused_connections() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                for answered in 0.. {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match s.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    log.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&head).into_owned());
                    if answered == 1 {
                        return;
                    }
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
                        .await;
                }
            });
        }
    });
    (addr, seen)
}

/// `bereq.retry_connect` (varnishtest b00097): a bodyless request that fails on a reused
/// backend connection is tried once more on a new connection — unless VCL set
/// `bereq.retry_connect = false`, when it fails (503).
#[tokio::test]
async fn bereq_retry_connect_false_gives_up_on_a_dead_reused_connection() {
    let (origin, seen) = closes_reused_connections().await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { return (pass); }
sub vcl_backend_fetch {
    set bereq.http.x-default = bereq.retry_connect;
    if (bereq.http.no-retry) {
        set bereq.retry_connect = false;
    }
}
"#;
    let shellac = start_vcl("retry-connect", vcl, &[origin]).await;
    let r = get_with(shellac.addr, "/a", &[]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    // The pooled connection dies under the second request: retried on a new one.
    let r = get_with(shellac.addr, "/b", &[]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    // The same with retry_connect = false: no second try.
    let r = get_with(shellac.addr, "/c", &[("no-retry", "1")]).await;
    assert_eq!(r.status, 503);
    let seen = seen.lock().unwrap().clone();
    let paths: Vec<&str> = seen
        .iter()
        .map(|h| h.split(' ').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(paths, ["/a", "/b", "/b", "/c"]);
    assert!(seen[0].to_ascii_lowercase().contains("x-default: true"));
    shellac.stop().await;
}

/// `std.cache_req_body(size)` (varnishtest v00068): a request body of at most `size` bytes
/// is kept, and every backend request of the request sends it — here the retry vcl_backend_
/// response asks for after a 503, and the request after a restart. A longer body is not
/// kept (false): it goes once, whole (what was read ahead, then the rest), and the retry has
/// none: a retry or restart that would send it fails (503) instead of sending the request
/// without its body, as Varnish ("Uncached req.body can only be consumed once"). Kept bodies
/// are counted.
#[tokio::test]
async fn std_cache_req_body_keeps_a_body_for_retries_and_restarts() {
    // The first request for each path fails.
    let tried = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let origin = Origin::start(move |s| {
        if tried.lock().unwrap().insert(s.path.clone()) {
            Reply::ok("busy").status(503)
        } else {
            Reply::ok("done")
        }
    })
    .await;
    let vcl = r#"vcl 4.1;
import std;
backend b { ${origin0} }
sub vcl_recv {
    if (req.http.keep == "1k") {
        set req.http.x-kept = std.cache_req_body(1KB);
    } elsif (req.http.keep == "4") {
        set req.http.x-kept = std.cache_req_body(4B);
    }
    return (pass);
}
sub vcl_backend_response {
    if (beresp.status == 503 && bereq.retries == 0 && !bereq.http.restart) {
        return (retry);
    }
}
sub vcl_deliver {
    if (resp.status == 503 && req.restarts == 0) {
        set req.http.restart = "1";
        return (restart);
    }
    set resp.http.x-kept = req.http.x-kept;
}
"#;
    let shellac = start_vcl("cache-req-body", vcl, &[origin.addr]).await;
    let bodies = |from: usize| -> Vec<(String, u64)> {
        origin.seen.lock().unwrap()[from..]
            .iter()
            .map(|s| (s.method.clone(), s.body_len))
            .collect()
    };
    // Kept: the retry sends it again.
    let r = request(shellac.addr, "POST", "/a", &[("keep", "1k")], b"payload").await;
    assert_eq!((r.status, r.header("x-kept")), (200, Some("true")));
    assert_eq!(bodies(0), [("POST".into(), 7), ("POST".into(), 7)]);
    // Kept: the request after a restart sends it too.
    let r = request(
        shellac.addr,
        "POST",
        "/b",
        &[("keep", "1k"), ("restart", "1")],
        b"payload",
    )
    .await;
    assert_eq!((r.status, r.header("x-kept")), (200, Some("true")));
    assert_eq!(bodies(2), [("POST".into(), 7), ("POST".into(), 7)]);
    // Longer than the size: not kept; it goes once, and the retry (then the restart) that
    // would send it again fails.
    let r = request(shellac.addr, "POST", "/c", &[("keep", "4")], b"payload").await;
    assert_eq!((r.status, r.header("x-kept")), (503, Some("false")));
    assert_eq!(bodies(4), [("POST".into(), 7)]);
    // Longer than anything the program keeps (read ahead 1 KiB, then the rest streamed):
    // the whole body goes once.
    let big = vec![b'x'; 3000];
    let r = request(shellac.addr, "POST", "/d", &[("keep", "1k")], &big).await;
    assert_eq!((r.status, r.header("x-kept")), (503, Some("false")));
    assert_eq!(bodies(5), [("POST".into(), 3000)]);
    let stats = shellac.stats().await;
    assert_eq!(stats["req_body_cached"], 2);
    assert_eq!(stats["req_body_cached_bytes"], 14);
    assert_eq!(stats["s_req_bytes"], 7 * 5 + 3000);
    shellac.stop().await;
}

/// Saint mode (VCL 2.1/3.0 `set beresp.saintmode = ...;` in vcl_fetch, varnishtest 2.1.5
/// s00003): the backend that answered is held off for that URL — a director picks another
/// one for it, and only for it — and, held off for 10 URLs at once, for every URL.
#[tokio::test]
async fn saintmode_holds_a_backend_off_for_the_object_then_for_all() {
    let a = Origin::start(|s| {
        if s.path.starts_with("/bad") {
            Reply::ok("broken").status(500)
        } else {
            Reply::ok("from-a")
        }
    })
    .await;
    let b = Origin::start(|_| Reply::ok("from-b")).await;
    let vcl = r#"
backend a { ${origin0} }
backend b { ${origin1} }
director d round-robin { { .backend = a; } { .backend = b; } }
sub vcl_recv {
    set req.backend = d;
    return (lookup);
}
sub vcl_fetch {
    if (beresp.status == 500) {
        set beresp.saintmode = 1h;
        restart;
    }
    set beresp.cacheable = false;
    return (deliver);
}
"#;
    let shellac = start_vcl("saintmode", vcl, &[a.addr, b.addr]).await;
    for _ in 0..6 {
        let r = get_with(shellac.addr, "/bad", &[]).await;
        assert_eq!((r.status, r.text().as_str()), (200, "from-b"));
    }
    assert_eq!(a.count_path("/bad"), 1, "held off for /bad after its 500");
    for _ in 0..4 {
        assert_eq!(get_with(shellac.addr, "/ok", &[]).await.status, 200);
    }
    assert!(a.count_path("/ok") >= 1, "not held off for other URLs");
    // Nine more URLs held off: ten at once, a is held off for everything.
    for i in 0..9 {
        let path = format!("/bad{i}");
        for _ in 0..2 {
            let r = get_with(shellac.addr, &path, &[]).await;
            assert_eq!((r.status, r.text().as_str()), (200, "from-b"));
        }
    }
    let before = a.count();
    for _ in 0..4 {
        let r = get_with(shellac.addr, "/other", &[]).await;
        assert_eq!((r.status, r.text().as_str()), (200, "from-b"));
    }
    assert_eq!(
        a.count(),
        before,
        "held off for every object past the threshold"
    );
    shellac.stop().await;
}

/// Without `std.cache_req_body()`, a request body goes to one backend request: a VCL retry
/// that would send it again fails (503) rather than send the request without its body.
#[tokio::test]
async fn a_retry_never_sends_a_request_without_the_body_it_had() {
    let origin = Origin::start(|_| Reply::ok("busy").status(503)).await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv { return (pass); }
sub vcl_backend_response {
    if (beresp.status == 503 && bereq.retries == 0) {
        return (retry);
    }
}
"#;
    let shellac = start_vcl("body-once", vcl, &[origin.addr]).await;
    let r = request(shellac.addr, "POST", "/", &[], b"payload").await;
    assert_eq!(r.status, 503);
    let seen: Vec<u64> = origin
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.body_len)
        .collect();
    assert_eq!(seen, [7], "sent once, with its body");
    // A bodiless request is retried.
    let r = request(shellac.addr, "DELETE", "/", &[], b"").await;
    assert_eq!(r.status, 503);
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
}

/// A backend's `.preamble` (varnishtest b00075): the bytes go first on every connection
/// opened to the backend, once per connection (a reused one does not repeat them).
#[tokio::test]
async fn a_backend_preamble_opens_each_new_connection() {
    let origin = common::raw_origin::RawOrigin::start(|_| {
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec()
    })
    .await;
    // "PROXY UNKNOWN\r\n"
    let vcl = r#"vcl 4.1;
backend b { ${origin0} .preamble = :UFJPWFkgVU5LTk9XTg0K:; }
sub vcl_recv { return (pass); }
"#;
    let shellac = start_vcl("preamble", vcl, &[origin.addr]).await;
    let mut conn = common::Conn::open(shellac.addr).await;
    for path in ["/a", "/b"] {
        let r = conn.send("GET", path, &[], b"").await;
        assert_eq!(r.status, 200);
    }
    let streams = origin.streams.lock().unwrap().clone();
    assert_eq!(streams.len(), 1, "one pooled connection");
    let text = String::from_utf8_lossy(&streams[0]).into_owned();
    assert!(
        text.starts_with("PROXY UNKNOWN\r\nGET /a HTTP/1.1\r\n"),
        "{text:?}"
    );
    assert_eq!(text.matches("PROXY UNKNOWN").count(), 1, "{text:?}");
    assert!(text.contains("GET /b HTTP/1.1\r\n"));
    shellac.stop().await;
    // A preamble that is not base64 is refused with the file's position.
    let errors = shellac::vcl::compile_text(
        "t.vcl",
        "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; .preamble = \"text\"; }\n",
    )
    .unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.pos.line == 2 && e.message.contains("BLOB")),
        "{errors:?}"
    );
}

/// vmod blob and `req.hash` (varnishtest b00051): the digest is Varnish's (SHA-256 of the
/// hash inputs, each ended by a 0 byte: the value below is the one b00051 expects), a BLOB
/// is written as `:base64:`, and decode / encode / transcode / length / sub / equal follow
/// vmod_blob; a decoding that fails is a VCL failure (503).
#[tokio::test]
async fn vmod_blob_and_req_hash_are_varnishs() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60")).await;
    let vcl = r#"vcl 4.1;
import blob;
backend b { ${origin0} }
sub vcl_recv {
    if (req.url == "/bad") {
        set req.http.x = blob.encode(blob=blob.decode(HEX, encoded="zz"));
    }
}
sub vcl_backend_response {
    set beresp.http.bereq-hash = blob.encode(HEX, blob=bereq.hash);
}
sub vcl_deliver {
    set resp.http.hex = blob.encode(HEX, blob=req.hash);
    set resp.http.sf = req.hash;
    set resp.http.t = blob.transcode(BASE64, HEX, UPPER, encoded="Zm9v");
    set resp.http.u = blob.transcode(encoded="a b/c", encoding=URL);
    set resp.http.len = blob.length(blob.decode(HEX, encoded="00ff"));
    set resp.http.lit = blob.encode(HEX, blob=:Zm9v:);
    set resp.http.sub = blob.encode(blob=blob.sub(:Zm9vYmFy:, 3B, 2B));
    set resp.http.eq = blob.equal(blob.decode(encoded="foo"), :Zm9v:);
}
"#;
    let shellac = start_vcl("blob", vcl, &[origin.addr]).await;
    let r = get_with(shellac.addr, "/", &[("host", "localhost")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("sf"),
        Some(":3k0f0yRKtKt7akzkyNsTGSDOJAZOQowTwKWhu5+kIu0=:")
    );
    let hex = r.header("hex").unwrap();
    assert_eq!(hex.len(), 64);
    assert_eq!(r.header("bereq-hash"), Some(hex), "bereq.hash is req.hash");
    assert_eq!(r.header("t"), Some("666F6F"));
    assert_eq!(r.header("u"), Some("a%20b%2fc"));
    assert_eq!(r.header("len"), Some("2"));
    assert_eq!(r.header("lit"), Some("666f6f"));
    assert_eq!(r.header("sub"), Some("oba"));
    assert_eq!(r.header("eq"), Some("true"));
    assert_eq!(get_with(shellac.addr, "/bad", &[]).await.status, 503);
    shellac.stop().await;
    for (src, want) in [
        (
            "new x = blob.blob(BASE64, \"Zm9v\");",
            "only directors objects",
        ),
        (
            "set req.http.x = blob.encode(HEXA, blob=:Zm9v:);",
            "Expected one of",
        ),
        (
            "set req.http.x = blob.same(:Zm9v:, :Zm9v:);",
            "not implemented",
        ),
    ] {
        let sub = if src.starts_with("new") {
            "vcl_init"
        } else {
            "vcl_recv"
        };
        let text = format!(
            "vcl 4.1;\nimport blob;\nbackend b {{ .host = \"127.0.0.1\"; }}\nsub {sub} {{ {src} }}\n"
        );
        let errors = shellac::vcl::compile_text("t.vcl", &text).unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.pos.line == 4 && e.message.contains(want)),
            "{src}: {errors:?}"
        );
    }
}
