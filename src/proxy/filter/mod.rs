//! Body filters: a stage between fetch and store (fetch filters, Varnish's VFPs) and one
//! between store and client (delivery filters, Varnish's VDPs, nginx's output filters,
//! Pingora's `response_body_filter`).
//!
//! A filter says from the response head what it will do ([`BodyFilter::effect`]: whether it
//! changes the body's length, whether its output may be stored), changes the fields of the
//! response it filters once ([`BodyFilter::head`]), then sees the body as a stream of chunks
//! it pulls from the stage before it ([`BodyFilter::poll_chunk`]: pull as many as it needs,
//! give out one, hold state across calls, wait on its own futures). A
//! [`Chain`] runs filters in order; what a length change means for the fields is done once,
//! by the chain: `Content-Length` goes (the body is sent chunked or until close), a strong
//! `ETag` is weakened (RFC 9110 §8.8.3: the bytes are not the ones it named), and at delivery
//! `Accept-Ranges` goes with Range itself (`deliver.rs`).
//!
//! Where they run: the fetch chain (`Filters::fetch`) over every fetched body with a
//! representation (not a 206 piece, not a 304's refresh), before it is stored and streamed:
//! what is stored is its output, and a filter that says its output may not be stored makes
//! the response uncacheable (`NoCacheReason::Filter`). The delivery chain
//! (`Filters::deliver`) over a stored object, per client (`deliver.rs`). An empty chain costs
//! a length check: no allocation, no dynamic call, the body types unchanged.

mod body_filter;
mod decode;
mod deliver;
pub(crate) mod esi;
pub mod flv;
mod gunzip;
pub mod gzip;
mod handoff;
mod held;
pub use body_filter::{BodyFilter, Effect, Output};
pub use decode::{Decode, TestDecode};
#[cfg(test)]
mod gzip_tests;
pub mod mp4;
mod mp4_gather;
pub mod mp4_precut;
pub mod mp4_source;
mod seek;
#[cfg(test)]
pub(super) mod tests;

use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap};
use http_body::Body;

use super::body::ResponseBody;
pub use super::chunks::{Chunks, FilterError};
use crate::backend::BackendBody;
use crate::http::accept_encoding::Accepts;
pub(crate) use crate::http::transform::weaken_etag;

pub use deliver::object;
pub(super) use deliver::streamed;

/// Filters run in order over one body. Empty by default: a `Vec` that allocates nothing.
#[derive(Default)]
pub struct Chain {
    filters: Vec<Box<dyn BodyFilter>>,
}

/// The chains of one request: over what is fetched, and over what is delivered.
#[derive(Default)]
pub struct Filters {
    pub fetch: Chain,
    pub deliver: Chain,
    /// Where the ESI fetch filter leaves the page's program for the fill (`esi/parse.rs`):
    /// `Some` once a policy turned ESI on for the response.
    pub esi: Option<std::sync::Arc<handoff::Slot>>,
    /// Where a fill's gzip filter leaves the identity's length and `ETag` for the stored
    /// object (`handoff::Decoded`): `Some` once one records.
    pub identity: Option<std::sync::Arc<handoff::Decoded>>,
    /// What the request settled about content codings (`proxy/coding.rs`).
    pub coding: Negotiated,
}

/// What one request settled about codings, besides its chains (kept in `Txn::filters`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Negotiated {
    /// What the client takes: read from its `Accept-Encoding` as it came, before the
    /// policy normalised it for the cache key (`proxy/coding.rs`).
    pub accepts: Accepts,
    /// The policy's word on gzipping this response at fetch (VCL `beresp.do_gzip`, a rule's
    /// `compress`): `None` leaves it to `[compression]`.
    pub gzip: Option<bool>,
    /// VCL `beresp.do_gunzip`: a gzip response is decoded at fetch and stored identity.
    pub gunzip: bool,
    /// The delivery chain decodes the body for this client (VCL reads it in
    /// `resp.filters`: `gunzip`).
    pub decoded: bool,
}

impl Chain {
    /// Adds `filter` after those already in the chain.
    pub fn push(&mut self, filter: Box<dyn BodyFilter>) {
        self.filters.push(filter);
    }

    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Whether a filter of this name is in the chain.
    pub fn has(&self, name: &str) -> bool {
        self.filters.iter().any(|f| f.name() == name)
    }

