//! Backends that fail: probes, directors, retries, restarts, max_connections, serving stale.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use shellac::config::units::Dur;
use shellac::config::{Config, DirectorConfig, DirectorKind, ProbeConfig, ProbeRef};

/// An origin that answers with its own name (uncacheable) and a health endpoint that can be
/// switched to 500.
async fn named(name: &'static str, failing: Arc<AtomicBool>) -> Origin {
    Origin::start(move |s| {
        if s.path == "/health" {
            return if failing.load(Ordering::SeqCst) {
                Reply::ok("down").status(500)
            } else {
                Reply::ok("up")
            };
        }
        Reply::ok(name).cc("no-store")
    })
    .await
}

fn backends(c: &mut Config, origins: &[&Origin]) {
    c.backends.clear();
    for (i, o) in origins.iter().enumerate() {
        let mut b = shellac::config::BackendConfig::new(
            &format!("o{i}"),
            &o.addr.ip().to_string(),
            o.addr.port(),
        );
        b.connect_timeout = Dur(Duration::from_millis(500));
        c.backends.push(b);
    }
}

fn director(c: &mut Config, kind: DirectorKind, members: &[&str]) -> usize {
    c.directors.push(DirectorConfig {
        name: "d".into(),
        kind,
        backends: members.iter().map(|m| m.to_string()).collect(),
        hash_on: None,
        restart_on: vec![],
        restart_unless: vec![],
        max_restarts: 4,
        member_weights: Vec::new(),
    });
    c.directors.len() - 1
}

fn fast_probe() -> ProbeConfig {
    ProbeConfig {
        name: String::new(),
        url: Some("/health".into()),
        request: None,
        expected_status: 200,
        interval: Dur(Duration::from_millis(50)),
        timeout: Dur(Duration::from_millis(500)),
        window: 3,
        threshold: 2,
        initial: Some(3),
    }
}

async fn backend_json(shellac: &Shellac) -> serde_json::Value {
    serde_json::from_slice(&get(shellac.admin, "/backends").await.body).unwrap()
}

async fn healthy(shellac: &Shellac, name: &str) -> bool {
    let v = backend_json(shellac).await;
    v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap()["healthy"]
        .as_bool()
        .unwrap()
}

/// Polls until backend `name` has health `want` (bounded: 5 s).
async fn wait_health(shellac: &Shellac, name: &str, want: bool) {
    for _ in 0..100 {
        if healthy(shellac, name).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{name} never became {}",
        if want { "healthy" } else { "sick" }
    );
}

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

async fn futures_names(shellac: &Shellac, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(shellac.addr, "/page").await.text());
    }
    out
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
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let shellac = Shellac::start(dead_addr, |_| {}).await;
    assert_eq!(get(shellac.addr, "/").await.status, 503);
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_fail"], 1, "{stats:?}");
    assert_eq!(stats["backend_retry"], 0, "{stats:?}");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_retried_on_the_next_backend() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
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

