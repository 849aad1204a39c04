//! The steps that answer from an object found at lookup (`fsm.rs` drives them): Hit (with
//! refresh-ahead), Grace (stale, refreshed in the background) and Wait (following another
//! request's fetch of the same key: coalescing).

use std::sync::Arc;
use std::time::Instant;

use http::Response;

use super::body::ResponseBody;
use super::deliver;
use super::txn::{FetchMode, Step, Txn};
use crate::cache::busy::{BusyObject, HeadOutcome};
use crate::cache::{Object, vary_matches};

/// The `Cache-Status` of a response shared with the leader of a fetch.
const COLLAPSED: &str = "shellac; fwd=miss; collapsed";

impl Txn {
    pub(super) fn hit(&mut self, object: Arc<Object>) -> Step {
        if let Some(step) = self.policy.hit(self, &object) {
            return step;
        }
        self.proxy.counters.cache_hit.inc();
        if object.state.from_disk() {
            self.proxy.counters.cache_hit_disk.inc();
        } else {
            self.proxy.counters.cache_hit_memory.inc();
        }
        let now = self.looked_up;
        if object.is_fresh(now) {
            self.refresh_ahead(&object, now);
            let status = deliver::hit_status(&object, now);
            return self.deliver_object_at(object, &status, now);
        }
        let status = deliver::stale_status(&object, now, "max-stale");
        self.deliver_object_at(object, &status, now)
    }

    /// Refresh-ahead (`cache.refresh_ahead`, or the object's own from VCL 2.0's
    /// `obj.prefetch`): a fresh object within the window before its expiry is refreshed in the
    /// background — unless a fetch for it is already running, or the URL was recently
    /// uncacheable (a refresh would only be refused again).
    pub(super) fn refresh_ahead(&self, object: &Arc<Object>, now: Instant) {
        let configured = self.proxy.config.cache.refresh_ahead;
        let Some(window) = object
            .prefetch
            .window(|| configured.window(object.ttl.get()))
        else {
            return;
        };
        if object.remaining_ttl(now) > window {
            return;
        }
        let Some(primary) = self.key.clone() else {
            return;
        };
        if self.proxy.cache.is_hit_for_miss(&primary, now) {
            return;
        }
        let current = (object.clone(), super::refresh::Why::Ahead);
        super::refresh::spawn(
            &self.proxy,
            (primary, self.inherited()),
            &self.req,
            self.client,
            current,
        );
    }

    /// Stale within grace: deliver at once, and refresh it in the background unless a fetch
    /// for it is already running.
    pub(super) fn grace(&mut self, object: Arc<Object>) -> Step {
        if let Some(step) = self.policy.hit(self, &object) {
            return step;
        }
        self.proxy.counters.cache_grace_hit.inc();
        if let Some(primary) = self.key.clone() {
            let inherited = self.inherited();
            super::refresh::spawn(
                &self.proxy,
                (primary, inherited),
                &self.req,
                self.client,
                (object.clone(), super::refresh::Why::Grace),
            );
        }
        let status = deliver::stale_status(&object, Instant::now(), "while-revalidate");
        self.deliver_object(object, &status)
    }

    /// Waits for another request's fetch of the same key and follows its response.
    pub(super) async fn wait(&mut self, busy: Arc<BusyObject>) -> Step {
        // Counted as it starts to wait, as Varnish's busy_sleep is (`cache_coalesced` once the
        // head it waited for is shared with it).
        self.proxy.counters.cache_busy_wait.inc();
        self.waited_since.get_or_insert(busy.started);
        match busy.wait_head().await {
            HeadOutcome::Shared(head, _) if !vary_matches(&head.vary, &self.req.headers) => {
                // Another variant is being fetched: fetch ours on our own.
                self.proxy.counters.cache_vary_miss.inc();
                Step::Fetch(FetchMode::Alone("vary-miss"))
            }
            HeadOutcome::Shared(head, reader) => {
                self.proxy.counters.cache_coalesced.inc();
                if let Some(step) = self.policy.waiting_hit(self, head.object.as_ref()) {
                    return step;
                }
                let body = ResponseBody::busy(reader, head.content_length);
                super::coding::on_delivery(self, super::filter::gzip::coding(&head.headers));
                // A waiter's request never reached the backend: its preconditions are
                // answered on the leader's response (`stream_response`).
                self.withheld_conditions = super::respond::has_preconditions(&self.req.headers);
                if self.ranged_with(head.status, &head.headers)
                    || self.withheld_conditions
                    || !self.filters.deliver.is_empty()
                    || self.flv_start.is_some()
                    || self.mp4_start.is_some()
                    || head.headers.contains_key(super::filter::esi::FIELD)
                {
                    return Step::Deliver(self.stream_response(
                        head.status,
                        head.headers.clone(),
                        body,
                        head.content_length,
                        COLLAPSED,
                    ));
                }
                // The common case: every waiter sends the same fields, built once (a burst of
                // a thousand waiters built a thousand maps, growing each: ~3,400 instructions
                // per waiter, callgrind).
                let fields = head
                    .delivered
                    .get_or_init(|| deliver::delivery_fields(head.headers.clone(), COLLAPSED));
                let body = if self.head_only {
                    ResponseBody::empty()
                } else {
                    body
                };
                let mut resp = Response::new(body);
                *resp.status_mut() = head.status;
                *resp.headers_mut() = fields.clone();
                Step::Deliver(resp)
            }
            HeadOutcome::Retry => Step::Lookup,
            HeadOutcome::Failed(status, detail) => match self.stale.take() {
                Some(stale) if stale.stale_ok => self.deliver_stale(stale, detail),
                _ => Step::Synth(status, detail),
            },
        }
    }
}
