//! A compressible HTML page, an origin serving it, and what tells a response's coding: shared
//! by the content-coding tests over HTTP/1.1 (tests/compression/) and HTTP/2
//! (tests/http2/compression.rs).

use std::io::Read;

use super::{Origin, Reply, Resp};

/// A 24 KB HTML page: compressible, as pages are.
pub fn page() -> String {
    (0..1000)
        .map(|i| format!("<li class=\"row\">item {i}</li>\n"))
        .collect()
}

/// An origin answering every path with [`page`], identity, `max-age=60`, strong ETag `"v1"`.
pub async fn page_origin() -> Origin {
    Origin::start(|_| {
        Reply::ok(&page())
            .cc("max-age=60")
            .header("content-type", "text/html; charset=utf-8")
            .header("etag", "\"v1\"")
    })
    .await
}

/// `data` decoded from gzip (panics on anything else).
pub fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

/// Whether `r` says `Vary: Accept-Encoding` (in any of its Vary fields).
pub fn varies_on_coding(r: &Resp) -> bool {
    r.headers.get_all("vary").iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.eq_ignore_ascii_case("accept-encoding"))
    })
}
