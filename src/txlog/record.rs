//! One finished transaction ([`Record`]) as the request path fills it, its life cycle (new,
//! reset for reuse, finish), and the [`Sink`] it is handed to when its body is done (the
//! recorder: `recorder.rs`). The strings it captures are `strings.rs`.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{Method, Uri, Version};
use smallvec::SmallVec;

use super::decision::{Decision, DecisionKind};
use super::format::Format;

/// Where finished records go: [`Record::finish`] hands a queued record to the sink it was
/// queued to ([`Record::queue_to`]). The recorder is the one sink; the trait keeps the record
/// from depending on the recorder that holds records.
pub trait Sink: Send + Sync {
    /// Takes a finished record. The record's reference to the sink was taken out to call this
    /// (`self`); a sink that keeps the record for reuse gives it back with
    /// [`Record::keep_sink`], so a reused record holds it without a reference-count change.
    fn queue(self: Arc<Self>, record: Box<Record>);
}

/// Where a captured string sits in a record's text buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextRange {
    pub(super) start: u32,
    pub(super) end: u32,
}

/// One finished transaction. The strings it needs (URL, host, headers the log format prints,
/// backend name) are copied into one buffer, so a record never holds on to the connection's
/// read buffer. A finished record is encoded for the writer ([`wire`]) and reused by its worker
/// at once (no allocation in the steady state).
pub struct Record {
    /// When the request arrived, on the wall clock: filled in by the writer from `started`
    /// (one clock conversion less on the request path).
    pub time: SystemTime,
    pub client: IpAddr,
    pub method: Method,
    pub version: Version,
    pub status: u16,
    /// Response body bytes sent.
    pub bytes: u64,
    /// Request arrival to the last body byte handed to the connection (or the body dropped).
    pub duration: Duration,
    /// Request arrival to the response head (time to first byte).
    pub ttfb: Duration,
    pub decision: Decision,
    /// False when the body ended early (client gone, backend failed).
    pub complete: bool,
    /// The access-log format in force when the request arrived (None: log off). Kept when
    /// the record is reused: see [`Record::set_format`].
    pub format: Option<Arc<Format>>,
    pub(super) text: String,
    pub(super) target: TextRange,
    pub(super) path: TextRange,
    pub(super) query: Option<TextRange>,
    pub(super) host: TextRange,
    pub(super) user_agent: Option<TextRange>,
    pub(super) backend: Option<TextRange>,
    /// What the client's TLS connection negotiated (version, cipher, SNI, ALPN, client
    /// subject, separated by `\x1f`); None over cleartext or when nothing prints it.
    pub(super) tls: Option<TextRange>,
    /// Which VCL subroutine returned what (`recv:hash hash:lookup miss:fetch ...`).
    pub(super) vcl: Option<TextRange>,
    /// The `[[site]]` that answered (None without sites, or on a listener without any).
    pub(super) site: Option<TextRange>,
    /// The ESI depth: 0 for a client's request, n for an include of a level n-1 page.
    pub esi_level: u8,
    /// For an ESI include: the target of the page that included it.
    pub(super) esi_parent: Option<TextRange>,
    /// Values of `format.request_headers`, in order.
    pub(super) request_headers: SmallVec<[Option<TextRange>; 4]>,
    /// Values of `format.response_headers`, in order.
    pub(super) response_headers: SmallVec<[Option<TextRange>; 2]>,
    /// For the duration.
    pub(super) started: Instant,
    /// Where the record goes when its body is done (kept when the record is reused, like
    /// `format`: reference counts are atomic read-modify-writes, too dear per request).
    sink: Option<Arc<dyn Sink>>,
    /// [`Record::queue_to`] was called for this use of the record.
    pub(super) queued: bool,
    /// Unused (kept for the field-by-field reset's exhaustiveness).
    pub(super) shard: u32,
}

/// What a record starts from; strings are added with the `set_*` / `push_*` methods.
pub struct RecordHead {
    pub client: IpAddr,
    pub method: Method,
    pub version: Version,
    pub status: u16,
    pub decision: Decision,
    /// When the request arrived (the duration counts from here).
    pub started: Instant,
    /// Time to the response head.
    pub ttfb: Duration,
}

impl Record {
    /// A record with no strings yet; `capacity` is a hint for the text buffer.
    pub fn new(head: RecordHead, capacity: usize) -> Record {
        let ttfb = head.ttfb;
        Record {
            time: SystemTime::UNIX_EPOCH,
            client: head.client,
            method: head.method,
            version: head.version,
            status: head.status,
            bytes: 0,
            duration: ttfb,
            ttfb,
            decision: head.decision,
            complete: false,
            format: None,
            text: String::with_capacity(capacity),
            target: TextRange::default(),
            path: TextRange::default(),
            query: None,
            host: TextRange::default(),
            user_agent: None,
            backend: None,
            tls: None,
            vcl: None,
            site: None,
            esi_level: 0,
            esi_parent: None,
            request_headers: SmallVec::new(),
            response_headers: SmallVec::new(),
            started: head.started,
            sink: None,
            queued: false,
            shard: 0,
        }
    }

