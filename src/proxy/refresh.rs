//! Background refresh: for grace (stale-while-revalidate, a stale object delivered) and for
//! refresh-ahead (`cache.refresh_ahead`, a fresh object close to expiry delivered). One fetch
//! per object at a time (the busy table's lead), run as its own task so the client that found
//! the copy is answered at once.

use std::net::SocketAddr;
use std::sync::Arc;

use http::request::Parts;
use http::{Method, Request, Response};

use super::Proxy;
use std::time::Instant;

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
    let parts = get_head(req);
    let proxy = proxy.clone();
    tokio::spawn(async move {
        // The response is only a by-product: the fill stores the object.
        drop(run(proxy, parts, client, (primary, inherited), stale, guard).await);
    });
}

/// A `GET` with `req`'s target, version and fields: the request a fetch on the backend side
/// (a refresh, a slice) is made for.
pub(super) fn get_head(req: &Parts) -> Parts {
    let mut head = Request::new(());
    *head.method_mut() = Method::GET;
    *head.uri_mut() = req.uri.clone();
    *head.version_mut() = req.version;
    *head.headers_mut() = req.headers.clone();
    // A VCL program's backend subroutines read `server.ip` for a background fetch too.
    if let Some(local) = req.extensions.get::<super::LocalAddr>() {
        head.extensions_mut().insert(*local);
    }
    head.into_parts().0
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

impl Txn {
    /// A transaction of the backend side only, for `primary`: a fetch started by a client
    /// request (whose `inherited` state it runs with) but not answering it — a background
    /// refresh (`background`: VCL's `bereq.is_bgfetch`, revalidating `stale`), or a slice
    /// fetched while a client reads (`slice/`).
    pub(super) fn backend_side(
        proxy: Arc<Proxy>,
        (req, client): (Parts, SocketAddr),
        (primary, mut inherited): (CacheKey, Inherited),
        stale: Option<Arc<Object>>,
        background: bool,
    ) -> Txn {
        let mut txn = Txn {
            proxy,
            policy: inherited.policy,
            head_only: true,
            req,
            body: None,
            client,
            key: Some(primary),
            backend: None,
            stale,
            req_cc: None,
            background,
            matched_rules: std::mem::take(&mut inherited.matched_rules),
            withheld_conditions: false,
            flv_start: None,
            mp4_start: None,
            route: inherited.route.take(),
            route_hash: inherited.route_hash,
            vcl: None,
            authorized: inherited.authorized,
            site: inherited.site.clone(),
            interim: None,
            range_fetch: None,
            held_body: None,
            body_sent: false,
            lookups: 1,
            looked_up: Instant::now(),
            close: false,
            filters: Default::default(),
        };
        // Policy hook: the fetch's own state (VCL: the backend side's, `bereq.is_bgfetch`).
        txn.policy.background(&mut txn, &inherited);
        txn
    }
}
