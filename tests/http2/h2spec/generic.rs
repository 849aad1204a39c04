//! h2spec "generic": what every HTTP/2 server must accept — each frame type used as intended,
//! requests of each method, and every HPACK representation — answered, not refused.

use super::*;

cases! {
    "generic/1/1" => generic_1_1,
    "generic/2/1" => generic_2_1,
    "generic/2/2" => generic_2_2,
    "generic/2/3" => generic_2_3,
    "generic/2/4" => generic_2_4,
    "generic/2/5" => generic_2_5,
    "generic/3.1/1" => generic_3_1_1,
    "generic/3.1/2" => generic_3_1_2,
    "generic/3.1/3" => generic_3_1_3,
    "generic/3.2/1" => generic_3_2_1,
    "generic/3.2/2" => generic_3_2_2,
    "generic/3.2/3" => generic_3_2_3,
    "generic/3.3/1" => generic_3_3_1,
    "generic/3.3/2" => generic_3_3_2,
    "generic/3.3/3" => generic_3_3_3,
    "generic/3.3/4" => generic_3_3_4,
    "generic/3.3/5" => generic_3_3_5,
    "generic/3.4/1" => generic_3_4_1,
    "generic/3.5/1" => generic_3_5_1,
    "generic/3.7/1" => generic_3_7_1,
    "generic/3.8/1" => generic_3_8_1,
    "generic/3.9/1" => generic_3_9_1,
    "generic/3.9/2" => generic_3_9_2,
    "generic/3.10/1" => generic_3_10_1,
    "generic/3.10/2" => generic_3_10_2,
    "generic/4/1" => generic_4_1,
    "generic/4/2" => generic_4_2,
    "generic/4/3" => generic_4_3,
    "generic/4/4" => generic_4_4,
    "generic/5/1" => generic_5_1,
    "generic/5/2" => generic_5_2,
    "generic/5/3" => generic_5_3,
    "generic/5/4" => generic_5_4,
    "generic/5/5" => generic_5_5,
    "generic/5/6" => generic_5_6,
    "generic/5/7" => generic_5_7,
    "generic/5/8" => generic_5_8,
    "generic/5/9" => generic_5_9,
    "generic/5/10" => generic_5_10,
    "generic/5/11" => generic_5_11,
    "generic/5/12" => generic_5_12,
    "generic/5/13" => generic_5_13,
    "generic/5/14" => generic_5_14,
    "generic/5/15" => generic_5_15,
}

/// The server's first frame is a SETTINGS frame (not an acknowledgement).
async fn generic_1_1(t: Target) -> Outcome {
    let mut raw = t.connect().await;
    raw.send(&[PREFACE, &settings(&[(INITIAL_WINDOW_SIZE, 65_535)])].concat())
        .await;
    match raw.event(WAIT).await {
        Event::Frame(f) if f.kind == SETTINGS && f.flags & ACK == 0 => Ok(()),
        other => Err(format!("{other:?}, expected SETTINGS")),
    }
}

/// PRIORITY on an idle stream is accepted.
async fn generic_2_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[priority(1, 0, false, 255), ping(&[0; 8])].concat())
        .await;
    ping_ack(&mut raw, &[0; 8]).await
}

/// WINDOW_UPDATE on a half-closed (remote) stream opens its window.
async fn generic_2_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(
        &[
            settings(&[(INITIAL_WINDOW_SIZE, 0)]),
            get(1),
            window_update(1, 1),
        ]
        .concat(),
    )
    .await;
    frame_of(&mut raw, DATA).await.map(drop)
}

/// PRIORITY on a half-closed (remote) stream is accepted.
async fn generic_2_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(
        &[
            settings(&[(INITIAL_WINDOW_SIZE, 0)]),
            get(1),
            priority(1, 0, false, 255),
            window_update(1, 1),
        ]
        .concat(),
    )
    .await;
    frame_of(&mut raw, DATA).await.map(drop)
}

/// RST_STREAM on a half-closed (remote) stream is accepted (h2spec also takes a close;
/// Shellac goes on).
async fn generic_2_4(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[get(1), rst(1, CANCEL), ping(&[0; 8])].concat())
        .await;
    ping_ack(&mut raw, &[0; 8]).await
}

/// PRIORITY on a closed stream is accepted.
async fn generic_2_5(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&get(1)).await;
    stream_end(&mut raw, 1).await?;
    raw.send(&[priority(1, 0, false, 255), ping(&[0; 8])].concat())
        .await;
    ping_ack(&mut raw, &[0; 8]).await
}

async fn generic_3_1_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[post(1), data(1, true, b"test")].concat()).await;
    headers_on(&mut raw, 1).await
}

