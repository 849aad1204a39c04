//! What the proxy puts in a backend request's extensions for the backend and its kind to read:
//! VCL's per-request timeouts, `retry_connect` and statuses, who the client is, a site's document root.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Timeouts of one backend request that replace the backend's own (VCL's
/// `bereq.connect_timeout`, `bereq.first_byte_timeout`, `bereq.between_bytes_timeout`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestTimeouts {
    pub connect: Option<Duration>,
    pub first_byte: Option<Duration>,
    pub between_bytes: Option<Duration>,
}

/// VCL's `bereq.retry_connect = false`, in a backend request's extensions: a request that
/// fails on a reused connection is not tried again on a new one.
#[derive(Clone, Copy, Debug)]
pub struct NoConnectRetry;

/// A backend request made under a VCL program, in its extensions: its answer may have any
/// three-digit status, 100-999 (Varnish's `HTTP1_DissectResponse`), not only 200-599.
#[derive(Clone, Copy, Debug)]
pub struct AnyThreeDigitStatus;

/// Who asked, in a backend request's extensions (put there by the proxy): what a FastCGI
/// application reads as REMOTE_ADDR, HTTPS, SERVER_ADDR and SERVER_PROTOCOL.
#[derive(Clone, Copy, Debug)]
pub struct ClientInfo {
    /// The client (after trusted proxies).
    pub addr: SocketAddr,
    /// The request came over TLS.
    pub https: bool,
    /// The address the connection was accepted on, when the session knows it.
    pub local: Option<SocketAddr>,
    /// The address the client connected to as the session knows it (Varnish's `server.ip`):
    /// a PROXY protocol header's destination, else `local`.
    pub server: Option<SocketAddr>,
    /// "HTTP/1.1", "HTTP/2.0", "HTTP/1.0".
    pub protocol: &'static str,
}

/// A site's `autoindex` (`[[site]] autoindex`), in a backend request's extensions: whether a
/// `files` backend lists a directory without an index file, instead of its own setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Autoindex(pub bool);

/// A site's document root (`[[site]] root`), in a backend request's extensions: what a
/// `files` or `fastcgi` backend serves or runs scripts from instead of its own `root`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocRoot {
    /// The root as configured, without a trailing `/` (DOCUMENT_ROOT).
    pub written: Arc<str>,
    /// Its real path (links resolved; as written when it cannot be resolved): what
    /// containment checks compare with.
    pub real: Arc<std::path::Path>,
}

impl DocRoot {
    /// The root `path` as a request carries it (resolves links: blocking, at configuration).
    pub fn new(path: &std::path::Path) -> DocRoot {
        let written = path.to_string_lossy().trim_end_matches('/').to_string();
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        DocRoot {
            written: written.into(),
            real: real.into(),
        }
    }
}
