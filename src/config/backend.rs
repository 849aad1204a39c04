//! `[[backend]]`, `[[probe]]`, `[[director]]` and `[routing]`: origins, their health checks and
//! how requests are spread over them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Config;
use super::units::Dur;

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
    /// that, or after waiting `connect_timeout`, the backend counts as busy. Default 64.
    #[serde(default = "default_max_queue")]
    pub max_queue: usize,
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
        deserialize_with = "super::lists::opt_one_or_many",
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
            precompressed: false,
            open_file_cache: default_open_file_cache(),
            open_file_cache_valid: default_open_file_cache_valid(),
            try_files: Vec::new(),
            autoindex: false,
            params: BTreeMap::new(),
        }
    }
}

/// A backend's probe: by name or inline.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ProbeRef {
    Named(String),
    Inline(ProbeConfig),
}

/// By hand rather than `untagged`, so a mistake inside an inline probe is reported as itself
/// (`window`: expected a whole number), not as "data did not match any variant".
impl<'de> Deserialize<'de> for ProbeRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ProbeRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the name of a [[probe]], or an inline probe table")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ProbeRef, E> {
                Ok(ProbeRef::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ProbeRef, A::Error> {
                ProbeConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ProbeRef::Inline)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `[[probe]]`: an active health check, run in the background (never on the request path).
/// A backend is healthy when at least `threshold` of the last `window` probes passed.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Name backends refer to (`probe = "name"`). Required for `[[probe]]` tables.
    #[serde(default)]
    pub name: String,
    /// Path to GET, sent with the backend's `Host` and `Connection: close`. Default `/` when
    /// `request` is not given.
    #[serde(default)]
    pub url: Option<String>,
    /// A raw request, one line per element, sent verbatim (CRLF-joined, blank line appended).
    #[serde(default)]
    pub request: Option<Vec<String>>,
    /// Status a passing probe answers with. Default 200.
    #[serde(default = "default_expected_status")]
    pub expected_status: u16,
    /// Time between probes. Default `5s`.
    #[serde(default = "default_interval")]
    pub interval: Dur,
    /// Time a probe may take (connect, send, status line). Default `2s`.
    #[serde(default = "default_probe_timeout")]
    pub timeout: Dur,
    /// How many recent probes are remembered (1–64). Default 8.
    #[serde(default = "default_window")]
    pub window: u32,
    /// How many of the last `window` probes must pass. Default 3.
    #[serde(default = "default_threshold")]
    pub threshold: u32,
    /// Probes counted as passed at start-up. Default `threshold - 1` (sick until one passes).
    #[serde(default)]
    pub initial: Option<u32>,
}

fn default_expected_status() -> u16 {
    200
}
fn default_interval() -> Dur {
    Dur(Duration::from_secs(5))
}
fn default_probe_timeout() -> Dur {
    Dur(Duration::from_secs(2))
}
fn default_window() -> u32 {
    8
}
fn default_threshold() -> u32 {
    3
}

impl ProbeConfig {
    /// Probes assumed passed at start.
    pub fn initial(&self) -> u32 {
        self.initial.unwrap_or(self.threshold.saturating_sub(1))
    }
}

/// How a director picks a backend.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DirectorKind {
    /// Each healthy member in turn.
    RoundRobin,
    /// A healthy member at random, in proportion to `weight`.
    Random,
    /// The first healthy member, in order.
    Fallback,
    /// Consistent (rendezvous) hashing: the same key goes to the same healthy member; when a
    /// member leaves or returns only its share of keys moves.
    Hash,
}

impl DirectorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DirectorKind::RoundRobin => "round_robin",
            DirectorKind::Random => "random",
            DirectorKind::Fallback => "fallback",
            DirectorKind::Hash => "hash",
        }
    }
}

/// What a `hash` director hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashOn {
    /// The cache key (host + path + query). The default.
    Key,
    /// A request header's value.
    Header(String),
    /// A cookie's value.
    Cookie(String),
    /// The client's IP address.
    ClientIp,
}

