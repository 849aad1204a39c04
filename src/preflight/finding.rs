//! A preflight finding: how much it matters, the dotted key it is about, what the machine says.

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// `serve` would refuse to start: `check` fails.
    Error,
    /// Worth knowing; `check` still passes.
    Warning,
}

/// One thing the machine says about the configuration, at a dotted key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub path: Vec<String>,
    pub message: String,
}

/// A dotted key from its parts.
pub(super) fn at(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}
