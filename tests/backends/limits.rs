//! `max_connections`: requests queue, then are answered busy; `wait_timeout` bounds a queued
//! request; a waiter whose client leaves gives back its place.

use super::*;

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
    for _ in 0..500 {
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
        for _ in 0..500 {
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
        for _ in 0..500 {
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
    for _ in 0..500 {
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
