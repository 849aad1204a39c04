//! The compact byte form a finished record travels in from its worker to the writer.
//!
//! A worker encodes each finished [`Record`] into its current [`Chunk`] and reuses the record
//! at once, so the records it fills stay in its cache; the writer decodes chunks into records
//! of its own. Handing the records themselves over (and back as spares) made every record go
//! cold between uses: with the writer on the worker's core that cost ~7% of the hit rate
//! before any formatting (bench/RESULTS.md, access-log section).
//!
//! The form is private to one process and written and read by the same code: fields in a fixed
//! order, integers little-endian, strings as length + bytes. Decoding is still checked (a
//! short or inconsistent chunk ends the chunk, it never panics).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use http::{Method, Version};

use super::{Decision, DecisionKind, Format, Record, Span, intern};

/// Finished records of one worker, encoded back to back, all logged with one format.
#[derive(Default)]
pub(super) struct Chunk {
    pub bytes: Vec<u8>,
    pub records: u32,
    /// The access-log format of every record in the chunk (None: log off).
    pub format: Option<Arc<Format>>,
}

/// The (Instant, SystemTime) pair every record time is measured from: taken once, so log
/// times never go backwards and a record needs no wall-clock read.
pub(super) fn anchor() -> &'static (Instant, SystemTime) {
    static ANCHOR: OnceLock<(Instant, SystemTime)> = OnceLock::new();
    ANCHOR.get_or_init(|| (Instant::now(), SystemTime::now()))
}

const NONE: u32 = u32::MAX;

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_span(out: &mut Vec<u8>, s: Option<Span>) {
    let s = s.unwrap_or(Span {
        start: NONE,
        end: NONE,
    });
    let mut both = [0u8; 8];
    both[..4].copy_from_slice(&s.start.to_le_bytes());
    both[4..].copy_from_slice(&s.end.to_le_bytes());
    out.extend_from_slice(&both);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn version_code(v: Version) -> u8 {
    match v {
        Version::HTTP_09 => 0,
        Version::HTTP_10 => 1,
        Version::HTTP_2 => 3,
        Version::HTTP_3 => 4,
        _ => 2,
    }
}

fn kind_code(k: DecisionKind) -> u8 {
    match k {
        DecisionKind::Hit => 0,
        DecisionKind::Miss => 1,
        DecisionKind::Pass => 2,
        DecisionKind::Synth => 3,
    }
}

/// Appends `r` to `out` (everything but the format, the recorder and the wall-clock time,
/// which the writer derives from `started`).
pub(super) fn encode(r: &Record, out: &mut Vec<u8>) {
    let mut head = [0u8; 36];
    let started = nanos(r.started.saturating_duration_since(anchor().0));
    head[0..8].copy_from_slice(&started.to_le_bytes());
    head[8..16].copy_from_slice(&nanos(r.duration).to_le_bytes());
    head[16..24].copy_from_slice(&nanos(r.ttfb).to_le_bytes());
    head[24..32].copy_from_slice(&r.bytes.to_le_bytes());
    head[32..34].copy_from_slice(&r.status.to_le_bytes());
    head[34] = version_code(r.version);
    head[35] = kind_code(r.decision.kind)
        | u8::from(r.complete) << 4
        | u8::from(r.decision.reason.is_some()) << 5
        | u8::from(r.client.is_ipv6()) << 6;
    out.extend_from_slice(&head);
    match r.client {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
    }
    put_str(out, r.method.as_str());
    if let Some(reason) = &r.decision.reason {
        put_str(out, reason);
    }
    put_str(out, &r.text);
    for span in [r.target, r.path, r.host] {
        put_span(out, Some(span));
    }
    for span in [r.query, r.user_agent, r.backend] {
        put_span(out, span);
    }
    out.push(r.request_headers.len().min(255) as u8);
    for span in r.request_headers.iter().take(255) {
        put_span(out, *span);
    }
    out.push(r.response_headers.len().min(255) as u8);
    for span in r.response_headers.iter().take(255) {
        put_span(out, *span);
    }
}

/// Reads from the front of a chunk.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn span(&mut self, text_len: usize) -> Option<Option<Span>> {
        let start = self.u32()?;
        let end = self.u32()?;
        if start == NONE {
            return Some(None);
        }
        (start <= end && end as usize <= text_len).then_some(Some(Span { start, end }))
    }

    fn spans<const N: usize>(
        &mut self,
        text_len: usize,
    ) -> Option<smallvec::SmallVec<[Option<Span>; N]>> {
        let n = self.array::<1>()?[0];
        (0..n).map(|_| self.span(text_len)).collect()
    }
}

