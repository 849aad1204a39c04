//! Idle keep-alive client connections (`server.idle_release`): after `idle_release` without a
//! request a connection gives back its HTTP session (hyper's buffers, the gate, the request
//! state) and keeps only its socket; the next request on it is served by a new session, as if
//! nothing happened. Asserted on responses and on `client_idle_released` / `client_conn`.
//! Also the send buffer a near client gets at accept (`server.near_send_buffer`, counter
//! `client_conn_near`).

mod common;

use std::time::Duration;

use common::*;
use shellac::config::units::Dur;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const RELEASE: Duration = Duration::from_millis(150);

/// Longer than a release takes on an unloaded machine (one timer tick after `RELEASE`): how
/// long the tests wait to show that something was *not* released.
const AFTER_RELEASE: Duration = Duration::from_millis(700);

/// Waits (up to 10 s, for a slow CI machine) until `client_idle_released` reaches `n`.
async fn released(shellac: &Shellac, n: u64) {
    for _ in 0..500 {
        if shellac.stat("client_idle_released").await >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shellac.stat("client_idle_released").await, n);
}

async fn start(origin: &Origin, tweak: impl FnOnce(&mut shellac::config::Config)) -> Shellac {
    Shellac::start(origin.addr, |c| {
        c.server.idle_release = Dur(RELEASE);
        tweak(c);
    })
    .await
}

/// Reads exactly `n` complete responses with `Content-Length` bodies from `s`.
async fn read_responses(s: &mut TcpStream, n: usize) -> Vec<String> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n {
        let mut chunk = [0u8; 4096];
        let got = tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk))
            .await
            .expect("response within 5 s")
            .expect("read");
        assert!(got > 0, "connection closed after {} responses", out.len());
        buf.extend_from_slice(&chunk[..got]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() < end + 4 + len {
                break;
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
            out.push(format!("{head}\r\n\r\n{body}"));
            buf.drain(..end + 4 + len);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_released_and_serves_its_next_requests() {
    let origin =
        Origin::start(|s| Reply::ok(&format!("body of {}", s.path)).cc("max-age=60")).await;
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
    assert_eq!(
        shellac.stat("n_client_conn_released").await,
        0,
        "in use again"
    );
    assert_eq!(hit.text(), "body of /a");
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    let other = conn.send("GET", "/b", &[], b"").await;
    assert_eq!(other.text(), "body of /b");

    released(&shellac, 2).await;
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

/// Waits (up to 10 s) until the stat `name` reaches `n`.
async fn stat_reaches(shellac: &Shellac, name: &str, n: u64) {
    for _ in 0..500 {
        if shellac.stat(name).await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shellac.stat(name).await, n, "{name}");
}

/// Regression (issue 23, defect 9): connections that never sent a byte held a whole session
/// (~11.5 KiB) each until `header_read_timeout`. Now they wait as a socket alone (gauge
/// `n_client_conn_waiting`), are served like any connection once they speak, and are closed
/// and counted in `client_header_timeout` when they never do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_new_connections_wait_without_a_session_then_time_out() {
    let origin = Origin::start(|_| Reply::ok("hello").cc("max-age=60")).await;
    let shellac = start(&origin, |c| {
        c.server.header_read_timeout = Dur(Duration::from_secs(2));
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..200 {
        silent.push(TcpStream::connect(shellac.addr).await.unwrap());
    }
    stat_reaches(&shellac, "n_client_conn_waiting", 200).await;
    assert_eq!(shellac.stat("n_client_conn").await, 200);
    assert_eq!(shellac.stat("n_client_conn_released").await, 0);
    // One of them speaks: it gets a session and its answer, and stays open (keep-alive).
    let mut speaker = silent.pop().unwrap();
    speaker
        .write_all(b"GET / HTTP/1.1\r\nHost: test.example\r\n\r\n")
        .await
        .unwrap();
    let answer = read_responses(&mut speaker, 1).await;
    assert!(answer[0].starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer[0].ends_with("hello"), "{answer:?}");
    assert_eq!(shellac.stat("n_client_conn_waiting").await, 199);
    // The silent rest are closed at header_read_timeout.
    stat_reaches(&shellac, "client_header_timeout", 199).await;
    assert_eq!(shellac.stat("n_client_conn_waiting").await, 0);
    for mut s in silent {
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("closed by Shellac")
            .unwrap_or(0);
        assert_eq!(n, 0, "closed without an answer");
    }
    assert_eq!(
        shellac.stat("n_client_conn").await,
        1,
        "the speaker is still open"
    );
    // A connection that closes before speaking leaves the lot at once.
    drop(TcpStream::connect(shellac.addr).await.unwrap());
    stat_reaches(&shellac, "n_client_conn", 1).await;
    assert_eq!(shellac.stat("client_header_timeout").await, 199);
    drop(speaker);
    shellac.stop().await;
}

/// A 3 MB cacheable body whose bytes say where they are (a reordered or dropped piece shows).
fn large_body() -> Vec<u8> {
    (0..3_000_000u32).map(|i| (i % 251) as u8).collect()
}

/// Issue 23 (the 21 MB hit): a loopback client is near, gets `near_send_buffer` at accept and
/// receives a large hit whole over it; with the setting 0 or a `near_rtt` no round trip is
/// under, connections keep the kernel's autotuning and are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_clients_get_the_send_buffer_and_large_hits_whole() {
    let body = large_body();
    let served = body.clone();
    let origin = Origin::start(move |_| {
        Reply::ok("")
            .body(ReplyBody::Bytes(served.clone()))
            .cc("max-age=60")
    })
    .await;
    // Any loopback handshake is near at 10 s, however loaded the machine.
    let shellac = start(&origin, |c| {
        c.server.near_rtt = Dur(Duration::from_secs(10))
    })
    .await;
    for _ in 0..2 {
        let r = get(shellac.addr, "/big").await;
        assert_eq!(r.status, 200);
        assert!(
            r.body[..] == body[..],
            "the body arrived whole and in order"
        );
    }
    assert!(
        get(shellac.addr, "/big")
            .await
            .cache_status()
            .contains("hit")
    );
    let conns = shellac.stat("client_conn").await;
    assert!(conns >= 3);
    assert_eq!(shellac.stat("client_conn_near").await, conns);
    shellac.stop().await;

    for far in [
        |c: &mut shellac::config::Config| {
            c.server.near_send_buffer = shellac::config::units::Size(0)
        },
        |c: &mut shellac::config::Config| c.server.near_rtt = Dur(Duration::ZERO),
    ] {
        let shellac = start(&origin, far).await;
        for _ in 0..2 {
            assert!(get(shellac.addr, "/big").await.body[..] == body[..]);
        }
        assert!(shellac.stat("client_conn").await >= 2);
        assert_eq!(shellac.stat("client_conn_near").await, 0);
        shellac.stop().await;
    }
}
