//! gzip as body filters, as Varnish's `gzip`, `gunzip` and `testgunzip` processors:
//! [`Gzip`] compresses an identity body as it is fetched (what is stored is gzip),
//! [`Gunzip`] decodes a gzip body as it is delivered to a client that does not take gzip,
//! [`TestGunzip`] checks an origin's gzip as it streams through unchanged (what is stored is
//! the origin's bytes, known to decode). Decoding works in bounded steps — at most [`OUT`]
//! bytes of output per chunk given out — so a small body that inflates a thousandfold costs
//! the client's reading pace, never memory. A malformed gzip body (bad header, corrupt data,
//! wrong CRC or length, truncated, bytes after the end that are not another member) fails the
//! body — a fill is abandoned, a client's response cut — and is counted
//! (`compress_gzip_invalid`); it is never stored or delivered as if whole.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};

pub use super::gunzip::{Gunzip, GzipError, TestGunzip, check};
pub use super::handoff::Decoded;
use super::{BodyFilter, Chunks, Effect, FilterError};
use crate::cache::identity::{self, Identity};
use crate::http::accept_encoding::Coding;
pub use crate::http::transform::vary_accept_encoding;
use crate::stats::Counters;

/// Output bytes given out per chunk, at most (decoding), or gathered before one is given
/// out (encoding: fewer when the input has to wait).
pub const OUT: usize = 32 * 1024;

/// zlib's window bits for a gzip stream (15: the 32 KB window; the gzip wrapper is asked for
/// by the constructors).
pub(super) const WINDOW_BITS: u8 = 15;

/// The coding a response's `Content-Encoding` says its body is in (`None`: one Shellac does
/// not handle, or several).
pub fn coding(fields: &HeaderMap) -> Option<Coding> {
    let mut lines = fields.get_all(header::CONTENT_ENCODING).iter();
    match (lines.next(), lines.next()) {
        (None, _) => Some(Coding::Identity),
        (Some(v), None) => Coding::from_content_encoding(v.as_bytes()),
        _ => None,
    }
}

/// `Cache-Control: no-transform` (RFC 9110 §7.7): an intermediary must not change the body.
pub fn no_transform(fields: &HeaderMap) -> bool {
    crate::http::cache_control::no_transform(
        fields
            .get_all(header::CACHE_CONTROL)
            .iter()
            .map(HeaderValue::as_bytes),
    )
}

/// Which responses [`Gzip`] compresses: in an identity coding, not `no-transform` (the
/// caller chose it for a 200 of a compressible type and length).
fn gzips(fields: &HeaderMap) -> bool {
    coding(fields) == Some(Coding::Identity) && !no_transform(fields)
}

/// Compresses an identity body into gzip (fetch: stored compressed). The caller decides
/// from status, type and length that it should (`proxy/coding.rs`); the filter itself
/// passes through a response that is not identity or is `no-transform`.
pub struct Gzip {
    level: u32,
    counters: Arc<Counters>,
    /// The compressor, from `head` on (`None`: passing the body through).
    state: Option<Compress>,
    done: bool,
    out: Vec<u8>,
    /// Where the identity's length goes at the end (a fill's), and its strong `ETag`.
    record: Option<(Arc<Decoded>, Option<HeaderValue>)>,
}

impl Gzip {
    pub fn new(level: u32, counters: Arc<Counters>) -> Gzip {
        Gzip {
            level: level.clamp(1, 9),
            counters,
            state: None,
            done: false,
            out: Vec::new(),
            record: None,
        }
    }

    /// Leaves the identity's length and strong `ETag` in `slot` once the body ended.
    pub fn recording(mut self, slot: Arc<Decoded>) -> Gzip {
        self.record = Some((slot, None));
        self
    }

    /// Compresses `input` (all of it) into `self.out`; with `finish`, ends the stream.
    fn deflate(&mut self, mut input: &[u8], finish: bool) -> Result<(), FilterError> {
        let Some(c) = self.state.as_mut() else {
            return Ok(());
        };
        let flush = if finish {
            FlushCompress::Finish
        } else {
            FlushCompress::None
        };
        loop {
            if self.out.capacity() - self.out.len() < 1024 {
                self.out.reserve((input.len() / 2).clamp(4096, OUT));
            }
            let before = c.total_in();
            let status = c.compress_vec(input, &mut self.out, flush)?;
            let used = (c.total_in() - before) as usize;
            input = &input[used.min(input.len())..];
            match status {
                Status::StreamEnd => return Ok(()),
                _ if input.is_empty() && !finish => return Ok(()),
                _ => {}
            }
        }
    }

    fn take_out(&mut self) -> Bytes {
        let out = std::mem::take(&mut self.out);
        self.counters.compress_gzip_bytes_out.add(out.len() as u64);
        Bytes::from(out)
    }
}

impl BodyFilter for Gzip {
    fn name(&self) -> &'static str {
        "gzip"
    }

    fn effect(&self, _: StatusCode, fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: gzips(fields),
            storable: true,
        }
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        if !gzips(fields) {
            return;
        }
        if let Some((_, etag)) = self.record.as_mut() {
            *etag = fields
                .get(header::ETAG)
                .filter(|e| identity::strong(e.as_bytes()))
                .cloned();
        }
        fields.remove(header::CONTENT_ENCODING);
        fields.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        vary_accept_encoding(fields);
        self.state = Some(Compress::new_gzip(
            Compression::new(self.level),
            WINDOW_BITS,
        ));
        self.counters.compress_gzip.inc();
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if self.state.is_none() {
            return input.poll_chunk(cx);
        }
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match input.poll_chunk(cx) {
                // The input waits: what is compressed so far goes out meanwhile.
                Poll::Pending if self.out.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready(Some(Ok(self.take_out()))),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(chunk))) => {
                    self.counters.compress_gzip_bytes_in.add(chunk.len() as u64);
                    if let Err(e) = self.deflate(&chunk, false) {
                        return Poll::Ready(Some(Err(e)));
                    }
                    if self.out.len() >= OUT {
                        return Poll::Ready(Some(Ok(self.take_out())));
                    }
                }
                Poll::Ready(None) => {
                    self.done = true;
                    if let Err(e) = self.deflate(&[], true) {
                        return Poll::Ready(Some(Err(e)));
                    }
                    if let (Some((slot, etag)), Some(c)) = (self.record.take(), &self.state) {
                        slot.put(Identity {
                            length: c.total_in(),
                            etag,
                        });
                    }
                    return Poll::Ready(Some(Ok(self.take_out())));
                }
            }
        }
    }
}
