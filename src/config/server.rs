//! `[server]`: the client-facing listeners, connection limits and timeouts, the admin
//! listener's address and token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::invalidation;
use super::lists;
use super::units::{Dur, Size};

/// `[server]`: client-facing listeners and connection handling.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Addresses to accept client connections on. Default `["127.0.0.1:6081"]`.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub listen: Vec<SocketAddr>,
    /// Unix-socket paths to accept client connections on (HTTP/1.1). Default `[]`.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub listen_unix: Vec<PathBuf>,
    /// File mode of the `listen_unix` sockets, octal (`"0660"`). Default `"0660"`.
    pub listen_unix_mode: String,
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
    /// Longest request field line (name, colon, value); longer → 431. Default `32KiB`.
    pub max_field_size: Size,
    /// Largest request body (declared by Content-Length or sent chunked); larger → 413.
    /// Default `1GiB`.
    pub max_body_size: Size,
    /// Largest response head a backend may send (bytes on the wire, status line through the
    /// blank line, exactly); larger → 502. Default `64KiB`.
    pub max_response_header_size: Size,
    /// Most header fields in a response head from a backend; more → 502. Default 100.
    pub max_response_headers: usize,
    /// Longest field line in a response head from a backend; longer → 502. Default `64KiB`.
    pub max_response_field_size: Size,
    /// A client sending a request body: the longest stretch Shellac waits for body bytes, and
    /// the allowance before `body_min_rate` applies. Default `30s`.
    pub body_timeout: Dur,
    /// Minimum average request-body rate in bytes per second once `body_timeout` is used up
    /// (each byte received extends the allowance by 1/rate s). 0 disables. Default `500`.
    pub body_min_rate: Size,
    /// Close a client connection whose response write has made no progress for this long
    /// (slow reader). Default `60s`.
    pub send_timeout: Dur,
    /// Close an HTTP/1.1 client connection whose response has taken longer than this to send
    /// (from its first byte) when a write blocks. `0s`: no limit (the default).
    pub send_total_timeout: Dur,
    /// Client connections open at once at most; more are answered 503 and closed at once.
    /// 0 = no limit. Default 10000.
    pub max_connections: usize,
    /// Rate-limit buckets held at most (vsthrottle and `[[rule]] rate_limit`). Default 100000.
    pub rate_limit_keys: usize,
    /// Bytes every MP4 seek of the process holds at most to read `moov`s (`[[rule]] mp4`:
    /// the first bytes of each file held until its `moov` is in, each up to its rule's
    /// `mp4_max_moov_size`); a seek that would pass it is sent whole (counter
    /// `mp4_seek_memory`). Default `64MiB`.
    pub mp4_moov_memory: Size,
    /// Protocols a client may switch to with `Upgrade` (RFC 9110 §7.8), case-insensitive: the
    /// request is passed with its `Upgrade` to the backend, and if the backend answers 101 the
    /// connection becomes a tunnel (closed after `tunnel_idle_timeout` without traffic). Others are
    /// answered as plain HTTP. Default `["websocket"]`; `[]` tunnels nothing.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub upgrade_protocols: Vec<String>,
    /// A tunnel (a connection switched by a backend's 101) with no byte either way for this
    /// long is closed (Varnish's `pipe_timeout`). Default 60 s.
    pub tunnel_idle_timeout: Dur,
    /// Networks of proxies in front of Shellac whose `X-Forwarded-For`, `X-Forwarded-Host`,
    /// `X-Forwarded-Proto`, `Forwarded` and `Via` are kept (and appended to). From any other
    /// client these fields are replaced. Default `[]` (no client is trusted).
    #[serde(deserialize_with = "lists::one_or_many")]
    pub trusted_proxies: Vec<invalidation::Network>,
    /// Client listeners whose connections must start with a PROXY protocol header (v1 or
    /// v2): `true` (all), `false` (none) or a list of their addresses. Default false.
    pub proxy_protocol: super::proxy_protocol::ProxyProtocol,
    /// Networks a PROXY protocol header is accepted from; other peers on those listeners
    /// are closed. Default `[]`.
    #[serde(deserialize_with = "lists::one_or_many")]
    pub proxy_protocol_from: Vec<invalidation::Network>,
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
                        crate::config::addresses::not_an_address(v)
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
            max_field_size: size(self.max_field_size),
            max_body_size: self.max_body_size.0,
        }
    }

    /// `listen_unix_mode` as a mode (None: not an octal mode of at most `0777`).
    pub fn unix_mode(&self) -> Option<u32> {
        let m = self.listen_unix_mode.trim_start_matches("0o");
        u32::from_str_radix(m, 8).ok().filter(|m| *m <= 0o777)
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
            listen_unix: Vec::new(),
            listen_unix_mode: "0660".into(),
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
            max_field_size: Size(32 * 1024),
            max_body_size: Size(1 << 30),
            max_response_header_size: Size(64 * 1024),
            max_response_headers: 100,
            max_response_field_size: Size(64 * 1024),
            body_timeout: Dur(Duration::from_secs(30)),
            body_min_rate: Size(500),
            send_timeout: Dur(Duration::from_secs(60)),
            send_total_timeout: Dur(Duration::ZERO),
            max_connections: 10_000,
            rate_limit_keys: 100_000,
            mp4_moov_memory: Size(64 << 20),
            upgrade_protocols: vec!["websocket".into()],
            tunnel_idle_timeout: Dur(Duration::from_secs(60)),
            trusted_proxies: Vec::new(),
            proxy_protocol: super::proxy_protocol::ProxyProtocol::Off,
            proxy_protocol_from: Vec::new(),
            underscores_in_headers: false,
            shutdown_grace: Dur(Duration::from_secs(10)),
            admin_token: None,
            unknown_site_status: 421,
        }
    }
}
