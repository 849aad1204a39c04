//! Basic proxying and caching: miss then hit, HEAD, headers at the boundary, keep-alive.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_then_hit_with_age_and_cache_status() {
    let origin = Origin::start(|_| Reply::ok("hello").cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;

    let first = get(shellac.addr, "/page").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "hello");
    assert_eq!(first.cache_status(), "shellac; fwd=miss; stored");

    let second = get(shellac.addr, "/page").await;
    assert_eq!(second.text(), "hello");
    assert!(
        second.cache_status().starts_with("shellac; hit; ttl="),
        "{}",
        second.cache_status()
    );
    // Its time in the cache: 0 unless this machine stalled between the two requests.
    let age: u64 = second
        .header("age")
        .expect("a hit has Age")
        .parse()
        .unwrap();
    assert!(age <= 10, "age {age}");
    assert_eq!(origin.count(), 1);

    // A response's bytes are counted once its write returns, which can be after the client has
    // read them (and asked for the stats): wait for the count, bounded.
    until_stats(&shellac, "s_resp_bytes of both responses", |s| {
        s["s_resp_bytes"] == 10
    })
    .await;
    let stats = shellac.stats().await;
    assert_eq!(stats["client_req"], 2);
    assert_eq!(stats["cache_miss"], 1);
    assert_eq!(stats["cache_hit"], 1);
    assert_eq!(stats["cache_insert"], 1);
    assert_eq!(stats["n_object"], 1);
    assert_eq!(stats["backend_req"], 1);
    assert_eq!(stats["s_resp_bytes"], 10);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_and_host_are_part_of_the_key() {
    let origin = Origin::start(|s| Reply::ok(&s.path).cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a?x=1").await;
    assert_eq!(get(shellac.addr, "/a?x=2").await.text(), "/a?x=2");
    get_with(shellac.addr, "/a?x=1", &[("host", "other.example")]).await;
    assert_eq!(origin.count(), 3);
    assert!(
        get(shellac.addr, "/a?x=1")
            .await
            .cache_status()
            .contains("hit")
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_counts_from_backend_age() {
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=600").header("age", "100")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let first = get(shellac.addr, "/").await;
    assert_eq!(first.header("age"), Some("100"));
    let hit = get(shellac.addr, "/").await;
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!((100..=110).contains(&age), "age {age}");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_answered_from_cached_get() {
    let origin = Origin::start(|_| Reply::ok("twelve bytes").cc("max-age=60")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/doc").await;
    let head = request(shellac.addr, "HEAD", "/doc", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some("12"));
    assert!(head.cache_status().contains("hit"));
    assert_eq!(origin.count(), 1);

    // A HEAD miss fetches with GET, so the following GET is a hit. The HEAD is answered from
    // the fill's head while the fill goes on to store the body: a GET before that store
    // follows the fill (`fwd=miss; collapsed`), so the test waits for the store (a sleep of
    // 50 ms was not always enough on a loaded CI machine).
    let head = request(shellac.addr, "HEAD", "/other", &[], b"").await;
    assert!(head.body.is_empty());
    assert_eq!(origin.last().method, "GET");
    until_stats(&shellac, "the HEAD's fill to store /other", |s| {
        s["cache_insert"] == 2
    })
    .await;
    let get = get(shellac.addr, "/other").await;
    assert_eq!(get.text(), "twelve bytes");
    assert!(get.cache_status().contains("hit"), "{}", get.cache_status());
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_via_and_hop_by_hop() {
    let origin = Origin::start(|_| {
        Reply::ok("x")
            .header("connection", "x-backend-hop")
            .header("x-backend-hop", "1")
            .header("keep-alive", "timeout=5")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let resp = get_with(
        shellac.addr,
        "/",
        &[
            ("connection", "x-client-hop"),
            ("x-client-hop", "secret"),
            ("x-forwarded-for", "203.0.113.9"),
            ("te", "trailers"),
            ("host", "www.example.org"),
        ],
    )
    .await;
    let seen = origin.last();
    // The client is not a trusted proxy: its X-Forwarded-For is replaced, not extended.
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen.headers["via"], "1.1 shellac");
    assert_eq!(seen.headers["host"], "www.example.org");
    assert!(!seen.headers.contains_key("x-client-hop"));
    assert!(!seen.headers.contains_key("te"));
    assert!(!resp.headers.contains_key("x-backend-hop"));
    assert!(!resp.headers.contains_key("keep-alive"));
    assert_eq!(resp.header("via"), Some("1.1 shellac"));
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_on_both_sides() {
    let origin = Origin::start(|_| Reply::ok("x").cc("no-store")).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let mut conn = Conn::open(shellac.addr).await;
    for _ in 0..5 {
        assert_eq!(conn.send("GET", "/", &[], b"").await.status, 200);
    }
    let stats = shellac.stats().await;
    assert_eq!(
        stats["client_conn"], 1,
        "one client connection for five requests"
    );
    assert_eq!(stats["backend_conn"], 1, "one backend connection, reused");
    assert_eq!(stats["backend_reuse"], 4);
    assert_eq!(
        stats["backend_recycle"], 5,
        "each complete response returned the connection"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_both_ways() {
    let origin = Origin::start(|s| Reply::ok(&format!("got {} bytes", s.body_len)).chunked()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    // hyper sends a Full body with Content-Length; send a chunked upload by hand.
    let out = raw(
        shellac.addr,
        b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(
        out.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{out}"
    );
    assert!(out.contains("got 11 bytes"), "{out}");
    assert_eq!(origin.last().body_len, 11);
    assert!(
        !origin.last().headers.contains_key("content-length")
            || origin.last().headers["content-length"] == "11"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_limits_are_honoured() {
    let origin = Origin::start(|_| Reply::ok("x").cc("no-store")).await;
    // max_idle = 0: no connection is kept, every request opens one.
    let shellac = Shellac::start(origin.addr, |c| c.backends[0].max_idle = 0).await;
    for _ in 0..3 {
        get(shellac.addr, "/").await;
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_conn"], 3);
    assert_eq!(stats["backend_reuse"], 0);
    shellac.stop().await;

    // A pooled connection idle longer than the pool's idle_timeout is not reused. The second
    // request must find the first one's connection still idle, so the timeout is the whole
    // window between two requests in a row: 100 ms was less than a loaded CI machine can take
    // between them (the second would open a connection of its own); 1 s is not.
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].idle_timeout = shellac::config::units::Dur(std::time::Duration::from_secs(1))
    })
    .await;
    get(shellac.addr, "/").await;
    get(shellac.addr, "/").await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    get(shellac.addr, "/").await;
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_conn"], 2, "{stats:?}");
    assert_eq!(stats["backend_reuse"], 1);
    shellac.stop().await;
}
