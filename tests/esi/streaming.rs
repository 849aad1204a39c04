//! Includes fetched in parallel and bounded by `esi.concurrency`, a page assembled as it
//! arrives, and fragments that stall (the between-bytes timeout, a late failure abort).

use super::*;

/// All includes of a page are requested before any of them has finished, and the page's
/// first bytes reach the client while none has: the fragments' bodies are held back by the
/// origin until the test lets them go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn includes_are_fetched_in_parallel_and_the_page_and_fragments_stream() {
    let gates: Arc<Vec<Arc<Notify>>> = Arc::new((0..4).map(|_| Arc::new(Notify::new())).collect());
    let g = gates.clone();
    let origin = Origin::start(move |s| {
        let frag = |i: usize| {
            Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
                first: format!("f{i}:").into_bytes(),
                gate: g[i].clone(),
                rest: b"done".to_vec(),
            })
        };
        match s.path.as_str() {
            "/par" => Reply::ok(
                "<p>head</p><esi:include src=\"/f0\"/><esi:include src=\"/f1\"/>\
                 <esi:include src=\"/f2\"/><esi:include src=\"/f3\"/>",
            )
            .cc("max-age=60"),
            "/f0" => frag(0),
            "/f1" => frag(1),
            "/f2" => frag(2),
            "/f3" => frag(3),
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    // ESI on for the page only: its fragments are plain bodies that stream.
    let shellac = Shellac::start(origin.addr, |config: &mut Config| {
        esi_on(config, "^/par$");
    })
    .await;
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/par", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("first bytes before any fragment finished")
        .expect("a frame")
        .expect("data");
    assert_eq!(first.into_data().expect("data"), "<p>head</p>");
    // Every fragment was requested, none has finished.
    for _ in 0..200 {
        if origin.count() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        origin.count(),
        5,
        "the four includes are in flight together"
    );
    // The first fragment streams: its first bytes come while the rest of it is held back
    // at the origin.
    let next = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("a fragment's first bytes before its end")
        .expect("a frame")
        .expect("data");
    assert_eq!(next.into_data().expect("data"), "f0:");
    for g in gates.iter() {
        g.notify_one();
    }
    let rest = body.collect().await.expect("body").to_bytes();
    assert_eq!(rest, "donef1:donef2:donef3:done");
    shellac.stop().await;
}

/// `esi.concurrency` bounds the includes of one page in flight: with 2, the page's four
/// uncached fragments are requested two at a time — the third only once the first has ended,
/// the fourth once the second has — and the page still comes whole, in page order. Each
/// fragment's origin notes how many fragments had been let finish when it was asked (no
/// timing is asserted: without the bound the last two are asked before any is let finish).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_includes_in_flight_are_bounded_by_concurrency() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let gates: Arc<Vec<Arc<Notify>>> = Arc::new((0..4).map(|_| Arc::new(Notify::new())).collect());
    let released = Arc::new(AtomicUsize::new(0));
    let asked: Arc<Mutex<Vec<(String, usize)>>> = Arc::default();
    let (g, r, a) = (gates.clone(), released.clone(), asked.clone());
    let origin = Origin::start(move |s| {
        let frag = |i: usize| {
            if let Ok(mut asked) = a.lock() {
                asked.push((s.path.clone(), r.load(Ordering::SeqCst)));
            }
            Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
                first: format!("f{i}:").into_bytes(),
                gate: g[i].clone(),
                rest: b"done".to_vec(),
            })
        };
        match s.path.as_str() {
            "/bounded" => Reply::ok(
                "<p><esi:include src=\"/g0\"/><esi:include src=\"/g1\"/>\
                 <esi:include src=\"/g2\"/><esi:include src=\"/g3\"/></p>",
            )
            .cc("max-age=60"),
            "/g0" => frag(0),
            "/g1" => frag(1),
            "/g2" => frag(2),
            "/g3" => frag(3),
            _ => Reply::ok("?").status(404),
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |config: &mut Config| {
        config.esi.concurrency = 2;
        esi_on(config, "^/bounded$");
    })
    .await;
    let addr = shellac.addr;
    let page = tokio::spawn(async move { get(addr, "/bounded").await });
    // Let the fragments finish one by one in page order, each once the origin has seen as
    // many requests as the bound lets in (the page, then two fragments, then one more per
    // fragment finished).
    for (i, gate) in gates.iter().enumerate() {
        let seen = (1 + 2 + i).min(5);
        for _ in 0..400 {
            if origin.count() >= seen {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(origin.count() >= seen, "request {seen} never came");
        released.fetch_add(1, Ordering::SeqCst);
        gate.notify_one();
    }
    let r = tokio::time::timeout(Duration::from_secs(20), page)
        .await
        .expect("the page ends")
        .expect("the client task");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<p>f0:donef1:donef2:donef3:done</p>");
    let asked = asked.lock().expect("asked").clone();
    let when = |path: &str| {
        asked
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, n)| *n)
            .unwrap_or_else(|| panic!("{path} was never asked: {asked:?}"))
    };
    assert_eq!((when("/g0"), when("/g1")), (0, 0), "{asked:?}");
    assert!(when("/g2") >= 1, "a third include in flight: {asked:?}");
    assert!(when("/g3") >= 2, "a third include in flight: {asked:?}");
    shellac.stop().await;
}

