//! `[vcl] file` (or `--vcl FILE`) beside a configuration: the policy layer compiles the VCL
//! program and holds it; the configuration keeps the file's path and the compiler settings,
//! and takes the program's backends, probes and directors as its own origins.

use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, ConfigError};

use super::ir::Program;
use super::{ErrorKind, Options, VclError};

/// Compiles the VCL file `vcl` names (`--vcl FILE`), else the configuration's `[vcl] file`,
/// and makes the program's origins the configuration's. `None`: the TOML `[[rule]]`s are the
/// policy. Every error of the VCL file, located in it.
pub fn attach(
    config: &mut Config,
    vcl: Option<&Path>,
) -> Result<Option<Arc<Program>>, Vec<ConfigError>> {
    match vcl
        .map(Path::to_path_buf)
        .or_else(|| config.vcl.file.clone())
    {
        Some(path) => attach_file(config, &path).map(Some),
        None => Ok(None),
    }
}

/// Compiles the VCL file at `path` and makes it the configuration's policy file and its
/// origins the configuration's (`shellac serve --vcl FILE` on the embedded default).
pub fn attach_file(config: &mut Config, path: &Path) -> Result<Arc<Program>, Vec<ConfigError>> {
    let program = compile(config, path)?;
    config.vcl.file = Some(path.to_path_buf());
    program.origins.apply_to(config);
    config.rules.clear();
    config.vcl.origins_from_file = true;
    Ok(Arc::new(program))
}

/// A configuration and the VCL program it runs (`None`: its rules).
pub type Running = (Arc<Config>, Option<Arc<Program>>);

/// The program of a configuration about to run: compiled from its `[vcl] file` (its origins
/// made the configuration's when they are not yet), `None` without one.
pub fn for_config(config: Arc<Config>) -> Result<Running, Vec<ConfigError>> {
    let Some(path) = config.vcl.file.clone() else {
        return Ok((config, None));
    };
    if config.vcl.origins_from_file {
        let program = compile(&config, &path)?;
        return Ok((config, Some(Arc::new(program))));
    }
    let mut config = (*config).clone();
    let program = attach_file(&mut config, &path)?;
    Ok((Arc::new(config), Some(program)))
}

fn compile(config: &Config, path: &Path) -> Result<Program, Vec<ConfigError>> {
    let options = Options {
        err_unref: config.vcl.err_unref,
        match_limit: config.vcl.match_limit,
        timeouts: super::ir::Timeouts {
            connect: config.vcl.connect_timeout.0,
            first_byte: config.vcl.first_byte_timeout.0,
            between_bytes: config.vcl.between_bytes_timeout.0,
        },
    };
    super::load::load(path)
        .and_then(|src| super::compile_with(&src, &options))
        .map_err(|errors| errors.into_iter().map(error).collect())
}

/// What the policy is, for the summaries: `VCL FILE (DIALECT, N subroutines of its own)`.
pub fn describe(file: &Path, p: &Program) -> String {
    let own = p.defined.len() + p.subs.iter().filter(|s| !s.name.starts_with('#')).count();
    format!(
        "VCL {} ({}, {own} subroutine{} of its own)",
        file.display(),
        p.dialect.as_str(),
        if p.defined.len() + p.subs.len() == 1 {
            ""
        } else {
            "s"
        },
    )
}

/// A VCL error as a configuration error: its file, line and column; unsupported features say
/// so.
pub fn error(e: VclError) -> ConfigError {
    let mut message = match e.kind {
        ErrorKind::Invalid => e.message,
        ErrorKind::Unsupported => format!("not supported: {}", e.message),
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
