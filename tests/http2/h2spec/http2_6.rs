//! h2spec "http2" §6: each frame type's own rules — DATA, HEADERS, PRIORITY, RST_STREAM,
//! SETTINGS (values, synchronisation), PING, GOAWAY, WINDOW_UPDATE and flow control,
//! CONTINUATION.

use super::*;

cases! {
    "http2/6.1/1" => http2_6_1_1,
    "http2/6.1/2" => http2_6_1_2,
    "http2/6.1/3" => http2_6_1_3,
    "http2/6.2/1" => http2_6_2_1,
    "http2/6.2/2" => http2_6_2_2,
    "http2/6.2/3" => http2_6_2_3,
    "http2/6.2/4" => http2_6_2_4,
    "http2/6.3/1" => http2_6_3_1,
    "http2/6.3/2" => http2_6_3_2,
    "http2/6.3/3" => http2_6_3_3,
    "http2/6.4/1" => http2_6_4_1,
    "http2/6.4/2" => http2_6_4_2,
    "http2/6.4/3" => http2_6_4_3,
    "http2/6.5/1" => http2_6_5_1,
    "http2/6.5/2" => http2_6_5_2,
    "http2/6.5/3" => http2_6_5_3,
    "http2/6.5.2/1" => http2_6_5_2_1,
    "http2/6.5.2/2" => http2_6_5_2_2,
    "http2/6.5.2/3" => http2_6_5_2_3,
    "http2/6.5.2/4" => http2_6_5_2_4,
    "http2/6.5.2/5" => http2_6_5_2_5,
    "http2/6.5.3/1" => http2_6_5_3_1,
    "http2/6.5.3/2" => http2_6_5_3_2,
    "http2/6.7/1" => http2_6_7_1,
    "http2/6.7/2" => http2_6_7_2,
    "http2/6.7/3" => http2_6_7_3,
    "http2/6.7/4" => http2_6_7_4,
    "http2/6.8/1" => http2_6_8_1,
    "http2/6.9/1" => http2_6_9_1,
    "http2/6.9/2" => http2_6_9_2,
    "http2/6.9/3" => http2_6_9_3,
    "http2/6.9.1/1" => http2_6_9_1_1,
    "http2/6.9.1/2" => http2_6_9_1_2,
    "http2/6.9.1/3" => http2_6_9_1_3,
    "http2/6.9.2/1" => http2_6_9_2_1,
    "http2/6.9.2/2" => http2_6_9_2_2,
    "http2/6.9.2/3" => http2_6_9_2_3,
    "http2/6.10/1" => http2_6_10_1,
    "http2/6.10/2" => http2_6_10_2,
    "http2/6.10/3" => http2_6_10_3,
    "http2/6.10/4" => http2_6_10_4,
    "http2/6.10/5" => http2_6_10_5,
    "http2/6.10/6" => http2_6_10_6,
}

async fn conn_err(t: Target, bytes: Vec<u8>, codes: &[u32]) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&bytes).await;
    connection_error(&mut raw, codes).await
}

async fn http2_6_1_1(t: Target) -> Outcome {
    conn_err(t, data(0, true, b"test"), &[PROTOCOL_ERROR]).await
}

/// DATA after the request's END_STREAM: STREAM_CLOSED (Shellac: a stream error).
async fn http2_6_1_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let b = block("POST");
    raw.send(
        &[
            headers(1, END_STREAM | END_HEADERS, &b),
            data(1, true, b"test"),
        ]
        .concat(),
    )
    .await;
    stream_error(&mut raw, &[STREAM_CLOSED]).await.map(drop)
}

/// DATA whose pad length (6) is not less than its payload (5 bytes).
async fn http2_6_1_3(t: Target) -> Outcome {
    let b = [block("POST"), fields(&[("content-length", "4")])].concat();
    let bad = frame(DATA, END_STREAM | PADDED, 1, b"\x06Test");
    conn_err(
        t,
        [headers(1, END_HEADERS, &b), bad].concat(),
        &[PROTOCOL_ERROR],
    )
    .await
}