/// A page being fetched (a miss) is parsed as it arrives, not read whole first: its bytes
/// before an include, and the include, reach the client while the origin still holds the
/// rest of the page back. Its head went out before its end, so it is sent `no-cache` (the
/// freshness of its includes still to come is not known).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_being_fetched_is_assembled_as_it_arrives() {
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |s| match s.path.as_str() {
        "/slow-page" => Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
            first: b"<p>head</p><esi:include src=\"/a\"/>".to_vec(),
            gate: g.clone(),
            rest: b"<p>tail</p><esi:include src=\"/b\"/>".to_vec(),
        }),
        _ => site(s),
    })
    .await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/slow-page", &[], b"").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap_or("")),
        Some("no-cache")
    );
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while got != b"<p>head</p>A" {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("the page's first bytes and include before its end was fetched")
            .expect("a frame")
            .expect("data");
        got.extend_from_slice(&frame.into_data().expect("data"));
        assert!(b"<p>head</p>A".starts_with(&got), "{got:?}");
    }
    gate.notify_one();
    let rest = body.collect().await.expect("body").to_bytes();
    assert_eq!(rest, "<p>tail</p>B");
    // Stored with its program: the hit is the same page.
    assert_eq!(
        get_text(&shellac, "/slow-page").await,
        (200, "<p>head</p>A<p>tail</p>B".into())
    );
    assert_eq!(shellac.stat("esi_programs").await, 1);
    shellac.stop().await;
}

/// A page that turns out to hold no ESI keeps its `Content-Length` on the miss too (Varnish
/// 2.1.5 e00000, e00009).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_esi_keeps_its_length_on_the_miss() {
    let origin = Origin::start(site).await;
    let shellac = Shellac::start(origin.addr, esi_rule).await;
    for _ in 0..2 {
        let r = get(shellac.addr, "/json").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("30"));
        assert_eq!(r.text(), r#"{"a": "<esi:include src=/a/>"}"#);
    }
    shellac.stop().await;
}

/// The origin of the stall tests: `/stalls` and `/stalls2` send their head and `part`, then
/// nothing more (their gate is never opened); the pages include them among stored fragments.
fn stalling(stuck: Arc<Notify>) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |s| {
        let page = |body: &str| Reply::ok(body).cc("max-age=60");
        match s.path.as_str() {
            "/stalls" | "/stalls2" => Reply::ok("").cc("max-age=60").body(ReplyBody::Gated {
                first: b"part".to_vec(),
                gate: stuck.clone(),
                rest: b"never".to_vec(),
            }),
            "/stall-page" => page(
                r#"<p><esi:include src="/stalls"/>|<esi:include src="/a"/>|<esi:include src="/b"/>|<esi:include src="/c"/></p>"#,
            ),
            "/stall-page2" => {
                page(r#"<p><esi:include src="/a"/>|<esi:include src="/stalls2"/>|</p>"#)
            }
            "/c" => page("C"),
            _ => site(s),
        }
    }
}

