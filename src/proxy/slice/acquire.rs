//! One slice for a client response: from the tiers (memory, then disk), else by following
//! another request's fetch of it, else fetched (`Range: bytes=a-b`) and stored through a fill
//! that other requests follow — a slice miss is coalesced like any miss.

use std::time::Instant;

use http::StatusCode;
use http::header::{self, HeaderMap};

use super::backend::Fetched;
use super::{Ctx, SliceFailure};
use crate::backend::BackendBody;
use crate::cache::ban::BanCheck;
use crate::cache::busy::{BusyHead, BusyReader, HeadOutcome, Join, LeaderGuard};
use crate::cache::partial::{Validator, content_range};
use crate::cache::slices::SliceMeta;
use crate::cache::{CacheKey, NeedsIo, Object};
use crate::proxy::body::ResponseBody;
use crate::proxy::fill::Fill;

/// Looks per slice at most (a leader that gave up sends its waiters to look again).
const MAX_LOOKS: usize = 4;

/// The detail a failed slice fill gives its waiters when the slice showed another version.
const CHANGED: &str = "slice-changed";

/// A slice's bytes and fields.
pub(super) enum SliceSource {
    /// Stored in a tier.
    Stored(std::sync::Arc<Object>),
    /// Being fetched (by this request or another): its fields and a reader of its body.
    Busy {
        headers: HeaderMap,
        reader: BusyReader,
        len: u64,
    },
    /// Fetched for this request alone and not stored (the policy found it uncacheable).
    /// Boxed: a backend body is larger than the other variants together.
    Passed {
        headers: HeaderMap,
        body: Box<BackendBody>,
    },
}

impl SliceSource {
    /// Whether the slice came from the cache.
    pub fn is_hit(&self) -> bool {
        matches!(self, SliceSource::Stored(_))
    }

    /// Its fields (as stored, or as the origin sent them), and its age in seconds.
    pub fn fields(&self, now: Instant) -> (HeaderMap, u64) {
        match self {
            SliceSource::Stored(o) => (o.headers.map().clone(), o.age(now).as_secs()),
            SliceSource::Busy { headers, .. } | SliceSource::Passed { headers, .. } => {
                let age = crate::cache::policy::age_field(headers).map_or(0, |a| a.as_secs());
                (headers.clone(), age)
            }
        }
    }

    /// Bytes `skip .. skip + take` of the slice.
    pub fn body(self, skip: u64, take: u64) -> ResponseBody {
        let whole = match self {
            SliceSource::Stored(o) => ResponseBody::object(o),
            SliceSource::Busy { reader, len, .. } => ResponseBody::busy(reader, Some(len)),
            SliceSource::Passed { body, .. } => ResponseBody::backend(*body),
        };
        ResponseBody::slice(whole, skip, take)
    }
}

/// Slice `index` of `ctx`'s representation.
pub(super) async fn acquire(ctx: &Ctx, index: u64) -> Result<SliceSource, SliceFailure> {
    let key = ctx.meta.key(&ctx.primary, index);
    let cache = &ctx.proxy.cache;
    let counters = &ctx.proxy.counters;
    for _ in 0..MAX_LOOKS {
        if let Some(object) = stored(ctx, index).await {
            counters.slice_hit.inc();
            return Ok(SliceSource::Stored(object));
        }
        match cache.busy.join(&key) {
            Join::Waiter(busy) => match busy.wait_head().await {
                HeadOutcome::Shared(head, reader) => {
                    counters.slice_miss.inc();
                    let len = head.content_length.unwrap_or(0);
                    return Ok(SliceSource::Busy {
                        headers: head.headers.clone(),
                        reader,
                        len,
                    });
                }
                HeadOutcome::Retry => continue,
                HeadOutcome::Failed(_, CHANGED) => return Err(SliceFailure::Changed),
                HeadOutcome::Failed(status, detail) => {
                    return Err(SliceFailure::Failed(status, detail));
                }
            },
            Join::Leader(guard) => {
                // The previous leader may have stored it between the look and the join.
                if let Ok(Some(object)) = cache.lookup_now(&key)
                    && usable(ctx, &key, &object, index)
                {
                    drop(guard);
                    counters.slice_hit.inc();
                    return Ok(SliceSource::Stored(object));
                }
                counters.slice_miss.inc();
                return fetch(ctx, index, key, guard).await;
            }
        }
    }
    Err(SliceFailure::Failed(
        StatusCode::SERVICE_UNAVAILABLE,
        "too-many-lookups",
    ))
}

/// The stored slice, if a tier holds a fresh, unbanned copy of the right length.
async fn stored(ctx: &Ctx, index: u64) -> Option<std::sync::Arc<Object>> {
    peek(
        &ctx.proxy,
        (&ctx.primary, &ctx.meta),
        &ctx.req_headers,
        index,
    )
    .await
}

/// Slice `index` of `meta`'s representation of `primary` when a tier holds a usable copy
/// (looked at before the policy's hit or miss step: `serve.rs`). `req_headers`: the client
/// request's fields, which bans on request fields are checked against.
pub(super) async fn peek(
    proxy: &crate::proxy::Proxy,
    (primary, meta): (&CacheKey, &SliceMeta),
    req_headers: &HeaderMap,
    index: u64,
) -> Option<std::sync::Arc<Object>> {
    let key = meta.key(primary, index);
    let cache = &proxy.cache;
    let found = match cache.lookup_now(&key) {
        Ok(found) => found,
        Err(NeedsIo) => cache.lookup_io(&key).await,
    }?;
    usable_in(proxy, meta, req_headers, &key, &found, index).then_some(found)
}

