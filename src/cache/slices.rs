//! Big media in slices (nginx's `slice`, ATS's slice plugin; `cache.slice`): which URLs are
//! known to be larger than `max_object_size`, with the length and the validator their slices
//! must show, and the key each slice is stored under (each slice is stored with the storage
//! decision the policy makes for its own fetch: `proxy/slice/backend.rs`).
//!
//! A slice is an ordinary object in the tiers (memory, disk), stored under its URL's key with a
//! variant of its own: the hash of the representation's validator and the slice's index and
//! size. A slice of another version of the representation therefore has another key: slices of
//! two versions are never taken for one another, even after a restart. When a slice shows the
//! validator changed, [`SliceIndex::invalidate`] forgets the URL and removes every slice of the
//! old version, and the next request learns the new one.
//!
//! The index itself is held in memory (bounded, least recently used first out): after a
//! restart the first request for a URL learns its length again (the slices on disk are found
//! again under the same keys).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use xxhash_rust::xxh3::Xxh3;

use super::CacheKey;
use super::partial::Validator;
use super::storage::Storage;

/// URLs known to be sliced, at most (each entry is a key, a validator and fields).
pub const SLICE_INDEX_CAPACITY: usize = 65_536;

/// What is known of a sliced representation.
#[derive(Debug)]
pub struct SliceMeta {
    /// Its complete length in bytes.
    pub length: u64,
    /// Its strong validator; every slice must carry the same.
    pub validator: Validator,
    /// The size of one slice (`cache.slice_size` when it was learnt).
    pub slice_size: u64,
    /// The representation's fields as the response that revealed its size had them (without
    /// framing fields): what a conditional request is evaluated against.
    pub fields: HeaderMap,
    /// The part of every slice key that names this version and slice size.
    tag: u64,
}

impl SliceMeta {
    /// A sliced representation of `length` bytes with `validator`, cut in `slice_size` slices.
    /// (Each slice is stored with the storage decision the policy makes for its own fetch.)
    pub fn new(length: u64, validator: Validator, slice_size: u64, fields: HeaderMap) -> SliceMeta {
        let mut h = Xxh3::new();
        h.update(b"shellac-slice\0");
        h.update(validator.if_range().as_bytes());
        h.update(&slice_size.to_le_bytes());
        let tag = h.digest();
        SliceMeta {
            length,
            validator,
            slice_size: slice_size.max(1),
            fields,
            tag,
        }
    }

    /// How many slices the representation has.
    pub fn count(&self) -> u64 {
        self.length.div_ceil(self.slice_size)
    }

    /// The first and last byte of slice `index`.
    pub fn bounds(&self, index: u64) -> (u64, u64) {
        let start = index.saturating_mul(self.slice_size);
        let end = start
            .saturating_add(self.slice_size)
            .min(self.length)
            .saturating_sub(1);
        (start, end)
    }

    /// The key slice `index` of `primary` is stored under. Never 0 (no variant) and never a
    /// `Vary` variant's hash in practice: xxh3 over a domain of its own.
    pub fn key(&self, primary: &CacheKey, index: u64) -> CacheKey {
        let mut h = Xxh3::with_seed(self.tag);
        h.update(&index.to_le_bytes());
        primary.with_variant(h.digest().max(1))
    }
}

/// The URLs known to be sliced, and those whose origin refused a slice request.
pub struct SliceIndex {
    known: quick_cache::sync::Cache<CacheKey, Arc<SliceMeta>>,
    /// URLs not sliced until the instant: their origin answered a slice request with 200.
    refused: quick_cache::sync::Cache<CacheKey, Instant>,
}

impl Default for SliceIndex {
    fn default() -> Self {
        SliceIndex {
            known: quick_cache::sync::Cache::new(SLICE_INDEX_CAPACITY),
            refused: quick_cache::sync::Cache::new(SLICE_INDEX_CAPACITY),
        }
    }
}

impl SliceIndex {
    /// The sliced representation of `primary`, if one is known.
    pub fn get(&self, primary: &CacheKey) -> Option<Arc<SliceMeta>> {
        if self.known.is_empty() {
            return None;
        }
        self.known.get(primary)
    }

    /// Learns that `primary` is sliced as `meta` (unless its origin refused slicing lately).
    /// A different version learnt before is invalidated first. Returns whether it was learnt.
    pub fn learn(&self, primary: &CacheKey, meta: SliceMeta, storage: &dyn Storage) -> bool {
        if self.is_refused(primary, Instant::now()) {
            return false;
        }
        if let Some(old) = self.known.get(primary) {
            if old.tag == meta.tag && old.length == meta.length {
                return true;
            }
            self.invalidate(primary, &old, storage);
        }
        self.known.insert(primary.clone(), Arc::new(meta));
        true
    }

    /// Forgets `meta` for `primary` (if it is still the one known) and removes every slice of
    /// it from `storage`. Returns the slices removed.
    pub fn invalidate(&self, primary: &CacheKey, meta: &SliceMeta, storage: &dyn Storage) -> usize {
        if let Some(current) = self.known.get(primary)
            && current.tag == meta.tag
        {
            self.known.remove(primary);
        }
        (0..meta.count())
            .filter(|i| storage.remove(&meta.key(primary, *i)))
            .count()
    }

    /// Forgets `primary` and removes its slices (a PURGE of the URL). Returns slices removed.
    pub fn purge(&self, primary: &CacheKey, storage: &dyn Storage) -> usize {
        match self.known.remove(primary) {
            Some((_, meta)) => (0..meta.count())
                .filter(|i| storage.remove(&meta.key(primary, *i)))
                .count(),
            None => 0,
        }
    }

    /// `primary`'s origin ignored a slice's Range: not sliced for `ttl`.
    pub fn refuse(&self, primary: &CacheKey, ttl: Duration) {
        self.known.remove(primary);
        self.refused.insert(primary.clone(), Instant::now() + ttl);
    }

    /// Whether `primary` is not to be sliced now.
    pub fn is_refused(&self, primary: &CacheKey, now: Instant) -> bool {
        if self.refused.is_empty() {
            return false;
        }
        match self.refused.get(primary) {
            Some(until) if until > now => true,
            Some(_) => {
                self.refused.remove(primary);
                false
            }
            None => false,
        }
    }

    /// URLs known to be sliced.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn meta(etag: &'static str, length: u64) -> SliceMeta {
        SliceMeta::new(
            length,
            Validator::ETag(HeaderValue::from_static(etag)),
            1 << 20,
            HeaderMap::new(),
        )
    }

    #[test]
    fn slices_are_aligned_and_the_last_is_short() {
        let m = meta("\"a\"", (3 << 20) + 5);
        assert_eq!(m.count(), 4);
        assert_eq!(m.bounds(0), (0, (1 << 20) - 1));
        assert_eq!(m.bounds(3), (3 << 20, (3 << 20) + 4));
    }

    #[test]
    fn two_versions_never_share_a_slice_key() {
        let primary = CacheKey::new("example.com", "/big.mp4");
        let (a, b) = (meta("\"a\"", 10 << 20), meta("\"b\"", 10 << 20));
        for i in 0..10 {
            assert_ne!(a.key(&primary, i), b.key(&primary, i));
            assert_ne!(a.key(&primary, i), primary);
            assert_eq!(a.key(&primary, i).primary(), primary);
        }
        assert_ne!(a.key(&primary, 0), a.key(&primary, 1));
    }
}
