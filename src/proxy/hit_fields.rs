//! A hit's delivery fields: the object's prepared map brought to this second's `Age` and the
//! request's `Cache-Status` ([`prepared`], kept on the object for the hits after it), and the
//! `Cache-Status` values of a hit ([`hit_status`], [`stale_status`]) formatted without
//! allocating ([`StackStr`]), with the names of the fields a hit adds ([`CACHE_STATUS`]) and
//! never sends ([`SURROGATE_ONLY`]). The response around them is `deliver.rs`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::cache::status_line;
use crate::cache::{Object, Prepared};
use crate::http::headers::VIA;

/// The `Cache-Status` field name (RFC 9211). A `HeaderName` constant so the hot path never
/// parses the name again (a `&str` name is re-parsed and hashed on every map operation).
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// Fields meant for the cache, never sent to clients (the last four: a stored ESI program,
/// `esi::FIELD`, a stored encoded object's identity, `cache::identity::FIELD`, the
/// generation a representation was made from, `cache::representation::FIELD`, and an
/// object's own status line, `cache::status_line::FIELD`).
pub(super) const SURROGATE_ONLY: [HeaderName; 7] = [
    HeaderName::from_static("surrogate-control"),
    HeaderName::from_static("surrogate-key"),
    HeaderName::from_static("xkey"),
    HeaderName::from_static(crate::esi::FIELD),
    HeaderName::from_static(crate::cache::identity::FIELD),
    HeaderName::from_static(crate::cache::representation::FIELD),
    HeaderName::from_static(crate::cache::status_line::FIELD),
];

/// The delivery fields of a full hit on `object` at `now` with `cache_status`: a clone of the
/// object's prepared map ([`prepared`]).
#[cfg(test)]
fn prepared_fields(object: &Object, now: Instant, cache_status: &str) -> HeaderMap {
    match prepared(object, now, cache_status.as_bytes()) {
        Ok(p) => p.map.clone(),
        Err(map) => map,
    }
}

/// The object's delivery fields at `now` with `cache_status` ([`Object::prepared`]), brought
/// to this second and status first if they are not there yet. Most hits on a hot object
/// therefore find them as they are: inserting `Age` and `Cache-Status` into a clone of the map
/// on every hit (with the status copied into a new value) was ~550 instructions per hit
/// (callgrind, bench/RESULTS.md). `Err` carries the fields, not kept, when `cache_status` is
/// not a valid field value (never built here).
pub(super) fn prepared(
    object: &Object,
    now: Instant,
    cache_status: &[u8],
) -> Result<Arc<Prepared>, HeaderMap> {
    prepared_at_age(object, object.age(now), cache_status)
}

/// [`prepared`] for an object whose age the caller has (`Object::age`): a fast hit reads it
/// once for freshness, refresh-ahead, `Cache-Status` and `Age`.
pub(super) fn prepared_at_age(
    object: &Object,
    age: Duration,
    cache_status: &[u8],
) -> Result<Arc<Prepared>, HeaderMap> {
    let age = age.as_secs();
    let current = object.prepared.load();
    if let Some(p) = current.as_ref()
        && p.age == age
        && p.status.as_bytes() == cache_status
    {
        return Ok(p.clone());
    }
    let mut own_status = false;
    let mut map = match current.as_deref() {
        Some(p) => {
            own_status = p.own_status;
            p.map.clone()
        }
        None => {
            let mut h = HeaderMap::with_capacity(object.headers.len() + 4);
            for (name, value) in object.headers.header_pairs() {
                if !SURROGATE_ONLY.contains(&name) {
                    h.append(name, value);
                } else if name == status_line::FIELD {
                    own_status = true;
                }
            }
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(object.body_len));
            h.append(header::VIA, HeaderValue::from_static(VIA));
            h
        }
    };
    map.insert(header::AGE, age_value(age));
    let Ok(status) = HeaderValue::from_bytes(cache_status) else {
        map.remove(CACHE_STATUS);
        return Err(map);
    };
    map.insert(CACHE_STATUS, status.clone());
    let mut p = Prepared::new(age, status, map);
    p.own_status = own_status;
    let p = Arc::new(p);
    object.prepared.store(Some(p.clone()));
    Ok(p)
}

/// `Age` values below this come from a table built once: formatting one allocates.
const AGE_TABLE: u64 = 4096;

