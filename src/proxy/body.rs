//! The response body type sent to clients: one enum, no boxing, for every way a response is
//! produced (cached object, busy object being filled, backend stream, generated).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::chunks::Chunks;
use crate::backend::BackendBody;
use crate::cache::busy::{BusyReader, ChunkPoll};
use crate::cache::disk::DiskReader;
use crate::cache::{Body as StoredBody, Object};
use crate::stats::Counters;
use crate::txlog::Record;

mod memory;

/// Error surfaced to hyper when a body cannot be completed (the client connection is then
/// closed, which is how HTTP/1.1 signals a truncated response).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

enum Kind {
    Empty,
    Full(Option<Bytes>),
    Object {
        object: Arc<Object>,
        next: usize,
        /// Bytes of chunk `next` already sent (`sent_from_memory`; `poll_frame` takes whole
        /// chunks).
        at: usize,
        remaining: u64,
    },
    /// Pieces of stored bodies (ranges, multipart).
    Parts {
        parts: Vec<Bytes>,
        next: usize,
        remaining: u64,
    },
    /// A window of another body: skip `skip` bytes, then pass `take` bytes (a Range on a miss).
    Slice {
        inner: Box<ResponseBody>,
        skip: u64,
        take: u64,
    },
    Busy {
        reader: BusyReader,
        remaining: Option<u64>,
    },
    /// A large object streamed from the disk tier, chunk by verified chunk.
    Disk {
        reader: Box<DiskReader>,
        remaining: u64,
    },
    /// Boxed, like the disk reader: the body is moved with its response through every step of
    /// a request, and these two would make every response 72 bytes larger (bench/RESULTS.md).
    Backend(Box<BackendBody>),
    /// Several bodies, one after the other (held pieces around fetched bytes). Boxed like the
    /// two above: rare, and a queue inline would make every body larger.
    Chain(Box<Chain>),
    /// Another body through body filters (`proxy/filter`). Boxed: only filtered responses
    /// pay for it.
    Filtered(Box<dyn Chunks + Send>),
}

/// The bodies of a `Kind::Chain`, the one being sent first.
struct Chain {
    bodies: std::collections::VecDeque<ResponseBody>,
}

/// Told once when a response body is finished or dropped (e.g. connection bookkeeping).
pub trait OnDone: Send + Sync {
    fn done(&self);
}

/// A response body on its way to a client. Counts `s_resp_bytes`; completes the transaction
/// record (bytes sent, duration) when it ends or is dropped.
pub struct ResponseBody {
    kind: Kind,
    counters: Option<Arc<Counters>>,
    /// Boxed: most responses carry none, and the body sits in every `Step::Deliver`.
    record: Option<Box<Record>>,
    /// Shared, not boxed: what is told is already behind an `Arc` (the connection's state),
    /// so attaching it costs no allocation per response.
    on_done: Option<Arc<dyn OnDone>>,
}

impl ResponseBody {
    fn new(kind: Kind) -> ResponseBody {
        ResponseBody {
            kind,
            counters: None,
            record: None,
            on_done: None,
        }
    }

    pub fn empty() -> ResponseBody {
        ResponseBody::new(Kind::Empty)
    }

    pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
        ResponseBody::new(Kind::Full(Some(bytes.into())))
    }

    pub fn object(object: Arc<Object>) -> ResponseBody {
        let remaining = object.body_len;
        if let StoredBody::Disk(disk) = &object.body {
            return ResponseBody::new(Kind::Disk {
                reader: Box::new(DiskReader::new((**disk).clone())),
                remaining,
            });
        }
        ResponseBody::new(Kind::Object {
            object,
            next: 0,
            at: 0,
            remaining,
        })
    }

    pub fn parts(parts: Vec<Bytes>) -> ResponseBody {
        let remaining = parts.iter().map(|p| p.len() as u64).sum();
        ResponseBody::new(Kind::Parts {
            parts,
            next: 0,
            remaining,
        })
    }

    /// Bytes `skip..skip + take` of `inner`.
    pub fn slice(inner: ResponseBody, skip: u64, take: u64) -> ResponseBody {
        ResponseBody::new(Kind::Slice {
            inner: Box::new(inner),
            skip,
            take,
        })
    }

    pub fn busy(reader: BusyReader, content_length: Option<u64>) -> ResponseBody {
        ResponseBody::new(Kind::Busy {
            reader,
            remaining: content_length,
        })
    }

    pub fn backend(body: BackendBody) -> ResponseBody {
        ResponseBody::new(Kind::Backend(Box::new(body)))
    }

    /// A body read through body filters (`proxy/filter`).
    pub fn filtered(filtered: impl Chunks + Send + 'static) -> ResponseBody {
        ResponseBody::new(Kind::Filtered(Box::new(filtered)))
    }

    /// `bodies`, one after the other.
    pub fn chain(bodies: Vec<ResponseBody>) -> ResponseBody {
        ResponseBody::new(Kind::Chain(Box::new(Chain {
            bodies: bodies.into(),
        })))
    }

    /// The switch of a files origin's body that reaches the client as the origin gave it
    /// (nothing stored, filtered, sliced or chained around it): its file parts may then go
    /// out by sendfile(2) (`backend/files/zero_copy.rs`).
    pub(crate) fn zero_copy(&self) -> Option<&Arc<crate::backend::ZeroCopy>> {
        match &self.kind {
            Kind::Backend(b) => b.zero_copy(),
            _ => None,
        }
    }

    /// Counts body bytes sent into `counters.s_resp_bytes`.
    pub fn counted(mut self, counters: Arc<Counters>) -> ResponseBody {
        self.counters = Some(counters);
        self
    }

    /// Completes and queues `record` when the body ends or is dropped.
    pub fn recorded(mut self, record: Box<Record>) -> ResponseBody {
        self.record = Some(record);
        self
    }

    /// Takes the transaction record back (it is then not queued when this body ends).
    pub fn take_record(&mut self) -> Option<Box<Record>> {
        self.record.take()
    }

    /// Tells `on_done` once the body is finished or dropped.
    pub fn with_on_done(mut self, on_done: Arc<dyn OnDone>) -> ResponseBody {
        self.on_done = Some(on_done);
        self
    }
}