    /// What the filters do together to the body of a response with this head.
    pub fn effect(&self, status: StatusCode, fields: &HeaderMap) -> Effect {
        let mut effect = Effect::NONE;
        for f in &self.filters {
            let e = f.effect(status, fields);
            effect.changes_length |= e.changes_length;
            effect.storable &= e.storable;
        }
        effect
    }

    /// The chain's output for a response with this head when its one length-changing filter
    /// knows it ([`BodyFilter::output`]); `None` when no filter changes the length, or the
    /// length is unknown until the end.
    pub fn output(&self, status: StatusCode, fields: &HeaderMap) -> Option<Output> {
        let mut changing = self
            .filters
            .iter()
            .filter(|f| f.effect(status, fields).changes_length);
        match (changing.next(), changing.next()) {
            (Some(only), None) => only.output(fields),
            _ => None,
        }
    }

    /// Every filter's `head` in order over `fields`; with `effect` a length change, then
    /// `Content-Length` goes and a strong `ETag` is weakened.
    pub fn head(&mut self, effect: Effect, fields: &mut HeaderMap) {
        for f in &mut self.filters {
            f.head(fields);
        }
        if effect.changes_length {
            fields.remove(header::CONTENT_LENGTH);
            weaken_etag(fields);
        }
    }

    /// The chain over `source`.
    pub fn over<S: Chunks>(self, source: S) -> Filtered<S> {
        Filtered {
            filters: self.filters,
            source,
        }
    }
}

/// A body read through a chain of filters.
pub struct Filtered<S> {
    filters: Vec<Box<dyn BodyFilter>>,
    source: S,
}

/// One stage of a chain: the last filter of `filters`, reading from the ones before it.
struct Stage<'a> {
    filters: &'a mut [Box<dyn BodyFilter>],
    source: &'a mut dyn Chunks,
}

impl Chunks for Stage<'_> {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        match self.filters.split_last_mut() {
            None => self.source.poll_chunk(cx),
            Some((last, before)) => last.poll_chunk(
                cx,
                &mut Stage {
                    filters: before,
                    source: &mut *self.source,
                },
            ),
        }
    }
}

impl<S: Chunks> Chunks for Filtered<S> {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        Stage {
            filters: &mut self.filters,
            source: &mut self.source,
        }
        .poll_chunk(cx)
    }
}

/// A body's data frames as chunks (trailers are not forwarded: Shellac re-frames bodies).
fn poll_data<B>(body: &mut B, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<FilterError>,
{
    loop {
        match std::pin::Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => return Poll::Ready(Some(Ok(data))),
                Err(_) => continue,
            },
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        }
    }
}

impl Chunks for BackendBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        poll_data(self, cx)
    }
}

impl Chunks for ResponseBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>> {
        poll_data(self, cx)
    }
}

/// Whether a response's body is a whole representation a fetch chain may filter: not a 206
/// piece or a 416 (`combine.rs` joins pieces and answers ranges as sent), not a refresh by
/// 304 (its body is the stored one), not a status without content.
fn filterable(status: StatusCode, refreshed: bool) -> bool {
    !refreshed
        && status != StatusCode::PARTIAL_CONTENT
        && status != StatusCode::RANGE_NOT_SATISFIABLE
        && status != StatusCode::NO_CONTENT
        && status != StatusCode::NOT_MODIFIED
        && !status.is_informational()
}

/// The fetch chain's head over a fetched response (`refreshed`: a 304 that refreshes the
/// stored copy): its fields as the filters leave them and what the chain does. A response
/// the chain may not filter leaves it empty.
pub(super) fn fetch_head(
    chain: &mut Chain,
    status: StatusCode,
    fields: &mut HeaderMap,
    refreshed: bool,
) -> Effect {
    if chain.is_empty() {
        return Effect::NONE;
    }
    if !filterable(status, refreshed) {
        *chain = Chain::default();
        return Effect::NONE;
    }
    let effect = chain.effect(status, fields);
    chain.head(effect, fields);
    effect
}

/// A fetched body as it is sent on (pass, uncacheable): through `chain` when it has filters.
pub(super) fn fetched(body: BackendBody, chain: Chain) -> ResponseBody {
    let body = ResponseBody::backend(body);
    if chain.is_empty() {
        body
    } else {
        ResponseBody::filtered(chain.over(body))
    }
}
