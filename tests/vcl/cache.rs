//! VCL and the cache, end to end: a 304 through vcl_backend_response (`beresp.was_304`), a
//! copy purged while it was being revalidated, bans on the looking-up request's fields.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use common::vcl::start_vcl;
use common::{Origin, Reply, Shellac, get, get_with, request};

/// Regression (issue 21, varnishtest b00079): a 304 to a revalidation runs
/// vcl_backend_response on the merged object — the stale copy's status 200, its fields with
/// the 304's, `beresp.was_304` true — and what VCL sets there (a TTL, a field) is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_runs_vcl_backend_response_with_was_304() {
    let origin = Origin::start(|s| {
        if s.headers.contains_key("if-none-match") {
            return Reply::ok("")
                .status(304)
                .header("etag", "\"v1\"")
                .header("x-from", "304");
        }
        Reply::ok("the body")
            .header("etag", "\"v1\"")
            .header("x-from", "200")
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.http.was-304 = beresp.was_304;
    set beresp.http.status-seen = beresp.status;
    if (beresp.was_304) {
        set beresp.ttl = 60s;
    } else {
        set beresp.ttl = 1ms;
        set beresp.grace = 0s;
        set beresp.keep = 1m;
    }
}
"#;
    let shellac = start_vcl("was-304", vcl, &[origin.addr]).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.header("was-304"), Some("false"));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "the body");
    assert_eq!(r.header("was-304"), Some("true"));
    assert_eq!(
        r.header("status-seen"),
        Some("200"),
        "beresp is the merged object"
    );
    assert_eq!(
        r.header("x-from"),
        Some("304"),
        "the 304's fields replace the stored ones"
    );
    assert_eq!(origin.last().headers["if-none-match"], "\"v1\"");
    // The 60 s VCL gave the revalidated copy hold: a hit.
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.text(), "the body");
    assert_eq!(r.header("was-304"), Some("true"));
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_revalidated").await, 1);
    shellac.stop().await;
}

