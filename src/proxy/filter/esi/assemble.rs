//! The ESI delivery filter: a page assembled from its program. Verbatim runs of the page's
//! body go out as they are, skipped runs do not, and each include's fragment goes out in its
//! place once fetched. The includes of the page are fetched concurrently, at most
//! `esi.concurrency` at a time, started in page order as earlier ones are emitted, and
//! emitted in page order: the page's bytes before its first include go out before any
//! fragment arrives, and a slow fragment holds back only what follows it. A fragment streams:
//! its chunks go out as they arrive when it is the next in page order; the ones after it
//! fetch at most `include::AHEAD` chunks ahead each, so a page holds a bounded amount of its
//! fragments whatever their size. An include answered without waiting (a stored fragment) is
//! read in place, with no task or channel, and is handed to a task only if its body stalls.
//!
//! A stored object brings its program (parsed once, at fetch); a response streamed while it
//! is fetched (the fetching client's, a waiter's, a pass) has none yet, so its body is parsed
//! here as it arrives ([`Assemble::parse`]): each piece's steps run as soon as nothing after
//! them can change them, so the page's first bytes go out before its last ones are fetched,
//! and only the pieces not walked yet are held (at most [`READ_AHEAD`] bytes read ahead of
//! the client, plus what a step still needs).
//!
//! A fragment that fails (and its `alt` too) is left out with `onerror="continue"`; otherwise,
//! before the page's first byte went out, the page fails ([`PageFailed`]: the request machine
//! answers 503, `prime`); after it, it is left out or the response is cut (`esi.late_failure`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap};
use tokio::sync::mpsc;

use super::super::{BodyFilter, Chunks, Effect, FilterError};
use super::fetch::{self, Start};
use super::include::{AHEAD, Failure, Item, Page};
use super::parse::options;
use super::task::{Source, Task};
use crate::config::esi::LateFailure;
use crate::esi::{Include, Op, Parser, Program};

/// The page failed before its first byte went out: answered 503 instead.
#[derive(Debug, thiserror::Error)]
#[error("an ESI include failed before the page's first byte")]
pub struct PageFailed;

/// A late fragment failure with `esi.late_failure = "abort"`: the response is cut.
#[derive(Debug, thiserror::Error)]
#[error("an ESI include failed after the page's first byte (esi.late_failure = abort)")]
pub struct LateFailed;

/// Bytes of a page parsed here read ahead of what its steps have sent: a small page is read
/// (and its includes known) whole before its head goes out.
pub const READ_AHEAD: usize = 64 * 1024;

/// Where the page's body comes from.
enum Input {
    /// The stored body, read from the stage before.
    Stream,
    /// Parsed here as it arrives (no program yet): the parser until the body's end, and the
    /// pieces read but not walked yet.
    Parsing {
        parser: Option<Box<Parser>>,
        chunks: VecDeque<Bytes>,
        /// Bytes in `chunks`.
        held: usize,
        /// The body's length as the origin gave it: the page's, if it holds no ESI.
        len: Option<u64>,
        /// Every include of the page is known (the page's freshness settled for them).
        known: bool,
    },
}

/// The assembly filter.
pub struct Assemble {
    page: Arc<Page>,
    input: Input,
    ops: VecDeque<Op>,
    /// Includes not started yet, in page order.
    waiting: VecDeque<Include>,
    /// For each of `waiting`: no stored copy was found (`Page::peek`).
    unknown: VecDeque<bool>,
    /// Includes started, in page order; the front is the next `Op::Include`.
    tasks: VecDeque<Task>,
    /// What is left of the chunk being cut into runs.
    current: Bytes,
    /// Fragment chunks ready to go out.
    out: VecDeque<Bytes>,
    /// Something went out (a failure now is late).
    emitted: bool,
    /// A late failure held back one turn, so that what went out before it is written first:
    /// hyper writes a response's head with its first body bytes, and a body error polled
    /// before that flush drops both (the client would see an empty reply, which browsers
    /// send again).
    cut: Option<FilterError>,
    counted: bool,
}

impl Assemble {
    /// A stored page with its program.
    pub fn stored(page: Arc<Page>, program: Program) -> Assemble {
        let mut a = Assemble::new(page, Input::Stream);
        a.start(program);
        a
    }

    /// A page whose program is not known yet: parsed as its body arrives. `url`: its
    /// request target, relative includes resolve against it; `len`: the body's length if
    /// known. Until the parse ends, the includes still to come are unknown to the page's
    /// freshness (`Page::peek`): a head sent before then says `no-cache`.
    pub fn parse(page: Arc<Page>, url: &str, len: Option<u64>) -> Assemble {
        let parser = Parser::new(url, options(&page.proxy.config.esi));
        if let Ok(mut f) = page.freshness.lock() {
            f.unknown += 1;
        }
        Assemble::new(
            page,
            Input::Parsing {
                parser: Some(Box::new(parser)),
                chunks: VecDeque::new(),
                held: 0,
                len,
                known: false,
            },
        )
    }