/// HEADERS without END_HEADERS, then a PRIORITY frame.
async fn http2_6_2_1(t: Target) -> Outcome {
    let bytes = [
        headers(1, 0, &block("GET")),
        priority(1, 0, false, 255),
        continuation(1, true, &dummy(1)),
    ]
    .concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}

/// HEADERS without END_HEADERS, then HEADERS on another stream.
async fn http2_6_2_2(t: Target) -> Outcome {
    let bytes = [
        headers(1, 0, &block("GET")),
        get(3),
        continuation(1, true, &dummy(1)),
    ]
    .concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}

async fn http2_6_2_3(t: Target) -> Outcome {
    conn_err(t, get(0), &[PROTOCOL_ERROR]).await
}

/// HEADERS whose pad length is over what the frame holds: PROTOCOL_ERROR (h2spec takes a
/// stream or a connection error; RFC 9113 §6.2 says connection error, which Shellac sends).
async fn http2_6_2_4(t: Target) -> Outcome {
    let b = block("GET");
    let mut f = headers(
        1,
        END_STREAM | END_HEADERS | PADDED,
        &[&[0][..], &b].concat(),
    );
    f[9] = (b.len() + 2) as u8;
    conn_err(t, f, &[PROTOCOL_ERROR]).await
}

async fn http2_6_3_1(t: Target) -> Outcome {
    conn_err(t, priority(0, 0, false, 255), &[PROTOCOL_ERROR]).await
}

/// PRIORITY of 4 bytes on a stream: a stream error FRAME_SIZE_ERROR (RFC 9113 §6.3; it was
/// a connection error before Shellac's fix), the connection goes on.
async fn http2_6_3_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[get(1), frame(PRIORITY, 0, 1, &[0x80, 0, 0, 1])].concat())
        .await;
    reset(&mut raw, 1, FRAME_SIZE_ERROR).await
}

/// (Strict in h2spec before generic/3.3/5 took it over.) PRIORITY for idle stream 3, then
/// HEADERS on stream 1.
async fn http2_6_3_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[priority(3, 0, false, 255), get(1)].concat())
        .await;
    frame_of(&mut raw, HEADERS).await.map(drop)
}

async fn http2_6_4_1(t: Target) -> Outcome {
    conn_err(t, rst(0, CANCEL), &[PROTOCOL_ERROR]).await
}

async fn http2_6_4_2(t: Target) -> Outcome {
    conn_err(t, rst(1, CANCEL), &[PROTOCOL_ERROR]).await
}

/// RST_STREAM of 3 bytes: FRAME_SIZE_ERROR (h2spec takes a stream error; RFC 9113 §6.4 says
/// connection error, which Shellac sends).
async fn http2_6_4_3(t: Target) -> Outcome {
    let bytes = [get(1), frame(RST_STREAM, 0, 1, &[0, 0, 0])].concat();
    conn_err(t, bytes, &[FRAME_SIZE_ERROR]).await
}

async fn http2_6_5_1(t: Target) -> Outcome {
    conn_err(t, frame(SETTINGS, ACK, 0, &[0]), &[FRAME_SIZE_ERROR]).await
}

async fn http2_6_5_2(t: Target) -> Outcome {
    let f = frame(SETTINGS, 0, 1, &[0, 3, 0, 0, 0, 0x64]);
    conn_err(t, f, &[PROTOCOL_ERROR]).await
}

/// SETTINGS of 9 bytes: FRAME_SIZE_ERROR (h2spec also takes PROTOCOL_ERROR).
async fn http2_6_5_3(t: Target) -> Outcome {
    let f = frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 0x64, 0, 2, 0]);
    conn_err(t, f, &[FRAME_SIZE_ERROR]).await
}

async fn http2_6_5_2_1(t: Target) -> Outcome {
    conn_err(t, settings(&[(ENABLE_PUSH, 2)]), &[PROTOCOL_ERROR]).await
}

async fn http2_6_5_2_2(t: Target) -> Outcome {
    let f = settings(&[(INITIAL_WINDOW_SIZE, 1 << 31)]);
    conn_err(t, f, &[FLOW_CONTROL_ERROR]).await
}

