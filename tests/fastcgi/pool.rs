//! The connections to php-fpm: more concurrent requests than children, a full pool queueing
//! for a bounded time then 503, idle connections released without another request.

use super::*;

/// More requests at once than the pool has children: every one is answered (the others
/// wait in Shellac's queue; no kept connection starves them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_concurrent_requests_than_children_are_all_answered() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac(fpm, false).await;
    let n = CHILDREN * 6;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let addr = sh.addr;
            tokio::spawn(async move { get(addr, &format!("/slow.php?n={i}")).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("answered")
            .unwrap();
        assert_eq!((r.status, r.text()), (200, format!("slow {i}")));
    }
}

/// `max_connections` is the pool's number of children: with every child busy a request waits
/// in the queue (`max_queue`) at most `connect_timeout`, then gets 503; with no queue it gets
/// 503 at once. The held requests are answered when they are let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_queues_for_a_bounded_time_then_answers_503() {
    let Some(fpm) = fpm() else { return };
    for (max_queue, timeout) in [
        (0, Duration::from_secs(30)),
        (4, Duration::from_millis(300)),
    ] {
        let sh = shellac_with(fpm, false, |c| {
            let b = &mut c.backends[0];
            b.port = fpm.hold.port();
            b.max_queue = max_queue;
            b.connect_timeout = shellac::config::units::Dur(timeout);
        })
        .await;
        let dir = TempDir::new(&format!("fcgi-hold-{max_queue}"));
        let go = dir.path("go");
        let held: Vec<_> = (0..CHILDREN)
            .map(|i| {
                let (addr, path) = (
                    sh.addr,
                    format!(
                        "/hold.php?s={}&f={}&n={i}",
                        dir.path(&format!("started{i}")).display(),
                        go.display()
                    ),
                );
                tokio::spawn(async move { get(addr, &path).await })
            })
            .collect();
        let started = eventually(Duration::from_secs(20), || async {
            (0..CHILDREN).all(|i| dir.path(&format!("started{i}")).exists())
        })
        .await;
        assert!(started, "both children run a held request");
        let r = get(sh.addr, "/server.php").await;
        assert_eq!(r.status, 503, "queue {max_queue}: {}", r.text());
        assert_eq!(sh.stat("backend_busy").await, 1);
        std::fs::write(&go, "").unwrap();
        for h in held {
            let r = tokio::time::timeout(Duration::from_secs(30), h)
                .await
                .expect("answered")
                .unwrap();
            assert_eq!((r.status, r.text().as_str()), (200, "held"));
        }
        // The children are free again.
        assert_eq!(get(sh.addr, "/server.php").await.status, 200);
        sh.stop().await;
    }
}

/// Kept connections are closed once unused for `idle_timeout`, though no request comes to
/// notice it: an idle connection holds a PHP-FPM child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_released_without_another_request() {
    let Some(fpm) = fpm() else { return };
    let sh = shellac_with(fpm, false, |c| {
        c.backends[0].idle_timeout = shellac::config::units::Dur(Duration::from_secs(2));
    })
    .await;
    assert_eq!(get(sh.addr, "/server.php").await.status, 200);
    let idle = || async {
        let b: serde_json::Value =
            serde_json::from_slice(&get(sh.admin, "/backends").await.body).unwrap();
        b["backends"][0]["idle"].as_u64()
    };
    assert_eq!(idle().await, Some(1), "the connection is kept");
    assert!(
        eventually(Duration::from_secs(20), || async {
            idle().await == Some(0)
        })
        .await,
        "the kept connection is closed"
    );
    // The next request opens a new one.
    assert_eq!(get(sh.addr, "/server.php").await.status, 200);
    assert_eq!(sh.stat("backend_conn").await, 2);
}
