//! Connectors: how a connection to a backend is opened, below the protocol spoken on it
//! (`Backend::connect` puts hyper's HTTP/1 client on whatever this returns). TCP, TLS over
//! TCP (`[[backend]] tls`), or a Unix socket (`address = "unix:/path"`); the connect timeout
//! covers both the connect and the handshake. A TLS connector notices renewed CA, certificate and key files (looked at before
//! a new connection, at most every [`CHECK_EVERY`]) and uses them for the connections it
//! opens next; files that do not load leave it as it was.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::config::{BackendConfig, BackendTls, ProxyVersion};
use crate::stats::Counters;
use crate::tls::client::{BackendStream, BackendTlsClient};
use crate::tls::stamps::Stamps;

/// How often, at most, a TLS connector looks at its files (before opening a connection).
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(2);

/// An open connection to a backend.
pub(crate) enum Transport {
    Tcp(TcpStream),
    Tls(Box<BackendStream>),
    Unix(UnixStream),
}

/// How connections to one backend are opened: the transport, and the bytes written first on
/// each new connection (`preamble`).
#[derive(Debug)]
pub(crate) struct Connector {
    kind: Kind,
    preamble: Option<Box<[u8]>>,
    /// `proxy_protocol`: a PROXY protocol header goes first instead (`preamble` is refused
    /// with it).
    proxy: Option<ProxyVersion>,
    /// `address = "unix:/path"`: connections go to this socket (never with TLS).
    unix: Option<PathBuf>,
}

#[derive(Debug)]
enum Kind {
    Tcp,
    Tls(Box<TlsConnector>),
    /// `tls` could not be set up (a file that does not load): every connection fails with
    /// this. `shellac check`, start and reload refuse such a configuration first.
    Broken(String),
}

/// Why a connection could not be opened.
pub(crate) enum ConnectError {
    Io(io::Error),
    Timeout,
}

impl Connector {
    /// The connector of a backend whose origin kind speaks `alpn` (`origin::Origin::alpn`).
    pub fn for_backend(config: &BackendConfig, alpn: &[u8]) -> Connector {
        // Validated with the configuration; an undecodable one sends nothing.
        let preamble = config
            .preamble
            .as_deref()
            .and_then(crate::http::base64::decode_base64)
            .filter(|p| !p.is_empty())
            .map(Vec::into_boxed_slice);
        let kind = Kind::for_backend(config, alpn == b"h2");
        let unix = config
            .address
            .as_deref()
            .and_then(crate::config::unix_path)
            .map(PathBuf::from);
        Connector {
            kind,
            preamble,
            proxy: config.proxy_protocol,
            unix,
        }
    }

    /// Opens a connection (TCP connect, the preamble or PROXY protocol header, then the TLS
    /// handshake if any) within `timeout`. `client`: whom the PROXY protocol header names
    /// (`None`: a probe's `LOCAL` / `UNKNOWN` header).
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
        nodelay: bool,
        counters: &Counters,
        client: Option<Relayed>,
    ) -> Result<Transport, ConnectError> {
        let first = First {
            preamble: self.preamble.as_deref(),
            proxy: self.proxy,
            client,
        };
        if let Some(path) = &self.unix {
            return connect_unix(path, timeout, first).await;
        }
        self.kind
            .connect(host, port, timeout, nodelay, counters, first)
            .await
    }
}

/// The client connection a backend connection's PROXY protocol header describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Relayed {
    /// The client (after trusted proxies): the header's source.
    pub client: SocketAddr,
    /// The address the client connected to (Varnish's `server.ip`: a PROXY header's
    /// destination on the client connection, else its local address): the header's
    /// destination, as Varnish and HAProxy send it. `None` when the session does not know it.
    pub server: Option<SocketAddr>,
}

/// What a new connection sends before anything else.
#[derive(Clone, Copy)]
struct First<'a> {
    preamble: Option<&'a [u8]>,
    proxy: Option<ProxyVersion>,
    client: Option<Relayed>,
}

impl First<'_> {
    /// The bytes, for a connection to `destination` (`None`: a Unix socket): what the header
    /// names as destination when the session does not know the client's.
    fn bytes(&self, destination: Option<SocketAddr>) -> Option<Vec<u8>> {
        use crate::proxy_protocol as pp;
        let Some(version) = self.proxy else {
            return self.preamble.map(<[u8]>::to_vec);
        };
        Some(match (self.client, version) {
            (None, ProxyVersion::V1) => pp::v1_unknown(),
            (None, ProxyVersion::V2) => pp::v2_local(),
            (Some(Relayed { client, server }), version) => {
                // A Unix socket has no address to name: the unspecified one, port 0.
                let unspecified = if client.is_ipv4() {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                } else {
                    IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                };
                let to = server
                    .or(destination)
                    .unwrap_or(SocketAddr::new(unspecified, 0));
                match version {
                    ProxyVersion::V1 => pp::v1(client, to),
                    ProxyVersion::V2 => pp::v2(client, to),
                }
            }
        })
    }
}

