//! Transactions of the backend side only: a fetch a client request started but that does not
//! answer it — a background refresh (`refresh.rs`), a slice fetched while a client reads
//! (`slice/backend.rs`) — made from what the client request leaves it (`Inherited`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::request::Parts;
use http::{Method, Request};

use super::Proxy;
use super::txn::{Inherited, Txn};
use crate::cache::{CacheKey, Object};

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
            waited_since: None,
            looked_up: Instant::now(),
            close: false,
            filters: Default::default(),
        };
        // Policy hook: the fetch's own state (VCL: the backend side's, `bereq.is_bgfetch`).
        txn.policy.background(&mut txn, &inherited);
        txn
    }
}