impl HashOn {
    /// Parses `key`, `client_ip`, `header:NAME`, `cookie:NAME`.
    pub fn parse(text: &str) -> Result<HashOn, String> {
        match text.split_once(':') {
            None if text == "key" => Ok(HashOn::Key),
            None if text == "client_ip" => Ok(HashOn::ClientIp),
            Some(("header", name)) if http::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                Ok(HashOn::Header(name.to_ascii_lowercase()))
            }
            Some(("cookie", name)) if !name.is_empty() => Ok(HashOn::Cookie(name.to_string())),
            _ => Err(format!(
                "`{text}` is not a hash source (use \"key\", \"client_ip\", \"header:NAME\" or \"cookie:NAME\")"
            )),
        }
    }
}

/// `[[director]]`: a named group of backends and/or other directors.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DirectorConfig {
    /// Name routes and other directors refer to. Required.
    pub name: String,
    /// `round_robin`, `random`, `fallback` or `hash`. Required.
    #[serde(rename = "type")]
    pub kind: DirectorKind,
    /// Member backends or directors, by name. Required, at least one.
    #[serde(deserialize_with = "super::lists::one_or_many")]
    pub backends: Vec<String>,
    /// For `hash`: `key` (default), `client_ip`, `header:NAME` or `cookie:NAME`.
    #[serde(default)]
    pub hash_on: Option<String>,
    /// Statuses that make Shellac re-run the request on the director's next choice.
    #[serde(default, deserialize_with = "super::lists::one_or_many")]
    pub restart_on: Vec<u16>,
    /// The opposite: restart on any status not listed (e.g. `[200, 302]`).
    #[serde(default, deserialize_with = "super::lists::one_or_many")]
    pub restart_unless: Vec<u16>,
    /// Restarts per request at most; after the last one its response is delivered. Default 4.
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// Each member's weight in this director, in `backends`' order, where a VCL program gave
    /// them (vmod_directors' `hash.add_backend(b, w)`): a hash director then spreads keys in
    /// proportion to them. Empty (always, from TOML): the backends' own `weight`.
    #[serde(skip)]
    pub member_weights: Vec<u32>,
}

fn default_max_restarts() -> u32 {
    4
}

impl DirectorConfig {
    /// Whether a response with `status` should be retried on the next choice.
    pub fn restarts_on(&self, status: u16) -> bool {
        if !self.restart_unless.is_empty() {
            return !self.restart_unless.contains(&status);
        }
        self.restart_on.contains(&status)
    }

    pub fn hash_on(&self) -> HashOn {
        self.hash_on
            .as_deref()
            .and_then(|h| HashOn::parse(h).ok())
            .unwrap_or(HashOn::Key)
    }
}

/// `[routing]`: where requests go.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    /// Backend or director that receives requests. Default: the first `[[director]]`, else the
    /// first `[[backend]]`.
    #[serde(default)]
    pub default: Option<String>,
    /// nginx `rewrite` lines (`REGEX REPLACEMENT [FLAG]`, config/rewrite.rs), applied in order
    /// to every request's path before its cache key is made; a `[[site]]` with its own
    /// `rewrite` uses those instead.
    #[serde(default, deserialize_with = "super::lists::one_or_many")]
    pub rewrite: Vec<String>,
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
}

type Problems = Vec<(Vec<String>, String)>;

fn at(section: &str, i: usize, field: &str) -> Vec<String> {
    vec![section.to_string(), i.to_string(), field.to_string()]
}

