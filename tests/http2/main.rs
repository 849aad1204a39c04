//! HTTP/2 to clients over cleartext (h2c with prior knowledge): every cache feature behaves as
//! over HTTP/1.1 (hits, coalescing, Vary, conditionals, Range, PURGE, Cache-Status, rules,
//! the access log, counters), HTTP/1.1 still works on the same listener, malformed requests
//! never reach the backend; content codings (issue 29) to an h2 client and to curl.

#[path = "../common/mod.rs"]
mod common;

mod backend;
mod compression;
mod conformance;
mod h2spec;
mod hits;
mod hpack_idle;
mod informational;

use std::sync::Arc;
use std::time::Duration;

use common::h2::*;
use common::*;
use tokio::sync::Notify;

fn h2c(c: &mut shellac::config::Config) {
    c.http2.h2c = shellac::config::http2::H2c::All;
}

fn origin_reply(s: &Seen) -> Reply {
    match s.path.as_str() {
        "/vary" => {
            let lang = s
                .headers
                .get("accept-language")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_string();
            Reply::ok(&format!("lang {lang}"))
                .cc("max-age=60")
                .header("vary", "accept-language")
        }
        "/nostore" => Reply::ok("private").cc("no-store"),
        p => Reply::ok(&format!("body of {p}"))
            .cc("max-age=60")
            .header("etag", "\"v1\"")
            .header("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_then_hit_over_h2c_and_http1_on_the_same_listener() {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let mut conn = H2Conn::open(shellac.addr).await;
    let first = conn.send("GET", "/a", &[], b"").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "body of /a");
    assert!(
        first.cache_status().contains("fwd=miss"),
        "{}",
        first.cache_status()
    );
    let second = conn.send("GET", "/a", &[], b"").await;
    assert!(
        second.cache_status().contains("hit"),
        "{}",
        second.cache_status()
    );
    assert_eq!(second.text(), "body of /a");
    assert!(second.header("age").is_some());
    // No connection-specific field goes out over HTTP/2.
    assert!(second.header("connection").is_none());
    // HTTP/1.1 on the same listener: the same object.
    let h1 = get(shellac.addr, "/a").await;
    assert!(h1.cache_status().contains("hit"), "{}", h1.cache_status());
    assert_eq!(origin.count(), 1);
    // The backend got an HTTP/1.1 request with the authority as Host.
    let seen = origin.last();
    assert_eq!(seen.headers["host"], "test.example");
    let stats = shellac.stats().await;
    assert_eq!(stats["h2_conn"], 1);
    assert_eq!(stats["h2_req"], 2);
    assert_eq!(stats["cache_hit"], 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preface_is_http1_version_not_supported_without_h2c() {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let answer = raw(shellac.addr, PREFACE).await;
    // Refused as an HTTP/1.1 request: `*` is a target only OPTIONS may have.
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    shellac.stop().await;
}

/// `[http2] h2c` as a list: HTTP/2 with prior knowledge on the listeners named only, also for
/// a connection that waits in the parking lot before its first byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_per_listener() {
    use shellac::config::http2::H2c;
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.listen = vec![
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.2:0".parse().unwrap(),
        ];
        c.http2.h2c = H2c::Only(vec!["127.0.0.2:0".parse().unwrap()]);
    })
    .await;
    let listening = shellac.listening();
    let (plain, with_h2c) = (listening[0], listening[1]);
    assert_eq!(with_h2c.ip().to_string(), "127.0.0.2");
    let answer = raw(plain, PREFACE).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let mut conn = H2Conn::open(with_h2c).await;
    assert_eq!(conn.send("GET", "/a", &[], b"").await.text(), "body of /a");
    // Silent for a while first: parked on accept, resumed on its first byte as h2c.
    let stream = tokio::net::TcpStream::connect(with_h2c).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut late = Raw::from_stream(stream);
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    assert!(late.send(&hello).await);
    assert!(late.get(1, "/a").await);
    let headers = late
        .until(Duration::from_secs(5), |f| {
            f.kind == HEADERS && f.stream == 1
        })
        .await;
    assert!(headers.is_some(), "an HTTP/2 answer on the h2c listener");
    // HTTP/1.1 on both.
    assert!(get(plain, "/a").await.cache_status().contains("hit"));
    assert!(get(with_h2c, "/a").await.cache_status().contains("hit"));
    assert_eq!(shellac.stats().await["h2_conn"], 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_conditionals_range_and_purge_as_over_http1() {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.invalidation.purge_from =
            vec![shellac::config::invalidation::Network::parse("127.0.0.1").unwrap()];
    })
    .await;
    let mut conn = H2Conn::open(shellac.addr).await;
    // Vary: two variants, each a hit the second time.
    for lang in ["en", "fr", "en", "fr"] {
        let r = conn
            .send("GET", "/vary", &[("accept-language", lang)], b"")
            .await;
        assert_eq!(r.text(), format!("lang {lang}"));
    }
    assert_eq!(origin.count_path("/vary"), 2);
    // Conditionals answered from the cache.
    conn.send("GET", "/c", &[], b"").await;
    let r = conn
        .send("GET", "/c", &[("if-none-match", "\"v1\"")], b"")
        .await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    // Range from the cached object.
    let r = conn.send("GET", "/c", &[("range", "bytes=0-3")], b"").await;
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "body");
    assert_eq!(r.header("content-range"), Some("bytes 0-3/10"));
    assert_eq!(origin.count_path("/c"), 1);
    // PURGE over HTTP/2 drops it.
    let r = conn.send("PURGE", "/c", &[], b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = conn.send("GET", "/c", &[], b"").await;
    assert!(
        r.cache_status().contains("fwd=miss"),
        "{}",
        r.cache_status()
    );
    assert_eq!(origin.count_path("/c"), 2);
    // Uncacheable: passed each time.
    conn.send("GET", "/nostore", &[], b"").await;
    conn.send("GET", "/nostore", &[], b"").await;
    assert_eq!(origin.count_path("/nostore"), 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_coalesce_and_stream_to_waiters() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
            first: b"first-".to_vec(),
            gate: g.clone(),
            rest: b"rest".to_vec(),
        })
    })
    .await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let conn = H2Conn::open(shellac.addr).await;
    // Ten streams on one connection for one URL: one backend request.
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let mut sender = conn.sender();
        tasks.push(tokio::spawn(async move {
            let req = http::Request::builder()
                .uri("http://test.example/slow")
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap();
            sender.ready().await.unwrap();
            let resp = sender.send_request(req).await.unwrap();
            use http_body_util::BodyExt;
            resp.into_body().collect().await.unwrap().to_bytes()
        }));
    }
    // Every stream waits on the one fetch (bounded wait for the busy object's readers).
    for _ in 0..200 {
        if shellac.stat("cache_miss").await + shellac.stat("cache_coalesced").await >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gate.notify_waiters();
    gate.notify_one();
    for t in tasks {
        assert_eq!(&t.await.unwrap()[..], b"first-rest");
    }
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_log_says_http2() {
    let dir = temp_dir("h2-log");
    let path = dir.join("access.log");
    let origin = Origin::start(origin_reply).await;
    let log = path.to_str().unwrap().to_string();
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.log.access_log = log;
    })
    .await;
    h2_get(shellac.addr, "/logged?q=1", &[("user-agent", "h2test")]).await;
    let lines = wait_lines(&path, 1).await;
    assert!(
        lines[0].contains("\"GET /logged?q=1 HTTP/2.0\" 200 19 \"-\" \"h2test\""),
        "{}",
        lines[0]
    );
    shellac.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_refused_and_reset_never_forwarded() {
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let mut raw = Raw::open(shellac.addr).await;
    // :authority test.example, Host elsewhere: malformed (RFC 9113 §8.3.1).
    let block = request_block("GET", "/x", &[("host", "evil.example")]);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &block))
        .await;
    // RST_STREAM PROTOCOL_ERROR (the 400 answer queued before it may be discarded by h2).
    let reset = raw
        .until(Duration::from_secs(5), |f| {
            f.kind == RST_STREAM && f.stream == 1
        })
        .await
        .expect("then RST_STREAM");
    assert_eq!(reset.code(), Some(1), "PROTOCOL_ERROR");
    // A value with leading whitespace, and a :path with a bad escape.
    let block = request_block("GET", "/y", &[("x-a", " padded")]);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 3, &block))
        .await;
    let block = request_block("GET", "/%zz", &[]);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 5, &block))
        .await;
    // Either order: each stream is answered by its own task.
    let mut reset = std::collections::HashMap::new();
    while reset.len() < 2 {
        let f = raw
            .until(Duration::from_secs(5), |f| f.kind == RST_STREAM)
            .await
            .expect("RST_STREAM");
        reset.insert(f.stream, f.code());
    }
    assert_eq!(reset[&3], Some(1));
    assert_eq!(reset[&5], Some(1));
    // The connection still serves a valid request.
    raw.get(7, "/fine").await;
    let ok = raw
        .until(Duration::from_secs(5), |f| f.kind == DATA && f.stream == 7)
        .await
        .expect("answered");
    assert_eq!(ok.payload, b"body of /fine");
    assert_eq!(origin.count(), 1, "nothing malformed reached the backend");
    let stats = shellac.stats().await;
    assert_eq!(stats["client_refused"], 3);
    assert_eq!(stats["client_reject_host"], 1);
    shellac.stop().await;
}

