//! How a check says what is wrong: (key path, problem) pairs, the key path as the file's
//! dotted key in parts (`["server", "listen", "0"]`); `load.rs` turns each into a
//! `ConfigError` at the key's line.

/// Every problem a check found, as (key path, problem).
pub(super) type Problems = Vec<(Vec<String>, String)>;

/// A key path from its parts.
pub(super) fn key(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}