/// Decodes the record at the front of `input` into `r` (every field is set) and advances
/// `input` past it. None: the rest of the chunk is not a record.
pub(super) fn decode(input: &mut &[u8], r: &mut Record) -> Option<()> {
    let mut rd = Reader(input);
    let head: [u8; 36] = rd.array()?;
    let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().unwrap_or_default());
    let flags = head[35];
    let client = if flags & 1 << 6 != 0 {
        IpAddr::V6(Ipv6Addr::from(rd.array::<16>()?))
    } else {
        IpAddr::V4(Ipv4Addr::from(rd.array::<4>()?))
    };
    let method = Method::from_bytes(rd.str()?.as_bytes()).ok()?;
    let reason = if flags & 1 << 5 != 0 {
        Some(intern(rd.str()?))
    } else {
        None
    };
    let text = rd.str()?;
    let len = text.len();
    let [target, path, host] = [rd.span(len)?, rd.span(len)?, rd.span(len)?];
    let [query, user_agent, backend] = [rd.span(len)?, rd.span(len)?, rd.span(len)?];
    let request_headers = rd.spans(len)?;
    let response_headers = rd.spans(len)?;

    let (anchor_instant, anchor_time) = *anchor();
    let since_anchor = Duration::from_nanos(u64_at(0));
    let Record {
        time,
        client: r_client,
        method: r_method,
        version,
        status,
        bytes,
        duration,
        ttfb,
        decision,
        complete,
        format,
        text: r_text,
        target: r_target,
        path: r_path,
        query: r_query,
        host: r_host,
        user_agent: r_user_agent,
        backend: r_backend,
        request_headers: r_request_headers,
        response_headers: r_response_headers,
        started,
        recorder,
        queued,
        shard: _,
    } = r;
    *time = anchor_time + since_anchor;
    *started = anchor_instant + since_anchor;
    *r_client = client;
    *r_method = method;
    *version = match head[34] {
        0 => Version::HTTP_09,
        1 => Version::HTTP_10,
        3 => Version::HTTP_2,
        4 => Version::HTTP_3,
        _ => Version::HTTP_11,
    };
    *status = u16::from_le_bytes([head[32], head[33]]);
    *bytes = u64_at(24);
    *duration = Duration::from_nanos(u64_at(8));
    *ttfb = Duration::from_nanos(u64_at(16));
    *decision = Decision {
        kind: match flags & 0xf {
            0 => DecisionKind::Hit,
            1 => DecisionKind::Miss,
            2 => DecisionKind::Pass,
            _ => DecisionKind::Synth,
        },
        reason,
    };
    *complete = flags & 1 << 4 != 0;
    *format = None;
    r_text.clear();
    r_text.push_str(text);
    *r_target = target.unwrap_or_default();
    *r_path = path.unwrap_or_default();
    *r_host = host.unwrap_or_default();
    *r_query = query;
    *r_user_agent = user_agent;
    *r_backend = backend;
    *r_request_headers = request_headers;
    *r_response_headers = response_headers;
    *recorder = None;
    *queued = false;
    *input = rd.0;
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_the_trip() {
        let mut r = Record::sample();
        r.push_request_header(Some(b"http://ref.example/"));
        r.push_request_header(None);
        r.push_response_header(Some(b"shellac; hit"));
        r.client = "2001:db8::7".parse().unwrap();
        r.version = Version::HTTP_10;
        r.started = anchor().0 + Duration::from_millis(1500);
        let mut bytes = Vec::new();
        encode(&r, &mut bytes);
        let mut second = Record::sample();
        second.method = Method::from_bytes(b"PURGE").unwrap();
        second.decision.reason = None;
        second.started = anchor().0;
        encode(&second, &mut bytes);

        let mut input = &bytes[..];
        let mut out = Record::sample();
        out.set_backend(Some("something else"));
        decode(&mut input, &mut out).unwrap();
        assert_eq!(
            (
                out.client,
                out.method.clone(),
                out.version,
                out.status,
                out.bytes
            ),
            (r.client, Method::GET, Version::HTTP_10, 200, 1234)
        );
        assert_eq!(
            (out.duration, out.ttfb, out.complete),
            (r.duration, r.ttfb, true)
        );
        assert_eq!(out.decision, r.decision);
        assert_eq!(
            (out.target(), out.path(), out.query()),
            ("/a/b?x=1", "/a/b", Some("x=1"))
        );
        assert_eq!(
            (out.host(), out.user_agent(), out.backend()),
            ("example.com", Some("curl/8.0"), Some("app"))
        );
        assert_eq!(
            (
                out.request_header(0),
                out.request_header(1),
                out.response_header(0)
            ),
            (Some("http://ref.example/"), None, Some("shellac; hit"))
        );
        assert_eq!(out.started, r.started);
        assert_eq!(out.time, anchor().1 + Duration::from_millis(1500));

        decode(&mut input, &mut out).unwrap();
        assert_eq!(out.method.as_str(), "PURGE");
        assert_eq!(out.decision.reason, None);
        assert_eq!(out.request_header(0), None);
        assert!(input.is_empty());
    }

    #[test]
    fn a_cut_chunk_ends_without_a_record() {
        let mut bytes = Vec::new();
        encode(&Record::sample(), &mut bytes);
        for cut in 0..bytes.len() {
            let mut input = &bytes[..cut];
            let mut out = Record::sample();
            assert!(decode(&mut input, &mut out).is_none(), "cut at {cut}");
        }
    }
}
