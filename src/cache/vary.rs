//! `Vary` (RFC 9111 §4.1): one stored object per variant. The primary key (URL) maps to the
//! field names the URL varies on; each variant is stored under the primary key plus a hash of
//! the request's values for those fields. Objects keep their exact selection, so a hash
//! collision can only cause a miss, never the wrong variant.

use std::hash::{Hash, Hasher};

use http::{HeaderMap, HeaderName};
use xxhash_rust::xxh3::Xxh3;

use crate::http::selecting::selecting_value;

/// What the cache knows about a URL's variants.
#[derive(Debug, Default)]
pub struct VaryIndex {
    pub names: Vec<HeaderName>,
    /// Stored variant hashes, oldest first.
    pub variants: Vec<u64>,
}

/// The secondary key for `request` under `names`. Never 0 (0 means "no Vary").
pub fn variant_hash(names: &[HeaderName], request: &HeaderMap) -> u64 {
    // A specified hash (xxh3, seed 0), not std's DefaultHasher (which may change between Rust
    // releases): variant keys are stored on disk and must hash the same after a restart or
    // an upgrade.
    let mut h = Xxh3::new();
    for name in names {
        name.as_str().hash(&mut h);
        let mut values = request.get_all(name).iter();
        match (values.next(), values.next()) {
            (None, _) => 0u8.hash(&mut h),
            (Some(v), None) => selecting_value(name, v).hash(&mut h),
            // Several field lines: hash them all; such objects never match on lookup anyway.
            (Some(v), Some(w)) => {
                selecting_value(name, v).hash(&mut h);
                selecting_value(name, w).hash(&mut h);
                values.for_each(|x| selecting_value(name, x).hash(&mut h));
            }
        }
    }
    h.finish().max(1)
}
