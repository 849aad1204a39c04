//! The request's [`Policy`] dispatched to its front-end: the enum names the front-ends once,
//! and each method calls the hook of the request's with a `match` (no `dyn`, no allocation).

use std::sync::Arc;

use http::response::Parts;
use http::{HeaderMap, Response, StatusCode};

use super::rules::Rules;
use super::vcl::Vcl;
use super::{
    BackendRequest, Delivery, ErrorOutcome, Hooks, Instead, Limits, LookupFlags, ResponseOutcome,
};
use crate::backend::director::Member;
use crate::cache::busy::LeaderGuard;
use crate::cache::policy::{Exchange, NoCacheReason};
use crate::cache::{CacheKey, Object};
use crate::proxy::Proxy;
use crate::proxy::body::ResponseBody;
use crate::proxy::txn::{FetchMode, Inherited, Policy, Step, Txn};

/// Calls `$hook` of the request's front-end.
macro_rules! dispatch {
    ($policy:expr, $hook:ident($($arg:expr),*)) => {
        match $policy {
            Policy::Rules => Rules::$hook($($arg),*),
            Policy::Vcl => Vcl::$hook($($arg),*),
        }
    };
}

impl Policy {
    /// The policy a request runs under: its site's VCL program (`[[site]] vcl`), else the
    /// configuration's when it has one, else the `[[rule]]`s (the site's or the global ones).
    pub(in crate::proxy) fn choose(
        proxy: &Proxy,
        site: Option<&crate::proxy::site::Site>,
    ) -> Policy {
        if proxy.vcl.is_some() || site.is_some_and(|s| s.vcl.is_some()) {
            Policy::Vcl
        } else {
            Policy::Rules
        }
    }

    pub(in crate::proxy) fn recv(self, txn: &mut Txn) -> Step {
        dispatch!(self, recv(txn))
    }

    pub(in crate::proxy) fn restarted(self, txn: &Txn) -> bool {
        dispatch!(self, restarted(txn))
    }

    pub(in crate::proxy) fn lookup_flags(self, txn: &Txn) -> LookupFlags {
        dispatch!(self, lookup_flags(txn))
    }

    pub(in crate::proxy) fn limits(self, txn: &Txn) -> Limits {
        dispatch!(self, limits(txn))
    }

    pub(in crate::proxy) fn grace_applies(self, txn: &Txn, key: &CacheKey, leading: bool) -> bool {
        dispatch!(self, grace_applies(txn, key, leading))
    }

    pub(in crate::proxy) fn hit(self, txn: &mut Txn, object: &Arc<Object>) -> Option<Step> {
        dispatch!(self, hit(txn, object))
    }

    pub(in crate::proxy) fn waiting_hit(
        self,
        txn: &mut Txn,
        object: Option<&Arc<Object>>,
    ) -> Option<Step> {
        dispatch!(self, waiting_hit(txn, object))
    }

    pub(in crate::proxy) fn waiters_judge(self, txn: &Txn) -> bool {
        dispatch!(self, waiters_judge(txn))
    }

    pub(in crate::proxy) fn miss(self, txn: &mut Txn, guard: LeaderGuard) -> Step {
        dispatch!(self, miss(txn, guard))
    }

    /// Before a probe (the slice holding a Range's first byte, asked of a URL not known to be
    /// sliced yet, by the client's own transaction): the miss step ([`Hooks::slices`]), then
    /// the backend-request step ([`Hooks::backend_fetch`], VCL's vcl_backend_fetch) the probe
    /// is asked with (an answer it made is delivered, not stored: the probe stores slices).
    pub(in crate::proxy) fn slices(
        self,
        txn: &mut Txn,
        stored: Option<&Arc<Object>>,
    ) -> Option<Step> {
        dispatch!(self, slices(txn, stored))
            .or_else(|| self.backend_fetch(txn, true).map(Instead::into_step))
    }

