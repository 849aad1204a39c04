//! The field block's MUSTs: HPACK (RFC 7541: table size updates, indexes out of range,
//! Huffman strings and their padding, integers that overflow, the dynamic table across blocks
//! and CONTINUATION frames) and RFC 9113's field rules: pseudo-headers, names and values,
//! `Content-Length` against the DATA sent, and trailers.

use super::*;

/// HPACK integer with a `prefix`-bit prefix and the flag bits `first`.
fn int(out: &mut Vec<u8>, first: u8, prefix: u8, mut n: usize) {
    let max = (1usize << prefix) - 1;
    if n < max {
        out.push(first | n as u8);
        return;
    }
    out.push(first | max as u8);
    n -= max;
    while n >= 128 {
        out.push((n % 128 + 128) as u8);
        n /= 128;
    }
    out.push(n as u8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpack() {
    let (origin, shellac) = start().await;
    let base = request_block("GET", "/h", &[]);
    // RFC 7541 §4.2 / §6.3: a dynamic table size update over SETTINGS_HEADER_TABLE_SIZE.
    let mut over = Vec::new();
    int(&mut over, 0x20, 5, 8192);
    over.extend_from_slice(&base);
    // §6.3: a size update after the first field of a block.
    let mut late = base.clone();
    int(&mut late, 0x20, 5, 0);
    // §2.3.3: an index past both tables.
    let mut index = base.clone();
    int(&mut index, 0x80, 7, 70);
    // §6.1: index 0.
    let mut zero = base.clone();
    zero.push(0x80);
    // §5.2: a Huffman string with an EOS symbol / bad padding.
    let mut huff = base.clone();
    huff.extend_from_slice(&[0x00, 0x85, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, b'a']);
    // §5.1: a string whose length runs past the end of the block (END_HEADERS set).
    let mut truncated = base.clone();
    truncated.extend_from_slice(&[0x00, 0x03, b'x', b'-', b'a', 0x05, b'a']);
    // §5.1: an integer that overflows (index with ten continuation bytes).
    let mut overflow = base.clone();
    overflow.extend_from_slice(&[
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ]);
    // §5.2: Huffman padding longer than 7 bits (two bytes of all ones for "a"... 0x1f + 0xff).
    let mut padding = base.clone();
    padding.extend_from_slice(&[0x00, 0x81, b'x', 0x83, 0x1f, 0xff, 0xff]);
    let cases: &[(&str, Vec<u8>)] = &[
        ("table size update over the limit", over),
        ("table size update after a field", late),
        ("index past the tables", index),
        ("index 0", zero),
        ("Huffman EOS", huff),
        ("string past the end of the block", truncated),
        ("integer overflow", overflow),
        ("Huffman padding over 7 bits", padding),
    ];
    // RFC 9113 §4.3: a field block that cannot be decoded is a connection error of type
    // COMPRESSION_ERROR (h2 is patched for it: vendor/h2/PATCHES.md).
    for (case, block) in cases {
        let mut raw = ready(shellac.addr).await;
        raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
            .await;
        expect_goaway_code(&mut raw, COMPRESSION_ERROR, case).await;
    }
    // The same error in a CONTINUATION frame: the block is decoded across its frames.
    let mut raw = ready(shellac.addr).await;
    let mut tail = Vec::new();
    int(&mut tail, 0x80, 7, 70);
    raw.send(
        &[
            frame(HEADERS, END_STREAM, 1, &base),
            frame(CONTINUATION, END_HEADERS, 1, &tail),
        ]
        .concat(),
    )
    .await;
    expect_goaway_code(&mut raw, COMPRESSION_ERROR, "bad index in CONTINUATION").await;
    // A block cut in the middle of a field line by its last frame (END_HEADERS).
    let mut raw = ready(shellac.addr).await;
    raw.send(
        &[
            frame(HEADERS, END_STREAM, 1, &base),
            frame(CONTINUATION, END_HEADERS, 1, &[0x00, 0x03, b'x']),
        ]
        .concat(),
    )
    .await;
    expect_goaway_code(
        &mut raw,
        COMPRESSION_ERROR,
        "block ends inside a field line",
    )
    .await;
    // A table size update at the start of a block, within the limit, and a field added to
    // the dynamic table then used by index in the next request: both answered.
    let mut raw = ready(shellac.addr).await;
    let mut first = Vec::new();
    int(&mut first, 0x20, 5, 4096);
    first.extend_from_slice(&request_block("GET", "/t", &[]));
    // Literal with incremental indexing, new name: "x-t: 1" → dynamic index 62.
    first.extend_from_slice(&[0x40, 3, b'x', b'-', b't', 1, b'1']);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &first))
        .await;
    expect_answer(&mut raw, 1, "table size update").await;
    let mut second = request_block("GET", "/t2", &[]);
    int(&mut second, 0x80, 7, 62);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 3, &second))
        .await;
    expect_answer(&mut raw, 3, "dynamic index").await;
    for _ in 0..100 {
        if origin.count_path("/t2") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = origin.seen.lock().unwrap().clone();
    let t2 = seen.iter().find(|s| s.path == "/t2").expect("forwarded");
    assert_eq!(t2.headers["x-t"], "1");
    // A malformed field indexed in the dynamic table (literal with incremental indexing):
    // its stream is reset, the entry still takes its place in the table (RFC 7541 §4.4), so
    // the indexes of the next blocks mean what the client's encoder meant.
    let mut raw = ready(shellac.addr).await;
    let mut bad = request_block("GET", "/m", &[]);
    bad.extend_from_slice(&[0x40, 4, b'x', b'-', b'o', b'k', 1, b'1']); // → 62, then 63
    bad.extend_from_slice(&[0x40, 5, b'X', b'-', b'B', b'a', b'd', 1, b'2']); // → 62
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &bad))
        .await;
    expect_reset(&mut raw, 1, PROTOCOL_ERROR, "indexed malformed field").await;
    let mut good = request_block("GET", "/m-ok", &[]);
    int(&mut good, 0x80, 7, 63);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 3, &good))
        .await;
    expect_answer(&mut raw, 3, "index of the field before the malformed one").await;
    let mut again = request_block("GET", "/m-bad", &[]);
    int(&mut again, 0x80, 7, 62);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 5, &again))
        .await;
    expect_reset(&mut raw, 5, PROTOCOL_ERROR, "index of the malformed field").await;
    // A literal naming the malformed entry's name by index, with a good value: still
    // malformed (the name is upper case).
    let mut named = request_block("GET", "/m-bad2", &[]);
    int(&mut named, 0x00, 4, 62);
    named.extend_from_slice(&[1, b'3']);
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 7, &named))
        .await;
    expect_reset(&mut raw, 7, PROTOCOL_ERROR, "name of the malformed field").await;
    raw.send(&get(9, "/m-after")).await;
    expect_answer(&mut raw, 9, "after malformed indexed fields").await;
    for _ in 0..100 {
        if origin.count_path("/m-ok") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = origin.seen.lock().unwrap().clone();
    let ok = seen.iter().find(|s| s.path == "/m-ok").expect("forwarded");
    assert_eq!(ok.headers["x-ok"], "1");
    assert!(
        !seen
            .iter()
            .any(|s| s.path.starts_with("/m-bad") || s.path == "/m")
    );
    // Connections of earlier cases are still open (shadowed, not dropped): no grace period.
    shellac.stop_with(Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pseudo_header_and_field_rules() {
    let (origin, shellac) = start().await;
    let lit = |fields: &[(&str, &str)]| {
        let mut b = Vec::new();
        for (n, v) in fields {
            literal(&mut b, n.as_bytes(), v.as_bytes());
        }
        b
    };
    let m = (":method", "GET");
    let s = (":scheme", "http");
    let a = (":authority", "test.example");
    let p = (":path", "/p");
    let cases: &[(&str, Vec<u8>)] = &[
        // RFC 9113 §8.3.1: every request has :method, :scheme, :path.
        ("no :method", lit(&[s, a, p])),
        ("no :scheme", lit(&[m, a, p])),
        ("no :path", lit(&[m, s, a])),
        ("empty :path", lit(&[m, s, a, (":path", "")])),
        // §8.3: each pseudo-header once, before the regular fields, only defined ones.
        ("two :method", lit(&[m, m, s, a, p])),
        ("two :path", lit(&[m, s, a, p, p])),
        ("pseudo after regular", lit(&[m, s, a, ("x-a", "1"), p])),
        ("unknown pseudo", lit(&[m, s, a, p, (":foo", "bar")])),
        (
            "response pseudo in a request",
            lit(&[m, s, a, p, (":status", "200")]),
        ),
        // §8.2: field names in lower case; no connection-specific fields; TE only trailers.
        ("upper-case name", lit(&[m, s, a, p, ("X-Upper", "1")])),
        (
            "connection",
            lit(&[m, s, a, p, ("connection", "keep-alive")]),
        ),
        ("keep-alive", lit(&[m, s, a, p, ("keep-alive", "5")])),
        (
            "transfer-encoding",
            lit(&[m, s, a, p, ("transfer-encoding", "chunked")]),
        ),
        ("upgrade", lit(&[m, s, a, p, ("upgrade", "websocket")])),
        ("TE gzip", lit(&[m, s, a, p, ("te", "gzip")])),
        // §8.2.1: no CR, LF or NUL in a value, no surrounding whitespace.
        ("LF in a value", lit(&[m, s, a, p, ("x-a", "a\nb")])),
        ("NUL in a value", lit(&[m, s, a, p, ("x-a", "a\0b")])),
        ("leading space", lit(&[m, s, a, p, ("x-a", " a")])),
        ("trailing tab", lit(&[m, s, a, p, ("x-a", "a\t")])),
        // §8.3.1: :authority and Host name the same thing; no userinfo.
        (
            "Host differs",
            lit(&[m, s, a, p, ("host", "other.example")]),
        ),
        (
            "userinfo",
            lit(&[m, s, (":authority", "u@test.example"), p]),
        ),
    ];
    // §8.1.1: a malformed request is a stream error; the connection goes on (h2 is patched
    // so that bad names and values are: vendor/h2/PATCHES.md).
    for (case, block) in cases {
        let mut raw = ready(shellac.addr).await;
        raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
            .await;
        expect_reset(&mut raw, 1, PROTOCOL_ERROR, case).await;
        raw.send(&get(3, "/after")).await;
        expect_answer(&mut raw, 3, case).await;
    }
    // §8.1.1: Content-Length that disagrees with the DATA sent.
    for (case, sent) in [
        ("shorter body", &b"abc"[..]),
        ("longer body", &b"abcdefgh"[..]),
    ] {
        let mut raw = ready(shellac.addr).await;
        let block = lit(&[(":method", "POST"), s, a, p, ("content-length", "5")]);
        raw.send(
            &[
                frame(HEADERS, END_HEADERS, 1, &block),
                frame(DATA, END_STREAM, 1, sent),
            ]
            .concat(),
        )
        .await;
        expect_error(&mut raw, &[PROTOCOL_ERROR], case).await;
    }
    // §8.1: trailers (a second HEADERS with END_STREAM, no pseudo-header) are accepted.
    let mut raw = ready(shellac.addr).await;
    let block = lit(&[
        (":method", "POST"),
        s,
        a,
        (":path", "/trailers"),
        ("te", "trailers"),
    ]);
    raw.send(
        &[
            frame(HEADERS, END_HEADERS, 1, &block),
            frame(DATA, 0, 1, b"body"),
            frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                1,
                &lit(&[("x-trailer", "t")]),
            ),
        ]
        .concat(),
    )
    .await;
    let (_, body) = expect_answer(&mut raw, 1, "trailers").await;
    assert_eq!(body, b"POST /trailers 4");
    // §8.1: a pseudo-header field in trailers makes the request malformed: a stream error
    // (h2 dropped the field and went on; patched: vendor/h2/PATCHES.md).
    for (case, trailer) in [
        (
            ":path in trailers",
            lit(&[(":path", "/x"), ("x-trailer", "t")]),
        ),
        (":status in trailers", lit(&[(":status", "200")])),
        ("regular then :method", lit(&[("x-trailer", "t"), m])),
    ] {
        let mut raw = ready(shellac.addr).await;
        let head = lit(&[(":method", "POST"), s, a, (":path", "/pseudo-trailers")]);
        raw.send(
            &[
                frame(HEADERS, END_HEADERS, 1, &head),
                frame(DATA, 0, 1, b"body"),
                frame(HEADERS, END_HEADERS | END_STREAM, 1, &trailer),
            ]
            .concat(),
        )
        .await;
        expect_reset(&mut raw, 1, PROTOCOL_ERROR, case).await;
        raw.send(&get(3, "/after")).await;
        expect_answer(&mut raw, 3, case).await;
    }
    // A malformed field in the first frame of a block continued in CONTINUATION: the whole
    // block is decoded (the HPACK state is the connection's), then the stream is reset.
    let mut raw = ready(shellac.addr).await;
    let mut block = lit(&[m, s, a, p, ("X-Upper", "1")]);
    let rest = block.split_off(block.len() - 1);
    let mut more = rest.clone();
    literal(&mut more, b"x-b", b"2");
    raw.send(
        &[
            frame(HEADERS, END_STREAM, 1, &block),
            frame(CONTINUATION, END_HEADERS, 1, &more),
        ]
        .concat(),
    )
    .await;
    expect_reset(&mut raw, 1, PROTOCOL_ERROR, "malformed across CONTINUATION").await;
    raw.send(&get(3, "/after")).await;
    expect_answer(&mut raw, 3, "after malformed across CONTINUATION").await;
    // Nothing malformed reached the backend.
    let paths: Vec<String> = origin
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert!(
        paths
            .iter()
            .all(|p| ["/trailers", "/after", "/pseudo-trailers"].contains(&p.as_str())),
        "{paths:?}"
    );
    let _ = NO_ERROR;
    // Connections of earlier cases are still open (shadowed, not dropped): no grace period.
    shellac.stop_with(Duration::ZERO).await;
}
