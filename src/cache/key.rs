//! The primary cache key, and its borrowed form for lookups ([`KeyRef`], built on the stack
//! by [`KeyText`]).

/// The primary cache key: a structured tuple (host, path and query, variant), never a
/// concatenated string, so two different requests cannot collide into one key.
///
/// Stored compactly: host and path share one allocation and `host_len` splits them. Equality
/// and hashing include `host_len`, so (`a`, `b/c`) and (`ab`, `/c`) stay two keys. One
/// allocation instead of two saves a malloc per lookup and ~30 bytes per cached object
/// (bench/RESULTS.md, "memory per object").
///
/// It also carries the site its request was for ([`CacheKey::site`], a `[[site]]
/// cache_share` account, `cache/shares.rs`): not part of its identity (equality and hashing
/// leave it out), it tells the memory tier whose share an object stored under it counts in.
/// It fits the padding after `host_len`.
#[derive(Clone, Debug)]
pub struct CacheKey {
    /// The lower-cased authority (default port elided), then the path and query as received.
    text: Box<str>,
    /// Bytes of `text` that are the authority.
    host_len: u32,
    /// Secondary key: hash of the request values of the URL's `Vary` fields (0 = no Vary).
    pub variant: u64,
    /// The site account its objects count in (`0`: none).
    site: u16,
}

impl PartialEq for CacheKey {
    fn eq(&self, other: &CacheKey) -> bool {
        self.host_len == other.host_len && self.variant == other.variant && self.text == other.text
    }
}

impl Eq for CacheKey {}

impl std::hash::Hash for CacheKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
        self.host_len.hash(state);
        self.variant.hash(state);
    }
}

impl CacheKey {
    pub fn new(host: &str, path_and_query: &str) -> CacheKey {
        let host = normal_host(host);
        let mut text = String::with_capacity(host.len() + path_and_query.len());
        text.push_str(host);
        text.make_ascii_lowercase();
        text.push_str(path_and_query);
        CacheKey::from_text(text, host.len(), 0)
    }

    /// A key from parts already normalised (a key read back from disk).
    pub fn from_parts(host: &str, path_and_query: &str, variant: u64) -> CacheKey {
        let mut text = String::with_capacity(host.len() + path_and_query.len());
        text.push_str(host);
        text.push_str(path_and_query);
        CacheKey::from_text(text, host.len(), variant)
    }

    fn from_text(text: String, host_len: usize, variant: u64) -> CacheKey {
        // Hosts are bounded by the request-head limits, far below 4 GiB.
        let host_len = u32::try_from(host_len)
            .unwrap_or(u32::MAX)
            .min(text.len() as u32);
        CacheKey {
            text: text.into_boxed_str(),
            host_len,
            variant,
            site: 0,
        }
    }

    /// Lower-cased authority with the default port elided.
    pub fn host(&self) -> &str {
        self.text.get(..self.host_len as usize).unwrap_or("")
    }

    /// Path and query exactly as received.
    pub fn path_and_query(&self) -> &str {
        self.text.get(self.host_len as usize..).unwrap_or("")
    }

    /// The same URL, another variant.
    pub fn with_variant(&self, variant: u64) -> CacheKey {
        CacheKey {
            variant,
            ..self.clone()
        }
    }

    /// The URL without a variant (the primary key).
    pub fn primary(&self) -> CacheKey {
        self.with_variant(0)
    }

    /// The authority, then the path and query, as one text (`host_len` splits it).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Bytes of [`CacheKey::text`] that are the authority.
    pub fn host_len(&self) -> usize {
        self.host_len as usize
    }

    /// The site account objects stored under this key count in (`0`: none).
    pub fn site(&self) -> u16 {
        self.site
    }

    /// Says which site account objects stored under this key count in (set once the
    /// request's site is known, before its lookup; keys derived from it keep it).
    pub fn set_site(&mut self, site: u16) {
        self.site = site;
    }

    /// A key from its text and split as [`CacheKey::text`] and [`CacheKey::host_len`] give
    /// them (the memory tier keeps keys that way).
    pub fn from_text_parts(text: &str, host_len: usize, variant: u64) -> CacheKey {
        CacheKey::from_text(text.to_owned(), host_len, variant)
    }

    /// This key, borrowed ([`KeyRef`]).
    pub fn as_key_ref(&self) -> KeyRef<'_> {
        KeyRef {
            text: self.text.as_bytes(),
            host_len: self.host_len,
            variant: self.variant,
        }
    }
}

/// The host part of a key: trimmed, the default port elided (RFC 3986 §6.2.3: `a:80`, `a:`
/// and `a` are one host). Lower-cased by the caller, as it copies it.
fn normal_host(host: &str) -> &str {
    let host = host.trim();
    host.strip_suffix(":80")
        .or_else(|| host.strip_suffix(':'))
        .unwrap_or(host)
}

/// A key's text built without a heap allocation for a typical URL (a fast hit's lookup,
/// `proxy/fast_hit/`): [`CacheKey::new`]'s normalisation into a buffer on the stack, read as
/// a [`KeyRef`]. A text longer than the buffer goes to the heap, as a `CacheKey`'s would.
/// A plain array, not a `SmallVec`, and bytes, not a `str` checked again: built through a
/// `SmallVec` and `str::from_utf8` it cost ~420 instructions a hit, more than the
/// `CacheKey::new` it replaced (callgrind, bench/RESULTS.md "thirteenth stop: user").
pub struct KeyText {
    inline: [u8; KEY_TEXT_INLINE],
    /// The text when it is longer than `inline` (else empty: no allocation).
    heap: Vec<u8>,
    len: usize,
    host_len: u32,
}

