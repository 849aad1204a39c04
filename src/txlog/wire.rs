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

use super::decision::{Decision, DecisionKind, intern};
use super::format::Format;
use super::record::{Record, RecordHead, TextRange};

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

/// A span as 8 bytes (start, end); None as `NONE, NONE`.
fn span_bytes(s: Option<TextRange>) -> [u8; 8] {
    let s = s.unwrap_or(TextRange {
        start: NONE,
        end: NONE,
    });
    let mut both = [0u8; 8];
    both[..4].copy_from_slice(&s.start.to_le_bytes());
    both[4..].copy_from_slice(&s.end.to_le_bytes());
    both
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

/// Methods sent as one byte (the head's method code); 0 = spelled out after the head.
const METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::OPTIONS,
    Method::PATCH,
    Method::TRACE,
    Method::CONNECT,
];

fn method_code(m: &Method) -> u8 {
    // GET first: nearly every logged request is one.
    METHODS
        .iter()
        .position(|k| k == m)
        .map_or(0, |i| i as u8 + 1)
}

/// Size of the fixed part every record starts with.
const HEAD: usize = 144;

/// Appends `r` to `out` (everything but the format, the recorder and the wall-clock time,
/// which the writer derives from `started`). This runs on the request path, so the layout is
/// made for writing: every fixed-size field (times, numbers, codes, the client address, the nine
/// string spans) goes into one stack array copied at once, then the text in one copy; only a
/// method outside [`METHODS`] and a reason are written separately. With the earlier
/// field-by-field form `Record::finish` took 555 instructions per record, with this one 421
/// (callgrind, bench/RESULTS.md).
///
/// ```text
///  0..8 started ns | 8..16 duration ns | 16..24 ttfb ns | 24..32 bytes | 32..34 status
///  34 version | 35 flags (kind 0-3, complete 4, reason 5, IPv6 6) | 36 method code
///  37 request-header spans | 38 response-header spans | 39 ESI level
///  40..56 client (IPv4: first 4) | 56..60 text length | 60..140 spans: target, path, host,
///  query, user agent, backend, TLS, VCL trace, site, ESI parent
///  then: [method: u32 length + bytes] [reason: u32 length + bytes] header spans, text
/// ```
pub(super) fn encode(r: &Record, out: &mut Vec<u8>) {
    let reason = r.decision.reason.as_deref();
    let request_headers = &r.request_headers[..r.request_headers.len().min(255)];
    let response_headers = &r.response_headers[..r.response_headers.len().min(255)];
    let method = method_code(&r.method);
    let mut head = [0u8; HEAD];
    let started = nanos(r.started.saturating_duration_since(anchor().0));
    head[0..8].copy_from_slice(&started.to_le_bytes());
    head[8..16].copy_from_slice(&nanos(r.duration).to_le_bytes());
    head[16..24].copy_from_slice(&nanos(r.ttfb).to_le_bytes());
    head[24..32].copy_from_slice(&r.bytes.to_le_bytes());
    head[32..34].copy_from_slice(&r.status.to_le_bytes());
    head[34] = version_code(r.version);
    head[35] = kind_code(r.decision.kind)
        | u8::from(r.complete) << 4
        | u8::from(reason.is_some()) << 5
        | u8::from(r.client.is_ipv6()) << 6;
    head[36] = method;
    head[37] = request_headers.len() as u8;
    head[38] = response_headers.len() as u8;
    head[39] = r.esi_level;
    match r.client {
        IpAddr::V4(a) => head[40..44].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => head[40..56].copy_from_slice(&a.octets()),
    }
    head[56..60].copy_from_slice(&(r.text.len() as u32).to_le_bytes());
    let spans = [
        Some(r.target),
        Some(r.path),
        Some(r.host),
        r.query,
        r.user_agent,
        r.backend,
        r.tls,
        r.vcl,
        r.site,
        r.esi_parent,
    ];
    for (slot, span) in head[60..140].chunks_exact_mut(8).zip(spans) {
        slot.copy_from_slice(&span_bytes(span));
    }
    out.reserve(
        HEAD + 8 * (request_headers.len() + response_headers.len())
            + r.text.len()
            + if method == 0 {
                4 + r.method.as_str().len()
            } else {
                0
            }
            + reason.map_or(0, |s| 4 + s.len()),
    );
    out.extend_from_slice(&head);
    if method == 0 {
        put_str(out, r.method.as_str());
    }
    if let Some(reason) = reason {
        put_str(out, reason);
    }
    for span in request_headers.iter().chain(response_headers) {
        out.extend_from_slice(&span_bytes(*span));
    }
    out.extend_from_slice(r.text.as_bytes());
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

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// `n` encoded spans (each is checked when it is read: [`span_at`]).
    fn spans(&mut self, n: usize) -> Option<&'a [u8]> {
        self.take(n * 8)
    }
}

