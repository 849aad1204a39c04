//! Idle keep-alive connections released (`server.idle_release`): the next requests served
//! (pipelined ones in order), closed at `idle_timeout` and at shutdown; busy connections and
//! connections with unwritten response bytes kept; `idle_release = 0` keeps sessions.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_released_and_serves_its_next_requests() {
    // `/b` is held at the origin, so the test can look at the connection while a request of
    // its new session is certainly running on it.
    let origin = Origin::start(|s| {
        let r = Reply::ok(&format!("body of {}", s.path)).cc("max-age=60");
        if s.path == "/b" {
            r.delay(Duration::from_secs(2))
        } else {
            r
        }
    })
    .await;
    let shellac = start(&origin, |_| {}).await;
    let mut conn = Conn::open(shellac.addr).await;
    let first = conn.send("GET", "/a", &[], b"").await;
    assert_eq!(first.text(), "body of /a");
    assert!(first.cache_status().contains("fwd=miss"));

    released(&shellac, 1).await;
    assert_eq!(shellac.stat("n_client_conn").await, 1);
    assert_eq!(shellac.stat("n_client_conn_released").await, 1);
    // The same connection, now served by a new session: a hit, then a miss.
    let hit = conn.send("GET", "/a", &[], b"").await;
    assert_eq!(hit.text(), "body of /a");
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    // "In use again" is read while `/b` is at the origin: read after the hit instead, a loaded
    // machine can let `RELEASE` pass first and find the connection released once more.
    let (other, in_use) = tokio::join!(conn.send("GET", "/b", &[], b""), async {
        assert!(
            eventually(Duration::from_secs(10), || async {
                origin.count_path("/b") == 1
            })
            .await,
            "/b reached the origin"
        );
        shellac.stat("n_client_conn_released").await
    });
    assert_eq!(in_use, 0, "in use again");
    assert_eq!(other.text(), "body of /b");

    // Released again after the new session's requests (how many times depends on how long
    // the client paused between them, which a loaded machine decides: at least once more).
    released_at_least(&shellac, 2).await;
    let again = conn.send("GET", "/b", &[], b"").await;
    assert_eq!(again.status, 200);
    assert_eq!(again.text(), "body of /b");
    assert_eq!(
        shellac.stat("client_conn").await,
        1,
        "one connection throughout"
    );
    assert_eq!(origin.count(), 2);
    shellac.stop().await;
}

/// Requests pipelined into a released connection in one write: the new session reads them all
/// and answers in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_on_a_released_connection_are_answered_in_order() {
    let origin =
        Origin::start(|s| Reply::ok(&format!("body of {}", s.path)).cc("max-age=60")).await;
    let shellac = start(&origin, |_| {}).await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let first = read_responses(&mut s, 1).await;
    assert!(first[0].ends_with("body of /1"), "{first:?}");

    released(&shellac, 1).await;
    s.write_all(
        b"GET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\nGET /1 HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .await
    .unwrap();
    let rest = read_responses(&mut s, 3).await;
    assert!(rest[0].ends_with("body of /2"), "{rest:?}");
    assert!(rest[1].ends_with("body of /3"), "{rest:?}");
    assert!(rest[2].ends_with("body of /1"), "{rest:?}");
    assert!(rest[2].contains("hit"), "{}", rest[2]);
    shellac.stop().await;
}

/// `idle_timeout` counts from the end of the last response, released or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_connection_is_closed_after_idle_timeout() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = start(&origin, |c| {
        c.server.idle_timeout = Dur(Duration::from_millis(900))
    })
    .await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "closed within 5 s");
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "not before idle_timeout ({:?})",
        started.elapsed()
    );
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    assert_eq!(shellac.stat("client_idle_released").await, 1);
    assert_eq!(shellac.stat("client_idle_closed").await, 1);
    shellac.stop().await;
}

