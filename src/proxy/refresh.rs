//! Background refresh for grace (stale-while-revalidate): one fetch per stale object, run as
//! its own task so the client that found the stale copy is answered at once.

use std::net::SocketAddr;
use std::sync::Arc;

use http::request::Parts;
use http::{Method, Request};

use super::Proxy;
use super::fsm;
use crate::cache::busy::Join;
use crate::cache::{CacheKey, Object};

/// Starts a refresh of `primary` unless a fetch for it is already in progress.
pub(super) fn spawn(
    proxy: &Arc<Proxy>,
    (primary, inherited): (CacheKey, fsm::Inherited),
    req: &Parts,
    client: SocketAddr,
    stale: Arc<Object>,
) {
    let key = proxy.cache.lookup_key(&primary, &req.headers);
    let Join::Leader(guard) = proxy.cache.busy.join(&key) else {
        return;
    };
    proxy.counters.cache_refresh.inc();
    let mut head = Request::new(());
    *head.method_mut() = Method::GET;
    *head.uri_mut() = req.uri.clone();
    *head.version_mut() = req.version;
    *head.headers_mut() = req.headers.clone();
    let (parts, ()) = head.into_parts();
    let proxy = proxy.clone();
    tokio::spawn(async move {
        // The response is only a by-product: the fill stores the object.
        drop(fsm::refresh(proxy, parts, client, (primary, inherited), stale, guard).await);
    });
}
