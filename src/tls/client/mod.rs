//! TLS clients: the one place a rustls [`ClientConfig`] is built, for every client Shellac
//! makes — backends (`[[backend]] tls`), the ACME server (`tls.acme.ca_root`) — and the trust
//! anchors ([`roots`]) that the listeners' client-certificate check and the Redis Cluster's
//! TLS (whose client builds its own configuration from the files' bytes) read too.
//!
//! - `roots.rs`: trust anchors — an operator's CA file or the system's store.
//! - `backend.rs`: a backend's client and the handshake on a new backend connection.
//! - `insecure.rs`: the verifier of `insecure_skip_verify`.

mod backend;
mod insecure;
pub mod roots;

use std::path::Path;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

pub use backend::{BackendStream, BackendTlsClient};
pub use roots::Trust;

use super::{certs, provider};

/// What a client is: whom it trusts, which protocols it offers, and the certificate it shows.
#[derive(Clone, Copy, Debug)]
pub struct ClientSpec<'a> {
    /// The trust anchors; `None` accepts any certificate (`insecure_skip_verify`), still
    /// checking that the handshake is signed with the certificate's key.
    pub trust: Option<Trust<'a>>,
    /// ALPN protocols offered, in order of preference (none: no ALPN extension).
    pub alpn: &'a [&'a [u8]],
    /// The client certificate chain and key files (PEM), when the server asks for one.
    pub identity: Option<(&'a Path, &'a Path)>,
}

impl ClientSpec<'_> {
    /// The rustls configuration: the provider every TLS configuration uses (`tls::provider`),
    /// its safe protocol versions, the trust anchors, the client certificate (its files read
    /// here; an error names the file), the ALPN list.
    pub fn build(&self) -> Result<ClientConfig, String> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let builder = match &self.trust {
            Some(trust) => builder.with_root_certificates(trust.roots()?),
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(insecure::NoVerification(provider))),
        };
        let mut config = match self.identity {
            Some((cert, key)) => {
                let chain = certs::read_certs(cert)?;
                let key_pem = std::fs::read(key)
                    .map_err(|e| format!("cannot read key file {}: {e}", key.display()))?;
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
                    .map_err(|e| format!("{}: no usable private key ({e})", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| format!("{}: {e}", key.display()))?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = self.alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}
