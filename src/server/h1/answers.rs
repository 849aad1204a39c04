//! The fast-answer queue: requests answered without hyper from their validated, bodiless
//! head (fast hits), written before anything hyper writes.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use http_body::Body as _;
use smallvec::SmallVec;
use tokio::io::AsyncWrite;

use crate::clock::{DATE_LINE_LEN, date_line};

use super::conn::{PHASE_BUSY, PHASE_HEAD, PHASE_IDLE, note_write};
use super::{After, Answerer, Gate, Mode, Outgoing, Quiet};

/// Fast answers queued at most; a later request goes to hyper (whose writes wait for these).
const MAX_ANSWERS: usize = 16;

/// Body chunks gathered into one vectored write at most (a 21 MB object from memory is 336
/// chunks of 64 KiB: one system call per chunk cost a round through the body and the gate
/// each, and small writes to the socket).
const GATHER_CHUNKS: usize = 16;

/// Bytes gathered into one vectored write at most (what a loopback or LAN socket buffer takes
/// at once; more only waits in the slice list).
const GATHER_BYTES: usize = 1 << 20;

impl<T> Gate<T> {
    /// Lets `answerer` answer requests without hyper while hyper is idle ([`Answerer`]).
    /// The scanner then notes where each head's parts are, for the answerer to read.
    pub fn answer_with(&mut self, answerer: Box<dyn Answerer>) {
        self.scanner.keep_parts();
        self.answerer = Some(answerer);
    }

    /// Whether a head at the start of the bytes about to be scanned may be answered without
    /// hyper: the gate is parsing, at a head, with nothing queued for hyper, and hyper has
    /// dispatched every head it was given, has none in flight and has flushed everything it
    /// wrote — so the answer cannot overtake one of hyper's, and hyper's request numbering
    /// (refusals, upgrades) is untouched. Not while the session is closing.
    pub(super) fn may_answer(&self) -> bool {
        self.answerer.is_some()
            && self.mode == Mode::Scan
            && self.after == After::Continue
            && self.pending_pos >= self.pending.len()
            && self.scanner.at_head()
            && self.state.in_flight.load(Ordering::Relaxed) == 0
            && self.heads == self.state.requests.load(Ordering::Relaxed)
            && self.flushed_at == self.heads
            && !self.state.closing.load(Ordering::Relaxed)
    }

    /// Offers the head `head` (bodiless, no upgrade) to the answerer; queues the answer.
    pub(super) fn try_answer(&mut self, head: &[u8]) -> bool {
        if self.out.len() >= MAX_ANSWERS {
            return false;
        }
        let Some(a) = self
            .answerer
            .as_mut()
            .zip(self.scanner.parts())
            .and_then(|(x, parts)| x.answer(head, parts))
        else {
            return false;
        };
        let (date, date_len) = if a.add_date {
            (date_line(), DATE_LINE_LEN)
        } else {
            ([0; DATE_LINE_LEN], 0)
        };
        self.out.push_back(Outgoing {
            head: a.head,
            date,
            date_len,
            written: 0,
            body: a.body,
            chunks: SmallVec::new(),
            body_done: false,
        });
        // Busy until written: the idle and header timeouts do not run, the send timeout does.
        self.state.phase.store(PHASE_BUSY, Ordering::Relaxed);
        if self.out.len() == 1 {
            self.state.response_begins();
        }
        true
    }