/// Never released in the middle of something: a request whose backend takes longer than
/// `idle_release`, or a head that is still arriving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_connections_are_not_released() {
    let origin = Origin::start(|_| Reply::ok("slow").delay(Duration::from_millis(600))).await;
    let shellac = start(&origin, |_| {}).await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let r = read_responses(&mut s, 1).await;
    assert!(r[0].ends_with("slow"), "{r:?}");
    assert_eq!(shellac.stat("client_idle_released").await, 0, "in flight");

    // A head sent in two parts, the pause longer than idle_release.
    s.write_all(b"GET /slow HTTP/1.1\r\n").await.unwrap();
    tokio::time::sleep(AFTER_RELEASE).await;
    s.write_all(b"Host: a\r\n\r\n").await.unwrap();
    let r = read_responses(&mut s, 1).await;
    assert!(r[0].starts_with("HTTP/1.1 200"), "{r:?}");
    assert_eq!(
        shellac.stat("client_idle_released").await,
        0,
        "head in progress"
    );
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_idle_release_keeps_sessions() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = start(&origin, |c| c.server.idle_release = Dur(Duration::ZERO)).await;
    let mut conn = Conn::open(shellac.addr).await;
    assert_eq!(conn.send("GET", "/", &[], b"").await.status, 200);
    tokio::time::sleep(AFTER_RELEASE).await;
    assert_eq!(conn.send("GET", "/", &[], b"").await.status, 200);
    assert_eq!(shellac.stat("client_idle_released").await, 0);
    shellac.stop().await;
}

/// Shutdown closes released connections at once (they hold no request) and does not wait for
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_released_connections() {
    let origin = Origin::start(|_| Reply::ok("x")).await;
    let shellac = start(&origin, |_| {}).await;
    let mut conns = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(shellac.addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap();
        read_responses(&mut s, 1).await;
        conns.push(s);
    }
    released(&shellac, 20).await;
    stop_closes_idle(shellac, conns).await;
}

/// Stops Shellac with a 10 s grace and checks it did not wait for the idle `conns`, each of
/// which it closed without another byte.
async fn stop_closes_idle(shellac: Shellac, conns: Vec<TcpStream>) {
    let started = std::time::Instant::now();
    shellac.stop_with(Duration::from_secs(10)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited {:?} for idle connections",
        started.elapsed()
    );
    for mut s in conns {
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
            .await
            .expect("closed");
        assert_eq!(n.unwrap_or(0), 0);
    }
}

/// Shutdown reaches sessions that are kept (not released) and have served many requests: each
/// session's shutdown signal is polled cheaply after its first poll (`server::Stop`) and must
/// still fire. Regression guard for that shortcut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_kept_sessions_after_many_requests() {
    // Cacheable: the requests after the first are hits, answered without the origin.
    let origin = Origin::start(|_| Reply::ok("x").cc("max-age=60")).await;
    let shellac = start(&origin, |c| c.server.idle_release = Dur(Duration::ZERO)).await;
    let mut conns = Vec::new();
    for _ in 0..5 {
        let mut s = TcpStream::connect(shellac.addr).await.unwrap();
        for _ in 0..50 {
            s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                .await
                .unwrap();
            read_responses(&mut s, 1).await;
        }
        conns.push(s);
    }
    stop_closes_idle(shellac, conns).await;
}

/// A slow reader: the whole response is in Shellac's write buffer (the request is over), but
/// the client has not read it yet. Releasing now would take the socket from under the bytes
/// still to be written; the connection is released only once they are out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_unwritten_response_bytes_is_not_released() {
    const LEN: usize = 256 * 1024;
    let body = "y".repeat(LEN);
    let origin = Origin::start(move |_| Reply::ok(&body)).await;
    let shellac = start(&origin, |_| {}).await;
    let mut s = connect_small_window(shellac.addr).await;
    s.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    // Do not read for several release periods.
    tokio::time::sleep(AFTER_RELEASE * 2).await;
    let r = read_responses(&mut s, 1).await;
    let body_at = r[0].find("\r\n\r\n").expect("head") + 4;
    assert_eq!(r[0].len() - body_at, LEN, "the whole body arrived");
    // Once written, the idle connection is released and still serves.
    released(&shellac, 1).await;
    s.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let r = read_responses(&mut s, 1).await;
    assert!(r[0].starts_with("HTTP/1.1 200"), "{}", &r[0][..40]);
    shellac.stop().await;
}
