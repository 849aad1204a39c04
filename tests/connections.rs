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
async fn read_responses<S: tokio::io::AsyncRead + Unpin>(s: &mut S, n: usize) -> Vec<String> {
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

// PROXY protocol on client listeners (`server.proxy_protocol`): real v1 text and v2 binary
// headers written by hand on real sockets, the client address they name read back where the
// proxy uses it.

const V2_SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 `PROXY` header over TCP/IPv4.
fn v2_tcp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
    let mut h = V2_SIG.to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h
}

/// A v2 `PROXY` header over TCP/IPv6, with a TLV (PP2_TYPE_AUTHORITY) after the addresses.
fn v2_tcp6(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr) -> Vec<u8> {
    let mut h = V2_SIG.to_vec();
    h.extend_from_slice(&[0x21, 0x21, 0, 36 + 7]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(&4711u16.to_be_bytes());
    h.extend_from_slice(&443u16.to_be_bytes());
    h.extend_from_slice(b"\x02\x00\x04site");
    h
}

fn get_close(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t.example\r\nConnection: close\r\n\r\n").into_bytes()
}

fn behind_balancer(c: &mut shellac::config::Config, from: &str) {
    c.server.proxy_protocol = shellac::config::proxy_protocol::ProxyProtocol::All;
    c.server.proxy_protocol_from =
        vec![shellac::config::invalidation::Network::parse(from).unwrap()];
}

fn forwarded_for(origin: &Origin, path: &str) -> String {
    let seen = origin.seen.lock().unwrap();
    let s = seen
        .iter()
        .find(|s| s.path == path)
        .unwrap_or_else(|| panic!("the origin saw no {path}"));
    s.headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_v1_and_v2_name_the_client_in_the_log_and_x_forwarded_for() {
    let dir = TempDir::new("pp-log");
    let log = dir.0.join("access.log");
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let path = log.to_str().unwrap().to_string();
    let shellac = start(&origin, |c| {
        behind_balancer(c, "127.0.0.0/8");
        c.log.access_log = path;
        c.log.format = "%h %U".into();
    })
    .await;
    let wait = Duration::from_secs(5);
    let v1 = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n".to_vec();
    let v2 = v2_tcp4([198, 51, 100, 9], 40002, [127, 0, 0, 1], 80);
    let v6 = v2_tcp6(
        "2001:db8::5".parse().unwrap(),
        "2001:db8::1".parse().unwrap(),
    );
    // A v2 LOCAL header (the balancer's own health check): the peer's address stands.
    let local = [V2_SIG, &[0x20, 0x00, 0, 0]].concat();
    for (header, path) in [(v1, "/v1"), (v2, "/v2"), (v6, "/v6"), (local, "/local")] {
        let e = exchange(shellac.addr, &[header, get_close(path)].concat(), wait).await;
        assert_eq!(e.statuses(), vec![200], "{path}: {}", e.text);
    }
    // A header split over two segments is waited for, then read exactly.
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"PROXY TCP4 192.0.2.44 127.0.0.1 ")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(&[&b"5 80\r\n"[..], &get_close("/split")].concat())
        .await
        .unwrap();
    let mut text = String::new();
    let _ = tokio::time::timeout(wait, s.read_to_string(&mut text)).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");

    assert_eq!(forwarded_for(&origin, "/v1"), "203.0.113.7");
    assert_eq!(forwarded_for(&origin, "/v2"), "198.51.100.9");
    assert_eq!(forwarded_for(&origin, "/v6"), "2001:db8::5");
    assert_eq!(forwarded_for(&origin, "/local"), "127.0.0.1");
    assert_eq!(forwarded_for(&origin, "/split"), "192.0.2.44");
    let mut lines = wait_lines(&log, 5).await;
    lines.sort();
    assert_eq!(
        lines,
        [
            "127.0.0.1 /local",
            "192.0.2.44 /split",
            "198.51.100.9 /v2",
            "2001:db8::5 /v6",
            "203.0.113.7 /v1"
        ]
    );
    assert_eq!(shellac.stat("client_proxy").await, 5);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_closes_missing_malformed_late_and_untrusted_connections() {
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let shellac = start(&origin, |c| {
        behind_balancer(c, "127.0.0.0/8");
        c.server.header_read_timeout = Dur(Duration::from_millis(300));
    })
    .await;
    let wait = Duration::from_secs(5);
    let mut bad_version = v2_tcp4([192, 0, 2, 1], 1, [127, 0, 0, 1], 80);
    bad_version[12] = 0x31;
    for (bytes, what) in [
        (get_close("/plain"), "no header"),
        (
            [
                &b"PROXY TCP4 203.0.113.300 127.0.0.1 1 80\r\n"[..],
                &get_close("/a"),
            ]
            .concat(),
            "v1 address out of range",
        ),
        ([bad_version, get_close("/b")].concat(), "v2 version 3"),
        (b"PROXY TCP4 ".to_vec(), "a header never finished"),
    ] {
        let e = exchange(shellac.addr, &bytes, wait).await;
        assert!(e.closed && e.text.is_empty(), "{what}: {e:?}", e = e.text);
    }
    // A client that closes without a byte.
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.shutdown().await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, s.read_to_end(&mut out)).await;
    assert!(out.is_empty());
    until_stats(&shellac, "the refusals counted", |s| {
        s["client_proxy_missing"] == 2
            && s["client_proxy_malformed"] == 2
            && s["client_proxy_timeout"] == 1
    })
    .await;
    assert_eq!(shellac.stat("client_proxy").await, 0);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;

    // A peer outside proxy_protocol_from is closed whatever it sends.
    let shellac = start(&origin, |c| behind_balancer(c, "10.0.0.0/8")).await;
    let header = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n";
    let e = exchange(
        shellac.addr,
        &[&header[..], &get_close("/u")].concat(),
        wait,
    )
    .await;
    assert!(e.closed && e.text.is_empty(), "{}", e.text);
    assert_eq!(shellac.stat("client_proxy_untrusted").await, 1);
    assert_eq!(origin.count(), 0);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_comes_before_the_tls_handshake_and_the_http2_preface() {
    use common::tls::{Pki, all_versions, tls_table};
    use shellac::tls::stream::TlsStream;
    let pki = Pki::new("pp");
    let cert = pki.leaf("site", &["site.test"]);
    let table = format!(
        "{}\n[[backend]]\nhost = \"127.0.0.1\"\n",
        tls_table(&[&cert], "")
    );
    let tls = shellac::config::Config::parse(&table, "t.toml")
        .unwrap()
        .tls;
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let shellac = start(&origin, move |c| {
        behind_balancer(c, "127.0.0.1");
        c.tls = tls;
        c.http2.h2c = shellac::config::http2::H2c::All;
    })
    .await;

    // TLS: the header, then the ClientHello on the same connection.
    let mut tcp = TcpStream::connect(shellac.tls_addrs()[0]).await.unwrap();
    tcp.write_all(&v2_tcp4([198, 51, 100, 20], 1234, [127, 0, 0, 1], 443))
        .await
        .unwrap();
    let client = std::sync::Arc::new(pki.client_config(&all_versions()));
    let name = rustls::pki_types::ServerName::try_from("site.test").unwrap();
    let conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut tls = TlsStream::from_parts(tcp, conn);
    tls.handshake().await.expect("TLS after the header");
    tls.write_all(&get_close("/tls")).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(forwarded_for(&origin, "/tls"), "198.51.100.20");

    // h2c with prior knowledge: the header, then the preface.
    let mut tcp = TcpStream::connect(shellac.addr).await.unwrap();
    tcp.write_all(b"PROXY TCP6 2001:db8::77 ::1 999 80\r\n")
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("HTTP/2 after the header");
    tokio::spawn(conn);
    let req = http::Request::get("http://t.example/h2")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.expect("HTTP/2 response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(forwarded_for(&origin, "/h2"), "2001:db8::77");
    assert_eq!(shellac.stat("client_proxy").await, 2);
    shellac.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_client_is_client_ip_and_acls_in_vcl() {
    let origin = Origin::start(|_| Reply::ok("hello")).await;
    let vcl = r#"vcl 4.1;
backend default { ${origin0} }
acl blocked { "203.0.113.0"/24; }
sub vcl_recv {
    if (client.ip ~ blocked) { return (synth(403, "blocked")); }
}
sub vcl_deliver { set resp.http.x-client = client.ip; }
"#;
    let shellac = common::vcl::start_vcl_with("pp", vcl, &[origin.addr], |c| {
        behind_balancer(c, "127.0.0.1")
    })
    .await;
    let wait = Duration::from_secs(5);
    let header = b"PROXY TCP4 203.0.113.7 127.0.0.1 40001 80\r\n";
    let e = exchange(
        shellac.addr,
        &[&header[..], &get_close("/acl")].concat(),
        wait,
    )
    .await;
    assert_eq!(e.statuses(), vec![403], "{}", e.text);
    let header = v2_tcp4([198, 51, 100, 1], 5, [127, 0, 0, 1], 80);
    let e = exchange(shellac.addr, &[header, get_close("/ok")].concat(), wait).await;
    assert_eq!(e.statuses(), vec![200], "{}", e.text);
    assert!(
        e.text
            .to_ascii_lowercase()
            .contains("x-client: 198.51.100.1\r\n"),
        "{}",
        e.text
    );
    shellac.stop().await;
}

// PROXY protocol to backends (`[[backend]] proxy_protocol`).

/// Reads a PROXY protocol header as an origin behind HAProxy's `accept-proxy` would (the
/// test's own reader, not Shellac's): `"v1 IP"`, `"v2 IP"`, `"LOCAL"`, `"UNKNOWN"`, or None
/// for anything else.
async fn read_proxy_header(stream: &mut TcpStream) -> Option<String> {
    let mut fixed = [0u8; 16];
    stream.read_exact(&mut fixed[..6]).await.ok()?;
    if &fixed[..6] == b"PROXY " {
        let mut line = b"PROXY ".to_vec();
        while !line.ends_with(b"\r\n") {
            let mut b = [0u8; 1];
            stream.read_exact(&mut b).await.ok()?;
            line.push(b[0]);
            if line.len() > 107 {
                return None;
            }
        }
        let text = String::from_utf8(line).ok()?;
        let words: Vec<&str> = text.trim_end().split(' ').collect();
        return match words.get(1) {
            Some(&"UNKNOWN") => Some("UNKNOWN".into()),
            Some(&"TCP4" | &"TCP6") if words.len() == 6 => Some(format!("v1 {}", words[2])),
            _ => None,
        };
    }
    stream.read_exact(&mut fixed[6..]).await.ok()?;
    if fixed[..12] != *V2_SIG {
        return None;
    }
    let mut block = vec![0u8; usize::from(u16::from_be_bytes([fixed[14], fixed[15]]))];
    stream.read_exact(&mut block).await.ok()?;
    match (fixed[12], fixed[13]) {
        (0x20, _) => Some("LOCAL".into()),
        (0x21, 0x11) if block.len() >= 12 => {
            let ip = std::net::Ipv4Addr::new(block[0], block[1], block[2], block[3]);
            Some(format!("v2 {ip}"))
        }
        (0x21, 0x21) if block.len() >= 36 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&block[..16]);
            Some(format!("v2 {}", std::net::Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

/// An origin every connection of which must start with a PROXY protocol header: it records
/// each connection's header and answers (uncacheable) with what the header said.
async fn proxy_reading_origin() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use http_body_util::Full;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let said = read_proxy_header(&mut stream)
                    .await
                    .unwrap_or_else(|| "NO HEADER".into());
                s.lock().unwrap().push(said.clone());
                let service = hyper::service::service_fn(move |_req| {
                    let said = said.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            http::Response::builder()
                                .header("cache-control", "no-store")
                                .body(Full::new(bytes::Bytes::from(said)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// Two requests on one keep-alive client connection: two backend connections, each
/// starting with a header that names the client (here the client a PROXY header on the
/// listener named); probes send `LOCAL` / `UNKNOWN`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_proxy_protocol_names_the_client_on_a_connection_of_its_own() {
    use shellac::config::{ProbeConfig, ProbeRef, ProxyVersion};
    let (origin, seen) = proxy_reading_origin().await;
    let probe = ProbeConfig {
        name: String::new(),
        url: Some("/health".into()),
        request: None,
        expected_status: 200,
        interval: Dur(Duration::from_millis(100)),
        timeout: Dur(Duration::from_millis(1000)),
        window: 3,
        threshold: 1,
        initial: Some(3),
    };
    let p = probe.clone();
    let shellac = Shellac::start(origin, move |c| {
        behind_balancer(c, "127.0.0.1");
        c.backends[0].proxy_protocol = Some(ProxyVersion::V2);
        c.backends[0].probe = Some(ProbeRef::Inline(p));
    })
    .await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    s.write_all(b"PROXY TCP4 203.0.113.9 127.0.0.1 40000 80\r\n")
        .await
        .unwrap();
    for path in ["/one", "/two"] {
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t.example\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let resp = read_responses(&mut s, 1).await;
        assert!(resp[0].ends_with("v2 203.0.113.9"), "{}", resp[0]);
    }
    let relayed = |seen: &std::sync::Mutex<Vec<String>>| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|h| *h != "LOCAL")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(relayed(&seen), ["v2 203.0.113.9", "v2 203.0.113.9"]);
    assert!(
        eventually(Duration::from_secs(10), || async {
            seen.lock().unwrap().iter().any(|h| h == "LOCAL")
        })
        .await,
        "a probe sends a LOCAL header"
    );
    drop(s);
    shellac.stop().await;

    // v1, from a client connected directly; its probe says UNKNOWN.
    seen.lock().unwrap().clear();
    let shellac = Shellac::start(origin, move |c| {
        c.backends[0].proxy_protocol = Some(ProxyVersion::V1);
        c.backends[0].probe = Some(ProbeRef::Inline(probe));
    })
    .await;
    let resp = get(shellac.addr, "/three").await;
    assert_eq!(&resp.body[..], b"v1 127.0.0.1");
    assert!(
        eventually(Duration::from_secs(10), || async {
            seen.lock().unwrap().iter().any(|h| h == "UNKNOWN")
        })
        .await,
        "a probe sends an UNKNOWN header"
    );
    assert!(!seen.lock().unwrap().iter().any(|h| h == "NO HEADER"));
    shellac.stop().await;
}

// Unix-socket client listeners (`server.listen_unix`).

async fn unix_get(path: &std::path::Path, bytes: &[u8]) -> String {
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out)).await;
    out
}

/// A stale socket file is replaced, the socket gets its mode, requests are served (with a
/// PROXY protocol header when every listener requires one), and the file is gone at stop;
/// a socket another process accepts on is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_listeners_serve_and_clean_up_after_themselves() {
    use std::os::unix::fs::PermissionsExt;
    let origin = Origin::start(|_| Reply::ok("over unix")).await;
    let dir = TempDir::new("unix-listen");
    let path = dir.0.join("shellac.sock");
    // Left behind by a process that is gone: bound, then closed.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let p = path.clone();
    let shellac = start(&origin, move |c| {
        c.server.listen_unix = vec![p];
        c.server.listen_unix_mode = "0640".into();
    })
    .await;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let text = unix_get(&path, &get_close("/u")).await;
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("over unix"),
        "{text}"
    );
    assert_eq!(forwarded_for(&origin, "/u"), "0.0.0.0");
    // Keep-alive: two requests on one connection.
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    for p in ["/k1", "/k2"] {
        s.write_all(format!("GET {p} HTTP/1.1\r\nHost: t.example\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let r = read_responses(&mut s, 1).await;
        assert!(
            r[0].starts_with("HTTP/1.1 200") && r[0].ends_with("over unix"),
            "{}",
            r[0]
        );
    }
    drop(s);
    // Another start on the same path while this one accepts is refused.
    let mut config = shellac::config::Config::embedded_default();
    config.server.listen = vec!["127.0.0.1:0".parse().unwrap()];
    config.server.admin = None;
    config.server.listen_unix = vec![path.clone()];
    let refused = shellac::server::start(std::sync::Arc::new(config)).await;
    let err = refused.err().expect("a socket in use is refused");
    assert!(format!("{err:#}").contains("in use"), "{err:#}");
    shellac.stop().await;
    assert!(!path.exists(), "the socket file is removed at stop");

    // Behind a front end that sends the PROXY protocol over the socket.
    let p = path.clone();
    let shellac = start(&origin, move |c| {
        behind_balancer(c, "127.0.0.1");
        c.server.listen_unix = vec![p];
    })
    .await;
    let header = v2_tcp4([192, 0, 2, 99], 7, [127, 0, 0, 1], 443);
    let text = unix_get(&path, &[header, get_close("/pu")].concat()).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(forwarded_for(&origin, "/pu"), "192.0.2.99");
    let text = unix_get(&path, &get_close("/none")).await;
    assert!(text.is_empty(), "no header: closed");
    assert_eq!(shellac.stat("client_proxy_missing").await, 1);
    shellac.stop().await;
}
