//! The primary cache key.

/// The primary cache key: a structured tuple (host, path and query, variant), never a
/// concatenated string, so two different requests cannot collide into one key.
///
/// Stored compactly: host and path share one allocation and `host_len` splits them. Equality
/// and hashing include `host_len`, so (`a`, `b/c`) and (`ab`, `/c`) stay two keys. One
/// allocation instead of two saves a malloc per lookup and ~30 bytes per cached object
/// (bench/RESULTS.md, "memory per object").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The lower-cased authority (default port elided), then the path and query as received.
    text: Box<str>,
    /// Bytes of `text` that are the authority.
    host_len: u32,
    /// Secondary key: hash of the request values of the URL's `Vary` fields (0 = no Vary).
    pub variant: u64,
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
