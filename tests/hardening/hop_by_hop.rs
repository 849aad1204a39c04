//! `Connection` and hop-by-hop fields (RFC 9110 §7.6.1): a client cannot make Shellac drop
//! framing, routing or identity fields, and hop-by-hop fields never reach the origin.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cannot_name_end_to_end_fields() {
    let bench = Bench::start().await;
    let mut v = Vec::new();
    for field in [
        "Content-Length",
        "Transfer-Encoding",
        "Host",
        "host",
        "Authorization",
        "Cookie",
        "X-Forwarded-For",
        "Forwarded",
        "Cache-Control",
        "Range",
        "If-None-Match",
        // RFC 9110 §7.6.1's other end-to-end fields, as Varnish refuses them (varnishtest
        // c00016: `Connection: Age`).
        "Age",
        "ETag",
        "Set-Cookie",
        "Accept-Language",
    ] {
        v.push(Vector::refused(
            format!("Connection: {field}"),
            with_after(
                &format!("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, {field}\r\n"),
                "",
            ),
            400,
        ));
    }
    v.push(Vector::refused(
        "malformed Connection",
        with_after("GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n", ""),
        400,
    ));
    bench.run(&v).await;
    assert_eq!(bench.origin.count(), 0);
    assert_eq!(
        bench.shellac.stat("client_reject_hop_by_hop").await,
        v.len() as u64
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_fields_are_removed() {
    let bench = Bench::start().await;
    let v = Vector::new(
        "hop-by-hop",
        "GET /h HTTP/1.1\r\nHost: a\r\nConnection: close, X-Private\r\nX-Private: 1\r\n\
         Keep-Alive: timeout=5\r\nTE: trailers\r\nTrailer: X\r\nProxy-Connection: keep-alive\r\n\
         Proxy-Authorization: Basic eA==\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\n\
         X-Kept: 1\r\n\r\n",
    )
    .expect(&[200], 1);
    bench.run(&[v]).await;
    let seen = bench.origin.request(0).to_ascii_lowercase();
    for gone in [
        "x-private",
        "keep-alive:",
        "\r\nte:",
        "trailer:",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "upgrade:",
    ] {
        assert!(!seen.contains(gone), "{gone} forwarded: {seen}");
    }
    assert!(seen.contains("x-kept: 1"), "{seen}");
    bench.stop().await;
}