    fn new(page: Arc<Page>, input: Input) -> Assemble {
        Assemble {
            page,
            input,
            ops: VecDeque::new(),
            waiting: VecDeque::new(),
            unknown: VecDeque::new(),
            tasks: VecDeque::new(),
            current: Bytes::new(),
            out: VecDeque::new(),
            emitted: false,
            cut: None,
            counted: false,
        }
    }

    /// The program to run: its includes queued, the body walked from its first byte.
    fn start(&mut self, program: Program) {
        self.count();
        self.extend(program.ops);
    }

    /// The page counted as assembled, once.
    fn count(&mut self) {
        if !self.counted {
            self.counted = true;
            self.page.proxy.counters.esi_pages.inc();
        }
    }

    /// More steps to run: their includes queued, with what the stored fragments say about
    /// freshness (before the page's head goes out).
    fn extend(&mut self, ops: Vec<Op>) {
        for op in &ops {
            if let Op::Include(include) = op {
                if !self.page.at_depth_limit() {
                    self.unknown.push_back(!self.page.peek(include));
                }
                self.waiting.push_back(include.clone());
            }
        }
        self.ops.extend(ops);
    }

    /// Starts includes while fewer than `esi.concurrency` are in flight. One answered at
    /// once (a stored fragment) is read in place; one that has to wait is fetched in a task.
    fn top_up(&mut self) {
        let limit = self.page.proxy.config.esi.concurrency.max(1) as usize;
        while self.tasks.len() < limit {
            let Some(include) = self.waiting.pop_front() else {
                return;
            };
            if self.page.at_depth_limit() {
                self.page.proxy.counters.esi_depth_limited.inc();
                if let Some(v) = &self.page.vsl {
                    v.0.log(
                        "VCL_Error",
                        format!(
                            "ESI depth limit reached (param max_esi_depth = {})",
                            self.page.proxy.config.esi.max_depth
                        ),
                    );
                }
                tracing::debug!(
                    level = self.page.level,
                    "ESI depth limit reached (esi.max_depth)"
                );
                self.tasks.push_back(Task::settled(Item::End));
                continue;
            }
            let unknown = self.unknown.pop_front().unwrap_or(false);
            let task = match fetch::start(&self.page, &include) {
                Start::Later(later) => {
                    let (tx, items) = mpsc::channel(AHEAD);
                    let fetch = fetch::fetch(self.page.clone(), include, later, unknown, tx);
                    self.tasks.push_back(Task {
                        source: Source::Items(items),
                        handle: Some(tokio::spawn(fetch)),
                    });
                    continue;
                }
                Start::Body(body) => Task {
                    source: Source::Body(Box::new((include, Mutex::new(body)))),
                    handle: None,
                },
                Start::Failed(failure) => Task::settled(Item::Failed(failure)),
            };
            // Its freshness is known now (folded into the page's, or it failed).
            if unknown {
                self.page.settled();
            }
            self.tasks.push_back(task);
        }
    }

    /// The next chunk of the page's body to walk.
    fn next_input(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        match &mut self.input {
            Input::Stream => input.poll_chunk(cx),
            // Steps cover only bytes read: they are here.
            Input::Parsing { chunks, held, .. } => {
                let chunk = chunks.pop_front();
                *held -= chunk.as_ref().map_or(0, Bytes::len);
                Poll::Ready(chunk.map(Ok))
            }
        }
    }

    /// Bytes read and not walked yet, of a page parsed here.
    fn held(&self) -> usize {
        match &self.input {
            Input::Parsing { held, .. } => *held,
            Input::Stream => 0,
        }
    }

    /// Whether the body is still being read and parsed here.
    fn parsing(&self) -> bool {
        matches!(
            &self.input,
            Input::Parsing {
                parser: Some(_),
                ..
            }
        )
    }

    /// Reads and parses the next piece of a page parsed here; its ready steps join the
    /// program. `Ready(Ok)` also once the body ended (or when nothing is parsed here).
    fn poll_parse(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Result<(), FilterError>> {
        let Input::Parsing {
            parser: slot @ Some(_),
            chunks,
            held,
            len,
            known,
        } = &mut self.input
        else {
            return Poll::Ready(Ok(()));
        };
        let Some(parser) = slot.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let (ops, done) = match input.poll_chunk(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
            Poll::Ready(Some(Ok(chunk))) => {
                parser.feed(&chunk);
                *held += chunk.len();
                chunks.push_back(chunk);
                (parser.take_ready(), false)
            }
            Poll::Ready(None) => (parser.end(), true),
        };
        let found = parser.found();
        let not_xml = parser.not_xml();
        // All includes known: the body ended, or it is not XML (sent as it is).
        let settles = !*known && (done || not_xml);
        // The page's length is its body's when it holds no ESI: the head can say it
        // (`prime`).
        let length = match (found, done, *len) {
            (false, true, n) => Some(n.unwrap_or(parser.read())),
            (false, false, Some(n)) if not_xml => Some(n),
            _ => None,
        };
        *known |= settles;
        if done {
            *slot = None;
        }
        if settles {
            self.page.settled();
        }
        if let (Some(n), Ok(mut l)) = (length, self.page.length.lock()) {
            *l = Some(n);
        }
        if found {
            self.page.decide(super::include::VERDICT_ESI);
            self.count();
        } else if done || not_xml {
            self.page.decide(super::include::VERDICT_NONE);
        }
        self.extend(ops);
        Poll::Ready(Ok(()))
    }

    /// A failed include: left out, or the page's failure (early), or the response cut (late).
    fn failed(&mut self, failure: Failure) -> Result<(), FilterError> {
        let counters = &self.page.proxy.counters;
        let Failure::Failed { continue_on_error } = failure;
        if continue_on_error {
            counters.esi_include_dropped.inc();
            return Ok(());
        }
        if !self.emitted {
            counters.esi_page_failed.inc();
            return Err(Box::new(PageFailed));
        }
        match self.page.proxy.config.esi.late_failure {
            LateFailure::Drop => {
                counters.esi_include_dropped.inc();
                Ok(())
            }
            LateFailure::Abort => Err(Box::new(LateFailed)),
        }
    }
}

impl BodyFilter for Assemble {
    fn name(&self) -> &'static str {
        "esi"
    }