/// A fragment whose origin sends its head and part of its body, then stalls: the page keeps
/// its order and its bound (with `esi.concurrency = 2` the stalled fragment and the stored
/// one read in place behind it hold both places: `/c` is not asked for while it stalls);
/// past the backend's `between_bytes_timeout` the fragment fails as a failure after the
/// page's first byte does — its bytes so far stay, the rest is left out
/// (`esi.late_failure = "drop"`) — and the page goes on and ends. The stalled fragment is not
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_that_stalls_mid_body_is_dropped_at_the_between_bytes_timeout() {
    let stuck = Arc::new(Notify::new());
    let origin = Origin::start(stalling(stuck.clone())).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_rule(c);
        c.esi.concurrency = 2;
        c.backends[0].between_bytes_timeout =
            shellac::config::units::Dur(Duration::from_millis(1500));
    })
    .await;
    // Stored: read in place by the page.
    assert_eq!(get_text(&shellac, "/a").await, (200, "A".into()));
    assert_eq!(get_text(&shellac, "/b").await, (200, "B".into()));
    let addr = shellac.addr;
    let page = tokio::spawn(async move { get(addr, "/stall-page").await });
    assert!(
        eventually(Duration::from_secs(10), || async {
            origin.count_path("/stalls") == 1
        })
        .await,
        "the stalling fragment is asked for"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        origin.count_path("/c"),
        0,
        "a third include in flight while the first stalls"
    );
    let r = tokio::time::timeout(Duration::from_secs(30), page)
        .await
        .expect("the page ends")
        .expect("the client task");
    assert_eq!((r.status, r.text()), (200, "<p>part|A|B|C</p>".into()));
    assert_eq!(shellac.stat("esi_include_failed").await, 1);
    assert_eq!(shellac.stat("esi_include_dropped").await, 1);
    assert_eq!(origin.count_path("/c"), 1);
    // Not stored: asked for again.
    let page = tokio::spawn(async move { get(addr, "/stall-page").await });
    let r = tokio::time::timeout(Duration::from_secs(30), page)
        .await
        .expect("the page ends")
        .expect("the client task");
    assert_eq!((r.status, r.text()), (200, "<p>part|A|B|C</p>".into()));
    assert_eq!(origin.count_path("/stalls"), 2);
    shellac.stop().await;
}

/// The same stall with `esi.late_failure = "abort"`, the fragment asked for by the page while
/// another client's request is already fetching it (the page's sub-request follows that
/// fetch): at the backend's `between_bytes_timeout` both responses are cut — the page after
/// the bytes it had sent (its head went out with `<p>A|`), the other client's after `part` —
/// and neither hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_fragment_that_stalls_cuts_the_page_with_late_failure_abort() {
    let stuck = Arc::new(Notify::new());
    let origin = Origin::start(stalling(stuck.clone())).await;
    let shellac = Shellac::start(origin.addr, |c| {
        esi_on(c, "^/stall-page2$");
        c.esi.late_failure = shellac::config::esi::LateFailure::Abort;
        c.backends[0].between_bytes_timeout =
            shellac::config::units::Dur(Duration::from_millis(1500));
    })
    .await;
    assert_eq!(get_text(&shellac, "/a").await, (200, "A".into()));
    // Another client fetches the fragment first: head and `part`, then the stall.
    let mut direct = Conn::open(shellac.addr).await;
    let resp = direct.send_head("GET", "/stalls2", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let mut direct = resp.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), direct.frame())
        .await
        .expect("the fragment's first bytes")
        .expect("a frame")
        .expect("data");
    assert_eq!(first.into_data().expect("data"), "part");
    let mut conn = Conn::open(shellac.addr).await;
    let resp = conn.send_head("GET", "/stall-page2", &[], b"").await;
    assert_eq!(resp.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect())
        .await
        .expect("the page ends");
    assert!(body.is_err(), "the page is cut");
    let rest = tokio::time::timeout(Duration::from_secs(30), direct.collect())
        .await
        .expect("the fragment's response ends");
    assert!(rest.is_err(), "the fragment's own response is cut");
    assert_eq!(
        origin.count_path("/stalls2"),
        1,
        "the page followed the fetch"
    );
    assert_eq!(shellac.stat("esi_include_failed").await, 1);
    shellac.stop().await;
}