impl ResponseBody {
    /// A polled chunk counted (`s_resp_bytes`, the record's bytes) as a data frame; an error
    /// or the end told to the record.
    #[inline]
    fn account(
        &mut self,
        polled: Poll<Option<Result<Bytes, BodyError>>>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match polled {
            Poll::Ready(Some(Ok(data))) => {
                if let Some(c) = &self.counters {
                    c.s_resp_bytes.add(data.len() as u64);
                }
                if let Some(r) = &mut self.record {
                    r.add_bytes(data.len() as u64);
                }
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(r) = &mut self.record {
                    r.aborted();
                }
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                if let Some(r) = &mut self.record {
                    r.ended();
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The next chunk of the `take` bytes after the first `skip` of `inner` (a Range piece of a
/// body streamed as it is fetched).
#[inline]
fn poll_slice(
    inner: &mut ResponseBody,
    skip: &mut u64,
    take: &mut u64,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Bytes, BodyError>>> {
    loop {
        if *take == 0 {
            return Poll::Ready(None);
        }
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let Ok(mut data) = frame.into_data() else {
                    continue;
                };
                let n = data.len() as u64;
                if *skip >= n {
                    *skip -= n;
                    continue;
                }
                let _ = data.split_to(*skip as usize);
                *skip = 0;
                if data.len() as u64 > *take {
                    data.truncate(*take as usize);
                }
                *take -= data.len() as u64;
                return Poll::Ready(Some(Ok(data)));
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// The next data of a backend's body (trailers dropped).
#[inline]
fn poll_backend(
    body: &mut BackendBody,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Bytes, BodyError>>> {
    loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => return Poll::Ready(Some(Ok(data))),
                // Trailers are not forwarded in HTTP/1.1 responses we re-frame.
                Err(_) => continue,
            },
            Poll::Ready(Some(Err(e))) => {
                return Poll::Ready(Some(Err(BodyError(e.to_string()))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// The next data of a chain of bodies, one after the other.
#[inline]
fn poll_chain(chain: &mut Chain, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
    loop {
        let Some(front) = chain.bodies.front_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(front).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => return Poll::Ready(Some(Ok(data))),
                Err(_) => continue,
            },
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => {
                chain.bodies.pop_front();
            }
            Poll::Pending => return Poll::Pending,
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        let polled: Poll<Option<Result<Bytes, BodyError>>> = match &mut this.kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Full(b) => Poll::Ready(b.take().map(Ok)),
            Kind::Object {
                object,
                next,
                at,
                remaining,
            } => match memory_chunk(object, *next) {
                Some(chunk) => {
                    let chunk = match std::mem::take(at) {
                        0 => chunk.clone(),
                        at => chunk.slice(at..),
                    };
                    *next += 1;
                    *remaining -= chunk.len() as u64;
                    Poll::Ready(Some(Ok(chunk)))
                }
                None => Poll::Ready(None),
            },
            Kind::Parts {
                parts,
                next,
                remaining,
            } => match parts.get(*next) {
                Some(p) => {
                    *next += 1;
                    *remaining -= p.len() as u64;
                    Poll::Ready(Some(Ok(p.clone())))
                }
                None => Poll::Ready(None),
            },
            Kind::Slice { inner, skip, take } => poll_slice(inner, skip, take, cx),
            Kind::Busy { reader, remaining } => match reader.poll_chunk_settled(cx, *remaining) {
                Poll::Ready(ChunkPoll::Chunk(c)) => {
                    if let Some(r) = remaining {
                        *r = r.saturating_sub(c.len() as u64);
                    }
                    Poll::Ready(Some(Ok(c)))
                }
                Poll::Ready(ChunkPoll::End) => Poll::Ready(None),
                Poll::Ready(ChunkPoll::Failed) => Poll::Ready(Some(Err(BodyError(
                    "backend fetch failed while streaming".into(),
                )))),
                Poll::Pending => Poll::Pending,
            },
            Kind::Disk { reader, remaining } => match reader.poll_chunk(cx) {
                Poll::Ready(Some(Ok(c))) => {
                    *remaining = remaining.saturating_sub(c.len() as u64);
                    Poll::Ready(Some(Ok(c)))
                }
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError(e)))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            Kind::Backend(body) => poll_backend(body, cx),
            Kind::Chain(chain) => poll_chain(chain, cx),
            Kind::Filtered(filtered) => match filtered.poll_chunk(cx) {
                Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(Ok(data))),
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError(e.to_string())))),
                Poll::Ready(None) => {
                    this.kind = Kind::Empty;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            },
        };
        this.account(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.kind_is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.kind_size_hint()
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            let at_end = self.kind_is_end_stream();
            record.finish(at_end);
        }
        if let Some(on_done) = self.on_done.take() {
            on_done.done();
        }
    }
}

impl ResponseBody {
    fn kind_is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Full(b) => b.is_none(),
            Kind::Object { remaining, .. } | Kind::Disk { remaining, .. } => *remaining == 0,
            Kind::Parts { remaining, .. } => *remaining == 0,
            Kind::Slice { take, .. } => *take == 0,
            Kind::Busy { remaining, .. } => *remaining == Some(0),
            Kind::Backend(b) => b.is_end_stream(),
            Kind::Chain(chain) => chain.bodies.iter().all(ResponseBody::kind_is_end_stream),
            // Known only once it gave `None` (then it is `Empty`).
            Kind::Filtered(_) => false,
        }
    }

    fn kind_size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Empty => SizeHint::with_exact(0),
            Kind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Object { remaining, .. } | Kind::Disk { remaining, .. } => {
                SizeHint::with_exact(*remaining)
            }
            Kind::Parts { remaining, .. } => SizeHint::with_exact(*remaining),
            // Exact only when the body under it is known to hold all of it (a range cut
            // from a body of unknown length may end early: `bytes a-b/*`).
            Kind::Slice { inner, skip, take } => match inner.kind_size_hint().exact() {
                Some(n) => SizeHint::with_exact(n.saturating_sub(*skip).min(*take)),
                None => {
                    let mut hint = SizeHint::new();
                    hint.set_upper(*take);
                    hint
                }
            },
            Kind::Busy {
                remaining: Some(r), ..
            } => SizeHint::with_exact(*r),
            Kind::Busy {
                remaining: None, ..
            } => SizeHint::default(),
            Kind::Backend(b) => b.size_hint(),
            Kind::Chain(chain) => chain
                .bodies
                .iter()
                .map(|b| b.kind_size_hint().exact())
                .sum::<Option<u64>>()
                .map_or_else(SizeHint::default, SizeHint::with_exact),
            Kind::Filtered(_) => SizeHint::default(),
        }
    }
}

/// Chunk `i` of an object whose body is in memory.
fn memory_chunk(object: &Object, i: usize) -> Option<&Bytes> {
    match &object.body {
        StoredBody::Memory(chunks) => chunks.get(i),
        StoredBody::Disk(_) => None,
    }
}
