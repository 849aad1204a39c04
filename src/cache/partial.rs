//! Partial content (RFC 9111 §3.3–3.4): 206 responses stored as pieces of a representation,
//! combined with each other while they share a strong validator, and turned into a complete
//! object once they cover it.
//!
//! Pieces live here, per URL, beside the tiers rather than in them: an entry is a set of byte
//! ranges of one representation, which no tier's object format describes. They are held in
//! memory only (never written to the disk tier, not kept across a restart), bounded in bytes
//! on their own (least recently used entries go first), removed with their URL by PURGE, tag
//! purges and invalidation (`Cache::purge`), and checked against bans at lookup.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::{CacheKey, Object, StoredFields, VarySelection, boxed_vary, vary_matches};

/// The validator a piece was sent with, in the form `If-Range` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validator {
    /// A strong entity tag (`"v1"`, never `W/"v1"`).
    ETag(HeaderValue),
    /// A `Last-Modified` date that counts as strong: at least 60 s before the response's
    /// `Date` (RFC 9110 §8.8.2.2).
    LastModified(HeaderValue),
}

impl Validator {
    /// The strong validator of a response, if it has one.
    pub fn of(headers: &HeaderMap) -> Option<Validator> {
        if let Some(etag) = headers.get(header::ETAG)
            && !etag.as_bytes().starts_with(b"W/")
            && etag.as_bytes().starts_with(b"\"")
        {
            return Some(Validator::ETag(etag.clone()));
        }
        let lm = headers.get(header::LAST_MODIFIED)?;
        let date = |v: &HeaderValue| httpdate::parse_http_date(v.to_str().ok()?).ok();
        let modified = date(lm)?;
        let sent = date(headers.get(header::DATE)?)?;
        (sent.duration_since(modified).ok()? >= Duration::from_secs(60))
            .then(|| Validator::LastModified(lm.clone()))
    }

    /// The `If-Range` value that asks for a range of this representation only.
    pub fn if_range(&self) -> HeaderValue {
        match self {
            Validator::ETag(v) | Validator::LastModified(v) => v.clone(),
        }
    }
}

/// A new piece: a 206 response's body for bytes `start..start + body.len()` of a
/// representation `length` bytes long.
pub struct Piece {
    pub start: u64,
    pub length: u64,
    pub body: Bytes,
    /// The 206's fields, `Content-Range` and `Content-Length` removed.
    pub headers: HeaderMap,
    pub validator: Option<Validator>,
    pub vary: VarySelection,
    pub initial_age: Duration,
    pub ttl: Duration,
    pub received: Instant,
}

/// What is held of one representation: disjoint, non-adjacent pieces in order, with the
/// fields and freshness of the newest response (RFC 9111 §3.4: its fields replace the older
/// ones).
#[derive(Debug)]
pub struct Partial {
    pub headers: HeaderMap,
    pub validator: Option<Validator>,
    /// The representation's complete length.
    pub length: u64,
    /// (first byte, bytes), sorted, neither overlapping nor touching.
    pub pieces: Vec<(u64, Bytes)>,
    pub vary: VarySelection,
    pub initial_age: Duration,
    pub ttl: Duration,
    /// When the newest response arrived (its age counts from here).
    pub received: Instant,
    /// When the oldest piece arrived: a ban newer than this removes the entry.
    pub oldest: Instant,
    /// Bytes held (pieces and fields), for the store's bound.
    weight: u64,
}

impl Partial {
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.received)
    }

    pub fn is_fresh(&self, now: Instant) -> bool {
        self.age(now) < self.ttl
    }

    pub fn remaining_ttl(&self, now: Instant) -> Duration {
        self.ttl.saturating_sub(self.age(now))
    }

    pub fn vary_matches(&self, request: &HeaderMap) -> bool {
        vary_matches(&self.vary, request)
    }

    /// Bytes `start..=end`, if one piece holds them all.
    pub fn get(&self, start: u64, end: u64) -> Option<Bytes> {
        let (first, bytes) = self
            .pieces
            .iter()
            .find(|(s, b)| *s <= start && end < s + b.len() as u64)?;
        let from = (start - first) as usize;
        let to = (end - first) as usize + 1;
        Some(bytes.slice(from..to))
    }

    /// The one range of bytes not held, when there is exactly one (`None`: nothing missing,
    /// or several gaps).
    pub fn only_gap(&self) -> Option<(u64, u64)> {
        let mut gaps = Vec::new();
        let mut next = 0u64;
        for (start, bytes) in &self.pieces {
            if *start > next {
                gaps.push((next, start - 1));
            }
            next = start + bytes.len() as u64;
        }
        if next < self.length {
            gaps.push((next, self.length - 1));
        }
        match gaps[..] {
            [gap] => Some(gap),
            _ => None,
        }
    }

    /// The pieces before and after byte range `gap`, in order.
    pub fn around(&self, gap: (u64, u64)) -> (Vec<Bytes>, Vec<Bytes>) {
        let before = self
            .pieces
            .iter()
            .filter(|(s, _)| *s < gap.0)
            .map(|(_, b)| b.clone())
            .collect();
        let after = self
            .pieces
            .iter()
            .filter(|(s, _)| *s > gap.1)
            .map(|(_, b)| b.clone())
            .collect();
        (before, after)
    }

    /// A complete object made of the pieces, when they cover the whole representation.
    fn complete(&self) -> Option<Object> {
        let [(0, body)] = &self.pieces[..] else {
            return None;
        };
        if body.len() as u64 != self.length {
            return None;
        }
        Some(Object {
            status: StatusCode::OK,
            headers: StoredFields::from_map(&self.headers),
            body: super::Body::Memory(vec![body.clone()].into_iter().collect()),
            body_len: self.length,
            vary: boxed_vary(self.vary.clone()),
            initial_age: self.initial_age.into(),
            ttl: self.ttl.into(),
            stale_ok: true,
            grace: Duration::ZERO.into(),
            stale_if_error: None::<Duration>.into(),
            keep: Duration::ZERO.into(),
            stored_at: self.received,
            state: Default::default(),
            prepared: Default::default(),
            hits: Default::default(),
            prefetch: super::Prefetch::CONFIGURED,
        })
    }
}

