//! The cache: keys, stored objects, the storage trait and its tiers, and request coalescing.
//!
//! Architecture invariant: `cache/` knows nothing of client or backend connections; it deals in
//! keys, objects and body chunks.

pub mod armor;
pub mod ban;
pub mod body;
pub mod busy;
pub mod disk;
pub mod fields;
pub mod inspect;
pub mod memory;
pub mod partial;
pub mod policy;
pub mod shared;
pub mod slab;
pub mod tags;
pub mod tiered;
pub mod vary;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

pub use fields::StoredFields;

/// The primary cache key: a structured tuple (host, path and query, variant), never a
/// concatenated string, so two different requests cannot collide into one key.
///
/// Stored compactly: host and path share one allocation and `host_len` splits them. Equality
/// and hashing include `host_len`, so (`a`, `b/c`) and (`ab`, `/c`) stay two keys. One
/// allocation instead of two saves a malloc per lookup and ~30 bytes per cached object
/// (bench/RESULTS.md, "memory per object").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The lower-cased authority (default port elided), then the path and query as received.
    text: Box<str>,
    /// Bytes of `text` that are the authority.
    host_len: u32,
    /// Secondary key: hash of the request values of the URL's `Vary` fields (0 = no Vary).
    pub variant: u64,
}

impl CacheKey {
    pub fn new(host: &str, path_and_query: &str) -> CacheKey {
        let host = host.trim();
        // Default port elided (RFC 3986 §6.2.3): `a:80`, `a:` and `a` are one host.
        let host = host
            .strip_suffix(":80")
            .or_else(|| host.strip_suffix(':'))
            .unwrap_or(host);
        let mut text = String::with_capacity(host.len() + path_and_query.len());
        text.push_str(host);
        text.make_ascii_lowercase();
        text.push_str(path_and_query);
        CacheKey::from_text(text, host.len(), 0)
    }

    /// A key from parts already normalised (a key read back from disk).
    pub fn from_parts(host: &str, path_and_query: &str, variant: u64) -> CacheKey {
        let mut text = String::with_capacity(host.len() + path_and_query.len());
        text.push_str(host);
        text.push_str(path_and_query);
        CacheKey::from_text(text, host.len(), variant)
    }

    fn from_text(text: String, host_len: usize, variant: u64) -> CacheKey {
        // Hosts are bounded by the request-head limits, far below 4 GiB.
        let host_len = u32::try_from(host_len)
            .unwrap_or(u32::MAX)
            .min(text.len() as u32);
        CacheKey {
            text: text.into_boxed_str(),
            host_len,
            variant,
        }
    }

    /// Lower-cased authority with the default port elided.
    pub fn host(&self) -> &str {
        self.text.get(..self.host_len as usize).unwrap_or("")
    }

    /// Path and query exactly as received.
    pub fn path_and_query(&self) -> &str {
        self.text.get(self.host_len as usize..).unwrap_or("")
    }

    /// The same URL, another variant.
    pub fn with_variant(&self, variant: u64) -> CacheKey {
        CacheKey {
            variant,
            ..self.clone()
        }
    }

    /// The URL without a variant (the primary key).
    pub fn primary(&self) -> CacheKey {
        self.with_variant(0)
    }

    /// The authority, then the path and query, as one text (`host_len` splits it).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Bytes of [`CacheKey::text`] that are the authority.
    pub fn host_len(&self) -> usize {
        self.host_len as usize
    }

    /// A key from its text and split as [`CacheKey::text`] and [`CacheKey::host_len`] give
    /// them (the memory tier keeps keys that way).
    pub fn from_text_parts(text: &str, host_len: usize, variant: u64) -> CacheKey {
        CacheKey::from_text(text.to_owned(), host_len, variant)
    }
}

impl std::fmt::Display for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Fixed per-object bookkeeping charged against the memory budget on top of key, headers and body.
/// Measured, not guessed: the `Object` itself, its `Arc`, the memory tier's entry and the key's
/// two boxed strings' headers (see bench/RESULTS.md, "memory").
pub const OBJECT_OVERHEAD: u64 =
    std::mem::size_of::<Object>() as u64 + 128 + std::mem::size_of::<Prepared>() as u64 + 16;

