//! Background refresh: for grace (stale-while-revalidate, a stale object delivered) and for
//! refresh-ahead (`cache.refresh_ahead`, a fresh object close to expiry delivered). One fetch
//! per object at a time (the busy table's lead), run as its own task so the client that found
//! the copy is answered at once.

use std::net::SocketAddr;
use std::sync::Arc;

use http::Response;
use http::request::Parts;

use super::Proxy;

use http::StatusCode;

use super::body::ResponseBody;
use super::txn::{FetchMode, Inherited, Step, Txn};
use super::{deliver, fetch};
use crate::cache::busy::{Join, LeaderGuard};
use crate::cache::{CacheKey, Object};

/// Why an object is refreshed in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// Stale within grace, delivered.
    Grace,
    /// Fresh, within `cache.refresh_ahead` of expiry, delivered.
    Ahead,
}

/// Starts a refresh of `primary` (revalidating `current` if it has validators) unless a fetch
/// for it is already in progress.
pub(super) fn spawn(
    proxy: &Arc<Proxy>,
    (primary, inherited): (CacheKey, Inherited),
    req: &Parts,
    client: SocketAddr,
    (current, why): (Arc<Object>, Why),
) {
    let key = proxy.cache.lookup_key(&primary, &req.headers);
    let Join::Leader(guard) = proxy.cache.busy.join(&key) else {
        return;
    };
    match why {
        Why::Grace => proxy.counters.cache_refresh.inc(),
        Why::Ahead => proxy.counters.cache_refresh_ahead.inc(),
    }
    let stale = current;
    let parts = super::backend_side::get_head(req);
    let proxy = proxy.clone();
    tokio::spawn(async move {
        // The response is only a by-product: the fill stores the object.
        drop(run(proxy, parts, client, (primary, inherited), stale, guard).await);
    });
}

/// Runs a background refresh fetch for `primary` (grace), revalidating `stale` if it has
/// validators. The caller holds the busy-table lead for the key.
async fn run(
    proxy: Arc<Proxy>,
    req: Parts,
    client: SocketAddr,
    (primary, inherited): (CacheKey, Inherited),
    stale: Arc<Object>,
    guard: LeaderGuard,
) -> Response<ResponseBody> {
    let mut txn = Txn::backend_side(
        proxy,
        (req, client),
        (primary, inherited),
        Some(stale),
        true,
    );
    match fetch::fetch(&mut txn, FetchMode::Miss(guard)).await {
        Step::Deliver(resp) => resp,
        _ => deliver::synth(StatusCode::SERVICE_UNAVAILABLE, "refresh-failed", false),
    }
}
