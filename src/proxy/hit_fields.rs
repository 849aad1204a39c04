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

/// [`prepared`] for an object whose age the caller has (`Object::age`).
fn prepared_at_age(
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
    renew(object, current.as_deref(), age, cache_status, None)
}

/// [`prepared`] for a fresh hit at `age` (`Object::age`: a fast hit reads it once for
/// freshness, refresh-ahead, `Cache-Status` and `Age`), with [`hit_status_for`]'s
/// `Cache-Status`. The prepared fields say which hit's status they carry as a number
/// ([`Prepared::hit`]), so the value is formatted only when they are renewed: formatting it
/// to compare on every hit was ~140 instructions (callgrind, bench/RESULTS.md "fourteenth
/// stop: user").
pub(super) fn prepared_hit(object: &Object, age: Duration) -> Result<Arc<Prepared>, HeaderMap> {
    let remaining = object.ttl.get().saturating_sub(age);
    let stamp = Prepared::hit_stamp(remaining.as_secs(), object.state.from_disk());
    let secs = age.as_secs();
    let current = object.prepared.load();
    if let Some(p) = current.as_ref()
        && p.age == secs
        && stamp.is_some_and(|stamp| p.hit == stamp)
    {
        return Ok(p.clone());
    }
    let status = hit_status_for(object, remaining);
    renew(object, current.as_deref(), secs, status.as_bytes(), stamp)
}

/// New prepared fields for `object` at `age` seconds with `cache_status` (a fresh hit's,
/// [`Prepared::hit`], when `hit` says which), from `current` (the object's last) or, for the
/// first, from the stored fields; kept on the object for the hits after it.
fn renew(
    object: &Object,
    current: Option<&Prepared>,
    age: u64,
    cache_status: &[u8],
    hit: Option<u32>,
) -> Result<Arc<Prepared>, HeaderMap> {
    let mut own_status = false;
    let mut map = match current {
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
    p.hit = hit.unwrap_or(Prepared::NOT_A_HIT);
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

    /// A fast hit's fields carry `hit_status_for`'s `Cache-Status`, and are kept while both
    /// the age and the status's numbers (remaining TTL, tier) stay; a status of the full path
    /// (no number) is renewed once, then kept; a disk object's says so.
    #[test]
    fn a_fast_hit_reuses_the_prepared_fields_while_age_and_status_stay() {
        let object = crate::cache::test_object(&[("content-type", "text/plain")]);
        let status = |p: &Prepared| p.status.to_str().unwrap().to_owned();
        let at = |ms: u64| Duration::from_millis(ms);
        let first = prepared_hit(&object, at(200)).unwrap();
        assert_eq!(status(&first), "shellac; hit; ttl=59");
        assert_eq!(first.map.get("age").unwrap(), "0");
        assert_eq!(first.map.get(CACHE_STATUS).unwrap(), "shellac; hit; ttl=59");
        assert_eq!(Some(first.hit), Prepared::hit_stamp(59, false));
        // Same second of age, same remaining seconds: the same fields.
        let again = prepared_hit(&object, at(900)).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // Age 0 s still, but 60 s remaining -> 59.x: age 0.999 keeps ttl=59; age 1.0 is
        // another second of both.
        let later = prepared_hit(&object, at(1_000)).unwrap();
        assert!(!Arc::ptr_eq(&first, &later));
        assert_eq!(later.map.get("age").unwrap(), "1");
        assert_eq!(status(&later), "shellac; hit; ttl=59");
        assert_eq!(
            status(&prepared_hit(&object, at(1_500)).unwrap()),
            hit_status_for(&object, Duration::from_secs(60) - at(1_500)).to_string()
        );
        // The full path's fields for another status in that second are renewed by the next
        // fast hit, which then keeps its own.
        let other = prepared(&object, object.stored_at + at(1_200), b"shellac; fwd=stale").unwrap();
        assert_eq!(other.hit, Prepared::NOT_A_HIT);
        let back = prepared_hit(&object, at(1_300)).unwrap();
        assert_eq!(status(&back), "shellac; hit; ttl=58");
        assert!(Arc::ptr_eq(
            &back,
            &prepared_hit(&object, at(1_400)).unwrap()
        ));
        // The same status made by the full path (no number): renewed once with its number.
        let full = prepared(
            &object,
            object.stored_at + at(2_100),
            hit_status(&object, object.stored_at + at(2_100)).as_bytes(),
        )
        .unwrap();
        assert_eq!(full.hit, Prepared::NOT_A_HIT);
        let fast = prepared_hit(&object, at(2_200)).unwrap();
        assert!(!Arc::ptr_eq(&full, &fast));
        assert_eq!(fast.map, full.map);
        assert!(Arc::ptr_eq(
            &fast,
            &prepared_hit(&object, at(2_300)).unwrap()
        ));
        // A disk object's status names its tier (another number for the same seconds).
        let mut disk = crate::cache::test_object(&[]);
        disk.state = crate::cache::TierState::read_from_disk();
        let p = prepared_hit(&disk, at(0)).unwrap();
        assert_eq!(status(&p), "shellac; hit; ttl=60; detail=disk");
        assert_eq!(Some(p.hit), Prepared::hit_stamp(60, true));
        assert_ne!(
            Prepared::hit_stamp(60, true),
            Prepared::hit_stamp(60, false)
        );
        assert_eq!(Prepared::hit_stamp(u64::MAX / 2 + 1, false), None);
        // Past what a u32 holds (and the value that means no hit): formatted each time.
        assert_eq!(Prepared::hit_stamp(1 << 31, false), None);
        assert_eq!(Prepared::hit_stamp((1 << 31) - 1, true), None);
        assert_eq!(
            Prepared::hit_stamp((1 << 31) - 1, false),
            Some(u32::MAX - 1)
        );
    }
}
