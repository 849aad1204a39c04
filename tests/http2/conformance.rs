//! RFC 9113 and RFC 7541 MUSTs, frame by frame (in the manner of h2spec): each case writes raw
//! frames on a fresh connection and checks the error the server must answer with — a stream
//! error (`RST_STREAM` with the code), a connection error (`GOAWAY` with the code), or the
//! connection closed, which h2spec also accepts — or the answer it must give. h2spec's own
//! cases, one function each, are in `tests/http2/h2spec/`; these go beyond them.

use std::time::Duration;

use crate::common::h2::*;
use crate::common::*;

mod fields;

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
