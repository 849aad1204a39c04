//! What one body filter is: the trait ([`BodyFilter`]) and what it says from the head about
//! its output ([`Effect`], [`Output`]); a [`Chain`](super::Chain) runs filters in order.

use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};

use crate::proxy::chunks::{Chunks, FilterError};

/// What a filter does to the body, said once from the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Effect {
    /// The body after the filter may be longer or shorter than before it.
    pub changes_length: bool,
    /// The filter's output may be stored (false: the response is delivered, never stored).
    pub storable: bool,
}

impl Effect {
    /// Same length, storable: what an empty chain does.
    pub const NONE: Effect = Effect {
        changes_length: false,
        storable: true,
    };
}

/// A filter's output known from the head ([`BodyFilter::output`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Its length in bytes.
    pub length: u64,
    /// The strong `ETag` naming it (`None`: the input's, weakened).
    pub etag: Option<HeaderValue>,
}

/// One body filter. `Sync` because a request's state is (a filter that holds futures, as an
/// include fetcher would, keeps them behind a `Mutex`).
pub trait BodyFilter: Send + Sync {
    /// Its name, for logs and the access log.
    fn name(&self) -> &'static str;

    /// What it does to the body of a response with this head; asked before the response is
    /// built (delivery answers Range from it).
    fn effect(&self, status: StatusCode, fields: &HeaderMap) -> Effect;

    /// What it makes of the body of a response with these fields when it changes its length
    /// and knows the result up front (a gunzip of a body whose decoded length was stored):
    /// the length, and the strong `ETag` that names those bytes, if any. `None`: unknown
    /// until the end.
    fn output(&self, fields: &HeaderMap) -> Option<Output> {
        let _ = fields;
        None
    }

    /// Changes the fields of the response it filters (a `Content-Encoding`, say), once,
    /// before any chunk; the length-related consequences of its [`Effect`] are the chain's.
    fn head(&mut self, fields: &mut HeaderMap) {
        let _ = fields;
    }

    /// The next chunk of output, pulling input from `input` as needed; `None` once it has no
    /// more (after `input` ended, whatever it still held flushed).
    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn Chunks,
    ) -> Poll<Option<Result<Bytes, FilterError>>>;
}
