//! The memory tier's entries: one block per object in a slab (a [`Head`], the key's text,
//! the stored fields and a small body), built into an `Object` on first use.

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::AtomicU8;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use once_cell::race::OnceBox;

use crate::cache::slab::Block;
use crate::cache::{
    Body, CacheKey, KeyRef, MaybeSpan, Object, Prefetch, Span, StoredFields, TierState,
    VarySelection,
};

/// Largest body kept in the compact form. A hit builds the full object once and keeps both
/// (the body twice), so the compact form is for objects whose per-object bookkeeping would
/// outweigh their body; larger ones are stored as objects directly.
pub const COMPACT_BODY: u64 = 2048;

/// The longest host a key kept in this tier may have (64 KiB: a `Host` that long passes only a
/// `server.max_header_size` raised far above its default, and such keys are left to the
/// tiers below).
pub(super) const MAX_HOST: usize = u16::MAX as usize;

/// One cached object: [`Head`], then the key's text, the fields block and the body (compact
/// form) or the key's text alone (full form, [`Head::full`] set at insert).
pub(super) type Entry = Block<Head>;

/// An entry's fixed part (72 bytes; `tests::an_entry_stays_compact`).
pub(super) struct Head {
    /// `Object::stored_at`, nanoseconds from [`EPOCH`] (negative for objects read from disk
    /// that were stored before this process started).
    pub(super) stored_at: i64,
    /// The key's variant (Vary).
    pub(super) variant: u64,
    pub(super) vary: Option<Box<VarySelection>>,
    /// The object as the pipeline uses it: set at insert (full form) or on the first lookup.
    pub(super) full: OnceBox<Arc<Object>>,
    /// Bytes of the key's text that are its host: at most [`MAX_HOST`] (a key with a longer
    /// host is not kept in this tier).
    pub(super) host_len: u16,
    /// The account the entry is charged to (`cache/shares.rs`): its storage's, or for an
    /// object in `s0` its key's site's (`0`: none).
    pub(super) site: u16,
    pub(super) key_len: u32,
    pub(super) fields_len: u32,
    initial_age: Life,
    ttl: Life,
    grace: Life,
    keep: Life,
    stale_if_error: Life,
    pub(super) field_count: u16,
    pub(super) status: StatusCode,
    /// [`Head::STALE_OK`], [`Head::ON_DISK`] and [`Head::TRANSIENT`] (fixed at insert).
    pub(super) flags: u8,
    /// `Object::prefetch`, in the two bytes the flags left of the padding.
    pub(super) prefetch: u16,
    /// CLOCK use count, 0..=3.
    pub(super) uses: AtomicU8,
}

impl Head {
    /// `Object::stale_ok`.
    pub(super) const STALE_OK: u8 = 1;
    /// The object was on (or queued to) the disk tier when it was inserted.
    pub(super) const ON_DISK: u8 = 2;
    /// `TierState::transient`: never handed to the eviction sink (the disk tier).
    pub(super) const TRANSIENT: u8 = 4;

    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// [`Head::flags`] for `object`.
pub(super) fn head_flags(object: &Object) -> u8 {
    let mut flags = 0;
    if object.stale_ok {
        flags |= Head::STALE_OK;
    }
    if object.state.on_disk() {
        flags |= Head::ON_DISK;
    }
    if object.state.transient() {
        flags |= Head::TRANSIENT;
    }
    flags
}

/// The process's reference instant for [`Head::stored_at`].
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

pub(super) fn nanos_from_epoch(at: Instant) -> i64 {
    let epoch = *EPOCH;
    match at.checked_duration_since(epoch) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => -i64::try_from(epoch.duration_since(at).as_nanos()).unwrap_or(i64::MAX),
    }
}

pub(super) fn instant_from_epoch(nanos: i64) -> Instant {
    let epoch = *EPOCH;
    let d = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 {
        epoch.checked_add(d).unwrap_or(epoch)
    } else {
        epoch.checked_sub(d).unwrap_or(epoch)
    }
}

/// A lifetime in 4 bytes: milliseconds below 2^31 (24.8 days), whole seconds with the top bit
/// set above (up to 68 years); `u32::MAX` is "none" (for `stale-if-error`). Lifetimes that long
/// come from `max-age` in whole seconds anyway.
#[derive(Clone, Copy)]
struct Life(u32);

impl Life {
    const SECONDS: u32 = 1 << 31;
    const NONE: Life = Life(u32::MAX);

    fn new(ms: u64) -> Life {
        match u32::try_from(ms) {
            Ok(ms) if ms < Life::SECONDS => Life(ms),
            _ => Life(Life::SECONDS | (ms / 1000).min(u64::from(Life::SECONDS - 2)) as u32),
        }
    }

    fn of(span: Span) -> Life {
        Life::new(span.millis())
    }

    fn of_maybe(span: MaybeSpan) -> Life {
        span.get()
            .map_or(Life::NONE, |d| Life::new(Span::new(d).millis()))
    }

    fn millis(self) -> u64 {
        if self.0 & Life::SECONDS == 0 {
            u64::from(self.0)
        } else {
            u64::from(self.0 & !Life::SECONDS) * 1000
        }
    }

    fn span(self) -> Span {
        Span::new(Duration::from_millis(self.millis()))
    }

    fn maybe_span(self) -> MaybeSpan {
        if self.0 == u32::MAX {
            MaybeSpan::NONE
        } else {
            MaybeSpan::new(Some(Duration::from_millis(self.millis())))
        }
    }
}

