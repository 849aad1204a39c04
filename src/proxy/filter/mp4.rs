//! MP4 pseudo-streaming (nginx's `mp4` module), a delivery filter: a request for an MP4
//! file with `?start=SECONDS` is answered with the file cut at the keyframe at or before that
//! time — `ftyp`, a rewritten `moov`, an `mdat` header, then the media data from the first
//! kept sample (`crate::mp4`); with `&end=SECONDS` (or `end` alone), each track's tables end
//! before its first sample at or after that time and the data ends with the last kept
//! sample. Like FLV seeks (`flv.rs`), the `start` and `end` arguments are taken off the
//! request before the cache key, so every seek is cut from the one stored file or from one
//! fetch of it.
//!
//! The file's first bytes are held until its `moov` and the `mdat` header after it are in
//! (at most `mp4_max_moov_size`). A file whose `moov` comes after its `mdat` (not "fast
//! start") is held as it streams (from the origin, not stored yet, or passed) until its `moov`
//! is in, everything up to the `moov`'s end at most `mp4_max_moov_size` (`mp4_gather.rs`), and
//! cut from what is held; the answer is then the media data up to the end of the `mdat` (the
//! old `moov` is not sent). Every byte held counts against the process's bound
//! (`server.mp4_moov_memory`, `mp4/held.rs`): a seek that would pass it is sent whole
//! (`mp4_seek_memory`). The response head is on its way before any of this, so a file that
//! cannot be cut — larger than the bound, damaged, fragmented — is sent whole, as it is, with
//! a log line and the counter `mp4_seek_whole` (nginx answers 500 for a damaged file: a player
//! then shows an error instead of playing from the start).
//!
//! A stored copy is cut before its head instead (`mp4_precut.rs`, `Txn::mp4_cut`: its `moov`
//! read out of order as nginx reads the file, off the async threads), by the same rules — a
//! `moov` after the `mdat` only when it ends within `mp4_max_moov_size`, so a miss and the
//! hits after it answer alike — and the filter is given the cut (`with_cut`): its length is
//! known, so a `Range` is cut from the answer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap};

use super::mp4_gather::{Gathered, Gathering};
use super::{BodyFilter, Chunks, Effect, FilterError, seek};
use crate::mp4::held::Hold;
use crate::mp4::{self, Bad, Cut, Late, Scan};
use crate::stats::Counters;

/// `start=SECONDS` of a query (the last one), when it is a positive number of seconds
/// (`12`, `12.5`).
pub fn start_of(query: &str) -> Option<f64> {
    seconds(seek::start_arg(query)?)
}

/// `end=SECONDS` of a query (the last one), when it is a positive number of seconds.
pub fn end_of(query: &str) -> Option<f64> {
    let value = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("end="))
        .next_back()?;
    seconds(value)
}

/// Whether the query's `start` (the last one) is a number of seconds that is zero (`0`,
/// `0.0`): from the beginning, the file as it is — still a seek, looked up and stored
/// without it, so a player's first `?start=0` shares the one stored copy.
pub fn starts_at_zero(query: &str) -> bool {
    seek::start_arg(query).is_some_and(|v| {
        !v.is_empty()
            && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && v.parse::<f64>().is_ok_and(|s| s == 0.0)
    })
}

fn seconds(value: &str) -> Option<f64> {
    Some(value)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|&s| s.is_finite() && s > 0.0)
}