/// Bytes a header map spends per field beyond name and value (bucket, index slot, `Bytes`).
const FIELD_OVERHEAD: usize = 96;

/// Body chunks in memory. Most stored bodies are one chunk: it is kept inline, not in a
/// second allocation (bench/RESULTS.md, "memory per object").
pub type Chunks = smallvec::SmallVec<[Bytes; 1]>;

/// Where a stored body is.
#[derive(Clone, Debug)]
pub enum Body {
    /// In memory, in chunks (one chunk for small bodies).
    Memory(Chunks),
    /// On disk, read and verified chunk by chunk while it is sent (large objects). Boxed: the
    /// handle is twice the size of the in-memory variant, and most objects are in memory.
    Disk(Box<disk::DiskBody>),
}

/// What the tiers remember about an object besides the response itself.
#[derive(Debug, Default)]
pub struct TierState {
    /// Found in the memory tier at least once (eviction then admits it to disk).
    pub hit: AtomicBool,
    /// Written, or queued to be written, to the disk tier.
    pub on_disk: AtomicBool,
    /// Read from the disk tier for this lookup (`Cache-Status: ...; detail=disk`).
    pub from_disk: bool,
}

impl TierState {
    pub fn from_disk() -> TierState {
        TierState {
            hit: AtomicBool::new(false),
            on_disk: AtomicBool::new(true),
            from_disk: true,
        }
    }

    /// Marks a memory hit; a plain load first so hot objects do not bounce a cache line.
    pub fn mark_hit(&self) {
        if !self.hit.load(Ordering::Relaxed) {
            self.hit.store(true, Ordering::Relaxed);
        }
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
}

/// A duration in 8 bytes (whole milliseconds) instead of `Duration`'s 16: an object keeps five
/// of them (bench/RESULTS.md, "memory per object"). Saturates at ~584 million years.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span(u64);

impl Span {
    pub const ZERO: Span = Span(0);