/// The span at `i` in `raw` (8 bytes each): None for an absent one or a bad one.
fn span_at(raw: &[u8], i: usize, text_len: usize) -> Option<Option<TextRange>> {
    let s: [u8; 8] = raw.get(i * 8..i * 8 + 8)?.try_into().ok()?;
    let start = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let end = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    if start == NONE {
        return Some(None);
    }
    (start <= end && end as usize <= text_len).then_some(Some(TextRange { start, end }))
}

/// One encoded record, read in place from its chunk: what the writer renders, with no copy.
/// Strings are bytes (the worker encoded them from `str`s; rendering escapes bytes anyway).
pub(super) struct View<'a> {
    /// When the request arrived, on the wall clock.
    pub time: SystemTime,
    pub client: IpAddr,
    pub method: &'a [u8],
    pub version: Version,
    pub status: u16,
    pub bytes: u64,
    pub duration: Duration,
    pub ttfb: Duration,
    pub kind: DecisionKind,
    pub reason: Option<&'a [u8]>,
    pub complete: bool,
    /// The ESI depth (0: a client's request).
    pub esi_level: u8,
    /// Nanoseconds from the anchor to the request's arrival.
    started: u64,
    text: &'a [u8],
    /// target, path, host, query, user agent, backend, TLS, VCL trace, site, ESI parent.
    spans: &'a [u8],
    request_headers: &'a [u8],
    response_headers: &'a [u8],
}

impl<'a> View<'a> {
    /// Reads the record at the front of `input` and advances past it. None: the rest of the
    /// chunk is not a record.
    pub fn parse(input: &mut &'a [u8]) -> Option<View<'a>> {
        let mut rd = Reader(input);
        // Borrowed, not copied: the spans are read from it in place.
        let head: &'a [u8; HEAD] = rd.take(HEAD)?.try_into().ok()?;
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let flags = head[35];
        let client = if flags & 1 << 6 != 0 {
            let mut a = [0u8; 16];
            a.copy_from_slice(&head[40..56]);
            IpAddr::V6(Ipv6Addr::from(a))
        } else {
            IpAddr::V4(Ipv4Addr::new(head[40], head[41], head[42], head[43]))
        };
        let method = match head[36] {
            0 => rd.bytes()?,
            code => METHODS.get(usize::from(code) - 1)?.as_str().as_bytes(),
        };
        let reason = if flags & 1 << 5 != 0 {
            Some(rd.bytes()?)
        } else {
            None
        };
        let request_headers = rd.spans(usize::from(head[37]))?;
        let response_headers = rd.spans(usize::from(head[38]))?;
        let text_len = u32::from_le_bytes([head[56], head[57], head[58], head[59]]);
        let text = rd.take(text_len as usize)?;
        let started = u64_at(0);
        let view = View {
            time: anchor().1 + Duration::from_nanos(started),
            client,
            method,
            version: match head[34] {
                0 => Version::HTTP_09,
                1 => Version::HTTP_10,
                3 => Version::HTTP_2,
                4 => Version::HTTP_3,
                _ => Version::HTTP_11,
            },
            status: u16::from_le_bytes([head[32], head[33]]),
            bytes: u64_at(24),
            duration: Duration::from_nanos(u64_at(8)),
            ttfb: Duration::from_nanos(u64_at(16)),
            kind: match flags & 0xf {
                0 => DecisionKind::Hit,
                1 => DecisionKind::Miss,
                2 => DecisionKind::Pass,
                _ => DecisionKind::Synth,
            },
            reason,
            complete: flags & 1 << 4 != 0,
            esi_level: head[39],
            started,
            text,
            spans: &head[60..140],
            request_headers,
            response_headers,
        };
        *input = rd.0;
        Some(view)
    }

    fn span(&self, raw: &'a [u8], i: usize) -> Option<&'a [u8]> {
        let s = span_at(raw, i, self.text.len())??;
        self.text.get(s.start as usize..s.end as usize)
    }

    /// When the last body byte went out, as nanoseconds from the anchor (for ordering).
    pub fn ended(&self) -> u64 {
        self.started.saturating_add(nanos(self.duration))
    }

    /// False for a refused request whose request line was not valid.
    pub fn has_request_line(&self) -> bool {
        self.span(self.spans, 0).is_some_and(|t| !t.is_empty())
    }

    pub fn target(&self) -> &'a [u8] {
        self.span(self.spans, 0).unwrap_or_default()
    }

    pub fn path(&self) -> &'a [u8] {
        self.span(self.spans, 1).unwrap_or_default()
    }

