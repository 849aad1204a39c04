//! The HTTPS client the ACME protocol runs over: hyper's HTTP/1.1 client on our own rustls
//! stream (`tls::stream`), trusting `ca_root` or the system's CA store. instant-acme asks it
//! for one request at a time; one connection is kept for the next request while it stays
//! usable, since an order takes a dozen requests to the same server.
//!
//! Every request is bounded: [`REQUEST_TIMEOUT`] from connecting to the last body byte, and
//! [`MAX_BODY`] bytes of answer (certificate chains and ACME objects are a few KiB).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, header};
use http_body_util::{BodyExt, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use instant_acme::{BodyWrapper, BytesResponse, Error, HttpClient};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::tls::client::{ClientSpec, Trust};
use crate::tls::stream::TlsStream;

/// Longest time one request may take, connection and TLS handshake included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest answer body read.
pub const MAX_BODY: usize = 1 << 20;

type Sender = SendRequest<BodyWrapper<Bytes>>;

/// An HTTPS client for one ACME server.
pub struct Client {
    tls: Arc<ClientConfig>,
    /// The connection kept from the last request: (host:port, sender).
    kept: Mutex<Option<(String, Sender)>>,
}

impl Client {
    /// A client trusting the CA certificates in `ca_root` (PEM), or the system's CA store.
    pub fn new(ca_root: Option<&Path>) -> Result<Client, String> {
        let tls = ClientSpec {
            trust: Some(Trust::file_or_system(ca_root, "tls.acme.ca_root")),
            alpn: &[],
            identity: None,
        }
        .build()?;
        Ok(Client {
            tls: Arc::new(tls),
            kept: Mutex::new(None),
        })
    }

    async fn send(&self, req: Request<BodyWrapper<Bytes>>) -> Result<BytesResponse, String> {
        let uri = req.uri().clone();
        if uri.scheme_str() != Some("https") {
            return Err(format!("{uri}: ACME servers are reached over https"));
        }
        let host = uri.host().ok_or_else(|| format!("{uri}: no host"))?;
        let port = uri.port_u16().unwrap_or(443);
        let authority = format!("{host}:{port}");
        let (parts, body) = req.into_parts();
        let mut req = Request::from_parts(parts, body);
        // Origin form on the wire, with the server's name in Host.
        *req.uri_mut() = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|e| format!("{uri}: {e}"))?;
        let host_value = match uri.port_u16() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        req.headers_mut().insert(
            header::HOST,
            host_value
                .parse()
                .map_err(|_| format!("{uri}: the host is not a valid Host field"))?,
        );
        let mut kept = self.kept.lock().await;
        let reusable = match kept.take() {
            Some((a, mut s)) if a == authority => s.ready().await.is_ok().then_some(s),
            _ => None,
        };
        let mut sender = match reusable {
            Some(s) => s,
            None => self.connect(host, port).await?,
        };
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("{uri}: {e}"))?;
        let (parts, body) = resp.into_parts();
        let body = Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("{uri}: reading the answer: {e}"))?
            .to_bytes();
        *kept = Some((authority, sender));
        Ok(BytesResponse {
            parts,
            body: Box::new(body),
        })
    }

    async fn connect(&self, host: &str, port: u16) -> Result<Sender, String> {
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|e| format!("{host}: not a server name ({e})"))?
            .to_owned();
        let conn = ClientConnection::new(self.tls.clone(), name)
            .map_err(|e| format!("{host}: cannot start TLS: {e}"))?;
        let mut tls = TlsStream::from_parts(tcp, conn);
        tls.handshake()
            .await
            .map_err(|e| format!("TLS with {host}:{port} failed: {e}"))?;
        let (sender, conn) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("{host}:{port}: {e}"))?;
        tokio::spawn(async move {
            // Ends when the sender is dropped or the server closes the connection.
            let _ = conn.await;
        });
        Ok(sender)
    }
}

/// A network failure, as instant-acme carries it (`acme_fail_network`).
#[derive(Debug)]
pub struct NetworkError(pub String);

impl std::fmt::Display for NetworkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NetworkError {}

/// The client instant-acme uses: one per account, shared by its requests.
pub struct AcmeHttp(pub Arc<Client>);

impl HttpClient for AcmeHttp {
    fn request(
        &self,
        req: Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, Error>> + Send>> {
        let client = self.0.clone();
        Box::pin(async move {
            match tokio::time::timeout(REQUEST_TIMEOUT, client.send(req)).await {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(Error::Other(Box::new(NetworkError(e)))),
                Err(_) => Err(Error::Other(Box::new(NetworkError(format!(
                    "no answer from the ACME server within {}s",
                    REQUEST_TIMEOUT.as_secs()
                ))))),
            }
        })
    }
}

/// `shellac check --online`: fetches the ACME `directory` (trusting `ca_root`, else the
/// system's store) and checks it is a directory (it names `newNonce`, `newAccount`,
/// `newOrder`).
pub async fn reach_directory(directory: &str, ca_root: Option<&Path>) -> Result<(), String> {
    let client = Client::new(ca_root)?;
    let req = Request::get(directory)
        .body(BodyWrapper::from(Vec::new()))
        .map_err(|e| format!("{directory}: {e}"))?;
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, client.send(req))
        .await
        .map_err(|_| format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))??;
    let status = resp.parts.status;
    let mut resp = resp;
    let body = resp.body.into_bytes().await.unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(format!("answered {status}"));
    }
    if !(text.contains("newNonce") && text.contains("newAccount") && text.contains("newOrder")) {
        return Err(
            "answered, but not with an ACME directory (no newNonce / newAccount / newOrder)".into(),
        );
    }
    Ok(())
}
