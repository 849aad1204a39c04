//! RFC 9113 and RFC 7541 MUSTs, frame by frame (in the manner of h2spec): each case writes raw
//! frames on a fresh connection and checks the error the server must answer with — a stream
//! error (`RST_STREAM` with the code), a connection error (`GOAWAY` with the code), or the
//! connection closed, which h2spec also accepts — or the answer it must give. h2spec's own
//! cases, one function each, are in `tests/http2/h2spec/`; these go beyond them.

use std::time::Duration;

use crate::common::h2::*;
use crate::common::*;

const NO_ERROR: u32 = 0x0;
const PROTOCOL_ERROR: u32 = 0x1;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const STREAM_CLOSED: u32 = 0x5;
const FRAME_SIZE_ERROR: u32 = 0x6;
const COMPRESSION_ERROR: u32 = 0x9;

const WAIT: Duration = Duration::from_secs(5);

/// A fresh connection whose SETTINGS exchange is done (both acknowledged).
async fn ready(addr: std::net::SocketAddr) -> Raw {
    let mut raw = Raw::open(addr).await;
    raw.until(WAIT, |f| f.kind == SETTINGS && f.flags & ACK != 0)
        .await
        .expect("SETTINGS acknowledged");
    raw
}

/// Reads until an error with one of `codes` (RST_STREAM or GOAWAY) or the end of the
/// connection; panics on anything else that ends the wait (a timeout, another code).
async fn expect_error(raw: &mut Raw, codes: &[u32], case: &str) {
    let got = raw
        .until(WAIT, |f| matches!(f.kind, RST_STREAM | GOAWAY))
        .await;
    match &got {
        None => {} // closed (or nothing): h2spec accepts a closed connection
        Some(f) => {
            let code = f.code().unwrap_or(u32::MAX);
            assert!(
                codes.contains(&code),
                "{case}: {} with code {code:#x}, expected one of {codes:?}",
                if f.kind == GOAWAY {
                    "GOAWAY"
                } else {
                    "RST_STREAM"
                }
            );
        }
    }
    if got.is_none() {
        assert!(raw.closed(WAIT).await, "{case}: no error and not closed");
    }
}

/// A connection error: GOAWAY with one of `codes`, or the connection closed.
async fn expect_goaway(raw: &mut Raw, codes: &[u32], case: &str) {
    match raw.until(WAIT, |f| f.kind == GOAWAY).await {
        None => assert!(raw.closed(WAIT).await, "{case}: no GOAWAY and not closed"),
        Some(f) => {
            let code = f.code().unwrap_or(u32::MAX);
            assert!(
                codes.contains(&code),
                "{case}: GOAWAY {code:#x}, expected {codes:?}"
            );
        }
    }
}

/// A stream error: RST_STREAM on `stream` with `code`, no GOAWAY (the connection goes on).
async fn expect_reset(raw: &mut Raw, stream: u32, code: u32, case: &str) {
    let f = raw
        .until(WAIT, |f| {
            assert!(
                f.kind != GOAWAY,
                "{case}: GOAWAY {:?}, expected RST_STREAM",
                f.code()
            );
            f.kind == RST_STREAM && f.stream == stream
        })
        .await
        .unwrap_or_else(|| panic!("{case}: no RST_STREAM"));
    assert_eq!(f.code(), Some(code), "{case}: RST_STREAM code");
}

/// A connection error with exactly `code`: a GOAWAY frame, not only a closed connection.
async fn expect_goaway_code(raw: &mut Raw, code: u32, case: &str) {
    let got = raw.goaway(WAIT).await;
    assert_eq!(got, Some(code), "{case}: GOAWAY code");
}

/// The response head and body of `stream` (status from the first HPACK byte: the static
/// table's `:status` entries 8–14).
async fn expect_answer(raw: &mut Raw, stream: u32, case: &str) -> (u8, Vec<u8>) {
    let head = raw
        .until(WAIT, |f| {
            assert!(
                !(f.kind == RST_STREAM && f.stream == stream) && f.kind != GOAWAY,
                "{case}: {f:?}"
            );
            f.kind == HEADERS && f.stream == stream
        })
        .await
        .unwrap_or_else(|| panic!("{case}: no answer"));
    let mut body = Vec::new();
    if head.flags & END_STREAM == 0 {
        loop {
            let f = raw
                .until(WAIT, |f| f.kind == DATA && f.stream == stream)
                .await
                .unwrap_or_else(|| panic!("{case}: body"));
            body.extend_from_slice(&f.payload);
            if f.flags & END_STREAM != 0 {
                break;
            }
        }
    }
    (head.payload[0], body)
}

