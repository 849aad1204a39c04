//! What the writer appends to the open region: an object's entry (header, key, metadata,
//! body, with its checksums) or a tombstone, and the summary record each one gets.

use xxhash_rust::xxh3::Xxh3;

use super::super::engine::now_ms;
use super::super::format::{
    self, BLOCK, BODY_CHUNK, EntryHeader, EntryInfo, FLAG_KEY_RECORD, KIND_OBJECT, KIND_TOMBSTONE,
    KeyRecord, Meta,
};
use super::{WRITE_BATCH, Writer};
use crate::cache::{Body, CacheKey, Object};

/// An object's entry, encoded but for its region incarnation (known once there is room).
struct Encoded {
    key: Vec<u8>,
    meta: Vec<u8>,
    header: EntryHeader,
    /// The summary's key record (variant names, surrogate keys), entry index 0; may be empty.
    key_record: Vec<u8>,
}

/// Encodes `object` stored under `key` (hash `hash`) as an entry: key, metadata with its
/// chunk checksums, and the header (incarnation 0 until appended).
fn encode(key: &CacheKey, hash: u64, object: &Object, chunks: &[bytes::Bytes]) -> Encoded {
    let key_bytes = format::encode_key(key);
    let stored_ms = now_ms().saturating_sub(object.stored_at.elapsed().as_millis() as u64);
    let meta = Meta {
        status: object.status,
        headers: object.headers.to_map(),
        vary: object.vary().to_vec(),
        initial_age_ms: object.initial_age.millis(),
        ttl_ms: object.ttl.millis(),
        stored_ms,
        stale_ok: object.stale_ok,
        prefetch: object.prefetch,
        grace_ms: object.grace.millis(),
        keep_ms: object.keep.millis(),
        stale_if_error_ms: object.stale_if_error.get().map(|d| d.as_millis() as u64),
        chunk_hashes: chunk_hashes(chunks, object.body_len),
    };
    let meta_bytes = meta.encode();
    // Usable (fresh, in grace, or stale but kept for revalidation / stale-if-error) until
    // then; the index forgets it after that.
    let extra = (object.grace.get() + object.keep.get())
        .max(object.stale_if_error.get().unwrap_or_default());
    let lifetime = (object.ttl.get() + extra).saturating_sub(object.initial_age.get());
    // A variant's key and Vary names, and a tagged object's surrogate keys, go into the
    // summary too, so the URL's variant list and the tag index are rebuilt at recovery
    // without reading the entry. Encoded now with entry index 0, patched when appended.
    let names: Vec<http::HeaderName> = if key.variant != 0 {
        object.vary().iter().map(|(n, _)| n.clone()).collect()
    } else {
        Vec::new()
    };
    let tags = crate::cache::tags::tags_of(&object.headers);
    let mut key_record = Vec::new();
    let flags = if KeyRecord::encode_into(0, &key_bytes, &names, &tags, &mut key_record) {
        FLAG_KEY_RECORD
    } else {
        0
    };
    let header = EntryHeader {
        kind: KIND_OBJECT,
        flags,
        seq: 0,
        hash,
        key_len: key_bytes.len() as u32,
        meta_len: meta_bytes.len() as u32,
        body_len: object.body_len,
        expires_ms: stored_ms.saturating_add(lifetime.as_millis() as u64),
        meta_hash: meta_checksum(&key_bytes, &meta_bytes),
    };
    Encoded {
        key: key_bytes,
        meta: meta_bytes,
        header,
        key_record,
    }
}

impl Writer {
    /// Appends one object.
    pub(super) fn put(&mut self, key: &CacheKey, object: &Object) {
        let Body::Memory(chunks) = &object.body else {
            // Only objects with their body in memory are written (disk-backed ones are there).
            return;
        };
        // Every object written after a ban's position has been checked against it here: that
        // is what lets a ban cover only the entries before its position.
        if self.bans.is_banned(key, object) {
            self.engine.counters.ban_objects.inc();
            return;
        }
        let hash = format::key_hash(key);
        let mut e = encode(key, hash, object, chunks);
        let total = e.header.total_len();
        if total > self.engine.max_entry() {
            self.engine.counters.disk_reject.inc();
            return;
        }
        let Some(seq) = self.make_room(total, e.key_record.len() as u64) else {
            self.engine.counters.disk_reject.inc();
            return;
        };
        let header = EntryHeader { seq, ..e.header };
        let Some(start) = self.cursor() else {
            return;
        };
        self.buf.extend_from_slice(&header.encode());
        self.buf.extend_from_slice(&e.key);
        self.buf.extend_from_slice(&e.meta);
        if !self.append_body(chunks) {
            return;
        }
        let end = start + total;
        if let Some(cursor) = self.cursor() {
            self.buf.resize(self.buf.len() + (end - cursor) as usize, 0);
        }
        let info = EntryInfo {
            hash,
            offset: start as u32,
            len: total as u32,
            expires_ms: header.expires_ms,
            kind: KIND_OBJECT,
        };
        if !e.key_record.is_empty()
            && let Some(a) = &self.active
        {
            let book = &mut self.books[a.region as usize];
            e.key_record[..4].copy_from_slice(&(book.entries.len() as u32).to_le_bytes());
            book.vary.extend_from_slice(&e.key_record);
        }
        self.record(info);
        self.pending.push((info, end));
        self.engine.counters.disk_admit.inc();
        self.engine
            .counters
            .disk_bytes_admitted
            .add(e.key.len() as u64 + e.meta.len() as u64 + object.body_len);
        if self.buf.len() >= WRITE_BATCH {
            self.write_full_blocks();
        }
    }

