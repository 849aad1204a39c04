//! What an established client TLS connection negotiated ([`ConnTls`]: version, cipher,
//! server name, protocol, client certificate), carried by each of its requests ([`Session`]).

use std::sync::Arc;

use rustls::{ProtocolVersion, ServerConnection};

/// What is known about an established client TLS connection; each of its requests carries it
/// (request extensions) for rules, logs and `X-Forwarded-Proto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnTls {
    /// `TLSv1.2`, `TLSv1.3`.
    pub version: &'static str,
    /// IANA name: `TLS13_AES_128_GCM_SHA256`.
    pub cipher: &'static str,
    /// The server name the client sent.
    pub sni: Option<Box<str>>,
    /// The negotiated application protocol.
    pub alpn: Option<Box<str>>,
    /// The verified client certificate's subject (RFC 4514).
    pub client: Option<Box<str>>,
    pub resumed: bool,
}

/// Request extension: the request arrived over TLS.
#[derive(Clone, Debug)]
pub struct Session(pub Arc<ConnTls>);

impl ConnTls {
    pub fn of(conn: &ServerConnection) -> ConnTls {
        let version = match conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "unknown",
        };
        let cipher = conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown");
        let client = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| crate::tls::der::parse(c).ok())
            .map(|f| f.subject.into_boxed_str());
        ConnTls {
            version,
            cipher,
            sni: conn.server_name().map(Into::into),
            alpn: conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned().into_boxed_str()),
            client,
            resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        }
    }
}
