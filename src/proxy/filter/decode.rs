//! A `br` or `zstd` body decoded for a client that does not take it (issue 29): an origin
//! that answered in one of them although the fill asked for gzip (its copy is stored per
//! class of client, `proxy/coding.rs`), read by a client — or an ESI include, which splices
//! identity bytes — without it. Streaming, in steps of at most [`OUT`] bytes of output, so a
//! body that inflates a thousandfold costs the client's reading pace, not memory; zstd
//! frames within the 8 MB window RFC 9659 allows on the web. A malformed or truncated body
//! fails the response (it is cut, never ended as if whole; counter `compress_decode_invalid`).
//! [`TestDecode`] checks an origin's br or zstd body a fill stores as it came, as
//! `TestGunzip` checks its gzip: nothing malformed is stored.

use std::sync::Arc;
use std::task::{Context, Poll};

use brotli::{BrotliDecompressStream, BrotliResult, BrotliState, HeapAlloc, HuffmanCode};
use bytes::{Buf, Bytes};
use http::StatusCode;
use http::header::{self, HeaderMap};

use super::gzip::{OUT, coding, no_transform, vary_accept_encoding};
use super::held::{HeldCheck, poll_held};
use super::{BodyFilter, Chunks, Effect, FilterError};
use crate::http::accept_encoding::Coding;
use crate::stats::Counters;

/// The largest zstd window decoded (2^23: 8 MB, RFC 9659).
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// A malformed br or zstd body.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed {0} body")]
    Corrupt(&'static str),
    #[error("{0} body truncated")]
    Truncated(&'static str),
    #[error("{0} body: data after its end")]
    Trailing(&'static str),
}

type BrState = BrotliState<HeapAlloc<u8>, HeapAlloc<u32>, HeapAlloc<HuffmanCode>>;

enum Decoder {
    Br(Box<BrState>),
    Zstd(Box<zstd::stream::raw::Decoder<'static>>),
}

impl Decoder {
    fn new(coding: Coding) -> Option<Decoder> {
        match coding {
            Coding::Br => Some(Decoder::Br(Box::new(BrotliState::new(
                HeapAlloc::new(0),
                HeapAlloc::new(0),
                HeapAlloc::new(HuffmanCode::default()),
            )))),
            Coding::Zstd => {
                let mut d = zstd::stream::raw::Decoder::new().ok()?;
                use zstd::stream::raw::DParameter;
                d.set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
                    .ok()?;
                Some(Decoder::Zstd(Box::new(d)))
            }
            Coding::Gzip | Coding::Identity => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Decoder::Br(_) => "br",
            Decoder::Zstd(_) => "zstd",
        }
    }

    /// Decodes from `input` into `out`: (input consumed, output produced, the stream ended).
    fn step(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize, bool), DecodeError> {
        match self {
            Decoder::Br(state) => {
                let (mut avail_in, mut in_off) = (input.len(), 0);
                let (mut avail_out, mut out_off, mut total) = (out.len(), 0, 0);
                let result = BrotliDecompressStream(
                    &mut avail_in,
                    &mut in_off,
                    input,
                    &mut avail_out,
                    &mut out_off,
                    out,
                    &mut total,
                    state,
                );
                match result {
                    BrotliResult::ResultFailure => Err(DecodeError::Corrupt("br")),
                    BrotliResult::ResultSuccess => Ok((in_off, out_off, true)),
                    BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => {
                        Ok((in_off, out_off, false))
                    }
                }
            }
            Decoder::Zstd(d) => {
                use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
                let mut inb = InBuffer::around(input);
                let mut outb = OutBuffer::around(out);
                let hint = d
                    .run(&mut inb, &mut outb)
                    .map_err(|_| DecodeError::Corrupt("zstd"))?;
                Ok((inb.pos(), outb.pos(), hint == 0))
            }
        }
    }
}

/// The coding a body in `fields` is decoded from: br or zstd, not `no-transform`.
pub fn decodes(fields: &HeaderMap) -> Option<Coding> {
    coding(fields)
        .filter(|c| matches!(c, Coding::Br | Coding::Zstd))
        .filter(|_| !no_transform(fields))
}

/// Decodes a br or zstd body for a client that does not take it; any other passes as it is.
pub struct Decode {
    counters: Arc<Counters>,
    state: Option<Decoder>,
    pending: Bytes,
    /// The stream's end was decoded (a zstd body may hold further frames).
    ended: bool,
    /// The input ended.
    done: bool,
    failed: bool,
}

impl Decode {
    pub fn new(counters: Arc<Counters>) -> Decode {
        Decode {
            counters,
            state: None,
            pending: Bytes::new(),
            ended: false,
            done: false,
            failed: false,
        }
    }

    fn fail(&mut self, e: DecodeError) -> Poll<Option<Result<Bytes, FilterError>>> {
        self.counters.compress_decode_invalid.inc();
        self.failed = true;
        Poll::Ready(Some(Err(e.into())))
    }
}

impl BodyFilter for Decode {
    fn name(&self) -> &'static str {
        "decode"
    }

    fn effect(&self, _: StatusCode, fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: decodes(fields).is_some(),
            storable: true,
        }
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        let Some(decoder) = decodes(fields).and_then(Decoder::new) else {
            return;
        };
        fields.remove(header::CONTENT_ENCODING);
        vary_accept_encoding(fields);
        self.state = Some(decoder);
        self.counters.compress_decode.inc();
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if self.failed {
            return Poll::Ready(Some(Err("decoding failed before".into())));
        }
        if self.state.is_none() {
            return input.poll_chunk(cx);
        }
        loop {
            let Some(decoder) = self.state.as_mut() else {
                return Poll::Ready(None);
            };
            let name = decoder.name();
            // Input not decoded yet, or output the decoder may still hold.
            if !self.pending.is_empty() || !self.ended {
                let mut out = vec![0u8; OUT];
                let (used, made, end) = match decoder.step(&self.pending, &mut out) {
                    Ok(s) => s,
                    Err(e) => return self.fail(e),
                };
                self.pending.advance(used);
                self.ended = end;
                if made > 0 {
                    out.truncate(made);
                    return Poll::Ready(Some(Ok(Bytes::from(out))));
                }
                if used > 0 {
                    continue;
                }
                if !self.pending.is_empty() {
                    return self.fail(DecodeError::Corrupt(name));
                }
            }
            if self.done {
                if !self.ended {
                    return self.fail(DecodeError::Truncated(name));
                }
                return Poll::Ready(None);
            }
            match input.poll_chunk(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(chunk))) if chunk.is_empty() => {}
                Poll::Ready(Some(Ok(chunk))) => {
                    if self.ended {
                        // A br stream is one; zstd frames may follow one another.
                        if name == "br" {
                            return self.fail(DecodeError::Trailing(name));
                        }
                        self.ended = false;
                    }
                    self.pending = chunk;
                }
                Poll::Ready(None) => self.done = true,
            }
        }
    }
}

