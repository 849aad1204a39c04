//! Why a TLS handshake failed ([`Reason`]), as counted (`tls_handshake_fail_<reason>`) and
//! logged.

use crate::stats::Counters;
use crate::tls::stream::HandshakeError;

/// Why a handshake failed, as counted (`tls_handshake_fail_<reason>`) and logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `handshake_timeout` passed.
    Timeout,
    /// The client closed the connection.
    Eof,
    /// The first bytes were not a TLS handshake (plain HTTP to a TLS port, a scanner).
    NotTls,
    /// No protocol version in common (`min_version`, an old client).
    Version,
    /// No cipher suite, key exchange group or signature scheme in common.
    Cipher,
    /// ALPN offered without a protocol this listener serves.
    Alpn,
    /// No certificate for the server name (`unknown_name = "refuse"`) or for the client's
    /// signature schemes.
    NoCertificate,
    /// A client certificate missing (required) or not verifiable.
    ClientCert,
    /// A client certificate a revocation list (`client_crl`) revokes.
    ClientCertRevoked,
    /// The client sent an alert (it refused our certificate, or gave up).
    PeerAlert,
    /// Anything else the peer did wrong.
    Protocol,
    /// A transport error.
    Io,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Timeout => "timeout",
            Reason::Eof => "eof",
            Reason::NotTls => "not_tls",
            Reason::Version => "version",
            Reason::Cipher => "cipher",
            Reason::Alpn => "alpn",
            Reason::NoCertificate => "no_certificate",
            Reason::ClientCert => "client_cert",
            Reason::ClientCertRevoked => "client_cert_revoked",
            Reason::PeerAlert => "peer_alert",
            Reason::Protocol => "protocol",
            Reason::Io => "io",
        }
    }

    pub fn of(e: &HandshakeError) -> Reason {
        use rustls::{Error, PeerIncompatible as P, PeerMisbehaved as M};
        match e {
            HandshakeError::Eof => Reason::Eof,
            HandshakeError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Reason::Eof,
            HandshakeError::Io(_) => Reason::Io,
            HandshakeError::Tls(e) => match e {
                Error::InvalidMessage(_) => Reason::NotTls,
                Error::PeerIncompatible(p) => match p {
                    P::NoCipherSuitesInCommon
                    | P::NoKxGroupsInCommon
                    | P::NoSignatureSchemesInCommon
                    | P::NoEcPointFormatsInCommon
                    | P::UncompressedEcPointsRequired => Reason::Cipher,
                    P::SupportedVersionsExtensionRequired
                    | P::Tls12NotOffered
                    | P::Tls12NotOfferedOrEnabled
                    | P::ServerDoesNotSupportTls12Or13 => Reason::Version,
                    _ => Reason::Protocol,
                },
                Error::PeerMisbehaved(M::IllegalTlsInnerPlaintext) => Reason::Protocol,
                Error::NoApplicationProtocol => Reason::Alpn,
                Error::InvalidCertificate(rustls::CertificateError::Revoked) => {
                    Reason::ClientCertRevoked
                }
                Error::NoCertificatesPresented | Error::InvalidCertificate(_) => Reason::ClientCert,
                Error::AlertReceived(_) => Reason::PeerAlert,
                Error::General(m) if m == "no server certificate chain resolved" => {
                    Reason::NoCertificate
                }
                _ => Reason::Protocol,
            },
        }
    }

    /// Counts a failure with this reason (and in the total).
    pub fn count(self, c: &Counters) {
        c.tls_handshake_fail.inc();
        let counter = match self {
            Reason::Timeout => &c.tls_handshake_fail_timeout,
            Reason::Eof => &c.tls_handshake_fail_eof,
            Reason::NotTls => &c.tls_handshake_fail_not_tls,
            Reason::Version => &c.tls_handshake_fail_version,
            Reason::Cipher => &c.tls_handshake_fail_cipher,
            Reason::Alpn => &c.tls_handshake_fail_alpn,
            Reason::NoCertificate => &c.tls_handshake_fail_no_certificate,
            Reason::ClientCert => &c.tls_handshake_fail_client_cert,
            Reason::ClientCertRevoked => &c.tls_handshake_fail_client_cert_revoked,
            Reason::PeerAlert => &c.tls_handshake_fail_peer_alert,
            Reason::Protocol => &c.tls_handshake_fail_protocol,
            Reason::Io => &c.tls_handshake_fail_io,
        };
        counter.inc();
    }
}