    fn effect(&self, _status: StatusCode, _fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: true,
            storable: true,
        }
    }

    /// The program field goes; so do the validators and `Accept-Ranges`: the assembled
    /// bytes are not the stored ones, and change with the fragments.
    fn head(&mut self, fields: &mut HeaderMap) {
        fields.remove(super::FIELD);
        fields.remove(header::ETAG);
        fields.remove(header::LAST_MODIFIED);
        fields.remove(header::ACCEPT_RANGES);
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if let Some(e) = self.cut.take() {
            return Poll::Ready(Some(Err(e)));
        }
        // Turned off before anything was read (`prime`): the body as it is.
        if !self.emitted
            && self.current.is_empty()
            && self.page.off.load(std::sync::atomic::Ordering::Relaxed)
        {
            self.tasks.clear();
            // What was read ahead while the policy waited (`prime::settle`) goes first.
            if let Input::Parsing { chunks, held, .. } = &mut self.input
                && let Some(chunk) = chunks.pop_front()
            {
                *held -= chunk.len();
                return Poll::Ready(Some(Ok(chunk)));
            }
            return input.poll_chunk(cx);
        }
        // A page parsed here is read ahead while its pieces are there (a small one whole,
        // its includes known before its head goes out), up to READ_AHEAD bytes.
        while self.parsing() && self.held() < READ_AHEAD {
            match self.poll_parse(cx, input) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Ok(())) => {}
            }
        }
        if self.parsing() && self.held() >= READ_AHEAD {
            // No answer in the bytes read ahead: parsed (and reported) as an ESI page.
            self.page.decide(super::include::VERDICT_ESI);
        }
        // The policy waits for the verdict before its deliver step (`prime::settle`): no
        // include starts before it ran (it may turn the assembly off). The wait's waker
        // is the input's (read ahead above) until the verdict is known.
        if self.page.hold.load(std::sync::atomic::Ordering::Relaxed) {
            return Poll::Pending;
        }
        loop {
            if let Some(chunk) = self.out.pop_front() {
                self.emitted = true;
                return Poll::Ready(Some(Ok(chunk)));
            }
            self.top_up();
            let parsing = self.parsing();
            let (n, verbatim) = match self.ops.front_mut() {
                // The steps so far are run: the next piece brings more, if any.
                None if parsing => match self.poll_parse(cx, input) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(Ok(())) => continue,
                },
                None => return Poll::Ready(None),
                Some(Op::Include(_)) => {
                    let Some(task) = self.tasks.front_mut() else {
                        // Cannot happen: includes are started in page order.
                        self.ops.pop_front();
                        continue;
                    };
                    // The fragment's chunks go out as they arrive.
                    let item = match task.poll_item(cx, &self.page) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Item::Chunk(chunk)) => {
                            self.out.push_back(chunk);
                            continue;
                        }
                        Poll::Ready(item) => item,
                    };
                    self.tasks.pop_front();
                    self.ops.pop_front();
                    if let Item::Failed(failure) = item
                        && let Err(e) = self.failed(failure)
                    {
                        if !self.emitted {
                            return Poll::Ready(Some(Err(e)));
                        }
                        // Late: the error at the next poll, after the writer's flush.
                        self.cut = Some(e);
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    continue;
                }
                Some(Op::Verbatim(n)) => (n, true),
                Some(Op::Skip(n)) => (n, false),
            };
            if *n == 0 {
                self.ops.pop_front();
                continue;
            }
            if self.current.is_empty() {
                match self.next_input(cx, input) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(Some(Ok(chunk))) => {
                        self.current = chunk;
                        continue;
                    }
                    // The body ended short of its program: what there is went out.
                    Poll::Ready(None) => return Poll::Ready(None),
                }
            }
            let take = (*n).min(self.current.len() as u64);
            *n -= take;
            let run = self.current.split_to(take as usize);
            if *n == 0 {
                self.ops.pop_front();
            }
            if verbatim && !run.is_empty() {
                self.out.push_back(run);
            }
        }
    }
}
