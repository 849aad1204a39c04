//! The load pipeline: TOML text → [`Config`] (every error at its line, `recover.rs`), the
//! paths relative to the file, command-line overrides, and validation (setting ranges, then
//! `validate/`'s checks).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::units::Size;
use super::{
    BackendConfig, Config, ConfigError, DEFAULT_CONFIG, locate, recover, settings, validate,
};

/// Command-line overrides, applied on top of the file (in the style of varnishd's `-a`/`-b`).
#[derive(Clone, Debug, Default)]
pub struct CliOverrides {
    pub listen: Vec<SocketAddr>,
    pub backend: Option<(String, u16)>,
    pub admin: Option<SocketAddr>,
    pub cache_size: Option<u64>,
    /// `--vcl FILE`: the VCL file is the policy (replaces `[vcl] file`); compiled again on
    /// every reload (by `vcl::attach`, before the other overrides apply).
    pub vcl: Option<PathBuf>,
}

impl Config {
    /// Parses and validates `text`; `file` is only used to name the source in errors. Every
    /// error is reported, sorted by line (see [`Config::read`]).
    pub fn parse(text: &str, file: &str) -> Result<Config, Vec<ConfigError>> {
        match Config::read(text, file) {
            (Some(config), errors) if errors.is_empty() => Ok(config),
            (_, errors) => Err(errors),
        }
    }

    /// Every error of `text`, sorted by line: those of reading it (`recover.rs` reads on past
    /// each), then the checks of what was read, except checks of a table where a value had to
    /// be stood in for (they would report the stand-in, not the file). Also the configuration
    /// as read, when every key could be read as written (so only checks failed, if anything):
    /// `shellac check` asks the machine about it too.
    pub fn read(text: &str, file: &str) -> (Option<Config>, Vec<ConfigError>) {
        let mut read = recover::deserialize::<Config>(text, file);
        let mut errors = std::mem::take(&mut read.errors);
        let mut as_written = None;
        if let Some(mut config) = read.value.take() {
            for (i, b) in config.backends.iter_mut().enumerate() {
                if b.name.is_empty() {
                    b.name = format!("backend{i}");
                }
            }
            for (i, r) in config.rules.iter_mut().enumerate() {
                if r.name.is_empty() {
                    r.name = format!("rule{i}");
                }
            }
            for (i, site) in config.sites.iter_mut().enumerate() {
                if site.name.is_empty() {
                    site.name = format!("site{i}");
                }
                for (j, r) in site.rules.iter_mut().flatten().enumerate() {
                    if r.name.is_empty() {
                        r.name = format!("rule{j}");
                    }
                }
            }
            for (i, t) in config.tls.iter_mut().enumerate() {
                if t.name.is_empty() {
                    t.name = format!("tls{i}");
                }
            }
            let table = |p: &[String]| p[..p.len().saturating_sub(1)].to_vec();
            let consequence = |path: &[String]| {
                let related = |t: &Vec<String>| path.starts_with(t) || t.starts_with(path);
                read.removed.iter().any(related)
                    || read
                        .stood_in
                        .iter()
                        .any(|t| related(t) || table(path) == table(t))
            };
            let stood = |path: &[String]| {
                let related = |t: &Vec<String>| path.starts_with(t) || t.starts_with(path);
                read.removed.iter().chain(&read.stood_in).any(related)
            };
            // A value checked on its own is reported unless it is itself a stand-in; a check
            // across keys is not, when a key of its table was stood in for.
            let mut local = settings::check_ranges(&config);
            local.extend(validate::local(&config));
            let at = |path: &[String], msg| {
                read.to_original(locate::at_path(&read.text, file, path, msg))
            };
            for (path, msg) in local {
                if !stood(&path) {
                    errors.push(at(&path, msg));
                }
            }
            for (path, msg) in validate::across(&config) {
                if !consequence(&path) {
                    errors.push(at(&path, msg));
                }
            }
            if read.stood_in.is_empty() && read.removed.is_empty() {
                as_written = Some(config);
            }
        }
        errors.sort_by_key(|e| (e.line, e.column));
        (as_written, errors)
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
        Config::load_text(path).map(|(config, _)| config)
    }

    /// Reads and parses a config file; also returns its text (to locate later findings).
    pub fn load_text(path: &Path) -> Result<(Config, String), Vec<ConfigError>> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![ConfigError {
                file: file.clone(),
                line: 0,
                column: 0,
                key: String::new(),
                message: format!("cannot read config file: {e}"),
            }]
        })?;
        let mut config = Config::parse(&text, &file)?;
        config.relative_to(path.parent().unwrap_or(Path::new(".")));
        Ok((config, text))
    }

    /// Takes the paths the file gives relative to its directory (`[vcl] file`) from `base`,
    /// the configuration file's directory.
    pub fn relative_to(&mut self, base: &Path) {
        if let Some(file) = &self.vcl.file
            && file.is_relative()
        {
            self.vcl.file = Some(base.join(file));
        }
        for site in &mut self.sites {
            if let Some(file) = &site.vcl
                && file.is_relative()
            {
                site.vcl = Some(base.join(file));
            }
        }
    }

    /// The embedded default configuration.
    pub fn embedded_default() -> Config {
        Config::parse(DEFAULT_CONFIG, "<embedded default>")
            .unwrap_or_else(|e| panic!("embedded default config is invalid: {e:?}"))
    }

    /// The configuration as TOML text in the file's own syntax, every value exact (durations
    /// and sizes in their largest whole unit): parsing it gives the same configuration back.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
    }

    /// Applies command-line overrides and re-validates. `--vcl FILE` is the policy layer's
    /// (`vcl::attach`, before this).
    pub fn apply(&mut self, o: &CliOverrides) -> Result<(), Vec<ConfigError>> {
        if !o.listen.is_empty() {
            self.server.listen = o.listen.clone();
        }
        if let Some(admin) = o.admin {
            self.server.admin = Some(admin);
        }
        if let Some(size) = o.cache_size {
            self.cache.memory_size = Size(size);
            if self.cache.max_object_size.0 > size {
                self.cache.max_object_size = Size(size / 4);
            }
        }
        if let Some((host, port)) = &o.backend {
            match self.backends.first_mut() {
                Some(b) => {
                    b.host = host.clone();
                    b.port = *port;
                }
                None => self
                    .backends
                    .push(BackendConfig::new("default", host, *port)),
            }
        }
        let problems = self.validate();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems
                .into_iter()
                .map(|(key, message)| ConfigError {
                    file: "<command line>".into(),
                    line: 0,
                    column: 0,
                    key: key.join("."),
                    message,
                })
                .collect())
        }
    }

    /// Every problem with this configuration: the ranges of the setting definitions
    /// ([`settings`]) and the checks across settings (`validate/`), as (key path, problem).
    pub fn validate(&self) -> Vec<(Vec<String>, String)> {
        let mut out = settings::check_ranges(self);
        out.extend(validate::local(self));
        out.extend(validate::across(self));
        out
    }
}
