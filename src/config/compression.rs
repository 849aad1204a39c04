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
    /// gzip level per media type (`types`' patterns), over `gzip_level`; the most specific
    /// (longest) matching pattern wins. Default empty.
    pub levels: std::collections::BTreeMap<String, GzipLevel>,
    /// Codings a hot object also gets a representation in, built in the background.
    /// Default `["zstd", "br"]`; empty: none.
    pub encodings: Vec<Encoding>,
    /// Hits by clients that prefer one of `encodings` before its representation is built.
    /// Default 2.
    pub hot_hits: u32,
    /// Brotli quality of those representations, 1 to 11. Default 11.
    pub br_level: u32,
    /// zstd level of those representations, 1 to 19 (window at most 8 MB). Default 19.
    pub zstd_level: u32,
    /// Representations waiting to be built, at most; more are dropped (counted). Default 64.
    pub queue: u32,
}

/// A gzip level, 1 to 9 (a `[compression] levels` value; another is a configuration error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct GzipLevel(pub u32);

impl TryFrom<u32> for GzipLevel {
    type Error = String;
    fn try_from(level: u32) -> Result<GzipLevel, String> {
        if (1..=9).contains(&level) {
            Ok(GzipLevel(level))
        } else {
            Err(format!("a gzip level is 1 to 9, not {level}"))
        }
    }
}

impl From<GzipLevel> for u32 {
    fn from(level: GzipLevel) -> u32 {
        level.0
    }
}

/// A coding Shellac builds representations in, in the background (`[compression] encodings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Brotli (RFC 7932).
    Br,
    /// Zstandard (RFC 8878), window at most 8 MB (RFC 9659).
    Zstd,
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
            levels: Default::default(),
            encodings: vec![Encoding::Zstd, Encoding::Br],
            hot_hits: 2,
            br_level: 11,
            zstd_level: 19,
            queue: 64,
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

impl CompressionConfig {
    /// The gzip level of a body of `content_type`: `levels`' most specific (longest)
    /// matching pattern, else `gzip_level`.
    pub fn gzip_level_for(&self, content_type: &[u8]) -> u32 {
        let essence = content_type
            .split(|b| *b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        self.levels
            .iter()
            .filter(|(pattern, _)| !essence.is_empty() && type_matches(pattern.as_bytes(), essence))
            .max_by_key(|(pattern, _)| pattern.len())
            .map_or(self.gzip_level, |(_, level)| level.0)
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
    fn per_type_levels_take_the_most_specific_pattern() {
        let c: CompressionConfig = toml::from_str(
            r#"
            gzip_level = 6
            levels = { "text/*" = 4, "text/html" = 9, "*+json" = 1 }
            "#,
        )
        .unwrap();
        assert_eq!(c.gzip_level_for(b"text/html; charset=utf-8"), 9);
        assert_eq!(c.gzip_level_for(b"text/css"), 4);
        assert_eq!(c.gzip_level_for(b"application/ld+json"), 1);
        assert_eq!(c.gzip_level_for(b"application/json"), 6);
        assert_eq!(c.gzip_level_for(b""), 6);
        let bad = toml::from_str::<CompressionConfig>(r#"levels = { "text/html" = 10 }"#);
        assert!(bad.unwrap_err().to_string().contains("1 to 9"));
    }

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
