//! h2spec "http2" §3–§5 (RFC 7540 numbering; RFC 9113 keeps it): the preface, the frame
//! format and sizes, header blocks, stream states and identifiers, concurrency, priority
//! dependencies, connection errors and extensions.

use super::*;

cases! {
    "http2/3.5/1" => http2_3_5_1,
    "http2/3.5/2" => http2_3_5_2,
    "http2/4.1/1" => http2_4_1_1,
    "http2/4.1/2" => http2_4_1_2,
    "http2/4.1/3" => http2_4_1_3,
    "http2/4.2/1" => http2_4_2_1,
    "http2/4.2/2" => http2_4_2_2,
    "http2/4.2/3" => http2_4_2_3,
    "http2/4.3/1" => http2_4_3_1,
    "http2/4.3/2" => http2_4_3_2,
    "http2/4.3/3" => http2_4_3_3,
    "http2/5.1/1" => http2_5_1_1,
    "http2/5.1/2" => http2_5_1_2,
    "http2/5.1/3" => http2_5_1_3,
    "http2/5.1/4" => http2_5_1_4,
    "http2/5.1/5" => http2_5_1_5,
    "http2/5.1/6" => http2_5_1_6,
    "http2/5.1/7" => http2_5_1_7,
    "http2/5.1/8" => http2_5_1_8,
    "http2/5.1/9" => http2_5_1_9,
    "http2/5.1/10" => http2_5_1_10,
    "http2/5.1/11" => http2_5_1_11,
    "http2/5.1/12" => http2_5_1_12,
    "http2/5.1/13" => http2_5_1_13,
    "http2/5.1.1/1" => http2_5_1_1_1,
    "http2/5.1.1/2" => http2_5_1_1_2,
    "http2/5.1.1/3" => http2_5_1_1_3,
    "http2/5.1.2/1" => http2_5_1_2_1,
    "http2/5.3.1/1" => http2_5_3_1_1,
    "http2/5.3.1/2" => http2_5_3_1_2,
    "http2/5.4.1/1" => http2_5_4_1_1,
    "http2/5.4.1/2" => http2_5_4_1_2,
    "http2/5.5/1" => http2_5_5_1,
    "http2/5.5/2" => http2_5_5_2,
}

/// A frame of type 0x16, unknown to RFC 9113 (h2spec's "unknown type"), on stream 0.
pub fn unknown_frame() -> Vec<u8> {
    frame(0x16, 0, 0, &[0; 8])
}

/// The preface and a SETTINGS: the server's SETTINGS comes.
async fn http2_3_5_1(t: Target) -> Outcome {
    let mut raw = t.connect().await;
    raw.send(&[PREFACE, &settings(&[(INITIAL_WINDOW_SIZE, 65_535)])].concat())
        .await;
    loop {
        let f = frame_of(&mut raw, SETTINGS).await?;
        if f.flags & ACK == 0 {
            return Ok(());
        }
    }
}

/// An invalid preface: the connection is closed (on an h2c listener it is not HTTP/2 at all:
/// Shellac answers it as HTTP/1.1, `400`, and closes).
async fn http2_3_5_2(t: Target) -> Outcome {
    let mut raw = t.connect().await;
    raw.send(b"INVALID CONNECTION PREFACE\r\n\r\n").await;
    closed(&mut raw).await
}

/// A frame of unknown type is ignored.
async fn http2_4_1_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[unknown_frame(), ping(&[0; 8])].concat()).await;
    frame_of(&mut raw, PING).await.map(drop)
}

/// Undefined flags (0x16 on PING) are ignored.
async fn http2_4_1_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&frame(PING, 0x16, 0, &[0; 8])).await;
    frame_of(&mut raw, PING).await.map(drop)
}

/// The reserved bit of the stream identifier is ignored.
async fn http2_4_1_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let mut f = frame(PING, 0x16, 0, &[0; 8]);
    f[5] = 0x80;
    raw.send(&f).await;
    frame_of(&mut raw, PING).await.map(drop)
}

/// A DATA frame of 2^14 bytes is received.
async fn http2_4_2_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[post(1), data(1, true, &[b'x'; 16_384])].concat())
        .await;
    frame_of(&mut raw, HEADERS).await.map(drop)
}

/// A DATA frame over SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR (Shellac: a connection error,
/// which RFC 9113 §4.2 allows, "MAY").
async fn http2_4_2_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[post(1), data(1, true, &[b'x'; 16_385])].concat())
        .await;
    stream_error(&mut raw, &[FRAME_SIZE_ERROR]).await.map(drop)
}

