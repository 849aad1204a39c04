//! `[vcl]`: a Varnish VCL file as the policy program (docs/vcl.md). The file is compiled when
//! the configuration is loaded (and on every reload); its backends, probes and directors
//! become the configuration's, so `[[backend]]`, `[[probe]]`, `[[director]]`, `[routing]` and
//! `[[rule]]` are not given beside it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};

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
}

impl Default for VclConfig {
    fn default() -> VclConfig {
        VclConfig {
            file: None,
            err_unref: true,
            // Varnish's pcre2_match_limit (vcl::pcre::DEFAULT_MATCH_LIMIT).
            match_limit: 10_000,
        }
    }
}

/// What may not stand beside a VCL file (its origins and policy come from it).
pub(super) fn validate(c: &Config) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    if c.vcl.file.is_none() || c.vcl_program.is_some() {
        return out;
    }
    let clash = |what: &str| {
        format!(
            "{what} cannot be given with [vcl] file: the VCL file declares the backends, \
             probes and directors, and is the policy"
        )
    };
    if !c.backends.is_empty() {
        out.push((vec!["backend".to_string()], clash("[[backend]]")));
    }
    if !c.probes.is_empty() {
        out.push((vec!["probe".to_string()], clash("[[probe]]")));
    }
    if !c.directors.is_empty() {
        out.push((vec!["director".to_string()], clash("[[director]]")));
    }
    if c.routing.default.is_some() {
        out.push((
            vec!["routing".to_string(), "default".to_string()],
            clash("[routing] default"),
        ));
    }
    if !c.rules.is_empty() {
        out.push((vec!["rule".to_string()], clash("[[rule]]")));
    }
    out
}

impl Config {
    /// Compiles `[vcl] file` (relative to `base`, the configuration file's directory) and
    /// makes its origins this configuration's. Every error of the VCL file, located in it.
    pub fn attach_vcl(&mut self, base: &Path) -> Vec<ConfigError> {
        let Some(file) = self.vcl.file.clone() else {
            return Vec::new();
        };
        let path = if file.is_absolute() {
            file
        } else {
            base.join(file)
        };
        self.attach_vcl_file(&path)
    }

    /// Compiles the VCL file at `path` and makes it this configuration's program and origins
    /// (`shellac serve --vcl FILE` on the embedded default uses this too).
    pub fn attach_vcl_file(&mut self, path: &Path) -> Vec<ConfigError> {
        let options = crate::vcl::Options {
            err_unref: self.vcl.err_unref,
            match_limit: self.vcl.match_limit,
        };
        let compiled =
            crate::vcl::load::load(path).and_then(|src| crate::vcl::compile_with(&src, &options));
        match compiled {
            Ok(program) => {
                self.vcl.file = Some(path.to_path_buf());
                program.origins.apply_to(self);
                self.rules.clear();
                self.vcl_program = Some(Arc::new(program));
                Vec::new()
            }
            Err(errors) => errors.into_iter().map(vcl_error).collect(),
        }
    }
}

/// A VCL error as a configuration error: its file, line and column; unsupported features say
/// so.
pub fn vcl_error(e: crate::vcl::VclError) -> ConfigError {
    let mut message = match e.kind {
        crate::vcl::ErrorKind::Invalid => e.message,
        crate::vcl::ErrorKind::Unsupported => format!("not supported: {}", e.message),
    };
    // The source line and a caret under the token, as varnishd shows them.
    if let Some(x) = &e.excerpt {
        message.push('\n');
        message.push_str(x);
    }
    ConfigError {
        file: e.file,
        line: e.pos.line as usize,
        column: e.pos.col as usize,
        key: String::new(),
        message,
    }
}
