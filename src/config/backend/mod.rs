//! `[[backend]]`, `[[probe]]`, `[[director]]` and `[routing]`: origins, their health checks and
//! how requests are spread over them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::Dur;

mod director;
mod probe;

pub use director::{DirectorConfig, DirectorKind, HashOn, RoutingConfig};
pub use probe::{ProbeConfig, ProbeRef};

/// `[[backend]]`: one origin server.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// Name used in logs, stats and directors. Default `backend<N>`.
    #[serde(default)]
    pub name: String,
    /// Host name or IP address. Required for an origin reached over TCP (not for `protocol =
    /// "files"`, nor with `address`).
    #[serde(default)]
    pub host: String,
    /// `unix:/path`: the origin listens on a Unix socket (HTTP/1.1, HTTP/2 or FastCGI), in
    /// place of `host` and `port`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The `Host` sent when the client's request has none (HTTP/1.0) and in health probes.
    /// Default: `host`, with `:port` unless it is 80. (VCL's `.host_header`; a VCL backend
    /// without one sends its `.host` as written, as Varnish does.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_header: Option<String>,
    /// Bytes sent first on every connection opened to this backend (before TLS, if any), as
    /// standard base64 (VCL's `.preamble = :...:;`). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preamble: Option<String>,
    /// A PROXY protocol header (`"v1"` text, `"v2"` binary) naming the client, sent first on
    /// every connection, which then serves that one request only. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<ProxyVersion>,
    /// TCP port. Default 80.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Time allowed to establish the TCP connection. Default `3500ms`.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Dur,
    /// Time allowed from sending the request to the first byte of the response. Default `60s`.
    #[serde(default = "default_long_timeout")]
    pub first_byte_timeout: Dur,
    /// Time allowed between two reads of the response body. Default `60s`.
    #[serde(default = "default_long_timeout")]
    pub between_bytes_timeout: Dur,
    /// Idle keep-alive connections kept open to this backend. Default 64; 0 disables reuse.
    #[serde(default = "default_max_idle")]
    pub max_idle: usize,
    /// Close pooled connections idle for longer than this. Default `30s`.
    #[serde(default = "default_pool_idle_timeout")]
    pub idle_timeout: Dur,
    /// TCP_NODELAY on connections to this backend. Default: `server.tcp_nodelay`.
    #[serde(default)]
    pub tcp_nodelay: Option<bool>,
    /// Requests in flight to this backend at most (each holds one connection); 0 = no limit.
    /// Default 0.
    #[serde(default)]
    pub max_connections: usize,
    /// Requests that may wait for a free connection when `max_connections` is reached; beyond
    /// that, or after waiting `wait_timeout`, the backend counts as busy. Default 64.
    #[serde(default = "default_max_queue")]
    pub max_queue: usize,
    /// How long a request waits in that queue. Default: `connect_timeout`.
    #[serde(default)]
    pub wait_timeout: Option<Dur>,
    /// Weight in a `random` director. Default 1; 0 takes the backend out of random choice.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Health probe: the name of a `[[probe]]`, or an inline probe table. Default: none (the
    /// backend is healthy unless connections to it fail, see `passive_failures`).
    #[serde(default)]
    pub probe: Option<ProbeRef>,
    /// Consecutive connection failures after which the backend is marked sick for
    /// `passive_cooldown`. Default 3; 0 disables passive health checking.
    #[serde(default = "default_passive_failures")]
    pub passive_failures: u32,
    /// How long a backend marked sick by connection failures stays sick. Default `10s`.
    #[serde(default = "default_passive_cooldown")]
    pub passive_cooldown: Dur,
    /// TLS to this backend (`tls = { ... }`, `tls = {}` for the defaults). Default: none
    /// (plain TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<BackendTls>,
    /// The HTTP version spoken to this backend. Default `http1`.
    #[serde(default)]
    pub protocol: BackendProtocol,
    /// With `protocol = "h2"`: requests one connection carries at once; more open another
    /// connection. Default 100.
    #[serde(default = "default_max_streams")]
    pub max_streams: u32,
    /// `protocol = "files"`: the document root served; `"fastcgi"`: the root scripts are
    /// named under (SCRIPT_FILENAME, DOCUMENT_ROOT). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<std::path::PathBuf>,
    /// Files tried, in order, for a request naming a directory. Default `["index.html"]` for
    /// files, `["index.php"]` for FastCGI.
    #[serde(
        default,
        deserialize_with = "crate::config::lists::opt_one_or_many",
        skip_serializing_if = "Option::is_none"
    )]
    pub index: Option<Vec<String>>,
    /// Extension → media type, over the built-in table (`protocol = "files"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mime_types: BTreeMap<String, String>,
    /// The media type of a file whose extension no table knows. Default
    /// `application/octet-stream`.
    #[serde(default = "default_default_type")]
    pub default_type: String,
    /// Follow symbolic links that lead out of `root`. Default false.
    #[serde(default)]
    pub follow_symlinks: bool,
    /// Serve files and directories whose name starts with `.` (`.well-known` always is).
    /// Default false.
    #[serde(default)]
    pub dotfiles: bool,
    /// Send files whose path has a script segment (`.php`) as they are. Default false: 404.
    #[serde(default)]
    pub send_scripts: bool,
    /// With `send_scripts = false`, refuse a file whose first bytes are PHP source whatever
    /// its name (`wp-config.backup`). Default true.
    #[serde(default = "default_sniff_scripts")]
    pub sniff_scripts: bool,
    /// Serve `NAME.br`, `NAME.zst`, `NAME.gz` next to a file, by the request's
    /// `Accept-Encoding`. Default false.
    #[serde(default)]
    pub precompressed: bool,
    /// Open files and their metadata kept, at most (0: none kept). Default 1000.
    #[serde(default = "default_open_file_cache")]
    pub open_file_cache: usize,
    /// How long a kept file or a "not found" is trusted before it is looked up again.
    /// Default `5s`.
    #[serde(default = "default_open_file_cache_valid")]
    pub open_file_cache_valid: Dur,
    /// `protocol = "files"`: nginx's `try_files` — paths tried in order (`$uri`, `$uri/`,
    /// `/fallback.html`), the last one what is done when none exists: `=CODE`, `@NAME` (the
    /// request to that backend or director) or a path served from the root. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub try_files: Vec<String>,
    /// `protocol = "files"`: a directory without an index file is answered with a listing of
    /// its names (nginx's `autoindex`) instead of 403. Default false.
    #[serde(default)]
    pub autoindex: bool,
    /// `protocol = "fastcgi"`: parameters sent with every request, after the standard ones
    /// (they override). Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// `[[backend]] proxy_protocol`: the version of the header sent to the backend.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProxyVersion {
    V1,
    V2,
}

