//! A body as a stream of chunks: what a body filter reads from and gives out (`filter/`), and
//! what the fill stores.

use std::task::{Context, Poll};

use bytes::Bytes;

/// Why a body could not go on through a filter; the body fails (a stored fill is abandoned, a
/// client's response is cut).
pub type FilterError = Box<dyn std::error::Error + Send + Sync>;

/// Where a filter reads its input from: the body, or the filter before it.
pub trait Chunks {
    /// The next chunk; `None` at the end.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, FilterError>>>;
}