async fn http2_6_5_2_3(t: Target) -> Outcome {
    conn_err(t, settings(&[(MAX_FRAME_SIZE, 16_383)]), &[PROTOCOL_ERROR]).await
}

async fn http2_6_5_2_4(t: Target) -> Outcome {
    let f = settings(&[(MAX_FRAME_SIZE, 1 << 24)]);
    conn_err(t, f, &[PROTOCOL_ERROR]).await
}

/// An unknown setting is ignored.
async fn http2_6_5_2_5(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[settings(&[(0xff, 1)]), ping(&[0; 8])].concat())
        .await;
    frame_of(&mut raw, PING).await.map(drop)
}

/// SETTINGS values apply in order: INITIAL_WINDOW_SIZE 100 then 1 leaves 1.
async fn http2_6_5_3_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&settings(&[
        (INITIAL_WINDOW_SIZE, 100),
        (INITIAL_WINDOW_SIZE, 1),
    ]))
    .await;
    frame_of(&mut raw, SETTINGS).await?;
    raw.send(&get(1)).await;
    data_of_len(&mut raw, 1).await
}

async fn http2_6_5_3_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&settings(&[(ENABLE_PUSH, 0)])).await;
    let f = frame_of(&mut raw, SETTINGS).await?;
    if f.flags & ACK == 0 || !f.payload.is_empty() {
        return Err(format!(
            "SETTINGS flags {:#x}, {} bytes",
            f.flags,
            f.payload.len()
        ));
    }
    Ok(())
}

async fn http2_6_7_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&ping(H2SPEC)).await;
    ping_ack(&mut raw, H2SPEC).await
}

/// A PING with ACK is not answered (the next PING is, alone).
async fn http2_6_7_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[frame(PING, ACK, 0, b"invalid\0"), ping(H2SPEC)].concat())
        .await;
    let f = frame_of(&mut raw, PING).await?;
    if f.payload != H2SPEC || f.flags & ACK == 0 {
        return Err(format!("PING flags {:#x} payload {:?}", f.flags, f.payload));
    }
    Ok(())
}

async fn http2_6_7_3(t: Target) -> Outcome {
    conn_err(t, frame(PING, 0, 1, &[0; 8]), &[PROTOCOL_ERROR]).await
}

/// PING of 6 bytes: FRAME_SIZE_ERROR. (h2spec 2.6.0 sends it on stream 1 and takes the
/// close; RFC 9113 §6.7's case is this one, on stream 0.)
async fn http2_6_7_4(t: Target) -> Outcome {
    conn_err(t, frame(PING, 0, 0, &[0; 6]), &[FRAME_SIZE_ERROR]).await
}

async fn http2_6_8_1(t: Target) -> Outcome {
    let f = frame(GOAWAY, 0, 1, &[0; 8]);
    conn_err(t, f, &[PROTOCOL_ERROR]).await
}

async fn http2_6_9_1(t: Target) -> Outcome {
    conn_err(t, window_update(0, 0), &[PROTOCOL_ERROR]).await
}

/// WINDOW_UPDATE of 0 on an open stream: a stream error PROTOCOL_ERROR (RFC 9113 §6.9; it
/// was a connection error before Shellac's fix), the connection goes on. (h2spec opens the
/// stream with a GET whose body never ends; a POST here, so that no answer from the cache
/// can close the stream first — the origin waits for the body.)
async fn http2_6_9_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[post(1), window_update(1, 0)].concat()).await;
    reset(&mut raw, 1, PROTOCOL_ERROR).await
}

async fn http2_6_9_3(t: Target) -> Outcome {
    let f = frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1]);
    conn_err(t, f, &[FRAME_SIZE_ERROR]).await
}

/// INITIAL_WINDOW_SIZE 1: the response's first DATA frame carries 1 byte.
async fn http2_6_9_1_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&settings(&[(INITIAL_WINDOW_SIZE, 1)])).await;
    frame_of(&mut raw, SETTINGS).await?;
    raw.send(&get(1)).await;
    data_of_len(&mut raw, 1).await
}