/// `curl --http2-prior-knowledge` (Debian's curl, built with nghttp2): a miss, then a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_speaks_h2c_with_prior_knowledge() {
    let Some(curl) = tools::require(tools::which("curl"), "curl", "curl") else {
        return;
    };
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let url = format!("http://{}/curl", shellac.addr);
    for expect in ["fwd=miss", "hit"] {
        let out = tokio::process::Command::new(&curl)
            .args(["--http2-prior-knowledge", "-si", &url])
            .output()
            .await
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("HTTP/2 200"), "{text}");
        assert!(text.contains(expect), "{text}");
        assert!(text.ends_with("body of /curl"), "{text}");
    }
    assert_eq!(shellac.stat("h2_conn").await, 2);
    shellac.stop().await;
}

/// `nghttp` (nghttp2-client): several streams on one connection, all answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nghttp_multiplexes_streams() {
    let Some(nghttp) = tools::require(tools::which("nghttp"), "nghttp", "nghttp2-client") else {
        return;
    };
    let origin = Origin::start(origin_reply).await;
    let shellac = Shellac::start(origin.addr, h2c).await;
    let base = format!("http://{}", shellac.addr);
    let out = tokio::process::Command::new(&nghttp)
        .args([
            "-ns",
            &format!("{base}/n1"),
            &format!("{base}/n2"),
            &format!("{base}/n3"),
        ])
        .output()
        .await
        .expect("nghttp runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(shellac.stat("h2_conn").await, 1);
    assert_eq!(shellac.stat("h2_req").await, 3);
    assert_eq!(origin.count(), 3);
    shellac.stop().await;
}

