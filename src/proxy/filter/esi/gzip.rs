//! The assembled page gzipped on the fly for a client that takes gzip (issue 29, "ESI +
//! compression"). A page is stored identity (its program is over those bytes) and its
//! fragments are spliced as identity bytes, whatever their stored coding; this filter, after
//! the assembly in the delivery chain, compresses what the assembly gives out. Whenever the
//! assembly has to wait (a fragment not there yet) what was compressed so far is flushed
//! (zlib's sync flush), so the page's first bytes still go out before its slow fragments.
//! An identity client gets identity; both get `Vary: Accept-Encoding` (the page could have
//! been sent either way). A page marked `no-transform` is sent as it is.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};

use super::super::gzip::{OUT, coding, no_transform, vary_accept_encoding};
use super::super::{BodyFilter, Chunks, Effect, FilterError};
use crate::http::accept_encoding::Coding;
use crate::stats::Counters;

/// zlib's window bits for a gzip stream (the 32 KB window).
const WINDOW_BITS: u8 = 15;

/// The page's gzip for one client.
pub struct GzipPage {
    level: u32,
    counters: Arc<Counters>,
    /// The client takes gzip.
    wanted: bool,
    /// The compressor, from `head` on (`None`: the page passes as it is).
    state: Option<Compress>,
    /// Input given to the compressor since its last flush.
    unflushed: bool,
    done: bool,
    out: Vec<u8>,
}

impl GzipPage {
    /// For a client that takes gzip (`wanted`) or not, at `compression.gzip_level`.
    pub fn new(level: u32, counters: Arc<Counters>, wanted: bool) -> GzipPage {
        GzipPage {
            level: level.clamp(1, 9),
            counters,
            wanted,
            state: None,
            unflushed: false,
            done: false,
            out: Vec::new(),
        }
    }

    fn gzips(&self, fields: &HeaderMap) -> bool {
        self.wanted && coding(fields) == Some(Coding::Identity) && !no_transform(fields)
    }

    /// Compresses all of `input` into `self.out`, flushing as `flush` says.
    fn deflate(&mut self, mut input: &[u8], flush: FlushCompress) -> Result<(), FilterError> {
        let Some(c) = self.state.as_mut() else {
            return Ok(());
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
                // A flush is complete once zlib left room over in the output.
                _ if input.is_empty()
                    && (flush == FlushCompress::None || self.out.len() < self.out.capacity()) =>
                {
                    return Ok(());
                }
                _ => {}
            }
        }
    }

    /// A whole page's bytes gzipped at once, laid out as the filter lays out an assembled
    /// page whose pieces were all there (Varnish's ESI gzip, so its varnishtest lengths hold):
    /// what `plain.rs` stores for a marked page that holds no ESI.
    pub fn whole(
        level: u32,
        chunks: &[Bytes],
        counters: Arc<Counters>,
    ) -> Result<Vec<u8>, FilterError> {
        let mut g = GzipPage::new(level, counters, true);
        g.state = Some(Compress::new_gzip(Compression::new(g.level), WINDOW_BITS));
        g.deflate(&[], FlushCompress::Full)?;
        for c in chunks {
            g.deflate(c, FlushCompress::None)?;
        }
        if chunks.iter().any(|c| !c.is_empty()) {
            g.deflate(&[], FlushCompress::Sync)?;
        }
        g.deflate(&[], FlushCompress::Finish)?;
        Ok(std::mem::take(&mut g.out))
    }

    fn take_out(&mut self) -> Bytes {
        let out = std::mem::take(&mut self.out);
        self.counters.compress_gzip_bytes_out.add(out.len() as u64);
        Bytes::from(out)
    }
}