/// The connection window over 2^31-1: GOAWAY FLOW_CONTROL_ERROR (a frame, not only a close).
async fn http2_6_9_1_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let max = 0x7fff_ffff;
    raw.send(&[window_update(0, max), window_update(0, max)].concat())
        .await;
    let f = frame_of(&mut raw, GOAWAY).await?;
    match f.code() {
        Some(FLOW_CONTROL_ERROR) => closed(&mut raw).await,
        _ => Err(show(&f)),
    }
}

/// A stream's window over 2^31-1: RST_STREAM FLOW_CONTROL_ERROR (a POST, as in 6.9/2).
async fn http2_6_9_1_3(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let max = 0x7fff_ffff;
    raw.send(&[post(1), window_update(1, max), window_update(1, max)].concat())
        .await;
    reset(&mut raw, 1, FLOW_CONTROL_ERROR).await
}

/// INITIAL_WINDOW_SIZE 0, a request, then INITIAL_WINDOW_SIZE 1: the open stream's window
/// grows by the difference, 1 byte of DATA.
async fn http2_6_9_2_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&settings(&[(INITIAL_WINDOW_SIZE, 0)])).await;
    frame_of(&mut raw, SETTINGS).await?;
    raw.send(&get(1)).await;
    raw.send(&settings(&[(INITIAL_WINDOW_SIZE, 1)])).await;
    frame_of(&mut raw, SETTINGS).await?;
    data_of_len(&mut raw, 1).await
}

/// INITIAL_WINDOW_SIZE 3, 3 bytes sent, then 2: the window is -1; a WINDOW_UPDATE of 2 lets
/// exactly 1 byte more go.
async fn http2_6_9_2_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&settings(&[(INITIAL_WINDOW_SIZE, 3)])).await;
    frame_of(&mut raw, SETTINGS).await?;
    raw.send(&get(1)).await;
    frame_of(&mut raw, DATA).await?;
    raw.send(&settings(&[(INITIAL_WINDOW_SIZE, 2)])).await;
    frame_of(&mut raw, SETTINGS).await?;
    raw.send(&window_update(1, 2)).await;
    data_of_len(&mut raw, 1).await
}

async fn http2_6_9_2_3(t: Target) -> Outcome {
    let f = frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]);
    conn_err(t, f, &[FLOW_CONTROL_ERROR]).await
}

/// HEADERS and two CONTINUATION frames: answered.
async fn http2_6_10_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(
        &[
            headers(1, END_STREAM, &block("GET")),
            continuation(1, false, &dummy(1)),
            continuation(1, true, &dummy(1)),
        ]
        .concat(),
    )
    .await;
    frame_of(&mut raw, HEADERS).await.map(drop)
}

/// A CONTINUATION without END_HEADERS followed by DATA.
async fn http2_6_10_2(t: Target) -> Outcome {
    let bytes = [
        headers(1, 0, &block("POST")),
        continuation(1, false, &dummy(1)),
        data(1, true, b"test"),
    ]
    .concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}

async fn http2_6_10_3(t: Target) -> Outcome {
    let bytes = [
        headers(1, END_STREAM, &block("GET")),
        continuation(0, true, &dummy(1)),
    ]
    .concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}

/// CONTINUATION after a HEADERS with END_HEADERS.
async fn http2_6_10_4(t: Target) -> Outcome {
    conn_err(
        t,
        [get(1), continuation(1, true, &dummy(1))].concat(),
        &[PROTOCOL_ERROR],
    )
    .await
}

/// CONTINUATION after a CONTINUATION with END_HEADERS.
async fn http2_6_10_5(t: Target) -> Outcome {
    let bytes = [
        headers(1, END_STREAM, &block("GET")),
        continuation(1, true, &dummy(1)),
        continuation(1, true, &dummy(1)),
    ]
    .concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}

/// DATA inside a header block, then CONTINUATION frames.
async fn http2_6_10_6(t: Target) -> Outcome {
    let bytes = [
        headers(1, 0, &block("POST")),
        data(1, true, b"test"),
        continuation(1, false, &dummy(1)),
        continuation(0, true, &dummy(1)),
    ]
    .concat();
    conn_err(t, bytes, &[PROTOCOL_ERROR]).await
}
