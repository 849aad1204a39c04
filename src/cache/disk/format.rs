//! The disk tier's on-disk layout: superblock, region headers and trailers, entries, summaries.
//! Pure encoding and decoding; every decoder is bounds-checked and returns `None` on anything
//! malformed, so a truncated or corrupted file can never panic the process.
//!
//! ```text
//!  file:    [superblock 4 KiB][ban list copy A 1 MiB][copy B 1 MiB][region 0] ... [region N-1]
//!  region:  [header 4 KiB][entry][entry][pad]...[entry][pad] ... [summary][trailer 4 KiB]
//!  entry:   [64-byte header][key][meta][body]  padded to 8 bytes
//!  summary: [32-byte record per entry][key record per variant or tagged entry: key, Vary
//!           names, surrogate keys]
//! ```
//!
//! Every write is a whole number of 4 KiB blocks at a 4 KiB-aligned offset. A region is written
//! front to back; when it is full the writer appends a summary (one 32-byte record per entry,
//! then the key and `Vary` field names of each variant) and the trailer pointing at it, so
//! recovery reads two small pieces per region and never a body. The ban list is rewritten
//! whole (both copies, each synced) when a ban is added or retired.

use xxhash_rust::xxh3::xxh3_64;

use crate::cache::CacheKey;

mod meta;
mod records;
#[cfg(test)]
mod tests;

pub use meta::Meta;
pub use records::{BanRecord, KeyRecord, bans_len, decode_bans, encode_bans, stream_pos};

/// Alignment and size of headers, trailers and every write.
pub const BLOCK: u64 = 4096;
/// Size of an entry header.
pub const ENTRY_HEADER: usize = 64;
/// A body is checksummed in pieces of this size, so a large object can be verified and streamed
/// piece by piece.
pub const BODY_CHUNK: u64 = 256 * 1024;
/// One summary record.
pub const SUMMARY_RECORD: usize = 32;

/// Size of each of the two copies of the persisted ban list: the bound on its encoded size.
pub const BAN_SLOT: u64 = 1 << 20;
/// File offset of region 0 (after the superblock and the two ban list copies).
pub const DATA_START: u64 = BLOCK + 2 * BAN_SLOT;

const SUPER_MAGIC: &[u8; 8] = b"SHLCDSK1";
/// Version 3: ban list copies, key records in summaries, entry flags, `summary_len` in
/// trailers. A file of
/// another version is started empty (`disk_reset`), never read with this layout.
pub const FORMAT_VERSION: u32 = 3;
const REGION_MAGIC: u32 = 0x5247_4e31; // "RGN1"
const TRAILER_MAGIC: u32 = 0x5452_4c31; // "TRL1"
const ENTRY_MAGIC: u32 = 0x454e_5431; // "ENT1"
const PAD_MAGIC: u32 = 0x5041_4431; // "PAD1"

/// Entry kinds.
pub const KIND_OBJECT: u8 = 1;
pub const KIND_TOMBSTONE: u8 = 2;
/// Entry flag: the summary has a [`KeyRecord`] for this entry (a region walked by its entry
/// headers reads the key and metadata of these entries only).
pub const FLAG_KEY_RECORD: u8 = 1;

/// Rounds `n` up to a multiple of `to` (a power of two).
pub fn align_up(n: u64, to: u64) -> u64 {
    (n + to - 1) & !(to - 1)
}

/// Stable 64-bit hash of a cache key (the index key; the full key is stored and compared).
pub fn key_hash(key: &CacheKey) -> u64 {
    xxh3_64(&encode_key(key))
}

/// Checksum of a byte range.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// A little-endian cursor that never reads out of bounds.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        self.bytes(2)?.try_into().ok().map(u16::from_le_bytes)
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.bytes(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.bytes(8)?.try_into().ok().map(u64::from_le_bytes)
    }
    pub fn rest(&mut self) -> &'a [u8] {
        let out = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        out
    }
}

/// The file's first block: identifies the layout so a changed `size` or `region_size` starts
/// an empty cache instead of misreading the old one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub region_size: u64,
    pub regions: u32,
    /// Random per formatting; every region header carries it.
    pub instance: u64,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOCK as usize);
        b.extend_from_slice(SUPER_MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&self.regions.to_le_bytes());
        b.extend_from_slice(&self.region_size.to_le_bytes());
        b.extend_from_slice(&self.instance.to_le_bytes());
        let h = checksum(&b);
        b.extend_from_slice(&h.to_le_bytes());
        b.resize(BLOCK as usize, 0);
        b
    }

    /// The format version of a superblock, if `buf` starts with Shellac's magic (whatever the
    /// version: used to say why a file is not read).
    pub fn version_of(buf: &[u8]) -> Option<u32> {
        let mut r = Reader::new(buf);
        (r.bytes(8)? == SUPER_MAGIC).then_some(())?;
        r.u32()
    }

    pub fn decode(buf: &[u8]) -> Option<Superblock> {
        let mut r = Reader::new(buf);
        if r.bytes(8)? != SUPER_MAGIC || r.u32()? != FORMAT_VERSION {
            return None;
        }
        let regions = r.u32()?;
        let region_size = r.u64()?;
        let instance = r.u64()?;
        let h = r.u64()?;
        (checksum(buf.get(..32)?) == h).then_some(Superblock {
            region_size,
            regions,
            instance,
        })
    }
}

