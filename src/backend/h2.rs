//! The HTTP/2 origin kind (`[[backend]] protocol = "h2"`): hyper's HTTP/2 client, with prior
//! knowledge over TCP or by ALPN over TLS; requests take stream slots on a few shared
//! connections (`mux.rs`), in HTTP/2's form; probes speak HTTP/2 too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper_util::rt::TokioIo;

use super::endpoint::Endpoint;
use super::error::FetchError;
use super::mux::{Mux, Slot};
use super::origin::Origin;
use super::request_body::RequestBody;
use super::source::{Release, Source};

/// HTTP/2 to one backend: its multiplexed connections.
pub(crate) struct H2 {
    mux: Mux,
    /// `server.max_response_header_size`, as hyper's `max_header_list_size`.
    max_response_head: usize,
}

impl H2 {
    pub(super) fn new(max_streams: u32, max_response_head: usize) -> H2 {
        H2 {
            mux: Mux::new(max_streams),
            max_response_head,
        }
    }

    /// Opens an HTTP/2 connection (TCP with prior knowledge, or TLS with ALPN `h2`) and adds
    /// it to the mux; its task closes it after `idle_timeout` without a request.
    async fn connect(&self, endpoint: &Endpoint, timeout: Duration) -> Result<Slot, FetchError> {
        let name = &endpoint.config.name;
        let stream = endpoint.open_transport(timeout).await?;
        let (sender, conn) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .max_header_list_size(u32::try_from(self.max_response_head).unwrap_or(u32::MAX))
                .handshake(TokioIo::new(stream))
                .await
                .map_err(|e| FetchError::Failed(name.clone(), e.into()))?;
        endpoint.counters.backend_conn.inc();
        endpoint.counters.backend_h2_conn.inc();
        endpoint.stats.conn.inc();
        let (slot, busy) = self.mux.add(sender);
        let name = name.clone();
        let idle = endpoint.config.idle_timeout.0;
        tokio::spawn(async move {
            let conn = std::pin::pin!(conn);
            let mut conn = conn;
            let mut idle_since: Option<Instant> = None;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(backend = %name, error = %e, "backend HTTP/2 connection closed");
                        }
                        return;
                    }
                    _ = tokio::time::sleep(idle.min(Duration::from_secs(1))) => {
                        if busy.streams() > 0 {
                            idle_since = None;
                        } else if idle_since.get_or_insert_with(Instant::now).elapsed() >= idle {
                            return; // dropping the connection closes it
                        }
                    }
                }
            }
        });
        Ok(slot)
    }
}

impl Origin for H2 {
    type Conn = Slot;

    fn alpn(&self) -> &'static [u8] {
        b"h2"
    }

    /// A stream slot on a shared connection; a new connection when every one is full.
    async fn connection(
        &self,
        endpoint: &Arc<Endpoint>,
        connect: Duration,
        _fresh: bool,
    ) -> Result<(Slot, bool), FetchError> {
        if let Some(slot) = self.mux.take() {
            return Ok((slot, true));
        }
        // One connection opened at a time; those waiting take its streams.
        let _opening = self.mux.opening.lock().await;
        match self.mux.take() {
            Some(slot) => Ok((slot, true)),
            None => Ok((self.connect(endpoint, connect).await?, false)),
        }
    }

    async fn request(
        &self,
        endpoint: &Arc<Endpoint>,
        slot: Slot,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError> {
        let req = h2_form(endpoint, req);
        let mut sender = slot.sender();
        let sent = async {
            sender.ready().await?;
            sender.send_request(req).await
        };
        let resp = sent
            .await
            .map_err(|e| FetchError::Failed(endpoint.config.name.clone(), e.into()))?;
        Ok(resp.map(|body| Source::Hyper {
            body,
            release: Release::Slot { _held: slot },
        }))
    }

    /// A stream that fails is not sent again on a new connection: the connections are shared,
    /// so one found dead is dropped from the mux and the next request opens another.
    fn retries_stale(&self) -> bool {
        false
    }

    /// The probe's request (its first line's method and target, its field lines) sent as an
    /// HTTP/2 request on a connection of its own.
    async fn probe(&self, endpoint: &Endpoint, request: &[u8]) -> Result<u16, String> {
        let stream = endpoint.probe_transport().await?;
        let text = String::from_utf8_lossy(request);
        let mut lines = text.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("GET");
        let target = first.next().unwrap_or("/");
        let mut authority = endpoint.host_header();
        let mut fields = Vec::new();
        for line in lines.take_while(|l| !l.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("host") {
                authority = value.to_string();
            } else if !name.eq_ignore_ascii_case("connection") {
                fields.push((name.to_string(), value.to_string()));
            }
        }
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}://{authority}{target}", scheme(endpoint)))
            .version(http::Version::HTTP_2);
        for (name, value) in &fields {
            req = req.header(name.as_str(), value.as_str());
        }
        let req = req
            .body(RequestBody::empty())
            .map_err(|e| format!("probe request: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            TokioIo::new(stream),
        )
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        let task = tokio::spawn(conn);
        let answer = sender.send_request(req).await;
        task.abort();
        answer
            .map(|r| r.status().as_u16())
            .map_err(|e| format!("HTTP/2: {e}"))
    }

    /// Shared connections are counted by the mux, not as idle ones.
    fn idle(&self) -> usize {
        0
    }
}

fn scheme(endpoint: &Endpoint) -> &'static str {
    if endpoint.config.tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// The HTTP/1.1-shaped backend request in HTTP/2's form: the target absolute (its authority
/// the request's `Host`, which becomes `:authority`), version 2, no field that is
/// connection-specific in HTTP/2.
fn h2_form(endpoint: &Endpoint, mut req: Request<RequestBody>) -> Request<RequestBody> {
    let authority = req
        .headers_mut()
        .remove(http::header::HOST)
        .and_then(|h| h.to_str().ok().map(str::to_owned))
        .unwrap_or_else(|| endpoint.host_header());
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if let Ok(uri) = format!("{}://{authority}{path}", scheme(endpoint)).parse() {
        *req.uri_mut() = uri;
    }
    *req.version_mut() = http::Version::HTTP_2;
    let headers = req.headers_mut();
    for name in [
        http::header::CONNECTION,
        http::header::TRANSFER_ENCODING,
        http::header::UPGRADE,
        http::header::HeaderName::from_static("keep-alive"),
        http::header::HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
    if headers
        .get(http::header::TE)
        .is_some_and(|v| v.as_bytes() != b"trailers")
    {
        headers.remove(http::header::TE);
    }
    req
}
