//! New connections: silent ones wait without a session and time out, a near client gets
//! `server.near_send_buffer` (and a large hit whole), and Unix socket listeners serve and
//! clean up after themselves.

use super::*;

use super::proxy_protocol::{behind_balancer, forwarded_for, get_close, v2_tcp4};

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