impl BodyFilter for GzipPage {
    fn name(&self) -> &'static str {
        "esi-gzip"
    }

    fn effect(&self, _: StatusCode, fields: &HeaderMap) -> Effect {
        Effect {
            changes_length: self.gzips(fields),
            storable: true,
        }
    }

    fn head(&mut self, fields: &mut HeaderMap) {
        if no_transform(fields) {
            return;
        }
        vary_accept_encoding(fields);
        if !self.gzips(fields) {
            return;
        }
        fields.remove(header::CONTENT_ENCODING);
        fields.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        self.state = Some(Compress::new_gzip(
            Compression::new(self.level),
            WINDOW_BITS,
        ));
        self.counters.compress_gzip.inc();
        // The stream laid out as Varnish's ESI gzip lays it out (so its varnishtest lengths
        // hold): an empty stored block after the header, each piece ending on a sync flush,
        // an empty final block. A few bytes per page.
        if let Err(e) = self.deflate(&[], FlushCompress::Full) {
            tracing::warn!(error = %e, "gzip of an ESI page failed at its start");
            self.state = None;
        }
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
                Poll::Pending => {
                    // The assembly waits for a fragment: what it gave so far goes out now.
                    if self.unflushed {
                        self.unflushed = false;
                        if let Err(e) = self.deflate(&[], FlushCompress::Sync) {
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                    if self.out.is_empty() {
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(Ok(self.take_out())));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(chunk))) => {
                    self.counters.compress_gzip_bytes_in.add(chunk.len() as u64);
                    self.unflushed = true;
                    if let Err(e) = self.deflate(&chunk, FlushCompress::None) {
                        return Poll::Ready(Some(Err(e)));
                    }
                    if self.out.len() >= OUT {
                        return Poll::Ready(Some(Ok(self.take_out())));
                    }
                }
                Poll::Ready(None) => {
                    self.done = true;
                    if self.unflushed
                        && let Err(e) = self.deflate(&[], FlushCompress::Sync)
                    {
                        return Poll::Ready(Some(Err(e)));
                    }
                    if let Err(e) = self.deflate(&[], FlushCompress::Finish) {
                        return Poll::Ready(Some(Err(e)));
                    }
                    return Poll::Ready(Some(Ok(self.take_out())));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::super::Source;
    use super::*;

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(data)
            .read_to_end(&mut out)
            .expect("valid gzip");
        out
    }

    #[tokio::test]
    async fn a_gzip_client_gets_gzip_and_an_identity_client_identity() {
        let body: Vec<Bytes> = ["<p>", "a fragment", "</p>"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        for wanted in [true, false] {
            let mut filter = GzipPage::new(6, Arc::new(Counters::default()), wanted);
            let mut fields = HeaderMap::new();
            assert_eq!(
                filter.effect(StatusCode::OK, &fields).changes_length,
                wanted
            );
            filter.head(&mut fields);
            assert_eq!(fields[header::VARY], "Accept-Encoding");
            assert_eq!(fields.contains_key(header::CONTENT_ENCODING), wanted);
            let mut source = Source::new(body.clone());
            let mut got = Vec::new();
            while let Some(chunk) =
                std::future::poll_fn(|cx| filter.poll_chunk(cx, &mut source)).await
            {
                got.extend_from_slice(&chunk.expect("chunk"));
            }
            let got = if wanted { gunzip(&got) } else { got };
            assert_eq!(got, b"<p>a fragment</p>");
        }
    }

    /// The input waiting (a fragment not there yet): what came before it goes out, whole
    /// enough to decode.
    #[tokio::test]
    async fn what_came_before_a_wait_is_flushed() {
        struct Waits(Option<Bytes>);
        impl Chunks for Waits {
            fn poll_chunk(
                &mut self,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Bytes, FilterError>>> {
                match self.0.take() {
                    Some(b) => Poll::Ready(Some(Ok(b))),
                    None => Poll::Pending,
                }
            }
        }
        let mut filter = GzipPage::new(6, Arc::new(Counters::default()), true);
        filter.head(&mut HeaderMap::new());
        let mut input = Waits(Some(Bytes::from_static(b"<html>before")));
        let first = std::future::poll_fn(|cx| Poll::Ready(filter.poll_chunk(cx, &mut input)))
            .await
            .map(|c| c.map(|c| c.map(|c| c.to_vec())));
        let Poll::Ready(Some(Ok(first))) = first else {
            panic!("the first bytes wait: {first:?}");
        };
        let mut out = Vec::new();
        let mut d = flate2::read::GzDecoder::new(&first[..]);
        let _ = d.read_to_end(&mut out);
        assert_eq!(out, b"<html>before");
    }
}