/// The `Age` field value for `secs` (capped at 2^31, RFC 9111 §1.2.2).
pub(super) fn age_value(secs: u64) -> HeaderValue {
    static TABLE: std::sync::OnceLock<Vec<HeaderValue>> = std::sync::OnceLock::new();
    if secs < AGE_TABLE {
        let table = TABLE.get_or_init(|| (0..AGE_TABLE).map(HeaderValue::from).collect());
        return table[secs as usize].clone();
    }
    HeaderValue::from(secs.min(crate::cache::policy::MAX_AGE))
}

/// `Cache-Status` for a fresh hit, formatted on the stack (no allocation: this runs on
/// every hit).
pub fn hit_status(object: &Object, now: Instant) -> StackStr {
    hit_status_for(object, object.remaining_ttl(now))
}

/// [`hit_status`] for an object with `remaining` of its TTL (`Object::remaining_ttl`).
pub fn hit_status_for(object: &Object, remaining: Duration) -> StackStr {
    use std::fmt::Write as _;
    let tier = if object.state.from_disk() {
        "; detail=disk"
    } else {
        ""
    };
    let mut out = StackStr::default();
    // itoa rather than format_args: the fmt machinery cost ~300 instructions per hit.
    let mut digits = itoa::Buffer::new();
    let _ = out.write_str("shellac; hit; ttl=");
    let _ = out.write_str(digits.format(remaining.as_secs()));
    let _ = out.write_str(tier);
    out
}

/// A short string formatted without allocating (up to 64 bytes; longer is cut).
pub struct StackStr {
    buf: [u8; 64],
    len: usize,
}

impl Default for StackStr {
    fn default() -> Self {
        StackStr {
            buf: [0; 64],
            len: 0,
        }
    }
}

impl std::fmt::Write for StackStr {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            Err(std::fmt::Error)
        } else {
            Ok(())
        }
    }
}

impl StackStr {
    /// The bytes written, without the UTF-8 check `Deref` makes (a fast hit compares them with
    /// the prepared `Cache-Status`: ~95 instructions per hit saved, callgrind).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::ops::Deref for StackStr {
    type Target = str;
    fn deref(&self) -> &str {
        // Only whole `&str`s are copied in, and a cut never splits them: ASCII content.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("shellac; hit")
    }
}

/// `Cache-Status` for a stale object served for `why`: ttl is negative (RFC 9211 §2.4).
pub fn stale_status(object: &Object, now: Instant, why: &str) -> String {
    let overdue = object.age(now).saturating_sub(object.ttl.get()).as_secs();
    format!("shellac; hit; ttl=-{overdue}; detail=stale-{why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_in_one_second_share_the_prepared_fields_and_a_new_second_renews_them() {
        let object = crate::cache::test_object(&[("content-type", "text/plain")]);
        let t0 = object.stored_at;
        let field = |h: &HeaderMap, name: &str| h.get(name).unwrap().to_str().unwrap().to_owned();
        let first = prepared_fields(&object, t0, "shellac; hit; ttl=60");
        assert_eq!(field(&first, "age"), "0");
        assert_eq!(field(&first, "content-length"), "1");
        assert_eq!(field(&first, "content-type"), "text/plain");
        let kept = object.prepared.load_full().unwrap();
        // Same second, same status: served from the prepared map as it is.
        let again = prepared_fields(
            &object,
            t0 + Duration::from_millis(900),
            "shellac; hit; ttl=60",
        );
        assert!(Arc::ptr_eq(&kept, &object.prepared.load_full().unwrap()));
        assert_eq!(again, first);
        // Another status in the same second is never served from it.
        let grace = prepared_fields(&object, t0, "shellac; fwd=stale; detail=while-revalidate");
        assert_eq!(
            field(&grace, "cache-status"),
            "shellac; fwd=stale; detail=while-revalidate"
        );
        // A later second: Age and status renewed, and kept for the hits after it.
        let later = prepared_fields(&object, t0 + Duration::from_secs(7), "shellac; hit; ttl=53");
        assert_eq!(field(&later, "age"), "7");
        assert_eq!(field(&later, "cache-status"), "shellac; hit; ttl=53");
        assert_eq!(later.get_all("age").iter().count(), 1);
        assert_eq!(object.prepared.load_full().unwrap().age, 7);
    }
}
