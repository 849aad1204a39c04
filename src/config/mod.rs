//! Configuration: raw TOML → validated, immutable runtime model ([`Config`]).
//!
//! Parsing is strict (`deny_unknown_fields`); every error carries file, line, column and the
//! dotted key it concerns (see [`ConfigError`]). Cross-field checks live in [`Config::validate`].

pub mod acme;
mod addresses;
mod backend;
pub mod compression;
pub mod diff;
#[cfg(test)]
mod error_tests;
pub mod esi;
pub mod http2;
pub mod invalidation;
mod lists;
pub mod locate;
pub(crate) mod recover;
pub mod rewrite;
pub mod rules;
pub mod settings;
pub mod site;
pub mod tls;
pub mod try_files;
pub mod units;
mod validate;
pub mod vcl;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use backend::{
    BackendConfig, BackendProtocol, BackendTls, DirectorConfig, DirectorKind, HashOn, ProbeConfig,
    ProbeRef, RoutingConfig, unix_path,
};
pub use locate::ConfigError;
use units::{Dur, Size};

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

/// `[server]`: client-facing listeners and connection handling.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Addresses to accept client connections on. Default `["127.0.0.1:6081"]`.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub listen: Vec<SocketAddr>,
    /// Admin listener (every route in docs/admin.md). Default `127.0.0.1:6082`; `"off"` or
    /// `false`: none (None here).
    #[serde(with = "admin_address")]
    pub admin: Option<SocketAddr>,
    /// Length of each client listener's queue of connections the kernel has accepted and
    /// Shellac has not yet taken (`listen(2)` backlog); a burst beyond it waits for the
    /// client's SYN retransmit (1 s, then 3 s). Capped by the kernel at `net.core.somaxconn`.
    /// Default 4096; 1-65535.
    pub listen_backlog: u32,
    /// Set TCP_NODELAY on client sockets (and backends that do not say otherwise). Default true.
    pub tcp_nodelay: bool,
    /// Send buffer (SO_SNDBUF, doubled by the kernel) of client connections whose handshake
    /// round trip is at most `near_rtt` (server/near.rs). `0`: kernel autotuning for all.
    /// Default `512KiB`.
    pub near_send_buffer: Size,
    /// Round trip up to which a client connection gets `near_send_buffer`. Default `0.2ms`.
    pub near_rtt: Dur,
    /// Answer fresh hits from memory for plain GET/HEAD requests from the request head's
    /// bytes and a pre-serialised response head, without hyper (server/h1/). `false`
    /// sends every request through hyper. Default true.
    pub fast_hits: bool,
    /// Close a keep-alive client connection idle for this long. Default `60s`.
    pub idle_timeout: Dur,
    /// A keep-alive client connection idle for this long gives back its HTTP buffers and
    /// request state (~16 KiB) and is parked: no task of its own, only its socket and a
    /// 72-byte slot that one task watches for all parked connections (server/park.rs); the
    /// state is rebuilt when its next request arrives. `0s` keeps every connection's state
    /// until it closes. Default `1s`.
    pub idle_release: Dur,
    /// Close a client connection that has not sent a complete request head this long after its
    /// first byte. Default `10s`.
    pub header_read_timeout: Dur,
    /// Worker threads; 0 means one per CPU this process may run on. Default 0.
    pub threads: usize,
    /// Longest request line (method, target, version); longer → 414. Default `8KiB`.
    pub max_request_line: Size,
    /// Largest request head (request line and header fields; also the bound on chunked
    /// trailers); larger → 431. Default `32KiB`.
    pub max_header_size: Size,
    /// Most header fields in a request; more → 431. Default 100.
    pub max_headers: usize,
    /// Largest request body (declared by Content-Length or sent chunked); larger → 413.
    /// Default `1GiB`.
    pub max_body_size: Size,
    /// Largest response head a backend may send (bytes on the wire, status line through the
    /// blank line, exactly); larger → 502. Default `64KiB`.
    pub max_response_header_size: Size,
    /// Most header fields in a response head from a backend; more → 502. Default 100.
    pub max_response_headers: usize,
    /// A client sending a request body: the longest stretch Shellac waits for body bytes, and
    /// the allowance before `body_min_rate` applies. Default `30s`.
    pub body_timeout: Dur,
    /// Minimum average request-body rate in bytes per second once `body_timeout` is used up
    /// (each byte received extends the allowance by 1/rate s). 0 disables. Default `500`.
    pub body_min_rate: Size,
    /// Close a client connection whose response write has made no progress for this long
    /// (slow reader). Default `60s`.
    pub send_timeout: Dur,
    /// Client connections open at once at most; more are answered 503 and closed at once.
    /// 0 = no limit. Default 10000.
    pub max_connections: usize,
    /// Rate-limit buckets held at most (vsthrottle and `[[rule]] rate_limit`). Default 100000.
    pub rate_limit_keys: usize,
    /// Protocols a client may switch to with `Upgrade` (RFC 9110 §7.8), case-insensitive: the
    /// request is passed with its `Upgrade` to the backend, and if the backend answers 101 the
    /// connection becomes a tunnel (closed after `idle_timeout` without traffic). Others are
    /// answered as plain HTTP. Default `["websocket"]`; `[]` tunnels nothing.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub upgrade_protocols: Vec<String>,
    /// Networks of proxies in front of Shellac whose `X-Forwarded-For`, `X-Forwarded-Host`,
    /// `X-Forwarded-Proto`, `Forwarded` and `Via` are kept (and appended to). From any other
    /// client these fields are replaced. Default `[]` (no client is trusted).
    #[serde(deserialize_with = "lists::one_or_many")]
    pub trusted_proxies: Vec<invalidation::Network>,
    /// Keep request fields whose name contains `_` (nginx's `underscores_in_headers`). Default
    /// `false`: they are dropped before anything reads them, counted in
    /// `client_field_underscore`.
    pub underscores_in_headers: bool,
    /// On SIGTERM / SIGINT: how long requests in flight may take to finish after the listeners
    /// stop accepting; then the rest are cut off and the process exits. `0s` stops at once.
    /// Default `10s`.
    pub shutdown_grace: Dur,
    /// Bearer token every admin request must carry (`Authorization: Bearer TOKEN`); the CLI
    /// sends `--token` or `$SHELLAC_ADMIN_TOKEN`. Default: none (keep the admin listener on
    /// loopback).
    pub admin_token: Option<String>,
    /// The status answering a request whose host no `[[site]]` of its listen address names,
    /// where none is the default (nginx answers such requests from its default server;
    /// RFC 9110 §15.5.20: 421 Misdirected Request). Default 421.
    pub unknown_site_status: u16,
}