/// Bytes of a key's text kept on the stack (host and path of nearly every request).
const KEY_TEXT_INLINE: usize = 256;

impl KeyText {
    /// The text [`CacheKey::new`]`(host, path_and_query)` would hold.
    #[inline]
    pub fn new(host: &str, path_and_query: &str) -> KeyText {
        let host = normal_host(host);
        let len = host.len() + path_and_query.len();
        let mut text = KeyText {
            inline: [0; KEY_TEXT_INLINE],
            heap: Vec::new(),
            len,
            host_len: u32::try_from(host.len()).unwrap_or(u32::MAX),
        };
        let buf = if len <= KEY_TEXT_INLINE {
            &mut text.inline[..len]
        } else {
            text.heap.resize(len, 0);
            &mut text.heap[..]
        };
        let (h, p) = buf.split_at_mut(host.len());
        h.copy_from_slice(host.as_bytes());
        h.make_ascii_lowercase();
        p.copy_from_slice(path_and_query.as_bytes());
        text
    }

    /// The key of this text and `variant` (0: the primary key).
    #[inline]
    pub fn key(&self, variant: u64) -> KeyRef<'_> {
        let text = if self.len <= KEY_TEXT_INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap[..]
        };
        KeyRef {
            text,
            host_len: self.host_len.min(text.len() as u32),
            variant,
        }
    }
}

/// A cache key borrowed: the same identity as a [`CacheKey`] (text, host split, variant), for
/// lookups that need no key of their own. The memory tier hashes and compares its text as
/// bytes, as it does a `CacheKey`'s; it hashes as the `CacheKey` it stands for
/// (`quick_cache`'s [`Equivalent`](quick_cache::Equivalent): the vary index).
#[derive(Clone, Copy, Debug)]
pub struct KeyRef<'a> {
    /// UTF-8 (a `CacheKey`'s text, or a `str` lower-cased in ASCII followed by another).
    text: &'a [u8],
    host_len: u32,
    pub variant: u64,
}

impl<'a> KeyRef<'a> {
    /// The authority, then the path and query ([`CacheKey::text`]), as bytes.
    pub fn text(&self) -> &'a [u8] {
        self.text
    }

    /// Bytes of [`KeyRef::text`] that are the authority.
    pub fn host_len(&self) -> usize {
        self.host_len as usize
    }

    /// The same URL, another variant.
    pub fn with_variant(self, variant: u64) -> KeyRef<'a> {
        KeyRef { variant, ..self }
    }

    /// The key as an owned [`CacheKey`] (no site account).
    pub fn to_key(&self) -> CacheKey {
        let text = String::from_utf8_lossy(self.text);
        CacheKey::from_text_parts(&text, self.host_len as usize, self.variant)
    }
}

/// As `CacheKey`'s (its text hashed as a `str`): a `KeyRef` and its `CacheKey` hash alike.
impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match std::str::from_utf8(self.text) {
            Ok(text) => text.hash(state),
            // Never (see `text`); then it equals no `CacheKey` either.
            Err(_) => self.text.hash(state),
        }
        self.host_len.hash(state);
        self.variant.hash(state);
    }
}

impl quick_cache::Equivalent<CacheKey> for KeyRef<'_> {
    fn equivalent(&self, key: &CacheKey) -> bool {
        self.host_len == key.host_len
            && self.variant == key.variant
            && self.text == key.text.as_bytes()
    }
}

impl std::fmt::Display for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_is_no_part_of_a_keys_identity() {
        use std::hash::BuildHasher;
        let a = CacheKey::new("h", "/a");
        let mut b = a.clone();
        b.set_site(7);
        assert_eq!(a, b);
        let hasher = std::collections::hash_map::RandomState::new();
        assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
        assert_eq!(b.with_variant(3).site(), 7);
        // In the padding: a key is no larger for it.
        assert_eq!(std::mem::size_of::<CacheKey>(), 32);
    }

    /// A borrowed key built on the stack is the key `CacheKey::new` builds: same text, split,
    /// hash and equality (host lower-cased, default port elided, path as received), for a
    /// short URL and one longer than the stack buffer.
    #[test]
    fn a_key_text_is_the_key_new_builds() {
        use quick_cache::Equivalent;
        use std::hash::BuildHasher;
        let hasher = std::collections::hash_map::RandomState::new();
        let long = format!("/{}", "a".repeat(3 * KEY_TEXT_INLINE));
        for (host, path) in [
            (" Example.COM:80 ", "/A?b=C"),
            ("h:", "/x"),
            ("h:8080", "/"),
            ("Host", long.as_str()),
        ] {
            let owned = CacheKey::new(host, path);
            let text = KeyText::new(host, path);
            let borrowed = text.key(0);
            assert_eq!(borrowed.text(), owned.text().as_bytes(), "{host} {path}");
            assert_eq!(borrowed.host_len(), owned.host_len());
            assert!(borrowed.equivalent(&owned));
            assert_eq!(hasher.hash_one(borrowed), hasher.hash_one(&owned));
            assert_eq!(borrowed.to_key(), owned);
            let variant = owned.with_variant(9);
            assert!(!borrowed.equivalent(&variant));
            assert!(borrowed.with_variant(9).equivalent(&variant));
            assert_eq!(
                hasher.hash_one(owned.as_key_ref().with_variant(9)),
                hasher.hash_one(&variant)
            );
        }
        assert!(
            !KeyText::new("ab", "/c")
                .key(0)
                .equivalent(&CacheKey::new("a", "b/c"))
        );
    }
}
