//! TLS: termination for client listeners and TLS to backends, on rustls with the *ring*
//! provider (why ring: Cargo.toml and ARCHITECTURE.md).
//!
//! - `stream.rs`: a TLS connection over any byte stream, that can be taken apart and put
//!   together again (idle connections are parked as socket + TLS state).
//! - `server/`: `[[tls]]` listeners as [`server::Frontend`]s (mod.rs), their files loaded
//!   (`load.rs`), what the admin API shows of them (`view.rs`), handshake failure reasons,
//!   what a connection negotiated ([`server::ConnTls`]).
//! - `store.rs`: a listener's certificates and SNI selection; the run-time install API an
//!   ACME client uses ([`store::CertStore::install`]).
//! - `certs.rs`: PEM files → checked certificate and key; `der.rs`: names, validity and
//!   subject read from a certificate.
//! - `client/`: the one builder of TLS client configurations (backends, ACME) and the trust
//!   anchors every client and the client-certificate check read (CA file or system store).
//! - `crl.rs`: revocation lists for client certificates (`client_crl`).
//! - `ticket.rs`: session-ticket keys (rotated in memory, or shared files).
//! - `watch.rs`: noticing changed files.

pub mod certs;
pub mod client;
pub mod crl;
pub mod der;
pub mod server;
pub mod stamps;
pub mod store;
pub mod stream;
pub mod ticket;
pub mod watch;

use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::crypto::ring as provider_impl;

/// The crypto provider every TLS configuration uses: *ring*, with AES-128-GCM preferred (as
/// strong as needed, and cheaper than AES-256-GCM per byte), then AES-256-GCM, then
/// ChaCha20-Poly1305; TLS 1.2 only with ECDHE and these AEADs; X25519, P-256, P-384.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            use provider_impl::cipher_suite as cs;
            Arc::new(CryptoProvider {
                cipher_suites: vec![
                    cs::TLS13_AES_128_GCM_SHA256,
                    cs::TLS13_AES_256_GCM_SHA384,
                    cs::TLS13_CHACHA20_POLY1305_SHA256,
                    cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                    cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                    cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                    cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                    cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                    cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
                ],
                ..provider_impl::default_provider()
            })
        })
        .clone()
}
