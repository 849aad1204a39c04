//! Message framing (RFC 9112 §6, §7): Content-Length and Transfer-Encoding ambiguities, chunked
//! syntax, and pipelined requests after a refused one.

use super::*;

const POST: &str = "POST / HTTP/1.1\r\nHost: a\r\n";

fn refused(name: &str, fields: &str, body: &str, status: u16) -> Vector {
    Vector::refused(name, with_after(&format!("{POST}{fields}"), body), status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_length_and_transfer_encoding() {
    let bench = Bench::start().await;
    let v = vec![
        refused(
            "CL.TE",
            "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",
            "0\r\n\r\nX",
            400,
        ),
        refused(
            "TE.CL",
            "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
            "1\r\nX\r\n0\r\n\r\n",
            400,
        ),
        refused("CL plus", "Content-Length: +3\r\n", "abc", 400),
        refused("CL hex", "Content-Length: 0x3\r\n", "abc", 400),
        refused("CL empty", "Content-Length:\r\n", "", 400),
        refused("CL negative", "Content-Length: -1\r\n", "", 400),
        refused("CL space inside", "Content-Length: 1 2\r\n", "", 400),
        refused(
            "CL differing lines",
            "Content-Length: 3\r\nContent-Length: 4\r\n",
            "abcd",
            400,
        ),
        refused("CL differing list", "Content-Length: 3, 4\r\n", "abcd", 400),
        refused("CL trailing comma", "Content-Length: 3,\r\n", "abc", 400),
        refused(
            "CL overflow",
            "Content-Length: 18446744073709551616\r\n",
            "",
            400,
        ),
        refused(
            "CL huge",
            "Content-Length: 99999999999999999999999999\r\n",
            "",
            400,
        ),
        refused(
            "TE leading comma",
            "Transfer-Encoding: ,chunked\r\n",
            "0\r\n\r\n",
            400,
        ),
        refused(
            "TE trailing comma",
            "Transfer-Encoding: chunked,\r\n",
            "0\r\n\r\n",
            400,
        ),
        refused(
            "TE twice in list",
            "Transfer-Encoding: chunked, chunked\r\n",
            "0\r\n\r\n",
            400,
        ),
        refused(
            "TE two lines",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "0\r\n\r\n",
            400,
        ),
        refused(
            "TE quoted",
            "Transfer-Encoding: \"chunked\"\r\n",
            "0\r\n\r\n",
            400,
        ),
        refused(
            "TE parameter",
            "Transfer-Encoding: chunked;foo=bar\r\n",
            "0\r\n\r\n",
            400,
        ),
        refused("TE empty", "Transfer-Encoding:\r\n", "", 400),
        refused(
            "TE gzip,chunked",
            "Transfer-Encoding: gzip, chunked\r\n",
            "0\r\n\r\n",
            501,
        ),
        refused("TE identity", "Transfer-Encoding: identity\r\n", "", 501),
        refused(
            "TE xchunked",
            "Transfer-Encoding: xchunked\r\n",
            "0\r\n\r\n",
            501,
        ),
        refused(
            "TE chunked then other line",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n",
            "",
            501,
        ),
        Vector::refused(
            "TE in HTTP/1.0",
            with_after(
                "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n",
                "0\r\n\r\n",
            ),
            400,
        ),
    ];
    bench.run(&v).await;
    assert_eq!(
        bench.origin.count(),
        0,
        "nothing ambiguous reached the origin"
    );
    let stats = bench.shellac.stats().await;
    assert_eq!(stats["client_reject_framing"], v.len() as u64);
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_syntax() {
    let bench = Bench::start().await;
    let te = "Transfer-Encoding: chunked\r\n";
    let bad = [
        ("size with LF only", "5\nhello\r\n0\r\n\r\n"),
        ("size then space", "5 \r\nhello\r\n0\r\n\r\n"),
        ("size plus", "+5\r\nhello\r\n0\r\n\r\n"),
        ("size 0x", "0x5\r\nhello\r\n0\r\n\r\n"),
        ("size empty", "\r\nhello\r\n0\r\n\r\n"),
        ("size overflow", "fffffffffffffffff\r\nx\r\n0\r\n\r\n"),
        ("size negative", "-1\r\nx\r\n0\r\n\r\n"),
        ("extension BWS", "5 ;a=b\r\nhello\r\n0\r\n\r\n"),
        ("extension empty", "5;\r\nhello\r\n0\r\n\r\n"),
        ("extension space", "5;a b\r\nhello\r\n0\r\n\r\n"),
        (
            "extension unterminated quote",
            "5;a=\"b\r\nhello\r\n0\r\n\r\n",
        ),
        ("extension control byte", "5;a=\u{1}\r\nhello\r\n0\r\n\r\n"),
        ("extension bare LF", "5;a\nhello\r\n0\r\n\r\n"),
        ("data too long", "5\r\nhelloXX\r\n0\r\n\r\n"),
        ("data too short", "5\r\nhell\r\n0\r\n\r\n"),
        ("data then LF", "5\r\nhello\n0\r\n\r\n"),
        ("last chunk LF", "0\n\r\n"),
        ("trailer obs-fold", "0\r\nX: y\r\n z\r\n\r\n"),
        ("trailer space before colon", "0\r\nX : y\r\n\r\n"),
        ("trailer NUL", "0\r\nX: \u{0}\r\n\r\n"),
        ("trailer no colon", "0\r\nX\r\n\r\n"),
        ("end bare CR", "0\r\n\rX"),
    ];
    let v: Vec<Vector> = bad
        .iter()
        .map(|(name, body)| refused(name, te, body, 400))
        .collect();
    bench.run(&v).await;
    // The bad bytes came with their head: the request never reached the origin.
    assert_eq!(bench.origin.count(), 0);
    assert_eq!(
        bench.shellac.stat("client_reject_chunked").await,
        v.len() as u64
    );

    // Well-formed chunked bodies with extensions and trailers pass, re-framed by Shellac.
    let good = Vector::new(
        "chunked with extensions and trailers",
        format!(
            "{POST}{te}Connection: close\r\n\r\n5;name=value;q=\"a\\\"b\";flag\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 1\r\n\r\n"
        ),
    )
    .expect(&[200], 1);
    bench.run(&[good]).await;
    let seen = bench.origin.request(0);
    assert!(
        seen.ends_with("\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
        "re-chunked by Shellac, without extensions or trailers: {seen}"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_chunk_arriving_later_aborts_the_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let bench = Bench::start().await;
    let mut s = tokio::net::TcpStream::connect(bench.shellac.addr)
        .await
        .unwrap();
    s.write_all(format!("{POST}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n").as_bytes())
        .await
        .unwrap();
    // Give the head time to be forwarded, then break the framing.
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.write_all(b"zz\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert!(out.contains("bad-chunk-size"), "{out}");
    assert_eq!(
        out.matches("HTTP/1.1 ").count(),
        1,
        "closed after the 400: {out}"
    );
    // The origin may have seen the head and the first chunk, never a complete request.
    assert_eq!(
        bench.origin.count(),
        0,
        "no complete request reached the origin"
    );
    assert!(!bench.origin.received().contains("/after"));
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_around_a_refused_one() {
    let bench = Bench::start().await;
    let good = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n");
    let v = vec![
        // good, bad, good: the first is answered, the refusal follows, the third never parsed.
        Vector::new(
            "good bad good",
            format!(
                "{}GET /bad HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n{}",
                good("/1"),
                good("/2")
            ),
        )
        .expect(&[200, 400], 1),
        // A body that looks like a request is never parsed as one.
        Vector::new(
            "body looks like a request",
            format!(
                "{POST}Content-Length: 30\r\n\r\nGET /smuggled HTTP/1.1\r\nX: 1\r\n{}",
                "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
            ),
        )
        .expect(&[200, 200], 2),
        // Bytes after a refused request's head (its "body") are never parsed either.
        Vector::refused(
            "bad then smuggled",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
            400,
        ),
    ];
    bench.run(&v).await;
    let all: Vec<String> = (0..bench.origin.count())
        .map(|i| bench.origin.request(i))
        .collect();
    assert!(
        all.iter()
            .all(|r| !r.starts_with("GET /smuggled") && !r.starts_with("GET /2 ")),
        "{all:?}"
    );
    assert!(all[0].starts_with("GET /1 "));
    let post = all
        .iter()
        .find(|r| r.starts_with("POST"))
        .expect("the POST");
    assert!(
        post.ends_with("GET /smuggled HTTP/1.1\r\nX: 1\r\n"),
        "{post}"
    );
    bench.stop().await;
}
