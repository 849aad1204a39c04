//! Live views: `/log/stream` (filters, slow readers dropped and told, nothing recorded when
//! nobody listens) and `/top` (rankings over a window, collected on demand).

use std::time::Duration;

use crate::common::log_stream::{next_json, stream};
use crate::common::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn origin_handler(s: &Seen) -> Reply {
    match s.path.as_str() {
        "/err" => Reply::ok("down").status(503),
        "/nostore" => Reply::ok("n").cc("no-store"),
        _ => Reply::ok("hello").cc("max-age=60"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_stream_filters_transactions() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    assert_eq!(shellac.stat("log_subscribers").await, 0);
    let mut errors = stream(shellac.admin, "status=5xx").await;
    let mut misses = stream(shellac.admin, "miss=1&url=%5E/(a|nostore)").await;
    assert_eq!(shellac.stat("log_subscribers").await, 2);
    get(shellac.addr, "/a").await; // miss
    get(shellac.addr, "/a").await; // hit
    get(shellac.addr, "/b").await; // miss, other URL
    get(shellac.addr, "/err").await; // 503 from the origin
    get(shellac.addr, "/nostore").await; // pass

    let e = next_json(&mut errors).await;
    assert_eq!(e["url"], "/err");
    assert_eq!(e["status"], 503);
    assert_eq!(e["backend"], "default");

    let m = next_json(&mut misses).await;
    assert_eq!(
        (&m["url"], &m["cache"], &m["reason"]),
        (&"/a".into(), &"miss".into(), &serde_json::Value::Null)
    );
    let m = next_json(&mut misses).await;
    assert_eq!(
        (&m["url"], &m["cache"], &m["reason"]),
        (&"/nostore".into(), &"pass".into(), &"no-store".into())
    );
    assert_eq!(m["method"], "GET");
    assert_eq!(m["bytes"], 1);
    assert_eq!(m["complete"], true);

    // Readers leave: nothing is recorded for them any more.
    drop(errors);
    drop(misses);
    let mut gone = false;
    for _ in 0..200 {
        if shellac.stat("log_subscribers").await == 0 {
            gone = true;
            break;
        }
        // A request wakes the stream tasks so they notice their reader left.
        get(shellac.addr, "/a").await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "subscriptions end with their readers");
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_filters_are_rejected() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let resp = get(shellac.admin, "/log/stream?url=(").await;
    assert_eq!(resp.status, 400);
    assert!(resp.text().starts_with("url: "), "{}", resp.text());
    assert_eq!(
        get(shellac.admin, "/log/stream?status=9xx").await.status,
        400
    );
    assert_eq!(get(shellac.admin, "/top?by=colour").await.status, 400);
    assert_eq!(get(shellac.admin, "/top?sort=price").await.status, 400);
    shellac.stop().await;
}

/// `backend=NAME` keeps the requests that backend answered; a director's name keeps those of
/// every backend below it (records name the backend, never the director); a name that is
/// neither is a 404 at once instead of a stream that never says anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_stream_by_backend_or_director() {
    let a = Origin::start(origin_handler).await;
    let b = Origin::start(origin_handler).await;
    let shellac = Shellac::start(a.addr, |c| {
        c.backends.clear();
        for (i, o) in [&a, &b].iter().enumerate() {
            c.backends.push(shellac::config::BackendConfig::new(
                &format!("o{i}"),
                &o.addr.ip().to_string(),
                o.addr.port(),
            ));
        }
        c.directors.push(shellac::config::DirectorConfig {
            name: "pool".into(),
            kind: shellac::config::DirectorKind::RoundRobin,
            backends: vec!["o0".into(), "o1".into()],
            hash_on: None,
            restart_on: vec![],
            restart_unless: vec![],
            max_restarts: 4,
            member_weights: Vec::new(),
        });
    })
    .await;
    let mut pool = stream(shellac.admin, "backend=pool").await;
    let mut second = stream(shellac.admin, "backend=o1").await;
    get(shellac.addr, "/r1").await;
    get(shellac.addr, "/r2").await;
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..2 {
        let t = next_json(&mut pool).await;
        seen.push(t["backend"].as_str().unwrap_or("?").to_string());
    }
    seen.sort();
    assert_eq!(seen, ["o0", "o1"], "round robin: one request each");
    let t = next_json(&mut second).await;
    assert_eq!(t["backend"], "o1", "{t}");
    assert_eq!((a.count(), b.count()), (1, 1));
    let resp = get(shellac.admin, "/log/stream?backend=nope").await;
    assert_eq!(resp.status, 404);
    assert_eq!(
        resp.text(),
        "backend: no backend or director named `nope` (GET /backends lists them)\n"
    );
    drop(pool);
    drop(second);
    shellac.stop().await;
}

/// A reader that does not read loses transactions, is told how many, and never slows
/// requests down: every transaction is either delivered or counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reader_is_dropped_and_told() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    // A small receive window so the admin connection backs up quickly.
    let mut s = connect_small_window(shellac.admin).await;
    s.write_all(b"GET /log/stream HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    for _ in 0..200 {
        if shellac.stat("log_subscribers").await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // 4 KB URLs make 4 KB log lines: far more than the kernel buffers between us can hold.
    const N: u64 = 4000;
    let long = "x".repeat(4000);
    let mut clients = Vec::new();
    for c in 0..4 {
        let (addr, long) = (shellac.addr, long.clone());
        clients.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            for i in 0..N / 4 {
                let resp = tokio::time::timeout(
                    Duration::from_secs(10),
                    conn.send("GET", &format!("/c{c}/{}/{long}", i % 10), &[], b""),
                )
                .await
                .expect("requests never wait for a log reader");
                assert_eq!(resp.status, 200);
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    // Now read everything: transactions delivered + dropped announced + dropped before any
    // reader saw them (the writer's queues full: `log_dropped`, a busy machine) == N.
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let (mut delivered, mut dropped, mut unqueued) = (0u64, 0u64, 0u64);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while delivered + dropped + unqueued < N && tokio::time::Instant::now() < deadline {
        line.clear();
        let n = match tokio::time::timeout(Duration::from_secs(2), r.read_line(&mut line)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => break,
            Err(_) => {
                // Nothing more for now: what the queues dropped is counted, not announced.
                unqueued = shellac.stat("log_dropped").await;
                continue;
            }
        };
        if n == 0 {
            break;
        }
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim()) {
            if let Some(d) = v.get("dropped") {
                dropped += d.as_u64().unwrap();
            } else if v.get("url").is_some() {
                delivered += 1;
            }
        }
    }
    assert!(
        dropped > 0,
        "a reader that stalls must lose transactions ({delivered} delivered)"
    );
    assert_eq!(
        delivered + dropped + unqueued,
        N,
        "every transaction delivered, announced or counted in log_dropped \
         ({delivered} delivered, {dropped} announced, {unqueued} log_dropped)"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_ranks_over_the_window_once_asked() {
    let origin = Origin::start(origin_handler).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    get(shellac.addr, "/before").await; // not collected: nobody asked yet
    let first = get(shellac.admin, "/top").await;
    let v: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(v["collecting"], false);
    assert_eq!(v["rows"], serde_json::json!([]));
    for _ in 0..3 {
        get(shellac.addr, "/a").await;
    }
    get(shellac.addr, "/b").await;
    get(shellac.addr, "/nostore").await;
    // Bounded wait until the writer has ranked all five.
    for _ in 0..200 {
        let v: serde_json::Value =
            serde_json::from_slice(&get(shellac.admin, "/top?by=host").await.body).unwrap();
        assert_eq!(v["collecting"], true);
        if v["rows"][0]["requests"] == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let v: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/top?by=url&n=2").await.body).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    let rows = v["rows"].clone();
    assert_eq!(rows[0]["key"], "test.example/a");
    assert_eq!(rows[0]["misses"], 1);
    assert_eq!(rows[0]["bytes"], 15);
    let v: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/top?by=backend&sort=misses").await.body)
            .unwrap();
    assert_eq!(v["rows"][0]["key"], "default");
    assert_eq!(v["rows"][0]["misses"], 3, "{v}");
    let v: serde_json::Value =
        serde_json::from_slice(&get(shellac.admin, "/top?by=host").await.body).unwrap();
    assert_eq!(v["rows"][0]["key"], "test.example");
    assert_eq!(v["rows"][0]["requests"], 5);
    shellac.stop().await;
}
