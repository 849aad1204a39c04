//! Conditional requests from clients answered from cache (RFC 9110 §13, RFC 9111 §4.3.2).

mod common;

use common::*;

const LM: &str = "Sat, 21 Nov 2026 10:00:00 GMT";

async fn setup() -> (Origin, Shellac) {
    let origin = Origin::start(|_| {
        Reply::ok("body")
            .cc("max-age=60")
            .header("etag", "\"v1\"")
            .header("last-modified", LM)
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/doc").await;
    (origin, shellac)
}

/// RFC 9110 §13.1.2: If-None-Match uses weak comparison; a match on GET is 304.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_none_match_gets_304_from_cache() {
    let (origin, shellac) = setup().await;
    for tag in ["\"v1\"", "W/\"v1\"", "\"x\", \"v1\"", "*"] {
        let r = get_with(shellac.addr, "/doc", &[("if-none-match", tag)]).await;
        assert_eq!(r.status, 304, "{tag}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some("\"v1\""));
        assert_eq!(r.header("cache-control"), Some("max-age=60"));
        assert!(r.cache_status().contains("hit"));
    }
    assert_eq!(
        get_with(shellac.addr, "/doc", &[("if-none-match", "\"v2\"")])
            .await
            .status,
        200
    );
    assert_eq!(origin.count(), 1, "all answered from cache");
    shellac.stop().await;
}

/// RFC 9110 §13.1.3: If-Modified-Since, ignored when If-None-Match is present (§13.2.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_modified_since() {
    let (_origin, shellac) = setup().await;
    assert_eq!(
        get_with(shellac.addr, "/doc", &[("if-modified-since", LM)])
            .await
            .status,
        304
    );
    assert_eq!(
        get_with(
            shellac.addr,
            "/doc",
            &[("if-modified-since", "Sun, 22 Nov 2026 10:00:00 GMT")]
        )
        .await
        .status,
        304
    );
    assert_eq!(
        get_with(
            shellac.addr,
            "/doc",
            &[("if-modified-since", "Fri, 20 Nov 2026 10:00:00 GMT")]
        )
        .await
        .status,
        200
    );
    let r = get_with(
        shellac.addr,
        "/doc",
        &[("if-none-match", "\"other\""), ("if-modified-since", LM)],
    )
    .await;
    assert_eq!(r.status, 200, "INM takes precedence");
    shellac.stop().await;
}

/// RFC 9110 §13.1.1 and §13.1.4: If-Match (strong) and If-Unmodified-Since → 412.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_match_and_if_unmodified_since_give_412() {
    let (_origin, shellac) = setup().await;
    assert_eq!(
        get_with(shellac.addr, "/doc", &[("if-match", "\"v1\"")])
            .await
            .status,
        200
    );
    assert_eq!(
        get_with(shellac.addr, "/doc", &[("if-match", "\"v2\"")])
            .await
            .status,
        412
    );
    assert_eq!(
        get_with(shellac.addr, "/doc", &[("if-match", "W/\"v1\"")])
            .await
            .status,
        412
    );
    assert_eq!(
        get_with(
            shellac.addr,
            "/doc",
            &[("if-unmodified-since", "Fri, 20 Nov 2026 10:00:00 GMT")]
        )
        .await
        .status,
        412
    );
    assert_eq!(
        get_with(shellac.addr, "/doc", &[("if-unmodified-since", LM)])
            .await
            .status,
        200
    );
    shellac.stop().await;
}

/// HEAD with a matching validator is 304 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_conditional() {
    let (_origin, shellac) = setup().await;
    let r = request(
        shellac.addr,
        "HEAD",
        "/doc",
        &[("if-none-match", "\"v1\"")],
        b"",
    )
    .await;
    assert_eq!(r.status, 304);
    shellac.stop().await;
}
