//! `[compression]`: which bodies Shellac gzips once at fetch and stores compressed, and
//! whether it decodes stored gzip for clients that do not take it (docs/compression.md).

use serde::{Deserialize, Serialize};

use super::units::Size;

/// `[compression]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Negotiate codings: fills ask the origin for gzip, compressible identity bodies are
    /// gzipped once and stored so, stored gzip is decoded for clients without gzip, and
    /// `Vary: Accept-Encoding` is added. Default true.
    pub enabled: bool,
    /// Media types gzipped at fetch: exact (`application/json`), `type/*`, or `*+suffix`
    /// (`*+json`). Compared without parameters and case.
    pub types: Vec<String>,
    /// Bodies shorter than this (by `Content-Length`) are stored as they came. Default 512 B.
    pub min_length: Size,
    /// gzip level, 1 (fastest) to 9 (smallest). Default 6.
    pub gzip_level: u32,
}

/// The media types compressed by default: text, JSON, JavaScript, XML, SVG, WebAssembly and
/// fonts (those that are not compressed already: `font/woff` and `font/woff2` are).
pub const DEFAULT_TYPES: [&str; 13] = [
    "text/*",
    "application/json",
    "*+json",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/xml",
    "*+xml",
    "application/wasm",
    "font/ttf",
    "font/otf",
    "font/collection",
    "application/vnd.ms-fontobject",
];

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            enabled: true,
            types: DEFAULT_TYPES.iter().map(|t| (*t).to_string()).collect(),
            min_length: Size(512),
            gzip_level: 6,
        }
    }
}

impl CompressionConfig {
    /// Whether a body of `content_type` (a `Content-Type` value) is in [`types`].
    ///
    /// [`types`]: CompressionConfig::types
    pub fn compressible(&self, content_type: &[u8]) -> bool {
        let essence = content_type
            .split(|b| *b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        if essence.is_empty() {
            return false;
        }
        self.types
            .iter()
            .any(|t| type_matches(t.as_bytes(), essence))
    }
}

/// `pattern` (`a/b`, `a/*`, `*+suffix`, `*`) against a media type's essence, without case.
fn type_matches(pattern: &[u8], essence: &[u8]) -> bool {
    if pattern == b"*" || pattern == b"*/*" {
        return true;
    }
    if let Some(suffix) = pattern.strip_prefix(b"*") {
        // `*+json`: a structured syntax suffix (RFC 6839).
        return essence.len() > suffix.len()
            && essence[essence.len() - suffix.len()..].eq_ignore_ascii_case(suffix);
    }
    if let Some(top) = pattern.strip_suffix(b"/*") {
        return essence.len() > top.len() + 1
            && essence[..top.len()].eq_ignore_ascii_case(top)
            && essence[top.len()] == b'/';
    }
    pattern.eq_ignore_ascii_case(essence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_types() {
        let c = CompressionConfig::default();
        for t in [
            "text/html",
            "text/css; charset=utf-8",
            "TEXT/Plain",
            "application/json",
            "application/ld+json",
            "application/javascript",
            "image/svg+xml",
            "application/xml",
            "application/wasm",
            "font/ttf",
        ] {
            assert!(c.compressible(t.as_bytes()), "{t}");
        }
        for t in [
            "",
            "image/png",
            "font/woff2",
            "application/octet-stream",
            "texty/html",
            "application/zip",
            "video/mp4",
        ] {
            assert!(!c.compressible(t.as_bytes()), "{t}");
        }
    }
}
