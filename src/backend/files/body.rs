//! A file's body: byte ranges of an open file read in pieces on tokio's blocking pool
//! (positional reads: one descriptor serves every request for the file at once), with the
//! literal parts of a multipart answer between them. The length was announced from `fstat`
//! before the first byte: a file that shrinks, or changes, while it is read ends the body
//! with an error instead of its last piece (the client's connection is closed; never a body
//! of the wrong length or a mix of two versions delivered as complete). On a connection that
//! sends files, its large parts go out by sendfile(2) instead (`zero_copy.rs`).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::task::JoinHandle;

use super::open::{Opened, Stat};
use super::zero_copy::ZeroCopy;
use crate::backend::error::BoxError;

/// The most read at once.
const PIECE: u64 = 128 * 1024;

/// One part of a body.
pub(crate) enum Part {
    /// Bytes sent as they are (a multipart boundary and its fields).
    Literal(Bytes),
    /// Bytes `start..end` (end exclusive) of the file.
    File { start: u64, end: u64 },
}

/// A body read from an open file.
pub(crate) struct FileBody {
    file: Arc<Opened>,
    /// What the file was when the response head was made.
    stat: Stat,
    parts: VecDeque<Part>,
    pending: Option<JoinHandle<io::Result<Bytes>>>,
    left: u64,
    /// Placeholders instead of bytes, once the session switched it (`zero_copy.rs`).
    zero_copy: Arc<ZeroCopy>,
}

impl FileBody {
    pub fn new(file: Arc<Opened>, stat: Stat, parts: Vec<Part>, zero_copy: Arc<ZeroCopy>) -> Self {
        let left = parts
            .iter()
            .map(|p| match p {
                Part::Literal(b) => b.len() as u64,
                Part::File { start, end } => end.saturating_sub(*start),
            })
            .sum();
        FileBody {
            file,
            stat,
            parts: parts.into(),
            pending: None,
            left,
            zero_copy,
        }
    }
}

/// Reads `len` bytes at `at`; the piece that ends a range is given only if the file is still
/// what it was (`stat`).
fn read_piece(file: &Opened, at: u64, len: u64, last: bool, stat: Stat) -> io::Result<Bytes> {
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let mut filled = 0;
    while filled < buf.len() {
        match file.file.read_at(&mut buf[filled..], at + filled as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while it was sent",
                ));
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if last && Stat::of(&file.file)? != stat {
        return Err(io::Error::other("file changed while it was sent"));
    }
    Ok(Bytes::from(buf))
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if let Some(pending) = this.pending.as_mut() {
                let done = std::task::ready!(Pin::new(pending).poll(cx));
                this.pending = None;
                return Poll::Ready(Some(match done {
                    Ok(Ok(bytes)) => {
                        this.left = this.left.saturating_sub(bytes.len() as u64);
                        Ok(Frame::data(bytes))
                    }
                    Ok(Err(e)) => {
                        this.parts.clear();
                        Err(e.into())
                    }
                    Err(e) => {
                        this.parts.clear();
                        Err(io::Error::other(e).into())
                    }
                }));
            }
            match this.parts.pop_front() {
                None => return Poll::Ready(None),
                Some(Part::Literal(b)) => {
                    this.left = this.left.saturating_sub(b.len() as u64);
                    return Poll::Ready(Some(Ok(Frame::data(b))));
                }
                Some(Part::File { start, end }) if start >= end => continue,
                Some(Part::File { start, end }) => {
                    if let Some((frame, len)) =
                        this.zero_copy.region(&this.file, this.stat, start, end)
                    {
                        if start + len < end {
                            this.parts.push_front(Part::File {
                                start: start + len,
                                end,
                            });
                        }
                        this.left = this.left.saturating_sub(len);
                        return Poll::Ready(Some(Ok(Frame::data(frame))));
                    }
                    let len = (end - start).min(PIECE);
                    let last = start + len == end;
                    if !last {
                        this.parts.push_front(Part::File {
                            start: start + len,
                            end,
                        });
                    }
                    let file = this.file.clone();
                    let stat = this.stat;
                    this.pending = Some(tokio::task::spawn_blocking(move || {
                        read_piece(&file, start, len, last, stat)
                    }));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_none() && self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}
