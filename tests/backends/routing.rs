//! Where requests go: round-robin and fallback order, a sticky hash director, a refused
//! connection retried on the next backend (and a lone one not), restarts on a status up to
//! `max_restarts`, and an HTTP origin on a Unix socket.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_and_fallback_order() {
    let (a, b, c3) = (
        named("a", Arc::new(AtomicBool::new(false))).await,
        named("b", Arc::new(AtomicBool::new(false))).await,
        named("c", Arc::new(AtomicBool::new(false))).await,
    );
    let shellac = Shellac::start(a.addr, |c| {
        backends(c, &[&a, &b, &c3]);
        director(c, DirectorKind::RoundRobin, &["o0", "o1", "o2"]);
    })
    .await;
    assert_eq!(
        futures_names(&shellac, 6).await,
        ["a", "b", "c", "a", "b", "c"]
    );
    shellac.stop().await;

    let shellac = Shellac::start(a.addr, |c| {
        backends(c, &[&a, &b, &c3]);
        director(c, DirectorKind::Fallback, &["o0", "o1", "o2"]);
    })
    .await;
    assert_eq!(futures_names(&shellac, 3).await, ["a", "a", "a"]);
    a.stop();
    assert_eq!(futures_names(&shellac, 3).await, ["b", "b", "b"]);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_director_is_sticky_per_key() {
    let (a, b, c3) = (
        named("a", Arc::new(AtomicBool::new(false))).await,
        named("b", Arc::new(AtomicBool::new(false))).await,
        named("c", Arc::new(AtomicBool::new(false))).await,
    );
    let shellac = Shellac::start(a.addr, |c| {
        backends(c, &[&a, &b, &c3]);
        director(c, DirectorKind::Hash, &["o0", "o1", "o2"]);
    })
    .await;
    let mut first = Vec::new();
    for i in 0..30 {
        first.push(get(shellac.addr, &format!("/k{i}")).await.text());
    }
    for (i, want) in first.iter().enumerate() {
        assert_eq!(&get(shellac.addr, &format!("/k{i}")).await.text(), want);
    }
    let distinct: std::collections::HashSet<&String> = first.iter().collect();
    assert!(distinct.len() >= 2, "keys spread over backends: {first:?}");
    shellac.stop().await;
}

/// Regression (issue 23, defect 15): a refused connection to the only backend used to count a
/// `backend_retry` that never happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_refused_backend_counts_no_retry() {
    let dead_addr = std::net::SocketAddr::from(([127, 0, 0, 1], refused_port()));
    let shellac = Shellac::start(dead_addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/").await.status, 503);
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_fail"], 1, "{stats:?}");
    assert_eq!(stats["backend_retry"], 0, "{stats:?}");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_retried_on_the_next_backend() {
    let dead_addr = std::net::SocketAddr::from(([127, 0, 0, 1], refused_port()));
    let live = named("live", Arc::new(AtomicBool::new(false))).await;
    let shellac = Shellac::start(live.addr, |c| {
        c.backends[0].host = dead_addr.ip().to_string();
        c.backends[0].port = dead_addr.port();
        c.backends[0].name = "dead".into();
        let mut l = shellac::config::BackendConfig::new(
            "live",
            &live.addr.ip().to_string(),
            live.addr.port(),
        );
        l.passive_failures = 0;
        c.backends.push(l);
        director(c, DirectorKind::Fallback, &["dead", "live"]);
    })
    .await;
    for _ in 0..3 {
        assert_eq!(get(shellac.addr, "/").await.text(), "live");
    }
    let stats = shellac.stats().await;
    // Three connection failures, then the dead backend is sick (passive) and skipped.
    assert_eq!(stats["backend_fail"], 3, "{stats:?}");
    assert_eq!(stats["backend_retry"], 3);
    assert_eq!(get(shellac.addr, "/").await.text(), "live");
    assert_eq!(
        shellac.stat("backend_fail").await,
        3,
        "sick backend no longer tried"
    );
    assert!(!healthy(&shellac, "dead").await);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_on_status_with_max_restarts() {
    let a = Origin::start(|_| Reply::ok("a-error").status(500)).await;
    let b = Origin::start(|_| Reply::ok("b-ok").cc("no-store")).await;
    let shellac = Shellac::start(a.addr, |c| {
        backends(c, &[&a, &b]);
        let d = director(c, DirectorKind::Fallback, &["o0", "o1"]);
        c.directors[d].restart_unless = vec![200, 302];
    })
    .await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.text(), "b-ok");
    assert_eq!(shellac.stat("backend_restart").await, 1);
    shellac.stop().await;

    // Three backends all answering 503, max_restarts = 1: the second answer is delivered.
    let c1 = Origin::start(|_| Reply::ok("c1").status(503)).await;
    let c2 = Origin::start(|_| Reply::ok("c2").status(503)).await;
    let c3 = Origin::start(|_| Reply::ok("c3").status(503)).await;
    let shellac = Shellac::start(c1.addr, |c| {
        backends(c, &[&c1, &c2, &c3]);
        let d = director(c, DirectorKind::Fallback, &["o0", "o1", "o2"]);
        c.directors[d].restart_on = vec![503];
        c.directors[d].max_restarts = 1;
    })
    .await;
    let r = get(shellac.addr, "/").await;
    assert_eq!((r.status, r.text().as_str()), (503, "c2"));
    assert_eq!(shellac.stat("backend_restart").await, 1);
    assert_eq!(c3.count(), 0);
    shellac.stop().await;
}

/// `address = "unix:/path"`: an HTTP origin on a Unix socket gets the requests and the
/// health probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_origin_on_a_unix_socket() {
    let dir = TempDir::new("unix-origin");
    let path = dir.0.join("origin.sock");
    let origin = Origin::start_unix(&path, |s| {
        Reply::ok(&format!("unix {}", s.path)).cc("no-store")
    })
    .await;
    let address = format!("unix:{}", path.display());
    let shellac = Shellac::start_hostless(|c| {
        let b = &mut c.backends[0];
        b.address = Some(address.clone());
        b.probe = Some(ProbeRef::Inline(fast_probe()));
    })
    .await;
    for i in 0..3 {
        let r = get(shellac.addr, &format!("/p{i}")).await;
        assert_eq!((r.status, r.text()), (200, format!("unix /p{i}")));
    }
    let v = backend_json(&shellac).await;
    assert_eq!(v["backends"][0]["address"], address.as_str());
    assert_eq!(origin.count_path("/p0"), 1);
    assert!(origin.count() >= 3, "the requests and the probes");
    assert!(v["backends"][0]["conn"].as_u64().unwrap() >= 1, "{v}");
    shellac.stop().await;
    origin.stop();
}
