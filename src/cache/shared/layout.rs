//! How an object lies in Redis Cluster: key names (every key of one URL in one hash slot) and
//! the metadata record, encoded and decoded here without I/O.
//!
//! ```text
//!  P{h}i                 hash: "names" → the URL's Vary field names; <variant> → "<gen> <chunks>"
//!  P{h}m<variant>        metadata of one variant (this record); small bodies inline
//!  P{h}c<variant>.<gen>.<n>  body chunk n (CHUNK_SIZE bytes, the last shorter)
//!  P{h}l<variant>        the fleet lease on fetching it (a node's token, or `pass`)
//!  P{h}p                 the log position of the URL's last purge
//!  Pt:<tag>              set of the URLs (key text) carrying a surrogate key
//! ```
//! `P` is `storage.shared.key_prefix`, `h` the xxh3 of the URL (its primary key), so Redis
//! Cluster puts the metadata, chunks and variant index of a URL on one slot and a script can
//! commit them together. A record carries the whole key and is refused for another (a hash
//! collision is a miss). The generation in the chunk names ties chunks to the one metadata
//! record that names them: a reader never mixes two writes of one URL.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderName, HeaderValue, StatusCode};
use xxhash_rust::xxh3::xxh3_64;

use crate::cache::{
    Body, CacheKey, MaybeSpan, MemoryChunks, Object, Span, StoredFields, TierState,
};

/// Body bytes per chunk key; a body up to this size is kept inline in the metadata record.
pub const CHUNK_SIZE: usize = 256 * 1024;

const MAGIC: &[u8; 4] = b"SHL1";

/// The keys of one URL, all in one hash slot.
#[derive(Clone, Debug)]
pub struct UrlKeys {
    /// `P{h}`: the prefix and hash tag every key of the URL starts with.
    base: Vec<u8>,
}

impl UrlKeys {
    pub fn new(prefix: &str, primary: &CacheKey) -> UrlKeys {
        let mut text = Vec::with_capacity(4 + primary.text().len());
        text.extend_from_slice(&(primary.host_len() as u32).to_le_bytes());
        text.extend_from_slice(primary.text().as_bytes());
        let mut base = Vec::with_capacity(prefix.len() + 18);
        base.extend_from_slice(prefix.as_bytes());
        base.extend_from_slice(format!("{{{:016x}}}", xxh3_64(&text)).as_bytes());
        UrlKeys { base }
    }

    fn with(&self, tail: &str) -> Vec<u8> {
        let mut k = self.base.clone();
        k.extend_from_slice(tail.as_bytes());
        k
    }

    /// The variant index (a hash).
    pub fn index(&self) -> Vec<u8> {
        self.with("i")
    }

    /// The metadata record of `variant`.
    pub fn meta(&self, variant: u64) -> Vec<u8> {
        self.with(&format!("m{variant:x}"))
    }

    /// Body chunk `n` of `variant`'s write `generation`.
    pub fn chunk(&self, variant: u64, generation: u64, n: u32) -> Vec<u8> {
        self.with(&format!("c{variant:x}.{generation:x}.{n}"))
    }

    /// The fleet lease on fetching `variant` (coalescing across nodes).
    pub fn lease(&self, variant: u64) -> Vec<u8> {
        self.with(&format!("l{variant:x}"))
    }

    /// `P{h}`: the scripts name every key of the URL from it.
    pub fn base(&self) -> Vec<u8> {
        self.base.clone()
    }

    /// The position of the URL's last purge (`P{h}p`): fills that started before it are
    /// refused.
    pub fn purge_mark(&self) -> Vec<u8> {
        self.with("p")
    }
}

/// The set of URLs carrying `tag`.
pub fn tag_key(prefix: &str, tag: &str) -> Vec<u8> {
    format!("{prefix}t:{tag}").into_bytes()
}

