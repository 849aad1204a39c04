//! Fast hits (`server.fast_hits`): plain fresh hits from memory answered by the gate without
//! hyper. The answer must be the one the full path gives; everything else must take the full
//! path; responses stay in request order on pipelined and kept-alive connections; counters,
//! log lines, timeouts and released connections behave as for any hit.
//! The origin and helpers are here; the tests in `equivalence`, `connection`, `accounting`,
//! `copy_free` and `reason_phrase` (test names `MODULE::NAME`).

mod accounting;
#[path = "../common/mod.rs"]
mod common;
mod connection;
mod copy_free;
mod equivalence;
mod reason_phrase;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn origin_reply(path: &str) -> Reply {
    match path {
        "/slow" => Reply::ok("slow")
            .cc("max-age=60")
            .delay(Duration::from_millis(300)),
        "/big" => Reply::ok(&"x".repeat(4 << 20)).cc("max-age=60"),
        // Every byte tells its offset: a chunk sent twice, skipped or out of order shows.
        "/pattern" => Reply {
            body: ReplyBody::Bytes(pattern(3 << 20 | 12345)),
            ..Reply::ok("")
        }
        .cc("max-age=60"),
        p => Reply::ok(&format!("body of {p}"))
            .cc("max-age=60")
            .header("etag", "\"v1\"")
            .header("x-custom", "kept")
            .header("surrogate-key", "k1"),
    }
}

/// Status, fields and body; `date`, `age` and the `ttl=` of `Cache-Status` masked (the two
/// instances stored their copies at different moments).
fn shape(r: &Resp) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut fields: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(n, v)| {
            let v = v.to_str().unwrap();
            let v = match n.as_str() {
                "date" | "age" => "*".to_string(),
                "cache-status" => match v.find("ttl=") {
                    Some(i) => format!("{}ttl=*", &v[..i]),
                    None => v.to_string(),
                },
                _ => v.to_string(),
            };
            (n.to_string(), v)
        })
        .collect();
    fields.sort();
    (r.status, fields, r.body.to_vec())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}