/// `server.admin`: an address, or `"off"` / `false` for no admin listener.
mod admin_address {
    use std::fmt;
    use std::net::SocketAddr;

    use serde::{Deserializer, Serializer, de};

    pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.collect_str(a),
            None => s.serialize_str("off"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Option<SocketAddr>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an address such as \"127.0.0.1:6082\", or \"off\"")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
                if on {
                    Err(E::custom(
                        "`true` is not an address: give the admin listener's address (e.g. \"127.0.0.1:6082\"), or \"off\" / false for none",
                    ))
                } else {
                    Ok(None)
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v == "off" {
                    return Ok(None);
                }
                v.parse().map(Some).map_err(|_| {
                    E::custom(format!(
                        "{}; or \"off\" for no admin listener",
                        super::addresses::not_an_address(v)
                    ))
                })
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl ServerConfig {
    /// The request limits the strict parser enforces.
    pub fn limits(&self) -> crate::http::strict::Limits {
        let size = |s: Size| usize::try_from(s.0).unwrap_or(usize::MAX);
        crate::http::strict::Limits {
            max_request_line: size(self.max_request_line),
            max_header_size: size(self.max_header_size),
            max_headers: self.max_headers,
            max_body_size: self.max_body_size.0,
        }
    }

    /// Whether `ip` is a trusted proxy (`trusted_proxies`).
    pub fn trusts(&self, ip: std::net::IpAddr) -> bool {
        self.trusted_proxies.iter().any(|n| n.contains(ip))
    }

    /// `threads`, with 0 resolved to the CPUs this process may run on.
    pub fn worker_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 6081))],
            admin: Some(SocketAddr::from(([127, 0, 0, 1], 6082))),
            listen_backlog: 4096,
            tcp_nodelay: true,
            near_send_buffer: Size(512 * 1024),
            near_rtt: Dur(Duration::from_micros(200)),
            fast_hits: true,
            idle_timeout: Dur(Duration::from_secs(60)),
            idle_release: Dur(Duration::from_secs(1)),
            header_read_timeout: Dur(Duration::from_secs(10)),
            threads: 0,
            max_request_line: Size(8 * 1024),
            max_header_size: Size(32 * 1024),
            max_headers: 100,
            max_body_size: Size(1 << 30),
            max_response_header_size: Size(64 * 1024),
            max_response_headers: 100,
            body_timeout: Dur(Duration::from_secs(30)),
            body_min_rate: Size(500),
            send_timeout: Dur(Duration::from_secs(60)),
            max_connections: 10_000,
            rate_limit_keys: 100_000,
            upgrade_protocols: vec!["websocket".into()],
            trusted_proxies: Vec::new(),
            underscores_in_headers: false,
            shutdown_grace: Dur(Duration::from_secs(10)),
            admin_token: None,
            unknown_site_status: 421,
        }
    }
}

