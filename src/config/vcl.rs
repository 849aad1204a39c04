//! `[vcl]`: a Varnish VCL file as the policy program (docs/vcl.md). The policy layer
//! (`vcl::attach`) compiles the file when the configuration is loaded (and on every reload)
//! and holds the program; its backends, probes and directors become the configuration's, so
//! `[[backend]]`, `[[probe]]`, `[[director]]`, `[routing]` and `[[rule]]` are not given
//! beside it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::units::Dur;

/// `[vcl]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct VclConfig {
    /// The VCL file, relative to the configuration file's directory. Default: none (the
    /// TOML `[[rule]]`s are the policy).
    pub file: Option<PathBuf>,
    /// Declarations nothing uses are errors, as Varnish's `vcc_feature +err_unref`.
    /// Default true.
    pub err_unref: bool,
    /// Backtracking steps a regular expression that needs the backtracking engine may take
    /// per match (Varnish's `pcre2_match_limit`); past it the match fails (counter
    /// `vcl_match_limit`). Default 10000.
    pub match_limit: usize,
    /// TCP connect timeout of the VCL file's backends that do not set `.connect_timeout`,
    /// and `bereq.connect_timeout`'s default (Varnish's `connect_timeout`). Default 3.5 s.
    pub connect_timeout: Dur,
    /// First-byte timeout of backends without `.first_byte_timeout` (Varnish's
    /// `first_byte_timeout`). Default 60 s.
    pub first_byte_timeout: Dur,
    /// Between-bytes timeout of backends without `.between_bytes_timeout` (Varnish's
    /// `between_bytes_timeout`). Default 60 s.
    pub between_bytes_timeout: Dur,
    /// How long the VCL file's backends keep an idle connection for reuse (Varnish's
    /// `backend_idle_timeout`; a `[[backend]]`'s `idle_timeout`). Default 60 s.
    pub backend_idle_timeout: Dur,
    /// `return (restart)` per request at most (Varnish's `max_restarts`). Default 4.
    pub max_restarts: u32,
    /// `return (retry)` per backend fetch at most (Varnish's `max_retries`). Default 4.
    pub max_retries: u32,
    /// The backends, probes and directors are the VCL file's (made so by `vcl::attach`); not
    /// in the TOML.
    #[serde(skip)]
    pub origins_from_file: bool,
    /// The `[[site]] vcl` files' backends, probes and directors were added to the
    /// configuration's (by `vcl::attach`).
    #[serde(skip)]
    pub site_origins_from_files: bool,
}

impl Default for VclConfig {
    fn default() -> VclConfig {
        VclConfig {
            file: None,
            err_unref: true,
            // Varnish's pcre2_match_limit (vcl::pcre::DEFAULT_MATCH_LIMIT).
            match_limit: 10_000,
            // Varnish's parameter defaults.
            connect_timeout: Dur(std::time::Duration::from_millis(3500)),
            first_byte_timeout: Dur(std::time::Duration::from_secs(60)),
            between_bytes_timeout: Dur(std::time::Duration::from_secs(60)),
            backend_idle_timeout: Dur(std::time::Duration::from_secs(60)),
            max_restarts: 4,
            max_retries: 4,
            origins_from_file: false,
            site_origins_from_files: false,
        }
    }
}