/// `[[backend]] protocol`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendProtocol {
    /// HTTP/1.1 with a pool of keep-alive connections.
    #[default]
    Http1,
    /// HTTP/2: with prior knowledge over TCP, by ALPN over TLS; multiplexed connections.
    H2,
    /// Static files from the document root `root` (`backend/files/`).
    Files,
    /// FastCGI to a responder such as PHP-FPM, scripts under `root` (`backend/fastcgi/`).
    Fastcgi,
}

impl BackendProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendProtocol::Http1 => "http1",
            BackendProtocol::H2 => "h2",
            BackendProtocol::Files => "files",
            BackendProtocol::Fastcgi => "fastcgi",
        }
    }
}

/// `[[backend]] tls = { ... }`: how Shellac talks TLS to a backend.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BackendTls {
    /// The name sent by SNI and checked against the backend's certificate. Default: `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// PEM file of the CA certificates the backend's certificate must chain to. Default: the
    /// system's trust store (`/etc/ssl/certs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM chain) presented to the backend, with `key`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<std::path::PathBuf>,
    /// Skip every check of the backend's certificate (chain, name, dates). Default false.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

fn default_default_type() -> String {
    "application/octet-stream".to_string()
}
fn default_sniff_scripts() -> bool {
    true
}
fn default_open_file_cache() -> usize {
    1000
}
fn default_open_file_cache_valid() -> Dur {
    Dur(Duration::from_secs(5))
}
fn default_max_streams() -> u32 {
    100
}
fn default_port() -> u16 {
    80
}
fn default_connect_timeout() -> Dur {
    Dur(Duration::from_millis(3500))
}
fn default_long_timeout() -> Dur {
    Dur(Duration::from_secs(60))
}
fn default_max_idle() -> usize {
    64
}
fn default_pool_idle_timeout() -> Dur {
    Dur(Duration::from_secs(30))
}
fn default_max_queue() -> usize {
    64
}
fn default_weight() -> u32 {
    1
}
fn default_passive_failures() -> u32 {
    3
}
fn default_passive_cooldown() -> Dur {
    Dur(Duration::from_secs(10))
}

impl BackendConfig {
    /// A backend with every setting at its default.
    pub fn new(name: &str, host: &str, port: u16) -> Self {
        BackendConfig {
            name: name.to_string(),
            host: host.to_string(),
            address: None,
            host_header: None,
            preamble: None,
            proxy_protocol: None,
            port,
            connect_timeout: default_connect_timeout(),
            first_byte_timeout: default_long_timeout(),
            between_bytes_timeout: default_long_timeout(),
            max_idle: default_max_idle(),
            idle_timeout: default_pool_idle_timeout(),
            tcp_nodelay: None,
            max_connections: 0,
            max_queue: default_max_queue(),
            wait_timeout: None,
            weight: default_weight(),
            probe: None,
            passive_failures: default_passive_failures(),
            passive_cooldown: default_passive_cooldown(),
            tls: None,
            protocol: BackendProtocol::Http1,
            max_streams: default_max_streams(),
            root: None,
            index: None,
            mime_types: BTreeMap::new(),
            default_type: default_default_type(),
            follow_symlinks: false,
            dotfiles: false,
            send_scripts: false,
            sniff_scripts: default_sniff_scripts(),
            precompressed: false,
            open_file_cache: default_open_file_cache(),
            open_file_cache_valid: default_open_file_cache_valid(),
            try_files: Vec::new(),
            autoindex: false,
            params: BTreeMap::new(),
        }
    }
}

/// The path of a `unix:/path` address.
pub fn unix_path(address: &str) -> Option<&std::path::Path> {
    let path = std::path::Path::new(address.strip_prefix("unix:")?);
    path.is_absolute().then_some(path)
}
