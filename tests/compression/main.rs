//! Content codings end to end (issue 29, docs/compression.md): real origins sending identity,
//! gzip and broken gzip; clients with many `Accept-Encoding` shapes; one stored object per
//! URL gzipped once and decoded for clients without gzip; `Vary`, `ETag`, 304 and Range per
//! representation; `no-transform`, small and incompressible bodies left alone.
//! The helpers are here; the tests in `storing`, `delivery`, `policy` and `representations`
//! (test names `MODULE::NAME`).

#[path = "../common/mod.rs"]
mod common;
mod delivery;
mod policy;
mod representations;
mod storing;

use std::io::{Read, Write};

use http_body_util::BodyExt;

use common::pages::{gunzip, page, page_origin, varies_on_coding};
use common::{Conn, Origin, Reply, ReplyBody, Resp, Shellac, get_with};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Whether `r` is the page as gzip (and says so).
fn is_gzip_page(r: &Resp) -> bool {
    r.header("content-encoding") == Some("gzip") && gunzip(&r.body) == page().as_bytes()
}

/// Whether `r` is the page in identity.
fn is_identity_page(r: &Resp) -> bool {
    r.header("content-encoding").is_none() && r.body == page().as_bytes()
}

/// Gets `path` with `ae` until the response is in `coding` (a representation is built in the
/// background), at most `tries` times; the last response.
async fn until_coded(shellac: &Shellac, path: &str, ae: &str, coding: &str) -> Resp {
    let mut r = get_with(shellac.addr, path, &[("accept-encoding", ae)]).await;
    for _ in 0..200 {
        if r.header("content-encoding") == Some(coding) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        r = get_with(shellac.addr, path, &[("accept-encoding", ae)]).await;
    }
    r
}

fn br(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        w.write_all(data).unwrap();
    }
    out
}