/// `pieces` with `(start, body)` added: merged with every piece it overlaps or touches.
fn merge(pieces: &[(u64, Bytes)], start: u64, body: Bytes) -> Vec<(u64, Bytes)> {
    let end = start + body.len() as u64; // exclusive
    let mut out = Vec::with_capacity(pieces.len() + 1);
    let (mut lo, mut hi) = (start, end);
    let mut joined: Vec<&(u64, Bytes)> = Vec::new();
    for p in pieces {
        let p_end = p.0 + p.1.len() as u64;
        if p_end < start || p.0 > end {
            out.push(p.clone());
        } else {
            lo = lo.min(p.0);
            hi = hi.max(p_end);
            joined.push(p);
        }
    }
    if joined.is_empty() {
        out.push((start, body));
    } else {
        let mut buf = BytesMut::zeroed((hi - lo) as usize);
        // Older bytes first, then the new piece over them (the newest response wins).
        for (s, b) in joined {
            let at = (s - lo) as usize;
            buf[at..at + b.len()].copy_from_slice(b);
        }
        let at = (start - lo) as usize;
        buf[at..at + body.len()].copy_from_slice(&body);
        out.push((lo, buf.freeze()));
    }
    out.sort_by_key(|(s, _)| *s);
    out
}

/// What adding a piece led to.
pub enum Added {
    /// Held, with the pieces it joined.
    Held(Arc<Partial>),
    /// The pieces now make the whole representation: this object (the entry is gone).
    Complete(Object),
    /// Not held: larger than half of what the store may hold.
    Dropped,
}

/// Partial content per URL (primary key; one variant at a time), bounded in bytes: the least
/// recently added-to entries go first.
pub struct Partials {
    inner: Mutex<Inner>,
    capacity: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<CacheKey, Arc<Partial>>,
    /// Keys, least recently added-to first.
    order: VecDeque<CacheKey>,
    bytes: u64,
}

impl Inner {
    fn remove(&mut self, key: &CacheKey) -> Option<Arc<Partial>> {
        let old = self.map.remove(key)?;
        self.bytes -= old.weight;
        self.order.retain(|k| k != key);
        Some(old)
    }
}

impl Partials {
    /// A store holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> Partials {
        Partials {
            inner: Mutex::new(Inner::default()),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, primary: &CacheKey) -> Option<Arc<Partial>> {
        self.lock().map.get(primary).cloned()
    }

    /// Forgets a URL's partial content. Whether there was any.
    pub fn remove(&self, primary: &CacheKey) -> bool {
        self.lock().remove(primary).is_some()
    }

    /// Adds `piece` for `primary`. It joins the held pieces only if both carry the same
    /// strong validator and complete length, and the same `Vary` selection (RFC 9111 §3.4);
    /// otherwise it replaces them. The newest response's fields and freshness are kept.
    pub fn add(&self, primary: &CacheKey, piece: Piece) -> Added {
        let mut inner = self.lock();
        let held = inner.remove(primary).filter(|old| {
            old.length == piece.length
                && old.vary == piece.vary
                && piece.validator.is_some()
                && old.validator == piece.validator
        });
        let (pieces, oldest) = match &held {
            Some(old) => (
                merge(&old.pieces, piece.start, piece.body),
                old.oldest.min(piece.received),
            ),
            None => (vec![(piece.start, piece.body)], piece.received),
        };
        let weight = pieces.iter().map(|(_, b)| b.len() as u64).sum::<u64>()
            + piece
                .headers
                .iter()
                .map(|(n, v)| (n.as_str().len() + v.len() + 32) as u64)
                .sum::<u64>();
        let partial = Partial {
            headers: piece.headers,
            validator: piece.validator,
            length: piece.length,
            pieces,
            vary: piece.vary,
            initial_age: piece.initial_age,
            ttl: piece.ttl,
            received: piece.received,
            oldest,
            weight,
        };
        if let Some(object) = partial.complete() {
            return Added::Complete(object);
        }
        if weight > self.capacity / 2 {
            return Added::Dropped;
        }
        while inner.bytes + weight > self.capacity {
            let Some(oldest) = inner.order.front().cloned() else {
                break;
            };
            inner.remove(&oldest);
        }
        let partial = Arc::new(partial);
        inner.bytes += weight;
        inner.order.push_back(primary.clone());
        inner.map.insert(primary.clone(), partial.clone());
        Added::Held(partial)
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

/// The fields a held representation is stored and delivered with: the 206's, without the
/// ones that describe this one message's body.
pub fn representation_fields(mut headers: HeaderMap) -> HeaderMap {
    for name in [header::CONTENT_RANGE, header::CONTENT_LENGTH] {
        headers.remove(&name);
    }
    headers
}

/// `Content-Range: bytes a-b/len` of a 206 (a known complete length): (a, b, len).
pub fn content_range(headers: &HeaderMap) -> Option<(u64, u64, u64)> {
    let mut values = headers.get_all(header::CONTENT_RANGE).iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return None;
    };
    let rest = v.to_str().ok()?.trim().strip_prefix("bytes ")?;
    let (range, len) = rest.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let num = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (a, b, len) = (num(a)?, num(b)?, num(len)?);
    (a <= b && b < len).then_some((a, b, len))
}

#[cfg(test)]
mod tests;
