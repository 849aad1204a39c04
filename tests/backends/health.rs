//! Health: a failing probe takes a backend out and back, no client errors while one dies under
//! load, a raw probe with its expected status never on the request path, and every backend
//! sick: stale within `keep`, else 503.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_probe_takes_a_backend_out_and_back() {
    let fail_a = Arc::new(AtomicBool::new(false));
    let a = named("a", fail_a.clone()).await;
    let b = named("b", Arc::new(AtomicBool::new(false))).await;
    let shellac = Shellac::start(a.addr, |c| {
        backends(c, &[&a, &b]);
        c.backends[0].probe = Some(ProbeRef::Inline(fast_probe()));
        director(c, DirectorKind::RoundRobin, &["o0", "o1"]);
    })
    .await;
    assert!(healthy(&shellac, "o0").await);

    fail_a.store(true, Ordering::SeqCst);
    wait_health(&shellac, "o0", false).await;
    let v = backend_json(&shellac).await;
    let probe = &v["backends"][0]["probe"];
    assert!(
        probe["history"].as_str().unwrap().ends_with("--"),
        "{probe}"
    );
    assert!(
        probe["last"].as_str().unwrap().contains("HTTP 500"),
        "{probe}"
    );
    for _ in 0..10 {
        assert_eq!(
            get(shellac.addr, "/page").await.text(),
            "b",
            "sick backend gets no traffic"
        );
    }

    fail_a.store(false, Ordering::SeqCst);
    wait_health(&shellac, "o0", true).await;
    let names: Vec<String> = futures_names(&shellac, 4).await;
    assert!(
        names.contains(&"a".to_string()) && names.contains(&"b".to_string()),
        "{names:?}"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_client_errors_while_a_backend_dies_under_load() {
    let a = named("a", Arc::new(AtomicBool::new(false))).await;
    let b = named("b", Arc::new(AtomicBool::new(false))).await;
    let shellac = Shellac::start(a.addr, |c| {
        backends(c, &[&a, &b]);
        director(c, DirectorKind::RoundRobin, &["o0", "o1"]);
    })
    .await;
    let addr = shellac.addr;
    let load: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                let mut conn = Conn::open(addr).await;
                for _ in 0..150 {
                    statuses.push(conn.send("GET", "/page", &[], b"").await.status);
                }
                statuses
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(30)).await;
    a.stop();
    let mut total = 0;
    for l in load {
        let statuses = l.await.unwrap();
        total += statuses.len();
        assert!(
            statuses.iter().all(|s| *s == 200),
            "a client saw an error: {statuses:?}"
        );
    }
    assert_eq!(total, 600);
    let stats = shellac.stats().await;
    assert!(stats["backend_retry"] >= 1, "{stats:?}");
    assert_eq!(get(addr, "/page").await.text(), "b");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_probe_with_expected_status_never_on_the_request_path() {
    let origin = Origin::start(|s| {
        if s.path == "/status" {
            Reply::ok("").status(204)
        } else {
            Reply::ok("x").cc("no-store")
        }
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].probe = Some(ProbeRef::Named("raw".into()));
        c.probes.push(ProbeConfig {
            name: "raw".into(),
            url: None,
            request: Some(vec![
                "GET /status HTTP/1.1".into(),
                "Host: health.internal".into(),
                "Connection: close".into(),
            ]),
            expected_status: 204,
            interval: Dur(Duration::from_secs(3600)),
            timeout: Dur(Duration::from_secs(1)),
            window: 4,
            threshold: 1,
            initial: Some(0),
        });
    })
    .await;
    wait_health(&shellac, "default", true).await;
    for _ in 0..10 {
        assert_eq!(get(shellac.addr, "/").await.status, 200);
    }
    assert_eq!(
        origin.count_path("/status"),
        1,
        "one probe at start, none per request"
    );
    let probe = origin
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.path == "/status")
        .cloned()
        .unwrap();
    assert_eq!(probe.headers["host"], "health.internal");
    assert_eq!(shellac.stat("backend_probe").await, 1);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_backends_sick_serves_stale_within_keep_else_503() {
    let fail = Arc::new(AtomicBool::new(false));
    let f = fail.clone();
    let origin = Origin::start(move |s| {
        if s.path == "/health" {
            return if f.load(Ordering::SeqCst) {
                Reply::ok("").status(500)
            } else {
                Reply::ok("up")
            };
        }
        Reply::ok("fresh copy").cc("max-age=1")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].probe = Some(ProbeRef::Inline(fast_probe()));
        c.cache.keep = Dur(Duration::from_secs(30));
    })
    .await;
    assert_eq!(get(shellac.addr, "/page").await.text(), "fresh copy");
    fail.store(true, Ordering::SeqCst);
    wait_health(&shellac, "default", false).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let stale = get(shellac.addr, "/page").await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.text(), "fresh copy");
    assert!(
        stale
            .cache_status()
            .contains("detail=stale-no-healthy-backend"),
        "{}",
        stale.cache_status()
    );
    assert!(
        stale.cache_status().contains("ttl=-"),
        "{}",
        stale.cache_status()
    );

    let none = get(shellac.addr, "/never-cached").await;
    assert_eq!(none.status, 503);
    assert!(none.text().contains("no-healthy-backend"));
    let stats = shellac.stats().await;
    assert_eq!(stats["cache_stale_served"], 1);
    assert_eq!(stats["backend_unhealthy"], 2);
    shellac.stop().await;
}