async fn start() -> (Origin, Shellac) {
    let origin = Origin::start(|s| {
        Reply::ok(&format!("{} {} {}", s.method, s.path, s.body_len)).cc("max-age=60")
    })
    .await;
    let shellac = Shellac::start(origin.addr, |c| {
        c.http2.h2c = shellac::config::http2::H2c::All
    })
    .await;
    (origin, shellac)
}

fn get(stream: u32, path: &str) -> Vec<u8> {
    frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        stream,
        &request_block("GET", path, &[]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preface_and_settings() {
    let (_origin, shellac) = start().await;
    // §3.4: an invalid preface is a connection error (PROTOCOL_ERROR) — or a close.
    let mut stream = tokio::net::TcpStream::connect(shellac.addr).await.unwrap();
    use tokio::io::AsyncWriteExt;
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Raw::from_stream(stream);
    expect_goaway(&mut raw, &[PROTOCOL_ERROR], "bad preface").await;

    // §3.4: the first frame must be SETTINGS.
    let mut stream = tokio::net::TcpStream::connect(shellac.addr).await.unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(PING, 0, 0, &[0; 8]));
    stream.write_all(&hello).await.unwrap();
    let mut raw = Raw::from_stream(stream);
    expect_goaway(&mut raw, &[PROTOCOL_ERROR], "PING before SETTINGS").await;

    // §6.5: SETTINGS is acknowledged; unknown settings are ignored.
    let mut raw = ready(shellac.addr).await;
    raw.send(&frame(SETTINGS, 0, 0, &[0, 0x99, 0, 0, 0, 1]))
        .await;
    let ack = raw
        .until(WAIT, |f| f.kind == SETTINGS && f.flags & ACK != 0)
        .await
        .expect("acknowledged");
    assert!(ack.payload.is_empty());

    let cases: &[(&str, Vec<u8>, &[u32])] = &[
        // §6.5: length not a multiple of 6.
        (
            "SETTINGS length 3",
            frame(SETTINGS, 0, 0, &[0, 3, 0]),
            &[FRAME_SIZE_ERROR],
        ),
        // §6.5: an ACK with a payload.
        (
            "SETTINGS ACK with payload",
            frame(SETTINGS, ACK, 0, &[0, 3, 0, 0, 0, 1]),
            &[FRAME_SIZE_ERROR],
        ),
        // §6.5: on a stream.
        (
            "SETTINGS on stream 1",
            frame(SETTINGS, 0, 1, &[]),
            &[PROTOCOL_ERROR],
        ),
        // §6.5.2: ENABLE_PUSH other than 0 or 1.
        (
            "ENABLE_PUSH 2",
            frame(SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 2]),
            &[PROTOCOL_ERROR],
        ),
        // §6.5.2: INITIAL_WINDOW_SIZE over 2^31-1.
        (
            "INITIAL_WINDOW_SIZE 2^31",
            frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
            &[FLOW_CONTROL_ERROR],
        ),
        // §6.5.2: MAX_FRAME_SIZE below 16,384 or over 2^24-1.
        (
            "MAX_FRAME_SIZE 16383",
            frame(SETTINGS, 0, 0, &[0, 5, 0, 0, 0x3f, 0xff]),
            &[PROTOCOL_ERROR],
        ),
        (
            "MAX_FRAME_SIZE 2^24",
            frame(SETTINGS, 0, 0, &[0, 5, 1, 0, 0, 0]),
            &[PROTOCOL_ERROR],
        ),
    ];
    for (case, bytes, codes) in cases {
        let mut raw = ready(shellac.addr).await;
        raw.send(bytes).await;
        expect_goaway(&mut raw, codes, case).await;
    }
    // Connections of earlier cases are still open (shadowed, not dropped): no grace period.
    shellac.stop_with(Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_goaway_and_frame_sizes() {
    let (_origin, shellac) = start().await;
    // §6.7: PING is answered with the same payload and ACK.
    let mut raw = ready(shellac.addr).await;
    raw.send(&frame(PING, 0, 0, b"shellac!")).await;
    let pong = raw
        .until(WAIT, |f| f.kind == PING && f.flags & ACK != 0)
        .await
        .expect("PING ACK");
    assert_eq!(pong.payload, b"shellac!");
    // A PING ACK from the client is not answered (and is no error).
    raw.send(&frame(PING, ACK, 0, b"shellac?")).await;
    raw.send(&get(1, "/after-ack")).await;
    let (_, body) = expect_answer(&mut raw, 1, "after a PING ACK").await;
    assert_eq!(body, b"GET /after-ack 0");

    let big = vec![0u8; 16_385];
    let cases: &[(&str, Vec<u8>, &[u32])] = &[
        (
            "PING length 7",
            frame(PING, 0, 0, &[0; 7]),
            &[FRAME_SIZE_ERROR],
        ),
        (
            "PING on stream 1",
            frame(PING, 0, 1, &[0; 8]),
            &[PROTOCOL_ERROR],
        ),
        (
            "GOAWAY on stream 1",
            frame(GOAWAY, 0, 1, &[0; 8]),
            &[PROTOCOL_ERROR],
        ),
        // §4.2: a frame over SETTINGS_MAX_FRAME_SIZE (16,384).
        (
            "DATA of 16,385 bytes",
            frame(DATA, 0, 1, &big),
            &[FRAME_SIZE_ERROR, PROTOCOL_ERROR],
        ),
        (
            "HEADERS of 16,385 bytes",
            frame(HEADERS, END_HEADERS, 1, &big),
            &[FRAME_SIZE_ERROR, PROTOCOL_ERROR, COMPRESSION_ERROR],
        ),
        // §6.9: WINDOW_UPDATE of 4 bytes only.
        (
            "WINDOW_UPDATE length 3",
            frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1]),
            &[FRAME_SIZE_ERROR],
        ),
        // §6.9: an increment of 0 on the connection.
        (
            "WINDOW_UPDATE 0",
            frame(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]),
            &[PROTOCOL_ERROR],
        ),
        // §6.9.1: the connection window over 2^31-1.
        (
            "connection window overflow",
            [frame(WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes())].concat(),
            &[FLOW_CONTROL_ERROR],
        ),
        // §6.4: RST_STREAM on stream 0, on an idle stream, of 3 bytes.
        (
            "RST_STREAM on stream 0",
            frame(RST_STREAM, 0, 0, &[0, 0, 0, 8]),
            &[PROTOCOL_ERROR],
        ),
        (
            "RST_STREAM on an idle stream",
            frame(RST_STREAM, 0, 1, &[0, 0, 0, 8]),
            &[PROTOCOL_ERROR],
        ),
        (
            "RST_STREAM length 3",
            frame(RST_STREAM, 0, 1, &[0, 0, 8]),
            &[FRAME_SIZE_ERROR, PROTOCOL_ERROR],
        ),
        // §6.1: DATA on stream 0, on an idle stream.
        (
            "DATA on stream 0",
            frame(DATA, 0, 0, b"x"),
            &[PROTOCOL_ERROR],
        ),
        (
            "DATA on an idle stream",
            frame(DATA, 0, 1, b"x"),
            &[PROTOCOL_ERROR, STREAM_CLOSED],
        ),
        // §6.2: HEADERS on stream 0.
        (
            "HEADERS on stream 0",
            frame(HEADERS, END_HEADERS, 0, &request_block("GET", "/", &[])),
            &[PROTOCOL_ERROR],
        ),
        // §5.1.1: a client stream with an even number.
        ("even stream id", get(2, "/"), &[PROTOCOL_ERROR]),
        // §6.10: CONTINUATION without HEADERS.
        (
            "CONTINUATION alone",
            frame(
                CONTINUATION,
                END_HEADERS,
                1,
                &request_block("GET", "/", &[]),
            ),
            &[PROTOCOL_ERROR],
        ),
        // §6.10: another frame in the middle of a header block.
        (
            "PING inside a header block",
            [
                frame(HEADERS, 0, 1, &request_block("GET", "/", &[])),
                frame(PING, 0, 0, &[0; 8]),
            ]
            .concat(),
            &[PROTOCOL_ERROR],
        ),
        // §6.3: PRIORITY of 4 bytes: a stream error (vendor/h2/PATCHES.md §9).
        (
            "PRIORITY length 4",
            frame(PRIORITY, 0, 1, &[0, 0, 0, 0]),
            &[FRAME_SIZE_ERROR],
        ),
    ];
    for (case, bytes, codes) in cases {
        let mut raw = ready(shellac.addr).await;
        raw.send(bytes).await;
        expect_error(&mut raw, codes, case).await;
    }
    // §6.8: after the client's GOAWAY the server opens nothing and ends the connection once
    // its streams are done.
    let mut raw = ready(shellac.addr).await;
    raw.send(&get(1, "/before-goaway")).await;
    raw.send(&frame(GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]))
        .await;
    let (_, body) = expect_answer(&mut raw, 1, "stream before GOAWAY").await;
    assert_eq!(body, b"GET /before-goaway 0");
    // Connections of earlier cases are still open (shadowed, not dropped): no grace period.
    shellac.stop_with(Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_states() {
    let (_origin, shellac) = start().await;
    // §5.1: HEADERS on a half-closed (remote) stream: a stream error STREAM_CLOSED (h2 is
    // patched for it: vendor/h2/PATCHES.md; were the stream closed already by its response,
    // a connection error STREAM_CLOSED, also accepted).
    let mut raw = ready(shellac.addr).await;
    raw.send(&[get(1, "/slow-a"), get(1, "/again")].concat())
        .await;
    expect_error(&mut raw, &[STREAM_CLOSED], "HEADERS on half-closed").await;
    // §5.1: DATA on a half-closed (remote) stream.
    let mut raw = ready(shellac.addr).await;
    raw.send(&[get(1, "/b"), frame(DATA, 0, 1, b"x")].concat())
        .await;
    expect_error(&mut raw, &[STREAM_CLOSED], "DATA on half-closed").await;
    // §5.1: DATA on a closed stream (its response done).
    let mut raw = ready(shellac.addr).await;
    raw.send(&get(1, "/c")).await;
    expect_answer(&mut raw, 1, "stream 1").await;
    raw.send(&frame(DATA, 0, 1, b"x")).await;
    expect_error(&mut raw, &[STREAM_CLOSED], "DATA on closed").await;
    // §5.1.1: a stream id lower than one already used.
    let mut raw = ready(shellac.addr).await;
    raw.send(&[get(5, "/d"), get(3, "/e")].concat()).await;
    expect_error(
        &mut raw,
        &[PROTOCOL_ERROR, STREAM_CLOSED],
        "decreasing stream id",
    )
    .await;
    // §5.3.1: a stream that depends on itself.
    let mut raw = ready(shellac.addr).await;
    raw.send(&frame(PRIORITY, 0, 1, &[0, 0, 0, 1, 16])).await;
    expect_error(&mut raw, &[PROTOCOL_ERROR], "PRIORITY on itself").await;
    // §6.3: PRIORITY on an idle stream is allowed; the connection goes on.
    let mut raw = ready(shellac.addr).await;
    raw.send(&frame(PRIORITY, 0, 3, &[0, 0, 0, 0, 16])).await;
    raw.send(&get(1, "/after-priority")).await;
    expect_answer(&mut raw, 1, "after PRIORITY").await;
    // §6.9.1: a stream's window over 2^31-1: stream error FLOW_CONTROL_ERROR.
    let mut raw = ready(shellac.addr).await;
    raw.send(
        &[
            frame(HEADERS, END_HEADERS, 1, &request_block("POST", "/w", &[])),
            frame(WINDOW_UPDATE, 0, 1, &0x7fff_ffffu32.to_be_bytes()),
        ]
        .concat(),
    )
    .await;
    expect_error(&mut raw, &[FLOW_CONTROL_ERROR], "stream window overflow").await;
    // §6.4: RST_STREAM from the client ends the stream; the connection goes on.
    let mut raw = ready(shellac.addr).await;
    raw.send(
        &[
            frame(HEADERS, END_HEADERS, 1, &request_block("POST", "/r", &[])),
            frame(RST_STREAM, 0, 1, &[0, 0, 0, 8]),
            get(3, "/after-reset"),
        ]
        .concat(),
    )
    .await;
    let (_, body) = expect_answer(&mut raw, 3, "after RST_STREAM").await;
    assert_eq!(body, b"GET /after-reset 0");
    // Connections of earlier cases are still open (shadowed, not dropped): no grace period.
    shellac.stop_with(Duration::ZERO).await;
}

/// §5.1 on streams h2 no longer holds: it keeps how the latest 128 streams the client opened
/// ended (vendor/h2/PATCHES.md §10). After 130 requests answered (streams 1 to 259), stream 5
/// is the oldest one remembered: HEADERS on it is a connection error STREAM_CLOSED (its
/// END_STREAM came). Streams 3 and 1 are forgotten: DATA on one a stream error
/// STREAM_CLOSED, HEADERS a connection error PROTOCOL_ERROR, as h2 answers any closed stream it
/// does not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_on_streams_closed_long_ago() {
    let (_origin, shellac) = start().await;
    async fn after_130_requests(addr: std::net::SocketAddr) -> Raw {
        let mut raw = ready(addr).await;
        for i in 0..130 {
            let id = 2 * i + 1;
            raw.send(&get(id, "/many")).await;
            expect_answer(&mut raw, id, "one of 130").await;
        }
        raw
    }
    let mut raw = after_130_requests(shellac.addr).await;
    raw.send(&get(5, "/again")).await;
    expect_goaway_code(
        &mut raw,
        STREAM_CLOSED,
        "HEADERS on the oldest stream remembered",
    )
    .await;
    let mut raw = after_130_requests(shellac.addr).await;
    raw.send(&frame(DATA, END_STREAM, 3, b"x")).await;
    expect_reset(&mut raw, 3, STREAM_CLOSED, "DATA on a forgotten stream").await;
    raw.send(&get(1, "/again")).await;
    expect_goaway_code(&mut raw, PROTOCOL_ERROR, "HEADERS on a forgotten stream").await;
    shellac.stop_with(Duration::ZERO).await;
}

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
