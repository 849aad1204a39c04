//! The codings of a representation: a stored gzip decoded (bounded), an identity encoded in
//! br, zstd or gzip, and the stored fields of the result.

use std::io::{Read, Write};

use http::header::{self, HeaderMap, HeaderValue};

use super::job::Levels;
use crate::cache::representation;
use crate::cache::{Object, StoredFields};
use crate::http::accept_encoding::Coding;

/// The zstd window, at most 8 MB (2^23) as RFC 9659 requires of `zstd` on the web.
pub(super) const ZSTD_WINDOW_LOG: u32 = 23;

/// The brotli window (2^22: 4 MB, brotli's default).
const BR_WINDOW_LOG: i32 = 22;

/// The identity of a gzip body (several members are one body), at most `limit` bytes.
pub(super) fn gunzip(gzip: &[u8], limit: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(gzip)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= limit).then_some(out)
}

/// `identity` in `coding`.
pub(super) fn encode(coding: Coding, levels: Levels, identity: &[u8]) -> Option<Vec<u8>> {
    match coding {
        Coding::Br => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: levels.br as i32,
                lgwin: BR_WINDOW_LOG,
                size_hint: identity.len(),
                ..Default::default()
            };
            let mut out = Vec::with_capacity(identity.len() / 4);
            let mut w = brotli::CompressorWriter::with_params(&mut out, 4096, &params);
            w.write_all(identity).ok()?;
            w.flush().ok()?;
            drop(w);
            Some(out)
        }
        Coding::Zstd => {
            let mut e = zstd::stream::Encoder::new(
                Vec::with_capacity(identity.len() / 4),
                levels.zstd as i32,
            )
            .ok()?;
            e.set_parameter(zstd::zstd_safe::CParameter::WindowLog(ZSTD_WINDOW_LOG))
                .ok()?;
            e.set_pledged_src_size(Some(identity.len() as u64)).ok()?;
            e.include_contentsize(true).ok()?;
            e.write_all(identity).ok()?;
            e.finish().ok()
        }
        Coding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(
                Vec::with_capacity(identity.len() / 4),
                flate2::Compression::new(levels.gzip.clamp(1, 9)),
            );
            e.write_all(identity).ok()?;
            e.finish().ok()
        }
        Coding::Identity => None,
    }
}

/// The stored fields of a representation in `coding` of `source`: its fields with the
/// coding's `Content-Encoding`, the `ETag` weakened, `Vary: Accept-Encoding`, the source's
/// generation (`cache/representation.rs`), and no identity or length field of the source.
/// The identity of a gzip `source` has no `Content-Encoding` and the identity's strong
/// `ETag` when Shellac made the gzip (the decoded copy's, `cache/identity.rs`).
pub(super) fn fields(source: &Object, coding: Coding) -> Option<StoredFields> {
    let generation = representation::generation(source);
    let mut map: HeaderMap = source.headers.to_map();
    let identity_etag = crate::cache::identity::Identity::of(&map).and_then(|i| i.etag);
    map.remove(header::CONTENT_LENGTH);
    map.remove(crate::cache::identity::FIELD);
    map.remove(representation::FIELD);
    if coding == Coding::Identity {
        map.remove(header::CONTENT_ENCODING);
    } else {
        map.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(coding.as_str()),
        );
    }
    match identity_etag {
        Some(etag) if coding == Coding::Identity => {
            map.insert(header::ETAG, etag);
        }
        _ => crate::http::transform::weaken_etag(&mut map),
    }
    crate::http::transform::vary_accept_encoding(&mut map);
    map.insert(
        representation::FIELD,
        HeaderValue::from_str(&format!("{generation:x}")).ok()?,
    );
    Some(StoredFields::from_map(&map))
}
