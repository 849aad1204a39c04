//! gzip decoded in bounded steps ([`Gunzip`] as a delivery filter, [`TestGunzip`] checking an
//! origin's gzip as it streams through, [`check`] over a whole body): at most `gzip::OUT`
//! bytes of output per chunk given out, several members one body, a malformed body an error
//! ([`GzipError`]), never delivered or stored as if whole.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use flate2::{Decompress, FlushDecompress, Status};
use http::StatusCode;
use http::header::{self, HeaderMap};

use super::gzip::{OUT, WINDOW_BITS, coding, no_transform, vary_accept_encoding};
use super::handoff::Decoded;
use super::held::{HeldCheck, poll_held};
use super::{BodyFilter, Chunks, Effect, FilterError, Output};
use crate::cache::identity::Identity;
use crate::http::accept_encoding::Coding;
use crate::stats::Counters;

/// Whether [`Gunzip`] decodes a response with these fields: gzip, and not `no-transform`.
fn gunzips(fields: &HeaderMap) -> bool {
    coding(fields) == Some(Coding::Gzip) && !no_transform(fields)
}

/// A malformed gzip body.
#[derive(Debug, thiserror::Error)]
pub enum GzipError {
    #[error("malformed gzip body: {0}")]
    Corrupt(#[from] flate2::DecompressError),
    #[error("gzip body truncated")]
    Truncated,
    #[error("gzip body does not advance")]
    Stalled,
    #[error("gzip body failed before")]
    Failed,
}

/// A gzip decoder over chunks of input, in steps of bounded output. Several members one
/// after another are one body (RFC 1952 §2.2).
struct Inflate {
    d: Decompress,
    /// Input not decoded yet.
    pending: Bytes,
    /// The current member ended (at the start: no input seen yet, so an empty body counts
    /// as whole).
    ended: bool,
    /// Bytes decoded so far, every member.
    decoded: u64,
}

impl Inflate {
    fn new() -> Inflate {
        Inflate {
            d: Decompress::new_gzip(WINDOW_BITS),
            pending: Bytes::new(),
            ended: true,
            decoded: 0,
        }
    }

    /// Decodes pending input into `out` until it holds [`OUT`] bytes or the input is used up.
    fn step(&mut self, out: &mut Vec<u8>) -> Result<(), GzipError> {
        while !self.pending.is_empty() && out.len() < OUT {
            if self.ended {
                self.d = Decompress::new_gzip(WINDOW_BITS);
                self.ended = false;
            }
            if out.capacity() < OUT {
                out.reserve(OUT - out.len());
            }
            let (in_before, out_before) = (self.d.total_in(), out.len());
            let status = self
                .d
                .decompress_vec(&self.pending, out, FlushDecompress::None)?;
            let used = (self.d.total_in() - in_before) as usize;
            self.pending.advance(used.min(self.pending.len()));
            self.decoded += (out.len() - out_before) as u64;
            match status {
                Status::StreamEnd => self.ended = true,
                _ if used == 0 && out.len() == out_before => return Err(GzipError::Stalled),
                _ => {}
            }
        }
        Ok(())
    }

    /// Decodes all of `chunk`, the output thrown away: whether it is well formed so far
    /// (a check of a body passing through; `scratch` is reused from chunk to chunk).
    fn check(&mut self, chunk: Bytes, scratch: &mut Vec<u8>) -> Result<(), GzipError> {
        self.pending = chunk;
        while !self.pending.is_empty() {
            scratch.clear();
            self.step(scratch)?;
        }
        Ok(())
    }

    /// The end of the input: whole only if the last member ended.
    fn finish(&self) -> Result<(), GzipError> {
        if self.ended {
            Ok(())
        } else {
            Err(GzipError::Truncated)
        }
    }
}

/// A filter's answer for a body found malformed: counted, and every later poll fails too.
fn malformed(
    counters: &Counters,
    failed: &mut bool,
    e: GzipError,
) -> Poll<Option<Result<Bytes, FilterError>>> {
    counters.compress_gzip_invalid.inc();
    *failed = true;
    Poll::Ready(Some(Err(e.into())))
}

/// Whether a whole gzip body, given as chunks, decodes (a body read ahead before delivery,
/// VCL's `beresp.do_stream = false`: a malformed one is then a 503, as in Varnish). Counts a
/// malformed one.
pub fn check<'a>(
    chunks: impl IntoIterator<Item = &'a Bytes>,
    counters: &Counters,
) -> Result<(), GzipError> {
    let mut inflate = Inflate::new();
    let mut scratch = Vec::new();
    let checked = chunks
        .into_iter()
        .try_for_each(|chunk| inflate.check(chunk.clone(), &mut scratch))
        .and_then(|()| inflate.finish());
    if checked.is_err() {
        counters.compress_gzip_invalid.inc();
    }
    checked
}