    pub fn new(d: Duration) -> Span {
        Span(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub fn get(self) -> Duration {
        Duration::from_millis(self.0)
    }

    pub fn millis(self) -> u64 {
        self.0
    }
}

impl From<Duration> for Span {
    fn from(d: Duration) -> Span {
        Span::new(d)
    }
}

/// An optional [`Span`] in 8 bytes (`u64::MAX` is "none").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaybeSpan(u64);

impl MaybeSpan {
    pub const NONE: MaybeSpan = MaybeSpan(u64::MAX);

    pub fn new(d: Option<Duration>) -> MaybeSpan {
        match d {
            Some(d) => MaybeSpan(d.as_millis().min(u64::MAX as u128 - 1) as u64),
            None => MaybeSpan::NONE,
        }
    }

    pub fn get(self) -> Option<Duration> {
        (self.0 != u64::MAX).then(|| Duration::from_millis(self.0))
    }
}

impl From<Option<Duration>> for MaybeSpan {
    fn from(d: Option<Duration>) -> MaybeSpan {
        MaybeSpan::new(d)
    }
}

/// A full delivery's header fields as of one second of an object's age ([`Object::prepared`]).
#[derive(Debug)]
pub struct Prepared {
    /// The object's `Age`, whole seconds, that `map` carries.
    pub age: u64,
    /// The `Cache-Status` value `map` carries.
    pub status: HeaderValue,
    pub map: HeaderMap,
    /// `map` as HTTP/1.1 bytes (`Prepared::wire`), built when a fast hit first needs them.
    pub wire: std::sync::OnceLock<Bytes>,
    /// The head a fast hit sends under a VCL program whose `vcl_deliver` reads only the
    /// object and the response (`proxy/vcl/quick.rs`): `wire` plus the fields it adds, made
    /// once per `Prepared`; the program's identity (its runtime's address) with it, and
    /// `None` when it does more than add fields. One pointer (`OnceBox`): most objects
    /// are never served under such a program.
    pub vcl_wire: once_cell::race::OnceBox<(usize, Option<Bytes>)>,
}

impl Prepared {
    pub fn new(age: u64, status: HeaderValue, map: HeaderMap) -> Prepared {
        Prepared {
            age,
            status,
            map,
            wire: std::sync::OnceLock::new(),
            vcl_wire: once_cell::race::OnceBox::new(),
        }
    }

    /// The response head for `map` with `status` as hyper writes it (status line with the
    /// canonical reason, then each field as `name: value`, in the map's order): a fast hit
    /// (server/h1/answers.rs) sends these bytes as they are. hyper adds `Date` when the fields have
    /// none; so does the writer then, with the blank line: the bytes end with the blank line
    /// (`\r\n\r\n`) only when the stored fields carry their own `Date`. Built once per
    /// `Prepared`, i.e. at most once per second of the object's age.
    pub fn wire(&self, status: StatusCode) -> &Bytes {
        self.wire.get_or_init(|| {
            let fields: usize = self
                .map
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum();
            let reason = status.canonical_reason().unwrap_or("");
            let mut out = Vec::with_capacity(16 + reason.len() + fields);
            out.extend_from_slice(b"HTTP/1.1 ");
            out.extend_from_slice(status.as_str().as_bytes());
            out.push(b' ');
            out.extend_from_slice(reason.as_bytes());
            out.extend_from_slice(b"\r\n");
            for (name, value) in &self.map {
                out.extend_from_slice(name.as_str().as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            if self.map.contains_key(http::header::DATE) {
                out.extend_from_slice(b"\r\n");
            }
            Bytes::from(out)
        })
    }
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
            state: Default::default(),
            prepared: Default::default(),
            hits: Default::default(),
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
            state: TierState::default(),
            prepared: Default::default(),
            hits: AtomicU16::new(self.hits.load(Ordering::Relaxed)),
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
            state: TierState {
                on_disk: AtomicBool::new(true),
                ..TierState::default()
            },
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

/// Size and occupancy of a storage tier.
#[derive(Clone, Copy, Debug, Default)]
pub struct StorageStats {
    pub objects: u64,
    pub bytes: u64,
    pub capacity: u64,
}

/// A future returned by [`Storage::lookup_io`].
pub type LookupFuture<'a> = Pin<Box<dyn Future<Output = Option<Arc<Object>>> + Send + 'a>>;

/// [`Cache::lookup_now`]: the tiers without I/O have no copy; a tier with I/O must be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedsIo;

/// A future returned by [`Storage::persist_ban`].
pub type BanFuture = Pin<Box<dyn Future<Output = Result<(), ban::BanError>> + Send>>;
/// A future returned by [`Storage::inspect`]: the copy in each tier holding a key, top first.
pub type InspectFuture<'a> =
    Pin<Box<dyn Future<Output = Vec<(&'static str, Arc<Object>)>> + Send + 'a>>;

/// A storage tier ("stevedore"). The pipeline only sees this trait (through [`Cache::lookup_now`] and [`Cache::lookup_io`]),
/// so tiers can be added without touching it.
pub trait Storage: Send + Sync + 'static {
    /// Short name for logs and `Cache-Status` detail, e.g. `memory`.
    fn name(&self) -> &'static str;
    /// The object stored under `key` that can be had without I/O, fresh or not.
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Object>>;
    /// True if a tier needs I/O ([`Storage::lookup_io`]) to look a key up. Default: false.
    fn has_io(&self) -> bool {
        false
    }
    /// After `lookup` found nothing: the object from tiers that need I/O (disk). Such tiers
    /// return only objects not yet expired. Default: nothing.
    fn lookup_io<'a>(&'a self, _key: &'a CacheKey) -> LookupFuture<'a> {
        Box::pin(std::future::ready(None))
    }
    /// The copy of `key` in each tier holding it, top tier first, for the admin API. Unlike
    /// a lookup it changes nothing: no recency, no hit mark, no promotion, no counter.
    fn inspect<'a>(&'a self, key: &'a CacheKey) -> InspectFuture<'a>;
    /// Stores `object` under `key`, replacing any previous one; may evict others.
    fn insert(&self, key: CacheKey, object: Arc<Object>);
    /// Removes `key`; true if something was removed.
    fn remove(&self, key: &CacheKey) -> bool;
    fn stats(&self) -> StorageStats;
    /// Occupancy of each tier below this one, by name (e.g. `disk`). Default: none.
    fn lower_tiers(&self) -> Vec<(&'static str, StorageStats)> {
        Vec::new()
    }
    /// Clean shutdown: persist what is pending (blocking). Default: nothing to do.
    fn close(&self) {}
    /// Calls `f` for every object the tier holds in memory (for the ban sweeper; runs in the
    /// background). Returns true if that was every object of the tier, false if some (e.g. on
    /// disk) were not visited. Default: visits nothing.
    fn scan(&self, _f: &mut dyn FnMut(&CacheKey, &Arc<Object>)) -> bool {
        false
    }
    /// Makes a ban just added to the list durable; resolves once it is (tiers that keep
    /// nothing across a restart: at once).
    fn persist_ban(&self, _ban: Arc<ban::Ban>) -> BanFuture {
        Box::pin(std::future::ready(Ok(())))
    }
    /// After a [`Storage::scan`] that started at `before` but did not visit every object:
    /// retires the bans the tiers it did not visit no longer need (one on the request's
    /// fields only if older than `oldest_in_memory`, the oldest object the scan saw).
    /// Blocking. Default: none.
    fn retire_bans(&self, _before: Instant, _oldest_in_memory: Instant) -> usize {
        0
    }
    /// What persistent storage found at start-up for the cache's own indexes; handed over
    /// once. Default: nothing.
    fn recovered_index(&self) -> RecoveredIndex {
        RecoveredIndex::default()
    }
}

/// Index entries read back from persistent storage at start-up.
#[derive(Debug, Default)]
pub struct RecoveredIndex {
    /// Variant keys with the `Vary` names of each, oldest first.
    pub variants: Vec<(CacheKey, Vec<HeaderName>)>,
    /// URLs (primary keys) with the surrogate keys of their stored objects.
    pub tagged: Vec<(CacheKey, Vec<String>)>,
}

/// The cache as the request path sees it: a storage tier, the hit-for-miss memory and the
/// table of fetches in progress.
pub struct Cache {
    pub storage: Arc<dyn Storage>,
    pub busy: Arc<busy::BusyTable>,
    hit_for_miss: quick_cache::sync::Cache<CacheKey, Instant>,
    /// Primary key → the URL's Vary field names and stored variants.
    vary_index: quick_cache::sync::Cache<CacheKey, Arc<vary::VaryIndex>>,
    /// Set (before its first entry) once the index has held anything: until then a lookup
    /// skips it. A site without `Vary` never pays the index's hashed lookup per hit (~160
    /// instructions; bench/RESULTS.md).
    vary_seen: std::sync::atomic::AtomicBool,
    max_variants: usize,
    /// Active bans, checked at lookup (shared with a disk tier, which persists them).
    pub bans: Arc<ban::BanList>,
    /// Surrogate key → URLs.
    pub tags: tags::TagIndex,
    /// Partial content (206 pieces) per URL, beside the tiers (`partial.rs`).
    pub partial: partial::Partials,
    /// The fleet's shared tier (`[storage.shared]`), asked by a key's local leader after the
    /// local tiers missed; None without it (then nothing on any path touches it).
    pub shared: Option<Arc<shared::SharedTier>>,
}

/// What the partial content store holds at most unless told otherwise
/// ([`Cache::with_partial_capacity`]).
pub const DEFAULT_PARTIAL_CAPACITY: u64 = 64 << 20;

/// Hit-for-miss entries remembered at most (each is one key; oldest are evicted first).
pub const HIT_FOR_MISS_CAPACITY: usize = 65_536;

/// URLs with `Vary` whose variant list is remembered at most. A URL that falls out of this
/// index is looked up without its variant until its next response re-registers it (a miss,
/// never a wrong variant: objects carry their exact Vary selection).
pub const VARY_INDEX_CAPACITY: usize = 262_144;

impl Cache {
    /// The cache over `storage`; the variant lists of URLs and the tag index are rebuilt at
    /// once from what persistent storage found (see [`Cache::restore_variants`]).
    pub fn new(storage: Arc<dyn Storage>, max_variants: usize) -> Cache {
        let cache = Cache {
            storage,
            busy: Arc::new(busy::BusyTable::default()),
            hit_for_miss: quick_cache::sync::Cache::new(HIT_FOR_MISS_CAPACITY),
            vary_index: quick_cache::sync::Cache::new(VARY_INDEX_CAPACITY),
            vary_seen: std::sync::atomic::AtomicBool::new(false),
            max_variants,
            bans: Arc::new(ban::BanList::new(
                crate::config::invalidation::DEFAULT_MAX_BANS,
            )),
            tags: tags::TagIndex::default(),
            partial: partial::Partials::new(DEFAULT_PARTIAL_CAPACITY),
            shared: None,
        };
        let found = cache.storage.recovered_index();
        cache.restore_variants(found.variants);
        for (primary, tags) in &found.tagged {
            cache.tags.add(primary, tags);
        }
        cache
    }

    /// Holds at most `bytes` of partial content (206 pieces).
    pub fn with_partial_capacity(mut self, bytes: u64) -> Cache {
        self.partial = partial::Partials::new(bytes);
        self
    }

    /// Asks `shared` after the local tiers (`[storage.shared]`).
    pub fn with_shared(mut self, shared: Option<Arc<shared::SharedTier>>) -> Cache {
        self.shared = shared;
        self
    }

    /// Stores an object read from the shared tier in the local tiers (variant list and tags
    /// as a fetched one's), without writing it back. Returns the key it was stored under.
    pub fn store_from_shared(&self, primary: &CacheKey, object: Arc<Object>) -> CacheKey {
        self.store(primary, object)
    }

    /// Learns that `primary` varies on `names` (from the shared tier's variant index), so the
    /// next lookup computes the request's variant.
    pub fn learn_vary(&self, primary: &CacheKey, names: Vec<HeaderName>) {
        if self.vary_names(primary).is_some_and(|i| i.names == names) {
            return;
        }
        self.vary_seen.store(true, Ordering::Release);
        self.vary_index.insert(
            primary.clone(),
            Arc::new(vary::VaryIndex {
                names,
                variants: Vec::new(),
            }),
        );
    }

    /// Uses `bans` (shared with the storage that persists them) as the ban list.
    pub fn with_bans(mut self, bans: Arc<ban::BanList>) -> Cache {
        self.bans = bans;
        self
    }

    /// Adds a ban and waits until the storage has made it durable. Errors: the expression is
    /// invalid, the list is full, or the ban could not be persisted (`NotDurable`: applied
    /// anyway; `PersistFull`: not applied).
    pub async fn ban(&self, expr: &str) -> Result<Arc<ban::Ban>, ban::BanError> {
        let ban = self.bans.add(expr)?;
        self.storage.persist_ban(ban.clone()).await?;
        Ok(ban)
    }

    /// Adds a ban from the request path (VCL's `ban()`): applied at once; persisting it to the
    /// disk tier runs in the background, so no request waits for it (a ban VCL adds is as
    /// durable as the admin API's once that task is done).
    pub fn add_ban(&self, expr: &str) -> Result<Arc<ban::Ban>, ban::BanError> {
        let ban = self.bans.add(expr)?;
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (storage, b) = (self.storage.clone(), ban.clone());
            rt.spawn(async move {
                if let Err(e) = storage.persist_ban(b).await {
                    tracing::warn!(error = %e, "a ban added by VCL was not persisted");
                }
            });
        }
        Ok(ban)
    }

    /// The object stored under `key` in the tiers that need no I/O (memory); `Err(NeedsIo)`
    /// when they have none and a tier below (disk) must be asked with [`Cache::lookup_io`].
    /// Lets a request be answered from memory without becoming a future (`proxy::fsm`).
    pub fn lookup_now(&self, key: &CacheKey) -> Result<Option<Arc<Object>>, NeedsIo> {
        match self.storage.lookup(key) {
            Some(object) => Ok(Some(object)),
            None if self.storage.has_io() => Err(NeedsIo),
            None => Ok(None),
        }
    }

    /// After [`Cache::lookup_now`] said `NeedsIo`: the object from the tiers that need I/O.
    pub async fn lookup_io(&self, key: &CacheKey) -> Option<Arc<Object>> {
        self.storage.lookup_io(key).await
    }

    /// True while `key` is remembered as uncacheable.
    pub fn is_hit_for_miss(&self, key: &CacheKey, now: Instant) -> bool {
        match self.hit_for_miss.get(key) {
            Some(until) if until > now => true,
            Some(_) => {
                self.hit_for_miss.remove(key);
                false
            }
            None => false,
        }
    }

    /// Drops `object` found under `key` if a ban newer than it matches, evaluated for the
    /// request looking it up (`req`; `None`: [`ban::BanCheck::NeedsRequest`] when a ban on
    /// the request's fields may apply).
    pub fn check_bans(
        &self,
        key: &CacheKey,
        object: &Object,
        req: Option<&HeaderMap>,
    ) -> ban::BanCheck {
        let verdict = self.bans.check(key, object, req);
        if verdict == ban::BanCheck::Banned {
            self.storage.remove(key);
        }
        verdict
    }

    /// Removes every object of every URL tagged with one of `tags`. Returns objects removed.
    pub fn purge_tags(&self, tags: &[String]) -> usize {
        tags.iter()
            .flat_map(|t| self.tags.take(t))
            .map(|url| self.purge(&url))
            .sum()
    }

    /// vmod_xkey's `softpurge()`: every variant of every URL tagged with one of `tags` that
    /// is still fresh becomes stale now, its grace and keep as they were (objects whose body
    /// is on disk are removed instead); those already stale are left and not counted.
    /// Returns the objects affected.
    pub fn soft_purge_tags(&self, tags: &[String]) -> usize {
        let mut seen = std::collections::HashSet::new();
        tags.iter()
            .flat_map(|t| self.tags.urls(t))
            .filter(|url| seen.insert(url.clone()))
            .map(|url| self.rearm_where(&url, Duration::ZERO, None, None, true))
            .sum()
    }

    /// Marks every variant of a URL stale now (kept for grace and keep, revalidated on next
    /// use). Objects whose body is on disk are removed instead. Returns objects affected.
    pub fn soft_purge(&self, primary: &CacheKey) -> usize {
        self.rearm(primary, Duration::ZERO, None, None)
    }

    /// VCL's `purge.soft(ttl, grace, keep)`: every variant of a URL fresh for at most `ttl`
    /// more, its grace and keep cut to those given (never lengthened). Objects whose body is on disk are
    /// removed instead. Returns objects affected.
    pub fn rearm(
        &self,
        primary: &CacheKey,
        ttl: Duration,
        grace: Option<Duration>,
        keep: Option<Duration>,
    ) -> usize {
        self.rearm_where(primary, ttl, grace, keep, false)
    }

    /// [`Cache::rearm`], of only the variants still fresh when `only_fresh`.
    fn rearm_where(
        &self,
        primary: &CacheKey,
        ttl: Duration,
        grace: Option<Duration>,
        keep: Option<Duration>,
        only_fresh: bool,
    ) -> usize {
        // Pieces of a representation cannot be revalidated as one: they go.
        self.partial.remove(primary);
        let mut keys = vec![primary.clone()];
        if let Some(index) = self.vary_index.get(primary) {
            keys.extend(index.variants.iter().map(|v| primary.with_variant(*v)));
        }
        let now = Instant::now();
        let mut n = 0;
        for key in keys {
            let Some(object) = self.storage.lookup(&key) else {
                continue;
            };
            if only_fresh && !object.is_fresh(now) {
                continue;
            }
            self.storage.remove(&key);
            n += 1;
            if let Some(stale) = object.rearmed_copy(now, ttl, grace, keep) {
                self.storage.insert(key, Arc::new(stale));
            }
        }
        n
    }

    /// Walks the memory tier removing banned objects, then retires bans that every object has
    /// been checked against (only when the walk saw every object of the storage).
    pub fn sweep_bans(&self) -> (usize, usize) {
        if self.bans.is_empty() {
            return (0, 0);
        }
        let started = Instant::now();
        let mut banned = Vec::new();
        // The oldest object seen: bans on the request's fields (which a sweep cannot check)
        // are retired only once older than it.
        let mut oldest = started;
        let complete = self.storage.scan(&mut |key, object| {
            oldest = oldest.min(object.stored_at);
            if self.bans.is_banned(key, object) {
                banned.push(key.clone());
            }
        });
        for key in &banned {
            self.storage.remove(key);
        }
        let retired = if complete {
            self.bans.retire_before(started, oldest)
        } else {
            self.storage.retire_bans(started, oldest)
        };
        (banned.len(), retired)
    }

    /// Remembers `key` as uncacheable for `ttl`: requests skip coalescing until then.
    pub fn mark_hit_for_miss(&self, key: CacheKey, ttl: Duration) {
        if !ttl.is_zero() {
            self.hit_for_miss.insert(key, Instant::now() + ttl);
        }
    }

    /// Forgets a hit-for-miss mark (the URL produced a cacheable response again).
    pub fn clear_hit_for_miss(&self, key: &CacheKey) {
        self.hit_for_miss.remove(key);
    }

    pub fn hit_for_miss_len(&self) -> usize {
        self.hit_for_miss.len()
    }
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
        body: Body::Memory(smallvec::smallvec![Bytes::from_static(b"x")]),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_keep_milliseconds_and_none() {
        let d = Duration::from_millis(31_536_000_123);
        assert_eq!(Span::new(d).get(), d);
        assert_eq!(
            Span::new(Duration::from_micros(1_999)).get(),
            Duration::from_millis(1)
        );
        assert_eq!(Span::new(Duration::MAX).millis(), u64::MAX);
        assert_eq!(MaybeSpan::new(None).get(), None);
        assert_eq!(
            MaybeSpan::new(Some(Duration::ZERO)).get(),
            Some(Duration::ZERO)
        );
        // The largest value stays "some".
        assert!(MaybeSpan::new(Some(Duration::MAX)).get().is_some());
    }

    /// The wire form of prepared fields: hyper's status line and field lines; the blank line
    /// only when the fields carry their own `Date` (otherwise the writer adds `Date` first,
    /// as hyper does).
    #[test]
    fn prepared_wire_is_what_hyper_writes() {
        let mut map = HeaderMap::new();
        map.insert("content-length", HeaderValue::from_static("5"));
        map.insert("cache-status", HeaderValue::from_static("shellac; hit"));
        let p = Prepared::new(0, HeaderValue::from_static("shellac; hit"), map.clone());
        assert_eq!(
            &p.wire(StatusCode::OK)[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncache-status: shellac; hit\r\n"
        );
        map.insert(
            "date",
            HeaderValue::from_static("Tue, 24 Nov 2026 04:29:13 GMT"),
        );
        let p = Prepared::new(0, HeaderValue::from_static("x"), map);
        let wire = p.wire(StatusCode::NOT_FOUND);
        assert!(wire.starts_with(b"HTTP/1.1 404 Not Found\r\n"));
        assert!(wire.ends_with(b"date: Tue, 24 Nov 2026 04:29:13 GMT\r\n\r\n"));
    }

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
            520,
            "Prepared is {} bytes",
            std::mem::size_of::<Prepared>()
        );
        assert_eq!(std::mem::size_of::<Span>(), 8);
        assert_eq!(std::mem::size_of::<MaybeSpan>(), 8);
        assert_eq!(std::mem::size_of::<Option<Box<VarySelection>>>(), 8);
    }
}