    pub fn host(&self) -> &'a [u8] {
        self.span(self.spans, 2).unwrap_or_default()
    }

    pub fn query(&self) -> Option<&'a [u8]> {
        self.span(self.spans, 3)
    }

    pub fn backend(&self) -> Option<&'a [u8]> {
        self.span(self.spans, 5)
    }

    /// One field of the TLS connection's facts (`Record::set_tls`); None over cleartext.
    pub fn tls_field(&self, i: usize) -> Option<&'a [u8]> {
        self.span(self.spans, 6)?.split(|b| *b == 0x1f).nth(i)
    }

    /// Which VCL subroutine returned what (`recv:hash hash:lookup ...`).
    pub fn vcl(&self) -> Option<&'a [u8]> {
        self.span(self.spans, 7)
    }

    /// For an ESI include: the target of the page that included it.
    pub fn esi_parent(&self) -> Option<&'a [u8]> {
        self.span(self.spans, 9)
    }

    /// The `[[site]]` that answered.
    pub fn site(&self) -> Option<&'a [u8]> {
        self.span(self.spans, 8)
    }

    /// Value of the format's `i`th request header.
    pub fn request_header(&self, i: usize) -> Option<&'a [u8]> {
        self.span(self.request_headers, i)
    }

    /// Value of the format's `i`th response header.
    pub fn response_header(&self, i: usize) -> Option<&'a [u8]> {
        self.span(self.response_headers, i)
    }

    /// Makes `r` this record (for rankings and live readers): reset from the head fields,
    /// then the rest.
    pub fn fill(&self, r: &mut Record) {
        let text = String::from_utf8_lossy(self.text);
        r.reset(
            RecordHead {
                client: self.client,
                method: Method::from_bytes(self.method).unwrap_or(Method::GET),
                version: self.version,
                status: self.status,
                decision: Decision {
                    kind: self.kind,
                    reason: self.reason.map(|s| intern(&String::from_utf8_lossy(s))),
                },
                started: anchor().0 + Duration::from_nanos(self.started),
                ttfb: self.ttfb,
            },
            text.len(),
        );
        r.set_format(None);
        r.time = self.time;
        r.bytes = self.bytes;
        r.duration = self.duration;
        r.complete = self.complete;
        r.text.push_str(&text);
        let at = |raw: &[u8], i: usize| span_at(raw, i, text.len()).flatten();
        r.target = at(self.spans, 0).unwrap_or_default();
        r.path = at(self.spans, 1).unwrap_or_default();
        r.host = at(self.spans, 2).unwrap_or_default();
        r.query = at(self.spans, 3);
        r.user_agent = at(self.spans, 4);
        r.backend = at(self.spans, 5);
        r.tls = at(self.spans, 6);
        r.vcl = at(self.spans, 7);
        r.site = at(self.spans, 8);
        r.esi_level = self.esi_level;
        r.esi_parent = at(self.spans, 9);
        r.request_headers = (0..self.request_headers.len() / 8)
            .map(|i| at(self.request_headers, i))
            .collect();
        r.response_headers = (0..self.response_headers.len() / 8)
            .map(|i| at(self.response_headers, i))
            .collect();
    }
}

/// A record for the writer to decode into.
pub(super) fn blank() -> Record {
    Record::new(
        RecordHead {
            client: IpAddr::from([0, 0, 0, 0]),
            method: Method::GET,
            version: Version::HTTP_11,
            status: 0,
            decision: Decision {
                kind: DecisionKind::Synth,
                reason: None,
            },
            started: anchor().0,
            ttfb: Duration::ZERO,
        },
        256,
    )
}

#[cfg(test)]
mod tests;
