//! Records that rebuild indexes other than the object index: the key records at the end of a
//! region's summary (a variant's `Vary` names, an object's surrogate keys) and the persisted
//! ban list (two copies after the superblock). Pure and bounds-checked, like the rest of
//! `format`.

use http::HeaderName;

use super::{BAN_SLOT, BLOCK, Reader, align_up, checksum, put_str16, put_str32, str16, str32};

const BAN_MAGIC: &[u8; 8] = b"SHLCBANS";

/// What the summary keeps of an entry that other indexes refer to, so they can be rebuilt at
/// recovery without reading the entry: its key, the `Vary` field names of a variant (for the
/// URL's variant list) and its surrogate keys (for the tag index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    /// Index of the entry's record in the summary.
    pub entry: u32,
    /// The encoded key (with its variant).
    pub key: Vec<u8>,
    /// Empty for an entry that is not a variant.
    pub names: Vec<HeaderName>,
    pub tags: Vec<String>,
}

impl KeyRecord {
    /// Bytes `encode_into` appends.
    pub fn encoded_len(key: &[u8], names: &[HeaderName], tags: &[String]) -> usize {
        4 + 2
            + key.len()
            + 1
            + names.iter().map(|n| 2 + n.as_str().len()).sum::<usize>()
            + 2
            + tags.iter().map(|t| 2 + t.len()).sum::<usize>()
    }

    /// Appends the record; false (nothing appended) if there is nothing to record or something
    /// is too long to encode (the variant or tags are then simply not known after a restart:
    /// a miss, or a tag purge that does not reach this copy — see the caller).
    pub fn encode_into(
        entry: u32,
        key: &[u8],
        names: &[HeaderName],
        tags: &[String],
        out: &mut Vec<u8>,
    ) -> bool {
        if key.len() > u16::MAX as usize
            || (names.is_empty() && tags.is_empty())
            || names.len() > u8::MAX as usize
            || tags.len() > u16::MAX as usize
            || names.iter().any(|n| n.as_str().len() > u16::MAX as usize)
            || tags.iter().any(|t| t.len() > u16::MAX as usize)
        {
            return false;
        }
        out.extend_from_slice(&entry.to_le_bytes());
        put_str16(out, key);
        out.push(names.len() as u8);
        for n in names {
            put_str16(out, n.as_str().as_bytes());
        }
        out.extend_from_slice(&(tags.len() as u16).to_le_bytes());
        for t in tags {
            put_str16(out, t.as_bytes());
        }
        true
    }

    /// Decodes a whole section of key records; `None` if anything is malformed.
    pub fn decode_section(buf: &[u8]) -> Option<Vec<KeyRecord>> {
        let mut r = Reader::new(buf);
        let mut out = Vec::new();
        while r.pos < buf.len() {
            let entry = r.u32()?;
            let key = str16(&mut r)?.to_vec();
            let n = r.u8()? as usize;
            let mut names = Vec::with_capacity(n);
            for _ in 0..n {
                names.push(HeaderName::from_bytes(str16(&mut r)?).ok()?);
            }
            let n = r.u16()? as usize;
            let mut tags = Vec::with_capacity(n.min(buf.len() / 2));
            for _ in 0..n {
                tags.push(std::str::from_utf8(str16(&mut r)?).ok()?.to_string());
            }
            if names.is_empty() && tags.is_empty() {
                return None;
            }
            out.push(KeyRecord {
                entry,
                key,
                names,
                tags,
            });
        }
        Some(out)
    }
}

/// One persisted ban: its expression, when it was added (wall clock, for display) and its
/// position in the write stream (`region incarnation << 32 | offset`): it applies to the
/// entries written before that position. Positions, unlike clocks, cannot step backwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BanRecord {
    pub pos: u64,
    pub created_ms: u64,
    pub expr: String,
}

/// A position in the write stream: entry `offset` of region incarnation `seq`.
pub fn stream_pos(seq: u64, offset: u64) -> u64 {
    (seq.min(u32::MAX as u64 - 1) << 32) | offset.min(u32::MAX as u64)
}

