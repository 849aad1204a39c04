//! Why a file cannot be cut: what the parser found wrong, in a few words for the log.

/// Why a file cannot be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Bad(pub &'static str);