/// A member of a tag set: the primary key, with where its host ends.
pub fn tag_member(primary: &CacheKey) -> Vec<u8> {
    format!("{}:{}", primary.host_len(), primary.text()).into_bytes()
}

/// The primary key a tag set member names.
pub fn tag_member_key(member: &[u8]) -> Option<CacheKey> {
    let text = std::str::from_utf8(member).ok()?;
    let (len, text) = text.split_once(':')?;
    let len: usize = len.parse().ok()?;
    text.is_char_boundary(len)
        .then(|| CacheKey::from_text_parts(text, len, 0))
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long Redis keeps an object: the rest of its freshness, grace and keep (or
/// stale-if-error, whichever is longer) — None when nothing is left. Freshness itself is
/// computed from the stored times, not from this.
pub fn redis_ttl(object: &Object, now: Instant) -> Option<Duration> {
    let stale = (object.grace.get() + object.keep.get())
        .max(object.stale_if_error.get().unwrap_or_default());
    let life = object.ttl.get() + stale;
    life.checked_sub(object.age(now)).filter(|d| !d.is_zero())
}

/// An object ready to be written: its metadata record and the chunks it names.
pub struct Encoded {
    pub generation: u64,
    pub meta: Bytes,
    /// Empty when the body is inline in `meta`.
    pub chunks: Vec<Bytes>,
}

/// Encodes `object` stored under `key`. Only objects whose body is in memory can be encoded.
pub fn encode(key: &CacheKey, object: &Object, generation: u64, now: Instant) -> Option<Encoded> {
    let Body::Memory(pieces) = &object.body else {
        return None;
    };
    let body: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
    let stored_ms = wall_ms()
        .saturating_sub(now.saturating_duration_since(object.stored_at).as_millis() as u64);
    let inline = body.len() <= CHUNK_SIZE;
    let chunks: Vec<Bytes> = if inline {
        Vec::new()
    } else {
        body.chunks(CHUNK_SIZE)
            .map(Bytes::copy_from_slice)
            .collect()
    };
    let mut b = BytesMut::with_capacity(256 + key.text().len() + object.headers.block_len());
    b.put_slice(MAGIC);
    b.put_u64_le(generation);
    // Bit 0: stale_ok; bit 1: a refresh-ahead window of its own (two bytes after the Vary
    // list, where a node that does not know them refuses an inline record: a miss).
    let prefetch = object.prefetch != crate::cache::Prefetch::CONFIGURED;
    let flags = u8::from(object.stale_ok) | (u8::from(prefetch) << 1);
    b.put_u8(flags);
    b.put_u16_le(object.status.as_u16());
    b.put_u64_le(stored_ms);
    b.put_u64_le(object.initial_age.millis());
    b.put_u64_le(object.ttl.millis());
    b.put_u64_le(object.grace.millis());
    b.put_u64_le(object.keep.millis());
    b.put_u64_le(
        object
            .stale_if_error
            .get()
            .map_or(u64::MAX, |d| d.as_millis() as u64),
    );
    b.put_u64_le(body.len() as u64);
    b.put_u32_le(chunks.len() as u32);
    b.put_u64_le(xxh3_64(&body));
    b.put_u64_le(key.variant);
    b.put_u32_le(key.host_len() as u32);
    put_bytes(&mut b, key.text().as_bytes());
    b.put_u32_le(object.headers.len() as u32);
    put_bytes(&mut b, object.headers.block());
    let vary = object.vary();
    b.put_u16_le(vary.len() as u16);
    for (name, value) in vary {
        put_bytes(&mut b, name.as_str().as_bytes());
        match value {
            Some(v) => {
                b.put_u8(1);
                put_bytes(&mut b, v.as_bytes());
            }
            None => b.put_u8(0),
        }
    }
    if prefetch {
        b.put_u16_le(object.prefetch.to_bits());
    }
    if inline {
        b.put_slice(&body);
    }
    Some(Encoded {
        generation,
        meta: b.freeze(),
        chunks,
    })
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) {
    b.put_u32_le(v.len() as u32);
    b.put_slice(v);
}

/// A metadata record read back, before its chunks are.
#[derive(Debug)]
pub struct SharedMeta {
    pub generation: u64,
    pub chunks: u32,
    /// When the object was stored (wall-clock ms, the storing node's clock).
    stored_ms: u64,
    body_len: u64,
    body_hash: u64,
    /// The object with an empty body (filled by [`SharedMeta::into_object`]).
    object: Object,
    inline: Bytes,
}

/// Why a record was not used (each one is a miss).
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a record of this format (or cut short).
    Malformed,
    /// The record is another URL's (hash collision) or another variant's.
    OtherKey,
    /// MemoryChunks missing (a newer write or a purge removed them) or not the recorded body.
    Body,
}

/// Reads a metadata record stored for `key`; stored times become instants of this process.
pub fn decode(key: &CacheKey, record: Bytes) -> Result<SharedMeta, Refused> {
    let mut r = record;
    let m = Refused::Malformed;
    if r.remaining() < 4 || &r[..4] != MAGIC {
        return Err(m);
    }
    r.advance(4);
    if r.remaining() < 8 + 1 + 2 + 8 * 7 + 4 + 8 + 8 + 4 {
        return Err(m);
    }
    let generation = r.get_u64_le();
    let flags = r.get_u8();
    let status = StatusCode::from_u16(r.get_u16_le()).map_err(|_| Refused::Malformed)?;
    let stored_ms = r.get_u64_le();
    let initial_age = r.get_u64_le();
    let ttl = r.get_u64_le();
    let grace = r.get_u64_le();
    let keep = r.get_u64_le();
    let stale_if_error = r.get_u64_le();
    let body_len = r.get_u64_le();
    let chunks = r.get_u32_le();
    let body_hash = r.get_u64_le();
    let variant = r.get_u64_le();
    let host_len = r.get_u32_le() as usize;
    let text = get_bytes(&mut r)?;
    if variant != key.variant || host_len != key.host_len() || text != key.text().as_bytes() {
        return Err(Refused::OtherKey);
    }
    if r.remaining() < 4 {
        return Err(m);
    }
    let count = r.get_u32_le();
    let block = get_bytes(&mut r)?;
    check_block(&block, count)?;
    if r.remaining() < 2 {
        return Err(m);
    }
    let mut vary = Vec::new();
    for _ in 0..r.get_u16_le() {
        let name = HeaderName::from_bytes(&get_bytes(&mut r)?).map_err(|_| Refused::Malformed)?;
        if r.remaining() < 1 {
            return Err(m);
        }
        let value = match r.get_u8() {
            0 => None,
            _ => Some(
                HeaderValue::from_maybe_shared(get_bytes(&mut r)?)
                    .map_err(|_| Refused::Malformed)?,
            ),
        };
        vary.push((name, value));
    }
    let prefetch = if flags & 2 != 0 {
        if r.remaining() < 2 {
            return Err(m);
        }
        crate::cache::Prefetch::from_bits(r.get_u16_le())
    } else {
        crate::cache::Prefetch::CONFIGURED
    };
    let inline = if chunks == 0 {
        if r.remaining() as u64 != body_len {
            return Err(m);
        }
        r
    } else {
        Bytes::new()
    };
    let now = Instant::now();
    let age = wall_ms().saturating_sub(stored_ms);
    let stored_at = now.checked_sub(Duration::from_millis(age)).unwrap_or(now);
    let object = Object {
        status,
        headers: StoredFields::from_block(block, count),
        body: Body::Memory(MemoryChunks::new()),
        body_len,
        vary: crate::cache::boxed_vary(vary),
        initial_age: Span::new(Duration::from_millis(initial_age)),
        ttl: Span::new(Duration::from_millis(ttl)),
        stale_ok: flags & 1 != 0,
        grace: Span::new(Duration::from_millis(grace)),
        stale_if_error: MaybeSpan::new(
            (stale_if_error != u64::MAX).then(|| Duration::from_millis(stale_if_error)),
        ),
        keep: Span::new(Duration::from_millis(keep)),
        prepared: Default::default(),
        hits: Default::default(),
        stored_at,
        state: TierState::default(),
        prefetch,
    };
    Ok(SharedMeta {
        generation,
        chunks,
        stored_ms,
        body_len,
        body_hash,
        object,
        inline,
    })
}

/// Field blocks are `name:value\n` lines with valid names and values: a record from Redis is
/// checked before it becomes stored fields (whatever wrote it).
fn check_block(block: &[u8], count: u32) -> Result<(), Refused> {
    if block.is_empty() {
        return if count == 0 {
            Ok(())
        } else {
            Err(Refused::Malformed)
        };
    }
    let lines = block.strip_suffix(b"\n").ok_or(Refused::Malformed)?;
    let mut n = 0;
    for line in lines.split(|b| *b == b'\n') {
        let colon = memchr::memchr(b':', line).ok_or(Refused::Malformed)?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if HeaderName::from_bytes(name).map_or(true, |h| h.as_str().as_bytes() != name)
            || HeaderValue::from_bytes(value).is_err()
        {
            return Err(Refused::Malformed);
        }
        n += 1;
    }
    if n != count {
        return Err(Refused::Malformed);
    }
    Ok(())
}

fn get_bytes(r: &mut Bytes) -> Result<Bytes, Refused> {
    if r.remaining() < 4 {
        return Err(Refused::Malformed);
    }
    let len = r.get_u32_le() as usize;
    if r.remaining() < len {
        return Err(Refused::Malformed);
    }
    Ok(r.split_to(len))
}

impl SharedMeta {
    /// A soft purge of the URL at `mark_ms` (wall clock): a copy stored until then is stale
    /// from that moment on — its freshness cut to its age then, grace and keep counted from
    /// there, as the local tiers' soft purge does at the moment it runs. A copy stored after
    /// it (a refresh) is untouched.
    pub fn soft_purged(&mut self, mark_ms: u64) {
        if self.stored_ms > mark_ms {
            return;
        }
        let age_then =
            self.object.initial_age.get() + Duration::from_millis(mark_ms - self.stored_ms);
        self.object.ttl = Span::new(self.object.ttl.get().min(age_then));
    }

    /// When the copy was stored (wall-clock ms, the storing node's clock).
    pub fn stored_ms(&self) -> u64 {
        self.stored_ms
    }

    /// The object without its body (the admin API reports what is stored, reads no chunk).
    pub fn head_only(self) -> Object {
        self.object
    }

    /// The object, with the body read from its chunks (`chunks`: what the chunk keys held, in
    /// order; ignored for an inline body). Any chunk missing, or a body that is not the one
    /// recorded, refuses the whole object: a miss, never a short or mixed body.
    pub fn into_object(mut self, chunks: Vec<Option<Bytes>>) -> Result<Object, Refused> {
        let pieces: Vec<Bytes> = if self.chunks == 0 {
            vec![self.inline]
        } else {
            if chunks.len() != self.chunks as usize {
                return Err(Refused::Body);
            }
            chunks
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or(Refused::Body)?
        };
        let total: usize = pieces.iter().map(Bytes::len).sum();
        if total as u64 != self.body_len {
            return Err(Refused::Body);
        }
        let body = crate::cache::body::store(&pieces, total);
        let hash = {
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            body.iter().for_each(|c| h.update(c));
            h.digest()
        };
        if hash != self.body_hash {
            return Err(Refused::Body);
        }
        self.object.body = Body::Memory(body);
        Ok(self.object)
    }
}

#[cfg(test)]
mod tests;
