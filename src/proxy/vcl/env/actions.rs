//! What a subroutine's invalidations and rate limits do: `ban()`, vmod_purge, xkey's tag
//! purges (each broadcast to the fleet when there is one), and vmod_vsthrottle's buckets.

use super::Scope;
use crate::cache::shared::feed::{self, Invalidation};
use crate::proxy::throttle::{Limit, Taken};
use crate::vcl::ir::ThrottleOp;
use crate::vcl::run::value::to_duration;
use crate::vcl::run::{SoftPurge, Value};

impl Scope<'_> {
    /// `ban()`: a ban added here, and with a fleet, on every node.
    pub(super) fn invalidate_ban(&self, expr: &str) -> Result<(), String> {
        let ban = self.cache.add_ban(expr).map_err(|e| e.to_string())?;
        if let Some(shared) = &self.cache.shared {
            feed::broadcast_later(shared, Invalidation::Ban(ban.expr.clone()));
        }
        Ok(())
    }

    /// `purge.hard()` / `purge.soft()` (vmod_purge) on the request's cache key, and with a
    /// fleet, on every node.
    pub(super) fn invalidate_key(&self, soft: Option<SoftPurge>) -> usize {
        let Some(key) = self.key else {
            return 0;
        };
        let (n, inv) = match soft {
            None => (self.cache.purge(key), Invalidation::Purge(key.clone())),
            Some(s) => {
                let opt = |secs: f64| (secs >= 0.0).then(|| to_duration(secs));
                let n =
                    self.cache
                        .rearm(key, to_duration(s.ttl.max(0.0)), opt(s.grace), opt(s.keep));
                // The fleet's soft purge carries no lifetimes: the other nodes and the shared
                // copy are made stale now, with their own grace and keep.
                (n, Invalidation::Soft(key.clone()))
            }
        };
        // With a fleet: the shared copy and every other node's go too (else this node's next
        // miss would read the purged object back from the shared tier).
        if let Some(shared) = &self.cache.shared {
            feed::broadcast_later(shared, inv);
        }
        n
    }

    /// vmod_vsthrottle: a token taken, counted or given back in the process's buckets.
    pub(super) fn take_throttle(
        &self,
        op: ThrottleOp,
        key: &str,
        limit: i64,
        period: f64,
        block: f64,
    ) -> Value<'static> {
        let limit = Limit {
            requests: u64::try_from(limit).unwrap_or(0),
            per: to_duration(period.max(0.0)),
            block: to_duration(block.max(0.0)),
        };
        let throttle = &self.rt.throttle;
        match op {
            ThrottleOp::IsDenied => {
                let denied = matches!(throttle.take(key, &limit), Taken::Denied(_));
                if denied {
                    self.rt.counters.vsthrottle_denied.inc();
                }
                Value::Bool(denied)
            }
            ThrottleOp::Remaining => {
                Value::Int(i64::try_from(throttle.remaining(key, &limit)).unwrap_or(i64::MAX))
            }
            ThrottleOp::Blocked => Value::Duration(throttle.blocked(key, &limit).as_secs_f64()),
            ThrottleOp::ReturnToken => {
                throttle.give_back(key, &limit);
                Value::None
            }
        }
    }

    /// `xkey.purge()` / `xkey.softpurge()` on the tags in `keys`, and with a fleet, on every
    /// node.
    pub(super) fn invalidate_tags(&self, keys: &str, soft: bool) -> usize {
        let tags: Vec<String> = crate::cache::tags::split_keys(keys, true)
            .map(str::to_string)
            .collect();
        if tags.is_empty() {
            return 0;
        }
        let n = if soft {
            self.cache.soft_purge_tags(&tags)
        } else {
            self.cache.purge_tags(&tags)
        };
        // The fleet has no soft purge by tag: the other nodes and the shared tier remove the
        // tagged objects (never fresh where this node made them stale), as a PURGE with
        // `Surrogate-Key` sent to the node would.
        if let Some(shared) = &self.cache.shared {
            feed::broadcast_later(shared, Invalidation::Tags(tags));
        }
        n
    }
}
