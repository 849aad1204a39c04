//! 1xx informational responses (103 Early Hints, 102 Processing) from backends: forwarded to
//! the client ahead of the final response, in order, never to HTTP/1.0 clients, never stored
//! or replayed on a hit (RFC 9110 §15.2, RFC 8297).

use std::time::Duration;

use crate::common::raw_origin::{GatedOrigin, RawOrigin, read_until};
use crate::common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HINTS: &str = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n";
const FINAL: &str = "HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 4\r\n\r\npage";

/// Issue 23: a 103 from the backend reaches the client while the backend is still working on
/// the final response (the origin sends the page only after the client saw the hints); the
/// page is cached, and the hit that follows carries no hints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_hints_reach_the_client_before_the_final_response() {
    let origin = GatedOrigin::start(HINTS.as_bytes(), FINAL.as_bytes()).await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let mut client = TcpStream::connect(shellac.addr).await.unwrap();
    client
        .write_all(b"GET /page HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    read_until(&mut client, &mut text, "rel=preload; as=style\r\n\r\n").await;
    assert!(
        text.starts_with(
            "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\n\r\n"
        ),
        "{text:?}"
    );
    assert!(!text.contains("200 OK"), "hints first: {text:?}");
    origin.go.notify_one();
    read_until(&mut client, &mut text, "page").await;
    let final_at = text.find("HTTP/1.1 200 OK").expect("final response");
    assert!(final_at > 0);
    // The same connection, a hit: no hints replayed.
    client
        .write_all(b"GET /page HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut hit = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        while let Ok(n) = client.read(&mut buf).await {
            if n == 0 {
                break;
            }
            hit.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await;
    assert!(hit.starts_with("HTTP/1.1 200 OK"), "{hit:?}");
    assert!(hit.contains("hit"), "{hit:?}");
    assert!(!hit.contains("103"), "{hit:?}");
    assert_eq!(shellac.stat("client_interim").await, 1);
    shellac.stop().await;
    origin.abort();
}

/// Several 1xx in order (102 then 103), per request on a keep-alive connection; none to an
/// HTTP/1.0 client (RFC 9110 §15.2); 100 Continue is not forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_informational_response_in_order_and_none_for_http_1_0() {
    let origin = RawOrigin::start(|req| {
        let text = String::from_utf8_lossy(req);
        let path = text.split(' ').nth(1).unwrap_or("/");
        format!(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n{}HTTP/1.1 200 OK\r\ncache-control: no-store\r\ncontent-length: {}\r\n\r\n{path}",
            HINTS.replace("style.css", &format!("{}.css", &path[1..])),
            path.len()
        )
        .into_bytes()
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let got = exchange(
        shellac.addr,
        b"GET /one HTTP/1.1\r\nHost: a\r\n\r\nGET /two HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let statuses = got.statuses();
    // Pipelined: the second request's hints are forwarded only if nothing of the first
    // response was still waiting in hyper's buffer; either way the order holds.
    assert!(
        statuses == [102, 103, 200, 102, 103, 200] || statuses == [102, 103, 200, 200],
        "{statuses:?}\n{}",
        got.text
    );
    let one = got.text.find("</one.css>").expect("first hints");
    let first_final = got.text.find("\r\n\r\n/one").expect("first page");
    assert!(one < first_final, "{}", got.text);
    if let Some(two) = got.text.find("</two.css>") {
        assert!(two > first_final, "{}", got.text);
        assert!(two < got.text.find("\r\n\r\n/two").unwrap(), "{}", got.text);
    }
    assert!(!got.text.contains("100 Continue"), "{}", got.text);

    let old = exchange(
        shellac.addr,
        b"GET /old HTTP/1.0\r\nHost: a\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(old.statuses(), vec![200], "{}", old.text);
    assert!(shellac.stat("client_interim_dropped").await >= 2);
    shellac.stop().await;
    origin.stop();
}

/// A backend sending 12 × 103 before its answer: 8 reach the HTTP/1.1 client, in order, then
/// the final response; the rest are counted as dropped (the bound HTTP/2 clients get too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_eight_informational_responses_per_request() {
    let origin = RawOrigin::start(|_| {
        let mut out = String::new();
        for i in 0..12 {
            out.push_str(&format!(
                "HTTP/1.1 103 Early Hints\r\nLink: </{i}.css>; rel=preload\r\n\r\n"
            ));
        }
        out.push_str("HTTP/1.1 200 OK\r\ncache-control: no-store\r\ncontent-length: 4\r\n\r\nmany");
        out.into_bytes()
    })
    .await;
    let shellac = Shellac::start(origin.addr, |_| {}).await;
    let got = exchange(
        shellac.addr,
        b"GET /many HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(
        got.statuses(),
        [103, 103, 103, 103, 103, 103, 103, 103, 200],
        "{}",
        got.text
    );
    let mut at = 0;
    for i in 0..8 {
        let link = format!("</{i}.css>");
        let found = got.text[at..].find(&link).expect("in order") + at;
        at = found;
    }
    assert!(!got.text.contains("</8.css>"), "{}", got.text);
    assert_eq!(shellac.stat("client_interim").await, 8);
    assert_eq!(shellac.stat("client_interim_dropped").await, 4);
    shellac.stop().await;
    origin.stop();
}