/// Passes an origin's br or zstd body through unchanged while decoding it, to fail it when
/// it is malformed (a fill's: nothing malformed is stored, and the client's copy is cut
/// rather than ended as if whole; counters `compress_decode_checked`,
/// `compress_decode_invalid`). Each chunk is held until the next one is checked, or the end:
/// the last bytes go out only once the body is known whole, so a truncated body with a
/// `Content-Length` still ends short. Any other body passes through unchecked.
pub struct TestDecode {
    counters: Arc<Counters>,
    state: Option<Decoder>,
    scratch: Vec<u8>,
    held: Option<Bytes>,
    /// The stream's end was decoded (a zstd body may hold further frames).
    ended: bool,
    failed: bool,
}

impl TestDecode {
    pub fn new(counters: Arc<Counters>) -> TestDecode {
        TestDecode {
            counters,
            state: None,
            scratch: Vec::new(),
            held: None,
            ended: false,
            failed: false,
        }
    }
}

impl HeldCheck for TestDecode {
    type Error = DecodeError;

    fn held(&mut self) -> &mut Option<Bytes> {
        &mut self.held
    }

    /// Decodes `chunk` whole into the scratch buffer (the output is dropped).
    fn check(&mut self, chunk: &Bytes) -> Result<(), DecodeError> {
        let mut chunk: &[u8] = chunk;
        let Some(decoder) = self.state.as_mut() else {
            return Ok(());
        };
        let name = decoder.name();
        self.scratch.resize(OUT, 0);
        loop {
            if chunk.is_empty() {
                return Ok(());
            }
            if self.ended {
                // A br stream is one; zstd frames may follow one another.
                if name == "br" {
                    return Err(DecodeError::Trailing(name));
                }
                self.ended = false;
            }
            let (used, made, end) = decoder.step(chunk, &mut self.scratch)?;
            chunk = &chunk[used..];
            self.ended = end;
            if used == 0 && made == 0 && !end {
                return Err(DecodeError::Corrupt(name));
            }
        }
    }

    /// The input ended: whatever output the decoder still holds, then whether the stream
    /// ended.
    fn end(&mut self) -> Result<(), DecodeError> {
        let Some(decoder) = self.state.as_mut() else {
            return Ok(());
        };
        let name = decoder.name();
        while !self.ended {
            let (_, made, end) = decoder.step(&[], &mut self.scratch)?;
            self.ended = end;
            if made == 0 && !end {
                return Err(DecodeError::Truncated(name));
            }
        }
        Ok(())
    }

    fn malformed(&mut self, e: DecodeError) -> FilterError {
        self.counters.compress_decode_invalid.inc();
        self.failed = true;
        e.into()
    }
}

impl BodyFilter for TestDecode {
    fn name(&self) -> &'static str {
        "testdecode"
    }

    fn effect(&self, _: StatusCode, _: &HeaderMap) -> Effect {
        Effect::NONE
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        if let Some(decoder) = decodes(fields).and_then(Decoder::new) {
            vary_accept_encoding(fields);
            self.state = Some(decoder);
            self.counters.compress_decode_checked.inc();
        }
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>> {
        if self.failed {
            return Poll::Ready(Some(Err("decoding failed before".into())));
        }
        if self.state.is_none() {
            return input.poll_chunk(cx);
        }
        poll_held(cx, input, self)
    }
}