pub(super) fn key_text(entry: &Entry) -> &[u8] {
    entry
        .bytes()
        .get(..entry.head().key_len as usize)
        .unwrap_or(&[])
}

pub(super) fn key_of(entry: &Entry) -> CacheKey {
    let h = entry.head();
    let text = std::str::from_utf8(key_text(entry)).unwrap_or("");
    let mut key = CacheKey::from_text_parts(text, h.host_len as usize, h.variant);
    // A storage's account is the object's, not its key's site.
    if crate::cache::shares::store_of_account(h.site) == crate::cache::stores::S0 {
        key.set_site(h.site);
    }
    key
}

pub(super) fn is_key(entry: &Entry, key: KeyRef<'_>) -> bool {
    let h = entry.head();
    h.variant == key.variant
        && h.host_len as usize == key.host_len()
        && key_text(entry) == key.text()
}

/// Whether `object` is kept compact, and its fields' count and block length if so.
pub(super) fn compact_shape(key: &CacheKey, object: &Object) -> Option<(u16, u32)> {
    let Body::Memory(chunks) = &object.body else {
        return None;
    };
    let small = chunks.len() <= 1 && object.body_len <= COMPACT_BODY;
    let count = u16::try_from(object.headers.len()).ok()?;
    let fields = u32::try_from(object.headers.block().len()).ok()?;
    u32::try_from(key.text().len()).ok()?;
    small.then_some((count, fields))
}

/// The entry for `key` and `object`: compact when it is small, else the key and the object.
pub(super) fn entry_for(key: &CacheKey, object: Arc<Object>) -> Entry {
    let shape = compact_shape(key, &object);
    let text = key.text().as_bytes();
    let (count, fields_len) = shape.unwrap_or((0, 0));
    let head = Head {
        stored_at: nanos_from_epoch(object.stored_at),
        variant: key.variant,
        vary: object.vary.clone(),
        full: OnceBox::new(),
        host_len: key.host_len().min(MAX_HOST) as u16,
        site: key.site(),
        key_len: text.len().min(u32::MAX as usize) as u32,
        fields_len,
        initial_age: Life::of(object.initial_age),
        ttl: Life::of(object.ttl),
        grace: Life::of(object.grace),
        keep: Life::of(object.keep),
        stale_if_error: Life::of_maybe(object.stale_if_error),
        field_count: count,
        status: object.status,
        flags: head_flags(&object),
        prefetch: object.prefetch.to_bits(),
        uses: AtomicU8::new(0),
    };
    match (shape, &object.body) {
        (Some(_), Body::Memory(chunks)) => {
            let body = chunks.first().map_or(&[][..], |c| &c[..]);
            let block = object.headers.block();
            Block::new(head, &[text, block, body])
        }
        _ => {
            let _ = head.full.set(Box::new(object));
            Block::new(head, &[text])
        }
    }
}

/// The object a compact entry holds, built from its block (a full entry's own object).
pub(super) fn build(entry: &Entry, hit: bool) -> Arc<Object> {
    let h = entry.head();
    if let Some(object) = h.full.get() {
        return object.clone();
    }
    let fields_at = h.key_len as usize;
    let body_at = fields_at + h.fields_len as usize;
    let fields = entry.bytes().get(fields_at..body_at).unwrap_or(&[]);
    let body = entry.bytes().get(body_at..).unwrap_or(&[]);
    let chunks = if body.is_empty() {
        Default::default()
    } else {
        smallvec::smallvec![Bytes::copy_from_slice(body)]
    };
    Arc::new(Object {
        status: h.status,
        headers: StoredFields::from_block(Bytes::copy_from_slice(fields), u32::from(h.field_count)),
        body: Body::Memory(chunks),
        body_len: body.len() as u64,
        vary: h.vary.clone(),
        initial_age: h.initial_age.span(),
        ttl: h.ttl.span(),
        stale_ok: h.has(Head::STALE_OK),
        grace: h.grace.span(),
        stale_if_error: h.stale_if_error.maybe_span(),
        keep: h.keep.span(),
        stored_at: instant_from_epoch(h.stored_at),
        state: TierState::with(hit, h.has(Head::ON_DISK), h.has(Head::TRANSIENT))
            .in_store(crate::cache::shares::store_of_account(h.site)),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: Prefetch::from_bits(h.prefetch),
    })
}

/// Bytes an entry is charged: its block, plus the object's weight
/// once there is an object (from the start for the full form; for the compact form from the
/// first lookup, which builds it and adds its weight to the shard's then).
pub(super) fn charge(entry: &Entry) -> u64 {
    let own = entry.footprint() as u64;
    entry
        .head()
        .full
        .get()
        .map_or(own, |object| own + object.weight())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_in_four_bytes() {
        for ms in [0, 1, 999, 86_400_000, (1 << 31) - 1] {
            assert_eq!(Life::new(ms).millis(), ms);
        }
        // Beyond 24.8 days: whole seconds.
        assert_eq!(Life::new(365 * 86_400_000 + 999).millis(), 365 * 86_400_000);
        assert_eq!(
            Life::new(u64::MAX).millis(),
            (u64::from(Life::SECONDS) - 2) * 1000
        );
        assert_ne!(Life::new(u64::MAX).0, Life::NONE.0);
        assert!(Life::of_maybe(MaybeSpan::NONE).maybe_span().get().is_none());
    }

    #[test]
    fn an_entry_stays_compact() {
        assert_eq!(std::mem::size_of::<Head>(), 72);
        assert_eq!(std::mem::size_of::<Entry>(), 8);
    }
}
