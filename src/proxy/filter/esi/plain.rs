//! A page ESI was on for that turned out to hold no ESI, marked to go out gzip
//! (`Slot::gzip_plain`: its origin sent it gzip, or the policy gzips it). It is stored as any
//! gzip object: its identity bytes (the parse needed them) gzipped once, when the fill stores
//! it, not per hit. So a hit costs what the same page not marked costs — the stored bytes as
//! they are for a client that takes gzip, decoded for one that does not — and is a plain hit
//! (no assembly, `esi_pages` not counted), as Varnish stores such a page without ESI data.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};

use crate::cache::identity::Identity;
use crate::stats::Counters;

/// Whether a fill with ESI on stores its body gzipped as a plain object: it held no ESI
/// (`program` is `None`), it is marked gzip-plain, and `[compression]` is on (with it off,
/// Varnish's `http_gzip_support off`, the marked page keeps its verbatim program so that its
/// gzip is sent to every client and an include of it is still spliced as identity bytes).
pub fn stores_gzip(gzip_plain: bool, found_esi: bool, compression: bool) -> bool {
    gzip_plain && !found_esi && compression
}

/// `chunks` (the identity body) gzipped at `level` as an assembled page is
/// ([`GzipPage::whole`](super::GzipPage::whole)), off the async workers (a page up to
/// `max_object_size` takes a while); `None` if that failed (the page is then stored as
/// before, identity with its mark).
pub async fn gzip(chunks: Vec<Bytes>, level: u32, counters: Arc<Counters>) -> Option<Bytes> {
    tokio::task::spawn_blocking(move || super::GzipPage::whole(level, &chunks, counters).ok())
        .await
        .ok()
        .flatten()
        .map(Bytes::from)
}

/// The stored fields of such a page: `Content-Encoding: gzip`, `Vary: Accept-Encoding`, the
/// identity's length (a decoded copy is sent with `Content-Length`), an `ETag` weakened (the
/// gzip bytes are Shellac's, not the ones an origin's tag named), no ESI mark.
pub fn mark(headers: &mut HeaderMap, identity_len: u64) {
    headers.remove(super::FIELD);
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    crate::http::transform::vary_accept_encoding(headers);
    crate::http::transform::weaken_etag(headers);
    let identity = Identity {
        length: identity_len,
        etag: None,
    };
    if let Some(v) = identity.to_value() {
        headers.insert(crate::cache::identity::FIELD, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn gzipped_once_and_marked_as_a_plain_gzip_object() {
        let chunks = vec![
            Bytes::from_static(b"<p>no "),
            Bytes::from_static(b"esi</p>"),
        ];
        let gz = gzip(chunks, 6, Arc::new(Counters::default()))
            .await
            .expect("gzip");
        let mut d = flate2::read::GzDecoder::new(&gz[..]);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut d, &mut out).expect("gunzip");
        assert_eq!(out, "<p>no esi</p>");
        let mut h = HeaderMap::new();
        h.insert(
            super::super::FIELD,
            HeaderValue::from_static("gzip;pending"),
        );
        h.insert(header::ETAG, HeaderValue::from_static("\"v1\""));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("13"));
        mark(&mut h, 13);
        assert!(!h.contains_key(super::super::FIELD));
        assert!(!h.contains_key(header::CONTENT_LENGTH));
        assert_eq!(h[header::CONTENT_ENCODING], "gzip");
        assert_eq!(h[header::VARY], "Accept-Encoding");
        assert_eq!(h[header::ETAG], "W/\"v1\"");
        assert_eq!(h[crate::cache::identity::FIELD], "13");
        assert!(stores_gzip(true, false, true));
        assert!(!stores_gzip(true, true, true) && !stores_gzip(true, false, false));
    }
}
