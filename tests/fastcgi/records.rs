//! A scripted FastCGI responder on loopback (records written by hand): END_REQUEST errors and
//! broken records are 502; a FastCGI origin has the timeouts and probes of an HTTP one.

use super::*;

/// A FastCGI record by hand: version 1, `kind`, request id 1, no padding.
fn record(kind: u8, content: &[u8]) -> Vec<u8> {
    let len = (content.len() as u16).to_be_bytes();
    let mut r = vec![1, kind, 0, 1, len[0], len[1], 0, 0];
    r.extend_from_slice(content);
    r
}

/// FCGI_END_REQUEST with `protocol_status`.
fn end_request(protocol_status: u8) -> Vec<u8> {
    record(3, &[0, 0, 0, 0, protocol_status, 0, 0, 0])
}

/// A FastCGI responder that answers the n-th complete request (up to its empty STDIN
/// record) with `answers[n]`, then closes the connection; after the last answer it stops
/// listening.
async fn scripted_responder(answers: Vec<Vec<u8>>) -> SocketAddr {
    scripted_responder_on("127.0.0.1:0".parse().unwrap(), answers).await
}

/// [`scripted_responder`] listening on `addr`. A connection closed before its request is
/// complete (a health probe's) is not answered.
async fn scripted_responder_on(addr: SocketAddr, answers: Vec<Vec<u8>>) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut answers = answers.into_iter().peekable();
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Read records until the empty STDIN (the end of the request).
            let complete = loop {
                let mut at = 0;
                let mut done = false;
                while buf.len() >= at + 8 {
                    let len = u16::from_be_bytes([buf[at + 4], buf[at + 5]]) as usize;
                    let pad = buf[at + 6] as usize;
                    if buf[at + 1] == 5 && len == 0 {
                        done = true;
                    }
                    at += 8 + len + pad;
                }
                if done {
                    break true;
                }
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => break false,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            if !complete {
                continue;
            }
            let Some(answer) = answers.next() else { return };
            let _ = s.write_all(&answer).await;
            let _ = s.shutdown().await;
            if answers.peek().is_none() {
                return; // stops listening
            }
        }
    });
    addr
}

/// An application that refuses a request (FCGI_END_REQUEST: overloaded, cannot multiplex,
/// unknown role), ends it without a head, or sends broken records: the client gets 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_request_errors_and_broken_records_are_502() {
    let dir = TempDir::new("fcgi-refused");
    std::fs::write(dir.path("x.php"), "").unwrap();
    let root = std::fs::canonicalize(&dir.0).unwrap();
    let good = [
        record(
            6,
            b"Status: 201 Created\r\nContent-Type: text/plain\r\n\r\nmade",
        ),
        record(6, b""),
        end_request(0),
    ]
    .concat();
    let answers = vec![
        end_request(2),
        end_request(1),
        end_request(3),
        [record(6, b""), end_request(0)].concat(),
        [vec![9], record(6, b"Status: 200\r\n\r\nx")[1..].to_vec()].concat(),
        good,
    ];
    let n = answers.len();
    let app = scripted_responder(answers).await;
    let sh = Shellac::start(app, |c| {
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(root);
        b.max_connections = 2;
    })
    .await;
    for i in 0..n - 1 {
        let r = get(sh.addr, &format!("/x.php?case={i}")).await;
        assert_eq!(r.status, 502, "case {i}: {}", r.text());
    }
    let r = get(sh.addr, "/x.php?case=good").await;
    assert_eq!((r.status, r.text().as_str()), (201, "made"));
}

/// Issue 31, "timeouts and probes as for HTTP origins" (docs/fastcgi.md): an application that
/// reads the request and never answers gets the client a 504 at `first_byte_timeout` (counter
/// `backend_timeout`), as an HTTP origin does; a probed FastCGI backend (a connection opened,
/// no script run) whose address stops accepting is marked sick and takes no requests, and is
/// healthy again once something accepts there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fastcgi_origin_has_the_timeouts_and_probes_of_an_http_origin() {
    use shellac::config::units::Dur;
    use shellac::config::{ProbeConfig, ProbeRef};
    use tokio::io::AsyncReadExt;
    let dir = TempDir::new("fcgi-timeouts");
    std::fs::write(dir.path("x.php"), "").unwrap();
    let root = std::fs::canonicalize(&dir.0).unwrap();

    // Reads every request and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = silent.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    let sh = Shellac::start(silent_addr, |c| {
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(root.clone());
        b.max_connections = 2;
        b.first_byte_timeout = Dur(Duration::from_millis(300));
    })
    .await;
    let r = get(sh.addr, "/x.php").await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        r.text().contains("backend-first-byte-timeout"),
        "{}",
        r.text()
    );
    assert_eq!(sh.stat("backend_timeout").await, 1);
    sh.stop().await;

    let good = [
        record(6, b"Content-Type: text/plain\r\n\r\nup"),
        record(6, b""),
        end_request(0),
    ]
    .concat();
    let app = scripted_responder(vec![good.clone()]).await;
    let sh = Shellac::start(app, |c| {
        let b = &mut c.backends[0];
        b.protocol = BackendProtocol::Fastcgi;
        b.root = Some(root.clone());
        b.max_connections = 2;
        b.probe = Some(ProbeRef::Inline(ProbeConfig {
            name: String::new(),
            url: None,
            request: None,
            expected_status: 200,
            interval: Dur(Duration::from_millis(50)),
            timeout: Dur(Duration::from_millis(500)),
            window: 3,
            threshold: 2,
            initial: Some(3),
        }));
    })
    .await;
    let health = || async {
        let v: serde_json::Value =
            serde_json::from_slice(&get(sh.admin, "/backends").await.body).expect("JSON");
        v["backends"][0]["healthy"].as_bool()
    };
    assert_eq!(health().await, Some(true));
    // The responder ends after its one answer: nothing accepts at its address any more.
    let r = get(sh.addr, "/x.php?first").await;
    assert_eq!((r.status, r.text().as_str()), (200, "up"));
    assert!(
        eventually(Duration::from_secs(10), || async {
            health().await == Some(false)
        })
        .await,
        "a FastCGI backend that accepts no connection is marked sick"
    );
    let r = get(sh.addr, "/x.php?sick").await;
    assert_eq!(r.status, 503, "{}", r.text());
    scripted_responder_on(app, vec![good]).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            health().await == Some(true)
        })
        .await,
        "healthy again once it accepts"
    );
    let r = get(sh.addr, "/x.php?again").await;
    assert_eq!((r.status, r.text().as_str()), (200, "up"));
    sh.stop().await;
}