/// Checks backends, probes, directors and routing together.
pub(super) fn validate(c: &Config) -> Problems {
    let mut out = Vec::new();
    // A VCL file declares the origins (it may declare only `backend default none;`).
    if c.backends.is_empty() && c.vcl.file.is_none() {
        out.push((
            vec!["backend".to_string()],
            "at least one [[backend]] is required".into(),
        ));
    }
    let mut names: HashMap<&str, &str> = HashMap::new();
    let probe_names: HashSet<&str> = c.probes.iter().map(|p| p.name.as_str()).collect();
    for (i, b) in c.backends.iter().enumerate() {
        if names.insert(b.name.as_str(), "backend").is_some() {
            out.push((
                at("backend", i, "name"),
                format!("backend name `{}` is used twice", b.name),
            ));
        }
        out.extend(validate_kind(i, b));
        if b.host.is_empty() {
            // Checked with the kind (`validate_kind`): not every backend needs one.
        } else if b.host.trim().is_empty() {
            out.push((at("backend", i, "host"), "must not be empty".into()));
        } else if b.host.contains(['/', ' ', ':']) && b.host.parse::<std::net::Ipv6Addr>().is_err()
        {
            out.push((
                at("backend", i, "host"),
                format!(
                    "`{}` is not a host name or IP address (put the port in `port`)",
                    b.host
                ),
            ));
        }
        if let Some(h) = &b.host_header
            && (h.trim().is_empty() || http::HeaderValue::from_str(h).is_err())
        {
            out.push((
                at("backend", i, "host_header"),
                "must be a Host value (a name, with `:port` if wanted; no control characters)"
                    .into(),
            ));
        }
        if let Some(p) = &b.preamble
            && crate::http::base64::decode_base64(p).is_none()
        {
            out.push((
                at("backend", i, "preamble"),
                "must be standard base64 with padding (the bytes to send first, encoded)".into(),
            ));
        }
        if b.proxy_protocol.is_some() {
            let why = if b.protocol != BackendProtocol::Http1 {
                Some(format!(
                    "a PROXY protocol header names one client per connection: only HTTP/1.1 backends can send it (this one is protocol = \"{}\")",
                    b.protocol.as_str()
                ))
            } else if b.preamble.is_some() {
                Some("`preamble` and `proxy_protocol` both want the first bytes of a connection: keep one".into())
            } else {
                None
            };
            if let Some(why) = why {
                out.push((at("backend", i, "proxy_protocol"), why));
            }
        }
        if let Some(t) = &b.tls {
            let key = |k: &str| vec!["backend".to_string(), i.to_string(), "tls".into(), k.into()];
            if t.cert.is_some() != t.key.is_some() {
                let missing = if t.cert.is_some() { "key" } else { "cert" };
                out.push((
                    key(missing),
                    "a client certificate needs both `cert` and `key`".into(),
                ));
            }
            if let Some(n) = &t.server_name
                && rustls::pki_types::ServerName::try_from(n.as_str()).is_err()
            {
                out.push((
                    key("server_name"),
                    format!("`{n}` is not a host name or IP address"),
                ));
            }
            if t.insecure_skip_verify && t.ca.is_some() {
                out.push((
                    key("ca"),
                    "`insecure_skip_verify = true` checks nothing: `ca` would not be used".into(),
                ));
            }
        }
        match &b.probe {
            Some(ProbeRef::Named(name)) if !probe_names.contains(name.as_str()) => out.push((
                at("backend", i, "probe"),
                format!("no [[probe]] is named `{name}`"),
            )),
            Some(ProbeRef::Inline(p)) => {
                for (path, msg) in validate_probe(p) {
                    let mut key = at("backend", i, "probe");
                    key.extend(path);
                    out.push((key, msg));
                }
            }
            _ => {}
        }
    }
    let mut seen_probes = HashSet::new();
    for (i, p) in c.probes.iter().enumerate() {
        if p.name.is_empty() {
            out.push((
                at("probe", i, "name"),
                "a [[probe]] needs a name backends can refer to".into(),
            ));
        } else if !seen_probes.insert(p.name.as_str()) {
            out.push((
                at("probe", i, "name"),
                format!("probe name `{}` is used twice", p.name),
            ));
        }
        for (path, msg) in validate_probe(p) {
            let mut key = vec!["probe".to_string(), i.to_string()];
            key.extend(path);
            out.push((key, msg));
        }
    }
    for (i, d) in c.directors.iter().enumerate() {
        if let Some(kind) = names.insert(d.name.as_str(), "director") {
            out.push((
                at("director", i, "name"),
                format!("name `{}` is already used by a {kind}", d.name),
            ));
        }
    }
    let directors: HashMap<&str, &DirectorConfig> =
        c.directors.iter().map(|d| (d.name.as_str(), d)).collect();
    for (i, d) in c.directors.iter().enumerate() {
        if d.backends.is_empty() {
            out.push((
                at("director", i, "backends"),
                "needs at least one member".into(),
            ));
        }
        for m in &d.backends {
            if !names.contains_key(m.as_str()) {
                out.push((
                    at("director", i, "backends"),
                    format!("no backend or director is named `{m}`"),
                ));
            }
        }
        if let Some(h) = &d.hash_on {
            if d.kind != DirectorKind::Hash {
                out.push((
                    at("director", i, "hash_on"),
                    "only a `hash` director uses hash_on".into(),
                ));
            } else if let Err(e) = HashOn::parse(h) {
                out.push((at("director", i, "hash_on"), e));
            }
        }
        if !d.restart_on.is_empty() && !d.restart_unless.is_empty() {
            out.push((
                at("director", i, "restart_unless"),
                "use either restart_on or restart_unless, not both".into(),
            ));
        }
        if reaches(&directors, &d.name, &d.name, &mut HashSet::new()) {
            out.push((
                at("director", i, "backends"),
                format!("director `{}` contains itself", d.name),
            ));
        }
    }
    if let Some(target) = &c.routing.default
        && !names.contains_key(target.as_str())
    {
        out.push((
            vec!["routing".into(), "default".into()],
            format!("no backend or director is named `{target}`"),
        ));
    }
    out
}

