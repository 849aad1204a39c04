//! Reads from the disk tier: an entry checked against its checksums and turned back into an
//! object (small bodies read whole, large ones left on disk), and the chunks of a body left
//! there ([`ChunkSource`]).

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::super::format::{self, ENTRY_HEADER, EntryHeader, KIND_OBJECT, Meta};
use super::{Engine, INLINE_MAX, Loc, now_ms};
use crate::cache::disk_body::{ChunkSource, DiskBody, DiskLocation, ReadError};
use crate::cache::{Body, CacheKey, Object, boxed_vary};

impl Engine {
    pub(super) fn read_exact(
        &self,
        loc_region: u32,
        seq: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, ReadError> {
        if self.region_seq[loc_region as usize].load(Ordering::SeqCst) != seq {
            return Err(ReadError::Gone);
        }
        let mut buf = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(ReadError::Io)?;
        if self.region_seq[loc_region as usize].load(Ordering::SeqCst) != seq {
            return Err(ReadError::Gone);
        }
        Ok(buf)
    }

    /// Reads the object at `loc` (blocking; run it off the async workers). `Ok(None)` when the
    /// entry holds another key with the same hash. Small entries come back with their body in
    /// memory; large ones with a [`DiskBody`] whose chunks are read on demand — after every chunk
    /// was verified once.
    pub fn read_object(
        self: &Arc<Self>,
        key: &CacheKey,
        hash: u64,
        loc: Loc,
    ) -> Result<Option<Object>, ReadError> {
        let entry_off = self.region_base(loc.region) + loc.offset as u64;
        let first = if loc.len as u64 <= INLINE_MAX {
            loc.len as u64
        } else {
            (64 * 1024).min(loc.len as u64)
        };
        let mut buf = self.read_exact(loc.region, loc.seq, entry_off, first)?;
        let h = EntryHeader::decode(&buf).ok_or(ReadError::Corrupt("entry header"))?;
        if h.seq != loc.seq
            || h.kind != KIND_OBJECT
            || h.hash != hash
            || h.total_len() != loc.len as u64
        {
            return Err(ReadError::Corrupt("entry header"));
        }
        let body_off = h.body_offset();
        if (buf.len() as u64) < body_off {
            buf = self.read_exact(loc.region, loc.seq, entry_off, body_off)?;
        }
        let key_bytes = &buf[ENTRY_HEADER..ENTRY_HEADER + h.key_len as usize];
        let meta_bytes = &buf[ENTRY_HEADER + h.key_len as usize..body_off as usize];
        let mut both = Vec::with_capacity(key_bytes.len() + meta_bytes.len());
        both.extend_from_slice(key_bytes);
        both.extend_from_slice(meta_bytes);
        if format::checksum(&both) != h.meta_hash {
            return Err(ReadError::Corrupt("key or metadata checksum"));
        }
        if !format::key_matches(key_bytes, key) {
            return Ok(None);
        }
        let meta = Meta::decode(meta_bytes).ok_or(ReadError::Corrupt("metadata"))?;
        if meta.chunk_hashes.len() != format::chunk_count(h.body_len) {
            return Err(ReadError::Corrupt("metadata"));
        }
        let body = if loc.len as u64 <= INLINE_MAX {
            let all = Bytes::from(buf);
            let body = all.slice(body_off as usize..(body_off + h.body_len) as usize);
            for (i, want) in meta.chunk_hashes.iter().enumerate() {
                let start = i * format::BODY_CHUNK as usize;
                let end = (start + format::BODY_CHUNK as usize).min(body.len());
                if format::checksum(&body[start.min(end)..end]) != *want {
                    return Err(ReadError::Corrupt("body checksum"));
                }
            }
            // Copied out of the entry's read buffer into an allocation of its own size, as the
            // fill stores bodies (`cache::body`): a promoted object then costs the memory tier
            // what it is charged, not the whole entry's buffer.
            Body::Memory(crate::cache::body::store(&[body], h.body_len as usize))
        } else {
            let at = DiskLocation {
                hash,
                region: loc.region,
                seq: loc.seq,
                offset: entry_off + body_off,
                len: h.body_len,
                hashes: meta.chunk_hashes.clone().into(),
            };
            let disk = DiskBody::new(self.clone(), at);
            if !loc.verified {
                for i in 0..disk.chunks() {
                    disk.read_chunk(i)?;
                }
                self.mark_verified(hash, &loc);
            }
            Body::Disk(Box::new(disk))
        };
        Ok(Some(object_from(meta, body, h.body_len)))
    }

    /// Drops an entry found corrupt: counted, unindexed, fetched again by the caller.
    pub fn drop_corrupt(&self, hash: u64, loc: &Loc, what: &str) {
        self.counters.disk_checksum_fail.inc();
        tracing::warn!(
            region = loc.region,
            offset = loc.offset,
            what,
            "corrupt disk cache entry dropped"
        );
        self.index_remove_exact(hash, loc);
    }
}

/// Rebuilds an [`Object`] from stored metadata. The stored wall-clock time turns into age, so
/// the monotonic `stored_at` of the new process is simply now.
fn object_from(meta: Meta, body: Body, body_len: u64) -> Object {
    let elapsed = now_ms().saturating_sub(meta.stored_ms);
    Object {
        status: meta.status,
        headers: crate::cache::StoredFields::from_map(&meta.headers),
        body,
        body_len,
        vary: boxed_vary(meta.vary),
        initial_age: Duration::from_millis(meta.initial_age_ms.saturating_add(elapsed)).into(),
        ttl: Duration::from_millis(meta.ttl_ms).into(),
        stale_ok: meta.stale_ok,
        grace: Duration::from_millis(meta.grace_ms).into(),
        keep: Duration::from_millis(meta.keep_ms).into(),
        stale_if_error: meta.stale_if_error_ms.map(Duration::from_millis).into(),
        stored_at: Instant::now(),
        state: crate::cache::TierState::read_from_disk(),
        prepared: Default::default(),
        hits: Default::default(),
        prefetch: meta.prefetch,
    }
}

/// The engine reads the bodies it left on disk ([`DiskBody`]).
impl ChunkSource for Engine {
    fn is_current(&self, at: &DiskLocation) -> bool {
        self.region_seq[at.region as usize].load(Ordering::SeqCst) == at.seq
    }

    fn read_chunk(&self, at: &DiskLocation, i: usize) -> Result<Bytes, ReadError> {
        let want = *at.hashes.get(i).ok_or(ReadError::Corrupt("chunk index"))?;
        let start = i as u64 * format::BODY_CHUNK;
        let len = format::BODY_CHUNK.min(at.len.saturating_sub(start));
        let buf = self.read_exact(at.region, at.seq, at.offset + start, len)?;
        if format::checksum(&buf) != want {
            return Err(ReadError::Corrupt("body checksum"));
        }
        Ok(Bytes::from(buf))
    }

    fn report(&self, at: &DiskLocation, e: &ReadError) {
        match e {
            ReadError::Corrupt(what) => {
                self.counters.disk_checksum_fail.inc();
                tracing::warn!(
                    region = at.region,
                    what,
                    "corrupt disk cache entry dropped while streaming"
                );
                self.index_remove_in(at.hash, at.region, at.seq);
            }
            ReadError::Io(_) => self.counters.disk_io_error.inc(),
            ReadError::Gone => {}
        }
    }
}