    /// Makes a used record new again, keeping its buffers' memory. Field by field (the
    /// destructuring makes a new field a compile error here), not a whole new `Record`
    /// moved over the old one.
    pub(super) fn reset(&mut self, head: RecordHead, capacity: usize) {
        let Record {
            time,
            client,
            method,
            version,
            status,
            bytes,
            duration,
            ttfb,
            decision,
            complete,
            format,
            text,
            target,
            path,
            query,
            host,
            user_agent,
            backend,
            tls,
            vcl,
            site,
            esi_level,
            esi_parent,
            request_headers,
            response_headers,
            started,
            sink: _,
            queued,
            shard,
        } = self;
        *time = SystemTime::UNIX_EPOCH;
        *client = head.client;
        *method = head.method;
        *version = head.version;
        *status = head.status;
        *bytes = 0;
        *duration = head.ttfb;
        *ttfb = head.ttfb;
        *decision = head.decision;
        *complete = false;
        let _ = format; // kept: see `set_format`
        text.clear();
        text.reserve(capacity);
        *target = TextRange::default();
        *path = TextRange::default();
        *query = None;
        *host = TextRange::default();
        *user_agent = None;
        *backend = None;
        *tls = None;
        *vcl = None;
        *site = None;
        *esi_level = 0;
        *esi_parent = None;
        request_headers.clear();
        response_headers.clear();
        *started = head.started;
        *queued = false;
        *shard = 0;
    }

    /// Where to queue this record when [`Record::finish`] is called. A reused record that
    /// already points there keeps its reference (no reference-count change).
    pub fn queue_to<S: Sink + 'static>(&mut self, sink: &Arc<S>) {
        if !self
            .sink
            .as_ref()
            .is_some_and(|r| std::ptr::addr_eq(Arc::as_ptr(r), Arc::as_ptr(sink)))
        {
            self.sink = Some(sink.clone());
        }
        self.queued = true;
    }

    /// Gives a record its sink back after [`Sink::queue`] (see there).
    pub(super) fn keep_sink(&mut self, sink: Arc<dyn Sink>) {
        self.sink = Some(sink);
    }

    /// Sets the access-log format (None: not logged, only for live readers), keeping the
    /// reference a reused record already holds when it is the same format.
    pub fn set_format(&mut self, format: Option<&Arc<Format>>) {
        let same = match (&self.format, format) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.format = format.cloned();
        }
    }

    /// Counts body bytes sent.
    #[inline]
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// The body reached its end.
    #[inline]
    pub fn ended(&mut self) {
        self.complete = true;
    }

    /// The body failed before its end (the backend reset or timed out mid-body, a disk read
    /// failed). A miss was announced as `stored` in the head already sent, but a fill that
    /// fails stores nothing: the record says what happened, `pass` with reason `aborted`.
    pub fn aborted(&mut self) {
        if self.decision.kind == DecisionKind::Miss {
            self.decision.kind = DecisionKind::Pass;
        }
        self.decision.reason = Some(Cow::Borrowed("aborted"));
    }

    /// Completes the record (`at_end`: the body had nothing left to send) and queues it.
    /// Lock-free; drops (and counts) when the worker's queue is full.
    pub fn finish(mut self: Box<Self>, at_end: bool) {
        self.complete |= at_end;
        self.duration = self.started.elapsed();
        if std::mem::take(&mut self.queued)
            && let Some(sink) = self.sink.take()
        {
            sink.queue(self);
        }
    }

    /// A record with fixed values, for tests.
    #[doc(hidden)]
    pub fn sample() -> Record {
        let mut r = Record::new(
            RecordHead {
                client: IpAddr::from([192, 0, 2, 1]),
                method: Method::GET,
                version: Version::HTTP_11,
                status: 200,
                decision: Decision {
                    kind: DecisionKind::Pass,
                    reason: Some(Cow::Borrowed("no-store")),
                },
                started: Instant::now(),
                ttfb: Duration::ZERO,
            },
            64,
        );
        r.time = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        r.set_uri(&Uri::from_static("/a/b?x=1"));
        r.set_host(b"example.com");
        r.set_user_agent(Some(b"curl/8.0"));
        r.set_backend(Some("app"));
        r.bytes = 1234;
        r.duration = Duration::from_micros(1500);
        r.ttfb = Duration::from_micros(250);
        r.complete = true;
        r
    }
}

/// The protocol as a request line ends with it.
pub(super) fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/?",
    }
}

/// `" HTTP/1.1"`: the end of a request line, with its space.
pub(super) fn protocol_with_space(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => " HTTP/0.9",
        Version::HTTP_10 => " HTTP/1.0",
        Version::HTTP_11 => " HTTP/1.1",
        Version::HTTP_2 => " HTTP/2.0",
        Version::HTTP_3 => " HTTP/3.0",
        _ => " HTTP/?",
    }
}
