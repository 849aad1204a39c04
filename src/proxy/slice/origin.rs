//! Asking the origin for one slice: the backend request the fetch builds for the client's
//! request (`fetch/request.rs`, `Txn::slice_requester`: forwarding fields, the policy's
//! `bereq`, no conditionals), sent again for each slice with its own `Range`, to a backend of
//! the request's route.

use std::net::IpAddr;
use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};

use crate::backend::director::{Member, Pick};
use crate::backend::{Backend, BackendBody, ClientInfo, FetchError, RequestBody};
use crate::cache::CacheKey;

/// Backends tried at most for one slice (connection failures go to the next choice).
const ATTEMPTS: usize = 3;

/// How slices of one client request are asked for.
pub(in crate::proxy) struct Requester {
    /// The route the request was sent to (a rule's or VCL's director, else the default).
    pub route: Member,
    /// What a hash director hashes: the URL's key, the client, the request's fields.
    pub key: CacheKey,
    pub client: IpAddr,
    pub req_headers: HeaderMap,
    pub hash: Option<u64>,
    /// The backend request as built for a cache fill (no Range, no conditionals).
    pub uri: Uri,
    pub headers: HeaderMap,
    pub info: Option<ClientInfo>,
}

impl Requester {
    /// Sends `GET` with `Range: bytes=start-end`; the response, or the status and detail to
    /// answer with when no backend gave one.
    pub async fn send(
        &self,
        start: u64,
        end: u64,
    ) -> Result<Response<BackendBody>, (StatusCode, &'static str)> {
        let mut tried: Vec<Arc<Backend>> = Vec::new();
        let mut last: Option<FetchError> = None;
        for _ in 0..ATTEMPTS {
            let Some(backend) = self.route.pick(&Pick {
                key: &self.key,
                headers: &self.req_headers,
                client: self.client,
                exclude: &tried,
                hash: self.hash,
                draw: None,
            }) else {
                break;
            };
            match backend.send(self.request(start, end)).await {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    tracing::warn!(backend = backend.name(), error = %e, "slice fetch failed");
                    if !e.before_response() {
                        return Err((e.status(), e.as_str()));
                    }
                    tried.push(backend);
                    last = Some(e);
                }
            }
        }
        Err(match last {
            Some(e) => (e.status(), e.as_str()),
            None => (StatusCode::SERVICE_UNAVAILABLE, "no-healthy-backend"),
        })
    }

    fn request(&self, start: u64, end: u64) -> Request<RequestBody> {
        let mut headers = self.headers.clone();
        if let Ok(v) = HeaderValue::from_str(&format!("bytes={start}-{end}")) {
            headers.insert(header::RANGE, v);
        }
        let mut req = Request::new(RequestBody::empty());
        *req.uri_mut() = self.uri.clone();
        *req.version_mut() = Version::HTTP_11;
        *req.headers_mut() = headers;
        if let Some(info) = self.info {
            req.extensions_mut().insert(info);
        }
        req
    }
}