    /// Appends a body to the write buffer, writing whole blocks out each time
    /// [`WRITE_BATCH`] bytes are buffered. False if a write failed (the entry is lost).
    fn append_body(&mut self, chunks: &[bytes::Bytes]) -> bool {
        for chunk in chunks {
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                let room = WRITE_BATCH
                    .saturating_sub(self.buf.len())
                    .max(BLOCK as usize);
                let take = room.min(rest.len());
                self.buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if self.buf.len() >= WRITE_BATCH && !self.write_full_blocks() {
                    return false;
                }
            }
        }
        true
    }

    /// Appends a tombstone so a removal survives a restart.
    pub(super) fn tombstone(&mut self, key: &CacheKey) {
        let key_bytes = format::encode_key(key);
        let hash = format::key_hash(key);
        // A queued copy of the object written before this point must not be indexed after it.
        self.pending
            .retain(|(e, _)| !(e.hash == hash && e.kind == KIND_OBJECT));
        self.engine.index_remove(hash);
        let header = EntryHeader {
            kind: KIND_TOMBSTONE,
            flags: 0,
            seq: 0,
            hash,
            key_len: key_bytes.len() as u32,
            meta_len: 0,
            body_len: 0,
            expires_ms: 0,
            meta_hash: meta_checksum(&key_bytes, &[]),
        };
        let total = header.total_len();
        let Some(seq) = self.make_room(total, 0) else {
            return;
        };
        let Some(start) = self.cursor() else {
            return;
        };
        self.buf
            .extend_from_slice(&EntryHeader { seq, ..header }.encode());
        self.buf.extend_from_slice(&key_bytes);
        self.buf.resize(
            self.buf.len() + (total as usize - format::ENTRY_HEADER - key_bytes.len()),
            0,
        );
        self.record(EntryInfo {
            hash,
            offset: start as u32,
            len: total as u32,
            expires_ms: 0,
            kind: KIND_TOMBSTONE,
        });
    }

    pub(super) fn record(&mut self, info: EntryInfo) {
        if let Some(a) = &self.active {
            let book = &mut self.books[a.region as usize];
            if info.kind == KIND_TOMBSTONE {
                book.tombstones += 1;
            } else {
                book.hashes.push(info.hash);
                book.max_expires_ms = book.max_expires_ms.max(info.expires_ms);
            }
            book.entries.push(info);
        }
    }
}

fn meta_checksum(key: &[u8], meta: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(key);
    h.update(meta);
    h.digest()
}

/// Checksums of each [`BODY_CHUNK`] of a body held as arbitrary pieces.
pub(super) fn chunk_hashes(chunks: &[bytes::Bytes], len: u64) -> Vec<u64> {
    let mut out = Vec::with_capacity(format::chunk_count(len));
    let mut h = Xxh3::new();
    let mut filled = 0u64;
    for chunk in chunks {
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let take = ((BODY_CHUNK - filled) as usize).min(rest.len());
            h.update(&rest[..take]);
            filled += take as u64;
            rest = &rest[take..];
            if filled == BODY_CHUNK {
                out.push(h.digest());
                h.reset();
                filled = 0;
            }
        }
    }
    if filled > 0 || out.is_empty() {
        out.push(h.digest());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_hashes_do_not_depend_on_framing() {
        let data: Vec<u8> = (0..(BODY_CHUNK as usize * 2 + 10))
            .map(|i| i as u8)
            .collect();
        let one = chunk_hashes(&[bytes::Bytes::from(data.clone())], data.len() as u64);
        let many: Vec<bytes::Bytes> = data
            .chunks(1000)
            .map(bytes::Bytes::copy_from_slice)
            .collect();
        assert_eq!(one, chunk_hashes(&many, data.len() as u64));
        assert_eq!(one.len(), 3);
        assert_eq!(one[2], format::checksum(&data[2 * BODY_CHUNK as usize..]));
        assert_eq!(chunk_hashes(&[], 0), vec![format::checksum(b"")]);
    }
}
