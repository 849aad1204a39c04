//! `Upgrade` (RFC 9110 §7.8): Shellac does not tunnel. The Upgrade request is answered as
//! plain HTTP (the fields are hop-by-hop and removed), so the bytes that follow are always
//! parsed as a new request — by Shellac's parser and hyper's alike.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_is_not_tunnelled() {
    let bench = Bench::start().await;
    let ws = "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let v = vec![
        // A following request is a request, answered normally.
        Vector::new(
            "upgrade then request",
            format!("{ws}GET /next HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
        )
        .expect(&[200, 200], 2),
        // What a client would send after a 101 is not HTTP: refused, never forwarded (the
        // Upgrade request itself is now a cache hit).
        Vector::new("upgrade then frames", format!("{ws}\u{81}\u{85}abcd\r\n\r\n"))
            .expect(&[200, 400], 0),
        // h2c upgrade: the same.
        Vector::new(
            "h2c",
            "GET /h2c HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\
             HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        )
        .expect(&[200, 400], 1),
    ];
    bench.run(&v).await;
    for i in 0..bench.origin.count() {
        let r = bench.origin.request(i).to_ascii_lowercase();
        assert!(!r.contains("upgrade"), "Upgrade forwarded: {r}");
        assert!(r.starts_with("get /"), "{r}");
    }
    bench.stop().await;
}