/// `[cache]`: the memory tier and the TTL policy.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Bound on the memory tier, charged what it holds (slab slots of compact objects, built
    /// objects' weight, the index's tables). Partial content (206 pieces) is held beside it,
    /// up to an eighth of it more. Default `256MiB`, at least 64 KiB.
    pub memory_size: Size,
    /// Largest single object stored; larger responses are streamed through uncached.
    /// Default `64MiB`; at most `memory_size`, or with a disk tier the larger of `memory_size`
    /// and `storage.disk.region_size - 64KiB`.
    pub max_object_size: Size,
    /// TTL for responses with a heuristically cacheable status short of 5xx (200, 203, 204,
    /// 206, 300, 301, 308, 404, 405, 410, 414) that carry no freshness information at all.
    /// Default `0s` (RFC 9111: such responses are not reused). Opt-in.
    pub default_ttl: Dur,
    /// Upper clamp on any TTL: origin-given, heuristic or `default_ttl`. Default: none.
    pub max_ttl: Option<Dur>,
    /// Heuristic freshness: this percentage of the time since `Last-Modified`, for responses
    /// without explicit lifetime (RFC 9111 §4.2.2). Default 10; 0 disables.
    pub heuristic_percent: u32,
    /// How long a URL whose response was uncacheable skips request coalescing (hit-for-miss).
    /// Default `120s`.
    pub hit_for_miss_ttl: Dur,
    /// Grace (stale-while-revalidate): how long past its TTL an object is still delivered at
    /// once while one background fetch refreshes it. A response's `stale-while-revalidate=N`
    /// overrides it. Default `0s`: RFC 9111 §4.2.4 forbids stale responses unless permitted.
    pub grace: Dur,
    /// Keep: how long past TTL + grace a stale object is kept usable for conditional
    /// revalidation (If-None-Match / If-Modified-Since to the backend) and served when no backend
    /// can be reached (RFC 9111 §4.2.4 "disconnected"; a response's `stale-if-error=N` extends
    /// it to 5xx answers). Default `1h`.
    pub keep: Dur,
    /// Honour request `Cache-Control` (`no-cache`, `max-age`, `min-fresh`, `max-stale`,
    /// `only-if-cached`) and `Pragma: no-cache`. Default false: ignored, as Varnish does, so
    /// clients cannot force backend traffic.
    pub request_cache_control: bool,
    /// Targeted cache-control fields (RFC 9213) honoured instead of `Cache-Control` and
    /// `Expires`, the first present with a valid value wins. Each is read as a Structured Field
    /// Dictionary (invalid: ignored whole; a member of the wrong type: ignored), except
    /// `Surrogate-Control`, read like `Cache-Control`. Default `["CDN-Cache-Control",
    /// "Surrogate-Control"]`.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub targeted_cache_control: Vec<String>,
    /// Normalise `Accept-Encoding` to `zstd`, `br`, `gzip` or nothing before lookup, so
    /// trivial differences share one `Vary` variant. Default true.
    pub normalize_accept_encoding: bool,
    /// Variants (by `Vary`) kept per URL at most; the oldest is dropped first. Default 16.
    pub max_variants: usize,
    /// Cache deception armor: a rule's `ttl`, `min_ttl` and `override_origin` apply only when
    /// the response's `Content-Type` fits the extension the URL claims (`.css` → `text/css`;
    /// `application/octet-stream` fits any; an unknown extension fits anything but HTML), so
    /// `/account.php/x.css` answered with the private account page is never stored by a
    /// static-files rule. Default true.
    pub deception_armor: bool,
    /// Refresh-ahead (Varnish's `obj.prefetch`, Akamai's prefresh): a fresh object requested
    /// within this much of its expiry is delivered and refreshed in the background (one
    /// refresh at a time per object, revalidated with its validators), so popular objects
    /// neither go stale nor miss. `"off"`, a share of the object's TTL (`"10%"`: its last
    /// tenth; 1–99 %) or a duration (`"30s"`). Counter `cache_refresh_ahead`. Default `"off"`.
    pub refresh_ahead: units::RefreshAhead,
    /// Varnish's `shortlived`: objects whose freshness left + grace + keep is below this are
    /// kept in the memory tier only (not the disk or shared tier). Default `0s`: none.
    pub shortlived: Dur,
    /// Big media (nginx's `slice`, ATS's slice plugin): a response longer than
    /// `max_object_size` with a strong validator is cached as `slice_size` slices fetched by
    /// Range on demand (`proxy/slice/`, docs/slices.md). Default true.
    pub slice: bool,
    /// The size of one slice, 1–8 MiB, at most `max_object_size`. Default `1MiB`.
    pub slice_size: Size,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            memory_size: Size(256 << 20),
            max_object_size: Size(64 << 20),
            default_ttl: Dur(Duration::ZERO),
            max_ttl: None,
            heuristic_percent: 10,
            hit_for_miss_ttl: Dur(Duration::from_secs(120)),
            grace: Dur(Duration::ZERO),
            keep: Dur(Duration::from_secs(3600)),
            request_cache_control: false,
            targeted_cache_control: vec!["CDN-Cache-Control".into(), "Surrogate-Control".into()],
            normalize_accept_encoding: true,
            max_variants: 16,
            deception_armor: true,
            refresh_ahead: units::RefreshAhead::Off,
            shortlived: Dur(Duration::ZERO),
            slice: true,
            slice_size: Size(1 << 20),
        }
    }
}

/// `[storage]`: tiers below the memory tier.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `[storage.disk]`: the persistent disk tier. Default: none (memory only).
    pub disk: Option<DiskConfig>,
    /// `[storage.shared]`: the tier shared by a fleet on Redis Cluster. Default: none.
    pub shared: Option<SharedConfig>,
}

