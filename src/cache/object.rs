//! A stored response (`Object`): its fields, body, lifetimes and tier bookkeeping, and the
//! `Vary` selection it was stored under.

use std::sync::atomic::{AtomicU8, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::body::{self, MemoryChunks};
use super::disk_body::DiskBody;
use super::fields::StoredFields;
use super::policy;
use super::prefetch::Prefetch;
use super::prepared::Prepared;
use super::span::{MaybeSpan, Span};

/// Fixed per-object bookkeeping charged against the memory budget on top of key, headers and body.
/// Measured, not guessed: the `Object` itself, its `Arc`, the memory tier's entry and the key's
/// two boxed strings' headers (see bench/RESULTS.md, "memory").
pub const OBJECT_OVERHEAD: u64 =
    std::mem::size_of::<Object>() as u64 + 128 + std::mem::size_of::<Prepared>() as u64 + 16;

/// Bytes a header map spends per field beyond name and value (bucket, index slot, `Bytes`).
const FIELD_OVERHEAD: usize = 96;

/// Where a stored body is.
#[derive(Clone, Debug)]
pub enum Body {
    /// In memory, in chunks (one chunk for small bodies).
    Memory(MemoryChunks),
    /// On disk, read and verified chunk by chunk while it is sent (large objects). Boxed: the
    /// handle is twice the size of the in-memory variant, and most objects are in memory.
    Disk(Box<DiskBody>),
}

/// What the tiers remember about an object besides the response itself: four flags and the
/// storage it is kept in (`cache/stores.rs`, 4 bits), in one byte (the `Object` has no room
/// for more, `tests::an_object_stays_compact`).
#[derive(Debug, Default)]
pub struct TierState(AtomicU8);

impl TierState {
    /// Found in the memory tier at least once (eviction then admits it to disk).
    const HIT: u8 = 1;
    /// Written, or queued to be written, to the disk tier.
    const ON_DISK: u8 = 2;
    /// Read from the disk tier for this lookup (`Cache-Status: ...; detail=disk`).
    const FROM_DISK: u8 = 4;
    /// Kept in the memory tier only (VCL's `beresp.storage = storage.Transient`,
    /// `cache.shortlived`): never written to the disk tier or the shared tier.
    const TRANSIENT: u8 = 8;

    /// The state of an object just read from the disk tier.
    pub fn read_from_disk() -> TierState {
        TierState(AtomicU8::new(TierState::ON_DISK | TierState::FROM_DISK))
    }

    /// A state with the given hit, on-disk and transient flags (not read from disk).
    pub fn with(hit: bool, on_disk: bool, transient: bool) -> TierState {
        let mut flags = 0;
        if hit {
            flags |= TierState::HIT;
        }
        if on_disk {
            flags |= TierState::ON_DISK;
        }
        if transient {
            flags |= TierState::TRANSIENT;
        }
        TierState(AtomicU8::new(flags))
    }

    /// The bits of the storage id.
    const STORE_SHIFT: u8 = 4;

    /// This state with the object kept in storage `id` (`0`: `s0`; below
    /// [`super::stores::MAX_STORES`]). A copy read from the disk tier is in `s0`.
    pub fn in_store(self, id: u8) -> TierState {
        let flags = self.0.into_inner() & 0x0f;
        TierState(AtomicU8::new(flags | (id << TierState::STORE_SHIFT)))
    }

    /// The storage the object is kept in (`cache/stores.rs`).
    pub fn store(&self) -> u8 {
        self.0.load(Ordering::Relaxed) >> TierState::STORE_SHIFT
    }

    fn has(&self, flag: u8) -> bool {
        self.0.load(Ordering::Relaxed) & flag != 0
    }

    /// Found in the memory tier at least once.
    pub fn hit(&self) -> bool {
        self.has(TierState::HIT)
    }

    /// Written, or queued to be written, to the disk tier.
    pub fn on_disk(&self) -> bool {
        self.has(TierState::ON_DISK)
    }

    /// Read from the disk tier for this lookup.
    pub fn from_disk(&self) -> bool {
        self.has(TierState::FROM_DISK)
    }

    /// Kept in the memory tier only.
    pub fn transient(&self) -> bool {
        self.has(TierState::TRANSIENT)
    }

    /// Marks a memory hit; a plain load first so hot objects do not bounce a cache line.
    pub fn mark_hit(&self) {
        if !self.hit() {
            self.0.fetch_or(TierState::HIT, Ordering::Relaxed);
        }
    }

    /// Marks the object written (or queued) to the disk tier.
    pub fn mark_on_disk(&self) {
        self.0.fetch_or(TierState::ON_DISK, Ordering::Relaxed);
    }
}

/// A complete cached response.
#[derive(Debug)]
pub struct Object {
    pub status: StatusCode,
    /// Stored header fields (hop-by-hop removed), in one block; `Age` is computed on delivery.
    pub headers: StoredFields,
    pub body: Body,
    pub body_len: u64,
    /// Request header values this object was selected by (`Vary`), as (name, value) pairs;
    /// boxed, and `None` without `Vary`: one pointer on the objects that have none.
    pub vary: Option<Box<VarySelection>>,
    /// RFC 9111 corrected_initial_age. The lifetimes are [`Span`]s: 8 bytes each.
    pub initial_age: Span,
    /// Freshness lifetime.
    pub ttl: Span,
    /// Whether it may be served stale at all (see `StorePlan::stale_ok`).
    pub stale_ok: bool,
    /// Stale-while-revalidate window past `ttl`.
    pub grace: Span,
    /// Window past `ttl` in which a backend 5xx may be answered with this object.
    pub stale_if_error: MaybeSpan,
    /// Window past `ttl + grace` in which the object is kept for revalidation and fallback.
    pub keep: Span,
    /// The header fields of a full (200) delivery, built on first use: stored fields plus
    /// `Content-Length` and `Via`, cache-only fields removed, and `Age` / `Cache-Status` as
    /// of the last delivery's second. A delivery in the same second with the same status
    /// clones the map as it is; otherwise it replaces the two values and stores the result
    /// for the deliveries after it (see bench/RESULTS.md, "hit path").
    /// Behind a pointer: an object that is never hit pays one pointer for it, not a map.
    pub prepared: arc_swap::ArcSwapOption<Prepared>,
    /// When the response head arrived (monotonic).
    pub stored_at: Instant,
    /// Tier bookkeeping (admission, promotion).
    pub state: TierState,
    /// Hits counted for VCL's `obj.hits`: only a VCL program counts them, a hit without one
    /// writes nothing here. 16 bits fit the padding after `status`; the count stops at 65535.
    pub hits: AtomicU16,
    /// Its own refresh-ahead window (VCL 2.0 `obj.prefetch`), or the configured one.
    pub prefetch: Prefetch,
}

impl Object {
    /// Counts a hit for VCL's `obj.hits` and returns the count with it (Varnish counts the
    /// hit at lookup, before vcl_hit runs). Stops at 65535 rather than wrapping.
    pub fn count_hit(&self) -> u16 {
        match self
            .hits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
        {
            Ok(before) => before + 1,
            Err(at_max) => at_max,
        }
    }

    /// Takes back a hit [`Object::count_hit`] counted for a fast hit that then took the full
    /// path (which counts it again).
    pub fn uncount_hit(&self) {
        let _ = self
            .hits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// RFC 9111 §4.2.3 current_age.
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age.get() + now.saturating_duration_since(self.stored_at)
    }

    /// A new object stored as `plan` says: its age, freshness, grace, keep and stale-if-error
    /// windows are the plan's, counted from `stored_at` (when the response head arrived). One
    /// constructor for what a fetch makes: the stored object, a revalidated copy, and the
    /// bodyless object waiters' vcl_hit sees while the body still comes.
    pub fn from_plan(
        status: StatusCode,
        headers: StoredFields,
        body: Body,
        body_len: u64,
        vary: Option<Box<VarySelection>>,
        plan: &policy::StorePlan,
        stored_at: Instant,
    ) -> Object {
        Object {
            status,
            headers,
            body,
            body_len,
            vary,
            initial_age: plan.initial_age.into(),
            ttl: plan.ttl.into(),
            stale_ok: plan.stale_ok,
            grace: plan.grace.into(),
            stale_if_error: plan.stale_if_error.into(),
            keep: plan.keep.into(),
            stored_at,
            state: TierState::with(false, false, plan.transient).in_store(plan.store),
            prepared: Default::default(),
            hits: Default::default(),
            prefetch: plan.prefetch,
        }
    }

    /// A copy of this object with new lifetimes (2.x VCL's `set obj.ttl` in vcl_hit): `ttl`
    /// is the whole freshness lifetime (age included), as [`Object::ttl`].
    pub fn retimed(&self, ttl: Duration, grace: Duration, keep: Duration) -> Object {
        Object {
            ttl: Span::new(ttl),
            grace: Span::new(grace),
            keep: Span::new(keep),
            ..self.copy()
        }
    }

    /// A copy sharing the body and the stored fields, with `obj.hits` carried over; the tier
    /// bookkeeping and the prepared delivery map start anew (the copy is stored on its own).
    pub fn copy(&self) -> Object {
        Object {
            status: self.status,
            headers: self.headers.clone(),
            body: self.body.clone(),
            body_len: self.body_len,
            vary: self.vary.clone(),
            initial_age: self.initial_age,
            ttl: self.ttl,
            stale_ok: self.stale_ok,
            grace: self.grace,
            stale_if_error: self.stale_if_error,
            keep: self.keep,
            stored_at: self.stored_at,
            state: TierState::with(false, false, self.state.transient())
                .in_store(self.state.store()),
            prepared: Default::default(),
            hits: AtomicU16::new(self.hits.load(Ordering::Relaxed)),
            prefetch: self.prefetch,
        }
    }

    pub fn is_fresh(&self, now: Instant) -> bool {
        self.age(now) < self.ttl.get()
    }

    /// Stale, but within its stale-while-revalidate window: deliver and refresh.
    pub fn within_grace(&self, now: Instant) -> bool {
        self.stale_ok && self.age(now) < self.ttl.get() + self.grace.get()
    }

    /// Stale beyond grace but within `keep`: usable for revalidation, and for answering when no
    /// backend can be reached (if stale serving is allowed at all).
    pub fn within_keep(&self, now: Instant) -> bool {
        self.age(now) < self.ttl.get() + self.grace.get() + self.keep.get()
    }

    /// Whether a backend 5xx may be answered with this stale object (`stale-if-error`).
    pub fn stale_if_error_ok(&self, now: Instant) -> bool {
        self.stale_ok
            && self
                .stale_if_error
                .get()
                .is_some_and(|w| self.age(now) < self.ttl.get() + w)
    }

    /// The stored `ETag`, if any.
    pub fn etag(&self) -> Option<&str> {
        self.headers.get_str(&http::header::ETAG)
    }

    /// The stored `Last-Modified`, if any.
    pub fn last_modified(&self) -> Option<&str> {
        self.headers.get_str(&http::header::LAST_MODIFIED)
    }

    /// Freshness left, zero once stale.
    pub fn remaining_ttl(&self, now: Instant) -> Duration {
        self.ttl.get().saturating_sub(self.age(now))
    }

    /// The request values this object was selected by (`Vary`); empty without `Vary`.
    pub fn vary(&self) -> &[(HeaderName, Option<HeaderValue>)] {
        self.vary.as_deref().map_or(&[], |v| v.as_slice())
    }

    /// Whether `request` selects this object (RFC 9111 §4.1).
    pub fn vary_matches(&self, request: &HeaderMap) -> bool {
        vary_matches(self.vary(), request)
    }

    /// A copy that is stale from `now` on (soft purge); None for bodies on disk.
    pub fn expired_copy(&self, now: Instant) -> Option<Object> {
        self.rearmed_copy(now, Duration::ZERO, None, None)
    }

    /// A copy fresh for at most `ttl` from `now`, with at most `grace` and `keep` when given
    /// (VCL's `purge.soft()`: never longer than they were); None for bodies on disk.
    pub fn rearmed_copy(
        &self,
        now: Instant,
        ttl: Duration,
        grace: Option<Duration>,
        keep: Option<Duration>,
    ) -> Option<Object> {
        if !matches!(self.body, Body::Memory(_)) {
            return None;
        }
        Some(Object {
            ttl: Span::new(self.ttl.get().min(self.age(now).saturating_add(ttl))),
            grace: grace.map_or(self.grace, |g| Span::new(g.min(self.grace.get()))),
            keep: keep.map_or(self.keep, |k| Span::new(k.min(self.keep.get()))),
            ..self.copy()
        })
    }

    /// A copy for the memory tier of an object read from disk with its body in memory.
    pub fn promoted(&self) -> Option<Object> {
        if !matches!(self.body, Body::Memory(_)) {
            return None;
        }
        Some(Object {
            state: TierState::with(false, true, false),
            ..self.copy()
        })
    }

    /// Bytes charged against the memory budget.
    pub fn weight(&self) -> u64 {
        // A body in memory costs what its allocation takes (stored bodies are one exact-size
        // heap block, or whole pages of a mapping of their own: `body::store`); one left on
        // disk costs the memory tier nothing but its handle.
        let body = match &self.body {
            Body::Memory(pieces) => body::footprint(self.body_len, pieces.len()),
            Body::Disk(_) => 0,
        };
        // The block, plus the two maps a hit may build from it (the prepared delivery map with
        // its four added fields, and the stored fields as a map for conditional and range
        // requests): charged once the object exists, so the budget holds however it is used.
        // (A small object the memory tier keeps compact has no `Object` until its first hit and
        // is charged only its slab slot until then.)
        let (block, fields) = (self.headers.block_len(), self.headers.len());
        let headers = block + (2 * fields + 4) * FIELD_OVERHEAD + 4 * 24;
        OBJECT_OVERHEAD + headers as u64 + body
    }
}

/// The request header values a stored response was selected by (`Vary`).
pub type VarySelection = Vec<(HeaderName, Option<HeaderValue>)>;

/// A selection as an object keeps it: boxed, and nothing at all without `Vary`.
pub fn boxed_vary(selection: VarySelection) -> Option<Box<VarySelection>> {
    (!selection.is_empty()).then(|| Box::new(selection))
}

/// Whether `request` carries the same values for the `Vary` fields as `selection`, compared
/// as each field's grammar allows (`crate::http::selecting`: exactly, but for list whitespace
/// and the few case-insensitive fields). A field present several times never matches (it
/// would need combining first).
pub fn vary_matches(selection: &[(HeaderName, Option<HeaderValue>)], request: &HeaderMap) -> bool {
    use crate::http::selecting::selecting_value;
    selection.iter().all(|(name, value)| {
        let mut got = request.get_all(name).iter();
        match (value, got.next()) {
            (None, None) => true,
            (Some(want), Some(first)) => {
                got.next().is_none() && selecting_value(name, first) == selecting_value(name, want)
            }
            _ => false,
        }
    })
}

/// A small fresh object for unit tests.
#[cfg(test)]
pub fn test_object(headers: &[(&str, &str)]) -> Object {
    Object {
        status: StatusCode::OK,
        headers: StoredFields::from_map(
            &headers
                .iter()
                .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                .collect(),
        ),
        body: Body::Memory(smallvec::smallvec![bytes::Bytes::from_static(b"x")]),
        body_len: 1,
        vary: None,
        initial_age: Span::ZERO,
        ttl: Span::new(Duration::from_secs(60)),
        stale_ok: true,
        grace: Span::ZERO,
        keep: Span::ZERO,
        stale_if_error: MaybeSpan::NONE,
        stored_at: Instant::now(),
        state: TierState::default(),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: Prefetch::CONFIGURED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `purge.soft(ttl, grace, keep)`: freshness, grace and keep are only ever shortened.
    #[test]
    fn a_rearmed_copy_never_lives_longer() {
        let mut o = test_object(&[]);
        o.grace = Span::new(Duration::from_secs(100));
        o.keep = Span::new(Duration::from_secs(200));
        let now = o.stored_at;
        let secs = Duration::from_secs;
        let c = o.rearmed_copy(now, secs(5), Some(secs(10)), None).unwrap();
        assert_eq!(c.ttl.get(), secs(5));
        assert_eq!(c.grace.get(), secs(10));
        assert_eq!(c.keep.get(), secs(200));
        let c = o
            .rearmed_copy(now, secs(500), Some(secs(1000)), Some(secs(1)))
            .unwrap();
        assert_eq!(c.ttl.get(), secs(60));
        assert_eq!(c.grace.get(), secs(100));
        assert_eq!(c.keep.get(), secs(1));
        assert_eq!(o.expired_copy(now).unwrap().ttl.get(), Duration::ZERO);
    }

    /// The object's size is most of a small cached object's overhead (workload 8): it went
    /// from 248 to 184 bytes (bench/RESULTS.md, "memory per object"). A field that grows it
    /// should be a choice, not an accident.
    #[test]
    fn an_object_stays_compact() {
        assert!(
            std::mem::size_of::<Object>() <= 184,
            "Object is {} bytes",
            std::mem::size_of::<Object>()
        );
        // docs/configuration.md (`cache.memory_size`) quotes this figure.
        assert_eq!(
            OBJECT_OVERHEAD,
            528,
            "Prepared is {} bytes",
            std::mem::size_of::<Prepared>()
        );
        assert_eq!(std::mem::size_of::<Span>(), 8);
        assert_eq!(std::mem::size_of::<MaybeSpan>(), 8);
        assert_eq!(std::mem::size_of::<Option<Box<VarySelection>>>(), 8);
    }
}
