//! A full delivery's header fields, prepared once per second of an object's age, and their
//! HTTP/1.1 wire form for fast hits.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};

/// A full delivery's header fields as of one second of an object's age ([`Object::prepared`]).
#[derive(Debug)]
pub struct Prepared {
    /// The object's `Age`, whole seconds, that `map` carries.
    pub age: u64,
    /// The `Cache-Status` value `map` carries.
    pub status: HeaderValue,
    /// Which fresh hit's `Cache-Status` `status` is, as a number ([`Prepared::hit_stamp`]);
    /// [`Prepared::NOT_A_HIT`] when it is not a fresh hit's (or not known to be): a fast hit
    /// compares this instead of formatting the value (`proxy/hit_fields.rs`, `prepared_hit`).
    /// A `u32` beside the one-byte fields, where an `Option<u64>` would make every stored
    /// object 16 bytes dearer (`cache::object`'s `an_object_stays_compact`).
    pub hit: u32,
    pub map: HeaderMap,
    /// The body is gzip (`Content-Encoding: gzip`, not `no-transform`): a fast hit steps
    /// aside for a client that does not take gzip (the full path decodes it for that client).
    pub gzip: bool,
    /// The body is br or zstd (an origin's; not `no-transform`): a fast hit steps aside for a
    /// client that does not take it (the full path decodes it: `proxy/filter/decode.rs`).
    pub decodable: Option<crate::http::accept_encoding::Coding>,
    /// An identity body `[compression]` would gzip now (`proxy/coding.rs`): a fast hit steps
    /// aside for a client that prefers br or zstd (the full path serves its representation).
    /// Worked out by the first fast hit that asks, once per `Prepared` ([`Prepared::recodable`];
    /// one byte beside `gzip`: no room taken).
    recodable: std::sync::atomic::AtomicU8,
    /// The object has a status line of its own (`cache::status_line`: a wide VCL status, a
    /// reason phrase other than the status's own): a fast hit steps aside, the full path
    /// sends it. One byte beside `gzip`: no room taken.
    pub own_status: bool,
    /// `map` as HTTP/1.1 bytes (`Prepared::wire`), built when a fast hit first needs them.
    pub wire: std::sync::OnceLock<Bytes>,
    /// The head a fast hit sends under a VCL program whose `vcl_deliver` reads only the
    /// object and the response (`proxy/vcl/dry_run.rs`): `wire` plus the fields it adds, made
    /// once per `Prepared`; the program's identity (its runtime's address) with it, and
    /// `None` when it does more than add fields. One pointer (`OnceBox`): most objects
    /// are never served under such a program.
    pub vcl_wire: once_cell::race::OnceBox<(usize, Option<Bytes>)>,
}

impl Prepared {
    /// Whether the body is identity that `[compression]` would gzip now: `decide` the first
    /// time, remembered after.
    pub fn recodable(&self, decide: impl FnOnce() -> bool) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        match self.recodable.load(Relaxed) {
            0 => {
                let yes = decide();
                self.recodable.store(if yes { 2 } else { 1 }, Relaxed);
                yes
            }
            known => known == 2,
        }
    }

    /// [`Prepared::hit`] when the fields are not a fresh hit's.
    pub const NOT_A_HIT: u32 = u32::MAX;

    /// [`Prepared::hit`] of a fresh hit with `remaining` whole seconds of TTL, from disk or
    /// not: the two things its `Cache-Status` (`shellac; hit; ttl=N[; detail=disk]`) says,
    /// one number for each value (`None` from 2^31 - 1 seconds, ~68 years, on: such a hit's
    /// status is formatted each time instead).
    pub fn hit_stamp(remaining: u64, from_disk: bool) -> Option<u32> {
        let stamp = remaining.checked_mul(2)? | u64::from(from_disk);
        u32::try_from(stamp)
            .ok()
            .filter(|s| *s != Prepared::NOT_A_HIT)
    }

    pub fn new(age: u64, status: HeaderValue, map: HeaderMap) -> Prepared {
        use crate::http::accept_encoding::Coding;
        let mut codings = map.get_all(http::header::CONTENT_ENCODING).iter();
        let coding = match (codings.next(), codings.next()) {
            (Some(v), None) => Coding::from_content_encoding(v.as_bytes()),
            _ => None,
        }
        .filter(|_| {
            !crate::http::cache_control::no_transform(
                map.get_all(http::header::CACHE_CONTROL)
                    .iter()
                    .map(HeaderValue::as_bytes),
            )
        });
        let gzip = coding == Some(Coding::Gzip);
        let decodable = coding.filter(|c| matches!(c, Coding::Br | Coding::Zstd));
        Prepared {
            age,
            status,
            hit: Prepared::NOT_A_HIT,
            map,
            gzip,
            decodable,
            recodable: std::sync::atomic::AtomicU8::new(0),
            own_status: false,
            wire: std::sync::OnceLock::new(),
            vcl_wire: once_cell::race::OnceBox::new(),
        }
    }

    /// The response head for `map` with `status` as hyper writes it (status line with the
    /// canonical reason, then each field as `name: value`, in the map's order): a fast hit
    /// (server/h1/answers.rs) sends these bytes as they are. hyper adds `Date` when the fields have
    /// none; so does the writer then, with the blank line: the bytes end with the blank line
    /// (`\r\n\r\n`) only when the stored fields carry their own `Date`. Built once per
    /// `Prepared`, i.e. at most once per second of the object's age.
    pub fn wire(&self, status: StatusCode) -> &Bytes {
        self.wire.get_or_init(|| {
            let fields: usize = self
                .map
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum();
            let reason = status.canonical_reason().unwrap_or("");
            let mut out = Vec::with_capacity(16 + reason.len() + fields);
            out.extend_from_slice(b"HTTP/1.1 ");
            out.extend_from_slice(status.as_str().as_bytes());
            out.push(b' ');
            out.extend_from_slice(reason.as_bytes());
            out.extend_from_slice(b"\r\n");
            for (name, value) in &self.map {
                out.extend_from_slice(name.as_str().as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            if self.map.contains_key(http::header::DATE) {
                out.extend_from_slice(b"\r\n");
            }
            Bytes::from(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form of prepared fields: hyper's status line and field lines; the blank line
    /// only when the fields carry their own `Date` (otherwise the writer adds `Date` first,
    /// as hyper does).
    #[test]
    fn prepared_wire_is_what_hyper_writes() {
        let mut map = HeaderMap::new();
        map.insert("content-length", HeaderValue::from_static("5"));
        map.insert("cache-status", HeaderValue::from_static("shellac; hit"));
        let p = Prepared::new(0, HeaderValue::from_static("shellac; hit"), map.clone());
        assert_eq!(
            &p.wire(StatusCode::OK)[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncache-status: shellac; hit\r\n"
        );
        map.insert(
            "date",
            HeaderValue::from_static("Tue, 24 Nov 2026 04:29:13 GMT"),
        );
        let p = Prepared::new(0, HeaderValue::from_static("x"), map);
        let wire = p.wire(StatusCode::NOT_FOUND);
        assert!(wire.starts_with(b"HTTP/1.1 404 Not Found\r\n"));
        assert!(wire.ends_with(b"date: Tue, 24 Nov 2026 04:29:13 GMT\r\n\r\n"));
    }
}