/// First block of a region: which incarnation (`seq`) of the region this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionHeader {
    pub index: u32,
    pub seq: u64,
    pub instance: u64,
}

impl RegionHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOCK as usize);
        b.extend_from_slice(&REGION_MAGIC.to_le_bytes());
        b.extend_from_slice(&self.index.to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.instance.to_le_bytes());
        let h = checksum(&b);
        b.extend_from_slice(&h.to_le_bytes());
        b.resize(BLOCK as usize, 0);
        b
    }

    pub fn decode(buf: &[u8]) -> Option<RegionHeader> {
        let mut r = Reader::new(buf);
        if r.u32()? != REGION_MAGIC {
            return None;
        }
        let index = r.u32()?;
        let seq = r.u64()?;
        let instance = r.u64()?;
        let h = r.u64()?;
        (checksum(buf.get(..24)?) == h).then_some(RegionHeader {
            index,
            seq,
            instance,
        })
    }
}

/// Last block of a sealed region: where its summary is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    pub index: u32,
    pub seq: u64,
    pub instance: u64,
    /// Offset of the summary within the region.
    pub summary_offset: u32,
    /// Number of 32-byte summary records.
    pub entries: u32,
    /// Bytes of the summary: the records, then the key records.
    pub summary_len: u32,
    pub summary_hash: u64,
}

impl Trailer {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOCK as usize);
        b.extend_from_slice(&TRAILER_MAGIC.to_le_bytes());
        b.extend_from_slice(&self.index.to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.instance.to_le_bytes());
        b.extend_from_slice(&self.summary_offset.to_le_bytes());
        b.extend_from_slice(&self.entries.to_le_bytes());
        b.extend_from_slice(&self.summary_len.to_le_bytes());
        b.extend_from_slice(&self.summary_hash.to_le_bytes());
        let h = checksum(&b);
        b.extend_from_slice(&h.to_le_bytes());
        b.resize(BLOCK as usize, 0);
        b
    }

    pub fn decode(buf: &[u8]) -> Option<Trailer> {
        let mut r = Reader::new(buf);
        if r.u32()? != TRAILER_MAGIC {
            return None;
        }
        let t = Trailer {
            index: r.u32()?,
            seq: r.u64()?,
            instance: r.u64()?,
            summary_offset: r.u32()?,
            entries: r.u32()?,
            summary_len: r.u32()?,
            summary_hash: r.u64()?,
        };
        let h = r.u64()?;
        (checksum(buf.get(..44)?) == h).then_some(t)
    }
}

/// What the index needs to know of one entry; also one summary record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    pub hash: u64,
    /// Offset of the entry within its region.
    pub offset: u32,
    /// Entry length on disk (header, key, meta, body, padding to 8).
    pub len: u32,
    /// Wall-clock expiry, milliseconds since the Unix epoch.
    pub expires_ms: u64,
    pub kind: u8,
}

impl EntryInfo {
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.expires_ms.to_le_bytes());
        out.push(self.kind);
        out.extend_from_slice(&[0u8; 7]);
    }

    /// Decodes a whole summary; `None` if any record is malformed.
    pub fn decode_summary(buf: &[u8]) -> Option<Vec<EntryInfo>> {
        let mut r = Reader::new(buf);
        let mut out = Vec::with_capacity(buf.len() / SUMMARY_RECORD);
        while r.pos < buf.len() {
            let e = EntryInfo {
                hash: r.u64()?,
                offset: r.u32()?,
                len: r.u32()?,
                expires_ms: r.u64()?,
                kind: r.u8()?,
            };
            r.bytes(7)?;
            if !matches!(e.kind, KIND_OBJECT | KIND_TOMBSTONE) {
                return None;
            }
            out.push(e);
        }
        Some(out)
    }
}

/// The fixed-size header in front of every entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub kind: u8,
    /// [`FLAG_KEY_RECORD`] or 0.
    pub flags: u8,
    /// Region incarnation the entry was written in; entries left over from an earlier
    /// incarnation of the region never match.
    pub seq: u64,
    pub hash: u64,
    pub key_len: u32,
    pub meta_len: u32,
    pub body_len: u64,
    pub expires_ms: u64,
    /// Checksum of key and meta bytes.
    pub meta_hash: u64,
}

impl EntryHeader {
    /// Entry length on disk, padded to 8 bytes.
    pub fn total_len(&self) -> u64 {
        align_up(
            ENTRY_HEADER as u64 + self.key_len as u64 + self.meta_len as u64 + self.body_len,
            8,
        )
    }

    /// Offset of the body from the start of the entry.
    pub fn body_offset(&self) -> u64 {
        ENTRY_HEADER as u64 + self.key_len as u64 + self.meta_len as u64
    }

