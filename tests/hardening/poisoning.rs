//! Cache poisoning (RFC 9111 §2, §4.1, §7): forwarding fields Shellac owns, rewrite fields,
//! error responses, bodies on GET, structured keys.

use super::*;
use shellac::config::invalidation::Network;
use shellac::config::units::Dur;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_fields_from_untrusted_clients_are_replaced() {
    let bench = Bench::start().await;
    let v = Vector::new(
        "spoofed forwarding fields",
        "GET /f HTTP/1.1\r\nHost: www.example\r\nX-Forwarded-For: 6.6.6.6\r\n\
         X-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Port: 1\r\n\
         Forwarded: for=6.6.6.6;host=evil.example\r\nVia: 1.1 liar\r\nX-Real-IP: 6.6.6.6\r\n\
         True-Client-IP: 6.6.6.6\r\nX-Original-URL: /admin\r\nX-Rewrite-URL: /admin\r\n\
         X-HTTP-Method-Override: DELETE\r\nConnection: close\r\n\r\n",
    )
    .expect(&[200], 1);
    bench.run(&[v]).await;
    let seen = bench.origin.request(0).to_ascii_lowercase();
    assert!(!seen.contains("6.6.6.6"), "{seen}");
    assert!(!seen.contains("evil"), "{seen}");
    assert!(!seen.contains("liar"), "{seen}");
    assert!(!seen.contains("/admin"), "{seen}");
    assert!(!seen.contains("override"), "{seen}");
    assert!(seen.contains("x-forwarded-for: 127.0.0.1\r\n"), "{seen}");
    assert!(seen.contains("x-forwarded-host: www.example\r\n"), "{seen}");
    assert!(seen.contains("x-forwarded-proto: http\r\n"), "{seen}");
    assert!(
        seen.contains("forwarded: for=127.0.0.1;host=\"www.example\";proto=http\r\n"),
        "{seen}"
    );
    assert!(seen.contains("via: 1.1 shellac\r\n"), "{seen}");
    bench.stop().await;

    // From a trusted proxy the chain is kept and extended; rewrite fields still go.
    let bench = Bench::with(|c| {
        c.server.trusted_proxies = vec![Network::parse("127.0.0.0/8").unwrap()];
    })
    .await;
    let v = Vector::new(
        "trusted proxy",
        "GET /t HTTP/1.1\r\nHost: www.example\r\nX-Forwarded-For: 203.0.113.9\r\n\
         X-Forwarded-Proto: https\r\nX-Original-URL: /admin\r\nConnection: close\r\n\r\n",
    )
    .expect(&[200], 1);
    bench.run(&[v]).await;
    let seen = bench.origin.request(0).to_ascii_lowercase();
    assert!(
        seen.contains("x-forwarded-for: 203.0.113.9, 127.0.0.1\r\n"),
        "{seen}"
    );
    assert!(seen.contains("x-forwarded-proto: https\r\n"), "{seen}");
    assert!(!seen.contains("/admin"), "{seen}");
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_responses_are_not_stored_without_explicit_freshness() {
    // Even with an operator default TTL, error statuses need explicit freshness.
    let origin = RawOrigin::start(|req| {
        let text = String::from_utf8_lossy(req);
        let path = text.split(' ').nth(1).unwrap_or("/");
        let status = path.trim_start_matches("/s").parse::<u16>().unwrap_or(200);
        let cc = if path.ends_with("fresh") { "cache-control: max-age=60\r\n" } else { "" };
        let status = if path.ends_with("fresh") { 500 } else { status };
        format!("HTTP/1.1 {status} X\r\n{cc}last-modified: Mon, 01 Jan 2024 00:00:00 GMT\r\ncontent-length: 1\r\n\r\nx")
            .into_bytes()
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.cache.default_ttl = Dur(Duration::from_secs(60));
    })
    .await;
    // (414 and 501 are heuristically cacheable, RFC 9110 §15.1: their Last-Modified heuristic
    // applies, see freshness::heuristic_freshness_for_414_and_501_not_500; default_ttl never
    // keeps a 501.)
    for status in [400, 403, 413, 431, 500, 502, 503, 504] {
        let path = format!("/s{status}");
        for _ in 0..2 {
            let r = get(shellac.addr, &path).await;
            assert_eq!(r.status, status);
        }
        let n = (0..origin.count())
            .filter(|i| origin.request(*i).contains(&format!("{path} ")))
            .count();
        assert_eq!(n, 2, "{status} was stored");
    }
    // Explicit freshness is the origin's word: stored.
    get(shellac.addr, "/s500fresh").await;
    let r = get(shellac.addr, "/s500fresh").await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    shellac.stop().await;
    origin.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_body_never_reaches_the_origin_or_the_key() {
    let bench = Bench::start().await;
    let v = vec![
        Vector::new(
            "GET with a body",
            "GET /g HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nevil!GET /g2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200, 200], 2),
        Vector::new(
            "GET with another body is a hit",
            "GET /g HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\nnice\r\n0\r\n\r\n",
        )
        .expect(&[200], 0),
    ];
    bench.run(&v).await;
    let seen = bench.origin.received();
    assert!(!seen.contains("evil") && !seen.contains("nice"), "{seen}");
    assert!(bench.origin.request(0).starts_with("GET /g HTTP/1.1"));
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_keys_and_routes_on_its_authority() {
    let bench = Bench::start().await;
    let v = vec![
        Vector::new(
            "absolute-form for b with Host a",
            "GET http://b.example/k HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
        // a.example/k is another object: a miss, not b's response.
        Vector::new(
            "origin-form for a",
            "GET /k HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 1),
        Vector::new(
            "origin-form for b is a hit",
            "GET /k HTTP/1.1\r\nHost: b.example\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200], 0),
    ];
    bench.run(&v).await;
    assert!(
        bench
            .origin
            .request(0)
            .to_ascii_lowercase()
            .contains("host: b.example\r\n")
    );
    assert!(
        bench
            .origin
            .request(1)
            .to_ascii_lowercase()
            .contains("host: a.example\r\n")
    );
    bench.stop().await;
}

/// Issue 32: `_` spellings of the fields Shellac owns or strips (`X_Forwarded_Host`,
/// `X_Original_URL`) are dropped and counted, from every client, unless
/// `server.underscores_in_headers`; `X-Original-Host` is stripped like `X-Forwarded-Host`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn underscored_field_names_are_dropped() {
    let send = "GET /u HTTP/1.1\r\nHost: www.example\r\nX_Forwarded_Host: evil.example\r\n\
         X_Original_URL: /admin\r\nX-Original-Host: evil2.example\r\nX-Kept: 1\r\n\
         Connection: close\r\n\r\n";
    let bench = Bench::start().await;
    bench
        .run(&[Vector::new("underscores", send).expect(&[200], 1)])
        .await;
    let seen = bench.origin.request(0).to_ascii_lowercase();
    assert!(!seen.contains("evil"), "{seen}");
    assert!(!seen.contains("/admin"), "{seen}");
    assert!(seen.contains("x-kept: 1\r\n"), "{seen}");
    assert_eq!(bench.shellac.stat("client_field_underscore").await, 2);
    bench.stop().await;

    // Allowed: they reach the origin as sent (the operator's backends keep `_` and `-` apart).
    let bench = Bench::with(|c| c.server.underscores_in_headers = true).await;
    bench
        .run(&[Vector::new("underscores allowed", send).expect(&[200], 1)])
        .await;
    let seen = bench.origin.request(0).to_ascii_lowercase();
    assert!(
        seen.contains("x_forwarded_host: evil.example\r\n"),
        "{seen}"
    );
    assert!(
        !seen.contains("evil2"),
        "X-Original-Host still stripped: {seen}"
    );
    assert_eq!(bench.shellac.stat("client_field_underscore").await, 0);
    bench.stop().await;
}

/// Issue 32: the fast path declines a request with a `_` field name, so a hit answered with
/// one still counts it (the full path drops it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn underscored_field_names_are_dropped_on_hits_too() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/h").await;
    let hit = get_with(shellac.addr, "/h", &[("x_forwarded_host", "evil.example")]).await;
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(shellac.stat("client_field_underscore").await, 1);
    assert_eq!(shellac.stat("cache_hit_fast").await, 0);
    shellac.stop().await;
}
