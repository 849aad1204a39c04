//! Stored response header fields in one allocation (`name:value\n` per field), with a header
//! map built from it only when a path needs one.
//!
//! Why: a `HeaderMap` costs ~100 bytes per field beyond name and value (bucket, index slot, a
//! `Bytes` per value) — about 1 KB for a typical response, several times the size of a small
//! object's body. Most cached objects are read rarely or never (the long tail), so they are
//! kept as one block; a hit builds the delivery map once (`Object::prepared`) straight from the
//! block, and the few paths that need the stored fields as a map (conditional requests, ranges,
//! revalidation) build it lazily, its values sharing the block (bench/RESULTS.md, "memory").

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use once_cell::race::OnceBox;

/// The stored fields of a response, in received order, names lower-case.
#[derive(Default)]
pub struct StoredFields {
    /// `name:value\n` for every field. Names never contain `:` and values never contain `\n`
    /// (both are rejected by `http`'s types), so the block splits unambiguously.
    block: Bytes,
    /// Number of fields in `block`.
    count: u32,
    /// The fields as a map, built on first use; values are slices of `block`. A `OnceBox` is
    /// one pointer (a `OnceLock<Box<_>>` is two words): 8 bytes on every cached object.
    map: OnceBox<HeaderMap>,
}

impl StoredFields {
    /// Serializes `headers` into one block.
    pub fn from_map(headers: &HeaderMap) -> StoredFields {
        let len = headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 2)
            .sum();
        StoredFields::build(len, headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())))
    }

    /// Fields given as (name, value) pairs; names must be valid lower-case header names and
    /// values valid header values (pairs from a `HeaderMap` or a verified disk record).
    pub fn from_pairs<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])>) -> StoredFields {
        StoredFields::build(0, pairs)
    }

    fn build<'a>(len: usize, pairs: impl Iterator<Item = (&'a str, &'a [u8])>) -> StoredFields {
        let mut block = Vec::with_capacity(len);
        let mut count = 0u32;
        for (name, value) in pairs {
            block.extend_from_slice(name.as_bytes());
            block.push(b':');
            block.extend_from_slice(value);
            block.push(b'\n');
            count += 1;
        }
        // Exact size: `Bytes` keeps a vector's spare capacity allocated.
        block.shrink_to_fit();
        StoredFields {
            block: Bytes::from(block),
            count,
            map: OnceBox::new(),
        }
    }

    /// Fields from a block another `StoredFields` produced ([`StoredFields::block`]) and its
    /// field count (the memory tier keeps compact objects that way).
    pub fn from_block(block: Bytes, count: u32) -> StoredFields {
        StoredFields {
            block,
            count,
            map: OnceBox::new(),
        }
    }

    /// The fields as one block, `name:value\n` per field.
    pub fn block(&self) -> &[u8] {
        &self.block
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of names and values (plus one separator and terminator byte per field).
    pub fn block_len(&self) -> usize {
        self.block.len()
    }

    /// Every field as (name, value), in stored order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.raw()
            .filter_map(|(name, value)| Some((std::str::from_utf8(name).ok()?, value)))
    }

    /// Every value of field `name` (lower-case), in stored order.
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.raw()
            .filter(move |(n, _)| *n == name.as_bytes())
            .map(|(_, v)| v)
    }

    /// (name, value) as bytes: no UTF-8 check per name for lookups.
    fn raw(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.block.split(|b| *b == b'\n').filter_map(|line| {
            let colon = memchr::memchr(b':', line)?;
            Some((&line[..colon], &line[colon + 1..]))
        })
    }

    /// The first value of `name` as text, if any and if it is visible ASCII.
    pub fn get_str(&self, name: &HeaderName) -> Option<&str> {
        let name = name.as_str().as_bytes();
        self.raw()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The fields as header (name, value) pairs whose values share this block (no copy).
    pub fn header_pairs(&self) -> impl Iterator<Item = (HeaderName, HeaderValue)> + '_ {
        let mut offset = 0usize;
        self.block.split(|b| *b == b'\n').filter_map(move |line| {
            let start = offset;
            offset += line.len() + 1;
            let colon = memchr::memchr(b':', line)?;
            let name = HeaderName::from_bytes(&line[..colon]).ok()?;
            let value_start = start + colon + 1;
            let value = self.block.slice(value_start..start + line.len());
            let value = HeaderValue::from_maybe_shared(value).ok()?;
            Some((name, value))
        })
    }

    /// The fields as a map (built once, on first use).
    pub fn map(&self) -> &HeaderMap {
        self.map.get_or_init(|| Box::new(self.to_map()))
    }

    /// A fresh map of the fields, for callers that change it.
    pub fn to_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.len());
        for (name, value) in self.header_pairs() {
            map.append(name, value);
        }
        map
    }
}

impl Clone for StoredFields {
    /// Shares the block; the lazily built map is not copied.
    fn clone(&self) -> StoredFields {
        StoredFields {
            block: self.block.clone(),
            count: self.count,
            map: OnceBox::new(),
        }
    }
}

impl std::fmt::Debug for StoredFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(n, v)| (n, String::from_utf8_lossy(v))))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("cache-control", HeaderValue::from_static("max-age=60"));
        h.append("set-cookie", HeaderValue::from_static("a=1"));
        h.append("set-cookie", HeaderValue::from_static("b=2; Path=/"));
        h.insert("x-empty", HeaderValue::from_static(""));
        h.insert("etag", HeaderValue::from_static("\"v1:2\""));
        h
    }

    #[test]
    fn round_trips_every_field_in_order() {
        let h = sample();
        let f = StoredFields::from_map(&h);
        assert_eq!(f.len(), 5);
        assert_eq!(f.map(), &h);
        assert_eq!(f.to_map(), h);
        let names: Vec<&str> = f.iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "cache-control",
                "set-cookie",
                "set-cookie",
                "x-empty",
                "etag"
            ]
        );
        assert_eq!(f.get_str(&http::header::ETAG), Some("\"v1:2\""));
        assert_eq!(f.values("set-cookie").count(), 2);
        assert_eq!(f.values("x-empty").next(), Some(&b""[..]));
        assert_eq!(f.get_str(&http::header::AGE), None);
    }

    #[test]
    fn map_values_share_the_block() {
        let f = StoredFields::from_map(&sample());
        let block = f.block.as_ptr_range();
        let etag = f.map().get("etag").map(|v| v.as_bytes().as_ptr());
        assert!(etag.is_some_and(|p| block.contains(&p)));
    }

    #[test]
    fn empty() {
        let f = StoredFields::from_map(&HeaderMap::new());
        assert!(f.is_empty());
        assert_eq!(f.iter().count(), 0);
        assert!(f.map().is_empty());
    }
}
