//! TLS to backends: a client per `[[backend]]` with `tls` (built by [`ClientSpec`]), and the
//! handshake on a new backend connection.
//!
//! Verification is on unless `insecure_skip_verify` says otherwise: against `ca` when given,
//! else the operating system's trust store (rustls-native-certs reads `/etc/ssl/certs` and
//! the files OpenSSL would; no network). The name checked and sent by SNI is `server_name`,
//! else the backend's `host`.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use tokio::net::TcpStream;

use super::{ClientSpec, Trust};
use crate::config::BackendTls;
use crate::tls::stream::{HandshakeError, TlsStream};

/// A backend's TLS: its rustls configuration and the name it connects to.
#[derive(Clone, Debug)]
pub struct BackendTlsClient {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

/// A TLS connection to a backend.
pub type BackendStream = TlsStream<TcpStream, ClientConnection>;

impl BackendTlsClient {
    /// Builds the client for a backend at `host` (reads the CA, certificate and key files;
    /// an error names the file).
    /// With `h2`, ALPN offers `h2` only (`[[backend]] protocol = "h2"`), else `http/1.1`.
    pub fn build(t: &BackendTls, host: &str, h2: bool) -> Result<BackendTlsClient, String> {
        let name_text = t.server_name.as_deref().unwrap_or(host);
        let name = ServerName::try_from(name_text.to_string())
            .map_err(|_| format!("`{name_text}` is not a host name or IP address"))?;
        let spec = ClientSpec {
            trust: (!t.insecure_skip_verify)
                .then(|| Trust::file_or_system(t.ca.as_deref(), "`ca`")),
            alpn: if h2 { &[b"h2"] } else { &[b"http/1.1"] },
            identity: match (&t.cert, &t.key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                _ => None,
            },
        };
        Ok(BackendTlsClient {
            config: Arc::new(spec.build()?),
            name,
        })
    }

    /// The TLS handshake on a connected socket.
    pub async fn connect(&self, tcp: TcpStream) -> Result<BackendStream, HandshakeError> {
        let conn = ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(HandshakeError::Tls)?;
        let mut tls = TlsStream::from_parts(tcp, conn);
        tls.handshake().await?;
        Ok(tls)
    }
}