/// Decodes a gzip body for a client that does not take gzip (delivery). A response that is
/// not gzip, or is `no-transform`, passes through as it is.
pub struct Gunzip {
    counters: Arc<Counters>,
    /// The decoder, from `head` on (`None`: passing the body through).
    state: Option<Inflate>,
    done: bool,
    /// The body was found malformed: every later poll fails too.
    failed: bool,
    /// `Vary: Accept-Encoding` added: a client's copy decoded at delivery (another client
    /// gets gzip); not one decoded at fetch (VCL's `beresp.do_gunzip`, an ESI page), which
    /// is stored identity for every client, as Varnish (varnishtest g00007).
    vary: bool,
}

impl Gunzip {
    /// Decoding for a client at delivery.
    pub fn new(counters: Arc<Counters>) -> Gunzip {
        Gunzip {
            counters,
            state: None,
            done: false,
            failed: false,
            vary: true,
        }
    }

    /// Decoding at fetch: what is stored is identity for every client.
    pub fn at_fetch(counters: Arc<Counters>) -> Gunzip {
        Gunzip {
            vary: false,
            ..Gunzip::new(counters)
        }
    }
}

impl BodyFilter for Gunzip {
    fn name(&self) -> &'static str {
        "gunzip"
    }

    fn effect(&self, _: StatusCode, fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: gunzips(fields),
            storable: true,
        }
    }

    /// A stored object's identity (`cache/identity.rs`): its length, and its strong `ETag`
    /// when Shellac made the gzip.
    fn output(&self, fields: &HeaderMap) -> Option<Output> {
        let identity = Identity::of(fields).filter(|_| gunzips(fields))?;
        Some(Output {
            length: identity.length,
            etag: identity.etag,
        })
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        if !gunzips(fields) {
            return;
        }
        fields.remove(header::CONTENT_ENCODING);
        if self.vary {
            vary_accept_encoding(fields);
        }
        self.state = Some(Inflate::new());
        self.counters.compress_gunzip.inc();
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if self.failed {
            return Poll::Ready(Some(Err(GzipError::Failed.into())));
        }
        let Some(inflate) = self.state.as_mut() else {
            return input.poll_chunk(cx);
        };
        loop {
            let mut out = Vec::new();
            if let Err(e) = inflate.step(&mut out) {
                return malformed(&self.counters, &mut self.failed, e);
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Bytes::from(out))));
            }
            if self.done {
                return Poll::Ready(None);
            }
            match input.poll_chunk(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(chunk))) => inflate.pending = chunk,
                Poll::Ready(None) => {
                    self.done = true;
                    if let Err(e) = inflate.finish() {
                        return malformed(&self.counters, &mut self.failed, e);
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}

/// Passes an origin's gzip body through unchanged while decoding it, to fail it when it is
/// malformed (fetch: nothing malformed is stored, and the client's copy is cut rather than
/// ended as if whole). Each chunk is held until the next one is checked, or the end: the
/// last bytes go out only once the body is known whole (so a truncated body with a
/// `Content-Length` still ends short). A response that is not gzip passes through
/// unchecked.
pub struct TestGunzip {
    counters: Arc<Counters>,
    state: Option<Inflate>,
    scratch: Vec<u8>,
    held: Option<Bytes>,
    failed: bool,
    /// Where the decoded length goes once the body ended whole (a fill's).
    record: Option<Arc<Decoded>>,
}

impl TestGunzip {
    pub fn new(counters: Arc<Counters>) -> TestGunzip {
        TestGunzip {
            counters,
            state: None,
            scratch: Vec::new(),
            held: None,
            failed: false,
            record: None,
        }
    }

    /// Leaves the decoded length in `slot` once the body ended whole (the origin's `ETag`
    /// names its gzip, so the identity has none of its own).
    pub fn recording(mut self, slot: Arc<Decoded>) -> TestGunzip {
        self.record = Some(slot);
        self
    }
}

impl BodyFilter for TestGunzip {
    fn name(&self) -> &'static str {
        "testgunzip"
    }

    fn effect(&self, _: StatusCode, _: &HeaderMap) -> Effect {
        Effect::NONE
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        if coding(fields) == Some(Coding::Gzip) {
            vary_accept_encoding(fields);
            self.state = Some(Inflate::new());
            self.counters.compress_gzip_checked.inc();
        }
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if self.failed {
            return Poll::Ready(Some(Err(GzipError::Failed.into())));
        }
        if self.state.is_none() {
            return input.poll_chunk(cx);
        }
        poll_held(cx, input, self)
    }
}

impl HeldCheck for TestGunzip {
    type Error = GzipError;

    fn held(&mut self) -> &mut Option<Bytes> {
        &mut self.held
    }

    fn check(&mut self, chunk: &Bytes) -> Result<(), GzipError> {
        match self.state.as_mut() {
            Some(inflate) => inflate.check(chunk.clone(), &mut self.scratch),
            None => Ok(()),
        }
    }

    fn end(&mut self) -> Result<(), GzipError> {
        let Some(inflate) = self.state.as_ref() else {
            return Ok(());
        };
        inflate.finish()?;
        if let Some(slot) = self.record.take() {
            slot.put(Identity {
                length: inflate.decoded,
                etag: None,
            });
        }
        Ok(())
    }

    fn malformed(&mut self, e: GzipError) -> FilterError {
        self.counters.compress_gzip_invalid.inc();
        self.failed = true;
        e.into()
    }
}