/// An origin whose `/hold` answers `held|` then waits for the gate before `done` (holding its
/// connection), and answers every other path `quick` at once; nothing is stored.
async fn gated_origin() -> (Origin, Arc<tokio::sync::Notify>) {
    let gate = Arc::new(tokio::sync::Notify::new());
    let g = gate.clone();
    let origin = Origin::start(move |s| {
        let reply = Reply::ok("").cc("no-store");
        if s.path == "/hold" {
            reply.body(ReplyBody::Gated {
                first: b"held|".to_vec(),
                gate: g.clone(),
                rest: b"done".to_vec(),
            })
        } else {
            reply.body(ReplyBody::Bytes(b"quick".to_vec()))
        }
    })
    .await;
    (origin, gate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_queue_then_busy() {
    let (origin, gate) = gated_origin().await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].max_connections = 1;
        c.backends[0].max_queue = 1;
    })
    .await;
    // 1: occupies the only connection slot until the gate opens.
    let mut holder = Conn::open(shellac.addr).await;
    let held = holder.send_head("GET", "/hold", &[], b"").await;
    // 2: waits in the queue.
    let addr = shellac.addr;
    let queued = tokio::spawn(async move { get(addr, "/queued").await });
    for _ in 0..100 {
        if backend_json(&shellac).await["backends"][0]["queued"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(backend_json(&shellac).await["backends"][0]["queued"], 1);
    // 3: queue full, refused at once.
    let refused = get(shellac.addr, "/third").await;
    assert_eq!(refused.status, 503);
    assert!(
        refused.text().contains("backend-busy"),
        "{}",
        refused.text()
    );

    gate.notify_one();
    use http_body_util::BodyExt;
    assert_eq!(
        held.into_body().collect().await.unwrap().to_bytes(),
        "held|done"
    );
    assert_eq!(queued.await.unwrap().text(), "quick");
    assert_eq!(
        origin.peak.load(Ordering::SeqCst),
        1,
        "never more than max_connections at the origin"
    );
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_busy"], 1);
    assert_eq!(stats["backend_wait"], 1, "the queued request waited");
    assert_eq!(stats["backend_wait_fail"], 0, "and got the slot");
    let v = backend_json(&shellac).await;
    assert_eq!(v["backends"][0]["busy"], 1);
    assert_eq!(v["backends"][0]["req"], 2);
    assert_eq!(v["backends"][0]["in_flight"], 0);
    shellac.stop().await;
}

/// Varnish's v00072 (`.wait_timeout`): a request waits in the queue at most the backend's
/// `wait_timeout` (not its `connect_timeout`, 3.5 s here): then the backend is busy for it
/// (503 `backend-busy`), counted in `backend_wait`, `backend_wait_fail` and `backend_busy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_timeout_bounds_a_queued_request() {
    let (origin, gate) = gated_origin().await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].max_connections = 1;
        c.backends[0].max_queue = 1;
        c.backends[0].wait_timeout = Some(Dur(Duration::from_millis(200)));
    })
    .await;
    let mut holder = Conn::open(shellac.addr).await;
    let held = holder.send_head("GET", "/hold", &[], b"").await;
    // Waits its 200 ms, the slot still held: busy.
    let waited = get(shellac.addr, "/queued").await;
    assert_eq!(waited.status, 503);
    assert!(waited.text().contains("backend-busy"), "{}", waited.text());
    gate.notify_one();
    use http_body_util::BodyExt;
    assert_eq!(
        held.into_body().collect().await.unwrap().to_bytes(),
        "held|done"
    );
    assert_eq!(get(shellac.addr, "/after").await.text(), "quick");
    let stats = shellac.stats().await;
    assert_eq!(stats["backend_wait"], 1);
    assert_eq!(stats["backend_wait_fail"], 1);
    assert_eq!(stats["backend_busy"], 1);
    assert_eq!(origin.count_path("/queued"), 0);
    shellac.stop().await;
}

/// Regression (bench/ab2009.sh, 50 clients on a FastCGI pool of 8): a request waiting in a
/// backend's queue whose client went away kept its place counted, so once `max_queue` clients
/// had left (wrk stopping twice) every later waiter was refused at once with 503
/// `backend-busy` although nobody waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_client_leaves_gives_back_its_queue_place() {
    use tokio::io::AsyncWriteExt;
    let (origin, gate) = gated_origin().await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.backends[0].max_connections = 1;
        c.backends[0].max_queue = 1;
    })
    .await;
    let queued = |v: serde_json::Value| v["backends"][0]["queued"].as_u64();
    let mut holder = Conn::open(shellac.addr).await;
    let held = holder.send_head("GET", "/hold", &[], b"").await;
    for round in 0..3 {
        // A client waits in the queue, then hangs up.
        let mut leaver = tokio::net::TcpStream::connect(shellac.addr)
            .await
            .expect("connect");
        leaver
            .write_all(format!("GET /leaver{round} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .await
            .expect("write");
        for _ in 0..100 {
            if queued(backend_json(&shellac).await) == Some(1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            queued(backend_json(&shellac).await),
            Some(1),
            "round {round}"
        );
        drop(leaver);
        for _ in 0..250 {
            if queued(backend_json(&shellac).await) == Some(0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            queued(backend_json(&shellac).await),
            Some(0),
            "round {round}: the place of a waiter that left is given back"
        );
    }
    // The queue has its one place: the next waiter waits and is answered.
    let addr = shellac.addr;
    let waiter = tokio::spawn(async move { get(addr, "/waiter").await });
    for _ in 0..100 {
        if queued(backend_json(&shellac).await) == Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gate.notify_one();
    use http_body_util::BodyExt;
    assert_eq!(
        held.into_body().collect().await.unwrap().to_bytes(),
        "held|done"
    );
    assert_eq!(waiter.await.unwrap().text(), "quick");
    assert_eq!(shellac.stats().await["backend_busy"], 0);
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