/// `[storage.shared]`: a tier below memory and disk that every node of a fleet shares, on a
/// Redis Cluster, and the broadcast of invalidations between the nodes (`cache/shared`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SharedConfig {
    /// Seed nodes of the cluster, `host:port`. Required, at least one.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub nodes: Vec<String>,
    /// The ACL user (Redis 6+), with `password`. Default: none (the default user).
    #[serde(default)]
    pub username: Option<String>,
    /// The password of `username`, else of the default user (`requirepass`). Default: none.
    #[serde(default)]
    pub password: Option<String>,
    /// TLS to every node of the cluster (`tls = {}` for the defaults). Default: none
    /// (cleartext).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<SharedTls>,
    /// Prefix of every key Shellac writes. Default `shellac:`.
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// This node's name among the fleet (invalidation positions, lag). Default: the host
    /// name and the first listen port.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Largest object written to the shared tier; larger ones stay local. Default `1MiB`.
    #[serde(default = "default_shared_max_object")]
    pub max_object_size: Size,
    /// Deadline of a connection to a node. Default `1s`.
    #[serde(default = "default_shared_connect")]
    pub connect_timeout: Dur,
    /// Deadline of each read a request waits for (lookup, lease). Default `50ms`.
    #[serde(default = "default_shared_read")]
    pub read_timeout: Dur,
    /// Deadline of each background write and invalidation. Default `500ms`.
    #[serde(default = "default_shared_write")]
    pub write_timeout: Dur,
    /// How long a node holds the fleet lease on fetching a URL, and the longest another node
    /// waits for it. Default `1s`.
    #[serde(default = "default_shared_lease")]
    pub lease_timeout: Dur,
    /// Failed operations in a row that open the circuit breaker. Default 5.
    #[serde(default = "default_breaker_threshold")]
    pub breaker_threshold: u32,
    /// How long an open breaker skips the shared tier before one probe. Default `1s`.
    #[serde(default = "default_shared_connect")]
    pub breaker_cooldown: Dur,
    /// How long an invalidation waits for every live node to confirm it. Default `1s`.
    #[serde(default = "default_shared_connect")]
    pub confirm_timeout: Dur,
    /// Invalidations kept in the fleet's log (a Redis Stream) for nodes catching up; a node
    /// further behind drops its local tiers. Default 100000.
    #[serde(default = "default_log_length")]
    pub log_length: u64,
}

/// `[storage.shared] tls = { ... }`: how Shellac talks TLS to the cluster's nodes
/// (`cache/shared/tls.rs`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SharedTls {
    /// PEM file of the CA certificates the nodes' certificates must chain to. Default: the
    /// system's trust store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) for clusters that require one (`tls-auth-clients`),
    /// with `key`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<std::path::PathBuf>,
    /// Whether a node's certificate must name the address it is reached at (as the cluster
    /// announces it). Default true; false checks the chain only.
    #[serde(default = "verify_by_default")]
    pub verify_name: bool,
}

fn verify_by_default() -> bool {
    true
}

fn default_key_prefix() -> String {
    "shellac:".into()
}
fn default_shared_max_object() -> Size {
    Size(1 << 20)
}
fn default_shared_connect() -> Dur {
    Dur(Duration::from_secs(1))
}
fn default_shared_read() -> Dur {
    Dur(Duration::from_millis(50))
}
fn default_shared_write() -> Dur {
    Dur(Duration::from_millis(500))
}
fn default_shared_lease() -> Dur {
    Dur(Duration::from_secs(1))
}
fn default_breaker_threshold() -> u32 {
    5
}
fn default_log_length() -> u64 {
    100_000
}

/// `[storage.disk]`: a persistent disk tier below the memory tier (one preallocated file divided
/// into regions; see `cache/disk`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiskConfig {
    /// The data file (created if missing, preallocated to `size`). Its directory must exist.
    /// Required.
    pub path: PathBuf,
    /// Size of the data file's regions (the file is 2 MiB + 4 KiB larger: superblock and two
    /// ban lists): the bound on the disk tier. Required; 4 to 65536 regions.
    pub size: Size,
    /// Unit of writing and reclaim; the largest object the disk tier holds is a little smaller.
    /// Default `64MiB`; between 1 MiB and 1 GiB, a multiple of 4 KiB.
    #[serde(default = "default_region_size")]
    pub region_size: Size,
    /// Which objects are written to disk. Default `second-request`.
    #[serde(default)]
    pub admission: Admission,
    /// What start-up does when the data file cannot be opened, locked or preallocated.
    /// Default `refuse`.
    #[serde(default)]
    pub on_open_error: OnOpenError,
}

/// `storage.disk.on_open_error`: the operator asked for persistence, so by default a disk
/// tier that cannot be opened stops start-up; running on memory alone is a choice.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum OnOpenError {
    /// `shellac serve` exits with the reason.
    #[default]
    Refuse,
    /// Serve from the memory tier alone (an ERROR is logged, `disk_io_error` counted, and the
    /// start-up line says the disk tier is not running).
    MemoryOnly,
}

/// Disk admission policy.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// Written when fetched for the second time (recently missed before), or when evicted from
    /// memory after at least one memory hit: one-hit wonders never cost a disk write.
    #[default]
    SecondRequest,
    /// Every stored object is written to disk as well (write-through).
    Always,
}

impl Admission {
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::SecondRequest => "second-request",
            Admission::Always => "always",
        }
    }
}

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
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            access_log: "off".into(),
            format: "combined".into(),
            buffer: 8192,
        }
    }
}

fn default_region_size() -> Size {
    Size(64 << 20)
}

/// Bytes of each region the disk tier keeps for its own headers: an object on disk may be at most
/// `region_size - DISK_REGION_OVERHEAD` bytes (key, headers and body).
pub const DISK_REGION_OVERHEAD: u64 = 64 * 1024;

