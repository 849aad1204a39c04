//! Connectors: how a connection to a backend is opened, below the HTTP protocol spoken on it
//! (`Backend::connect` puts hyper's HTTP/1 client on whatever this returns). TCP, or TLS
//! over TCP (`[[backend]] tls`); the connect timeout covers both the TCP connect and the
//! handshake.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::BackendConfig;
use crate::stats::Counters;
use crate::tls::client::{BackendStream, BackendTlsClient};

/// An open connection to a backend.
pub(crate) enum Transport {
    Tcp(TcpStream),
    Tls(Box<BackendStream>),
}

/// How connections to one backend are opened.
#[derive(Debug)]
pub(crate) enum Connector {
    Tcp,
    Tls(BackendTlsClient),
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
    pub fn for_backend(config: &BackendConfig) -> Connector {
        match &config.tls {
            None => Connector::Tcp,
            Some(t) => match BackendTlsClient::build(
                t,
                &config.host,
                config.protocol == crate::config::BackendProtocol::H2,
            ) {
                Ok(client) => {
                    if t.insecure_skip_verify {
                        tracing::warn!(backend = %config.name, "TLS to this backend does not verify its certificate (insecure_skip_verify)");
                    }
                    Connector::Tls(client)
                }
                Err(e) => {
                    tracing::error!(backend = %config.name, "TLS to this backend cannot be set up: {e}");
                    Connector::Broken(e)
                }
            },
        }
    }

    /// Opens a connection (TCP connect, then the TLS handshake if any) within `timeout`.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
        nodelay: bool,
        counters: &Counters,
    ) -> Result<Transport, ConnectError> {
        if let Connector::Broken(e) = self {
            return Err(ConnectError::Io(io::Error::other(e.clone())));
        }
        let opened = tokio::time::timeout(timeout, async {
            let tcp = TcpStream::connect((host, port)).await?;
            let _ = tcp.set_nodelay(nodelay);
            match self {
                Connector::Tls(client) => match client.connect(tcp).await {
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

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
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
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Tcp(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}