fn usable(ctx: &Ctx, key: &CacheKey, object: &Object, index: u64) -> bool {
    usable_in(&ctx.proxy, &ctx.meta, &ctx.req_headers, key, object, index)
}

fn usable_in(
    proxy: &crate::proxy::Proxy,
    meta: &SliceMeta,
    req_headers: &HeaderMap,
    key: &CacheKey,
    object: &Object,
    index: u64,
) -> bool {
    let (start, end) = meta.bounds(index);
    object.status == StatusCode::PARTIAL_CONTENT
        && object.body_len == end - start + 1
        && object.is_fresh(Instant::now())
        && proxy.cache.check_bans(key, object, Some(req_headers)) != BanCheck::Banned
}

/// This request leads the fetch of slice `index`: asked of the origin by a backend
/// transaction of its own (`backend.rs`: the policy's backend steps), checked against the
/// representation, then stored through a fill its waiters (and this request) follow.
async fn fetch(
    ctx: &Ctx,
    index: u64,
    key: CacheKey,
    guard: LeaderGuard,
) -> Result<SliceSource, SliceFailure> {
    let bounds = ctx.meta.bounds(index);
    ctx.proxy.counters.slice_fetch.inc();
    match super::backend::exchange(ctx, bounds).await {
        Ok(fetched) => stored_from(ctx, bounds, key, guard, fetched),
        Err((status, detail)) => {
            guard.object().fail_with(status, detail);
            Err(SliceFailure::Failed(status, detail))
        }
    }
}

/// A slice response, as the policy left it: a 206 of the representation known is stored with
/// the policy's storage decision and followed (or, refused by it, sent to this request alone);
/// another version invalidates the URL's slices; a 200 (the origin ignores Range) stops
/// slicing the URL; anything else is the client's answer.
pub(super) fn stored_from(
    ctx: &Ctx,
    (start, end): (u64, u64),
    key: CacheKey,
    guard: LeaderGuard,
    fetched: Fetched,
) -> Result<SliceSource, SliceFailure> {
    let received = Instant::now();
    let Fetched { parts, body, plan } = fetched;
    let proxy = &ctx.proxy;
    let meta = &ctx.meta;
    match parts.status {
        StatusCode::PARTIAL_CONTENT => {
            let same = content_range(&parts.headers) == Some((start, end, meta.length))
                && Validator::of(&parts.headers).as_ref() == Some(&meta.validator);
            if !same {
                version_changed(ctx);
                guard
                    .object()
                    .fail_with(StatusCode::SERVICE_UNAVAILABLE, CHANGED);
                return Err(SliceFailure::Changed);
            }
            let mut plan = match plan {
                Ok(plan) => plan,
                Err(reason) => {
                    // Not stored: this request reads it; those waiting look again (and fetch
                    // it themselves), as after a miss that turned out uncacheable.
                    tracing::debug!(key = %ctx.primary, reason = reason.as_str(), "a slice the policy does not store");
                    proxy.counters.cache_uncacheable.inc();
                    guard.object().abandon();
                    return Ok(SliceSource::Passed {
                        headers: parts.headers,
                        body: Box::new(body),
                    });
                }
            };
            plan.initial_age = crate::cache::policy::age_field(&parts.headers).unwrap_or_default();
            let mut headers = parts.headers;
            for name in &plan.strip {
                headers.remove(name);
            }
            let len = end - start + 1;
            let busy = guard.object().clone();
            busy.set_head(BusyHead {
                status: StatusCode::PARTIAL_CONTENT,
                headers: headers.clone(),
                content_length: Some(len),
                vary: Vec::new(),
                delivered: Default::default(),
                object: None,
            });
            let reader = busy.reader();
            headers.remove(header::AGE);
            let charge = super::super::fill::charge(proxy, &key, &plan, &headers);
            let fill = Fill {
                status: StatusCode::PARTIAL_CONTENT,
                headers: headers.clone(),
                vary: Vec::new(),
                plan,
                stored_at: received,
                piece: None,
                seen: Default::default(),
                esi: None,
                identity: None,
                charge,
            };
            tokio::spawn(fill.run(proxy.clone(), key, busy, Some(guard), body));
            Ok(SliceSource::Busy {
                headers,
                reader,
                len,
            })
        }
        StatusCode::OK => {
            range_ignored(ctx);
            guard.object().abandon();
            Err(SliceFailure::Ignored(Box::new((parts, body))))
        }
        status => {
            guard.object().fail_with(status, "slice-status");
            Err(SliceFailure::Answer(Box::new((parts, body))))
        }
    }
}

/// A slice response showed another version of the representation (validator or length):
/// every slice of the URL is invalidated (`slice_validator_mismatch`).
pub(super) fn version_changed(ctx: &Ctx) {
    let proxy = &ctx.proxy;
    proxy.counters.slice_validator_mismatch.inc();
    tracing::info!(key = %ctx.primary, "a slice shows another version: every slice invalidated");
    proxy
        .cache
        .slices
        .invalidate(&ctx.primary, &ctx.meta, &*proxy.cache.storage);
}

/// The origin answered a slice request with 200: the URL's slices are invalidated and it is
/// not sliced for `hit_for_miss_ttl` (`slice_range_ignored`).
pub(super) fn range_ignored(ctx: &Ctx) {
    let proxy = &ctx.proxy;
    proxy.counters.slice_range_ignored.inc();
    tracing::info!(key = %ctx.primary, "the origin ignores Range: not sliced for hit_for_miss_ttl");
    proxy
        .cache
        .slices
        .invalidate(&ctx.primary, &ctx.meta, &*proxy.cache.storage);
    proxy
        .cache
        .slices
        .refuse(&ctx.primary, proxy.config.cache.hit_for_miss_ttl.0);
}