impl LogConfig {
    /// The parsed format when the access log is on.
    pub fn active_format(&self) -> Option<crate::txlog::Format> {
        if self.access_log == "off" {
            return None;
        }
        crate::txlog::Format::parse(&self.format).ok()
    }
}

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
    /// ([`settings`]) and the checks across settings (`validate.rs`), as (key path, problem).
    pub fn validate(&self) -> Vec<(Vec<String>, String)> {
        let mut out = settings::check_ranges(self);
        out.extend(validate::local(self));
        out.extend(validate::across(self));
        out
    }

    /// One-paragraph summary of what the configuration asks for (`shellac check`).
    /// `policy`: what the policy layer says the VCL program is (`vcl::attach::describe`).
    pub fn summary(&self, policy: Option<&str>) -> String {
        self.summary_running(true, policy)
    }

    /// One-paragraph summary of what runs (the start-up log): as [`Config::summary`], except
    /// that a configured disk tier that is not running (it could not be opened and
    /// `on_open_error = "memory-only"`) is said to be off.
    pub fn summary_running(&self, disk_running: bool, policy: Option<&str>) -> String {
        let listen: Vec<String> = self.server.listen.iter().map(|a| a.to_string()).collect();
        let backends: Vec<String> = self
            .backends
            .iter()
            .map(|b| match (&b.address, &b.root, b.protocol) {
                (_, Some(root), BackendProtocol::Files) => {
                    format!("{} → files:{}", b.name, root.display())
                }
                (Some(address), _, _) => format!("{} → {address}", b.name),
                _ => format!("{} → {}:{}", b.name, b.host, b.port),
            })
            .collect();
        let disk = match &self.storage.disk {
            Some(d) if !disk_running => format!(
                "; disk cache at {} NOT running (it could not be opened, see the error above; \
                 on_open_error = \"memory-only\")",
                d.path.display()
            ),
            Some(d) => format!(
                "; disk cache {} at {} (admission {})",
                units::format_size(d.size.0),
                d.path.display(),
                d.admission.as_str()
            ),
            None => String::new(),
        };
        let disk = match &self.storage.shared {
            Some(s) => format!(
                "{disk}; shared tier on the Redis Cluster at {} (prefix {})",
                s.nodes.join(", "),
                s.key_prefix
            ),
            None => disk,
        };
        let directors: Vec<String> = self
            .directors
            .iter()
            .map(|d| {
                format!(
                    "{} ({}: {})",
                    d.name,
                    d.kind.as_str(),
                    d.backends.join(", ")
                )
            })
            .collect();
        let mut out = format!("listen {}", listen.join(", "));
        for t in &self.tls {
            let addrs: Vec<String> = t.listen.iter().map(|a| a.to_string()).collect();
            out.push_str(&format!(
                "; TLS {} on {} ({} certificate{})",
                t.name,
                addrs.join(", "),
                t.certificates.len(),
                if t.certificates.len() == 1 { "" } else { "s" }
            ));
        }
        out.push_str(&format!(
            "; {} backend{} ({})",
            self.backends.len(),
            if self.backends.len() == 1 { "" } else { "s" },
            backends.join(", "),
        ));
        if let Some(policy) = policy {
            out.push_str(&format!("; policy: {policy}"));
        }
        if !directors.is_empty() {
            out.push_str(&format!("; directors {}", directors.join(", ")));
        }
        out.push_str(&format!(
            "; requests go to {}; memory cache {}{disk}; admin {}",
            self.default_target().unwrap_or("-"),
            units::format_size(self.cache.memory_size.0),
            self.server
                .admin
                .map(|a| a.to_string())
                .unwrap_or_else(|| "off".into()),
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_is_valid() {
        let c = Config::embedded_default();
        assert_eq!(c.server.listen[0].to_string(), "127.0.0.1:6081");
        assert_eq!(c.server.admin.unwrap().to_string(), "127.0.0.1:6082");
        assert_eq!(c.backends[0].port, 8080);
        assert_eq!(c.cache.memory_size.0, 256 << 20);
        assert!(
            c.cache.default_ttl.0.is_zero(),
            "RFC 9111 defaults: no default TTL"
        );
    }

    /// Issue 23 #12: what a file says is written back exactly, and what is written back is
    /// valid (the config fuzz target checks the same for every input that parses).
    #[test]
    fn a_valid_config_serializes_to_the_same_valid_config() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        let mut texts = vec![DEFAULT_CONFIG.to_string()];
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                texts.push(std::fs::read_to_string(path).unwrap());
            }
        }
        texts.push("[server]\nidle_timeout = 1.5\n[cache]\nkeep = 315360000\n[[backend]]\nhost = \"a\"\nbetween_bytes_timeout = \"0.000001s\"\n".into());
        for text in texts {
            let c = Config::parse(&text, "t.toml").unwrap();
            let again = c.to_toml();
            let c2 =
                Config::parse(&again, "again.toml").unwrap_or_else(|e| panic!("{e:?}\n{again}"));
            assert_eq!(c2.to_toml(), again);
        }
    }

    /// Issue 23 #12: a duration in any spelling is checked against one cap while parsing; a
    /// float no longer panics and an integer no longer passes the cap strings had.
    #[test]
    fn out_of_range_durations_are_errors_with_lines() {
        let text = "[server]\nidle_timeout = 1e20\n[cache]\nhit_for_miss_ttl = 9223372036854775807\ngrace = -1\n[[backend]]\nhost = \"a\"\nbetween_bytes_timeout = 9223372036854775807\nconnect_timeout = nan\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.key.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (2, "server.idle_timeout"),
                (4, "cache.hit_for_miss_ttl"),
                (5, "cache.grace"),
                (8, "backend.0.between_bytes_timeout"),
                (9, "backend.0.connect_timeout"),
            ],
            "{errs:?}"
        );
        assert!(errs[0].message.contains("at most 10 years"), "{errs:?}");
        assert!(errs[2].message.contains("negative"), "{errs:?}");
    }

    /// Issue 23 #15: the admin listener can be turned off.
    #[test]
    fn admin_listener_can_be_off() {
        for off in ["admin = false", "admin = \"off\""] {
            let text = format!("[server]\n{off}\n[[backend]]\nhost = \"a\"\n");
            let c = Config::parse(&text, "t.toml").unwrap();
            assert_eq!(c.server.admin, None, "{off}");
            assert!(
                c.summary(None).ends_with("admin off"),
                "{}",
                c.summary(None)
            );
            assert!(c.to_toml().contains("admin = \"off\""));
        }
        let text = "[server]\nadmin = \"[::1]:7000\"\n[[backend]]\nhost = \"a\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        assert_eq!(c.server.admin, Some("[::1]:7000".parse().unwrap()));
        for bad in ["admin = true", "admin = \"localhost\"", "admin = 6082"] {
            let text = format!("[server]\n{bad}\n[[backend]]\nhost = \"a\"\n");
            let errs = Config::parse(&text, "t.toml").unwrap_err();
            assert_eq!(errs[0].key, "server.admin", "{errs:?}");
            assert!(errs[0].message.contains("\"off\""), "{errs:?}");
        }
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let text = "[server]\nlisten = [\"127.0.0.1:1\"]\n\n[cache]\nmemory_sise = \"1MiB\"\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, 5);
        assert_eq!(errs[0].key, "cache.memory_sise");
        assert_eq!(
            errs[0].message,
            "unknown key `memory_sise` in [cache]; did you mean `memory_size`?"
        );
    }

    #[test]
    fn every_error_is_reported() {
        let text = "[cache]\nmemory_size = \"12 bananas\"\ndefault_ttl = \"soon\"\n\n[[backend]]\nhost = \"a\"\nport = 0\n\n[[backend]]\nname = \"backend0\"\nhost = \"b\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let lines: Vec<usize> = errs.iter().map(|e| e.line).collect();
        // Issue 23 #5: the checks of what was read run too, in the same run.
        assert_eq!(lines, vec![2, 3, 7, 10], "{errs:?}");
        let text = "[cache]\nmemory_size = \"1MiB\"\nmax_object_size = \"2MiB\"\n\n[[backend]]\nhost = \"a\"\nport = 0\n\n[[backend]]\nname = \"backend0\"\nhost = \"b\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.key.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (3, "cache.max_object_size"),
                (7, "backend.0.port"),
                (10, "backend.1.name")
            ],
            "{errs:?}"
        );
    }

    fn errors(text: &str) -> Vec<String> {
        Config::parse(text, "t.toml")
            .unwrap_err()
            .iter()
            .map(|e| format!("{}:{}: {}", e.line, e.key, e.message))
            .collect()
    }

    /// Issue 23 #5: a misnamed table hid every other error; now it is commented out with its
    /// keys (and named with what was meant), and reading goes on.
    #[test]
    fn a_misnamed_table_hides_nothing() {
        let text = "[server]\nlisten = [\"127.0.0.1:1\"]\n\n[backends]\nhost = \"a\"\nport = 80\n\n[cache]\nmemory_size = \"lots\"\n\n[[backend]]\nhost = \"b\"\nport = 0\n\n[storage.dsk]\npath = \"/x\"\n";
        assert_eq!(
            errors(text),
            [
                "4:backends: unknown table `[backends]`; did you mean `[[backend]]`?",
                "9:cache.memory_size: `lots` is not a size (examples: \"64KiB\", \"512MiB\", \"2GiB\")",
                "13:backend.0.port: must be between 1 and 65535",
                "15:storage.dsk: unknown table `[storage.dsk]`; did you mean `[storage.disk]`?",
            ]
        );
    }

    /// Issue 23 #5: a bad enum value added a spurious "missing field"; it is one error with
    /// the closest word, and a key really missing is one error naming what it needs.
    #[test]
    fn a_bad_word_is_one_error_with_a_suggestion() {
        let text = "[[director]]\nname = \"d\"\ntype = \"roundrobin\"\nbackends = [\"a\"]\n\n[[director]]\nname = \"e\"\nbackends = \"a\"\n\n[[backend]]\nname = \"a\"\n";
        assert_eq!(
            errors(text),
            [
                "3:director.0.type: \"roundrobin\" is not one of \"round_robin\", \"random\", \"fallback\", \"hash\"; did you mean \"round_robin\"?",
                "6:director.1.type: `type` is required in [[director]] (one of \"round_robin\", \"random\", \"fallback\", \"hash\")",
                "10:backend.0.host: `host` is required in [[backend]] (a host name or IP address), or `address = \"unix:/path\"`",
            ]
        );
    }

    /// `[storage.shared]`: a user without a password, a client certificate without its key,
    /// names unchecked against the system's trust store — at their lines.
    #[test]
    fn shared_tier_tls_and_acl_settings_are_checked() {
        let text = "[storage.shared]\nnodes = \"10.0.0.5:7000\"\nusername = \"shellac\"\ntls = { cert = \"c.pem\", verify_name = false }\n[[backend]]\nhost = \"a\"\n";
        let got = errors(text);
        assert!(
            got.contains(
                &"3:storage.shared.username: an ACL user needs its `password`".to_string()
            ),
            "{got:?}"
        );
        assert!(
            got.iter().any(|e| e
                .starts_with("4:storage.shared.tls.cert: a client certificate needs its `key`")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|e| e.starts_with("4:storage.shared.tls.verify_name: `false` needs `ca`")),
            "{got:?}"
        );
        let text = "[storage.shared]\nnodes = \"10.0.0.5:7000\"\ntls = { keyfile = \"k\" }\n[[backend]]\nhost = \"a\"\n";
        let got = errors(text);
        assert!(
            got.iter()
                .any(|e| e.starts_with("3:storage.shared.tls") && e.contains("keyfile")),
            "{got:?}"
        );
        let ok = "[storage.shared]\nnodes = \"10.0.0.5:7000\"\nusername = \"u\"\npassword = \"p\"\ntls = {}\n[[backend]]\nhost = \"a\"\n";
        let s = Config::parse(ok, "t.toml").unwrap().storage.shared.unwrap();
        let t = s.tls.unwrap();
        assert!(t.verify_name && t.ca.is_none() && t.cert.is_none());
        assert_eq!(s.username.as_deref(), Some("u"));
    }

    /// `[storage.shared]`: nodes that are not host:port, a prefix Redis Cluster would read as
    /// a hash tag, a timeout below its range — each named with its line.
    #[test]
    fn shared_tier_settings_are_checked() {
        let text = "[storage.shared]\nnodes = [\"10.0.0.5:7000\", \"redis.local\"]\nkey_prefix = \"a{b}:\"\nread_timeout = \"0s\"\nlog_length = 5\n\n[[backend]]\nhost = \"a\"\n";
        let got = errors(text);
        assert!(
            got.iter()
                .any(|e| e.starts_with("2:storage.shared.nodes: `redis.local` is not host:port")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|e| e.starts_with("3:storage.shared.key_prefix:")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|e| e.starts_with("4:storage.shared.read_timeout:")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|e| e.starts_with("5:storage.shared.log_length:")),
            "{got:?}"
        );
        // Nothing the client's URL would read as a query, a fragment or credentials.
        for bad in ["a?insecure=1#:7000", "u@a:7000", "a/b:7000", ":7000"] {
            let text = format!("[storage.shared]\nnodes = \"{bad}\"\n[[backend]]\nhost = \"a\"\n");
            assert!(
                errors(&text)
                    .iter()
                    .any(|e| e.starts_with("2:storage.shared.nodes:")
                        && e.contains("is not host:port")),
                "{bad}"
            );
        }
        let good = "[storage.shared]\nnodes = [\"[::1]:7000\", \"redis-1.internal:7000\"]\n[[backend]]\nhost = \"a\"\n";
        assert!(Config::parse(good, "t.toml").is_ok());
        let ok = "[storage.shared]\nnodes = \"10.0.0.5:7000\"\n[[backend]]\nhost = \"a\"\n";
        let c = Config::parse(ok, "t.toml").unwrap();
        let s = c.storage.shared.unwrap();
        assert_eq!(s.nodes, ["10.0.0.5:7000"], "one node is a list of one");
        assert_eq!(s.key_prefix, "shellac:");
        assert_eq!(s.read_timeout.0, Duration::from_millis(50));
    }

    /// Issue 23 #5: type errors spoke Rust (`expected u16`, `expected a sequence`).
    #[test]
    fn type_errors_speak_the_operators_words() {
        let text = "[server]\nlisten = 5\ntcp_nodelay = \"yes\"\nthreads = -1\ntrusted_proxies = [\"10.0.0.0/8\", 7]\n\n[[backend]]\nhost = \"a\"\nport = \"80\"\n\n[[backend]]\nhost = \"b\"\nport = 70000\nprobe = { url = \"/h\", windw = 3, threshold = \"x\" }\n";
        assert_eq!(
            errors(text),
            [
                "2:server.listen: `5` is a port, not an address: write \"0.0.0.0:5\" (every IPv4 address), \"[::]:5\" (every IPv6 and IPv4 address) or \"127.0.0.1:5\" (this machine only)",
                "3:server.tcp_nodelay: expected true or false, found \"yes\"",
                "4:server.threads: -1 is not a whole number (0-1024)",
                "5:server.trusted_proxies: expected a network such as \"10.0.0.0/8\" or \"::1\", found 7 in the list",
                "9:backend.0.port: expected a port number (1-65535), found \"80\"",
                "13:backend.1.port: 70000 is not a port number (1-65535)",
                "14:backend.1.probe.windw: unknown key `windw` in `probe`; did you mean `window`?",
                "14:backend.1.probe.threshold: expected a whole number (1-64), found \"x\"",
            ]
        );
    }

    /// Issue 23 #5: a single address (or network, or status) is a list of one.
    #[test]
    fn one_value_where_a_list_is_expected() {
        let text = "[server]\nlisten = \"0.0.0.0:8080\"\ntrusted_proxies = \"10.0.0.0/8\"\n[[backend]]\nhost = \"a\"\n[[director]]\nname = \"d\"\ntype = \"fallback\"\nbackends = \"backend0\"\nrestart_on = 503\n";
        let c = Config::parse(text, "t.toml").unwrap();
        assert_eq!(c.server.listen, vec!["0.0.0.0:8080".parse().unwrap()]);
        assert_eq!(c.server.trusted_proxies.len(), 1);
        assert_eq!(c.directors[0].backends, ["backend0"]);
        assert_eq!(c.directors[0].restart_on, [503]);
    }

    #[test]
    fn disk_tier_is_validated_with_lines() {
        let text = "[storage.disk]\npath = \"/tmp/x.dat\"\nsize = \"8MiB\"\nregion_size = \"4MiB\"\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.key.as_str())).collect();
        assert_eq!(got, vec![(3, "storage.disk.size")], "{errs:?}");
        let text = "[storage.disk]\npath = \"/tmp/x.dat\"\nsize = \"1GiB\"\nregion_size = \"1000\"\nadmission = \"often\"\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.key.as_str())).collect();
        // Issue 32: a value checked on its own is reported beside a stand-in of its table.
        assert_eq!(
            got,
            [
                (4, "storage.disk.region_size"),
                (5, "storage.disk.admission")
            ],
            "{errs:?}"
        );
        let text = "[storage.disk]\npath = \"/tmp/x.dat\"\nsize = \"1GiB\"\nregion_size = \"1000\"\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        assert_eq!(errs[0].key, "storage.disk.region_size", "{errs:?}");
        assert_eq!(errs[0].line, 4, "{errs:?}");
        let text = "[cache]\nmemory_size = \"1MiB\"\nmax_object_size = \"30MiB\"\n[storage.disk]\npath = \"/tmp/x.dat\"\nsize = \"256MiB\"\nregion_size = \"32MiB\"\nadmission = \"always\"\n\n[[backend]]\nhost = \"a\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        let d = c.storage.disk.unwrap();
        assert_eq!(d.admission, Admission::Always);
        assert_eq!(d.region_size.0, 32 << 20);
    }

    #[test]
    fn overrides_apply() {
        let mut c = Config::embedded_default();
        c.apply(&CliOverrides {
            listen: vec![
                "127.0.0.1:7000".parse().unwrap(),
                "127.0.0.1:7001".parse().unwrap(),
            ],
            backend: Some(("10.0.0.1".into(), 81)),
            admin: None,
            cache_size: Some(512 << 20),
            vcl: None,
        })
        .unwrap();
        assert_eq!(c.server.listen.len(), 2);
        assert_eq!(c.backends[0].host, "10.0.0.1");
        assert_eq!(c.cache.memory_size.0, 512 << 20);
    }

    #[test]
    fn errors_after_a_multibyte_line_start_do_not_panic() {
        // Found by fuzzing the config parser: error recovery comments out a line that starts
        // with a byte-order mark.
        let text = "\u{feff}[se\0\0rv\0\0\0E[[backun\nsize = \"60MiB\"\n\u{feff}a = 1\n";
        assert!(Config::parse(text, "t.toml").is_err());
        let text = "[server]\n\u{e9}dle = 1\nthreads = \"x\"\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        assert!(!errs.is_empty());
    }

    #[test]
    fn server_limits_are_validated_with_lines() {
        let c = Config::embedded_default();
        assert_eq!(c.server.limits(), crate::http::strict::Limits::default());
        assert_eq!(c.server.upgrade_protocols, vec!["websocket".to_string()]);
        let text = "[server]\nmax_headers = 0\nmax_request_line = \"64KiB\"\nmax_header_size = \"32KiB\"\nupgrade_protocols = [\"web socket\"]\nsend_timeout = \"0s\"\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.key.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (2, "server.max_headers"),
                (3, "server.max_request_line"),
                (5, "server.upgrade_protocols.0"),
                (6, "server.send_timeout"),
            ],
            "{errs:?}"
        );
        let text = "[server]\ntrusted_proxies = [\"10.0.0.0/33\"]\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        assert_eq!(errs[0].line, 2, "{errs:?}");
        assert!(errs[0].message.contains("prefix"), "{errs:?}");
        let text =
            "[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n\n[[backend]]\nhost = \"a\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        assert!(c.server.trusts("10.1.2.3".parse().unwrap()));
        assert!(!c.server.trusts("192.0.2.1".parse().unwrap()));
    }

    #[test]
    fn log_section() {
        let c = Config::embedded_default();
        assert_eq!(c.log.access_log, "off");
        assert!(c.log.active_format().is_none());
        let text = "[log]\naccess_log = \"stdout\"\nformat = \"json\"\nbuffer = 64\n\n[[backend]]\nhost = \"a\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        assert!(c.log.active_format().is_some());
        let text = "[log]\nformat = \"%h %Q\"\nbuffer = 1\n\n[[backend]]\nhost = \"a\"\n";
        let errs = Config::parse(text, "t.toml").unwrap_err();
        let got: Vec<(usize, &str)> = errs.iter().map(|e| (e.line, e.key.as_str())).collect();
        assert_eq!(got, vec![(2, "log.format"), (3, "log.buffer")], "{errs:?}");
        assert!(
            errs[0].message.contains("unknown directive `%Q`"),
            "{errs:?}"
        );
    }
}
