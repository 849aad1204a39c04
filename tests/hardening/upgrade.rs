//! `Upgrade` (RFC 9110 §7.8): a WebSocket upgrade is passed to the backend (never cached);
//! only after the backend's 101 does the connection become a tunnel. Any other answer leaves
//! it HTTP, and the bytes that follow are parsed as the next request — by Shellac's parser
//! and hyper's alike. Protocols not in `server.upgrade_protocols` are plain HTTP requests.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

const WS: &str = "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                  Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_refused_by_the_backend_stays_http() {
    let bench = Bench::start().await;
    let v = vec![
        // The origin answers 200: a following request is a request, answered normally.
        Vector::new(
            "upgrade then request",
            format!("{WS}GET /next HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
        )
        .expect(&[200, 200], 2),
        // What a client would send after a 101 is not HTTP: refused, never forwarded.
        Vector::new("upgrade then frames", format!("{WS}\u{81}\u{85}abcd\r\n\r\n"))
            .expect(&[200, 400], 1),
        // Only a bodiless GET can switch: with a body it is an ordinary request.
        Vector::new(
            "upgrade with a body",
            "POST /up HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\
             Content-Length: 2\r\n\r\nhiGET /n HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .expect(&[200, 200], 2),
        // h2c is not an allowed protocol: plain HTTP, Upgrade removed.
        Vector::new(
            "h2c",
            "GET /h2c HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\
             HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        )
        .expect(&[200, 400], 1),
    ];
    bench.run(&v).await;
    let seen: Vec<String> = (0..bench.origin.count())
        .map(|i| bench.origin.request(i).to_ascii_lowercase())
        .collect();
    // WebSocket upgrades reach the origin as upgrades (and are never served from the cache).
    let ws: Vec<&String> = seen.iter().filter(|r| r.starts_with("get /chat")).collect();
    assert_eq!(ws.len(), 2, "{seen:?}");
    for r in ws {
        assert!(
            r.contains("upgrade: websocket\r\n") && r.contains("connection: upgrade\r\n"),
            "{r}"
        );
    }
    let h2c = seen
        .iter()
        .find(|r| r.starts_with("get /h2c"))
        .expect("h2c request");
    assert!(!h2c.contains("upgrade"), "{h2c}");
    assert_eq!(bench.shellac.stat("pass_reason_upgrade").await, 2);
    bench.stop().await;
}

/// A backend that switches to an echo protocol after its 101.
async fn echo_backend() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
                if !text.contains("upgrade: websocket") {
                    let _ = s
                        .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                        .await;
                    return;
                }
                let _ = s
                    .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
                    .await;
                let mut buf = [0u8; 1024];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let mut out = b"echo:".to_vec();
                    out.extend_from_slice(&buf[..n]);
                    if s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, task)
}

async fn read_until(s: &mut TcpStream, want: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(want.len()).any(|w| w == want) {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("bytes within 5 s")
            .expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_is_tunnelled_after_101() {
    let (backend, task) = echo_backend().await;
    let shellac = Shellac::start(backend, |c| {
        // Long enough that a busy machine never stalls a live tunnel past it; the HTTP
        // keep-alive timeout is far longer, so only the tunnel's own can close it in time.
        c.server.tunnel_idle_timeout = shellac::config::units::Dur(Duration::from_secs(2));
        c.server.idle_timeout = shellac::config::units::Dur(Duration::from_secs(600));
    })
    .await;
    let mut s = TcpStream::connect(shellac.addr).await.unwrap();
    // Bytes sent right behind the upgrade request belong to the tunnel, not to HTTP.
    s.write_all(format!("{WS}GET /not-http HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let got = read_until(&mut s, b"echo:GET /not-http").await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 101 "), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("upgrade: websocket"),
        "{text}"
    );
    s.write_all(b"\x00binary\xff").await.unwrap();
    read_until(&mut s, b"echo:\x00binary\xff").await;
    assert_eq!(shellac.stat("client_tunnel").await, 1);
    // Quiet for tunnel_idle_timeout (server.tunnel_idle_timeout, Varnish's pipe_timeout):
    // the tunnel is closed.
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("closed within 10 s");
    assert_eq!(n.unwrap_or(0), 0);
    assert_eq!(shellac.stat("client_tunnel_idle_closed").await, 1);
    shellac.stop().await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tunnel_when_upgrades_are_off() {
    let (backend, task) = echo_backend().await;
    let shellac = Shellac::start(backend, |c| c.server.upgrade_protocols = vec![]).await;
    let got = exchange(shellac.addr, WS.as_bytes(), Duration::from_secs(3)).await;
    // Upgrade removed: the backend sees a plain GET and refuses it.
    assert_eq!(got.statuses(), vec![400], "{}", got.text);
    assert_eq!(shellac.stat("client_tunnel").await, 0);
    shellac.stop().await;
    task.abort();
}
