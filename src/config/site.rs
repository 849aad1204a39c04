//! `[[site]]`: virtual hosts (issue 31). A site is chosen per request by the listener the
//! connection came in on and the request's host, with nginx's `server_name` precedence
//! (`http::server_name`); what a site does not set comes from the global configuration.
//! The sites' checks (two default sites on one address, a name claimed twice, ...) are in
//! config/validate/sites.rs; the listeners a site is on, `SiteConfig::addresses`, in
//! config/mod.rs (they read the whole configuration).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::units::Dur;
use super::{lists, rules};

/// One `[[site]]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Name in logs, `/metrics` labels and `shellac stat --site`. Default `site<N>`.
    #[serde(default)]
    pub name: String,
    /// The client listeners (`server.listen` or a `[[tls]]`'s `listen` addresses, as
    /// written, or `"unix:/path"` of `server.listen_unix`) whose requests may be for this
    /// site. `[]`: every client listener.
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub listen: Vec<ListenOn>,
    /// nginx's `server_name`: exact names, `*.example.org`, `mail.*`, `.example.org`,
    /// `~REGEX`.
    #[serde(default, deserialize_with = "lists::one_or_many")]
    pub server_name: Vec<String>,
    /// The site of its listen addresses for a host no site names (nginx's `listen ...
    /// default_server`).
    #[serde(default)]
    pub default: bool,
    /// Backend or director the site's requests go to (its `[[site.rule]]`s may choose
    /// another). Default: `[routing] default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The site's own VCL file (relative to the configuration file's directory): its policy
    /// instead of `[[site.rule]]`s, the global `[[rule]]`s or `[vcl] file`. Its backends,
    /// probes and directors join the configuration's (one name space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcl: Option<PathBuf>,
    /// nginx's `root` in a `server { }`: the document root of every `files` and `fastcgi`
    /// backend the site's requests reach, instead of the backend's own `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// nginx's `autoindex` in a `server { }`: directory listings of every `files` backend
    /// the site's requests reach, instead of the backend's own `autoindex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoindex: Option<bool>,
    /// The site's own `[[rule]]`s; absent: the global ones.
    #[serde(default, rename = "rule", skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<rules::RuleConfig>>,
    /// The site's own rewrite lines; absent: `[routing] rewrite`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "some_one_or_many"
    )]
    pub rewrite: Option<Vec<String>>,
    /// `false`: nothing of this site is stored or served from the cache (every request is
    /// passed). Default true.
    #[serde(default = "yes")]
    pub cache: bool,
    /// `cache.default_ttl` for this site's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl: Option<Dur>,
    /// `cache.max_ttl` for this site's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<Dur>,
    /// `cache.grace` for this site's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<Dur>,
    /// The bytes the site's objects may take in the memory tier (a size, or a share of
    /// `cache.memory_size`); over it, its own objects are evicted first. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_share: Option<super::site_share::CacheShare>,
    /// Where this site's access-log lines go: a file path, `"stdout"` or `"off"`. Default:
    /// `[log] access_log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<String>,
    /// This site's access-log format (as `[log] format`). Default: `[log] format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_format: Option<String>,
}

fn yes() -> bool {
    true
}

fn some_one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<String>>, D::Error> {
    lists::one_or_many(d).map(Some)
}

/// One `[[site]] listen` entry: a client listener's address, or a socket of
/// `server.listen_unix` written as nginx does (`"unix:/run/shellac.sock"`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ListenOn {
    Addr(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for ListenOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenOn::Addr(a) => write!(f, "{a}"),
            ListenOn::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl std::str::FromStr for ListenOn {
    type Err = String;

    fn from_str(text: &str) -> Result<ListenOn, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(
                    "`unix:` names no socket: write \"unix:/path\" as in server.listen_unix".into(),
                );
            }
            return Ok(ListenOn::Unix(PathBuf::from(path)));
        }
        text.parse()
            .map(ListenOn::Addr)
            .map_err(|_| super::addresses::not_an_address(text))
    }
}

impl Serialize for ListenOn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ListenOn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ListenOn, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The listener a connection on the `i`th socket of `server.listen_unix` is on, as
/// `[[site]]`s are chosen by it: an address of the discard-only block `100::/64` (RFC 6666)
/// with port 0, which no client listener is ever configured on.
pub fn unix_listener(i: usize) -> SocketAddr {
    let i = u16::try_from(i).unwrap_or(u16::MAX);
    SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, i)), 0)
}