    /// Writes the queued fast answers, in order: each one's head and `Date` line, then its
    /// body, in vectored writes. A body held in memory (every fast hit's: `ResponseBody::
    /// in_memory`) is written from the object's own chunks; any other is polled for chunks.
    /// An answer is dropped once written (its body then completes the transaction record);
    /// when the last is out and hyper has nothing in flight, the connection is idle again (or
    /// waiting for the rest of a held head).
    pub(super) fn poll_answers(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>
    where
        T: AsyncWrite + Unpin + Quiet,
    {
        while let Some(o) = self.out.front_mut() {
            let head_len = o.head.len() + o.date_len;
            if o.body.in_memory().is_none() {
                ready!(gather(o, cx))?;
            }
            let mut slices = [io::IoSlice::new(&[]); 2 + GATHER_CHUNKS];
            let mut k = head_slices(o, &mut slices);
            let in_memory = match o.body.in_memory() {
                Some((chunks, at)) => {
                    k += memory_slices(chunks, at, &mut slices[k..]);
                    true
                }
                None => {
                    for c in &o.chunks {
                        slices[k] = io::IoSlice::new(c);
                        k += 1;
                    }
                    false
                }
            };
            if k == 0 {
                if in_memory {
                    // Nothing left (a `HEAD`, an empty object): the record told the end.
                    o.body.sent_from_memory(0);
                } else if !o.body_done {
                    continue;
                }
                self.drop_written();
                continue;
            }
            let Some(io) = self.inner.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            };
            let polled = self.splice.poll_write(io, cx, &self.counters, &slices[..k]);
            note_write(&self.state, polled.is_pending(), &mut self.clock);
            let mut n = ready!(polled)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let of_head = (head_len - o.written).min(n);
            o.written += of_head;
            n -= of_head;
            if in_memory {
                o.body.sent_from_memory(n);
                // All of it out in this write (a small hit): dropped now, not on another turn.
                if o.written == head_len && o.body.in_memory().is_some_and(|(r, _)| r.is_empty()) {
                    self.drop_written();
                }
                continue;
            }
            let mut done = 0;
            for c in &mut o.chunks {
                let of_chunk = n.min(c.len());
                c.advance(of_chunk);
                n -= of_chunk;
                if !c.is_empty() {
                    break;
                }
                done += 1;
            }
            o.chunks.drain(..done);
        }
        // The answers are out only once the connection's pipe has sent them (`splice.rs`).
        ready!(self.poll_drain(cx))?;
        let state = &self.state;
        if state.in_flight.load(Ordering::Relaxed) == 0
            && state.phase.load(Ordering::Relaxed) == PHASE_BUSY
        {
            state.since_ms.store(self.clock.ms(), Ordering::Relaxed);
            let phase = if self.held.is_empty() {
                PHASE_IDLE
            } else {
                PHASE_HEAD
            };
            state.phase.store(phase, Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }

    /// Drops the first answer, written. Where it lies: `pop_front` moved the ~300-byte answer
    /// out first (a memcpy per hit, callgrind); a lone one by `clear`, without `drain`'s
    /// bookkeeping.
    #[inline]
    fn drop_written(&mut self) {
        if self.out.len() == 1 {
            self.out.clear();
        } else {
            self.out.drain(..1);
        }
    }
}

/// What is left of `o`'s head and `Date` line, as the first slices of a write; how many.
#[inline]
fn head_slices<'a>(o: &'a Outgoing, slices: &mut [io::IoSlice<'a>]) -> usize {
    let mut k = 0;
    if o.written < o.head.len() {
        slices[k] = io::IoSlice::new(&o.head[o.written..]);
        k += 1;
    }
    if o.written < o.head.len() + o.date_len {
        let at = o.written.saturating_sub(o.head.len());
        slices[k] = io::IoSlice::new(&o.date[at..o.date_len]);
        k += 1;
    }
    k
}

/// The stored chunks not yet sent (`chunks`, the first from `at`) as slices, up to one
/// vectored write's worth (`GATHER_CHUNKS`, `GATHER_BYTES`); how many.
#[inline]
fn memory_slices<'a>(chunks: &'a [Bytes], at: usize, slices: &mut [io::IoSlice<'a>]) -> usize {
    let mut gathered = 0;
    let mut k = 0;
    for (i, c) in chunks.iter().enumerate() {
        if k == slices.len() || gathered >= GATHER_BYTES {
            break;
        }
        let c = if i == 0 { &c[at..] } else { &c[..] };
        if c.is_empty() {
            continue;
        }
        slices[k] = io::IoSlice::new(c);
        gathered += c.len();
        k += 1;
    }
    k
}

/// Takes what a polled body (not one held in memory) has ready into `o.chunks`, up to one
/// vectored write's worth; pending only when nothing is gathered and the body waits.
fn gather(o: &mut Outgoing, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    let mut gathered: usize = o.chunks.iter().map(Bytes::len).sum();
    while !o.body_done && o.chunks.len() < GATHER_CHUNKS && gathered < GATHER_BYTES {
        match Pin::new(&mut o.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    gathered += data.len();
                    o.chunks.push(data);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                return Poll::Ready(Err(io::Error::other(e.to_string())));
            }
            Poll::Ready(None) => o.body_done = true,
            // Write what is there; the body wakes us when it has more.
            Poll::Pending if !o.chunks.is_empty() => break,
            Poll::Pending => return Poll::Pending,
        }
    }
    Poll::Ready(Ok(()))
}
