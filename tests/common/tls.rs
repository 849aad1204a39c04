//! TLS for tests: a certificate authority and certificates made in the test (rcgen), written
//! to a temporary directory for Shellac to read, and rustls clients that trust that CA.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use shellac::tls::stream::{HandshakeError, TlsStream};

/// A TLS client connection.
pub type Client = TlsStream<TcpStream, ClientConnection>;

/// A test RSA key (2048 bits, made with `openssl genrsa` for these tests only): *ring* signs
/// with RSA keys but does not make them.
pub const RSA_KEY: &str = include_str!("../tls/rsa-test.key");

/// A CA and the files of the certificates it signed, in a directory of their own.
pub struct Pki {
    pub dir: PathBuf,
    ca_key: KeyPair,
    ca: rcgen::Certificate,
    pub ca_file: PathBuf,
}

impl Pki {
    pub fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "shellac-tls-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Shellac test CA {tag}"));
        let ca = params.self_signed(&ca_key).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        Pki {
            dir,
            ca_key,
            ca,
            ca_file,
        }
    }

    /// A server certificate (ECDSA P-256) for `names`: (cert file, key file).
    pub fn leaf(&self, file: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        self.leaf_with(file, names, KeyPair::generate().unwrap(), |_| {})
    }

    /// A server certificate with an RSA key.
    pub fn leaf_rsa(&self, file: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let key = KeyPair::from_pem_and_sign_algo(RSA_KEY, &rcgen::PKCS_RSA_SHA256).unwrap();
        self.leaf_with(file, names, key, |_| {})
    }

    /// A server certificate, its parameters adjusted by `tweak` (validity, ...).
    pub fn leaf_with(
        &self,
        file: &str,
        names: &[&str],
        key: KeyPair,
        tweak: impl FnOnce(&mut CertificateParams),
    ) -> (PathBuf, PathBuf) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        tweak(&mut params);
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let cert_file = self.dir.join(format!("{file}.pem"));
        let key_file = self.dir.join(format!("{file}.key"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        (cert_file, key_file)
    }

    /// A client certificate with subject `CN=<cn>,O=Shellac tests` (RFC 4514 order).
    pub fn client(&self, file: &str, cn: &str) -> (PathBuf, PathBuf) {
        self.leaf_with(file, &[], KeyPair::generate().unwrap(), |p| {
            p.distinguished_name = rcgen::DistinguishedName::new();
            p.distinguished_name
                .push(DnType::OrganizationName, "Shellac tests");
            p.distinguished_name.push(DnType::CommonName, cn);
        })
    }

    /// A client certificate as [`Pki::client`], with serial number `serial` (for a
    /// revocation list to name).
    pub fn client_serial(&self, file: &str, cn: &str, serial: u64) -> (PathBuf, PathBuf) {
        self.leaf_with(file, &[], KeyPair::generate().unwrap(), |p| {
            p.distinguished_name = rcgen::DistinguishedName::new();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.serial_number = Some(rcgen::SerialNumber::from(serial));
        })
    }

    /// A revocation list signed by this CA revoking `serials`, current from 2020 to
    /// `next_update_year` (January 1st), written to `file`.
    pub fn crl(&self, file: &str, serials: &[u64], next_update_year: i32) -> PathBuf {
        let crl = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(next_update_year, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|&s| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(s),
                    revocation_time: rcgen::date_time_ymd(2020, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&self.ca, &self.ca_key)
        .unwrap();
        let path = self.dir.join(file);
        std::fs::write(&path, crl.pem().unwrap()).unwrap();
        path
    }

    /// This CA as the only trust anchor.
    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        roots
    }

    /// A client trusting this CA; `versions`: the protocol versions it offers.
    pub fn client_config(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> ClientConfig {
        self.client_config_with(versions, None)
    }

    /// A client trusting this CA that presents `cert` (cert and key files) when asked.
    pub fn client_config_with(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
        cert: Option<&(PathBuf, PathBuf)>,
    ) -> ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .unwrap()
                .with_root_certificates(roots);
        match cert {
            None => builder.with_no_client_auth(),
            Some((c, k)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(c)
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect();
                let key = PrivateKeyDer::from_pem_file(k).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Both TLS versions.
pub fn all_versions() -> Vec<&'static rustls::SupportedProtocolVersion> {
    vec![&rustls::version::TLS13, &rustls::version::TLS12]
}

/// A TLS connection to `addr` naming `sni` (an IP address: no SNI is sent).
pub async fn connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    sni: &str,
) -> Result<Client, HandshakeError> {
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let conn = ClientConnection::new(config.clone(), name).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = TlsStream::from_parts(tcp, conn);
    tls.handshake().await?;
    Ok(tls)
}

/// The subject of the certificate the server presented.
pub fn server_subject(tls: &Client) -> String {
    let cert = &tls.get_ref().1.peer_certificates().unwrap()[0];
    shellac::tls::der::parse(cert).unwrap().subject
}

/// The `[[tls]]` table text for a listener with these certificates.
pub fn tls_table(certs: &[&(PathBuf, PathBuf)], extra: &str) -> String {
    let mut t = String::from("[[tls]]\nlisten = \"127.0.0.1:0\"\n");
    t.push_str(extra);
    t.push('\n');
    for (c, k) in certs {
        t.push_str(&format!(
            "[[tls.certificate]]\ncert = \"{}\"\nkey = \"{}\"\n",
            c.display(),
            k.display()
        ));
    }
    t
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Whether a TLS client is refused: at the handshake, or (TLS 1.3, where the server checks
/// the client's certificate after the client is done) at its first read.
pub async fn refused(addr: std::net::SocketAddr, client: &Arc<rustls::ClientConfig>) -> bool {
    let Ok(mut tls) = connect(addr, client, "site.test").await else {
        return true;
    };
    if tls
        .write_all(b"GET / HTTP/1.1\r\nhost: site.test\r\n\r\n")
        .await
        .is_err()
    {
        return true;
    }
    let mut buf = [0u8; 16];
    !matches!(
        tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf)).await,
        Ok(Ok(n)) if n > 0
    )
}
