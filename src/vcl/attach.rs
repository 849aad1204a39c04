//! `[vcl] file` (or `--vcl FILE`) beside a configuration: the policy layer compiles the VCL
//! program and holds it; the configuration keeps the file's path and the compiler settings,
//! and takes the program's backends, probes and directors as its own origins.

use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, ConfigError};

use super::ir::Program;
use super::{ErrorKind, Options, VclError};

/// The VCL programs a configuration runs: the global one (`[vcl] file`; `None`: the TOML
/// `[[rule]]`s) and each `[[site]] vcl`'s, by site name.
#[derive(Clone, Default)]
pub struct Programs {
    pub global: Option<Arc<Program>>,
    pub sites: Vec<(String, Arc<Program>)>,
}

impl From<Option<Arc<Program>>> for Programs {
    fn from(global: Option<Arc<Program>>) -> Programs {
        Programs {
            global,
            sites: Vec::new(),
        }
    }
}

/// Compiles the VCL file `vcl` names (`--vcl FILE`), else the configuration's `[vcl] file`,
/// and makes the program's origins the configuration's (`global: None`: the TOML
/// `[[rule]]`s are the policy); then every `[[site]] vcl` file, whose origins join the
/// configuration's. Every error of every VCL file, located in it.
pub fn attach(config: &mut Config, vcl: Option<&Path>) -> Result<Programs, Vec<ConfigError>> {
    let global = vcl
        .map(Path::to_path_buf)
        .or_else(|| config.vcl.file.clone())
        .map(|path| attach_file(config, &path));
    let sites = attach_sites(config);
    match (global.transpose(), sites) {
        (Ok(global), Ok(sites)) => Ok(Programs { global, sites }),
        (global, sites) => Err(global
            .err()
            .into_iter()
            .flatten()
            .chain(sites.err().into_iter().flatten())
            .collect()),
    }
}

/// Compiles every `[[site]] vcl` file; the origins each declares join the configuration's
/// (once: `vcl.site_origins_from_files`), a name already taken (by `[[backend]]`, the global
/// file or another site's) an error located in the file that declares it again.
fn attach_sites(config: &mut Config) -> Result<Vec<(String, Arc<Program>)>, Vec<ConfigError>> {
    let mut programs = Vec::new();
    let mut errors = Vec::new();
    let join = !config.vcl.site_origins_from_files;
    let files: Vec<(String, std::path::PathBuf)> = config
        .sites
        .iter()
        .filter_map(|s| Some((s.name.clone(), s.vcl.clone()?)))
        .collect();
    for (site, path) in files {
        let program = match compile(config, &path) {
            Ok(p) => p,
            Err(e) => {
                errors.extend(e);
                continue;
            }
        };
        if join {
            errors.extend(join_origins(config, &program.origins, &path));
        }
        programs.push((site, Arc::new(program)));
    }
    config.vcl.site_origins_from_files = true;
    if errors.is_empty() {
        Ok(programs)
    } else {
        Err(errors)
    }
}

/// Adds `origins` (of the site VCL file `path`) to the configuration's: one name space for
/// backends and directors, one for probes.
fn join_origins(
    config: &mut Config,
    origins: &super::origins::Origins,
    path: &Path,
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let taken = |c: &Config, name: &str| {
        c.backends.iter().any(|b| b.name == name) || c.directors.iter().any(|d| d.name == name)
    };
    let clash = |name: &str, what: &str| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let line = text
            .lines()
            .position(|l| {
                l.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                    .any(|w| w == name)
            })
            .map_or(0, |i| i + 1);
        ConfigError {
            file: path.display().to_string(),
            line,
            column: 1,
            key: String::new(),
            message: format!(
                "{what} `{name}` is declared already (in [[backend]], the [vcl] file or another site's VCL file): backends, directors and probes are one name space, give it another name"
            ),
        }
    };
    for b in &origins.backends {
        if taken(config, &b.name) {
            errors.push(clash(&b.name, "backend"));
        } else {
            config.backends.push(b.clone());
        }
    }
    for d in &origins.directors {
        if taken(config, &d.name) {
            errors.push(clash(&d.name, "director"));
        } else {
            config.directors.push(d.clone());
        }
    }
    for p in &origins.probes {
        if config.probes.iter().any(|q| q.name == p.name) {
            errors.push(clash(&p.name, "probe"));
        } else {
            config.probes.push(p.clone());
        }
    }
    errors
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

/// A configuration and the VCL programs it runs.
pub type Running = (Arc<Config>, Programs);

/// The programs of a configuration about to run: compiled from its `[vcl] file` and its
/// sites' `vcl` files (their origins made the configuration's when they are not yet).
pub fn for_config(config: Arc<Config>) -> Result<Running, Vec<ConfigError>> {
    let has_sites = config.sites.iter().any(|s| s.vcl.is_some());
    if config.vcl.file.is_none() && !has_sites {
        return Ok((config, Programs::default()));
    }
    let mut config = (*config).clone();
    let global = match config.vcl.file.clone() {
        Some(path) if config.vcl.origins_from_file => Some(Arc::new(compile(&config, &path)?)),
        Some(path) => Some(attach_file(&mut config, &path)?),
        None => None,
    };
    let sites = attach_sites(&mut config)?;
    Ok((Arc::new(config), Programs { global, sites }))
}

fn compile(config: &Config, path: &Path) -> Result<Program, Vec<ConfigError>> {
    let options = Options {
        err_unref: config.vcl.err_unref,
        match_limit: config.vcl.match_limit,
        timeouts: super::ir::Timeouts {
            connect: config.vcl.connect_timeout.0,
            first_byte: config.vcl.first_byte_timeout.0,
            between_bytes: config.vcl.between_bytes_timeout.0,
            backend_idle: config.vcl.backend_idle_timeout.0,
        },
        storages: Some(
            config
                .storage
                .named
                .iter()
                .map(|n| n.name.clone())
                .collect(),
        ),
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