    /// The policy's hit or miss step for a response from slices, without the backend
    /// request: each slice that response fetches is a backend transaction of its own, which
    /// runs the backend steps itself (`slice/backend.rs`).
    pub(in crate::proxy) fn slice_lookup(
        self,
        txn: &mut Txn,
        stored: Option<&Arc<Object>>,
    ) -> Option<Step> {
        dispatch!(self, slices(txn, stored))
    }

    pub(in crate::proxy) fn hit_for_miss(self, txn: &mut Txn) -> Step {
        dispatch!(self, hit_for_miss(txn))
    }

    pub(in crate::proxy) fn pass(self, txn: &mut Txn, reason: NoCacheReason) -> Step {
        dispatch!(self, pass(txn, reason))
    }

    pub(in crate::proxy) fn conditionals_after_deliver(self, txn: &mut Txn) -> bool {
        dispatch!(self, conditionals_after_deliver(txn))
    }

    pub(in crate::proxy) fn backend_fetch(self, txn: &mut Txn, for_cache: bool) -> Option<Instead> {
        dispatch!(self, backend_fetch(txn, for_cache))
    }

    pub(in crate::proxy) fn backend_request(self, txn: &Txn) -> Option<BackendRequest<'_>> {
        dispatch!(self, backend_request(txn))
    }

    pub(in crate::proxy) fn forwarded_for(self, txn: &Txn) -> bool {
        dispatch!(self, forwarded_for(txn))
    }

    pub(in crate::proxy) fn if_modified_since<'a>(
        self,
        txn: &Txn,
        stale: &'a Object,
    ) -> Option<&'a str> {
        dispatch!(self, if_modified_since(txn, stale))
    }

    pub(in crate::proxy) fn route_draw(self, txn: &Txn, route: &Member) -> Option<u32> {
        dispatch!(self, route_draw(txn, route))
    }

    pub(in crate::proxy) fn unsafe_invalidates(self, txn: &Txn) -> bool {
        dispatch!(self, unsafe_invalidates(txn))
    }

    pub(in crate::proxy) fn body_to_read(self, txn: &Txn) -> Option<u64> {
        dispatch!(self, body_to_read(txn))
    }

    pub(in crate::proxy) fn inherit(self, txn: &Txn, into: &mut Inherited) {
        dispatch!(self, inherit(txn, into))
    }

    pub(in crate::proxy) fn background(self, txn: &mut Txn, from: &Inherited) {
        dispatch!(self, background(txn, from))
    }

    pub(in crate::proxy) fn trace(self, txn: &Txn) -> Option<String> {
        dispatch!(self, trace(txn))
    }

    pub(in crate::proxy) fn backend_error(
        self,
        txn: &mut Txn,
        status: StatusCode,
        detail: &str,
    ) -> Option<ErrorOutcome> {
        dispatch!(self, backend_error(txn, status, detail))
    }

    pub(in crate::proxy) fn stale_gone(self, txn: &mut Txn) -> Option<ErrorOutcome> {
        dispatch!(self, stale_gone(txn))
    }

    pub(in crate::proxy) fn backend_response(
        self,
        txn: &mut Txn,
        parts: &mut Parts,
        ex: &Exchange,
        mode: &FetchMode,
        was_304: bool,
    ) -> ResponseOutcome {
        dispatch!(self, backend_response(txn, parts, ex, mode, was_304))
    }

    pub(in crate::proxy) fn storing(self, txn: &Txn, headers: &mut HeaderMap) {
        dispatch!(self, storing(txn, headers))
    }

    pub(in crate::proxy) fn deliver(
        self,
        txn: &mut Txn,
        response: Response<ResponseBody>,
    ) -> Delivery {
        dispatch!(self, deliver(txn, response))
    }

    pub(in crate::proxy) fn synth(
        self,
        txn: &mut Txn,
        status: u16,
        reason: Option<String>,
    ) -> Step {
        dispatch!(self, synth(txn, status, reason))
    }

    pub(in crate::proxy) fn restart(self, txn: &mut Txn) -> Step {
        dispatch!(self, restart(txn))
    }
}
