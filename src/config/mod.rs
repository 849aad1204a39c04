//! Configuration: raw TOML → validated, immutable runtime model ([`Config`]).
//!
//! Parsing is strict (`deny_unknown_fields`); every error carries file, line, column and the
//! dotted key it concerns (see [`ConfigError`]). Cross-field checks live in [`Config::validate`].
//!
//! This file is the model's root (`Config`, one field per section, and what is asked of the
//! whole: the default target, the client listeners). Each section's types are in the file of
//! its name (`server.rs`, `cache.rs`, `storage.rs`, `log.rs`, `backend/`, `tls.rs`, ...), and
//! a section's file never names `Config`: what reads several sections sits above them. The
//! load pipeline (text → checked `Config`, overrides) is `load.rs`, with `recover.rs` (reading
//! on past errors), `locate.rs` (lines), `settings/` (every setting's definition and range)
//! and `validate/` (checks across settings); `summary.rs` says what a configuration asks for,
//! `diff.rs` what a reload changes.

pub mod acme;
mod addresses;
mod backend;
mod cache;
pub mod compression;
pub mod diff;
#[cfg(test)]
mod error_tests;
pub mod esi;
pub mod http2;
pub mod invalidation;
mod lists;
mod load;
pub mod locate;
mod log;
pub mod proxy_protocol;
pub(crate) mod recover;
pub mod rewrite;
pub mod rules;
mod server;
pub mod settings;
pub mod site;
pub mod site_share;
mod storage;
mod summary;
#[cfg(test)]
mod tests;
pub mod tls;
pub mod try_files;
pub mod units;
mod validate;
pub mod vcl;

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

pub use backend::{
    BackendConfig, BackendProtocol, BackendTls, DirectorConfig, DirectorKind, HashOn, ProbeConfig,
    ProbeRef, ProxyVersion, RoutingConfig, unix_path,
};
pub use cache::CacheConfig;
pub use load::CliOverrides;
pub use locate::ConfigError;
pub use log::LogConfig;
pub use server::ServerConfig;
pub use storage::{
    Admission, DISK_REGION_OVERHEAD, DiskConfig, MAX_NAMED_STORAGES, NamedStorage, OnOpenError,
    SharedConfig, SharedTls, StorageConfig,
};

/// The configuration `shellac serve` uses when no `--config` is given.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// The whole validated configuration. Cheap to share behind an `Arc`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    /// TLS listeners (`[[tls]]`, config/tls.rs).
    #[serde(default, rename = "tls", skip_serializing_if = "Vec::is_empty")]
    pub tls: Vec<tls::TlsConfig>,
    #[serde(default)]
    pub cache: CacheConfig,
    /// Storage tiers below the memory cache (`[storage.disk]`).
    #[serde(default)]
    pub storage: StorageConfig,
    /// Origin servers, in declaration order. Requests go to `[routing] default`, else to the
    /// first `[[director]]`, else to the first backend.
    #[serde(default, rename = "backend")]
    pub backends: Vec<BackendConfig>,
    /// Health probes that backends may share by name.
    #[serde(default, rename = "probe")]
    pub probes: Vec<ProbeConfig>,
    /// Named groups of backends (and other directors).
    #[serde(default, rename = "director")]
    pub directors: Vec<DirectorConfig>,
    #[serde(default)]
    pub routing: RoutingConfig,
    /// Operator policy rules, in order (see docs/policy.md).
    #[serde(default, rename = "rule")]
    pub rules: Vec<rules::RuleConfig>,
    /// A Varnish VCL file as the policy instead of `[[rule]]`s (docs/vcl.md).
    #[serde(default)]
    pub vcl: vcl::VclConfig,
    #[serde(default)]
    pub invalidation: invalidation::InvalidationConfig,
    #[serde(default)]
    pub log: LogConfig,
    /// HTTP/2 to clients: h2c, limits, flood defences.
    #[serde(default)]
    pub http2: http2::Http2Config,
    /// Content codings: gzip once at fetch, gunzip on delivery (docs/compression.md).
    #[serde(default)]
    pub compression: compression::CompressionConfig,
    /// Virtual hosts (`[[site]]`, config/site.rs, docs/sites.md).
    #[serde(default, rename = "site", skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<site::SiteConfig>,
    /// Edge Side Includes: parsing and assembly (docs/esi.md).
    #[serde(default)]
    pub esi: esi::EsiConfig,
}

impl Config {
    /// The name requests are routed to by default.
    pub fn default_target(&self) -> Option<&str> {
        self.routing
            .default
            .as_deref()
            .or_else(|| self.directors.first().map(|d| d.name.as_str()))
            .or_else(|| self.backends.first().map(|b| b.name.as_str()))
    }

    /// Every client listener address as written (`server.listen`, then each `[[tls]]`'s), then
    /// the [`site::unix_listener`] of each `server.listen_unix` socket.
    pub fn all_listeners(&self) -> Vec<SocketAddr> {
        let mut out = self.server.listen.clone();
        for t in &self.tls {
            for a in &t.listen {
                if !out.contains(a) {
                    out.push(*a);
                }
            }
        }
        out.extend((0..self.server.listen_unix.len()).map(site::unix_listener));
        out
    }
}

impl site::SiteConfig {
    /// The site's listeners (a Unix socket as its [`site::unix_listener`]): its own, else every
    /// client listener of `c`.
    pub fn addresses(&self, c: &Config) -> Vec<SocketAddr> {
        if self.listen.is_empty() {
            return c.all_listeners();
        }
        self.listen
            .iter()
            .filter_map(|l| match l {
                site::ListenOn::Addr(a) => Some(*a),
                site::ListenOn::Unix(p) => c
                    .server
                    .listen_unix
                    .iter()
                    .position(|u| u == p)
                    .map(site::unix_listener),
            })
            .collect()
    }
}