/// A query without its `start` and `end` arguments (`None`: nothing left).
pub fn without_span(query: &str) -> Option<String> {
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            !pair.is_empty()
                && !["start", "end"]
                    .iter()
                    .any(|a| pair == a || pair.strip_prefix(a).is_some_and(|r| r.starts_with('=')))
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

/// Why a seek is sent whole when the process's bound on held bytes is reached.
const MEMORY: &str = "server.mp4_moov_memory is reached: the moov is not held";

enum State {
    /// The file's first bytes, until its moov can be cut.
    Holding(Vec<u8>),
    /// The moov after the mdat looked for in the body as it streams; everything held.
    Gathering(Box<Gathering>),
    /// Cut: input bytes still to drop before the kept media data.
    Skipping(u64),
    /// Everything else as it comes.
    Passing,
}

/// The filter of one request seeking to `start` seconds (0: from the beginning), up to
/// `end`.
pub struct Mp4 {
    start: f64,
    end: Option<f64>,
    /// With an end: the media bytes still to send once cut.
    left: Option<u64>,
    max: usize,
    state: State,
    out: VecDeque<Bytes>,
    counters: Arc<Counters>,
    url: String,
    /// The body's length, when known (`u64::MAX`: unknown).
    len: u64,
    /// Its share of the process's bound on held bytes (`server.mp4_moov_memory`); `None`:
    /// unbounded (unit tests).
    hold: Option<Hold>,
    /// The answer's length, when the cut was made up front (`with_cut`).
    length: Option<u64>,
}

impl Mp4 {
    pub fn new(
        (start, end): (f64, Option<f64>),
        max: usize,
        counters: Arc<Counters>,
        url: String,
    ) -> Mp4 {
        Mp4 {
            start,
            end,
            left: None,
            max,
            state: State::Holding(Vec::new()),
            out: VecDeque::new(),
            counters,
            url,
            len: u64::MAX,
            hold: None,
            length: None,
        }
    }

    /// The cut made up front (`mp4_precut.rs`): the new head, then the input's bytes
    /// `from .. to`; the answer's length is known (`BodyFilter::output`).
    pub fn with_cut(mut self, cut: super::mp4_precut::Precut) -> Mp4 {
        self.length = Some(cut.len());
        self.left = Some(cut.to - cut.from);
        self.out.push_back(cut.head);
        self.state = State::Skipping(cut.from);
        self
    }

    /// Holds the file's first bytes under the process's bound (`mp4/held.rs`).
    pub fn with_hold(mut self, hold: Hold) -> Mp4 {
        self.hold = Some(hold);
        self
    }

    /// Whether `total` bytes may be held: `false` when the process's bound is reached
    /// (counted in `mp4_seek_memory`; the caller sends what it holds whole).
    fn may_hold(&mut self, total: u64) -> bool {
        let ok = self.hold.as_mut().is_none_or(|h| h.grow_to(total));
        if !ok {
            self.counters.mp4_seek_memory.inc();
        }
        ok
    }

    /// Nothing is held any more.
    fn release(&mut self) {
        if let Some(h) = self.hold.as_mut() {
            h.release();
        }
    }

    /// The body's length, when known.
    pub fn with_length(mut self, len: Option<u64>) -> Mp4 {
        self.len = len.unwrap_or(u64::MAX);
        self
    }

    /// Whether a response of this status and fields is cut.
    pub fn applies(status: StatusCode, fields: &HeaderMap) -> bool {
        status == StatusCode::OK && !fields.contains_key(header::CONTENT_ENCODING)
    }

    /// The held bytes go out as they are; the rest follows.
    fn whole(&mut self, held: Vec<u8>, why: &str) {
        self.whole_chunks(vec![Bytes::from(held)], why);
    }

    /// The held chunks go out as they are; the rest follows.
    fn whole_chunks(&mut self, held: Vec<Bytes>, why: &str) {
        self.counters.mp4_seek_whole.inc();
        tracing::warn!(url = %self.url, reason = why, "mp4 seek: the file is sent whole");
        self.out.extend(held.into_iter().filter(|b| !b.is_empty()));
        self.state = State::Passing;
        self.release();
    }

    /// Looks at the held bytes again; cuts when the moov is in.
    fn decide(&mut self, held: Vec<u8>) {
        if !self.may_hold(held.len() as u64) {
            return self.whole(held, MEMORY);
        }
        match mp4::scan(&held, self.max) {
            Scan::More(_) => self.state = State::Holding(held),
            Scan::MoovAfterMdat(late) => self.find(held, late),
            Scan::Bad(b) => self.whole(held, b.0),
            Scan::Ready(layout) => {
                let cut = mp4::cut_span(&held, &layout, self.start, self.end);
                self.apply(held, cut, self.end.is_some());
            }
        }
    }

    /// A moov after the mdat: the body held as it streams until the moov is in
    /// (`mp4_gather.rs`).
    fn find(&mut self, held: Vec<u8>, late: Late) {
        match late.after_mdat() {
            Ok(at) => self.gather(Box::new(Gathering::new(held, late, at))),
            Err(b) => self.whole(held, b.0),
        }
    }

    /// Looks for the moov after the mdat in the bytes held so far; cuts from them once it
    /// is in.
    fn gather(&mut self, mut g: Box<Gathering>) {
        match g.step(self.len, self.max) {
            Gathered::More if g.held() > self.max as u64 => {
                self.whole_chunks(g.into_chunks(), crate::mp4::late::PAST_REACH);
            }
            Gathered::More if !self.may_hold(g.held()) => {
                self.whole_chunks(g.into_chunks(), MEMORY);
            }
            Gathered::More => self.state = State::Gathering(g),
            Gathered::Bad(why) => self.whole_chunks(g.into_chunks(), why),
            Gathered::Moov(moov) => match g.late.cut(&g.first, &moov, self.start, self.end) {
                Ok(Some(cut)) => {
                    self.out.push_back(Bytes::from(cut.head));
                    let to = cut.to.unwrap_or(g.held()).min(g.held());
                    self.out.extend(g.range(cut.from, to));
                    // Nothing after the mdat's data is sent: the rest is not read.
                    self.left = Some(0);
                    self.state = State::Passing;
                    self.release();
                }
                Ok(None) => {
                    self.out.extend(g.into_chunks());
                    self.state = State::Passing;
                    self.release();
                }
                Err(b) => self.whole_chunks(g.into_chunks(), b.0),
            },
        }
    }

    /// Sends what `cut` says of the held bytes and the rest: the head and the data from its
    /// first kept sample (`bounded`: only up to `to`), or the file as it is.
    fn apply(&mut self, held: Vec<u8>, cut: Result<Option<Cut>, Bad>, bounded: bool) {
        self.release();
        match cut {
            Ok(Some(cut)) => {
                self.out.push_back(Bytes::from(cut.head));
                if bounded {
                    self.left = cut.to.map(|to| to.saturating_sub(cut.from));
                }
                let have = held.len() as u64;
                if cut.from < have {
                    let rest = Bytes::from(held).slice(cut.from as usize..);
                    if let Some(rest) = self.limit(rest) {
                        self.out.push_back(rest);
                    }
                    self.state = State::Passing;
                } else {
                    self.state = State::Skipping(cut.from - have);
                }
            }
            Ok(None) => {
                if !held.is_empty() {
                    self.out.push_back(Bytes::from(held));
                }
                self.state = State::Passing;
            }
            Err(b) => self.whole(held, b.0),
        }
    }
}

impl Mp4 {
    /// `chunk` of the media data, cut to what is left to send before the end.
    fn limit(&mut self, chunk: Bytes) -> Option<Bytes> {
        let Some(left) = self.left.as_mut() else {
            return Some(chunk);
        };
        let take = (chunk.len() as u64).min(*left);
        *left -= take;
        (take > 0).then(|| chunk.slice(..take as usize))
    }
}

impl BodyFilter for Mp4 {
    fn name(&self) -> &'static str {
        "mp4"
    }

    fn effect(&self, _status: StatusCode, _fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: true,
            storable: true,
        }
    }

    fn output(&self, _fields: &HeaderMap) -> Option<super::Output> {
        self.length
            .map(|length| super::Output { length, etag: None })
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Some(Ok(b)));
            }
            if self.left == Some(0) {
                // Past the end: the rest of the file is not read.
                return Poll::Ready(None);
            }
            let polled = std::task::ready!(input.poll_chunk(cx));
            if matches!(self.state, State::Gathering(_))
                && let State::Gathering(mut g) = std::mem::replace(&mut self.state, State::Passing)
            {
                match polled {
                    Some(Ok(chunk)) => {
                        g.push(chunk);
                        self.gather(g);
                    }
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => {
                        self.whole_chunks(g.into_chunks(), "the file ends before its moov");
                        if self.out.is_empty() {
                            return Poll::Ready(None);
                        }
                    }
                }
                continue;
            }
            match (&mut self.state, polled) {
                (_, Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                (State::Gathering(_), _) => {}
                (State::Holding(held), None) => {
                    let held = std::mem::take(held);
                    self.whole(held, "the file ends before its moov");
                    if self.out.is_empty() {
                        return Poll::Ready(None);
                    }
                }
                (_, None) => return Poll::Ready(None),
                (State::Holding(held), Some(Ok(chunk))) => {
                    let mut held = std::mem::take(held);
                    held.extend_from_slice(&chunk);
                    self.decide(held);
                }
                (State::Skipping(left), Some(Ok(chunk))) => {
                    if let Some(rest) = seek::skip(chunk, left) {
                        self.state = State::Passing;
                        if let Some(rest) = self.limit(rest) {
                            return Poll::Ready(Some(Ok(rest)));
                        }
                    }
                }
                (State::Passing, Some(Ok(chunk))) => {
                    if let Some(chunk) = self.limit(chunk) {
                        return Poll::Ready(Some(Ok(chunk)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "mp4_tests.rs"]
mod tests;