    pub fn encode(&self) -> [u8; ENTRY_HEADER] {
        let mut b = [0u8; ENTRY_HEADER];
        b[0..4].copy_from_slice(&ENTRY_MAGIC.to_le_bytes());
        b[4] = self.kind;
        b[5] = self.flags;
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.hash.to_le_bytes());
        b[24..28].copy_from_slice(&self.key_len.to_le_bytes());
        b[28..32].copy_from_slice(&self.meta_len.to_le_bytes());
        b[32..40].copy_from_slice(&self.body_len.to_le_bytes());
        b[40..48].copy_from_slice(&self.expires_ms.to_le_bytes());
        b[48..56].copy_from_slice(&self.meta_hash.to_le_bytes());
        let h = checksum(&b[..56]);
        b[56..64].copy_from_slice(&h.to_le_bytes());
        b
    }

    pub fn decode(buf: &[u8]) -> Option<EntryHeader> {
        let head = buf.get(..ENTRY_HEADER)?;
        let mut r = Reader::new(head);
        if r.u32()? != ENTRY_MAGIC {
            return None;
        }
        let kind = r.u8()?;
        let flags = r.u8()?;
        r.bytes(2)?;
        let h = EntryHeader {
            kind,
            flags,
            seq: r.u64()?,
            hash: r.u64()?,
            key_len: r.u32()?,
            meta_len: r.u32()?,
            body_len: r.u64()?,
            expires_ms: r.u64()?,
            meta_hash: r.u64()?,
        };
        let sum = r.u64()?;
        (checksum(&head[..56]) == sum && matches!(kind, KIND_OBJECT | KIND_TOMBSTONE)).then_some(h)
    }
}

/// What follows the entry header at a position in a region being scanned.
pub enum Record {
    Entry(EntryHeader),
    /// Padding up to the next block; skip this many bytes.
    Pad(u64),
    /// Not a valid record: the end of what was written.
    End,
}

/// Classifies the record starting at `buf`.
pub fn record_at(buf: &[u8]) -> Record {
    let mut r = Reader::new(buf);
    match r.u32() {
        Some(PAD_MAGIC) => match r.u32() {
            Some(len) if len >= 8 && len % 8 == 0 => Record::Pad(len as u64),
            _ => Record::End,
        },
        Some(ENTRY_MAGIC) => match EntryHeader::decode(buf) {
            Some(h) => Record::Entry(h),
            None => Record::End,
        },
        _ => Record::End,
    }
}

/// Appends padding from `len` to the next multiple of [`BLOCK`] (nothing if aligned).
pub fn pad_to_block(buf: &mut Vec<u8>, start_offset: u64) {
    let end = start_offset + buf.len() as u64;
    let pad = align_up(end, BLOCK) - end;
    if pad == 0 {
        return;
    }
    buf.extend_from_slice(&PAD_MAGIC.to_le_bytes());
    buf.extend_from_slice(&(pad as u32).to_le_bytes());
    buf.resize(buf.len() + pad as usize - 8, 0);
}

/// Key bytes: variant, host length, host, path and query (unambiguous, unlike a
/// concatenation).
pub fn encode_key(key: &CacheKey) -> Vec<u8> {
    let host = key.host().as_bytes();
    let host_len = host.len().min(u16::MAX as usize);
    let mut b = Vec::with_capacity(10 + host_len + key.path_and_query().len());
    b.extend_from_slice(&key.variant.to_le_bytes());
    b.extend_from_slice(&(host_len as u16).to_le_bytes());
    b.extend_from_slice(&host[..host_len]);
    b.extend_from_slice(key.path_and_query().as_bytes());
    b
}

/// Whether `bytes` encode `key`.
pub fn key_matches(bytes: &[u8], key: &CacheKey) -> bool {
    encode_key(key) == bytes
}

/// The key [`encode_key`] encoded; `None` if malformed.
pub fn decode_key(bytes: &[u8]) -> Option<CacheKey> {
    let mut r = Reader::new(bytes);
    let variant = r.u64()?;
    let host_len = r.u16()? as usize;
    let host = std::str::from_utf8(r.bytes(host_len)?).ok()?;
    let path = std::str::from_utf8(r.rest()).ok()?;
    Some(CacheKey::from_parts(host, path, variant))
}

/// The variant of a key from its encoded bytes (0 for a URL without `Vary`).
pub fn key_variant(bytes: &[u8]) -> Option<u64> {
    Reader::new(bytes).u64()
}

pub(super) fn put_str16(b: &mut Vec<u8>, s: &[u8]) {
    let n = s.len().min(u16::MAX as usize);
    b.extend_from_slice(&(n as u16).to_le_bytes());
    b.extend_from_slice(&s[..n]);
}

pub(super) fn put_str32(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s);
}

pub(super) fn str16<'a>(r: &mut Reader<'a>) -> Option<&'a [u8]> {
    let n = r.u16()? as usize;
    r.bytes(n)
}

pub(super) fn str32<'a>(r: &mut Reader<'a>) -> Option<&'a [u8]> {
    let n = r.u32()? as usize;
    r.bytes(n)
}

/// Number of [`BODY_CHUNK`] pieces in a body of `len` bytes (at least one).
pub fn chunk_count(len: u64) -> usize {
    len.div_ceil(BODY_CHUNK).max(1) as usize
}
