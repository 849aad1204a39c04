//! Conditional requests from clients answered from cache (RFC 9110 §13, RFC 9111 §4.3.2).

use crate::common;

use std::time::Duration;

use crate::common::*;

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

/// Issue 32, reported under load: a stored object needing revalidation (`no-cache`) once
/// answered 200 to a request with a matching `If-None-Match`. Requests that arrive while
/// another revalidates the object wait for it (coalesced) and were given the refreshed
/// object whole, their preconditions never evaluated (they never reach the backend). Every
/// one of them now gets 304, whichever way it is served (leader, waiter, later hit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revalidated_object_answers_matching_if_none_match_with_304_under_load() {
    let origin = Origin::start(|s| {
        if s.headers
            .get("if-none-match")
            .is_some_and(|v| v == "\"v1\"")
        {
            // Slow enough that the other requests queue behind this revalidation.
            return Reply::ok("")
                .status(304)
                .cc("no-cache")
                .header("etag", "\"v1\"")
                .delay(std::time::Duration::from_millis(300));
        }
        Reply::ok("the body")
            .cc("no-cache")
            .header("etag", "\"v1\"")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/doc").await.status, 200);
    let mut all = Vec::new();
    for _ in 0..8 {
        let addr = shellac.addr;
        all.push(tokio::spawn(async move {
            get_with(addr, "/doc", &[("if-none-match", "\"v1\"")]).await
        }));
    }
    for task in all {
        let r = task.await.unwrap();
        assert_eq!(r.status, 304, "{}", r.cache_status());
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some("\"v1\""));
    }
    // A client without the validator still gets the body.
    let r = get(shellac.addr, "/doc").await;
    assert_eq!((r.status, r.text().as_str()), (200, "the body"));
    shellac.stop().await;
}

/// Issue 32: a `Cache-Control: no-store` response to a request with a matching
/// `If-None-Match` was delivered 200 with its body. Shellac fetches for the cache without
/// the client's preconditions, so it owes their answer: on the 200 it has (the selected
/// representation's validators) the origin would have said 304, and so does Shellac now
/// (RFC 9110 §13.2.2; Varnish evaluates them on every 200 it delivers). A request Shellac
/// passes keeps its preconditions: the origin sees them, and its own 200 is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_store_response_to_matching_if_none_match_is_304() {
    let origin = Origin::start(|s| {
        let reply = Reply::ok("private page")
            .cc("no-store")
            .header("etag", "\"p1\"")
            .header("last-modified", LM);
        // What the origin was asked, for the assertions below.
        match s.headers.get("if-none-match") {
            Some(v) => reply.header("x-seen-inm", v.to_str().unwrap_or("?")),
            None => reply,
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.rules = shellac::config::Config::parse(
            "[[backend]]\nhost = \"h\"\n\n[[rule]]\npath = '^/passed'\npass = true\n",
            "rules.toml",
        )
        .unwrap()
        .rules;
    })
    .await;
    let r = get_with(shellac.addr, "/page", &[("if-none-match", "\"p1\"")]).await;
    assert_eq!(r.status, 304, "{}", r.cache_status());
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some("\"p1\""));
    assert_eq!(r.header("x-seen-inm"), None, "the fill was unconditional");
    assert_eq!(r.header("content-type"), None);
    let r = get_with(shellac.addr, "/page", &[("if-modified-since", LM)]).await;
    assert_eq!(r.status, 304, "{}", r.cache_status());
    let r = get_with(shellac.addr, "/page", &[("if-match", "\"other\"")]).await;
    assert_eq!(r.status, 412, "{}", r.cache_status());
    let r = get_with(shellac.addr, "/page", &[("if-none-match", "\"old\"")]).await;
    assert_eq!((r.status, r.text().as_str()), (200, "private page"));
    // Passed: the precondition went to the origin, whose 200 stands.
    let r = get_with(shellac.addr, "/passed", &[("if-none-match", "\"p1\"")]).await;
    assert_eq!(r.header("x-seen-inm"), Some("\"p1\""));
    assert_eq!((r.status, r.text().as_str()), (200, "private page"));
    shellac.stop().await;
}