/// Grace, bans and operator rules over HTTP/2, as over HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grace_bans_and_rules_as_over_http1() {
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = n.clone();
    let origin = Origin::start(move |s| {
        let i = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match s.path.as_str() {
            "/grace" => Reply::ok(&format!("v{i}")).cc("max-age=1, stale-while-revalidate=30"),
            p => Reply::ok(&format!("{p} {i}")).cc("max-age=60"),
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        let parsed = shellac::config::Config::parse(
            "[[backend]]\nhost = \"h\"\n\n[[rule]]\npath = '^/rule'\nset_response_headers = { x-rule = \"yes\" }\n\n\
             [[rule]]\npath = '^/synth'\nsynth = { status = 403, body = \"no\" }\n",
            "rules.toml",
        )
        .unwrap();
        c.rules = parsed.rules;
    })
    .await;
    let mut conn = H2Conn::open(shellac.addr).await;
    // Rules: a response field added, a synthetic answer.
    let r = conn.send("GET", "/rule", &[], b"").await;
    assert_eq!(r.header("x-rule"), Some("yes"));
    let r = conn.send("GET", "/synth", &[], b"").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.text(), "no");
    // Grace: the stale copy at once, one background refresh.
    let first = conn.send("GET", "/grace", &[], b"").await.text();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let stale = conn.send("GET", "/grace", &[], b"").await;
    assert_eq!(stale.text(), first);
    assert!(
        stale.cache_status().contains("stale-while-revalidate"),
        "{}",
        stale.cache_status()
    );
    // A ban through the admin API: the next request is a miss.
    conn.send("GET", "/news/1", &[], b"").await;
    let hit = conn.send("GET", "/news/1", &[], b"").await;
    assert!(hit.cache_status().contains("hit"));
    let ban = request(shellac.admin, "POST", "/ban", &[], b"req.url ~ ^/news/").await;
    assert_eq!(ban.status, 200, "{}", ban.text());
    let after = conn.send("GET", "/news/1", &[], b"").await;
    assert!(
        after.cache_status().contains("fwd=miss"),
        "{}",
        after.cache_status()
    );
    assert_ne!(after.text(), hit.text());
    shellac.stop().await;
}