/// Under VCL `If-Modified-Since` carries only a strong `Last-Modified` (RFC 9110 §8.8.2.2, as
/// Varnish does): one at least a second before the stored `Date` — or, without a `Date`,
/// before the response arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_revalidates_with_a_strong_last_modified_only() {
    const LM: &str = "Wed, 11 Sep 2013 13:36:55 GMT";
    let origin = Origin::start(|s| match s.path.as_str() {
        "/weak" => Reply::ok("w")
            .header("last-modified", LM)
            .header("date", LM),
        _ => Reply::ok("s").header("last-modified", LM),
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response {
    set beresp.ttl = 1ms;
    set beresp.grace = 0s;
    set beresp.keep = 1m;
}
"#;
    let shellac = start_vcl("strong-lm", vcl, &[origin.addr]).await;
    for path in ["/weak", "/strong"] {
        get(shellac.addr, path).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    get(shellac.addr, "/weak").await;
    assert!(!origin.last().headers.contains_key("if-modified-since"));
    get(shellac.addr, "/strong").await;
    assert_eq!(origin.last().headers["if-modified-since"], LM);
    shellac.stop().await;
}

/// An origin whose conditional requests (`If-None-Match`) wait for a permit before their 304;
/// other requests get `version N` (N counting them from 1), `ETag: "v"`, `max-age=1`.
struct GatedOrigin {
    addr: SocketAddr,
    /// Conditional requests received so far.
    conditional: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
}

async fn gated_origin() -> GatedOrigin {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let conditional = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let full = Arc::new(AtomicUsize::new(0));
    let (c, g) = (conditional.clone(), gate.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (c, g, full) = (c.clone(), g.clone(), full.clone());
            tokio::spawn(async move {
                loop {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
                    let reply = if text.contains("\r\nif-none-match:") {
                        c.fetch_add(1, Ordering::SeqCst);
                        let Ok(permit) = g.acquire().await else {
                            return;
                        };
                        permit.forget();
                        "HTTP/1.1 304 Not Modified\r\nETag: \"v\"\r\nCache-Control: max-age=1\r\n\r\n"
                            .to_string()
                    } else {
                        let body = format!("version {}", full.fetch_add(1, Ordering::SeqCst) + 1);
                        format!(
                            "HTTP/1.1 200 OK\r\nETag: \"v\"\r\nCache-Control: max-age=1\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        )
                    };
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    GatedOrigin {
        addr,
        conditional,
        gate,
    }
}

/// Waits (bounded) until the origin has received `n` conditional requests.
async fn conditional_requests(origin: &GatedOrigin, n: usize) {
    for _ in 0..2000 {
        if origin.conditional.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the origin never received conditional request {n}");
}

/// Regression (issue 21, varnishtest c00129): a copy purged while its revalidation was on the
/// way is not brought back by the 304. Without VCL the object is fetched again,
/// unconditionally; under 4.x VCL the fetch fails into vcl_backend_error, which may retry (an
/// unconditional fetch) or answer 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_purged_during_its_revalidation_is_not_refreshed() {
    // Without VCL (`cache.keep` holds the stale copy for revalidation).
    let origin = gated_origin().await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/").await.text(), "version 1");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let addr = shellac.addr;
    let revalidating = tokio::spawn(async move { get(addr, "/").await });
    conditional_requests(&origin, 1).await;
    assert_eq!(
        request(shellac.addr, "PURGE", "/", &[], b"").await.status,
        200
    );
    origin.gate.add_permits(1);
    let r = revalidating.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "version 2", "fetched again, not the purged copy");
    assert_eq!(shellac.stat("cache_revalidated_gone").await, 1);
    assert_eq!(shellac.stat("cache_revalidated").await, 0);
    shellac.stop().await;

    // 4.x VCL: vcl_backend_error retries once (as varnishtest c00129), then answers 503.
    let origin = gated_origin().await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_recv {
    if (req.method == "PURGE") { return (purge); }
}
sub vcl_backend_response {
    set beresp.ttl = 1ms;
    set beresp.grace = 0s;
    set beresp.keep = 10s;
}
sub vcl_backend_error {
    if (bereq.http.retry && bereq.retries == 0) { return (retry); }
    set beresp.http.failed = "yes";
}
"#;
    let shellac = start_vcl("purged-304", vcl, &[origin.addr]).await;
    for (i, path, retry) in [(1, "/", true), (2, "/b", false)] {
        let primed = get(shellac.addr, path).await;
        assert!(primed.text().starts_with("version"), "{}", primed.text());
        tokio::time::sleep(Duration::from_millis(20)).await;
        let addr = shellac.addr;
        let headers: &'static [(&'static str, &'static str)] =
            if retry { &[("retry", "1")] } else { &[] };
        let revalidating = tokio::spawn(async move { get_with(addr, path, headers).await });
        conditional_requests(&origin, i).await;
        assert_eq!(
            request(shellac.addr, "PURGE", path, &[], b"").await.status,
            200
        );
        origin.gate.add_permits(1);
        let r = revalidating.await.unwrap();
        if retry {
            assert_eq!(r.status, 200);
            assert_eq!(r.text(), "version 2", "retried without the purged copy");
        } else {
            assert_eq!(r.status, 503);
            assert_eq!(r.header("failed"), Some("yes"));
        }
    }
    shellac.stop().await;
}

/// Regression (issue 21, varnishtest b00064): under 4.x VCL a request that waits for another's
/// fetch runs vcl_hit on what that fetch stores (Varnish's waiting list looks the object up
/// again): it sees `obj.*`, and its `return (pass)` sends it to the backend itself. (Arriving
/// after the fetch, it is a plain hit and runs vcl_hit too: the outcome is the same.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_runs_vcl_hit_on_the_fetch_it_waited_for() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |_| {
        let i = n2.fetch_add(1, Ordering::SeqCst);
        Reply::ok(&format!("body {i}"))
            .cc("max-age=60")
            .delay(Duration::from_millis(if i == 0 { 400 } else { 0 }))
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_backend_response { set beresp.grace = 30s; }
sub vcl_hit {
    set req.http.x-grace = obj.grace;
    if (req.http.pass) { return (pass); }
}
sub vcl_deliver { set resp.http.x-grace = req.http.x-grace; }
"#;
    let shellac = start_vcl("waiter-hit", vcl, &[origin.addr]).await;
    for headers in [&[][..], &[("pass", "1")][..]] {
        let path = if headers.is_empty() { "/a" } else { "/b" };
        n.store(0, Ordering::SeqCst);
        let addr = shellac.addr;
        let leader = tokio::spawn(async move { get(addr, path).await });
        for _ in 0..400 {
            if origin.count_path(path) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let before = origin.count();
        let waiter = get_with(shellac.addr, path, headers).await;
        let leader = leader.await.unwrap();
        assert_eq!(
            leader.header("x-grace"),
            Some(""),
            "the leader ran no vcl_hit"
        );
        assert_eq!(waiter.header("x-grace"), Some("30.000"));
        if headers.is_empty() {
            assert_eq!(waiter.text(), leader.text());
            assert_eq!(origin.count(), before);
        } else {
            assert_eq!(
                origin.count(),
                before + 1,
                "vcl_hit passed: fetched on its own"
            );
        }
    }
    shellac.stop().await;
}

/// Regression (issue 21, varnishtest v00047): under VCL a hit's `If-Modified-Since` /
/// `If-None-Match` are answered on the validators vcl_deliver delivers, as Varnish does: a
/// `Last-Modified` it moves forward makes an older date a 200, a matching one a 304.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditionals_are_answered_on_what_vcl_deliver_delivers() {
    let origin = Origin::start(|_| {
        Reply::ok("body")
            .cc("max-age=60")
            .header("last-modified", "Wed, 27 Apr 2016 14:00:00 GMT")
            .header("etag", "\"a\"")
    })
    .await;
    let vcl = r#"vcl 4.1;
backend b { ${origin0} }
sub vcl_deliver {
    if (req.http.modify) {
        set resp.http.Last-Modified = "Wed, 27 Apr 2016 16:00:00 GMT";
        set resp.http.ETag = {""b""};
    }
}
"#;
    let shellac = start_vcl("deliver-conditional", vcl, &[origin.addr]).await;
    get(shellac.addr, "/").await;
    let ims = |d: &'static str| ("if-modified-since", d);
    let status = |r: common::Resp| (r.status, r.body.len());
    let at14 = ims("Wed, 27 Apr 2016 14:00:00 GMT");
    let at16 = ims("Wed, 27 Apr 2016 16:00:00 GMT");
    assert_eq!(status(get_with(shellac.addr, "/", &[at14]).await), (304, 0));
    let m = ("modify", "1");
    assert_eq!(
        status(get_with(shellac.addr, "/", &[at14, m]).await),
        (200, 4)
    );
    let r = get_with(shellac.addr, "/", &[at16, m]).await;
    assert_eq!((r.status, r.header("content-length")), (304, None));
    assert_eq!(
        r.header("last-modified"),
        Some("Wed, 27 Apr 2016 16:00:00 GMT")
    );
    let inm = |t: &'static str| ("if-none-match", t);
    assert_eq!(
        status(get_with(shellac.addr, "/", &[inm("\"a\""), m]).await),
        (200, 4)
    );
    assert_eq!(
        status(get_with(shellac.addr, "/", &[inm("\"b\""), m]).await),
        (304, 0)
    );
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// Regression (trunk c00025): a hit's `If-None-Match`, answered after vcl_deliver, compares
/// weakly, but strongly on a request with a `Range`, as Varnish's `RFC2616_Do_Cond` does: a
/// weak match of a range request gets its 206. Without VCL, RFC 9110 §13.1.2's weak
/// comparison answers the same request 304.
#[tokio::test]
async fn varnish_c00025_if_none_match_with_a_range_compares_strongly() {
    let origin = Origin::start(|seen| {
        let etag = if seen.path == "/other" {
            "W/\"123456789\""
        } else {
            "\"123456789\""
        };
        Reply::ok("0123456789")
            .cc("max-age=60")
            .header("etag", etag)
    })
    .await;
    let vcl = "vcl 4.1;\nbackend b { ${origin0} }\n";
    let shellac = start_vcl("inm-range", vcl, &[origin.addr]).await;
    let range = ("range", "bytes=1-2");
    let (strong, weak) = (
        ("if-none-match", "\"123456789\""),
        ("if-none-match", "W/\"123456789\""),
    );
    // (path, fields, status)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16);
    let cases: [Case; 7] = [
        ("/", vec![], 200),
        ("/", vec![strong], 304),
        ("/", vec![range, strong], 304),
        ("/", vec![weak], 304),
        ("/", vec![range, weak], 206),
        ("/other", vec![strong], 304),
        ("/other", vec![range, strong], 206),
    ];
    for (path, fields, status) in &cases {
        let r = get_with(shellac.addr, path, fields).await;
        assert_eq!(r.status, *status, "{path} {fields:?}");
        if *status == 206 {
            assert_eq!(r.text(), "12");
        }
    }
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_hit").await, 5);
    shellac.stop().await;
    // Without VCL: RFC 9110's weak comparison whatever the Range.
    let plain = Shellac::start(origin.addr, |_| {}).await;
    get(plain.addr, "/").await;
    let r = get_with(plain.addr, "/", &[range, weak]).await;
    assert_eq!(r.status, 304);
    plain.stop().await;
}

/// Regression (varnishtest 2.1.5/c00014, failed on a loaded CI machine): a 2.x `pass` in
/// vcl_fetch makes the URL hit-for-pass as the response's head arrives, and 2.x reads the
/// body whole before delivering it. A request for the URL arriving while that body is read
/// waits for the fetch, as Varnish's waits on the busy object that becomes the hit-for-pass
/// object, then passes on the connection the fetch gave back: one backend connection for
/// both. It used to pass at once, on a second connection (which a varnishtest server,
/// serving one connection, never answers).
#[tokio::test]
async fn a_request_during_a_hit_for_pass_fetch_waits_for_it_and_reuses_its_connection() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let held = gate.clone();
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = asked.clone();
    let origin = Origin::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::ok("").body(common::ReplyBody::Gated {
                first: b"line1\n".to_vec(),
                gate: held.clone(),
                rest: b"line2\n".to_vec(),
            })
        } else {
            Reply::ok("foobar")
        }
    })
    .await;
    let vcl = r#"backend b { ${origin0} }
sub vcl_fetch { return (pass); }
"#;
    let shellac = start_vcl("c00014", vcl, &[origin.addr]).await;
    let addr = shellac.addr;
    let first = tokio::spawn(async move { get(addr, "/foo").await });
    // The first fetch has its head (and half its body), and vcl_fetch has marked the URL
    // hit-for-pass (`n_hit_for_miss`), before the second request comes.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while shellac.stat("n_hit_for_miss").await == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(origin.count(), 1);
    assert_eq!(
        shellac.stat("n_hit_for_miss").await,
        1,
        "the URL is hit-for-pass while its fetch reads the body"
    );
    let second = tokio::spawn(async move { get(addr, "/foo").await });
    while shellac.stat("cache_busy_wait").await == 0
        && origin.count() < 2
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        origin.count(),
        1,
        "the second request waits for the first fetch"
    );
    gate.notify_one();
    let first = first.await.expect("first request");
    let second = second.await.expect("second request");
    assert_eq!(
        (first.status, first.text().as_str()),
        (200, "line1\nline2\n")
    );
    assert_eq!((second.status, second.text().as_str()), (200, "foobar"));
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("cache_busy_wait").await, 1);
    assert_eq!(shellac.stat("cache_hitpass").await, 1);
    assert_eq!(
        shellac.stat("backend_conn").await,
        1,
        "one backend connection"
    );
    assert_eq!(shellac.stat("backend_reuse").await, 1);
    shellac.stop().await;
}
