//! The response metadata stored with a body (status, fields, `Vary` selection, lifetimes,
//! the body's chunk checksums), encoded and decoded like the rest of `format`.

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::{Reader, put_str16, put_str32, str16, str32};
use crate::cache::VarySelection;

/// The response metadata stored with a body.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub vary: VarySelection,
    pub initial_age_ms: u64,
    pub ttl_ms: u64,
    /// Wall clock when the response head arrived, ms since the Unix epoch.
    pub stored_ms: u64,
    pub stale_ok: bool,
    /// `Object::prefetch` (VCL 2.0 `obj.prefetch`).
    pub prefetch: crate::cache::Prefetch,
    pub grace_ms: u64,
    pub keep_ms: u64,
    pub stale_if_error_ms: Option<u64>,
    /// Checksum of each [`BODY_CHUNK`](super::BODY_CHUNK) of the body.
    pub chunk_hashes: Vec<u64>,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(256 + self.chunk_hashes.len() * 8);
        b.extend_from_slice(&self.status.as_u16().to_le_bytes());
        b.extend_from_slice(&self.initial_age_ms.to_le_bytes());
        b.extend_from_slice(&self.ttl_ms.to_le_bytes());
        b.extend_from_slice(&self.stored_ms.to_le_bytes());
        // 0 / 1: stale_ok; 2 / 3: the same with a refresh-ahead window of its own, in the
        // two bytes that follow (a reader before it drops such a record: never misread).
        if self.prefetch == crate::cache::Prefetch::CONFIGURED {
            b.push(self.stale_ok as u8);
        } else {
            b.push(2 | self.stale_ok as u8);
            b.extend_from_slice(&self.prefetch.to_bits().to_le_bytes());
        }
        b.extend_from_slice(&self.grace_ms.to_le_bytes());
        b.extend_from_slice(&self.keep_ms.to_le_bytes());
        match self.stale_if_error_ms {
            Some(ms) => {
                b.push(1);
                b.extend_from_slice(&ms.to_le_bytes());
            }
            None => b.push(0),
        }
        b.extend_from_slice(&(self.headers.len() as u32).to_le_bytes());
        for (name, value) in &self.headers {
            put_str16(&mut b, name.as_str().as_bytes());
            put_str32(&mut b, value.as_bytes());
        }
        b.extend_from_slice(&(self.vary.len() as u32).to_le_bytes());
        for (name, value) in &self.vary {
            put_str16(&mut b, name.as_str().as_bytes());
            match value {
                Some(v) => {
                    b.push(1);
                    put_str32(&mut b, v.as_bytes());
                }
                None => b.push(0),
            }
        }
        b.extend_from_slice(&(self.chunk_hashes.len() as u32).to_le_bytes());
        for h in &self.chunk_hashes {
            b.extend_from_slice(&h.to_le_bytes());
        }
        b
    }

    pub fn decode(buf: &[u8]) -> Option<Meta> {
        let mut r = Reader::new(buf);
        let status = StatusCode::from_u16(r.u16()?).ok()?;
        let initial_age_ms = r.u64()?;
        let ttl_ms = r.u64()?;
        let stored_ms = r.u64()?;
        let (stale_ok, prefetch) = match r.u8()? {
            0 => (false, crate::cache::Prefetch::CONFIGURED),
            1 => (true, crate::cache::Prefetch::CONFIGURED),
            b @ (2 | 3) => (b == 3, crate::cache::Prefetch::from_bits(r.u16()?)),
            _ => return None,
        };
        let grace_ms = r.u64()?;
        let keep_ms = r.u64()?;
        let stale_if_error_ms = match r.u8()? {
            0 => None,
            1 => Some(r.u64()?),
            _ => return None,
        };
        let n = r.u32()? as usize;
        let mut headers = HeaderMap::with_capacity(n.min(256));
        for _ in 0..n {
            let name = HeaderName::from_bytes(str16(&mut r)?).ok()?;
            let value = HeaderValue::from_bytes(str32(&mut r)?).ok()?;
            headers.append(name, value);
        }
        let n = r.u32()? as usize;
        let mut vary = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let name = HeaderName::from_bytes(str16(&mut r)?).ok()?;
            let value = match r.u8()? {
                0 => None,
                1 => Some(HeaderValue::from_bytes(str32(&mut r)?).ok()?),
                _ => return None,
            };
            vary.push((name, value));
        }
        let n = r.u32()? as usize;
        if n > buf.len() / 8 {
            return None;
        }
        let mut chunk_hashes = Vec::with_capacity(n);
        for _ in 0..n {
            chunk_hashes.push(r.u64()?);
        }
        r.rest().is_empty().then_some(Meta {
            status,
            headers,
            vary,
            initial_age_ms,
            ttl_ms,
            stored_ms,
            stale_ok,
            prefetch,
            grace_ms,
            keep_ms,
            stale_if_error_ms,
            chunk_hashes,
        })
    }
}