/// Issue 32 (two lists of a 304's fields): a 304 from a stored object kept only an allow-list
/// (Cache-Control, Content-Location, Date, ETag, Expires, Vary, Last-Modified) while a 304
/// made from a fetched 200 (a miss whose preconditions Shellac answers itself) kept every field
/// but the body's — so the same URL's 304 differed by whether it was cached. Now both make it
/// one way (`http::conditional::not_modified_fields`, RFC 9110 §15.4.5): the 200's fields, the
/// six the RFC names and the others it allows (Last-Modified, `Link`, an origin's own), without
/// the representation metadata of the body a 304 has not (type, coding, language, length,
/// digest) nor its framing. Over HTTP/1.1 and HTTP/2, on the miss and on the hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_carries_the_same_fields_from_the_cache_as_from_a_fetch() {
    let origin = Origin::start(|_| {
        Reply::ok("body")
            .cc("max-age=60")
            .header("etag", "\"v1\"")
            .header("last-modified", LM)
            .header("expires", "Thu, 18 Aug 2050 02:01:18 GMT")
            .header("content-location", "/doc.en")
            .header("vary", "Accept-Language")
            .header("content-type", "text/plain")
            .header("content-language", "en")
            .header(
                "content-digest",
                "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:",
            )
            .header("accept-ranges", "bytes")
            .header("link", "</s.css>; rel=preload")
            .header("x-custom", "kept")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.http2.h2c = shellac::config::http2::H2c::All;
    })
    .await;
    let inm = [("if-none-match", "\"v1\"")];
    let mut h2 = common::h2::H2Conn::open(shellac.addr).await;
    let mut seen = Vec::new();
    for (proto, path) in [("HTTP/1.1", "/h1"), ("HTTP/2", "/h2")] {
        for made in ["fwd=miss", "hit"] {
            if made == "hit" {
                // The 304 may go out before the fill is stored: a hit from then on.
                let stored = eventually(Duration::from_secs(10), || async {
                    get(shellac.addr, path).await.cache_status().contains("hit")
                });
                assert!(stored.await, "{proto}: stored");
            }
            let r = match proto {
                "HTTP/2" => h2.send("GET", path, &inm, b"").await,
                _ => get_with(shellac.addr, path, &inm).await,
            };
            let what = format!("{proto} {made}");
            assert_eq!(r.status, 304, "{what}");
            assert!(r.cache_status().contains(made), "{what}: {:?}", r.headers);
            assert!(r.body.is_empty(), "{what}");
            for (name, value) in [
                ("cache-control", "max-age=60"),
                ("etag", "\"v1\""),
                ("expires", "Thu, 18 Aug 2050 02:01:18 GMT"),
                ("content-location", "/doc.en"),
                ("vary", "Accept-Language"),
                ("last-modified", LM),
                ("link", "</s.css>; rel=preload"),
                ("x-custom", "kept"),
            ] {
                assert_eq!(r.header(name), Some(value), "{what}: {name}");
            }
            assert!(r.header("date").is_some(), "{what}: date");
            for name in [
                "content-type",
                "content-language",
                "content-length",
                "content-digest",
                "accept-ranges",
                "transfer-encoding",
            ] {
                assert_eq!(r.header(name), None, "{what}: {name}");
            }
            let mut names: Vec<String> = r
                .headers
                .keys()
                .map(|n| n.as_str().to_string())
                .filter(|n| n != "age")
                .collect();
            names.sort();
            seen.push((what, names));
        }
    }
    for (what, names) in &seen[1..] {
        assert_eq!(names, &seen[0].1, "{what} against {}", seen[0].0);
    }
    assert_eq!(origin.count_path("/h1"), 1, "one fetch per URL");
    assert_eq!(origin.count_path("/h2"), 1, "one fetch per URL");
    shellac.stop().await;
}
