//! A fast hit is the full path's hit: the same answer byte for byte, the request's Vary
//! variant; requests that would change the answer (and rules that would act on them) take
//! the full path.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_hit_is_the_full_paths_hit() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let fast = Shellac::start(origin.addr, |_| {}).await;
    let full = Shellac::start(origin.addr, |c| c.server.fast_hits = false).await;
    for shellac in [&fast, &full] {
        assert!(
            get(shellac.addr, "/a")
                .await
                .cache_status()
                .contains("fwd=miss")
        );
    }
    for method in ["GET", "HEAD"] {
        let a = request(fast.addr, method, "/a", &[("user-agent", "t/1")], b"").await;
        let b = request(full.addr, method, "/a", &[("user-agent", "t/1")], b"").await;
        assert!(
            a.cache_status().starts_with("shellac; hit; ttl="),
            "{}",
            a.cache_status()
        );
        assert!(a.header("date").is_some(), "a fast hit carries Date");
        assert!(a.header("age").is_some());
        assert_eq!(shape(&a), shape(&b), "{method}");
        assert_eq!(a.header("surrogate-key"), None);
        assert_eq!(a.header("content-length"), Some("10"));
    }
    let (f, s) = (fast.stats().await, full.stats().await);
    assert_eq!(f["cache_hit_fast"], 2);
    assert_eq!(s["cache_hit_fast"], 0);
    for name in [
        "client_req",
        "cache_hit",
        "cache_hit_memory",
        "s_resp_bytes",
    ] {
        assert_eq!(f[name], s[name], "{name}");
    }
    assert_eq!(f["cache_hit"], 2);
    assert_eq!(origin.count(), 2);
    fast.stop().await;
    full.stop().await;
}

/// Requests a stored object cannot simply answer are left to the full path, which applies
/// their semantics (304, 206, revalidation, pass, close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_change_the_answer_take_the_full_path() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/a").await;
    let not_modified = get_with(shellac.addr, "/a", &[("if-none-match", "\"v1\"")]).await;
    assert_eq!(not_modified.status, 304);
    let partial = get_with(shellac.addr, "/a", &[("range", "bytes=0-3")]).await;
    assert_eq!((partial.status, partial.text().as_str()), (206, "body"));
    let authorized = get_with(shellac.addr, "/a", &[("authorization", "Basic eDp5")]).await;
    assert!(
        authorized.cache_status().contains("detail=authorization"),
        "{}",
        authorized.cache_status()
    );
    // Fields the full path removes (rewrite fields; forwarding fields from an untrusted
    // client) leave the request to it: it alone knows what the log then shows.
    for field in [("X-Original-URL", "/b"), ("X-Forwarded-For", "203.0.113.9")] {
        let r = get_with(shellac.addr, "/a", &[field]).await;
        assert!(r.cache_status().contains("hit"), "{field:?}");
    }
    // Connection: close is honoured (hyper answers and closes).
    let closing = exchange(
        shellac.addr,
        b"GET /a HTTP/1.1\r\nhost: test.example\r\nconnection: close\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    assert!(closing.closed, "closed after Connection: close");
    assert!(
        closing
            .text
            .to_ascii_lowercase()
            .contains("connection: close")
    );
    // HTTP/1.0: hyper's framing and keep-alive rules, an HTTP/1.1 status line (RFC 9110 §6.2).
    let old = exchange(
        shellac.addr,
        b"GET /a HTTP/1.0\r\nhost: test.example\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    assert!(old.text.starts_with("HTTP/1.1 200"), "{}", old.text);
    assert!(old.closed);
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit_fast"], 0, "none of these was a fast hit");
    // 304, 206, the two with removed fields and the two raw ones: hits answered by the full
    // path.
    assert_eq!(stats["cache_hit"], 6);
    shellac.stop().await;
}

/// A URL with `Vary` variants: a fast hit picks the request's variant as the full path does
/// (Accept-Encoding normalised), and never another variant's body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_hits_pick_the_requests_variant() {
    let origin = Origin::start(|s| {
        let ae = s
            .headers
            .get("accept-encoding")
            .map_or("none", |v| v.to_str().unwrap());
        Reply::ok(&format!("for {ae}"))
            .cc("max-age=60")
            .header("vary", "Accept-Encoding")
    })
    .await;
    // `Vary: Accept-Encoding` as any field: without the negotiation, which serves every
    // client from one object (tests/compression/).
    let fast = Shellac::start(origin.addr, |c| c.compression.enabled = false).await;
    let full = Shellac::start(origin.addr, |c| {
        c.server.fast_hits = false;
        c.compression.enabled = false;
    })
    .await;
    let variants: [&[(&str, &str)]; 3] = [
        &[("accept-encoding", "gzip")],
        &[("accept-encoding", "br")],
        &[],
    ];
    for shellac in [&fast, &full] {
        for fields in variants {
            assert!(
                get_with(shellac.addr, "/v", fields)
                    .await
                    .cache_status()
                    .contains("fwd=miss")
            );
        }
    }
    // "gzip, deflate" normalises to gzip; "deflate" to no Accept-Encoding at all.
    for (fields, body) in [
        (&[("accept-encoding", "gzip, deflate")][..], "for gzip"),
        (&[("accept-encoding", "br")][..], "for br"),
        (&[("accept-encoding", "deflate")][..], "for none"),
        (&[][..], "for none"),
    ] {
        let a = get_with(fast.addr, "/v", fields).await;
        let b = get_with(full.addr, "/v", fields).await;
        assert_eq!(a.text(), body, "{fields:?}");
        assert_eq!(shape(&a), shape(&b), "{fields:?}");
    }
    assert_eq!(fast.stat("cache_hit_fast").await, 4);
    assert_eq!(full.stat("cache_hit").await, 4);
    assert_eq!(origin.count(), 6);
    fast.stop().await;
    full.stop().await;
}

/// With operator rules (examples/wordpress-apache.toml): a page no rule answers or edits is
/// a fast hit (the response-phase rules and `cache` change nothing on a hit); so is a static
/// file, whose rule strips the request's cookies (they change nothing here: the URL does not
/// vary on them and the log does not print them); a logged-in visitor's request is passed by
/// its rule, static file or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_that_would_act_keep_their_requests_on_the_full_path() {
    let origin = Origin::start(|s| origin_reply(&s.path)).await;
    let shellac = Shellac::start_file("examples/wordpress-apache.toml", origin.addr, |_| {}).await;
    for path in ["/a", "/style.css"] {
        assert!(
            get(shellac.addr, path)
                .await
                .cache_status()
                .contains("fwd=miss")
        );
    }
    assert!(get(shellac.addr, "/a").await.cache_status().contains("hit"));
    let css = get_with(shellac.addr, "/style.css", &[("cookie", "theme=dark")]).await;
    assert!(css.cache_status().contains("hit"), "{}", css.cache_status());
    assert_eq!(
        shellac.stat("cache_hit_fast").await,
        2,
        "the page and the static file"
    );
    for path in ["/a", "/style.css"] {
        let r = get_with(shellac.addr, path, &[("cookie", "wordpress_logged_in_x=1")]).await;
        assert!(
            r.cache_status().contains("fwd=request"),
            "{path}: {}",
            r.cache_status()
        );
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_hit_fast"], 2);
    assert_eq!(stats["cache_hit"], 2);
    shellac.stop().await;
}
