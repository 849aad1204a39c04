//! The kinds a backend can be (`origin.rs` is the interface they implement), chosen once from
//! its configuration, and the dispatch to them.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};

use super::endpoint::Endpoint;
use super::error::FetchError;
use super::fastcgi::FastCgi;
use super::files::FilesKind;
use super::h2::H2;
use super::http1::Http1;
use super::origin::Origin;
use super::request_body::RequestBody;
use super::source::Source;
use crate::config::{BackendConfig, BackendProtocol};

/// The kind a backend is, chosen once from its configuration. An enum, not a trait object:
/// the request path calls the kind's methods without a virtual call or a boxed future.
pub(crate) enum Kind {
    Http1(Http1),
    H2(H2),
    Files(FilesKind),
    FastCgi(FastCgi),
}

/// A connection of one of the kinds.
pub(crate) enum Conn {
    Http1(super::conn::Http1Conn),
    H2(super::mux::Slot),
    Files,
    FastCgi(super::connector::Transport),
}

impl Kind {
    pub(crate) fn for_backend(
        config: &BackendConfig,
        max_response_head: usize,
        max_response_fields: usize,
        max_response_field: usize,
    ) -> Kind {
        match config.protocol {
            BackendProtocol::Http1 => Kind::Http1(Http1::new(
                max_response_head,
                max_response_fields,
                max_response_field,
            )),
            BackendProtocol::H2 => Kind::H2(H2::new(config.max_streams, max_response_head)),
            BackendProtocol::Files => Kind::Files(FilesKind::new(config)),
            BackendProtocol::Fastcgi => {
                Kind::FastCgi(FastCgi::new(config, max_response_head, max_response_fields))
            }
        }
    }

    pub(crate) fn alpn(&self) -> &'static [u8] {
        match self {
            Kind::Http1(k) => k.alpn(),
            Kind::H2(k) => k.alpn(),
            Kind::Files(k) => k.alpn(),
            Kind::FastCgi(k) => k.alpn(),
        }
    }

    pub(crate) async fn connection(
        &self,
        endpoint: &Arc<Endpoint>,
        connect: Duration,
        fresh: bool,
    ) -> Result<(Conn, bool), FetchError> {
        match self {
            Kind::Http1(k) => k
                .connection(endpoint, connect, fresh)
                .await
                .map(|(c, r)| (Conn::Http1(c), r)),
            Kind::H2(k) => k
                .connection(endpoint, connect, fresh)
                .await
                .map(|(c, r)| (Conn::H2(c), r)),
            Kind::Files(k) => k
                .connection(endpoint, connect, fresh)
                .await
                .map(|((), r)| (Conn::Files, r)),
            Kind::FastCgi(k) => k
                .connection(endpoint, connect, fresh)
                .await
                .map(|(c, r)| (Conn::FastCgi(c), r)),
        }
    }

    /// A new connection that starts with a PROXY protocol header naming `client`
    /// (`[[backend]] proxy_protocol`, which only HTTP/1.1 backends accept).
    pub(crate) async fn proxied(
        &self,
        endpoint: &Arc<Endpoint>,
        connect: Duration,
        client: Option<super::connector::Relayed>,
    ) -> Result<Conn, FetchError> {
        match self {
            Kind::Http1(k) => k.connect(endpoint, connect, client).await.map(Conn::Http1),
            Kind::H2(_) | Kind::Files(_) | Kind::FastCgi(_) => Err(FetchError::Invalid(
                endpoint.config.name.clone(),
                "proxy_protocol on a backend that is not HTTP/1.1",
            )),
        }
    }

    pub(crate) async fn request(
        &self,
        endpoint: &Arc<Endpoint>,
        conn: Conn,
        req: Request<RequestBody>,
    ) -> Result<Response<Source>, FetchError> {
        match (self, conn) {
            (Kind::Http1(k), Conn::Http1(c)) => k.request(endpoint, c, req).await,
            (Kind::H2(k), Conn::H2(c)) => k.request(endpoint, c, req).await,
            (Kind::Files(k), Conn::Files) => k.request(endpoint, (), req).await,
            (Kind::FastCgi(k), Conn::FastCgi(c)) => k.request(endpoint, c, req).await,
            _ => unreachable!("a connection is only handed to the kind that opened it"),
        }
    }

    pub(crate) fn retries_stale(&self) -> bool {
        match self {
            Kind::Http1(k) => k.retries_stale(),
            Kind::H2(k) => k.retries_stale(),
            Kind::Files(k) => k.retries_stale(),
            Kind::FastCgi(k) => k.retries_stale(),
        }
    }

    pub(crate) async fn probe(&self, endpoint: &Endpoint, request: &[u8]) -> Result<u16, String> {
        match self {
            Kind::Http1(k) => k.probe(endpoint, request).await,
            Kind::H2(k) => k.probe(endpoint, request).await,
            Kind::Files(k) => k.probe(endpoint, request).await,
            Kind::FastCgi(k) => k.probe(endpoint, request).await,
        }
    }

    pub(crate) fn idle(&self) -> usize {
        match self {
            Kind::Http1(k) => k.idle(),
            Kind::H2(k) => k.idle(),
            Kind::Files(k) => k.idle(),
            Kind::FastCgi(k) => k.idle(),
        }
    }

    /// What the kind adds to the backend's `/backends` entry.
    /// A files backend's refusals by reason (`reason` word, count); none for other kinds.
    pub(crate) fn files_refused(&self) -> Vec<(&'static str, u64)> {
        match self {
            Kind::Files(k) => k
                .refused()
                .snapshot()
                .into_iter()
                .map(|(r, n)| (r.as_str(), n))
                .collect(),
            Kind::FastCgi(_) | Kind::Http1(_) | Kind::H2(_) => Vec::new(),
        }
    }

    pub(crate) fn describe(&self, v: &mut serde_json::Value) {
        match self {
            Kind::Files(k) => k.describe(v),
            Kind::FastCgi(k) => k.describe(v),
            Kind::Http1(_) | Kind::H2(_) => {}
        }
    }
}