/// Encodes one copy of the ban list, padded to a block; `None` if it does not fit [`BAN_SLOT`].
///
/// ```text
///  [magic 8][instance 8][generation 8][count 4][payload length 4]
///  [payload: per ban: pos 8, created_ms 8, expression length 4, expression][checksum 8]
/// ```
pub fn encode_bans(instance: u64, generation: u64, bans: &[BanRecord]) -> Option<Vec<u8>> {
    let mut payload = Vec::new();
    for b in bans {
        payload.extend_from_slice(&b.pos.to_le_bytes());
        payload.extend_from_slice(&b.created_ms.to_le_bytes());
        put_str32(&mut payload, b.expr.as_bytes());
    }
    let mut out = Vec::with_capacity(40 + payload.len());
    out.extend_from_slice(BAN_MAGIC);
    out.extend_from_slice(&instance.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&u32::try_from(bans.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&u32::try_from(payload.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&payload);
    let h = checksum(&out);
    out.extend_from_slice(&h.to_le_bytes());
    let padded = align_up(out.len() as u64, BLOCK);
    if padded > BAN_SLOT {
        return None;
    }
    out.resize(padded as usize, 0);
    Some(out)
}

/// Length of the ban list copy whose first block is `head` (to read the rest); `None` if the
/// head is not a ban list copy.
pub fn bans_len(head: &[u8]) -> Option<u64> {
    let mut r = Reader::new(head);
    (r.bytes(8)? == BAN_MAGIC).then_some(())?;
    r.bytes(20)?;
    let payload = r.u32()? as u64;
    let len = 32 + payload + 8;
    (len <= BAN_SLOT).then_some(len)
}

/// Decodes one copy of the ban list: `(generation, bans)`, or `None` if it is not a complete,
/// intact copy written for `instance`.
pub fn decode_bans(buf: &[u8], instance: u64) -> Option<(u64, Vec<BanRecord>)> {
    let len = bans_len(buf)? as usize;
    let body = buf.get(..len - 8)?;
    let sum = u64::from_le_bytes(buf.get(len - 8..len)?.try_into().ok()?);
    if checksum(body) != sum {
        return None;
    }
    let mut r = Reader::new(body);
    r.bytes(8)?;
    if r.u64()? != instance {
        return None;
    }
    let generation = r.u64()?;
    let count = r.u32()? as usize;
    r.u32()?;
    let mut bans = Vec::with_capacity(count.min(body.len() / 20));
    for _ in 0..count {
        let pos = r.u64()?;
        let created_ms = r.u64()?;
        let expr = std::str::from_utf8(str32(&mut r)?).ok()?.to_string();
        bans.push(BanRecord {
            pos,
            created_ms,
            expr,
        });
    }
    r.rest().is_empty().then_some((generation, bans))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_records_round_trip_and_reject_truncation() {
        let names = vec![
            HeaderName::from_static("accept-encoding"),
            HeaderName::from_static("cookie"),
        ];
        let tags = vec!["product-7".to_string(), "home".to_string()];
        let mut b = Vec::new();
        assert!(KeyRecord::encode_into(
            3,
            b"key-bytes",
            &names,
            &tags,
            &mut b
        ));
        let first = KeyRecord::encoded_len(b"key-bytes", &names, &tags);
        assert_eq!(b.len(), first);
        assert!(KeyRecord::encode_into(5, b"k2", &names[..1], &[], &mut b));
        assert!(KeyRecord::encode_into(6, b"k3", &[], &tags[..1], &mut b));
        let got = KeyRecord::decode_section(&b).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].entry, 3);
        assert_eq!(got[0].key, b"key-bytes");
        assert_eq!(got[0].tags, tags);
        assert_eq!(got[1].names, names[..1]);
        assert!(got[1].tags.is_empty());
        assert!(got[2].names.is_empty());
        let second = first + KeyRecord::encoded_len(b"k2", &names[..1], &[]);
        for cut in 1..b.len() {
            if cut != first && cut != second {
                assert_eq!(KeyRecord::decode_section(&b[..cut]), None, "cut at {cut}");
            }
        }
        assert!(
            !KeyRecord::encode_into(1, b"k", &[], &[], &mut b),
            "nothing to record"
        );
    }

    #[test]
    fn ban_lists_round_trip_and_detect_any_flipped_bit() {
        let bans = vec![
            BanRecord {
                pos: stream_pos(7, 8192),
                created_ms: 1_700_000_000_000,
                expr: "req.url ~ ^/news/".into(),
            },
            BanRecord {
                pos: stream_pos(9, 4096),
                created_ms: 1_700_000_000_001,
                expr: "obj.status == 404".into(),
            },
        ];
        let b = encode_bans(42, 5, &bans).unwrap();
        assert_eq!(b.len() as u64 % BLOCK, 0);
        assert_eq!(decode_bans(&b, 42), Some((5, bans.clone())));
        assert_eq!(decode_bans(&b, 43), None, "another formatting's list");
        let len = bans_len(&b).unwrap() as usize;
        for i in 0..len * 8 {
            let mut c = b.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert_eq!(decode_bans(&c, 42), None, "bit {i}");
        }
        assert!(stream_pos(7, 8192) < stream_pos(8, 0));
        let huge = vec![
            BanRecord {
                pos: 0,
                created_ms: 0,
                expr: "x".repeat(BAN_SLOT as usize),
            };
            1
        ];
        assert_eq!(encode_bans(1, 1, &huge), None, "bounded by the slot");
    }
}
