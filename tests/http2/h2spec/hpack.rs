//! h2spec "hpack" (RFC 7541): decoding errors — invalid indexes, a table size update out of
//! place or over the limit, bad Huffman padding and the EOS symbol — each a connection error
//! COMPRESSION_ERROR (RFC 9113 §4.3; vendor/h2/PATCHES.md §1).

use super::*;

cases! {
    "hpack/2.3.3/1" => hpack_2_3_3_1,
    "hpack/2.3.3/2" => hpack_2_3_3_2,
    "hpack/4.2/1" => hpack_4_2_1,
    "hpack/5.2/1" => hpack_5_2_1,
    "hpack/5.2/2" => hpack_5_2_2,
    "hpack/5.2/3" => hpack_5_2_3,
    "hpack/6.1/1" => hpack_6_1_1,
    "hpack/6.3/1" => hpack_6_3_1,
}

/// A GET whose block is `before`, the common fields, then `after`: COMPRESSION_ERROR.
async fn undecodable(t: Target, before: &[u8], after: &[u8]) -> Outcome {
    let mut raw = t.handshake().await;
    let b = [before, &block("GET"), after].concat();
    raw.send(&headers(1, END_STREAM | END_HEADERS, &b)).await;
    connection_error(&mut raw, &[COMPRESSION_ERROR]).await
}

/// An indexed field, index 126 (past both tables).
async fn hpack_2_3_3_1(t: Target) -> Outcome {
    undecodable(t, &[], &[0x80 | 126]).await
}

/// A literal field whose name is index 70 (past both tables; 15 + 55 on a 4-bit prefix).
async fn hpack_2_3_3_2(t: Target) -> Outcome {
    undecodable(t, &[], &[0x0f, 55, 1, b'x']).await
}

/// A Dynamic Table Size Update (to 1) at the end of the block.
async fn hpack_4_2_1(t: Target) -> Outcome {
    undecodable(t, &[], &[0x21]).await
}

/// `x-test: test` (new name, Huffman) with the value's Huffman code given `value`.
fn huffman_value(value: &[u8]) -> Vec<u8> {
    [&[0x00, 0x85, 0xf2, 0xb2, 0x4a, 0x84, 0xff][..], value].concat()
}

/// "test" (49 50 9f) and a byte of padding more: padding longer than 7 bits.
async fn hpack_5_2_1(t: Target) -> Outcome {
    undecodable(t, &[], &huffman_value(&[0x84, 0x49, 0x50, 0x9f, 0xff])).await
}

/// "test" padded with zeros instead of the EOS code's leading ones.
async fn hpack_5_2_2(t: Target) -> Outcome {
    undecodable(t, &[], &huffman_value(&[0x83, 0x49, 0x50, 0x90])).await
}

/// The EOS symbol (30 bits of ones) before "test".
async fn hpack_5_2_3(t: Target) -> Outcome {
    let eos_then_test = [0x87, 0xff, 0xff, 0xff, 0xfd, 0x25, 0x42, 0x7f];
    undecodable(t, &[], &huffman_value(&eos_then_test)).await
}

/// An indexed field with index 0.
async fn hpack_6_1_1(t: Target) -> Outcome {
    undecodable(t, &[], &[0x80]).await
}

/// A Dynamic Table Size Update one over the server's SETTINGS_HEADER_TABLE_SIZE.
async fn hpack_6_3_1(t: Target) -> Outcome {
    let (mut raw, params) = t.handshake_settings().await;
    let limit = params
        .iter()
        .find(|(id, _)| *id == HEADER_TABLE_SIZE)
        .map_or(4096, |(_, v)| *v);
    // 5-bit prefix integer (RFC 7541 §5.1) of limit + 1, with the update's 001 pattern.
    let over = limit + 1;
    let mut update = vec![0x20 | over.min(31) as u8];
    if over >= 31 {
        let mut n = over - 31;
        while n >= 128 {
            update.push((n % 128) as u8 | 0x80);
            n /= 128;
        }
        update.push(n as u8);
    }
    let b = [update, block("GET")].concat();
    raw.send(&headers(1, END_STREAM | END_HEADERS, &b)).await;
    connection_error(&mut raw, &[COMPRESSION_ERROR]).await
}