/// A HEADERS frame over SETTINGS_MAX_FRAME_SIZE (five 4,000-byte fields): a connection error
/// FRAME_SIZE_ERROR (it carries a field block).
async fn http2_4_2_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let b = [block("GET"), dummy(5)].concat();
    raw.send(&headers(1, END_STREAM | END_HEADERS, &b)).await;
    connection_error(&mut raw, &[FRAME_SIZE_ERROR]).await
}

/// A field block that cannot be decoded (a literal with incremental indexing, cut after its
/// first byte): COMPRESSION_ERROR.
async fn http2_4_3_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&headers(1, END_STREAM | END_HEADERS, &[0x40]))
        .await;
    connection_error(&mut raw, &[COMPRESSION_ERROR]).await
}

/// A PRIORITY frame in the middle of a header block.
async fn http2_4_3_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(
        &[
            headers(1, 0, &block("GET")),
            priority(1, 0, false, 255),
            continuation(1, true, &dummy(1)),
        ]
        .concat(),
    )
    .await;
    connection_error(&mut raw, &[PROTOCOL_ERROR]).await
}

/// A HEADERS frame for another stream in the middle of a header block.
async fn http2_4_3_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(
        &[
            headers(1, 0, &block("GET")),
            get(3),
            continuation(1, true, &dummy(1)),
        ]
        .concat(),
    )
    .await;
    connection_error(&mut raw, &[PROTOCOL_ERROR]).await
}

/// `bytes` on a fresh connection: a connection error with one of `codes`.
async fn conn_err(t: Target, bytes: Vec<u8>, codes: &[u32]) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&bytes).await;
    connection_error(&mut raw, codes).await
}

/// `bytes` on a fresh connection: a stream error with one of `codes` (as h2spec takes it).
async fn stream_err(t: Target, bytes: Vec<u8>, codes: &[u32]) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&bytes).await;
    stream_error(&mut raw, codes).await.map(drop)
}

async fn http2_5_1_1(t: Target) -> Outcome {
    conn_err(t, data(1, true, b"test"), &[PROTOCOL_ERROR]).await
}

async fn http2_5_1_2(t: Target) -> Outcome {
    conn_err(t, rst(1, CANCEL), &[PROTOCOL_ERROR]).await
}

async fn http2_5_1_3(t: Target) -> Outcome {
    conn_err(t, window_update(1, 100), &[PROTOCOL_ERROR]).await
}

async fn http2_5_1_4(t: Target) -> Outcome {
    conn_err(t, continuation(1, true, &block("GET")), &[PROTOCOL_ERROR]).await
}

/// DATA on a half-closed (remote) stream: STREAM_CLOSED (vendor/h2/PATCHES.md §4).
async fn http2_5_1_5(t: Target) -> Outcome {
    stream_err(
        t,
        [get(1), data(1, true, b"test")].concat(),
        &[STREAM_CLOSED],
    )
    .await
}

async fn http2_5_1_6(t: Target) -> Outcome {
    stream_err(t, [get(1), get(1)].concat(), &[STREAM_CLOSED]).await
}

/// CONTINUATION on a half-closed (remote) stream (no block in progress).
async fn http2_5_1_7(t: Target) -> Outcome {
    let bytes = [get(1), continuation(1, true, &block("GET"))].concat();
    stream_err(t, bytes, &[STREAM_CLOSED, PROTOCOL_ERROR]).await
}

/// Stream 1 opened and reset by the client, then `after` on it.
fn after_reset(after: Vec<u8>) -> Vec<u8> {
    [
        headers(1, END_HEADERS, &block("GET")),
        rst(1, CANCEL),
        after,
    ]
    .concat()
}

/// DATA after the client's RST_STREAM: a stream error STREAM_CLOSED (the stream, closed,
/// is no longer in h2's table: vendor/h2/PATCHES.md §10 remembers how it ended).
async fn http2_5_1_8(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&after_reset(data(1, true, b"test"))).await;
    reset(&mut raw, 1, STREAM_CLOSED).await
}

/// HEADERS after the client's RST_STREAM: a stream error STREAM_CLOSED (it was a connection
/// error PROTOCOL_ERROR before Shellac's fix).
async fn http2_5_1_9(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&after_reset(get(1))).await;
    reset(&mut raw, 1, STREAM_CLOSED).await
}

async fn http2_5_1_10(t: Target) -> Outcome {
    let after = after_reset(continuation(1, true, &dummy(1)));
    stream_err(t, after, &[STREAM_CLOSED, PROTOCOL_ERROR]).await
}