/// What a backend's kind needs: a `host` or an `address` to reach (not for files), a `root`
/// for files and FastCGI, and settings that mean something for it.
fn validate_kind(i: usize, b: &BackendConfig) -> Problems {
    let mut out = Vec::new();
    let files = b.protocol == BackendProtocol::Files;
    let fastcgi = b.protocol == BackendProtocol::Fastcgi;
    let needs_root = files || fastcgi;
    if let Some(address) = &b.address {
        match unix_path(address) {
            None => out.push((
                at("backend", i, "address"),
                format!("`{address}` is not `unix:` followed by an absolute path"),
            )),
            Some(_) if files => out.push((
                at("backend", i, "address"),
                "a `files` backend reads its `root`: it has no address".into(),
            )),
            Some(_) if !b.host.is_empty() => out.push((
                at("backend", i, "address"),
                "give either `host` (with `port`) or `address`, not both".into(),
            )),
            Some(_) if b.tls.is_some() => out.push((
                at("backend", i, "tls"),
                "TLS is not spoken over a Unix socket (`address`)".into(),
            )),
            Some(_) => {}
        }
    } else if b.host.is_empty() && !files {
        out.push((
            at("backend", i, "host"),
            "`host` is required in [[backend]] (a host name or IP address), or `address = \"unix:/path\"`"
                .into(),
        ));
    }
    if files && b.tls.is_some() {
        out.push((
            at("backend", i, "tls"),
            "a `files` backend reads its `root`: TLS means nothing for it".into(),
        ));
    }
    match &b.root {
        None if needs_root => out.push((
            at("backend", i, "root"),
            format!(
                "`root` is required with `protocol = \"{}\"` (the document root)",
                b.protocol.as_str()
            ),
        )),
        Some(_) if !needs_root => out.push((
            at("backend", i, "root"),
            "only `protocol = \"files\"` and `\"fastcgi\"` have a document root".into(),
        )),
        Some(root) if !root.is_absolute() => out.push((
            at("backend", i, "root"),
            format!("`{}` must be an absolute path", root.display()),
        )),
        _ => {}
    }
    if let Some(index) = &b.index {
        if !needs_root {
            out.push((
                at("backend", i, "index"),
                "only `protocol = \"files\"` and `\"fastcgi\"` have index files".into(),
            ));
        }
        for name in index {
            if name.is_empty() || name.contains(['/', '\\', '\0']) || name == "." || name == ".." {
                out.push((
                    at("backend", i, "index"),
                    format!("`{name}` must be a file name (no `/`, not `.` or `..`)"),
                ));
            }
        }
    }
    for (ext, ty) in &b.mime_types {
        if ext.is_empty() || ext.starts_with('.') || ext.contains(['/', ' ']) {
            out.push((
                at("backend", i, "mime_types"),
                format!("`{ext}` must be an extension without the dot"),
            ));
        }
        if http::HeaderValue::from_str(ty).is_err() || ty.trim().is_empty() {
            out.push((
                at("backend", i, "mime_types"),
                format!("`{ty}` is not a media type"),
            ));
        }
    }
    if http::HeaderValue::from_str(&b.default_type).is_err() || b.default_type.trim().is_empty() {
        out.push((
            at("backend", i, "default_type"),
            format!("`{}` is not a media type", b.default_type),
        ));
    }
    for name in b.params.keys() {
        if name.is_empty() || !name.bytes().all(|c| c.is_ascii_graphic()) {
            out.push((
                at("backend", i, "params"),
                format!("`{name}` must be a parameter name (printable ASCII, no spaces)"),
            ));
        }
    }
    if !b.params.is_empty() && !fastcgi {
        out.push((
            at("backend", i, "params"),
            "only `protocol = \"fastcgi\"` sends parameters".into(),
        ));
    }
    if fastcgi && b.max_connections == 0 {
        out.push((
            at("backend", i, "max_connections"),
            "`protocol = \"fastcgi\"` needs max_connections: the application's workers (PHP-FPM's pm.max_children); a kept connection holds one".into(),
        ));
    }
    if fastcgi && b.tls.is_some() {
        out.push((
            at("backend", i, "tls"),
            "FastCGI is not spoken over TLS here".into(),
        ));
    }
    out
}

