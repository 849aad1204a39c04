//! Request coalescing: one backend fetch for concurrent misses, streamed to every waiter;
//! uncacheable URLs are released at once and never serialised (hit-for-miss).

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use http_body_util::BodyExt;
use tokio::sync::Notify;

/// Fifty requests for one missing URL: one goes to the backend, 49 wait for it. The origin
/// holds the rest of the body until every client has its response head, so no request can
/// arrive after the object is complete and be a plain hit: each of the 49 must have joined the
/// fetch (`cache_coalesced` = 49), whatever the timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_misses_make_one_backend_request() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
            first: vec![b'c'; 5_000],
            gate: g.clone(),
            rest: vec![b'c'; 5_000],
        })
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let addr = shellac.addr;
    let heads: Vec<_> = (0..50)
        .map(|_| {
            tokio::spawn(async move {
                let mut conn = Conn::open(addr).await;
                let resp = conn.send_head("GET", "/hot", &[], b"").await;
                (conn, resp)
            })
        })
        .collect();
    let mut responses = Vec::new();
    let mut collapsed = 0;
    for h in heads {
        let (conn, resp) = h.await.unwrap();
        assert_eq!(resp.status(), 200);
        if resp.headers()["cache-status"] == "shellac; fwd=miss; collapsed" {
            collapsed += 1;
        }
        responses.push((conn, resp));
    }
    // Every head is out and the body is still held: one leader, 49 waiters.
    assert_eq!(collapsed, 49);
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_miss"], 1, "{stats:?}");
    assert_eq!(stats["cache_coalesced"], 49, "{stats:?}");
    assert_eq!(stats["cache_hit"], 0, "{stats:?}");
    gate.notify_one();
    for (_conn, resp) in responses {
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 10_000);
        assert!(body.iter().all(|&b| b == b'c'));
    }
    assert_eq!(origin.count(), 1, "exactly one backend request");
    assert_eq!(shellac.stat("backend_req").await, 1);
    // The object is stored: the next request is a hit.
    assert_eq!(get(shellac.addr, "/hot").await.body.len(), 10_000);
    assert_eq!(shellac.stat("cache_hit").await, 1);
    assert_eq!(origin.count(), 1);
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
/// surrogate ones, plus `Via` and the collapsed `Cache-Status`; a HEAD waiter no body. The
/// origin holds the body's end until all six have their heads, so the five after the leader
/// are waiters whatever the timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_the_delivered_fields() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .cc("max-age=60")
            .header("surrogate-key", "t1")
            .header("x-custom", "kept")
            .body(ReplyBody::Gated {
                first: b"shared ".to_vec(),
                gate: g.clone(),
                rest: b"body".to_vec(),
            })
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let addr = shellac.addr;
    let mut leader = Conn::open(addr).await;
    let leader_resp = leader.send_head("GET", "/shared", &[], b"").await;
    assert_eq!(
        leader_resp.headers()["cache-status"],
        "shellac; fwd=miss; stored"
    );
    let clients: Vec<_> = (0..5)
        .map(|i| {
            tokio::spawn(async move {
                let method = if i == 4 { "HEAD" } else { "GET" };
                let mut conn = Conn::open(addr).await;
                let resp = conn.send_head(method, "/shared", &[], b"").await;
                (method, conn, resp)
            })
        })
        .collect();
    let mut waiters = Vec::new();
    for c in clients {
        waiters.push(c.await.unwrap());
    }
    assert_eq!(shellac.stat("cache_coalesced").await, 5);
    gate.notify_one();
    let leader_body = leader_resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(leader_body, "shared body");
    for (method, _conn, r) in waiters {
        assert_eq!(r.status(), 200);
        let h = r.headers();
        assert_eq!(
            h["cache-status"], "shellac; fwd=miss; collapsed",
            "{method}"
        );
        assert!(h.get("surrogate-key").is_none());
        assert_eq!(h["x-custom"], "kept");
        assert_eq!(h["via"], "1.1 shellac");
        let want = if method == "HEAD" { "" } else { "shared body" };
        let body = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, want, "{method}");
    }
    assert_eq!(origin.count(), 1);
    shellac.stop().await;
}

/// A request that finds another's fetch of its object in progress is counted
/// (`cache_busy_wait`, Varnish's busy_sleep) as it starts to wait, before any response head
/// is there. Once the head comes, each is served from that fetch (`cache_coalesced`) or, when
/// the whole object is stored by then, from the cache (`cache_hit`); no waiter fetches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_counted_as_they_start_waiting() {
    let origin = crate::common::raw_origin::GatedOrigin::start(
        b"",
        b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 2\r\n\r\nok",
    )
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let addr = shellac.addr;
    let clients: Vec<_> = (0..4)
        .map(|_| tokio::spawn(async move { get(addr, "/held").await }))
        .collect();
    // One leader waits for the origin's head (held), three wait for the leader.
    let three = || async { shellac.stat("cache_busy_wait").await == 3 };
    assert!(eventually(Duration::from_secs(20), three).await);
    assert_eq!(shellac.stat("cache_coalesced").await, 0);
    origin.go.notify_one();
    for c in clients {
        assert_eq!(c.await.unwrap().text(), "ok");
    }
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_miss"], 1);
    assert_eq!(stats["cache_busy_wait"], 3);
    assert_eq!(
        stats["cache_coalesced"] + stats["cache_hit"],
        3,
        "{stats:?}"
    );
    shellac.stop().await;
    origin.abort();
}
