//! Request coalescing: one backend fetch for concurrent misses, streamed to every waiter;
//! uncacheable URLs are released at once and never serialised (hit-for-miss).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use http_body_util::BodyExt;
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_misses_make_one_backend_request() {
    let origin = Origin::start(|_| {
        Reply::ok(&"c".repeat(10_000))
            .cc("max-age=60")
            .delay(Duration::from_millis(300))
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let clients: Vec<_> = (0..50)
        .map(|_| tokio::spawn(get(shellac.addr, "/hot")))
        .collect();
    for c in clients {
        let r = c.await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), 10_000);
    }
    assert_eq!(origin.count(), 1, "exactly one backend request");
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_req"], 1);
    assert_eq!(
        stats["cache_miss"] + stats["cache_coalesced"] + stats["cache_hit"],
        50,
        "{stats:?}"
    );
    assert_eq!(stats["cache_miss"], 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_receive_the_body_while_it_streams() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
            first: b"first-part|".to_vec(),
            gate: g.clone(),
            rest: b"rest".to_vec(),
        })
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;

    let mut leader = Conn::open(shellac.addr).await;
    let leader_resp = leader.send_head("GET", "/stream", &[], b"").await;
    let mut waiter = Conn::open(shellac.addr).await;
    let waiter_resp = waiter.send_head("GET", "/stream", &[], b"").await;
    assert_eq!(
        waiter_resp.headers()["cache-status"],
        "shellac; fwd=miss; collapsed"
    );

    // Both see the first chunk although the origin has not finished the body.
    let mut bodies = Vec::new();
    for resp in [leader_resp, waiter_resp] {
        let mut body = resp.into_body();
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("first chunk streamed")
            .unwrap()
            .unwrap();
        assert_eq!(frame.into_data().unwrap(), "first-part|");
        bodies.push(body);
    }
    gate.notify_one();
    for body in bodies {
        assert_eq!(body.collect().await.unwrap().to_bytes(), "rest");
    }
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncacheable_url_is_not_serialised() {
    let origin = Origin::start(|_| {
        Reply::ok("private")
            .cc("private")
            .delay(Duration::from_millis(300))
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;

    // Wave 1: the first request leads; when its response is uncacheable the other 49 are
    // released together and go to the backend in parallel.
    let wave: Vec<_> = (0..50)
        .map(|_| tokio::spawn(get(shellac.addr, "/account")))
        .collect();
    for c in wave {
        assert_eq!(c.await.unwrap().text(), "private");
    }
    assert_eq!(origin.count(), 50);
    assert!(
        origin.peak.load(std::sync::atomic::Ordering::SeqCst) >= 25,
        "released waiters ran in parallel"
    );

    // Wave 2: the URL is remembered as uncacheable, so all 50 go straight to the backend.
    origin.peak.store(0, std::sync::atomic::Ordering::SeqCst);
    let wave: Vec<_> = (0..50)
        .map(|_| tokio::spawn(get(shellac.addr, "/account")))
        .collect();
    for c in wave {
        let r = c.await.unwrap();
        assert!(
            r.cache_status().contains("detail=private"),
            "{}",
            r.cache_status()
        );
    }
    assert_eq!(origin.count(), 100);
    assert!(
        origin.peak.load(std::sync::atomic::Ordering::SeqCst) >= 40,
        "no serialisation"
    );
    let stats = shellac.stats().await;
    // 49 released waiters of wave 1 plus all of wave 2.
    assert_eq!(stats["cache_hitmiss"], 99, "{stats:?}");
    assert_eq!(stats["cache_miss"], 1);
    assert_eq!(stats["n_hit_for_miss"], 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hit_for_miss_url_is_cached_again_when_cacheable() {
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n2 = n.clone();
    let origin = Origin::start(move |_| {
        if n2.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Reply::ok("x").cc("no-store")
        } else {
            Reply::ok("x").cc("max-age=60")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/flip").await;
    let second = get(shellac.addr, "/flip").await;
    assert_eq!(
        second.cache_status(),
        "shellac; fwd=miss; stored; detail=hit-for-miss"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        get(shellac.addr, "/flip")
            .await
            .cache_status()
            .contains("hit")
    );
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_share_a_backend_failure() {
    // A backend that accepts and then answers 504-worthy slowly: waiters get the leader's error.
    let origin = Origin::start(|_| {
        Reply::ok("late")
            .cc("max-age=60")
            .delay(Duration::from_secs(3))
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].first_byte_timeout = shellac::config::units::Dur(Duration::from_millis(300))
    })
    .await;
    let clients: Vec<_> = (0..10)
        .map(|_| tokio::spawn(get(shellac.addr, "/slow")))
        .collect();
    for c in clients {
        assert_eq!(c.await.unwrap().status, 504);
    }
    assert_eq!(
        origin.count(),
        1,
        "waiters did not pile onto the failing backend"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_never_gets_another_vary_variant() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |s| {
        let lang = s
            .headers
            .get("accept-language")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let reply = Reply::ok("")
            .cc("max-age=60")
            .header("vary", "Accept-Language");
        if lang == "fr" {
            reply.body(ReplyBody::Gated {
                first: b"lang=".to_vec(),
                gate: g.clone(),
                rest: b"fr".to_vec(),
            })
        } else {
            reply.body(ReplyBody::Bytes(format!("lang={lang}").into_bytes()))
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let mut fr = Conn::open(shellac.addr).await;
    let fr_resp = fr
        .send_head("GET", "/", &[("accept-language", "fr")], b"")
        .await;
    let de = get_with(shellac.addr, "/", &[("accept-language", "de")]).await;
    assert_eq!(de.text(), "lang=de");
    assert_eq!(
        de.cache_status(),
        "shellac; fwd=miss; stored; detail=vary-miss"
    );
    gate.notify_one();
    assert_eq!(
        fr_resp.into_body().collect().await.unwrap().to_bytes(),
        "lang=fr"
    );
    assert_eq!(shellac.stat("cache_vary_miss").await, 1);
    shellac.stop().await;
}

/// Waiters share one prepared set of fields: each gets the leader's fields without the
/// surrogate ones, plus `Via` and the collapsed `Cache-Status`; a HEAD waiter no body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_the_delivered_fields() {
    let origin = Origin::start(|_| {
        Reply::ok("shared body")
            .cc("max-age=60")
            .header("surrogate-key", "t1")
            .header("x-custom", "kept")
            .delay(Duration::from_millis(300))
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let addr = shellac.addr;
    let clients: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn(async move {
                let method = if i == 5 { "HEAD" } else { "GET" };
                (method, request(addr, method, "/shared", &[], b"").await)
            })
        })
        .collect();
    let mut collapsed = 0;
    for c in clients {
        let (method, r) = c.await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("surrogate-key"), None);
        assert_eq!(r.header("x-custom"), Some("kept"));
        assert_eq!(r.header("via"), Some("1.1 shellac"));
        let want = if method == "HEAD" { "" } else { "shared body" };
        assert_eq!(r.text(), want, "{method}");
        if r.cache_status() == "shellac; fwd=miss; collapsed" {
            collapsed += 1;
        }
    }
    assert_eq!(origin.count(), 1);
    assert!(collapsed >= 1, "some requests waited for the leader");
    assert_eq!(shellac.stat("cache_coalesced").await, collapsed);
    shellac.stop().await;
}