/// The path of a `unix:/path` address.
pub fn unix_path(address: &str) -> Option<&std::path::Path> {
    let path = std::path::Path::new(address.strip_prefix("unix:")?);
    path.is_absolute().then_some(path)
}

/// Whether director `from` (transitively) contains `target`.
fn reaches<'a>(
    directors: &HashMap<&'a str, &'a DirectorConfig>,
    from: &'a str,
    target: &str,
    seen: &mut HashSet<&'a str>,
) -> bool {
    let Some(d) = directors.get(from) else {
        return false;
    };
    if !seen.insert(from) {
        return false;
    }
    d.backends
        .iter()
        .any(|m| m == target || reaches(directors, m.as_str(), target, seen))
}

fn validate_probe(p: &ProbeConfig) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let key = |f: &str| vec![f.to_string()];
    if p.url.is_some() && p.request.is_some() {
        out.push((
            key("request"),
            "give either url or request, not both".into(),
        ));
    }
    if let Some(url) = &p.url
        && (!url.starts_with('/') || url.contains([' ', '\r', '\n']))
    {
        out.push((
            key("url"),
            format!("`{url}` must be a path starting with `/`, without spaces"),
        ));
    }
    if let Some(lines) = &p.request
        && (lines.is_empty() || lines.iter().any(|l| l.contains(['\r', '\n'])))
    {
        out.push((
            key("request"),
            "one request line per element, without CR/LF, at least one".into(),
        ));
    }
    // Ranges of their own are the definitions' (window 1-64, ...); these compare two keys,
    // each only when the operator wrote it (issue 23 #5: `window = 5, threshold = 8` blamed
    // `initial`, which the file did not have).
    if (1..=64).contains(&p.window) && p.threshold > p.window {
        out.push((
            key("threshold"),
            format!("{} is more than window ({})", p.threshold, p.window),
        ));
    }
    if let Some(initial) = p.initial
        && (1..=64).contains(&p.window)
        && initial > p.window
    {
        out.push((
            key("initial"),
            format!("{initial} is more than window ({})", p.window),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[[backend]]\nname = \"a\"\nhost = \"127.0.0.1\"\nport = 8080\n\n[[backend]]\nname = \"b\"\nhost = \"127.0.0.1\"\nport = 8081\n";

    #[test]
    fn directors_probes_and_routing_parse() {
        let text = format!(
            "[routing]\ndefault = \"web\"\n\n{BASE}probe = \"health\"\n\n[[probe]]\nname = \"health\"\nurl = \"/ping\"\nwindow = 10\nthreshold = 8\n\n[[director]]\nname = \"web\"\ntype = \"random\"\nbackends = [\"a\", \"b\"]\nrestart_unless = [200, 302]\n"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        assert_eq!(c.default_target(), Some("web"));
        assert_eq!(c.directors[0].kind, DirectorKind::Random);
        assert!(c.directors[0].restarts_on(500));
        assert!(!c.directors[0].restarts_on(302));
        assert!(matches!(c.backends[1].probe, Some(ProbeRef::Named(ref n)) if n == "health"));
    }

    #[test]
    fn inline_probe() {
        let text = format!(
            "{BASE}probe = {{ request = [\"GET /h HTTP/1.1\", \"Host: x\"], expected_status = 204 }}\n"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        let Some(ProbeRef::Inline(p)) = &c.backends[1].probe else {
            panic!("inline probe")
        };
        assert_eq!(p.expected_status, 204);
        assert_eq!(p.initial(), 2);
    }

    #[test]
    fn cross_references_are_checked() {
        let text = format!(
            "[routing]\ndefault = \"nowhere\"\n\n{BASE}probe = \"missing\"\n\n[[director]]\nname = \"d1\"\ntype = \"fallback\"\nbackends = [\"a\", \"d2\"]\n\n[[director]]\nname = \"d2\"\ntype = \"hash\"\nhash_on = \"header:\"\nbackends = [\"d1\", \"zz\"]\n"
        );
        let errs = Config::parse(&text, "t.toml").unwrap_err();
        let msgs: Vec<String> = errs
            .iter()
            .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
            .collect();
        let all = msgs.join("\n");
        assert!(
            all.contains("2:routing.default: no backend or director is named `nowhere`"),
            "{all}"
        );
        assert!(
            all.contains("backend.1.probe: no [[probe]] is named `missing`"),
            "{all}"
        );
        assert!(all.contains("director `d1` contains itself"), "{all}");
        assert!(
            all.contains("no backend or director is named `zz`"),
            "{all}"
        );
        assert!(all.contains("is not a hash source"), "{all}");
    }

    /// Issue 23 #5: `window = 5, threshold = 8` without `initial` blamed `initial`, a key the
    /// operator never wrote; ranges come from the definitions, one error per key.
    #[test]
    fn probe_errors_name_the_keys_written() {
        let text = format!("{BASE}\n[[probe]]\nname = \"p\"\nwindow = 5\nthreshold = 8\n");
        let errs = Config::parse(&text, "t.toml").unwrap_err();
        let got: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.key, e.message))
            .collect();
        assert_eq!(got, ["probe.0.threshold: 8 is more than window (5)"]);
        let text = format!(
            "{BASE}\n[[probe]]\nname = \"p\"\nwindow = 0\ninterval = \"0s\"\nexpected_status = 99\n"
        );
        let errs = Config::parse(&text, "t.toml").unwrap_err();
        let got: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.key, e.message))
            .collect();
        assert_eq!(
            got,
            [
                "probe.0.window: must be between 1 and 64",
                "probe.0.interval: must be greater than 0",
                "probe.0.expected_status: 99 is not an HTTP status (100-599)",
            ]
        );
    }

    /// What each kind needs: files a root (no host), the others a host or a Unix socket;
    /// every mistake at its key.
    #[test]
    fn kinds_and_addresses_are_checked() {
        let ok = "[[backend]]\nprotocol = \"files\"\nroot = \"/srv/www\"\nindex = \"index.htm\"\n\n[[backend]]\nname = \"app\"\naddress = \"unix:/run/app.sock\"\n";
        let c = Config::parse(ok, "t.toml").unwrap();
        assert_eq!(c.backends[0].protocol, BackendProtocol::Files);
        assert_eq!(
            c.backends[0].index.as_deref(),
            Some(&["index.htm".to_string()][..])
        );
        assert_eq!(
            unix_path(c.backends[1].address.as_deref().unwrap())
                .unwrap()
                .to_str(),
            Some("/run/app.sock")
        );
        let bad = "[[backend]]\nprotocol = \"files\"\nindex = [\"../x\"]\nmime_types = { \".js\" = \"text/javascript\" }\n\n[[backend]]\nname = \"b\"\nhost = \"a\"\naddress = \"unix:/x.sock\"\n\n[[backend]]\nname = \"c\"\naddress = \"/relative.sock\"\n\n[[backend]]\nname = \"d\"\nroot = \"/srv\"\nhost = \"a\"\n";
        let errs = Config::parse(bad, "t.toml").unwrap_err();
        let got: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.key, e.message))
            .collect();
        let all = got.join("\n");
        for want in [
            "backend.0.root: `root` is required with `protocol = \"files\"`",
            "backend.0.index: `../x` must be a file name",
            "backend.0.mime_types: `.js` must be an extension without the dot",
            "backend.1.address: give either `host` (with `port`) or `address`, not both",
            "backend.2.address: `/relative.sock` is not `unix:` followed by an absolute path",
            "backend.3.root: only `protocol = \"files\"` and `\"fastcgi\"` have a document root",
        ] {
            assert!(all.contains(want), "{want}\n{all}");
        }
    }

    #[test]
    fn probe_limits() {
        let text =
            format!("{BASE}\n[[probe]]\nname = \"p\"\nwindow = 4\nthreshold = 5\nurl = \"ping\"\n");
        let errs = Config::parse(&text, "t.toml").unwrap_err();
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        assert!(keys.contains(&"probe.0.threshold"), "{keys:?}");
        assert!(keys.contains(&"probe.0.url"), "{keys:?}");
    }
}