async fn generic_3_1_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[post(1), data(1, false, b"test"), data(1, true, b"test")].concat())
        .await;
    headers_on(&mut raw, 1).await
}

/// DATA with padding ("test" and 6 bytes of padding).
async fn generic_3_1_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let payload = [&[6u8][..], b"test", &[0; 6]].concat();
    raw.send(&[post(1), frame(DATA, END_STREAM | PADDED, 1, &payload)].concat())
        .await;
    headers_on(&mut raw, 1).await
}

async fn generic_3_2_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&get(1)).await;
    headers_on(&mut raw, 1).await
}

/// HEADERS with 8 bytes of padding.
async fn generic_3_2_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let payload = [&[8u8][..], &block("GET"), &[0; 8]].concat();
    raw.send(&headers(1, END_STREAM | END_HEADERS | PADDED, &payload))
        .await;
    headers_on(&mut raw, 1).await
}

/// HEADERS with priority fields (deprecated by RFC 9113 §5.3.2, still parsed).
async fn generic_3_2_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let payload = [priority_fields(0, false, 255), block("GET")].concat();
    raw.send(&headers(
        1,
        END_STREAM | END_HEADERS | PRIORITY_FLAG,
        &payload,
    ))
    .await;
    headers_on(&mut raw, 1).await
}

/// A PRIORITY frame, then a request on the same stream.
async fn priority_then_get(t: Target, prio: Vec<u8>) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[prio, get(1)].concat()).await;
    headers_on(&mut raw, 1).await
}

async fn generic_3_3_1(t: Target) -> Outcome {
    priority_then_get(t, priority(1, 0, false, 0)).await
}

async fn generic_3_3_2(t: Target) -> Outcome {
    priority_then_get(t, priority(1, 0, false, 255)).await
}

/// PRIORITY for idle stream 3 depending on stream 1, then a request on stream 1.
async fn generic_3_3_3(t: Target) -> Outcome {
    priority_then_get(t, priority(3, 1, false, 0)).await
}

async fn generic_3_3_4(t: Target) -> Outcome {
    priority_then_get(t, priority(1, 0, true, 0)).await
}

/// PRIORITY for idle stream 3, then a request on lower stream 1 (PRIORITY opens nothing).
async fn generic_3_3_5(t: Target) -> Outcome {
    priority_then_get(t, priority(3, 0, false, 255)).await
}

/// RST_STREAM of an open stream.
async fn generic_3_4_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(
        &[
            headers(1, END_HEADERS, &block("GET")),
            rst(1, CANCEL),
            ping(&[0; 8]),
        ]
        .concat(),
    )
    .await;
    ping_ack(&mut raw, &[0; 8]).await
}

/// SETTINGS with every defined parameter is acknowledged.
async fn generic_3_5_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&settings(&[
        (HEADER_TABLE_SIZE, 4096),
        (ENABLE_PUSH, 1),
        (MAX_CONCURRENT_STREAMS, 100),
        (INITIAL_WINDOW_SIZE, 65_535),
        (MAX_FRAME_SIZE, 16_384),
        (MAX_HEADER_LIST_SIZE, 100),
    ]))
    .await;
    let f = frame_of(&mut raw, SETTINGS).await?;
    if f.flags & ACK == 0 {
        return Err("SETTINGS without ACK".into());
    }
    Ok(())
}

async fn generic_3_7_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&ping(H2SPEC)).await;
    ping_ack(&mut raw, H2SPEC).await
}

/// The client's GOAWAY with no stream open: the server closes the connection.
async fn generic_3_8_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&goaway(0, NO_ERROR, b"h2spec")).await;
    closed(&mut raw).await
}

async fn generic_3_9_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[window_update(0, 1), ping(&[0; 8])].concat())
        .await;
    frame_of(&mut raw, PING).await.map(drop)
}

async fn generic_3_9_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[get(1), window_update(1, 1)].concat()).await;
    frame_of(&mut raw, HEADERS).await.map(drop)
}

/// The request's header block cut after `cuts` bytes, in CONTINUATION frames.
async fn split_block(t: Target, cuts: &[usize]) -> Outcome {
    let mut raw = t.handshake().await;
    let b = block("GET");
    let mut bytes = headers(1, END_STREAM, &b[..cuts[0]]);
    for (i, at) in cuts.iter().enumerate() {
        let end = cuts.get(i + 1).copied().unwrap_or(b.len());
        bytes.extend(continuation(1, end == b.len(), &b[*at..end]));
    }
    raw.send(&bytes).await;
    headers_on(&mut raw, 1).await
}

async fn generic_3_10_1(t: Target) -> Outcome {
    split_block(t, &[5]).await
}

