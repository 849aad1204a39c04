//! TLS to backends: a rustls client configuration per `[[backend]]` with `tls`, and the
//! handshake on a new backend connection.
//!
//! Verification is on unless `insecure_skip_verify` says otherwise: against `ca` when given,
//! else the operating system's trust store (rustls-native-certs reads `/etc/ssl/certs` and
//! the files OpenSSL would; no network). The name checked and sent by SNI is `server_name`,
//! else the backend's `host`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;

use super::stream::{HandshakeError, TlsStream};
use super::{certs, provider};
use crate::config::BackendTls;

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
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let builder = if t.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider.clone())))
        } else {
            builder.with_root_certificates(roots(t)?)
        };
        let mut config = match (&t.cert, &t.key) {
            (Some(cert), Some(key)) => {
                let chain = certs::read_certs(cert)?;
                let key_pem = std::fs::read(key)
                    .map_err(|e| format!("cannot read key file {}: {e}", key.display()))?;
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
                    .map_err(|e| format!("{}: no usable private key ({e})", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| format!("{}: {e}", key.display()))?
            }
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![if h2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        Ok(BackendTlsClient {
            config: Arc::new(config),
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

/// The trust anchors: `ca`'s certificates, or the system's store.
fn roots(t: &BackendTls) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    match &t.ca {
        Some(ca) => {
            for cert in certs::read_certs(ca)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: not a usable CA certificate ({e})", ca.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no CA certificates in the system's trust store (install ca-certificates, or give `ca`)"
                        .into(),
                );
            }
        }
    }
    Ok(roots)
}

/// `insecure_skip_verify`: accepts any certificate, but still checks that the handshake's
/// signatures are made with the certificate's key (so the connection is at least bound to
/// the certificate that was shown).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
