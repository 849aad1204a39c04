//! The same strictness for responses from backends: bad framing or status → 502, nothing
//! cached, the connection never reused.

use super::*;

async fn origin_sending(resp: &'static [u8]) -> RawOrigin {
    RawOrigin::start(move |_| resp.to_vec()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backend_framing_is_502_and_not_cached() {
    let cases: [(&str, &[u8]); 7] = [
        (
            "CL and TE",
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            "TE gzip, chunked",
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            "TE identity",
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ntransfer-encoding: identity\r\ncontent-length: 3\r\n\r\nabc",
        ),
        (
            "CL differing",
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
        ),
        (
            "unsolicited 101",
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        ),
        (
            "status 600",
            b"HTTP/1.1 600 Odd\r\ncache-control: max-age=60\r\ncontent-length: 1\r\n\r\nx",
        ),
        (
            "obs-fold",
            b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\nx-a: 1\r\n folded\r\ncontent-length: 1\r\n\r\nx",
        ),
    ];
    for (name, resp) in cases {
        let origin = origin_sending(resp).await;
        let shellac = Shellac::start(origin.addr, |_| {}).await;
        for _ in 0..2 {
            let got = exchange(
                shellac.addr,
                b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                Duration::from_secs(3),
            )
            .await;
            assert_eq!(got.statuses(), vec![502], "{name}: {}", got.text);
        }
        assert_eq!(origin.count(), 2, "{name}: not cached");
        assert_eq!(
            origin.connections.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "{name}: the connection is not reused"
        );
        shellac.stop().await;
        origin.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backend_chunks_are_never_stored() {
    let origin = origin_sending(
        b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n",
    )
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    for _ in 0..2 {
        let got = exchange(
            shellac.addr,
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            Duration::from_secs(3),
        )
        .await;
        // The head was good and went out; the body breaks off: never a complete response.
        assert!(!got.text.ends_with("\r\n0\r\n\r\n"), "{}", got.text);
    }
    assert_eq!(origin.count(), 2);
    assert_eq!(shellac.stat("n_object").await, 0);
    shellac.stop().await;
    origin.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_backend_head_is_502() {
    let big: &'static [u8] = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nx-big: {}\r\ncontent-length: 1\r\n\r\nx",
            "a".repeat(20_000)
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let origin = origin_sending(big).await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.server.max_response_header_size = shellac::config::units::Size(16 * 1024);
    })
    .await;
    let r = get(shellac.addr, "/").await;
    assert_eq!(r.status, 502);
    shellac.stop().await;
    origin.stop();
}