async fn generic_3_10_2(t: Target) -> Outcome {
    split_block(t, &[5, 10]).await
}

async fn generic_4_1(t: Target) -> Outcome {
    generic_3_2_1(t).await
}

async fn generic_4_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&headers(1, END_STREAM | END_HEADERS, &block("HEAD")))
        .await;
    headers_on(&mut raw, 1).await
}

async fn generic_4_3(t: Target) -> Outcome {
    generic_3_1_1(t).await
}

/// A POST with a body and trailers.
async fn generic_4_4(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let head = [block("POST"), fields(&[("trailer", "x-test")])].concat();
    raw.send(
        &[
            headers(1, END_HEADERS, &head),
            data(1, false, b"test"),
            headers(1, END_STREAM | END_HEADERS, &fields(&[("x-test", "ok")])),
        ]
        .concat(),
    )
    .await;
    headers_on(&mut raw, 1).await
}

/// A GET whose block ends with `rep`, one HPACK representation (RFC 7541 §6).
async fn with_field(t: Target, rep: &[u8]) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&headers(
        1,
        END_STREAM | END_HEADERS,
        &[&block("GET")[..], rep].concat(),
    ))
    .await;
    headers_on(&mut raw, 1).await
}

/// Huffman codes (RFC 7541 Appendix B) of "h2spec" and "x-test", with their length byte.
const H_H2SPEC: &[u8] = &[0x84, 0x9c, 0x48, 0xac, 0xa4];
const H_X_TEST: &[u8] = &[0x85, 0xf2, 0xb2, 0x4a, 0x84, 0xff];

/// Indexed field: static entry 58, `user-agent` with an empty value.
async fn generic_5_1(t: Target) -> Outcome {
    with_field(t, &[0x80 | 58]).await
}

/// With incremental indexing, the name by index (58, `user-agent`), a literal value.
async fn generic_5_2(t: Target) -> Outcome {
    with_field(t, &[&[0x40 | 58, 6][..], b"h2spec"].concat()).await
}

async fn generic_5_3(t: Target) -> Outcome {
    with_field(t, &[&[0x40 | 58][..], H_H2SPEC].concat()).await
}

/// With incremental indexing, a new name.
async fn generic_5_4(t: Target) -> Outcome {
    with_field(t, &[&[0x40, 6][..], b"x-test", &[6], b"h2spec"].concat()).await
}

async fn generic_5_5(t: Target) -> Outcome {
    with_field(t, &[&[0x40][..], H_X_TEST, H_H2SPEC].concat()).await
}

/// Without indexing, the name by index (58 on a 4-bit prefix: 15 + 43).
async fn generic_5_6(t: Target) -> Outcome {
    with_field(t, &[&[0x0f, 43, 6][..], b"h2spec"].concat()).await
}

async fn generic_5_7(t: Target) -> Outcome {
    with_field(t, &[&[0x0f, 43][..], H_H2SPEC].concat()).await
}

async fn generic_5_8(t: Target) -> Outcome {
    with_field(t, &[&[0x00, 6][..], b"x-test", &[6], b"h2spec"].concat()).await
}

async fn generic_5_9(t: Target) -> Outcome {
    with_field(t, &[&[0x00][..], H_X_TEST, H_H2SPEC].concat()).await
}

/// Never indexed, the name by index.
async fn generic_5_10(t: Target) -> Outcome {
    with_field(t, &[&[0x1f, 43, 6][..], b"h2spec"].concat()).await
}

async fn generic_5_11(t: Target) -> Outcome {
    with_field(t, &[&[0x1f, 43][..], H_H2SPEC].concat()).await
}

async fn generic_5_12(t: Target) -> Outcome {
    with_field(t, &[&[0x10, 6][..], b"x-test", &[6], b"h2spec"].concat()).await
}

async fn generic_5_13(t: Target) -> Outcome {
    with_field(t, &[&[0x10][..], H_X_TEST, H_H2SPEC].concat()).await
}

/// A GET whose block starts with `updates`, Dynamic Table Size Updates (RFC 7541 §6.3).
async fn with_size_updates(t: Target, updates: &[u8]) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&headers(
        1,
        END_STREAM | END_HEADERS,
        &[updates, &block("GET")].concat(),
    ))
    .await;
    headers_on(&mut raw, 1).await
}

async fn generic_5_14(t: Target) -> Outcome {
    with_size_updates(t, &[0x20]).await
}

/// Two updates: to 0, then to 4096 (31 + 4065 on a 5-bit prefix).
async fn generic_5_15(t: Target) -> Outcome {
    with_size_updates(t, &[0x20, 0x3f, 0xe1, 0x1f]).await
}
