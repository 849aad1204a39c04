//! The primary cache key.

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
        let host = host.trim();
        // Default port elided (RFC 3986 §6.2.3): `a:80`, `a:` and `a` are one host.
        let host = host
            .strip_suffix(":80")
            .or_else(|| host.strip_suffix(':'))
            .unwrap_or(host);
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
}