/// Stream 1 requested and answered (closed both ways), then `after` on it: a connection
/// error with one of `codes`.
async fn after_close(t: Target, after: Vec<u8>, codes: &[u32]) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&get(1)).await;
    stream_end(&mut raw, 1).await?;
    raw.send(&after).await;
    connection_error(&mut raw, codes).await
}

/// DATA on a stream closed both ways: a connection error STREAM_CLOSED (before Shellac's
/// fix, a stream error once h2 had forgotten the stream: h2spec failed the case).
async fn http2_5_1_11(t: Target) -> Outcome {
    after_close(t, data(1, true, b"test"), &[STREAM_CLOSED]).await
}

/// HEADERS on a stream closed both ways: a connection error STREAM_CLOSED (it was
/// PROTOCOL_ERROR before Shellac's fix).
async fn http2_5_1_12(t: Target) -> Outcome {
    after_close(t, get(1), &[STREAM_CLOSED]).await
}

async fn http2_5_1_13(t: Target) -> Outcome {
    let after = continuation(1, true, &dummy(1));
    after_close(t, after, &[STREAM_CLOSED, PROTOCOL_ERROR]).await
}

async fn http2_5_1_1_1(t: Target) -> Outcome {
    conn_err(t, get(2), &[PROTOCOL_ERROR]).await
}

async fn http2_5_1_1_2(t: Target) -> Outcome {
    conn_err(t, [get(5), get(3)].concat(), &[PROTOCOL_ERROR]).await
}

/// (In h2spec's master after 2.6.0.) HEADERS twice on stream 5: a stream error
/// STREAM_CLOSED.
async fn http2_5_1_1_3(t: Target) -> Outcome {
    stream_err(t, [get(5), get(5)].concat(), &[STREAM_CLOSED]).await
}

/// One stream more than SETTINGS_MAX_CONCURRENT_STREAMS (the responses held by a window of
/// 0): a stream error PROTOCOL_ERROR or REFUSED_STREAM (Shellac: RST_STREAM REFUSED_STREAM on
/// the stream over the limit).
async fn http2_5_1_2_1(t: Target) -> Outcome {
    let (mut raw, params) = t.handshake_settings().await;
    let Some((_, max)) = params.iter().find(|(id, _)| *id == MAX_CONCURRENT_STREAMS) else {
        return Err("no SETTINGS_MAX_CONCURRENT_STREAMS (h2spec skips the case)".into());
    };
    let mut bytes = settings(&[(INITIAL_WINDOW_SIZE, 0)]);
    for i in 0..=*max {
        bytes.extend(get(1 + 2 * i));
    }
    raw.send(&bytes).await;
    match stream_error(&mut raw, &[PROTOCOL_ERROR, REFUSED_STREAM]).await? {
        Answered::Reset(s) if s == 1 + 2 * max => Ok(()),
        other => Err(format!(
            "{other:?}, expected RST_STREAM on the stream over the limit"
        )),
    }
}

/// HEADERS whose priority fields make the stream depend on itself: a stream error.
async fn http2_5_3_1_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let payload = [priority_fields(1, false, 255), block("GET")].concat();
    raw.send(&headers(
        1,
        END_STREAM | END_HEADERS | PRIORITY_FLAG,
        &payload,
    ))
    .await;
    reset(&mut raw, 1, PROTOCOL_ERROR).await
}

/// PRIORITY making (idle) stream 1 depend on itself: a stream error.
async fn http2_5_3_1_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&priority(1, 1, false, 255)).await;
    reset(&mut raw, 1, PROTOCOL_ERROR).await
}

/// A connection error (PING on stream 3): the connection is closed.
async fn http2_5_4_1_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&frame(PING, 0, 3, &[0; 8])).await;
    closed(&mut raw).await
}

/// (Strict in h2spec.) The same: a GOAWAY comes first.
async fn http2_5_4_1_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&frame(PING, 0, 3, &[0; 8])).await;
    let f = frame_of(&mut raw, GOAWAY).await?;
    if f.code() != Some(PROTOCOL_ERROR) {
        return Err(format!("{}, expected PROTOCOL_ERROR", super::show(&f)));
    }
    closed(&mut raw).await
}

async fn http2_5_5_1(t: Target) -> Outcome {
    http2_4_1_1(t).await
}

/// An unknown frame in the middle of a header block: PROTOCOL_ERROR.
async fn http2_5_5_2(t: Target) -> Outcome {
    let bytes = [headers(1, END_STREAM, &block("GET")), unknown_frame()].concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}
