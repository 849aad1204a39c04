//! `[log]`: the access log's destination, format and buffer.

use serde::{Deserialize, Serialize};

/// `[log]`: the access log. Records are buffered per worker and written by a background
/// thread; the request path never waits for the disk.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// Where access-log lines go: a file path (appended to, created if missing, reopened on
    /// SIGUSR1 and on reload), `"stdout"`, or `"off"`. Default `"off"`.
    pub access_log: String,
    /// `"combined"` (NCSA combined), `"common"`, `"json"` (one JSON object per line), or a
    /// format string with `%` directives (docs/configuration.md). Default `"combined"`.
    pub format: String,
    /// Records each worker thread can hold until the writer drains them; beyond that records
    /// are dropped and counted in `log_dropped`. Default 8192, between 16 and 1048576.
    pub buffer: usize,
    /// Varnish-style log records (VSL) kept in memory for `GET /vsl`; 0 (the default) keeps
    /// none.
    pub vsl_records: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            access_log: "off".into(),
            format: "combined".into(),
            buffer: 8192,
            vsl_records: 0,
        }
    }
}

impl LogConfig {
    /// The parsed format when the access log is on.
    pub fn active_format(&self) -> Option<crate::txlog::Format> {
        if self.access_log == "off" {
            return None;
        }
        crate::txlog::Format::parse(&self.format).ok()
    }
}
