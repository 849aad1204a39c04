//! Other representations of a stored object (`br`, `zstd`, and `gzip` of an identity object:
//! docs/compression.md), stored as
//! objects of their own beside it: under a key derived from the object's (its URL, its
//! variant, the coding), so every tier keeps them like any object, and a purge of the URL
//! removes them with it (`vary.rs`). Each carries [`FIELD`], the generation of the object it
//! was made from ([`generation`]: its stored fields and length); it is served only while
//! that is the object being served, so an object refetched, refreshed by a 304 or replaced
//! never has a representation of older bytes sent for it.

use std::hash::Hasher;
use std::sync::OnceLock;

use xxhash_rust::xxh3::Xxh3;

use super::{CacheKey, Object};
use crate::http::accept_encoding::Coding;

/// The stored field naming a representation's source: its [`generation`] in hex. Never sent
/// to a client or taken from a backend.
pub const FIELD: &str = "shellac-source";

/// The codings a representation is made in: br and zstd (`[compression] encodings`), and
/// gzip for an object stored identity that `[compression]` would gzip now.
pub const CODINGS: [Coding; 3] = [Coding::Zstd, Coding::Br, Coding::Gzip];

/// The key a representation in `coding` of the object stored under `key` is stored under.
pub fn key(key: &CacheKey, coding: Coding) -> CacheKey {
    key.with_variant(variant(key.variant, coding))
}

/// The variant of [`key`]: the representation in `coding` of the object of variant `of`.
/// For a URL without `Vary` variants (`of` 0, most) hashed once per coding: the hash cost
/// ~150 instructions on each of bench/ab2009.sh's phpcached hits (callgrind).
pub fn variant(of: u64, coding: Coding) -> u64 {
    static PRIMARY: [OnceLock<u64>; 4] = [const { OnceLock::new() }; 4];
    if of == 0 {
        return *PRIMARY[coding as usize].get_or_init(|| hashed_variant(0, coding));
    }
    hashed_variant(of, coding)
}

fn hashed_variant(of: u64, coding: Coding) -> u64 {
    // A specified hash (xxh3), as variant keys are: they are stored on disk.
    let mut h = Xxh3::new();
    h.write_u64(of);
    h.write(b"shellac-representation");
    h.write(coding.as_str().as_bytes());
    h.finish().max(1)
}

/// Whether a stored object's fields say gzip (read from the stored block: no map built).
pub fn stored_gzip(fields: &super::StoredFields) -> bool {
    stored_coding(fields) == Some(Coding::Gzip)
}

/// The coding a stored object's fields name (`None`: identity, several or an unknown one).
pub fn stored_coding(fields: &super::StoredFields) -> Option<Coding> {
    let mut values = fields.values("content-encoding");
    match (values.next(), values.next()) {
        (Some(v), None) => Coding::from_content_encoding(v),
        _ => None,
    }
}

/// What identifies the bytes of a stored object: its stored fields (the origin's `Date`,
/// `ETag`, `Last-Modified`, ...) and its length.
pub fn generation(object: &Object) -> u64 {
    let mut h = Xxh3::new();
    h.write(object.headers.block());
    h.write_u64(object.body_len);
    h.finish()
}

/// The generation a representation was made from, read from [`FIELD`].
pub fn source(object: &Object) -> Option<u64> {
    let value = object.headers.values(FIELD).next()?;
    u64::from_str_radix(std::str::from_utf8(value).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representation_keys_are_per_coding_and_variant() {
        let k = CacheKey::new("example.com", "/p");
        let br = key(&k, Coding::Br);
        let zstd = key(&k, Coding::Zstd);
        assert_ne!(br, zstd);
        assert_ne!(br, k);
        assert_eq!(br.primary(), k);
        assert_ne!(key(&k.with_variant(7), Coding::Br), br);
        assert_eq!(key(&k, Coding::Br), br, "stable");
    }

    /// The primary variant's hashes, kept once per coding, are the hashes themselves (they
    /// name objects on disk: the value must never change).
    #[test]
    fn a_kept_variant_is_the_hashed_one() {
        for coding in [Coding::Identity, Coding::Gzip, Coding::Br, Coding::Zstd] {
            assert_eq!(variant(0, coding), hashed_variant(0, coding));
            assert_eq!(variant(0, coding), variant(0, coding));
            assert_eq!(variant(9, coding), hashed_variant(9, coding));
        }
        assert_ne!(variant(0, Coding::Identity), variant(0, Coding::Gzip));
    }
}