/// An h2 client request with a streamed body and no `Content-Length`: its answer's status,
/// after sending `chunks` (and then either ending the body or leaving it open).
async fn post_streamed(
    client: &mut ::h2::client::SendRequest<bytes::Bytes>,
    path: &str,
    chunks: &[usize],
    end: bool,
) -> u16 {
    let req = http::Request::post(format!("http://test.example{path}"))
        .body(())
        .unwrap();
    let (resp, mut body) = client.send_request(req, false).unwrap();
    for (i, n) in chunks.iter().enumerate() {
        let last = end && i + 1 == chunks.len();
        body.send_data(bytes::Bytes::from(vec![b'x'; *n]), last)
            .unwrap();
    }
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .expect("an answer in time")
        .expect("an answer");
    // Keep the sender alive until the answer: dropping it would reset the stream.
    drop(body);
    resp.status().as_u16()
}

async fn h2_client(addr: std::net::SocketAddr) -> ::h2::client::SendRequest<bytes::Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = ::h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client.ready().await.unwrap()
}

/// Issue 20: an HTTP/2 body without `Content-Length` that goes over `max_body_size` is
/// answered 413 as over HTTP/1.1 (not the aborted fetch's 5xx), counted in
/// `client_reject_limit`; the connection goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_max_body_size_without_content_length_is_413() {
    let origin = Origin::start(|_| Reply::ok("stored")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.server.max_body_size = shellac::config::units::Size(4096);
    })
    .await;
    let mut client = h2_client(shellac.addr).await;
    assert_eq!(
        post_streamed(&mut client, "/small", &[1000, 1000], true).await,
        200
    );
    assert_eq!(
        post_streamed(&mut client, "/big", &[3000, 3000, 3000], true).await,
        413
    );
    assert_eq!(
        post_streamed(&mut client, "/small", &[100], true).await,
        200
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["client_reject_limit"], 1);
    assert_eq!(stats["client_refused"], 1);
    shellac.stop().await;
}

/// Issue 20: `body_timeout` applies to HTTP/2 request bodies: a stream whose body stalls is
/// answered 408 (`client_body_timeout`, as an HTTP/1.1 connection that stalls is closed);
/// the connection's other streams go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_408_and_the_connection_goes_on() {
    let origin = Origin::start(|_| Reply::ok("stored")).await;
    let shellac = Shellac::start(origin.addr, |c| {
        h2c(c);
        c.server.body_timeout = shellac::config::units::Dur(Duration::from_millis(300));
    })
    .await;
    let mut client = h2_client(shellac.addr).await;
    let started = std::time::Instant::now();
    assert_eq!(
        post_streamed(&mut client, "/slow", &[100], false).await,
        408
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        post_streamed(&mut client, "/after", &[100], true).await,
        200
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["client_body_timeout"], 1);
    shellac.stop().await;
}
