//! h2spec "http2" §7 and §8: unknown error codes, and the HTTP message rules — trailers,
//! field names, pseudo-header fields, connection-specific fields, `content-length`, server
//! push from a client. Each malformed request is a stream error (RFC 9113 §8.1.1): Shellac
//! resets the stream and the connection goes on.

use super::*;

cases! {
    "http2/7/1" => http2_7_1,
    "http2/7/2" => http2_7_2,
    "http2/8.1/1" => http2_8_1_1,
    "http2/8.1.2/1" => http2_8_1_2_1,
    "http2/8.1.2.1/1" => http2_8_1_2_1_1,
    "http2/8.1.2.1/2" => http2_8_1_2_1_2,
    "http2/8.1.2.1/3" => http2_8_1_2_1_3,
    "http2/8.1.2.1/4" => http2_8_1_2_1_4,
    "http2/8.1.2.2/1" => http2_8_1_2_2_1,
    "http2/8.1.2.2/2" => http2_8_1_2_2_2,
    "http2/8.1.2.3/1" => http2_8_1_2_3_1,
    "http2/8.1.2.3/2" => http2_8_1_2_3_2,
    "http2/8.1.2.3/3" => http2_8_1_2_3_3,
    "http2/8.1.2.3/4" => http2_8_1_2_3_4,
    "http2/8.1.2.3/5" => http2_8_1_2_3_5,
    "http2/8.1.2.3/6" => http2_8_1_2_3_6,
    "http2/8.1.2.3/7" => http2_8_1_2_3_7,
    "http2/8.1.2.6/1" => http2_8_1_2_6_1,
    "http2/8.1.2.6/2" => http2_8_1_2_6_2,
    "http2/8.2/1" => http2_8_2_1,
}

/// A GOAWAY with an unknown error code is a GOAWAY: with no stream open, the server closes.
async fn http2_7_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&goaway(0, 0xff, b"")).await;
    closed(&mut raw).await
}

/// RST_STREAM with an unknown error code is a reset like another.
async fn http2_7_2(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&[post(1), rst(1, 0xff), ping(&[0; 8])].concat())
        .await;
    frame_of(&mut raw, PING).await.map(drop)
}

/// A POST with `fields` after the common ones, a DATA frame, then a second HEADERS
/// `trailers` without END_STREAM.
fn post_then_trailers(trailers: &[(&str, &str)]) -> Vec<u8> {
    [
        post(1),
        data(1, false, b"test"),
        headers(1, END_HEADERS, &fields(trailers)),
    ]
    .concat()
}

/// `bytes`: the request on stream 1 is malformed — RST_STREAM PROTOCOL_ERROR, and the
/// connection answers the next request.
async fn malformed(t: Target, bytes: Vec<u8>) -> Outcome {
    let mut raw = t.handshake().await;
    raw.send(&bytes).await;
    reset(&mut raw, 1, PROTOCOL_ERROR).await?;
    raw.send(&headers(
        3,
        END_STREAM | END_HEADERS,
        &request_block("GET", "/ok", &[]),
    ))
    .await;
    headers_on(&mut raw, 3).await
}

/// A GET whose block is the common fields with `change` applied.
fn get_with(change: impl FnOnce(&mut Vec<(&'static str, &'static str)>)) -> Vec<u8> {
    let mut list = vec![
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "test.example"),
    ];
    change(&mut list);
    headers(1, END_STREAM | END_HEADERS, &fields(&list))
}

/// Trailers (the second HEADERS) without END_STREAM.
async fn http2_8_1_1(t: Target) -> Outcome {
    malformed(t, post_then_trailers(&[("x-test", "ok")])).await
}

async fn http2_8_1_2_1(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push(("X-TEST", "ok")))).await
}

async fn http2_8_1_2_1_1(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push((":test", "ok")))).await
}

async fn http2_8_1_2_1_2(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push((":status", "200")))).await
}

/// A pseudo-header field in trailers (without END_STREAM, as h2spec sends them).
async fn http2_8_1_2_1_3(t: Target) -> Outcome {
    malformed(t, post_then_trailers(&[(":method", "POST")])).await
}

async fn http2_8_1_2_1_4(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.insert(0, ("x-test", "ok")))).await
}

async fn http2_8_1_2_2_1(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push(("connection", "keep-alive")))).await
}

async fn http2_8_1_2_2_2(t: Target) -> Outcome {
    malformed(
        t,
        get_with(|l| {
            l.push(("trailers", "test"));
            l.push(("te", "trailers, deflate"));
        }),
    )
    .await
}

async fn http2_8_1_2_3_1(t: Target) -> Outcome {
    malformed(t, get_with(|l| l[2].1 = "")).await
}

async fn http2_8_1_2_3_2(t: Target) -> Outcome {
    malformed(
        t,
        get_with(|l| {
            l.remove(0);
        }),
    )
    .await
}

async fn http2_8_1_2_3_3(t: Target) -> Outcome {
    malformed(
        t,
        get_with(|l| {
            l.remove(1);
        }),
    )
    .await
}

async fn http2_8_1_2_3_4(t: Target) -> Outcome {
    malformed(
        t,
        get_with(|l| {
            l.remove(2);
        }),
    )
    .await
}

async fn http2_8_1_2_3_5(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push((":method", "GET")))).await
}

async fn http2_8_1_2_3_6(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push((":scheme", "http")))).await
}

async fn http2_8_1_2_3_7(t: Target) -> Outcome {
    malformed(t, get_with(|l| l.push((":path", "/")))).await
}

/// `content-length: 1` and the DATA frames `bodies`.
fn post_with_length(bodies: &[&[u8]]) -> Vec<u8> {
    let b = [block("POST"), fields(&[("content-length", "1")])].concat();
    let mut bytes = headers(1, END_HEADERS, &b);
    for (i, body) in bodies.iter().enumerate() {
        bytes.extend(data(1, i + 1 == bodies.len(), body));
    }
    bytes
}

async fn http2_8_1_2_6_1(t: Target) -> Outcome {
    malformed(t, post_with_length(&[b"test"])).await
}

async fn http2_8_1_2_6_2(t: Target) -> Outcome {
    malformed(t, post_with_length(&[b"test", b"test"])).await
}

/// A client's PUSH_PROMISE: a connection error PROTOCOL_ERROR.
async fn http2_8_2_1(t: Target) -> Outcome {
    let mut raw = t.handshake().await;
    let payload = [&3u32.to_be_bytes()[..], &block("GET")].concat();
    raw.send(&frame(PUSH_PROMISE, END_HEADERS, 1, &payload))
        .await;
    connection_error(&mut raw, &[PROTOCOL_ERROR]).await
}