impl Kind {
    fn for_backend(config: &BackendConfig, h2: bool) -> Kind {
        match &config.tls {
            None => Kind::Tcp,
            Some(t) => match BackendTlsClient::build(t, &config.host, h2) {
                Ok(client) => {
                    if t.insecure_skip_verify {
                        tracing::warn!(backend = %config.name, "TLS to this backend does not verify its certificate (insecure_skip_verify)");
                    }
                    Kind::Tls(Box::new(TlsConnector::new(config, t, client, h2)))
                }
                Err(e) => {
                    tracing::error!(backend = %config.name, "TLS to this backend cannot be set up: {e}");
                    Kind::Broken(e)
                }
            },
        }
    }

    async fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
        nodelay: bool,
        counters: &Counters,
        first: First<'_>,
    ) -> Result<Transport, ConnectError> {
        if let Kind::Broken(e) = self {
            return Err(ConnectError::Io(io::Error::other(e.clone())));
        }
        let opened = tokio::time::timeout(timeout, async {
            let mut tcp = TcpStream::connect((host, port)).await?;
            let _ = tcp.set_nodelay(nodelay);
            if let Some(bytes) = first.bytes(tcp.peer_addr().ok()) {
                tokio::io::AsyncWriteExt::write_all(&mut tcp, &bytes).await?;
            }
            match self {
                Kind::Tls(tls) => match tls.client(counters).connect(tcp).await {
                    Ok(tls) => {
                        counters.backend_tls_handshake.inc();
                        Ok(Transport::Tls(Box::new(tls)))
                    }
                    Err(e) => {
                        counters.backend_tls_fail.inc();
                        Err(io::Error::other(format!("TLS handshake: {e}")))
                    }
                },
                _ => Ok(Transport::Tcp(tcp)),
            }
        })
        .await;
        match opened {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(ConnectError::Io(e)),
            Err(_) => Err(ConnectError::Timeout),
        }
    }
}

/// A Unix-socket connection, the preamble written first, within `timeout`.
async fn connect_unix(
    path: &std::path::Path,
    timeout: Duration,
    first: First<'_>,
) -> Result<Transport, ConnectError> {
    let opened = tokio::time::timeout(timeout, async {
        let mut stream = UnixStream::connect(path).await?;
        if let Some(bytes) = first.bytes(None) {
            tokio::io::AsyncWriteExt::write_all(&mut stream, &bytes).await?;
        }
        Ok::<_, io::Error>(Transport::Unix(stream))
    })
    .await;
    match opened {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(ConnectError::Io(io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))),
        Err(_) => Err(ConnectError::Timeout),
    }
}

/// TLS to one backend: the client in force, and the files it was built from.
pub(crate) struct TlsConnector {
    backend: String,
    settings: BackendTls,
    host: String,
    h2: bool,
    client: ArcSwap<BackendTlsClient>,
    watch: parking_lot::Mutex<Watch>,
}

/// What a [`TlsConnector`] last saw of its files.
struct Watch {
    /// The files the client in force was built from, as they were then.
    stamps: Stamps,
    checked: Instant,
    /// Files that failed to load, as they were then: not tried again until they change.
    failed: Option<Stamps>,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl TlsConnector {
    fn new(
        config: &BackendConfig,
        t: &BackendTls,
        client: BackendTlsClient,
        h2: bool,
    ) -> TlsConnector {
        TlsConnector {
            backend: config.name.clone(),
            settings: t.clone(),
            host: config.host.clone(),
            h2,
            client: ArcSwap::from_pointee(client),
            watch: parking_lot::Mutex::new(Watch {
                stamps: Stamps::take(&files(t)),
                checked: Instant::now(),
                failed: None,
            }),
        }
    }

    /// The client for a new connection: built again first if its files changed since (one
    /// caller looks, at most every [`CHECK_EVERY`]; the others go on with the client in
    /// force). A rebuild that fails keeps the client in force, logged and counted once per
    /// change of the files.
    fn client(&self, counters: &Counters) -> Arc<BackendTlsClient> {
        if let Some(mut w) = self.watch.try_lock()
            && w.checked.elapsed() >= CHECK_EVERY
        {
            w.checked = Instant::now();
            if w.stamps.changed() {
                let now = Stamps::take(&files(&self.settings));
                if w.failed.as_ref() != Some(&now) {
                    match BackendTlsClient::build(&self.settings, &self.host, self.h2) {
                        Ok(client) => {
                            self.client.store(Arc::new(client));
                            w.stamps = now;
                            w.failed = None;
                            counters.backend_tls_reload.inc();
                            tracing::info!(backend = %self.backend, "TLS files of this backend changed: new connections use them");
                        }
                        Err(e) => {
                            w.failed = Some(now);
                            counters.backend_tls_reload_error.inc();
                            tracing::error!(backend = %self.backend, "TLS files of this backend changed but do not load, keeping the ones in use: {e}");
                        }
                    }
                }
            }
        }
        self.client.load_full()
    }
}

/// The files a backend's TLS reads.
fn files(t: &BackendTls) -> Vec<PathBuf> {
    [&t.ca, &t.cert, &t.key]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
            Transport::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
            Transport::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
            Transport::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Tcp(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
            Transport::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
            Transport::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
            Transport::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
